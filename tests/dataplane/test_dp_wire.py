"""DESIGN contract 4: a packet built with worker/wire.py's Scapy layers is accepted by the
compiled program, and the switch's reply dissects with the same layers to the expected fields."""

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.topology import JobSpec
from tests.dataplane.packets import ELEMS, check_result_addressing, dissect
from worker import codec, wire


def test_scapy_contribution_in_scapy_result_out(fabric):
    topo = fabric.program([JobSpec(41, ("h1", "h2", "h3"), slots=8)])
    session = fabric.session()
    rng = np.random.default_rng(41)
    values = [rng.integers(-(2**28), 2**28, ELEMS).astype(np.int32) for _ in range(3)]
    for i, (host, exp) in enumerate(zip(("h1", "h2", "h3"), (120, 133, 127), strict=True)):
        h = topo.host(host)
        pkt = (Ether(src=h.mac, dst=topo.service_mac) / IP(src=h.ip, dst=topo.service_ip)
               / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
               / wire.Agg(msg_type=wire.MSG_CONTRIB, encoding=wire.ENC_FIXED32, job_id=41,
                          session=session, slot=5, version=1, exp=exp, count=1,
                          chunk=9000)
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
            wire.MSG_RESULT, wire.ENC_FIXED32, 41, session, 5, 1, 133, 3, 0, 9000)
        assert pkt[wire.Fixed32].values == codec.aggregate(values).tolist()
        check_result_addressing(topo, host, dissect(frame))
        assert len(frame) == 14 + 20 + 8 + 16 + 4 * ELEMS
    assert all(not v for v in fabric.quiet([f"h{i}" for i in range(1, 6)]).values())
