"""Engine basics: load, forward, miss, parser errors, bad programs, state reset."""

import json
import threading

import pytest

from softswitch import Entry, Switch, SwitchError
from tests.p4 import kit
from tests.p4.kit import assign, extract, field, hexstr, prim, rt


def forwarding_program() -> dict:
    p = kit.Program()
    p.header("eth", [("dst", 48), ("src", 48), ("etype", 16)])
    p.state("start", [extract("eth")])
    p.action("forward", [assign(field("standard_metadata", "egress_spec"), rt(0))],
             [("port", 9)])
    p.action("to_nine", [assign(field("standard_metadata", "egress_spec"), hexstr(9))])
    p.action("drop", [prim("mark_to_drop", {"type": "header", "value": "standard_metadata"})])
    p.table("ingress", "fwd", [{"match_type": "exact", "target": ["eth", "dst"],
                                "mask": None, "name": "eth.dst"}],
            ["forward", "drop", "to_nine"], default="to_nine")
    return p.json()


ETH = bytes.fromhex("0000000000aa" "0000000000bb" "0800")


@pytest.fixture
def sw():
    s = Switch()
    s.load(forwarding_program())
    return s


def test_forwards_on_hit_and_takes_default_on_miss(sw):
    sw.tables["fwd"].insert(Entry((0xAA,), "forward", [3]))
    assert sw.process(1, ETH + b"payload") == [(3, ETH + b"payload")]
    other = bytes.fromhex("0000000000cc") + ETH[6:]
    assert sw.process(1, other) == [(9, other)]
    sw.tables["fwd"].set_default("drop", [])
    assert sw.process(1, other) == []
    assert sw.stats["packets_in"] == 3 and sw.stats["dropped"] == 1


def test_short_packet_goes_to_ingress_with_header_invalid(sw):
    # extract fails (PacketTooShort): eth stays invalid, nothing is consumed,
    # the key reads 0 for the invalid header, the bytes leave untouched.
    sw.tables["fwd"].insert(Entry((0,), "forward", [4]))
    assert sw.process(1, b"\x01\x02\x03") == [(4, b"\x01\x02\x03")]
    assert sw.process(1, b"") == [(4, b"")]
    assert sw.stats["errors"] == 0


def test_bad_program_is_rejected_and_old_one_kept(sw):
    sw.tables["fwd"].insert(Entry((0xAA,), "forward", [3]))
    for bad in (b"{not json", "[]", {"headers": "x"}, 42,
                {**forwarding_program(), "__meta__": {"version": [3, 0]}}):
        with pytest.raises(SwitchError) as ei:
            sw.load(bad)
        assert ei.value.code == "INVALID_ARGUMENT"
    broken = forwarding_program()
    broken["actions"][1]["primitives"][0]["op"] = "no_such_primitive"
    with pytest.raises(SwitchError):
        sw.load(json.dumps(broken))
    assert sw.process(1, ETH) == [(3, ETH)]


def test_load_resets_runtime_state(sw):
    sw.tables["fwd"].insert(Entry((0xAA,), "forward", [3]))
    sw.pre.create(1, [(1, 0)])
    sw.load(json.dumps(forwarding_program()).encode())
    assert sw.tables["fwd"].entries() == [] and sw.pre.groups == {}
    assert sw.process(1, ETH) == [(9, ETH)]


def test_no_program_drops():
    s = Switch()
    assert not s.loaded
    assert s.process(0, ETH) == []


def test_concurrent_processing_and_writes(sw):
    errors = []

    def traffic():
        try:
            for _ in range(300):
                out = sw.process(1, ETH)
                assert out in ([(3, ETH)], [(9, ETH)])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=traffic) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(100):
        sw.tables["fwd"].insert(Entry((0xAA,), "forward", [3]))
        sw.tables["fwd"].delete((0xAA,))
    for t in threads:
        t.join()
    assert not errors
    assert sw.stats["packets_in"] == 900


def grow_program(words: int) -> dict:
    p = kit.Program()
    p.header("eth", [("dst", 48), ("src", 48), ("etype", 16)])
    p.header("big", [(f"w{i}", 32) for i in range(words)])
    p.state("start", [extract("eth")])
    p.action("grow", [prim("add_header", {"type": "header", "value": "big"}),
                      assign(field("standard_metadata", "egress_spec"), hexstr(1))])
    p.call("ingress", "grow_t", "grow")
    return p.json()


def test_growth_beyond_bmv2_headroom_is_dropped():
    # BMv2 gives a packet 512 bytes of headroom and aborts beyond; the engine drops it.
    s = Switch()
    s.load(grow_program(128))
    [(port, out)] = s.process(0, ETH)
    assert len(out) == len(ETH) + 512
    s.load(grow_program(129))
    assert s.process(0, ETH + bytes(100)) == []
    assert s.stats["too_big"] == 1
