"""Header stacks (push/pop, runtime indices, last element, copies) and header
unions (one valid member at a time), on the engine and vs BMv2."""

import json

import pytest

from softswitch import Switch
from tests.p4 import bmv2, kit
from tests.p4.kit import assign, expr, extract, field, goto, hexstr, prim


def hdr(name):
    return {"type": "header", "value": name}


def program() -> dict:
    p = kit.Program()
    p.header("ctl", [("op", 8), ("idx", 8), ("n", 8), ("lastv", 8)])
    p.stack("s", [("v", 7), ("bos", 1)], 4)
    tid = len(p.header_types)
    p.header_types += [{"name": "ua_t", "id": tid, "fields": [["a", 16, False]]},
                       {"name": "ub_t", "id": tid + 1, "fields": [["b", 32, False]]}]
    ua, ub = len(p.headers), len(p.headers) + 1
    p.headers += [{"name": "u.ua", "id": ua, "header_type": "ua_t", "metadata": False},
                  {"name": "u.ub", "id": ub, "header_type": "ub_t", "metadata": False}]
    p.deparse_order += ["u.ua", "u.ub"]
    union_types = [{"name": "u_t", "id": 0, "headers": [["ua", "ua_t"], ["ub", "ub_t"]]}]
    unions = [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [ua, ub]}]
    stack = {"type": "header_stack", "value": "s"}
    p.state("start", [extract("ctl")], [field("ctl", "op")],
            [goto(None, "0x00"), goto("ua", "0x08"), goto("ub", "0x09"), goto("el")])
    p.state("el", [{"op": "extract", "parameters": [{"type": "stack", "value": "s"}]}],
            [{"type": "stack_field", "value": ["s", "bos"]}], [goto(None, "0x01"), goto("el")])
    p.state("ua", [extract("u.ua")])
    p.state("ub", [extract("u.ub")])
    dyn = {"type": "expression", "value": {"op": "access_field", "left": {
        "type": "expression", "value": {"op": "dereference_header_stack", "left": stack,
                                        "right": field("ctl", "idx")}}, "right": 0}}
    es = assign(field("standard_metadata", "egress_spec"), hexstr(1))
    acts = {
        1: [prim("push", stack, hexstr(1)), prim("add_header", hdr("s[0]")),
            assign(field("s[0]", "v"), hexstr(0x55))],
        2: [prim("pop", stack, hexstr(1))],
        3: [prim("push", stack, hexstr(2))],
        4: [prim("pop", stack, hexstr(3))],
        5: [prim("assign", {"type": "expression", "value": dyn}, hexstr(0x7F))],
        6: [prim("remove_header", hdr("s[3]"))],
        7: [prim("assign_header", hdr("s[0]"), hdr("s[1]"))],
        8: [prim("add_header", hdr("u.ub")), assign(field("u.ub", "b"), hexstr(0x01020304))],
        9: [prim("remove_header", hdr("u.ub"))],
        10: [assign(field("ctl", "n"), expr("size_stack", None, stack)),
             assign(field("ctl", "lastv"), {"type": "stack_field", "value": ["s", "v"]})],
        11: [assign(field("ctl", "n"),
                    expr("b2d", None, expr("valid_union", None,
                                           {"type": "header_union", "value": "u"})))],
    }
    for op, prims in acts.items():
        p.action(f"op{op}", prims + [es])
    p.action("other", [es])
    key = [{"match_type": "exact", "target": ["ctl", "op"], "mask": None}]
    entries = [{"match_key": [{"match_type": "exact", "key": f"0x{op:02x}"}],
                "action_entry": {"action_id": p.action_id(f"op{op}"), "action_data": []}}
               for op in acts]
    p.table("ingress", "dispatch", key, [f"op{op}" for op in acts] + ["other"],
            default="other", entries=entries)
    j = p.json()
    j["header_union_types"] = union_types
    j["header_unions"] = unions
    return j


def ctl(op, idx=0):
    return bytes([op, idx, 0, 0])


CASES = [
    (ctl(1) + bytes([0x02, 0x05]), ctl(1) + bytes([0xAA, 0x02, 0x05])),
    (ctl(1) + bytes([0x02, 0x04, 0x06, 0x09]), ctl(1) + bytes([0xAA, 0x02, 0x04, 0x06])),
    (ctl(2) + bytes([0x02, 0x04, 0x07]), ctl(2) + bytes([0x04, 0x07])),
    (ctl(3) + bytes([0x02, 0x05]), ctl(3) + bytes([0x02, 0x05])),
    (ctl(4) + bytes([0x02, 0x04, 0x07]), ctl(4)),
    (ctl(5, 1) + bytes([0x02, 0x04, 0x07]), ctl(5, 1) + bytes([0x02, 0xFE, 0x07])),
    (ctl(5, 3) + bytes([0x02, 0x04, 0x07]), ctl(5, 3) + bytes([0x02, 0x04, 0x07])),
    (ctl(6) + bytes([0x02, 0x04, 0x06, 0x09]), ctl(6) + bytes([0x02, 0x04, 0x06])),
    (ctl(7) + bytes([0x02, 0x05]), ctl(7) + bytes([0x05, 0x05])),
    (ctl(7) + bytes([0x03]), ctl(7) + b""),
    # making ub valid invalidates ua (same union): ua's parsed bytes are gone
    (ctl(8) + bytes.fromhex("abcd") + b"p", ctl(8) + bytes.fromhex("01020304") + b"p"),
    (ctl(9) + bytes.fromhex("aabbccdd") + b"p", ctl(9) + b"p"),
    (ctl(10) + bytes([0x02, 0x04, 0x07]), bytes([10, 0, 3, 3]) + bytes([0x02, 0x04, 0x07])),
    (ctl(11) + bytes([0x02, 0x05]), ctl(11) + bytes([0x02, 0x05])),
    (ctl(8), ctl(8) + bytes.fromhex("01020304")),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_engine_stacks_and_unions(k):
    sw = Switch()
    sw.load(program())
    data, want = CASES[k]
    assert sw.process(0, data) == [(1, want)]
    assert sw.stats["errors"] == 0


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "stacks checked on the engine only")
def test_stacks_and_unions_match_bmv2(tmp_path):
    path = tmp_path / "stacks.json"
    path.write_text(json.dumps(program()))
    with bmv2.SimpleSwitch(path, {0, 1}, [(0, d) for d, _ in CASES], wait=1) as ss:
        got = ss.settle(expected=len(CASES))[1]
    assert [g.hex() for g in got] == [w.hex() for _, w in CASES]
