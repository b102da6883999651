"""DESIGN contract 4: a packet built with worker/wire.py's Scapy layers is accepted by the
compiled program, and the switch's reply dissects with the same layers to the expected fields."""

import re
from pathlib import Path

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ELEMS,
    check_result_addressing,
    check_sparse_addressing,
    contrib,
    dissect,
    dissect_sparse,
)
from worker import codec, wire


def test_scapy_contribution_in_scapy_result_out(fabric):
    """Use 1 of slot 5 (version 1, chunk 1 * 8 + 5), after use 0 went the usual way."""
    topo = fabric.program([JobSpec(41, ("h1", "h2", "h3"), slots=8)])
    session = fabric.session()
    rng = np.random.default_rng(41)
    for host in ("h1", "h2", "h3"):
        fabric.send(host, contrib(topo, host, 41, session, 5, np.zeros(ELEMS, np.int32)))
    fabric.expect(["h1", "h2", "h3"])
    values = [rng.integers(-(2**28), 2**28, ELEMS).astype(np.int32) for _ in range(3)]
    for i, (host, exp) in enumerate(zip(("h1", "h2", "h3"), (120, 133, 127), strict=True)):
        h = topo.host(host)
        pkt = (Ether(src=h.mac, dst=topo.service_mac) / IP(src=h.ip, dst=topo.service_ip)
               / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
               / wire.Agg(msg_type=wire.MSG_CONTRIB, encoding=wire.ENC_FIXED32, job_id=41,
                          session=session, slot=5, version=1, exp=exp, count=1,
                          chunk=13)
               / wire.Fixed32(values=values[i].tolist()))
        fabric.send(host, bytes(pkt))
    got = fabric.expect(["h1", "h2", "h3"])
    for host, frame in got.items():
        pkt = Ether(frame)
        assert pkt.haslayer(wire.Agg) and pkt.haslayer(wire.Fixed32), pkt.summary()
        agg = pkt[wire.Agg]
        # The use's chunk number is echoed; exp is the max; count the workers.
        assert (agg.msg_type, agg.encoding, agg.job_id, agg.session, agg.slot, agg.version,
                agg.exp, agg.count, agg.flags, agg.chunk) == (
            wire.MSG_RESULT, wire.ENC_FIXED32, 41, session, 5, 1, 133, 3, 0, 13)
        assert pkt[wire.Fixed32].values == codec.aggregate(values).tolist()
        check_result_addressing(topo, host, dissect(frame))
        assert len(frame) == 14 + 20 + 8 + 16 + 4 * ELEMS
    assert all(not v for v in fabric.quiet([f"h{i}" for i in range(1, 6)]).values())


P4 = Path(__file__).resolve().parents[2] / "p4src" / "include"


def test_block_header_and_constants_agree_with_p4():
    """worker/wire.py's Block layer and sparse constants are the program's block_h and
    constants (the header's fields, widths and order; message types, flags, NO_BLOCK), and
    the refusals' message types and drop reasons."""
    text = (P4 / "headers.p4").read_text()
    body = re.search(r"header block_h \{(.*?)\}", text, re.S).group(1)
    p4 = [(name, int(bits)) for bits, name in re.findall(r"bit<(\d+)>\s+(\w+);", body)]
    assert [(f.name, 8 * f.sz) for f in wire.Block.fields_desc] == p4
    number = r"const bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-f]+|\d+);"
    consts = {k: int(v, 0) for k, v in re.findall(number, (P4 / "constants.p4").read_text())}
    assert (consts["MSG_SPARSE_CONTRIB"], consts["MSG_SPARSE_RESULT"]) == (
        wire.MSG_SPARSE_CONTRIB, wire.MSG_SPARSE_RESULT)
    assert (consts["FLAG_PRIME"], consts["FLAG_EMPTY"], consts["NO_BLOCK"]) == (
        wire.FLAG_PRIME, wire.FLAG_EMPTY, wire.NO_BLOCK)
    # refusals: their message types and the drop reasons they name
    assert (consts["MSG_REFUSED"], consts["MSG_SPARSE_REFUSED"]) == (
        wire.MSG_REFUSED, wire.MSG_SPARSE_REFUSED)
    assert {consts["DROP_" + name]: name for name in wire.REFUSALS.values()} == wire.REFUSALS


def test_scapy_sparse_packets_in_scapy_results_out(fabric):
    """Sparse contributions built from worker/wire.py's layers (Agg / Block / payload, and
    EMPTY ones with no payload) are taken by the program, and its SPARSE_RESULTs dissect with
    the same layers: a prime's result as Agg / Block with nothing after it, a data use's as
    Agg / Block / Fixed32 with the sum. Slot 5 of 8: the prime is its use 0 (chunk 5,
    version 0), the data its use 1 (chunk 13, version 1)."""
    hosts = ("h1", "h2", "h3")
    topo = fabric.program([JobSpec(42, hosts, slots=8, encoding="cnat8", mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(42)

    def send(host, agg, block, payload=None):
        h = topo.host(host)
        pkt = (Ether(src=h.mac, dst=topo.service_mac) / IP(src=h.ip, dst=topo.service_ip)
               / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT) / agg / block)
        fabric.send(host, bytes(pkt if payload is None else pkt / payload))

    def agg(**kw):
        return wire.Agg(msg_type=wire.MSG_SPARSE_CONTRIB, job_id=42, session=session, slot=5,
                        count=1, **kw)

    for host, nxt, exp in zip(hosts, (9, 4, wire.NO_BLOCK), (140, 133, 0), strict=True):
        send(host, agg(encoding=wire.ENC_FIXED32, version=0, exp=exp, chunk=5,
                       flags=wire.FLAG_PRIME | wire.FLAG_EMPTY), wire.Block(block=20, next=nxt))
    for frame in fabric.expect(hosts).values():
        pkt = Ether(frame)
        a, b = pkt[wire.Agg], pkt[wire.Block]
        assert (a.msg_type, a.encoding, a.job_id, a.session, a.slot, a.version, a.exp,
                a.count, a.flags, a.chunk) == (wire.MSG_SPARSE_RESULT, wire.ENC_CNAT8, 42,
                                               session, 5, 0, 133, 3,
                                               wire.FLAG_PRIME | wire.FLAG_EMPTY, 5)
        assert (b.block, b.next) == (20, 4) and not b.payload
        assert len(frame) == 14 + 20 + 8 + 16 + 8
    codes = rng.integers(0, 20, ELEMS).astype(np.uint8)
    send("h2", agg(encoding=wire.ENC_CNAT8, version=1, exp=140, chunk=13),
         wire.Block(block=4, next=9), wire.Cnat8(codes=codes.tolist()))
    for host, nxt, exp in (("h1", 9, 140), ("h3", wire.NO_BLOCK, 0)):
        send(host, agg(encoding=wire.ENC_CNAT8, version=1, exp=exp, chunk=13,
                       flags=wire.FLAG_EMPTY), wire.Block(block=4, next=nxt))
    for host, frame in fabric.expect(hosts).items():
        pkt = Ether(frame)
        a, b = pkt[wire.Agg], pkt[wire.Block]
        assert (a.msg_type, a.encoding, a.version, a.exp, a.count, a.flags, a.chunk) == (
            wire.MSG_SPARSE_RESULT, wire.ENC_CNAT8, 1, 140, 3, 0, 13)
        assert (b.block, b.next) == (4, 9)
        # one worker's codes: their sum is a power of two already, re-compressed unchanged
        assert pkt[wire.Cnat8].codes == codes.tolist()
        assert len(frame) == 14 + 20 + 8 + 16 + 8 + ELEMS
        check_sparse_addressing(topo, host, dissect_sparse(frame))
    assert all(not v for v in fabric.quiet([f"h{i}" for i in range(1, 6)]).values())
