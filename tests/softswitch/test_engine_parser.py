"""Parser semantics: select with masks and tuples, lookahead, advance, verify,
header stacks with next/last, and the errors v1model reports in ingress.
Checked on the engine, and against BMv2 when simple_switch is on PATH."""

import json

import pytest

from softswitch import Switch
from tests.p4 import bmv2, kit
from tests.p4.kit import assign, extract, field, goto, hexstr

BAD_VERSION = 7


def program() -> dict:
    p = kit.Program()
    p.errors.append(["BadVersion", BAD_VERSION])
    p.header("res", [("perr", 32), ("path", 8), ("la", 8), ("n", 8), ("last", 8)])
    p.header("h0", [("etype", 16)])
    p.header("a", [("ver", 4), ("kind", 4), ("len", 8)])
    p.header("b", [("x", 16)])
    p.header("c", [("y", 32)])
    p.stack("s", [("v", 7), ("bos", 1)], 3)
    path = p.scalar("path", 8)
    la = p.scalar("la", 8)

    def setp(v):
        return {"op": "set", "parameters": [path, kit.param(v)]}

    plus = lambda k: kit.expr("&", kit.expr("+", path, hexstr(k)), hexstr(0xFF))  # noqa: E731
    p.state("start", [extract("h0")], [field("h0", "etype")],
            [goto("by_mask", "0x0800", "0xff00"), goto("pa", "0x1234"), goto("stk", "0x5555"),
             goto(None)])
    p.state("by_mask", [setp(hexstr(1))])
    p.state("pa", [extract("a"),
                   {"op": "verify", "parameters": [
                       kit.expr("==", field("a", "ver"), hexstr(4)),
                       {"type": "hexstr", "value": hex(BAD_VERSION)}]}],
            [field("a", "ver"), field("a", "kind")],
            [goto("pb", "0x0401"), goto("pc", "0x0402"), goto("look", "0x0403"),
             goto("pb", "0x0408", "0xff08"), goto(None)])
    p.state("pb", [extract("b"), setp(plus(2))])
    p.state("pc", [extract("c"), setp(plus(3))])
    p.state("look", [{"op": "set", "parameters": [la, {"type": "lookahead", "value": [0, 8]}]}],
            [{"type": "lookahead", "value": [0, 16]}],
            [goto("pb", "0xabcd"), goto("skip")])
    p.state("skip", [{"op": "advance", "parameters": [hexstr(16)]}, setp(hexstr(10))],
            None, [goto("pc")])
    p.state("stk", [{"op": "extract", "parameters": [{"type": "stack", "value": "s"}]}],
            [{"type": "stack_field", "value": ["s", "bos"]}],
            [goto(None, "0x01"), goto("stk")])
    stack = {"type": "header_stack", "value": "s"}
    p.action("report", [
        kit.prim("add_header", {"type": "header", "value": "res"}),
        assign(field("res", "perr"), field("standard_metadata", "parser_error")),
        assign(field("res", "path"), path),
        assign(field("res", "la"), la),
        assign(field("res", "n"), kit.expr("size_stack", None, stack)),
        assign(field("res", "last"),
               kit.expr("&", kit.expr("last_stack_index", None, stack), hexstr(0xFF))),
        assign(field("standard_metadata", "egress_spec"), hexstr(1)),
    ])
    p.call("ingress", "report_t", "report")
    return p.json()


def res(perr, path=0, la=0, n=0):
    return perr.to_bytes(4, "big") + bytes([path, la, n, (n - 1) & 0xFF])


H0 = bytes.fromhex("1234")
CASES = [
    # select on a masked value
    (bytes.fromhex("08ff") + b"xyz", res(0, 1) + bytes.fromhex("08ff") + b"xyz"),
    (bytes.fromhex("0900") + b"xyz", res(0) + bytes.fromhex("0900") + b"xyz"),
    # tuple keys
    (H0 + bytes.fromhex("4100 beef") + b"p", res(0, 2) + H0 + bytes.fromhex("4100beef") + b"p"),
    (H0 + bytes.fromhex("4200 01020304"), res(0, 3) + H0 + bytes.fromhex("420001020304")),
    (H0 + bytes.fromhex("4900 cafe"), res(0, 2) + H0 + bytes.fromhex("4900cafe")),
    (H0 + bytes.fromhex("4700 cafe"), res(0) + H0 + bytes.fromhex("4700cafe")),
    # lookahead selects, then advance skips two bytes
    (H0 + bytes.fromhex("4300 abcd"), res(0, 2, 0xAB) + H0 + bytes.fromhex("4300abcd")),
    (H0 + bytes.fromhex("4300 1111 22223333 44"),
     res(0, 13, 0x11) + H0 + bytes.fromhex("4300") + bytes.fromhex("2222333344")),
    # verify fails: error value from the program, header a stays valid
    (H0 + bytes.fromhex("5100 abcd"), res(BAD_VERSION) + H0 + bytes.fromhex("5100abcd")),
    # PacketTooShort at different places: what was extracted stays
    (H0 + bytes.fromhex("42"), res(1) + H0 + bytes.fromhex("42")),
    (H0 + bytes.fromhex("4200 0102"), res(1) + H0 + bytes.fromhex("42000102")),
    (bytes.fromhex("12"), res(1) + bytes.fromhex("12")),
    (H0 + bytes.fromhex("4300 11"), res(1, 0, 0x11) + H0 + bytes.fromhex("430011")),
    # header stacks: stop on bos, overflow, short
    (bytes.fromhex("5555 02 05") + b"!", res(0, n=2) + bytes.fromhex("55550205") + b"!"),
    (bytes.fromhex("5555 02 04 06 08 0a"), res(3, n=3) + bytes.fromhex("555502040608") + b"\x0a"),
    (bytes.fromhex("5555 02"), res(1, n=1) + bytes.fromhex("555502")),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_engine_parser_case(k):
    sw = Switch()
    sw.load(program())
    data, want = CASES[k]
    assert sw.process(0, data) == [(1, want)]
    assert sw.stats["errors"] == 0


def test_parser_loop_without_progress_times_out():
    j = program()
    st = j["parsers"][0]["parse_states"]
    by_mask = next(s for s in st if s["name"] == "by_mask")
    by_mask["transitions"] = [{"type": "default", "value": None, "mask": None,
                               "next_state": "by_mask"}]
    sw = Switch()
    sw.load(j)
    [(port, out)] = sw.process(0, bytes.fromhex("0800"))
    assert out[:4] == (5).to_bytes(4, "big")  # ParserTimeout, and no hang


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "parser checked on the engine only")
def test_parser_matches_bmv2(tmp_path):
    path = tmp_path / "parser.json"
    path.write_text(json.dumps(program()))
    with bmv2.SimpleSwitch(path, {0, 1}, [(0, d) for d, _ in CASES], wait=1) as ss:
        got = ss.settle(expected=len(CASES))[1]
    assert [g.hex() for g in got] == [w.hex() for _, w in CASES]
