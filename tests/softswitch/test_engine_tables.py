"""Table API of the contract and BMv2 match semantics for each match kind."""

import pytest

from softswitch import Entry, Switch, SwitchError
from tests.p4 import kit
from tests.p4.kit import assign, extract, field, rt

# key header: a (8) b (16) c (32), result: which entry matched
FIELDS = [("a", 8), ("b", 16), ("c", 32)]


def program(kinds: dict, size: int = 8) -> dict:
    """One table `t` keyed on k.a/k.b/k.c with the given match kinds; set(v) writes r.v."""
    p = kit.Program()
    p.header("k", FIELDS)
    p.header("r", [("v", 8)])
    p.state("start", [extract("k"), extract("r")])
    p.action("set", [assign(field("r", "v"), rt(0)),
                     assign(field("standard_metadata", "egress_spec"), kit.hexstr(1))],
             [("v", 8)])
    p.action("miss", [assign(field("r", "v"), kit.hexstr(0xEE)),
                      assign(field("standard_metadata", "egress_spec"), kit.hexstr(1))])
    key = [{"match_type": kind, "target": ["k", f], "mask": None, "name": f"k.{f}"}
           for f, kind in kinds.items()]
    p.table("ingress", "t", key, ["set", "miss"], default="miss", size=size,
            with_counters=True)
    return p.json()


def run(sw, a=0, b=0, c=0) -> int:
    pkt = bytes([a]) + b.to_bytes(2, "big") + c.to_bytes(4, "big") + b"\x00"
    [(port, out)] = sw.process(0, pkt)
    return out[-1]


def make(kinds, **kw):
    sw = Switch()
    sw.load(program(kinds, **kw))
    return sw, sw.tables["t"]


def test_exact_insert_modify_delete_and_errors():
    sw, t = make({"a": "exact", "b": "exact"}, size=2)
    assert t.match_fields == [("k.a", "exact", 8), ("k.b", "exact", 16)]
    assert t.action_names == ["set", "miss"] and t.default == ("miss", [])
    t.insert(Entry((1, 2), "set", [7]))
    assert run(sw, 1, 2) == 7 and run(sw, 1, 3) == 0xEE
    with pytest.raises(SwitchError) as e:
        t.insert(Entry((1, 2), "set", [8]))
    assert e.value.code == "ALREADY_EXISTS"
    t.modify(Entry((1, 2), "set", [9]))
    assert run(sw, 1, 2) == 9
    t.insert(Entry((5, 5), "set", [1]))
    with pytest.raises(SwitchError) as e:
        t.insert(Entry((6, 6), "set", [1]))
    assert e.value.code == "RESOURCE_EXHAUSTED"
    for bad in [Entry((256, 0), "set", [1]), Entry((1,), "set", [1]),
                Entry((7, 7), "set", [256]), Entry((7, 7), "nope", []),
                Entry((7, 7), "set", []), Entry((7, 7), "set", [1], priority=3)]:
        t.delete((5, 5))
        with pytest.raises(SwitchError) as e:
            t.insert(bad)
        assert e.value.code == "INVALID_ARGUMENT"
        t.insert(Entry((5, 5), "set", [1]))
    t.delete((1, 2))
    assert run(sw, 1, 2) == 0xEE
    with pytest.raises(SwitchError) as e:
        t.delete((1, 2))
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(SwitchError) as e:
        t.modify(Entry((1, 2), "set", [1]))
    assert e.value.code == "NOT_FOUND"
    assert [x.key for x in t.entries()] == [(5, 5)]
    assert t.get((5, 5)).params == [1] and t.get((9, 9)) is None


def test_direct_counters_count_hits_only():
    sw, t = make({"a": "exact"})
    t.insert(Entry((1,), "set", [1]))
    run(sw, 1)
    run(sw, 1)
    run(sw, 2)
    e = t.get((1,))
    assert (e.packets, e.bytes) == (2, 16)
    t.set_counter((1,), 0, 100, 1000)
    run(sw, 1)
    assert (t.get((1,)).packets, t.get((1,)).bytes) == (101, 1008)
    t.modify(Entry((1,), "set", [2]))  # modify keeps the counter
    assert t.get((1,)).packets == 101
    with pytest.raises(SwitchError) as err:
        t.set_counter((9,), 0, 1, 1)
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(SwitchError) as err:
        t.set_counter((1,), 0, -1, 1)
    assert err.value.code == "INVALID_ARGUMENT"


def test_lpm_longest_prefix_wins():
    sw, t = make({"a": "exact", "c": "lpm"})
    t.insert(Entry((1, (0x0A000000, 8)), "set", [8]))
    t.insert(Entry((1, (0x0A010000, 16)), "set", [16]))
    t.insert(Entry((1, (0, 0)), "set", [0]))
    assert run(sw, 1, c=0x0A010203) == 16
    assert run(sw, 1, c=0x0A020304) == 8
    assert run(sw, 1, c=0x0B000000) == 0
    assert run(sw, 2, c=0x0A010203) == 0xEE
    with pytest.raises(SwitchError):  # bits beyond the prefix
        t.insert(Entry((1, (0x0A000001, 8)), "set", [1]))
    t.delete((1, (0x0A010000, 16)))
    assert run(sw, 1, c=0x0A010203) == 8


def test_ternary_highest_priority_wins_and_priority_is_part_of_identity():
    sw, t = make({"b": "ternary"})
    t.insert(Entry(((0x1200, 0xFF00),), "set", [1], priority=10))
    t.insert(Entry(((0x1234, 0xFFFF),), "set", [2], priority=20))
    t.insert(Entry(((0, 0),), "set", [3], priority=1))
    assert run(sw, b=0x1234) == 2 and run(sw, b=0x1299) == 1 and run(sw, b=0x9999) == 3
    t.insert(Entry(((0x1234, 0xFFFF),), "set", [4], priority=5))  # same key, other priority
    assert run(sw, b=0x1234) == 2
    t.delete(((0x1234, 0xFFFF),), priority=20)
    assert run(sw, b=0x1234) == 1
    for bad in [Entry(((1, 0),), "set", [1], priority=1),  # value outside the mask
                Entry(((0, 0),), "set", [1], priority=0)]:  # priority required
        with pytest.raises(SwitchError) as e:
            t.insert(bad)
        assert e.value.code == "INVALID_ARGUMENT"


def test_range_and_optional():
    sw, t = make({"b": "range", "a": "optional"})
    t.insert(Entry(((10, 20), None), "set", [1], priority=1))
    t.insert(Entry(((15, 30), 7), "set", [2], priority=2))
    assert run(sw, a=0, b=10) == 1 and run(sw, a=0, b=20) == 1 and run(sw, a=0, b=21) == 0xEE
    assert run(sw, a=7, b=16) == 2 and run(sw, a=8, b=16) == 1
    with pytest.raises(SwitchError):
        t.insert(Entry(((5, 4), None), "set", [1], priority=3))


def test_default_actions_and_const_default():
    sw, t = make({"a": "exact"})
    t.set_default("set", [5])
    assert run(sw, 9) == 5 and t.default == ("set", [5])
    t.reset_default()
    assert run(sw, 9) == 0xEE
    j = program({"a": "exact"})
    j["pipelines"][0]["tables"][0]["default_entry"]["action_const"] = True
    sw2 = Switch()
    sw2.load(j)
    t2 = sw2.tables["t"]
    assert t2.has_const_default
    with pytest.raises(SwitchError) as e:
        t2.set_default("set", [1])
    assert e.value.code == "FAILED_PRECONDITION"


def test_const_entries_are_immutable_and_use_bmv2_priorities():
    j = program({"b": "ternary"})
    tj = j["pipelines"][0]["tables"][0]
    set_id = next(a["id"] for a in j["actions"] if a["name"] == "set")
    tj["entries"] = [
        {"match_key": [{"match_type": "ternary", "key": "0x1200", "mask": "0xff00"}],
         "action_entry": {"action_id": set_id, "action_data": ["0x01"]}, "priority": 1},
        {"match_key": [{"match_type": "ternary", "key": "0x0000", "mask": "0x0000"}],
         "action_entry": {"action_id": set_id, "action_data": ["0x02"]}, "priority": 2},
    ]
    sw = Switch()
    sw.load(j)
    t = sw.tables["t"]
    assert t.has_const_entries
    assert [e.priority for e in t.entries()] == [(1 << 31) - 2, (1 << 31) - 3]
    assert run(sw, b=0x1255) == 1 and run(sw, b=0x3300) == 2
    with pytest.raises(SwitchError) as e:
        t.insert(Entry(((0, 0),), "set", [1], priority=9))
    assert e.value.code == "FAILED_PRECONDITION"


def test_key_of_invalid_header_reads_zero():
    sw, t = make({"a": "exact"})
    t.insert(Entry((0,), "set", [0x42]))
    # 0 bytes: k and r fail to extract; k.a reads 0; r stays invalid so no output byte
    assert sw.process(0, b"") == [(1, b"")]
    assert t.get((0,)).packets == 1
