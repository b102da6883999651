"""Headers of many byte-wide fields: emitted and checksummed byte-exact, against values
computed here; every multicast copy egresses on its own fields."""

import random

from softswitch import Switch
from softswitch.hashes import csum16
from tests.p4 import kit
from tests.p4.kit import assign, expr, extract, field, hexstr

N = 300  # codes per packet
PORTS = (1, 2, 3)


def program() -> dict:
    """s (a 16-bit checksum, an 8-bit tag) then N 8-bit codes; ingress adds 1 to code 7
    and multicasts; egress writes the port into the tag and code 0 and adds 1 to code 1;
    the checksum covers the codes and is recomputed at egress."""
    p = kit.Program()
    p.header("s", [("ck", 16), ("tag", 8)])
    p.header("c", [(f"c{i}", 8) for i in range(N)])
    p.state("start", [extract("s"), extract("c")])
    p.calculations.append({"name": "codes_csum", "id": 0, "algo": "csum16",
                           "input": [{"type": "header", "value": "c"}]})
    p.checksums.append({"name": "ck", "id": 0, "target": ["s", "ck"], "type": "generic",
                        "calculation": "codes_csum", "verify": False, "update": True})
    bump = assign(field("c", "c7"), expr("&", expr("+", field("c", "c7"), hexstr(1)),
                                         hexstr(0xFF)))
    p.action("bump", [bump, assign(field("standard_metadata", "mcast_grp"), hexstr(1))])
    p.call("ingress", "bump_t", "bump")
    port = field("standard_metadata", "egress_port")
    c1 = field("c", "c1")  # a copy sharing fields with another would add 1 twice
    p.action("mark", [assign(field("s", "tag"), expr("&", port, hexstr(0xFF))),
                      assign(field("c", "c0"), expr("&", port, hexstr(0xFF))),
                      assign(c1, expr("&", expr("+", c1, hexstr(1)), hexstr(0xFF)))])
    p.call("egress", "mark_t", "mark")
    return p.json()


def expected(pkt: bytes, port: int) -> bytes:
    codes = bytearray(pkt[3:3 + N])
    codes[7] = (codes[7] + 1) & 0xFF
    codes[0] = port
    codes[1] = (codes[1] + 1) & 0xFF
    return csum16(bytes(codes)).to_bytes(2, "big") + bytes([port]) + bytes(codes) + \
        pkt[3 + N:]


def test_byte_fields_are_emitted_and_checksummed_exactly_per_copy():
    for vectorize in (True, False):
        sw = Switch(vectorize=vectorize, native=False)
        sw.load(program())
        sw.pre.create(1, [(p, 0) for p in PORTS])
        rng = random.Random(3)
        for _ in range(50):
            pkt = bytes(rng.getrandbits(8) for _ in range(3 + N + rng.randint(0, 20)))
            out = sw.process(9, pkt)
            # each copy carries its own port in the tag and code 0: no copy shares fields
            assert out == [(p, expected(pkt, p)) for p in PORTS]
        assert sw.stats["errors"] == 0
