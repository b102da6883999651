"""Everything that is not aggregated is routed as plain IPv4 on the controller's routes; what
cannot be routed is dropped and counted; the per-port impairment drops at its configured rate."""

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from tests.dataplane.packets import (
    BAD_LENGTH,
    FORWARDED,
    IMPAIRMENT,
    NO_ROUTE,
    NOT_IPV4,
    TTL_EXPIRED,
)

LOSS = 0.25
IMPAIRED_PACKETS = 2000


def udp_frame(topo, src, dst_ip, ttl=64, payload=b"natswitch"):
    h = topo.host(src)
    sw = topo.switch(topo.attachment(src).node)
    return bytes(Ether(src=h.mac, dst=sw.mac) / IP(src=h.ip, dst=dst_ip, ttl=ttl)
                 / UDP(sport=4242, dport=4243) / Raw(payload))


def test_routes_within_a_leaf_and_across_the_spine(fabric):
    topo = fabric.program([])
    before = fabric.counters()
    for dst, hops in (("h2", 1), ("h33", 3)):
        d = topo.host(dst)
        sent = Ether(udp_frame(topo, "h1", d.ip, ttl=17, payload=b"to " + dst.encode()))
        fabric.send("h1", bytes(sent))
        frame = fabric.recv(dst)
        assert frame is not None, f"nothing routed to {dst}"
        got = Ether(frame)
        last = topo.switch(topo.attachment(dst).node)
        assert (got.src, got.dst) == (last.mac, d.mac)
        assert got[IP].ttl == 17 - hops
        assert (got[IP].src, got[IP].dst) == (sent[IP].src, sent[IP].dst)
        assert bytes(got[UDP]) == bytes(sent[UDP])
        fresh = got[IP].copy()
        fresh.chksum = None
        assert IP(bytes(fresh)).chksum == got[IP].chksum, "IPv4 checksum not updated"
    delta = fabric.wait_counters(before, {("s2", "events", FORWARDED): 1})
    for s, n in (("s1", 2), ("s2", 1), ("s3", 1)):
        assert delta.of(s, "events") == {FORWARDED: n}, s
        assert delta.of(s, "drops_in") == {}
    assert not any(fabric.quiet(["h1", "h2", "h3", "h33", "h34"]).values())


def test_unroutable_packets_are_dropped_and_counted(fabric):
    topo = fabric.program([])
    h1 = topo.host("h1")
    s1 = topo.switch("s1")
    cases = [
        ("s1", TTL_EXPIRED, udp_frame(topo, "h1", topo.host("h2").ip, ttl=1)),
        ("s1", TTL_EXPIRED, udp_frame(topo, "h1", topo.host("h2").ip, ttl=0)),
        # two hops left: s1 forwards it, the spine cannot
        ("s3", TTL_EXPIRED, udp_frame(topo, "h1", topo.host("h33").ip, ttl=2)),
        ("s1", NO_ROUTE, udp_frame(topo, "h1", "192.0.2.1")),
        ("s1", NO_ROUTE, udp_frame(topo, "h1", topo.service_ip)),
        ("s1", NOT_IPV4, bytes(Ether(src=h1.mac, dst="ff:ff:ff:ff:ff:ff")
                               / ARP(psrc=h1.ip, pdst=topo.host("h2").ip, hwsrc=h1.mac))),
        ("s1", NOT_IPV4, bytes(Ether(src=h1.mac, dst=s1.mac) / IPv6() / UDP() / Raw(b"x"))),
        # an IPv4 header cut short, and a UDP header cut short
        ("s1", BAD_LENGTH, udp_frame(topo, "h1", topo.host("h2").ip)[:14 + 12]),
        ("s1", BAD_LENGTH, udp_frame(topo, "h1", topo.host("h2").ip)[:14 + 20 + 4]),
    ]
    for i, (switch, reason, frame) in enumerate(cases):
        before = fabric.counters(switch)
        fabric.send("h1", frame)
        delta = fabric.wait_counters(before, {(switch, "drops_in", reason): 1},
                                     switches=(switch,))
        assert delta.of(switch, "drops_in") == {reason: 1}, f"case {i}"
    assert not any(fabric.quiet(["h1", "h2", "h33"]).values())


@pytest.mark.uncompared
def test_impairment_drops_at_the_configured_rate_and_counts(fabric):
    """LOSS on every link: the controller sets threshold LOSS * 2^16 per port, the switch
    drops a packet it sends when a 16-bit random number is below it. IMPAIRED_PACKETS from h1
    to h2: the share dropped is LOSS within 5 * sqrt(LOSS (1 - LOSS) / IMPAIRED_PACKETS)
    (= 0.048; a false failure about once in 10^6 runs), and every packet is either received
    or counted as an IMPAIRMENT drop at egress."""
    topo = fabric.program([], loss=LOSS)
    port = topo.attachment("h2").port
    before = fabric.counters("s1")

    def handled(delta):
        return (delta.of("s1", "port_tx").get(port, 0)
                + delta.of("s1", "drops_out").get(IMPAIRMENT, 0))

    sent = received = 0
    while sent < IMPAIRED_PACKETS:
        # in bursts, so that no queue on the way overflows uncounted
        burst = min(200, IMPAIRED_PACKETS - sent)
        for k in range(burst):
            fabric.send("h1", udp_frame(topo, "h1", topo.host("h2").ip,
                                        payload=b"%d" % (sent + k)))
        sent += burst
        delta = fabric.wait_for(before, lambda d, n=sent: handled(d) >= n, switches=("s1",))
        assert handled(delta) == sent, f"{sent} sent, {handled(delta)} sent on or dropped"
        while received < delta.of("s1", "port_tx").get(port, 0):
            assert fabric.recv("h2") is not None, "a packet counted as sent never arrived"
            received += 1
    assert fabric.recv("h2", 0.2) is None
    dropped = delta.of("s1", "drops_out").get(IMPAIRMENT, 0)
    assert received + dropped == IMPAIRED_PACKETS
    assert delta.of("s1", "drops_in") == {}
    tol = 5 * np.sqrt(LOSS * (1 - LOSS) / IMPAIRED_PACKETS)
    assert abs(dropped / IMPAIRED_PACKETS - LOSS) <= tol, dropped / IMPAIRED_PACKETS
