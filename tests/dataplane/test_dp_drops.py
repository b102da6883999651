"""What the program refuses: dropped, counted by reason in the drops counter (read with
controller/stats.py), never absorbed into a slot; the switch keeps aggregating afterwards."""

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

from controller import stats as S
from controller.topology import JobSpec
from tests.dataplane.packets import (
    BAD_CHECKSUM,
    BAD_ENCODING,
    BAD_LENGTH,
    BAD_RESULT_PORT,
    BAD_SLOT,
    BAD_TYPE,
    BAD_UDP_CHECKSUM,
    BAD_VERSION,
    COMPLETE,
    CONTRIB,
    EARLY,
    ELEMS,
    FOREIGN_PORT,
    RESULT,
    UNKNOWN_JOB,
    WRONG_SESSION,
    contrib,
    contrib_pkt,
    random_cnat,
    random_fixed,
    received,
    sparse,
    with_bad_checksum,
)
from worker import codec, wire

HOSTS = ["h1", "h2", "h3", "h4"]


def finish_slot(fabric, topo, job, session, slot, hosts, rng):
    """Every host contributes to the slot; each must receive the exact sum of these."""
    parts = [random_fixed(rng, 1 << 28) for _ in hosts]
    for host, part in zip(hosts, parts, strict=True):
        fabric.send(host, contrib(topo, host, job, session, slot, part))
    for host in hosts:
        res = received(fabric, host)
        assert res.agg.count == len(hosts)
        assert np.array_equal(res.payload, codec.aggregate(parts)), "a dropped packet was added"


def test_foreign_port_and_unknown_job_are_dropped_and_counted(fabric):
    topo = fabric.program([JobSpec(21, ("h1", "h2"), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(21)
    before = fabric.counters()
    fabric.send("h3", contrib(topo, "h3", 21, session, 0, random_fixed(rng, 1 << 28)))
    # a port outside the job is named first, whatever the session says
    fabric.send("h3", contrib(topo, "h3", 21, session + 1, 0, random_fixed(rng, 1 << 28)))
    fabric.send("h1", contrib(topo, "h1", 999, session, 0, random_fixed(rng, 1 << 28)))
    fabric.send("h2", contrib(topo, "h2", 998, session, 0, random_cnat(rng, 20)))
    assert not any(fabric.quiet(HOSTS).values())
    delta = fabric.wait_counters(before, {("s1", "drops_in", UNKNOWN_JOB): 2})
    assert delta.of("s1", "drops_in") == {FOREIGN_PORT: 2, UNKNOWN_JOB: 2}
    assert delta.of("s1", "events") == {}
    # As `controller/main.py stats` shows them.
    text = S.format_stats(S.read_stats(fabric.p4rt["s1"]), topo)
    assert "FOREIGN_PORT" in text and "UNKNOWN_JOB" in text
    finish_slot(fabric, topo, 21, session, 0, ["h1", "h2"], rng)


def malformed(topo, job, session, rng):
    """(reason, packet) pairs: each a contribution from h1 to slot 0, broken one way (the
    slot untouched: its next use is use 0)."""
    good = random_fixed(rng, 1 << 28)

    def pkt(values=good, **fields):
        return contrib_pkt(topo, "h1", job, session, 0, values, **fields)

    def other_session(delta, **fields):
        return contrib_pkt(topo, "h1", job, (session + delta) & 0xFFFF, 0, good, **fields)

    def resized(p, udp_len=None, cut=0):
        """p with UDP and IPv4 lengths recomputed (or the UDP length forced), less `cut`
        trailing bytes; the IPv4 checksum stays valid."""
        p[UDP].len = udp_len
        p[UDP].chksum = 0
        p[IP].len = None
        p[IP].chksum = None
        raw = bytes(p)
        return raw[:len(raw) - cut] if cut else raw

    short = pkt(values=good[:-1])                     # 167 values, lengths say so
    long_cnat = pkt(values=np.zeros(ELEMS + 1, np.uint8))
    wrong_len = pkt()
    cnat_with_fixed_payload = pkt(encoding=wire.ENC_CNAT8)
    head_only = contrib_pkt(topo, "h1", job, session, 0, good)
    head_only[wire.Agg].remove_payload()
    cut_header = bytes(head_only)[:14 + 20 + 8 + 10]   # 10 of the 16 header bytes
    bad_sum = pkt()
    bad_sum[IP].chksum = 0x1234
    return [
        (BAD_LENGTH, resized(short)),
        (BAD_LENGTH, resized(long_cnat)),
        (BAD_LENGTH, resized(wrong_len, udp_len=8 + 16 + ELEMS)),
        (BAD_LENGTH, resized(cnat_with_fixed_payload)),
        (BAD_LENGTH, resized(pkt(), cut=5)),          # frame cut short of its UDP length
        (BAD_LENGTH, cut_header),
        (BAD_ENCODING, bytes(pkt(encoding=wire.ENC_FLOAT32))),
        (BAD_ENCODING, bytes(pkt(encoding=0xFF))),
        (BAD_VERSION, bytes(pkt(version=2))),
        (BAD_VERSION, bytes(pkt(version=255))),
        (BAD_SLOT, bytes(contrib_pkt(topo, "h1", job, session, 4, good))),   # = num_slots
        (BAD_SLOT, bytes(contrib_pkt(topo, "h1", job, session, 0xFFFF, good))),
        (BAD_TYPE, bytes(pkt(msg_type=0))),
        (BAD_TYPE, bytes(pkt(msg_type=5))),
        # a well-formed sparse contribution to this dense job (docs/PROTOCOL.md "Sparse jobs")
        (BAD_TYPE, sparse(topo, "h1", job, session, 0, 0, 1, good)),
        (BAD_RESULT_PORT, bytes(pkt(msg_type=wire.MSG_RESULT))),   # the root has no parent
        (BAD_CHECKSUM, bytes(bad_sum)),
        # one checksum-error bit for both sums: the IPv4 header's is named first, as it
        # is checked first; a bad UDP sum alone is the UDP checksum's
        (BAD_CHECKSUM, with_bad_checksum(bad_sum)),
        (BAD_UDP_CHECKSUM, with_bad_checksum(pkt())),
        # not the job's session (docs/PROTOCOL.md "Sessions"), checked before the exponent
        (WRONG_SESSION, bytes(other_session(1))),
        (WRONG_SESSION, bytes(other_session(-1, exp=255))),
        (WRONG_SESSION, bytes(other_session(-session))),      # 0: an untouched slot's
        # not the slot's next use, use 0 (docs/PROTOCOL.md "Uses")
        (EARLY, bytes(pkt(use=1))),
        (EARLY, bytes(pkt(use=2))),
        (EARLY, bytes(pkt(version=1))),                        # use 0 in version 1
        (EARLY, bytes(pkt(chunk=1))),                          # slot 1's use 0
        (EARLY, bytes(pkt(chunk=0xFFFFFFFF))),
    ]


def test_malformed_packets_are_dropped_by_reason_and_the_switch_keeps_working(fabric):
    topo = fabric.program([JobSpec(22, ("h1", "h2"), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(22)
    cases = malformed(topo, 22, session, rng)
    before = fabric.counters("s1")
    for i, (reason, frame) in enumerate(cases):
        fabric.send("h1", frame)
        delta = fabric.wait_counters(before, {("s1", "drops_in", reason): 1}, switches=("s1",))
        assert delta.of("s1", "drops_in") == {reason: 1}, f"case {i}: expected reason {reason}"
        assert delta.of("s1", "events") == {}, f"case {i}"
        before = before + delta
    assert not any(fabric.quiet(HOSTS).values())
    # Slot 0 saw none of them: h1's first real contribution is not a duplicate.
    before = fabric.counters("s1")
    finish_slot(fabric, topo, 22, session, 0, ["h1", "h2"], rng)
    finish_slot(fabric, topo, 22, session, 3, ["h1", "h2"], rng)
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 2}, switches=("s1",))
    assert delta.of("s1", "events") == {CONTRIB: 4, COMPLETE: 2, RESULT: 2}
    assert delta.of("s1", "drops_in") == {}


def summing_to_zero(p):
    """p with its first element changed so that its UDP data sums to 0xffff (checksum 0)."""
    c = p.copy()
    c[UDP].chksum = None
    want = IP(bytes(c[IP]))[UDP].chksum
    v = int(c[wire.Fixed32].values[0]) & 0xFFFFFFFF
    lo = (v & 0xFFFF) + want                   # adding the checksum makes the sum 0xffff
    lo = (lo & 0xFFFF) + (lo >> 16)
    v = (v & 0xFFFF0000) | lo
    c[wire.Fixed32].values = [v - (1 << 32) if v >= 1 << 31 else v,
                              *c[wire.Fixed32].values[1:]]
    c[UDP].chksum = None
    assert IP(bytes(c[IP]))[UDP].chksum == 0xFFFF  # RFC 768: a sum of 0 travels as 0xffff
    return c


def test_a_udp_checksum_of_zero_passes_as_0_or_0xffff(fabric):
    """docs/PROTOCOL.md "Integrity": what is checked is that everything sums to 0xffff, so
    a packet whose checksum comes out 0 passes with either form of it."""
    topo = fabric.program([JobSpec(24, ("h1", "h2"), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(24)
    parts, frames = [], []
    for host, field in (("h1", 0xFFFF), ("h2", 0x0000)):
        p = summing_to_zero(contrib_pkt(topo, host, 24, session, 0, random_fixed(rng, 1 << 28)))
        p[UDP].chksum = field
        parts.append(np.array(p[wire.Fixed32].values, np.int32))
        frames.append((host, bytes(p)))
    before = fabric.counters("s1")
    for host, frame in frames:
        fabric.send(host, frame)
    for host in ("h1", "h2"):
        res = received(fabric, host)
        assert np.array_equal(res.payload, codec.aggregate(parts))
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 1}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {}


def test_non_aggregation_garbage_on_the_port_is_not_taken_for_a_contribution(fabric):
    """UDP to another port with an AGG-looking payload is routed like any traffic (here: to
    a host), never aggregated."""
    topo = fabric.program([JobSpec(23, ("h1", "h2"), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(23)
    p = contrib_pkt(topo, "h1", 23, session, 0, random_fixed(rng, 1 << 20))
    h2 = topo.host("h2")
    p[IP].dst = h2.ip
    p[IP].chksum = None
    p[UDP].dport = 20034
    body = bytes(p[wire.Agg])
    p[UDP].remove_payload()
    p = p / Raw(body)
    fabric.send("h1", bytes(p))
    routed = fabric.recv("h2")
    assert routed is not None and routed.endswith(body)
    assert not any(fabric.quiet(HOSTS).values())
    finish_slot(fabric, topo, 23, session, 0, ["h1", "h2"], rng)
