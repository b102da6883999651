"""Contract 4: a packet built with the Scapy layers is accepted by the compiled program, and
the switch's reply dissects with the same layers to the expected fields."""

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.topology import JobSpec, star
from tests.netsim import SwitchNetwork, softswitch_missing
from worker import codec, wire

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")


@pytest.fixture
def net():
    topo = star(3).with_jobs([JobSpec(5, ("h1", "h2"), slots=8, encoding="fixed32")])
    return SwitchNetwork(topo)


def contribution(net, host, codes, exp, chunk, slot=3, version=1, session=9):
    h = net.topo.host(host)
    return (Ether(src=h.mac, dst=net.topo.service_mac)
            / IP(src=h.ip, dst=net.topo.service_ip)
            / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
            / wire.Agg(msg_type=wire.MSG_CONTRIB, encoding=wire.ENC_CNAT8, job_id=5,
                       session=session, slot=slot, version=version, exp=exp, count=1,
                       chunk=chunk)
            / wire.Cnat8(codes=[int(c) for c in codes]))


def test_scapy_packets_aggregate_and_the_result_dissects(net):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 20, wire.ELEMS).astype(np.uint8) | (rng.integers(0, 2, wire.ELEMS)
                                                           .astype(np.uint8) << 7)
    b = rng.integers(0, 20, wire.ELEMS).astype(np.uint8)
    net.ports["h1"].send(bytes(contribution(net, "h1", a, exp=120, chunk=77)))
    assert net.ports["h1"].recv(0.0) is None            # absorbed until h2 contributes
    net.ports["h2"].send(bytes(contribution(net, "h2", b, exp=131, chunk=77)))
    expected = codec.aggregate([a, b], codec.CNAT8)
    for host in ("h1", "h2"):
        frame = net.ports[host].recv(1.0)
        assert frame is not None, f"no result for {host}"
        pkt = Ether(frame)
        h = net.topo.host(host)
        assert (pkt.dst, pkt[IP].dst) == (h.mac, h.ip)
        assert (pkt.src, pkt[IP].src) == (net.topo.service_mac, net.topo.service_ip)
        assert pkt[UDP].sport == pkt[UDP].dport == wire.AGG_PORT and pkt[UDP].chksum == 0
        fresh = pkt[IP].copy()
        fresh.chksum = None
        assert IP(bytes(fresh)).chksum == pkt[IP].chksum
        agg = pkt[wire.Agg]
        assert (agg.msg_type, agg.encoding, agg.job_id, agg.session, agg.slot, agg.version,
                agg.exp, agg.count, agg.chunk) == (wire.MSG_RESULT, wire.ENC_FIXED32, 5, 9, 3,
                                                   1, 131, 2, 77)
        assert pkt[wire.Fixed32].values == expected.tolist()
    assert net.ports["h3"].recv(0.0) is None            # not in the job


def test_bad_length_and_foreign_port_are_dropped_and_counted(net):
    short = contribution(net, "h1", np.zeros(wire.ELEMS, np.uint8), exp=1, chunk=0)
    short[wire.Cnat8].codes = [0] * (wire.ELEMS - 1)
    net.ports["h1"].send(bytes(short))
    net.ports["h3"].send(bytes(contribution(net, "h3", np.zeros(wire.ELEMS, np.uint8),
                                            exp=1, chunk=0)))
    assert net.counter("s1", "NatIngress.drops", 4) == 1        # BAD_LENGTH
    assert net.counter("s1", "NatIngress.drops", 2) == 1        # FOREIGN_PORT
