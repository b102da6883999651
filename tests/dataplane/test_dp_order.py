"""What the switch must not take for a contribution (docs/PROTOCOL.md "Sessions", "Uses",
"Weights", "Integrity"): a packet of a session other than the one the control plane
installed, a replay of an older use, a sender's own count or an exponent above the job's
bound, a payload whose checksum does not add up. And the headroom of a tree whose switches
re-compress their partial sums."""

import numpy as np
from scapy.layers.inet import UDP

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    BAD_EXP,
    BAD_UDP_CHECKSUM,
    COMPLETE,
    CONTRIB,
    EARLY,
    RESULT,
    STALE,
    WRONG_SESSION,
    check_result_addressing,
    contrib,
    contrib_pkt,
    random_fixed,
    received,
    with_bad_checksum,
)
from worker import codec, wire

PAIR = ["h1", "h2"]


def test_another_session_neither_wipes_a_live_slot_nor_counts(fabric):
    """The job runs in the session the control plane installed: slot 0's use 1 (version 1)
    holds the previous result (a straggler still needs it), use 2 (version 0) is half full.
    Packets of other sessions arrive from a member's port, at the open use and at the
    shadow copy's: the session the job ran in before, a newer one and one half the space
    away by serial order, and 0 (what a slot no session touched reads). Each is dropped as
    WRONG_SESSION, nothing answered. The slot goes on: the straggler's retransmission is
    answered from the shadow copy, the open use completes with the exact sum."""
    topo = fabric.program([JobSpec(61, tuple(PAIR), slots=4)])
    earlier = fabric.session()
    s = fabric.session()
    rng = np.random.default_rng(61)
    p0, q0, p, q, a, b, old = (random_fixed(rng, 1 << 29) for _ in range(7))
    for use, parts in ((0, (p0, q0)), (1, (p, q))):
        for h, v in zip(PAIR, parts, strict=True):
            fabric.send(h, contrib(topo, h, 61, s, 0, v, use=use))
        previous = {h: received(fabric, h).payload for h in PAIR}
        assert all(np.array_equal(r, codec.aggregate(parts)) for r in previous.values())
    fabric.send("h1", contrib(topo, "h1", 61, s, 0, a, use=2))
    before = fabric.counters("s1")
    others = (earlier, (s + 1) & 0xFFFF, (s + 0x8000) & 0xFFFF, 0)
    for other in others:
        assert other != s
        for use in (2, 1):
            fabric.send("h2", contrib(topo, "h2", 61, other, 0, old, use=use))
    assert not any(fabric.quiet(PAIR).values()), "another session's packet was answered"
    # the straggler h2 lost the previous result: the shadow copy still has it
    fabric.send("h2", contrib(topo, "h2", 61, s, 0, q, use=1))
    again = received(fabric, "h2")
    assert (again.agg.chunk, again.agg.version, again.agg.session) == (
        wire.use_chunk(1, 0, 4), 1, s)
    assert np.array_equal(again.payload, codec.aggregate([p, q]))
    fabric.send("h2", contrib(topo, "h2", 61, s, 0, b, use=2))
    for h in PAIR:
        res = received(fabric, h)
        assert (res.agg.chunk, res.agg.count) == (wire.use_chunk(2, 0, 4), 2)
        assert np.array_equal(res.payload, codec.aggregate([a, b])), f"at {h}"
        check_result_addressing(topo, h, res)
    assert not any(fabric.quiet(PAIR).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 1}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 2 * len(others)}
    assert delta.of("s1", "events") == {CONTRIB: 1, ANSWERED: 1, COMPLETE: 1, RESULT: 1}


def test_the_installed_session_is_taken_whatever_its_number(fabric):
    """Sessions have no order: the control plane moves the job to a session that serial-
    number order puts before the one its slot last saw, and there the slot starts afresh
    at use 0 (a use 1 is EARLY; use 0 is neither a duplicate nor answered with the old
    session's sum), while the old session's packets are WRONG_SESSION. A dropped packet of
    the new session changes nothing: moved back, the slot still answers the old use."""
    topo = fabric.program([JobSpec(62, tuple(PAIR), slots=512)])
    s = fabric.session()
    rng = np.random.default_rng(62)
    a, b, c, d = (random_fixed(rng, 1 << 29) for _ in range(4))
    for h, v in zip(PAIR, (a, b), strict=True):
        fabric.send(h, contrib(topo, h, 62, s, 511, v))
    for h in PAIR:
        assert np.array_equal(received(fabric, h).payload, codec.aggregate([a, b]))
    far = (s + 40000) & 0xFFFF                  # "older" than s by serial order
    fabric.set_sessions({62: far})
    before = fabric.counters("s1")
    fabric.send("h2", contrib(topo, "h2", 62, s, 511, b))             # the old session
    fabric.send("h1", contrib(topo, "h1", 62, far, 511, c, use=1))    # not the slot's next
    delta = fabric.wait_counters(before, {("s1", "drops_in", EARLY): 1}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 1, EARLY: 1}
    assert not any(fabric.quiet(PAIR).values())
    # The dropped packets left the slot as it was: in its old session it answers use 0.
    fabric.set_sessions({62: s})
    fabric.send("h2", contrib(topo, "h2", 62, s, 511, b))
    assert np.array_equal(received(fabric, "h2").payload, codec.aggregate([a, b]))
    fabric.set_sessions({62: far})
    fabric.send("h1", contrib(topo, "h1", 62, far, 511, c))
    assert not any(fabric.quiet(PAIR).values()), "answered with the old session's sum"
    fabric.send("h2", contrib(topo, "h2", 62, far, 511, d))
    for h in PAIR:
        res = received(fabric, h)
        assert (res.agg.session, res.agg.chunk, res.agg.version) == (far, 511, 0)
        assert np.array_equal(res.payload, codec.aggregate([c, d]))
    assert not any(fabric.quiet(PAIR).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 1}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 1, EARLY: 1}
    assert delta.of("s1", "events") == {ANSWERED: 1, CONTRIB: 2, COMPLETE: 1, RESULT: 1}


def test_a_replayed_contribution_of_an_older_use_is_stale(fabric):
    """Uses 0, 1, 2 of one slot (versions 0, 1, 0). A copy of h1's use-0 frame arrives
    after use 1 completed (version 0 still holds use 0: answered from it, nothing added),
    while use 2 is open and after it completed (use 0 is over: dropped as STALE both times).
    Use 2's sum is exact."""
    topo = fabric.program([JobSpec(63, tuple(PAIR), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(63)
    parts = {u: [random_fixed(rng, 1 << 29) for _ in PAIR] for u in range(3)}
    old = contrib(topo, "h1", 63, session, 2, parts[0][0])
    for u in (0, 1):
        for h, v in zip(PAIR, parts[u], strict=True):
            fabric.send(h, contrib(topo, h, 63, session, 2, v, use=u))
        for h in PAIR:
            assert np.array_equal(received(fabric, h).payload, codec.aggregate(parts[u]))
    before = fabric.counters("s1")
    fabric.send("h1", old)
    answer = received(fabric, "h1")
    assert (answer.agg.chunk, answer.agg.version) == (2, 0)
    assert np.array_equal(answer.payload, codec.aggregate(parts[0]))
    fabric.send("h2", contrib(topo, "h2", 63, session, 2, parts[2][1], use=2))
    # BMv2 may take packets of two ports in either order: use 2 must have begun
    fabric.wait_counters(before, {("s1", "events", CONTRIB): 1}, switches=("s1",))
    fabric.send("h1", old)
    assert not any(fabric.quiet(PAIR).values()), "a replay completed use 2"
    fabric.send("h1", contrib(topo, "h1", 63, session, 2, parts[2][0], use=2))
    for h in PAIR:
        res = received(fabric, h)
        assert (res.agg.chunk, res.agg.version) == (wire.use_chunk(2, 2, 4), 0)
        assert np.array_equal(res.payload, codec.aggregate(parts[2])), f"use 2 at {h}"
    fabric.send("h1", old)
    assert not any(fabric.quiet(PAIR).values()), "a replay of use 0 was answered"
    delta = fabric.wait_counters(before, {("s1", "drops_in", STALE): 2}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {STALE: 2}
    assert delta.of("s1", "events") == {ANSWERED: 1, CONTRIB: 2, COMPLETE: 1, RESULT: 1}


def test_weights_come_from_the_table_and_exponents_are_bounded(fabric):
    """A worker claiming to be two is counted as one: the result's count is the children's
    weights (on the spine, a leaf's weight is its subtree's worker count). An exponent above
    the job's bound is dropped (BAD_EXP); the job's own bound admits it."""
    workers = ["h1", "h2", "h33"]
    topo = fabric.program([JobSpec(64, tuple(workers), slots=4, max_exp=140)])
    session = fabric.session()
    rng = np.random.default_rng(64)
    parts = [random_fixed(rng, 1 << 28) for _ in workers]
    before = fabric.counters()
    fabric.send("h1", contrib(topo, "h1", 64, session, 1, parts[0], count=2, exp=130))
    fabric.send("h2", contrib(topo, "h2", 64, session, 1, parts[1], count=0, exp=254))
    fabric.send("h2", contrib(topo, "h2", 64, session, 1, parts[1], exp=141))
    fabric.send("h33", contrib(topo, "h33", 64, session, 1, parts[2], count=9, exp=120))
    assert not any(fabric.quiet(workers).values()), "completed with a dropped contribution"
    fabric.send("h2", contrib(topo, "h2", 64, session, 1, parts[1], count=1, exp=140))
    for h in workers:
        res = received(fabric, h)
        assert (res.agg.count, res.agg.exp) == (3, 140)
        assert np.array_equal(res.payload, codec.aggregate(parts))
    assert not any(fabric.quiet(workers).values())
    delta = fabric.wait_counters(before, {("s3", "events", RESULT): 1})
    assert delta.of("s1", "drops_in") == {BAD_EXP: 2}


def test_a_payload_whose_checksum_does_not_add_up_is_dropped(fabric):
    """One flipped payload bit, with the checksum the sender computed, and a checksum of 0
    (not "none" in this protocol): both dropped and counted, nothing added."""
    topo = fabric.program([JobSpec(65, tuple(PAIR), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(65)
    for slot, cnat in ((0, False), (1, True)):
        a, b = random_fixed(rng, 1 << 29), random_fixed(rng, 1 << 29)
        if cnat:
            a = (rng.integers(0, 29, a.size) | (rng.integers(0, 2, a.size) << 7)).astype(np.uint8)
            b = a.copy()
        before = fabric.counters("s1")
        good = contrib_pkt(topo, "h1", 65, session, slot, a)
        fabric.send("h1", with_bad_checksum(good))
        zero = good.copy()
        zero[UDP].chksum = 0
        zero_frame = bytes(zero)
        fabric.send("h1", zero_frame)
        fabric.send("h2", contrib(topo, "h2", 65, session, slot, b))
        assert not any(fabric.quiet(PAIR).values()), "a corrupted payload was added"
        fabric.send("h1", bytes(good))
        exact = codec.aggregate([a, b], codec.CNAT8 if cnat else codec.FIXED32)
        for h in PAIR:
            res = received(fabric, h)
            assert np.array_equal(res.payload, exact), f"slot {slot} at {h}"
            check_result_addressing(topo, h, res)
        delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 1}, switches=("s1",))
        assert delta.of("s1", "drops_in") == {BAD_UDP_CHECKSUM: 2}
    assert not any(fabric.quiet(PAIR).values())


def test_cnat8_partial_sums_at_the_top_code_stay_within_2_30(fabric):
    """Three workers on leaf s1 and one on s2, partial sums re-compressed, results too; every
    worker at the top code its headroom allows, all positive. The leaf may round 3 x top up
    to 4 x top, the root 4 + 1 up to 8: the tree's headroom (3 bits here, not ceil(log2 4) =
    2) keeps that within 2^30, so every code is at most 31 (32 would decode to -2^31)."""
    workers = ["h1", "h2", "h3", "h33"]
    topo = fabric.program([JobSpec(66, tuple(workers), slots=8, encoding="cnat8",
                                   partials="cnat8")])
    h = topo.headroom(66)
    session = fabric.session()
    top = np.full(codec.ELEMS, 31 - h, np.uint8)
    for slot in range(8):
        for w in workers:
            fabric.send(w, contrib(topo, w, 66, session, slot, top))
        for w in workers:
            res = received(fabric, w)
            m = res.payload & 0x7F
            assert not (res.payload & 0x80).any(), f"slot {slot}: a negative sum"
            assert (m <= 31).all(), f"slot {slot}: codes {np.unique(m)}"
            assert (m >= 31 - h + 1).all(), "below the smallest rounding of 5 x top"
    assert not any(fabric.quiet(workers).values())
    assert h == 3
