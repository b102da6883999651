"""The slot algorithm (docs/PROTOCOL.md "Switch behaviour per slot"): duplicates, answers to
retransmissions, shadow copies across versions, sessions the control plane moves."""

import numpy as np
import pytest

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    COMPLETE,
    CONTRIB,
    DUPLICATE,
    EARLY,
    IMPAIRMENT,
    RESULT,
    WRONG_SESSION,
    check_result_addressing,
    contrib,
    random_cnat,
    random_fixed,
    received,
)
from worker import codec, wire

HOSTS = ["h1", "h2", "h3"]


def test_duplicates_are_not_added_twice_and_are_counted(fabric):
    topo = fabric.program([JobSpec(11, tuple(HOSTS), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(11)
    a, b, c = (random_fixed(rng, 1 << 27) for _ in range(3))
    before = fabric.counters()
    fabric.send("h1", contrib(topo, "h1", 11, session, 1, a, exp=120))
    # the same packet again, then a different payload with a larger exponent: both ignored
    fabric.send("h1", contrib(topo, "h1", 11, session, 1, a, exp=120))
    fabric.send("h1", contrib(topo, "h1", 11, session, 1, random_fixed(rng, 1 << 27), exp=150))
    fabric.send("h2", contrib(topo, "h2", 11, session, 1, b, exp=121))
    # two distinct children of three so far, whatever h1 repeated: nothing completes
    assert not any(fabric.quiet(HOSTS).values())
    fabric.send("h2", contrib(topo, "h2", 11, session, 1, b, exp=121))
    fabric.send("h3", contrib(topo, "h3", 11, session, 1, c, exp=119))
    for host in HOSTS:
        res = received(fabric, host)
        assert (res.agg.count, res.agg.exp) == (3, 121)
        assert np.array_equal(res.payload, codec.aggregate([a, b, c]))
    assert not any(fabric.quiet(HOSTS).values())
    delta = fabric.wait_counters(before, {("s1", "events", DUPLICATE): 3})
    assert delta.of("s1", "events") == {CONTRIB: 3, DUPLICATE: 3, COMPLETE: 1, RESULT: 1}
    assert delta.of("s1", "drops_in") == {}


def test_retransmission_after_completion_gets_the_stored_result_unicast(fabric):
    """Use 1 of slot 2 (version 1) completes; h2 lost its result and retransmits: only h2
    hears back, with the stored sum, each time."""
    topo = fabric.program([JobSpec(12, tuple(HOSTS), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(12)
    for use in (0, 1):
        parts = [random_cnat(rng, 29) for _ in HOSTS]
        for i, host in enumerate(HOSTS):
            fabric.send(host, contrib(topo, host, 12, session, 2, parts[i], use=use,
                                      exp=110 + i))
        first = {h: received(fabric, h) for h in HOSTS}
        exact = codec.aggregate(parts, codec.CNAT8)
        assert all(np.array_equal(r.payload, exact) for r in first.values())
    chunk = wire.use_chunk(1, 2, 4)
    before = fabric.counters()
    # h2 lost the result: it retransmits (twice, the same frame); only h2 hears back
    for _ in range(2):
        fabric.send("h2", contrib(topo, "h2", 12, session, 2, parts[1], use=1, exp=111))
        res = received(fabric, "h2")
        assert (res.agg.msg_type, res.agg.encoding, res.agg.slot, res.agg.version,
                res.agg.count, res.agg.exp, res.agg.chunk) == (
            wire.MSG_RESULT, wire.ENC_FIXED32, 2, 1, 3, 112, chunk)
        assert np.array_equal(res.payload, exact)
        check_result_addressing(topo, "h2", res)
    assert not any(fabric.quiet(HOSTS + ["h4"]).values())
    delta = fabric.wait_counters(before, {("s1", "events", ANSWERED): 2})
    assert delta.of("s1", "events") == {ANSWERED: 2}
    assert delta.of("s1", "drops_in") == {}


def test_versions_alternate_and_the_shadow_copy_answers_late_retransmissions(fabric):
    """One slot used six times (versions 0, 1, 0, 1, ...). In rounds 1 and 2 the straggler
    h2 first retransmits the previous round's contribution (it missed that result) while h1
    has moved on: the other version still holds the previous result and answers it."""
    topo = fabric.program([JobSpec(13, ("h1", "h2"), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(13)
    slot = 3
    prev = None              # (version, h2's contribution, result) of the previous round
    for rnd in range(6):
        version = rnd % 2
        a, b = random_fixed(rng, 1 << 29), random_fixed(rng, 1 << 29)
        exact = codec.aggregate([a, b])
        chunk = wire.use_chunk(rnd, slot, 4)
        fabric.send("h1", contrib(topo, "h1", 13, session, slot, a, use=rnd))
        if prev is not None and rnd in (1, 2):
            pv, pb, presult = prev
            fabric.send("h2", contrib(topo, "h2", 13, session, slot, pb, use=rnd - 1))
            late = received(fabric, "h2")
            assert late.agg.version == pv and late.agg.chunk == wire.use_chunk(rnd - 1, slot, 4)
            assert np.array_equal(late.payload, presult), f"round {rnd}: shadow copy lost"
            assert not fabric.quiet(["h1"])["h1"], "the answer to a retransmission is unicast"
        fabric.send("h2", contrib(topo, "h2", 13, session, slot, b, use=rnd))
        for host in ("h1", "h2"):
            res = received(fabric, host)
            assert (res.agg.version, res.agg.chunk, res.agg.count) == (version, chunk, 2)
            assert np.array_equal(res.payload, exact), f"round {rnd} at {host}"
        prev = (version, b, exact)
    assert not any(fabric.quiet(["h1", "h2"]).values())


def test_moving_the_job_to_a_new_session_starts_its_slots_afresh(fabric):
    """When the control plane moves the job to another session, a slot half-filled (or
    complete) in the old one starts afresh at use 0: the old contribution is neither added
    nor taken as a duplicate, nor answered as complete; the old session's packets are
    dropped as WRONG_SESSION, and the new session's numbering starts over (use 1 before
    use 0 is EARLY)."""
    topo = fabric.program([JobSpec(14, ("h1", "h2"), slots=4)])
    s1 = fabric.session()
    rng = np.random.default_rng(14)
    old = random_fixed(rng, 1 << 29)
    fabric.send("h1", contrib(topo, "h1", 14, s1, 0, old, exp=150))
    s2 = fabric.session()
    a, b = random_fixed(rng, 1 << 29), random_fixed(rng, 1 << 29)
    before = fabric.counters()
    fabric.send("h2", contrib(topo, "h2", 14, s1, 0, old, exp=150))    # would complete s1
    fabric.send("h1", contrib(topo, "h1", 14, s2, 0, a, exp=120))
    assert not any(fabric.quiet(["h1", "h2"]).values()), "h1 of the new session is alone"
    fabric.send("h2", contrib(topo, "h2", 14, s2, 0, b, exp=125))
    for host in ("h1", "h2"):
        res = received(fabric, host)
        assert (res.agg.session, res.agg.exp, res.agg.count, res.agg.chunk) == (s2, 125, 2, 0)
        assert np.array_equal(res.payload, codec.aggregate([a, b]))
    # Complete in s2; in s3 the slot's first contribution is new, not a retransmission.
    s3 = fabric.session()
    c, d = random_cnat(rng, 30), random_cnat(rng, 30)
    fabric.send("h2", contrib(topo, "h2", 14, s2, 0, b, exp=125))     # s2's retransmission
    fabric.send("h1", contrib(topo, "h1", 14, s3, 0, c, use=1, exp=90))
    fabric.send("h1", contrib(topo, "h1", 14, s3, 0, c, exp=90))
    assert not any(fabric.quiet(["h1", "h2"]).values()), "answered with the old session's sum"
    fabric.send("h2", contrib(topo, "h2", 14, s3, 0, d, exp=91))
    for host in ("h1", "h2"):
        res = received(fabric, host)
        assert (res.agg.session, res.agg.exp, res.agg.chunk) == (s3, 91, 0)
        assert np.array_equal(res.payload, codec.aggregate([c, d], codec.CNAT8))
    assert not any(fabric.quiet(["h1", "h2"]).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 2})
    assert delta.of("s1", "events") == {CONTRIB: 4, COMPLETE: 2, RESULT: 2}
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 2, EARLY: 1}


@pytest.mark.uncompared
def test_results_lost_on_the_way_are_recovered_by_retransmission(fabric):
    """With 30% loss on the switch's host links, workers retransmit what they lack until
    every one of them has every result: each retransmission is answered with the stored sum,
    so all results are exact however many copies the impairment dropped (contract 6)."""
    hosts = ["h1", "h2", "h3", "h4"]
    topo = fabric.program([JobSpec(15, tuple(hosts), slots=16)], loss=0.3)
    session = fabric.session()
    rng = np.random.default_rng(15)
    slots = range(16)
    parts = {s: [random_fixed(rng, 1 << 28) for _ in hosts] for s in slots}
    ports = {h: topo.attachment(h).port for h in hosts}
    before = fabric.counters("s1")
    have: dict[str, dict[int, np.ndarray]] = {h: {} for h in hosts}
    got = dict.fromkeys(hosts, 0)
    outputs = 0

    def drain():
        """Waits until the switch has sent or dropped every expected copy, then reads what
        reached each host."""
        def handled(d):
            return (sum(d.of("s1", "port_tx").get(p, 0) for p in ports.values())
                    + d.of("s1", "drops_out").get(IMPAIRMENT, 0))
        delta = fabric.wait_for(before, lambda d: handled(d) >= outputs, switches=("s1",))
        assert handled(delta) == outputs
        for h in hosts:
            while got[h] < delta.of("s1", "port_tx").get(ports[h], 0):
                res = received(fabric, h)
                got[h] += 1
                assert res.agg.slot not in have[h], "a result reached a worker that had it"
                have[h][res.agg.slot] = res.payload
        return delta

    for s in slots:
        for h, p in zip(hosts, parts[s], strict=True):
            fabric.send(h, contrib(topo, h, 15, session, s, p))
    outputs += len(slots) * len(hosts)
    drain()
    retransmitted = 0
    for _ in range(40):         # 0.3^40: never all lost
        missing = [(h, s) for h in hosts for s in slots if s not in have[h]]
        if not missing:
            break
        for h, s in missing:
            fabric.send(h, contrib(topo, h, 15, session, s, parts[s][hosts.index(h)]))
        retransmitted += len(missing)
        outputs += len(missing)
        delta = drain()
    assert all(len(have[h]) == len(slots) for h in hosts)
    assert retransmitted > 0, "30% loss dropped none of 64 results"
    for s in slots:
        exact = codec.aggregate(parts[s])
        assert all(np.array_equal(have[h][s], exact) for h in hosts), f"slot {s}"
    assert delta.of("s1", "events") == {CONTRIB: 4 * len(slots), COMPLETE: len(slots),
                                        RESULT: len(slots), ANSWERED: retransmitted}
    assert delta.of("s1", "drops_out") == {IMPAIRMENT: outputs - sum(got.values())}
