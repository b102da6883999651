#!/usr/bin/env python3
"""(Re)builds the conformance programs and their expected packets.

    .venv/bin/python -m tests.p4.make_cases [--compile] [--engine-only] [program ...]

--compile runs p4c-bm2-ss on tests/p4/<program>.p4 into tests/p4/build/
and records the source's sha256. The input packets of each program are
defined here; their outputs are computed by the engine and, unless
--engine-only, written only when BMv2 (simple_switch) produces the same
packets per port, so the committed expectations are BMv2's behaviour.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys

from softswitch import hashes

from . import bmv2, conformance

# -- inputs ------------------------------------------------------------------------------


def eth(etype: int) -> bytes:
    return bytes.fromhex("0000000000aa" "0000000000bb") + etype.to_bytes(2, "big")


def parse_inputs():
    h = eth(0x1234)
    return [
        ("masked select 0x08xx", 1, eth(0x0800) + b"abc"),
        ("masked select 0x08ff", 1, eth(0x08FF) + b"abc"),
        ("default: accept", 1, eth(0x0900) + b"abc"),
        ("tuple (4,1) -> b", 1, h + bytes.fromhex("4100beef") + b"p"),
        ("tuple (4,2) -> c", 1, h + bytes.fromhex("420001020304")),
        ("second value of the same select", 1, eth(0x4321) + bytes.fromhex("4100beef")),
        ("masked tuple (4, 8&&&8)", 1, h + bytes.fromhex("4900cafe")),
        ("no tuple matches", 1, h + bytes.fromhex("4700cafe")),
        ("lookahead selects b", 1, h + bytes.fromhex("4300abcd")),
        ("lookahead default: advance 16 then c", 1, h + bytes.fromhex("4300111122223333") + b"x"),
        ("verify fails: BadVersion", 1, h + bytes.fromhex("5100abcd")),
        ("PacketTooShort in a", 1, h + bytes.fromhex("42")),
        ("PacketTooShort in c", 1, h + bytes.fromhex("42000102")),
        ("PacketTooShort in eth", 1, bytes.fromhex("0102030405")),
    ]


def stacks_inputs():
    def ctl(op, idx=0):
        return bytes([op, idx, 0, 0])

    return [
        ("no elements", 1, ctl(0) + b"pay"),
        ("push_front + setValid", 1, ctl(1) + bytes([0x02, 0x05])),
        ("push_front on a full stack", 1, ctl(1) + bytes([0x02, 0x04, 0x06, 0x09])),
        ("pop_front", 1, ctl(2) + bytes([0x02, 0x04, 0x07])),
        ("push_front(2)", 1, ctl(3) + bytes([0x02, 0x05])),
        ("pop_front(3)", 1, ctl(4) + bytes([0x02, 0x04, 0x07])),
        ("runtime index write", 1, ctl(5, 1) + bytes([0x02, 0x04, 0x07])),
        ("runtime index out of range guarded", 1, ctl(5, 7) + bytes([0x02, 0x04, 0x07])),
        ("setInvalid on the last element", 1, ctl(6) + bytes([0x02, 0x04, 0x06, 0x09])),
        ("StackOutOfBounds", 1, ctl(1) + bytes([0x02, 0x04, 0x06, 0x08, 0x0A])),
        ("PacketTooShort inside the loop", 1, ctl(1) + bytes([0x02])),
    ]


def exprs_inputs():
    vals = [(200, 100, 0x1234, -5, -300, 3), (5, 250, 0xFFFF, 127, 32767, 8),
            (255, 255, 0, -128, -32768, 9), (0, 1, 0x8000, 1, -1, 0),
            (17, 3, 0xABCD, -1, 1000, 31), (128, 128, 4, 64, -16, 200),
            (99, 7, 0x00F0, 100, 16, 7), (1, 0, 0xFFF0, -100, -5, 32)]
    return [(f"a={a} b={b} c={c:#x} s={s} t={t} sh={sh}", 1,
             struct.pack(">BBHbhBB", a, b, c, s, t, sh, 0)) for a, b, c, s, t, sh in vals]


def tables_inputs():
    def k(e, addr, t, r, o, sel, opt=None):
        b = struct.pack(">BIHHBB", e, addr, t, r, o, sel)
        return b + (bytes([opt]) if sel == 1 else b"")

    return [
        ("all hit, first ternary entry wins", 1, k(1, 0x0A010203, 0x1234, 12, 5, 1, 9)),
        ("second of each, optional exact", 1, k(2, 0x0A020304, 0x0014, 25, 7, 0)),
        ("defaults everywhere", 1, k(3, 0x0B000000, 0, 40000, 0, 0)),
        ("/24 prefix, range bounds", 1, k(255, 0x0A010200, 0x12FF, 20, 9, 0)),
        ("ternary catch-all", 1, k(1, 0x0A010000, 0x9999, 10, 0, 1, 1)),
        ("range lower bound, optional wildcard", 1, k(1, 0x0A000001, 0x1200, 15, 6, 0)),
    ]


def ip_header(proto=6, ttl=64, good=True, src=0x0A000001, dst=0x0A000002) -> bytes:
    h = bytearray(struct.pack(">BBHHHBBHII", 0x45, 0, 20, 7, 0x4000, ttl, proto, 0, src, dst))
    c = hashes.csum16(bytes(h))
    struct.pack_into(">H", h, 10, c if good else c ^ 0x0101)
    return bytes(h)


def externs_inputs():
    def cmd(op, idx, val):
        return struct.pack(">BBI", op, idx, val)

    l4 = struct.pack(">HHHH", 1000, 2000, 12, 0xAAAA) + b"data"
    return [
        ("register write", 1, cmd(1, 1, 5) + ip_header() + b"payload"),
        ("register read-modify-write", 1, cmd(2, 1, 7) + ip_header() + b"payload"),
        ("register read", 1, cmd(0, 1, 0) + ip_header()),
        ("ttl-1 and checksum update", 1, cmd(3, 2, 9) + ip_header(ttl=9)),
        ("bad checksum flagged", 1, cmd(0, 3, 1) + ip_header(good=False)),
        ("checksum over the payload", 1, cmd(4, 4, 0xDEADBEEF) + ip_header(proto=17) + l4),
        ("hash inputs vary", 1, cmd(0, 5, 0x01020304) + ip_header(src=0xC0A80001, dst=7)),
        ("register index 7, the last", 1, cmd(1, 7, 0xFFFFFFFF) + ip_header()),
    ]


def replication_inputs():
    def cmd(op, arg=0, grp=0, payload=b"PAYLOAD!"):
        return bytes([op, arg]) + grp.to_bytes(2, "big") + payload

    return [
        ("unicast", 9, cmd(1)),
        ("multicast group 1", 9, cmd(2, grp=1)),
        ("multicast to an unknown group", 9, cmd(2, grp=7)),
        ("clone I2E session 5", 9, cmd(3, arg=5)),
        ("clone to an unconfigured session", 9, cmd(3, arg=9)),
        ("resubmit preserving a field list", 9, cmd(4)),
        ("recirculate preserving a field list", 9, cmd(5)),
        ("truncate to 10 bytes", 9, cmd(6, arg=10)),
        ("exit skips the rest of ingress", 9, cmd(7)),
        ("mark_to_drop in egress", 9, cmd(8)),
        ("clone E2E session 6", 9, cmd(9, arg=6)),
        ("mark_to_drop in ingress", 9, cmd(10)),
        ("log_msg", 9, cmd(11, arg=3)),
        ("multicast then mark_to_drop", 9, cmd(12, grp=1)),
        ("egress_spec 511", 9, cmd(13)),
        ("setValid grows packet_length", 9, cmd(14)),
        ("setInvalid shrinks packet_length", 9, cmd(15)),
        ("priority above the queues", 9, cmd(16)),
        ("header only", 3, cmd(1, payload=b"")),
    ]


def samename_inputs():
    def ctl(op, a, b=0x33, c=0x44):
        return bytes([op, a, b, c]) + b"tail"

    return [
        ("table default set_b(0xd0), ternary /4", 1, ctl(0, 0x12)),
        ("direct out_and_exit(3) exits before the tables", 1, ctl(5, 0x12)),
        ("direct set_b(a) then out_and_exit(4)", 1, ctl(6, 0x5c)),
        ("direct set_c(b), set_b(0x77), odd a", 1, ctl(7, 0x03)),
        ("ternary catch-all", 1, ctl(1, 0x40)),
        ("header only", 2, ctl(7, 0x11)[:4]),
    ]


def varlen_inputs():
    def pkt(data: bytes, items: bytes, count: int, kind: int = 7) -> bytes:
        return bytes([len(data), count, kind]) + data + items + b"PAY"

    short, long_ = bytes([0x01, 0x55]), bytes([0x12, 0xAB, 0xCD, 0xEF])
    return [
        ("empty varbit, no items", 1, pkt(b"", b"", 0)),
        ("3-byte varbit, short then long", 1, pkt(b"abc", short + long_, 2)),
        ("8-byte varbit (the maximum), long then short", 1, pkt(b"12345678", long_ + short, 2)),
        ("9 bytes: HeaderTooShort", 1, pkt(b"123456789", b"", 0)),
        ("varbit past the packet: PacketTooShort", 1, bytes([6, 0, 7]) + b"ab"),
        ("three items in a stack of two: StackOutOfBounds", 1,
         pkt(b"z", short + short + short, 3)),
        ("varbit header removed in ingress", 1, pkt(b"xy", long_, 1, kind=0xFF)),
        ("union stack push_front(1) over short, long", 1,
         pkt(b"q", short + long_, 2, kind=0xFE)),
        ("union stack push_front(1) over one long", 1, pkt(b"", long_, 1, kind=0xFE)),
        ("union stack pop_front(1)", 1, pkt(b"", long_ + short, 2, kind=0xFD)),
    ]


def varcopy_inputs():
    def opt(options: bytes, good: bool = True, ttl: int = 64) -> bytes:
        body = bytes([ttl, 6]) + b"\x00\x00" + bytes([10, 0, 0, 1]) + options
        c = hashes.csum16(body[:2] + body[4:])
        return body[:2] + struct.pack(">H", c if good else c ^ 0x0101) + body[4:]

    def pkt(size: int, a: bytes, b: bytes, options: bytes, good: bool = True) -> bytes:
        words = len(options) // 4
        return bytes([size, words]) + a + b + opt(options, good) + b"PAY"

    return [
        ("16-bit values swapped, no options", 1, pkt(16, b"\x01\x02", b"\x03\x04", b"")),
        ("empty values, 8 bytes of options", 1, pkt(0, b"", b"", b"optsOPTS")),
        ("32-bit values, 16 bytes of options", 1,
         pkt(32, b"AAAA", b"BBBB", b"0123456789abcdef")),
        ("bad checksum over the options", 1, pkt(8, b"x", b"y", b"opts", good=False)),
        ("options past the maximum: HeaderTooShort", 1,
         bytes([8, 5]) + b"xy" + bytes(28)),
    ]


def hashsel_inputs():
    def pkt(proto, src, dst, ttl=64, ident=1000, ports=None, etype=0x0800):
        """Ethernet, IPv4 (checksum 0: the program neither checks nor updates it), TCP
        when ports are given, else 8 bytes of UDP."""
        ip = struct.pack(">BBHHHBBHII", 0x45, 0, 40, ident, 0, ttl, proto, 0, src, dst)
        l4 = struct.pack(">HHIIBBHHH", *ports, 1, 0, 0x50, 0x10, 512, 0, 0) if ports else \
            struct.pack(">HHHH", 53, 53, 8, 0)
        return eth(etype) + ip + l4 + b"payload"

    a, b = 0x0A000101, 0x0A000001
    rows = [  # without TCP first: BMv2 then reads the invalid TCP header's fields as 0
        ("UDP: TCP ports of an invalid header", 1, pkt(17, a, b)),
        ("ICMP from another source, id 0: max 0 taken as 1", 1, pkt(1, 0x0A000202, b, ident=0)),
        ("UDP, ttl 0: random in [0, 0]", 1, pkt(17, 0xC0A80001, 0x0A000003, ttl=0, ident=7)),
        ("not IPv4: dropped", 1, eth(0x86DD) + bytes(40)),
    ]
    for i, (sport, dport) in enumerate([(1234, 80), (1235, 80), (1236, 80), (40000, 443),
                                        (65535, 1), (0, 0), (5555, 22), (80, 1234)]):
        rows.append((f"TCP {sport} -> {dport}", 1,
                     pkt(6, a + i, b, ttl=1 + 31 * i, ident=(65535, 3, 1)[i % 3],
                         ports=(sport, dport))))
    rows.append(("TCP, the largest 64-bit max", 1,
                 pkt(6, 0xFFFFFFFF, 0xFFFFFFFF, ttl=255, ports=(1, 2))))
    return rows


def vlbits_inputs():
    def pkt(bits: int, body: bytes) -> bytes:
        return bytes([bits, 0xEE]) + body

    return [
        ("0 bits", 1, pkt(0, b"\x01" + b"TTpay")),
        ("8 bits", 1, pkt(8, b"\x01a" + b"TTpay")),
        ("24 bits, the maximum", 1, pkt(24, b"\x01abc" + b"TTpay")),
        ("1 bit: ParserInvalidArgument", 1, pkt(1, b"\x01a" + b"TTpay")),
        ("12 bits: ParserInvalidArgument", 1, pkt(12, b"\x01ab" + b"TTpay")),
        ("7 bits past the end: ParserInvalidArgument first", 1, pkt(7, b"")),
        ("32 bits: HeaderTooShort", 1, pkt(32, b"\x01abcd" + b"TTpay")),
        ("32 bits past the end: PacketTooShort first", 1, pkt(32, b"\x01ab")),
        ("16 bits past the end: PacketTooShort", 1, pkt(16, b"\x01a")),
        ("the next header past the end: PacketTooShort", 1, pkt(8, b"\x01aT")),
    ]


def vlstack_inputs():
    def pkt(n0, n1, n2, count, op, *parts: bytes) -> bytes:
        return bytes([n0, n1, n2, count, op]) + b"".join(parts) + b"PAY"

    def opt(kind: int, v: bytes) -> bytes:
        return bytes([kind]) + v

    a, b = opt(1, b"\x23\x45"), opt(2, b"\xcd\xef")
    return [
        ("h only", 1, pkt(2, 0, 0, 0, 0, a)),
        ("h, a[0] equal", 1, pkt(2, 2, 0, 1, 0, a, a)),
        ("h, a[0] differ", 1, pkt(2, 2, 0, 1, 0, a, b)),
        ("the same varbit value at another length", 1,
         pkt(2, 1, 0, 1, 0, opt(1, b"\x00\x45"), opt(1, b"\x45"))),
        ("h, a[0] == h, a[1] == a[0]: stacks equal", 1, pkt(4, 4, 4, 2, 0,
                                                            opt(9, b"abcd"), opt(9, b"abcd"),
                                                            opt(9, b"abcd"))),
        ("empty varbits", 1, pkt(0, 0, 0, 2, 0, opt(5, b""), opt(5, b""), opt(5, b""))),
        ("a third element: StackOutOfBounds", 1, pkt(1, 1, 1, 3, 0, opt(1, b"x"), opt(1, b"x"),
                                                     opt(1, b"x"), opt(1, b""))),
        ("a[0] past its maximum: HeaderTooShort", 1, pkt(1, 5, 0, 1, 0, opt(1, b"x"),
                                                         opt(1, b"12345"))),
        ("push_front(1) then a[0] = h", 1, pkt(1, 2, 3, 2, 1, opt(1, b"x"), opt(2, b"yy"),
                                               opt(3, b"zzz"))),
        ("pop_front(1)", 1, pkt(1, 2, 3, 2, 2, opt(1, b"x"), opt(2, b"yy"), opt(3, b"zzz"))),
        ("a[1] = tmp[0], h invalid", 1, pkt(3, 1, 0, 1, 3, opt(7, b"abc"), opt(8, b"d"))),
        ("union stack: varbit member, short member", 1,
         pkt(1, 1, 2, 4, 0, opt(1, b"x"), opt(1, b"x"), opt(3, b"pq"), opt(4, b"rs"),
             bytes([1, 0x77]), b"\x00")),
        ("union stack: two varbit members", 1,
         pkt(1, 1, 1, 4, 0, opt(1, b"x"), opt(1, b"y"), opt(3, b"p"), opt(4, b"r"),
             opt(5, b"s"), b"\x00")),
    ]


def deadtable_inputs():
    return [(f"op {op}", 1, bytes([op, 0, 0x12, 0x34]) + b"tail") for op in (0, 1, 7)] + \
        [("header only", 1, bytes([2, 9, 0, 0]))]


def hashwide_inputs():
    return [(f"a = {a:#x}", 1, a.to_bytes(4, "big") + bytes(27))
            for a in (0, 1, 5, 0xFFFF, 0x80000000, 0xFFFFFFFF)]


PROGRAMS = {
    "parse": (parse_inputs, {}),
    "stacks": (stacks_inputs, {}),
    "samename": (samename_inputs, {}),
    "varlen": (varlen_inputs, {}),
    "varcopy": (varcopy_inputs, {}),
    "vlbits": (vlbits_inputs, {}),
    "vlstack": (vlstack_inputs, {}),
    "deadtable": (deadtable_inputs, {"table_defaults": {"I.live": ["I.set_out", [0x42]]}}),
    "exprs": (exprs_inputs, {}),
    "tables": (tables_inputs, {}),
    "externs": (externs_inputs, {}),
    "hashwide": (hashwide_inputs, {}),
    "hashsel": (hashsel_inputs, {"table_defaults": {"I.pick": ["I.set_select", [5, 3]]}}),
    "replication": (replication_inputs,
                    {"multicast_groups": {"1": [[1, 10], [2, 20], [3, 30]], "2": [[4, 5]]},
                     "clone_sessions": {"5": [[6, 7]], "6": [[2, 0], [3, 1]]}}),
}


def build(name: str, engine_only: bool) -> None:
    make, setup = PROGRAMS[name]
    rows = make()
    inputs = [(port, data) for _, port, data in rows]
    outs = conformance.run_engine(name, setup, inputs)
    cases = {"setup": setup, "cases": [
        {"note": note, "port": port, "in": data.hex(), "out": out}
        for (note, port, data), out in zip(rows, outs, strict=True)]}
    if not engine_only:
        if bmv2.available() is None:
            raise SystemExit("simple_switch is not on PATH: use --engine-only to skip BMv2")
        ports = conformance.all_ports(cases)
        want = conformance.per_port(outs, ports)
        got = conformance.run_bmv2(name, setup, inputs, sum(len(o) for o in outs), ports)
        if got != want:
            for p in sorted(ports):
                if got.get(p) != want.get(p):
                    print(f"{name}: port {p}\n  engine {want.get(p)}\n  bmv2   {got.get(p)}")
            raise SystemExit(f"{name}: engine and BMv2 differ; nothing written")
    path = conformance.HERE / f"{name}.cases.json"
    path.write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{name}: {len(rows)} cases, {sum(len(o) for o in outs)} packets out -> {path.name}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", default=sorted(PROGRAMS))
    ap.add_argument("--compile", action="store_true", help="run p4c-bm2-ss first")
    ap.add_argument("--engine-only", action="store_true", help="do not check with BMv2")
    args = ap.parse_args(argv)
    for name in args.programs:
        if args.compile:
            conformance.compile_p4(name, conformance.BUILD)
            src = conformance.HERE / f"{name}.p4"
            (conformance.BUILD / f"{name}.sha256").write_text(conformance.sha256(src) + "\n")
        build(name, args.engine_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
