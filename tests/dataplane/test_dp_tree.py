"""A two-level tree: leaves s1 (h1, h2) and s2 (h33, h34, h35) send their partial sums to the
spine s3, the job's root; the root's result comes back down through the leaves."""

import numpy as np

from controller.program import canonical_state, desired_state, sync
from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    BAD_RESULT_PORT,
    COMPLETE,
    CONTRIB,
    DUPLICATE,
    PARTIAL_UP,
    RESULT,
    RESULT_DOWN,
    UNKNOWN_JOB,
    WRONG_SESSION,
    check_result_addressing,
    check_rounding,
    collect,
    contrib,
    dissect,
    random_cnat,
    random_fixed,
    received,
)
from worker import codec, wire

LEFT, RIGHT = ["h1", "h2"], ["h33", "h34", "h35"]
WORKERS = LEFT + RIGHT


def test_partial_sums_up_results_down(fabric):
    """Six slots of a two-level tree, the odd ones on their second use (version 1; their
    first use ran before): every contribution shuffled across slots and leaves."""
    n = len(WORKERS)
    topo = fabric.program([JobSpec(31, tuple(WORKERS), slots=8)])
    session = fabric.session()
    rng = np.random.default_rng(31)
    slots = range(6)
    odd = [s for s in slots if s % 2]
    warm = [random_fixed(rng, 1 << 20) for _ in WORKERS]
    for s in odd:
        for h, p in zip(WORKERS, warm, strict=True):
            fabric.send(h, contrib(topo, h, 31, session, s, p))
    first = collect(fabric, WORKERS, len(odd))
    for s in odd:
        assert all(np.array_equal(first[h][31, s, 0].payload, codec.aggregate(warm))
                   for h in WORKERS), f"slot {s} use 0"
    parts, exps = {}, {}
    for s in slots:
        # workers send CNAT8 in even slots (the leaves' partial sums leave as FIXED32),
        # FIXED32 in odd ones
        parts[s] = [random_cnat(rng, codec.max_code(n)) if s % 2 == 0
                    else random_fixed(rng, 1 << (30 - codec.headroom(n))) for _ in WORKERS]
        exps[s] = [int(e) for e in rng.integers(100, 140, n)]
    before = fabric.counters()
    order = [(s, i) for s in slots for i in range(n)]
    for k in rng.permutation(len(order)):
        s, i = order[k]
        fabric.send(WORKERS[i], contrib(topo, WORKERS[i], 31, session, s, parts[s][i],
                                        use=s % 2, exp=exps[s][i]))
    got = collect(fabric, WORKERS, len(slots))
    for s in slots:
        exact = codec.aggregate(parts[s], codec.CNAT8 if s % 2 == 0 else codec.FIXED32)
        for h in WORKERS:
            res = got[h][31, s, s % 2]
            assert (res.agg.msg_type, res.agg.encoding) == (wire.MSG_RESULT, wire.ENC_FIXED32)
            assert (res.agg.count, res.agg.exp, res.agg.chunk) == (
                n, max(exps[s]), wire.use_chunk(s % 2, s, 8))
            assert np.array_equal(res.payload, exact), f"slot {s} at {h}"
            check_result_addressing(topo, h, res)
    assert not any(fabric.quiet(WORKERS + ["h3", "h36"]).values())
    k = len(slots)
    delta = fabric.wait_counters(before, {("s3", "events", RESULT): k,
                                          ("s1", "events", RESULT_DOWN): k,
                                          ("s2", "events", RESULT_DOWN): k})
    assert delta.of("s1", "events") == {CONTRIB: 2 * k, COMPLETE: k, PARTIAL_UP: k,
                                        RESULT_DOWN: k}
    assert delta.of("s2", "events") == {CONTRIB: 3 * k, COMPLETE: k, PARTIAL_UP: k,
                                        RESULT_DOWN: k}
    assert delta.of("s3", "events") == {CONTRIB: 2 * k, COMPLETE: k, RESULT: k}
    for s in ("s1", "s2", "s3"):
        assert delta.of(s, "drops_in") == {} and delta.of(s, "drops_out") == {}


def test_cnat8_results_through_the_tree_and_a_retransmission(fabric):
    """The root re-compresses; every worker gets the same codes, a rounding of the exact sum.
    A worker that lost it retransmits to its leaf: the leaf repeats its partial sum, the root
    answers it with the stored (rounded) result, and the leaf passes that down."""
    topo = fabric.program([JobSpec(32, tuple(WORKERS), slots=4, encoding="cnat8")])
    session = fabric.session()
    rng = np.random.default_rng(32)
    parts = [random_cnat(rng, codec.max_code(len(WORKERS))) for _ in WORKERS]
    for h, p in zip(WORKERS, parts, strict=True):
        fabric.send(h, contrib(topo, h, 32, session, 1, p))
    got = {h: received(fabric, h) for h in WORKERS}
    codes = got["h1"].payload
    assert all(r.agg.encoding == wire.ENC_CNAT8 for r in got.values())
    assert all(np.array_equal(r.payload, codes) for r in got.values()), "one multicast"
    check_rounding(codec.aggregate(parts, codec.CNAT8), codes)
    before = fabric.counters()
    fabric.send("h34", contrib(topo, "h34", 32, session, 1, parts[3]))
    again = received(fabric, "h34")
    assert again.agg.chunk == 1 and np.array_equal(again.payload, codes)
    # s2 passes a result from its parent to all its children, so h33 and h35 hear it once
    # more too (workers ignore a result they do not await); s1's workers hear nothing.
    extra = fabric.quiet(WORKERS)
    assert {h: len(v) for h, v in extra.items()} == {"h1": 0, "h2": 0, "h33": 1, "h34": 0,
                                                      "h35": 1}
    for h in ("h33", "h35"):
        assert np.array_equal(dissect(extra[h][0]).payload, codes)
    delta = fabric.wait_counters(before, {("s2", "events", RESULT_DOWN): 1})
    assert delta.of("s2", "events") == {PARTIAL_UP: 1, RESULT_DOWN: 1}
    assert delta.of("s3", "events") == {ANSWERED: 1}


def test_results_only_from_the_parent_port(fabric):
    """A RESULT arriving at a leaf from a worker's port is dropped (BAD_RESULT_PORT); one
    for an unknown job is dropped as such; neither reaches anyone."""
    topo = fabric.program([JobSpec(33, tuple(WORKERS), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(33)
    before = fabric.counters("s2")
    fake = random_fixed(rng, 1 << 20)
    fabric.send("h33", contrib(topo, "h33", 33, session, 0, fake, msg_type=wire.MSG_RESULT))
    fabric.send("h34", contrib(topo, "h34", 77, session, 0, fake, msg_type=wire.MSG_RESULT))
    delta = fabric.wait_counters(before, {("s2", "drops_in", UNKNOWN_JOB): 1},
                                 switches=("s2",))
    assert delta.of("s2", "drops_in") == {BAD_RESULT_PORT: 1, UNKNOWN_JOB: 1}
    assert delta.of("s2", "events") == {}
    assert not any(fabric.quiet(WORKERS).values())


def install_sessions(fabric, sessions: dict[int, int], switches) -> None:
    """Installs `sessions` (job id -> session) on `switches` only: the controller moves a
    job one switch at a time (controller/program.py's desired state, synced to each)."""
    for fab in (fabric.soft, fabric.bmv2) if hasattr(fabric, "soft") else (fabric,):
        state = canonical_state(
            desired_state(fab.topo, {j.id: sessions.get(j.id, fab.current)
                                     for j in fab.topo.jobs}), fab.pipeline.p4info)
        for name in switches:
            sync(fab.p4rt[name], state[name], fab.pipeline)


def test_a_result_of_another_session_from_the_parent_is_dropped(fabric):
    """The controller moves the job switch by switch: leaf s1 is in the new session while
    the root still completes a use of the old one. Its result, from s1's parent port, is
    dropped there (WRONG_SESSION): s1's workers hear nothing, s2's get the old use's sum.
    Once every switch is moved, the old session's retransmissions are WRONG_SESSION and the
    new session runs from use 0, exact everywhere."""
    topo = fabric.program([JobSpec(35, tuple(WORKERS), slots=4)])
    s = fabric.session()
    rng = np.random.default_rng(35)
    parts = [random_fixed(rng, 1 << 26) for _ in WORKERS]
    for h, p in zip(LEFT, parts[:2], strict=True):
        fabric.send(h, contrib(topo, h, 35, s, 3, p))
    before = fabric.counters()
    new = (s + 1000) & 0xFFFF
    install_sessions(fabric, {35: new}, ["s1"])
    for h, p in list(zip(WORKERS, parts, strict=True))[2:]:
        fabric.send(h, contrib(topo, h, 35, s, 3, p))
    for h in RIGHT:
        assert np.array_equal(received(fabric, h).payload, codec.aggregate(parts))
    delta = fabric.wait_counters(before, {("s1", "drops_in", WRONG_SESSION): 1})
    assert not any(fabric.quiet(WORKERS).values()), "s1 passed on another session's result"
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 1} and delta.of("s1", "events") == {}
    assert delta.of("s3", "events") == {CONTRIB: 1, COMPLETE: 1, RESULT: 1}
    assert delta.of("s2", "events") == {CONTRIB: 3, COMPLETE: 1, PARTIAL_UP: 1,
                                        RESULT_DOWN: 1}
    fabric.set_sessions({35: new})
    before = fabric.counters()
    fabric.send("h1", contrib(topo, "h1", 35, s, 3, parts[0]))      # lost its result
    fresh = [random_fixed(rng, 1 << 26) for _ in WORKERS]
    for h, p in zip(WORKERS, fresh, strict=True):
        fabric.send(h, contrib(topo, h, 35, new, 3, p))
    for h in WORKERS:
        res = received(fabric, h)
        assert (res.agg.session, res.agg.chunk, res.agg.count) == (new, 3, len(WORKERS))
        assert np.array_equal(res.payload, codec.aggregate(fresh)), h
    assert not any(fabric.quiet(WORKERS).values())
    delta = fabric.wait_counters(before, {("s3", "events", RESULT): 1})
    assert delta.of("s1", "drops_in") == {WRONG_SESSION: 1}
    assert delta.of("s3", "events") == {CONTRIB: 2, COMPLETE: 1, RESULT: 1}


def test_a_retransmission_before_the_root_completes_is_a_duplicate_there(fabric):
    """s2's subtree is complete, s1's is not: a worker under s2 retransmits, s2 repeats its
    partial sum, and the root counts it as a DUPLICATE without adding it."""
    topo = fabric.program([JobSpec(34, tuple(WORKERS), slots=4)])
    session = fabric.session()
    rng = np.random.default_rng(34)
    parts = [random_fixed(rng, 1 << 26) for _ in WORKERS]
    for h, p in list(zip(WORKERS, parts, strict=True))[1:]:
        fabric.send(h, contrib(topo, h, 34, session, 2, p))
    before = fabric.counters()
    fabric.send("h35", contrib(topo, "h35", 34, session, 2, parts[4]))
    delta = fabric.wait_counters(before, {("s3", "events", DUPLICATE): 1})
    assert delta.of("s2", "events") == {PARTIAL_UP: 1}
    assert delta.of("s3", "events") == {DUPLICATE: 1}
    assert not any(fabric.quiet(WORKERS).values())
    fabric.send("h1", contrib(topo, "h1", 34, session, 2, parts[0]))
    exact = codec.aggregate(parts)
    for h in WORKERS:
        res = received(fabric, h)
        assert res.agg.count == len(WORKERS) and np.array_equal(res.payload, exact)
    assert not any(fabric.quiet(WORKERS).values())


def bracket(exact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two powers of two around each |sum| (equal where it is one), signs kept."""
    mag = np.abs(exact.astype(np.int64))
    p = np.where(mag > 0, np.frexp(np.maximum(mag, 1).astype(np.float64))[1] - 1, 0)
    lo = np.where(mag > 0, 1 << p, 0)
    hi = np.where(mag == lo, lo, lo << 1)
    sign = np.where(exact < 0, -1, 1)
    return sign * lo, sign * hi


def test_cnat8_partial_sums_keep_every_link_at_one_byte(fabric):
    """With partials=cnat8 the leaves re-compress their partial sums: the root sees CNAT8
    contributions and sums what its children sent, so each result element is the sum of one
    rounding per leaf of that leaf's exact partial sum."""
    topo = fabric.program([JobSpec(33, tuple(WORKERS), slots=4, partials="cnat8")])
    session = fabric.session()
    rng = np.random.default_rng(33)
    n = len(WORKERS)
    parts = [random_cnat(rng, codec.max_code(n)) for _ in WORKERS]
    before = fabric.counters()
    for i, h in enumerate(WORKERS):
        fabric.send(h, contrib(topo, h, 33, session, 0, parts[i], exp=120))
    got = collect(fabric, WORKERS, 1)
    left = codec.aggregate(parts[:2], codec.CNAT8).astype(np.int64)
    right = codec.aggregate(parts[2:], codec.CNAT8).astype(np.int64)
    (llo, lhi), (rlo, rhi) = bracket(left), bracket(right)
    res = got[WORKERS[0]][33, 0, 0]
    assert (res.agg.encoding, res.agg.count) == (wire.ENC_FIXED32, n)
    total = np.asarray(res.payload, dtype=np.int64)
    assert np.all((total == llo + rlo) | (total == llo + rhi) | (total == lhi + rlo) |
                  (total == lhi + rhi)), "a result is not the sum of the leaves' roundings"
    assert not np.array_equal(total, left + right), "nothing was rounded: not re-compressed"
    for h in WORKERS[1:]:
        assert np.array_equal(got[h][33, 0, 0].payload, res.payload)
    delta = fabric.wait_counters(before, {("s3", "events", RESULT): 1})
    assert delta.of("s3", "events") == {CONTRIB: 2, COMPLETE: 1, RESULT: 1}
