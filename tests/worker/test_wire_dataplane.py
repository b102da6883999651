"""Contract 4: a packet built with the Scapy layers is accepted by the compiled program, and
the switch's reply dissects with the same layers to the expected fields."""

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from worker import codec, wire

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")


def network(encoding):
    topo = star(3).with_jobs([JobSpec(5, ("h1", "h2"), slots=8, encoding=encoding)])
    return SwitchNetwork(topo, session=9)


# Slot 3's first use in the session: version 0, chunk number 3 (wire.use_chunk).
CHUNK = wire.use_chunk(0, 3, 8)


def contribution(net, host, encoding, values, exp, chunk, slot=3, version=0, session=9):
    h = net.topo.host(host)
    payload = (wire.Cnat8(codes=values.tolist()) if encoding == wire.ENC_CNAT8
               else wire.Fixed32(values=values.tolist()))
    return (Ether(src=h.mac, dst=net.topo.service_mac)
            / IP(src=h.ip, dst=net.topo.service_ip)
            / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
            / wire.Agg(msg_type=wire.MSG_CONTRIB, encoding=encoding, job_id=5,
                       session=session, slot=slot, version=version, exp=exp, count=1,
                       chunk=chunk)
            / payload)


def results(net, hosts):
    """The result each host received, dissected; checks the addressing on the way."""
    out = []
    for host in hosts:
        frame = net.ports[host].recv(1.0)
        assert frame is not None, f"no result for {host}"
        pkt = Ether(frame)
        h = net.topo.host(host)
        assert (pkt.dst, pkt[IP].dst) == (h.mac, h.ip)
        assert (pkt.src, pkt[IP].src) == (net.topo.service_mac, net.topo.service_ip)
        assert pkt[UDP].sport == pkt[UDP].dport == wire.AGG_PORT
        assert net.framer(host).parse(frame) is not None, "the UDP checksum does not add up"
        fresh = pkt[IP].copy()
        fresh.chksum = None
        assert IP(bytes(fresh)).chksum == pkt[IP].chksum
        agg = pkt[wire.Agg]
        assert (agg.msg_type, agg.job_id, agg.session, agg.slot, agg.version, agg.exp,
                agg.count, agg.chunk) == (wire.MSG_RESULT, 5, 9, 3, 0, 131, 2, CHUNK)
        out.append(pkt)
    return out


def test_fixed32_contributions_sum_exactly():
    net = network("fixed32")
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-(2**29), 2**29, wire.ELEMS).astype(np.int32) for _ in range(2))
    net.ports["h1"].send(bytes(contribution(net, "h1", wire.ENC_FIXED32, a, 120, CHUNK)))
    assert net.ports["h1"].recv(0.0) is None            # absorbed until h2 contributes
    net.ports["h2"].send(bytes(contribution(net, "h2", wire.ENC_FIXED32, b, 131, CHUNK)))
    for pkt in results(net, ["h1", "h2"]):
        assert pkt[wire.Agg].encoding == wire.ENC_FIXED32
        assert pkt[wire.Fixed32].values == codec.aggregate([a, b]).tolist()
    assert net.ports["h3"].recv(0.0) is None            # not in the job


def test_cnat8_contributions_come_back_recompressed():
    net = network("cnat8")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 20, wire.ELEMS).astype(np.uint8) | (
        rng.integers(0, 2, wire.ELEMS).astype(np.uint8) << 7)
    b = rng.integers(0, 20, wire.ELEMS).astype(np.uint8)
    net.ports["h1"].send(bytes(contribution(net, "h1", wire.ENC_CNAT8, a, 120, CHUNK)))
    net.ports["h2"].send(bytes(contribution(net, "h2", wire.ENC_CNAT8, b, 131, CHUNK)))
    exact = codec.aggregate([a, b], codec.CNAT8).astype(np.int64)
    got = [np.array(p[wire.Cnat8].codes) for p in results(net, ["h1", "h2"])]
    assert np.array_equal(got[0], got[1])               # one multicast, the same codes
    value = codec.switch_decode_cnat8(got[0].astype(np.uint8)).astype(np.int64)
    # Each code is the exact sum rounded to one of the two powers of two around it.
    mag = np.abs(exact)
    assert np.all((value == 0) == (mag == 0))
    assert np.all(np.sign(value) == np.sign(exact))
    nz = mag > 0
    low = 2 ** np.floor(np.log2(mag[nz])).astype(np.int64)
    assert np.all((np.abs(value[nz]) == low) | (np.abs(value[nz]) == 2 * low))
    assert np.all(np.abs(value[nz])[mag[nz] == low] == low[mag[nz] == low])


def test_bad_length_and_foreign_port_are_dropped_and_counted():
    net = network("cnat8")
    zeros = np.zeros(wire.ELEMS, np.uint8)
    short = contribution(net, "h1", wire.ENC_CNAT8, zeros, exp=1, chunk=0)
    short[wire.Cnat8].codes = [0] * (wire.ELEMS - 1)
    net.ports["h1"].send(bytes(short))
    net.ports["h3"].send(bytes(contribution(net, "h3", wire.ENC_CNAT8, zeros, 1, 0)))
    assert net.counter("s1", "NatIngress.drops", 4) == 1        # BAD_LENGTH
    assert net.counter("s1", "NatIngress.drops", 2) == 1        # FOREIGN_PORT
