"""Registers, counters, hash calculations and checksums, on the engine and vs BMv2.

The calculations mix fields of odd widths (bit-packed, not byte-padded, as
BMv2 builds hash input), a field of a header that may be invalid (skipped),
constants and the payload. Checksums: csum16 verified in the parser and
updated in the deparser under a condition, over an IPv4-shaped header.
"""

import json
import struct

import pytest

from softswitch import Switch, hashes
from tests.p4 import bmv2, kit
from tests.p4.kit import assign, extract, field, goto, hexstr, prim

SM = "standard_metadata"
ALGOS = ["crc16", "crc32", "csum16", "identity", "xor16", "crcCCITT", "crc16_custom",
         "crc32_custom"]
IP = [("version", 4), ("ihl", 4), ("tos", 8), ("len", 16), ("id", 16), ("flags", 3),
      ("frag", 13), ("ttl", 8), ("proto", 8), ("csum", 16), ("src", 32), ("dst", 32)]


def program() -> dict:
    p = kit.Program()
    p.header("res", [(f"h{i}", 32) for i in range(len(ALGOS))]
             + [("ranged", 16), ("reg", 32), ("ckerr", 8), ("pad", 8)])
    p.header("cmd", [("op", 8), ("idx", 8), ("val", 32), ("odd", 12), ("odd2", 4)])
    p.header("ip", IP)
    p.header("opt", [("o", 16)])
    p.state("start", [extract("cmd"), extract("ip")], [field("ip", "proto")],
            [goto("popt", "0x11"), goto(None)])
    p.state("popt", [extract("opt")])
    inputs = [field("cmd", "val"), field("cmd", "odd"), field("opt", "o"),
              {"type": "hexstr", "value": "0x5", "bitwidth": 3}, field("cmd", "odd2"),
              {"type": "payload", "value": None}]
    for i, algo in enumerate(ALGOS):
        p.calculations.append({"name": f"calc_{algo}", "id": i, "algo": algo, "input": inputs})
    ipf = [field("ip", n) for n, _ in IP if n != "csum"]
    p.calculations.append({"name": "ipv4_csum", "id": 100, "algo": "csum16", "input": ipf})
    p.checksums.append({"name": "cks", "id": 0, "target": ["ip", "csum"], "type": "generic",
                        "calculation": "ipv4_csum", "verify": True, "update": True,
                        "if_cond": kit.expr("==", field("ip", "ihl"), hexstr(5))})
    p.registers.append({"name": "regs", "id": 0, "size": 8, "bitwidth": 20})
    p.counters.append({"name": "ctr", "id": 0, "size": 8, "is_direct": False})
    prims = [prim("add_header", {"type": "header", "value": "res"})]
    for i, algo in enumerate(ALGOS):
        prims.append(prim("modify_field_with_hash_based_offset", field("res", f"h{i}"),
                          hexstr(0), {"type": "calculation", "value": f"calc_{algo}"},
                          hexstr(1 << 32)))
    prims.append(prim("modify_field_with_hash_based_offset", field("res", "ranged"),
                      hexstr(100), {"type": "calculation", "value": "calc_crc32"}, hexstr(1000)))
    idx = field("cmd", "idx")
    prims += [
        assign(field("res", "reg"), hexstr(0xFFFFFFFF)),
        prim("register_read", field("res", "reg"), {"type": "register_array", "value": "regs"},
             idx),
        prim("register_write", {"type": "register_array", "value": "regs"}, idx,
             kit.param(kit.expr("+", field("res", "reg"), field("cmd", "val")))),
        prim("count", {"type": "counter_array", "value": "ctr"}, idx),
        assign(field("res", "ckerr"), field(SM, "checksum_error")),
        assign(field("ip", "ttl"), kit.expr("&", kit.expr("-", field("ip", "ttl"), hexstr(1)),
                                            hexstr(0xFF))),
        assign(field(SM, "egress_spec"), hexstr(2)),
    ]
    p.action("work", prims)
    p.call("ingress", "work_t", "work")
    return p.json()


def csum(b: bytes) -> int:
    return hashes.csum16(b)


def ip_header(proto=6, ihl=5, ttl=64, good=True, src=0x0A000001, dst=0x0A000002) -> bytes:
    h = bytearray(struct.pack(">BBHHHBBHII", 0x40 | ihl, 0, 20, 7, 0x4000, ttl, proto, 0, src,
                              dst))
    c = csum(bytes(h))
    struct.pack_into(">H", h, 10, c if good else c ^ 0x0101)
    return bytes(h)


def cmd(idx, val, odd=0xABC, odd2=0x5) -> bytes:
    return struct.pack(">BBIH", 1, idx, val, (odd << 4) | odd2)


INPUTS = [
    cmd(1, 5) + ip_header() + b"payload",
    cmd(1, 7) + ip_header(proto=17) + b"\x12\x34" + b"more",
    cmd(2, 0xFFFFF) + ip_header(good=False) + b"",
    cmd(2, 3) + ip_header(ihl=6, good=False) + b"x",
    cmd(9, 1) + ip_header(ttl=1) + b"out of range index",
    cmd(7, 0xDEADBEEF, odd=0xFFF, odd2=0xF) + ip_header(proto=17) + b"\xff\xff",
    cmd(1, 1) + b"short",
]


def engine_run():
    sw = Switch()
    sw.load(program())
    outs = [o for d in INPUTS for _, o in sw.process(0, d)]
    assert sw.stats["errors"] == 0
    return sw, outs


def test_engine_calculations_and_state():
    sw, outs = engine_run()
    assert len(outs) == len(INPUTS)
    first = outs[0]
    # hash input: val(32) odd(12) [opt invalid: skipped] const(3) odd2(4) -> 51 bits, padded
    bits = (5 << 19) | (0xABC << 7) | (0x5 << 4) | 0x5
    data = (bits << 5).to_bytes(7, "big") + b"payload"
    for i, algo in enumerate(ALGOS):
        want = hashes.algorithm(algo)(data) % (1 << 32)
        assert int.from_bytes(first[4 * i : 4 * i + 4], "big") == want, algo
    k = 4 * len(ALGOS)
    ranged = int.from_bytes(first[k : k + 2], "big")
    assert ranged == 100 + hashes.crc32(data) % 1000
    regs = sw.registers["regs"]
    # idx 1: +5, +7, +1 (the short packet too); idx 2: 0xFFFFF then +3 wraps at 20 bits
    assert regs.read(1) == 13 and regs.read(2) == (0xFFFFF + 3) & 0xFFFFF
    assert regs.read(7) == 0xDEADBEEF & 0xFFFFF
    assert sw.counters["ctr"].read(1) == (3, len(INPUTS[0]) + len(INPUTS[1]) + len(INPUTS[6]))
    # out-of-range index: no read (field keeps its value), no write, no count
    assert int.from_bytes(outs[4][k + 2 : k + 6], "big") == 0xFFFFFFFF
    ck = [o[k + 6] for o in outs]
    assert ck[:4] == [0, 0, 1, 0]  # bad checksum flagged; ihl 6 is not checked
    ipo = 4 * len(ALGOS) + 8 + 8
    ip = outs[0][ipo : ipo + 20]
    assert ip[8] == 63 and csum(ip) == 0  # ttl decremented, checksum updated


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "externs checked on the engine only")
def test_externs_match_bmv2(tmp_path):
    path = tmp_path / "externs.json"
    path.write_text(json.dumps(program()))
    _, want = engine_run()
    with bmv2.SimpleSwitch(path, {0, 2}, [(0, d) for d in INPUTS], wait=2) as ss:
        got = ss.settle(expected=len(INPUTS))[2]
        regs = ss.cli(["register_read regs"], setup=False)
        ctr = ss.cli(["counter_read ctr 1"], setup=False)
    assert [g.hex() for g in got] == [w.hex() for w in want]
    assert regs.split("regs=")[1].split(",")[1].strip() == "13"
    nbytes = len(INPUTS[0]) + len(INPUTS[1]) + len(INPUTS[6])
    assert f"({nbytes} bytes, 3 packets)" in ctr
