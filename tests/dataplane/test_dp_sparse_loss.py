"""Sparse jobs under loss, duplication, reordering and replays: loss recovery works as in
dense mode (docs/PROTOCOL.md "Sparse jobs"): a duplicate of an open use is dropped, a
retransmission to a complete use (EMPTY ones too) is answered with the stored result, a
replay of an older use is STALE; every contribution is added exactly once."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    COMPLETE,
    CONTRIB,
    DUPLICATE,
    ELEMS,
    RESULT,
    STALE,
    check_sparse_addressing,
    received_sparse,
    sparse,
)
from tests.dataplane.sparse import check_coverage, random_workers, run_call_lossy
from worker import codec, wire

HOSTS = [f"h{i}" for i in range(1, 9)]
NO_BLOCK = wire.NO_BLOCK


def test_lossy_network_exact_sums_each_contribution_added_once(fabric):
    """Two calls each of a FIXED32-result and a CNAT8-result job through 20% loss (both
    ways), 15% duplicates, shuffled sends and replays of earlier rounds' frames: every
    result is exact (or a rounding of the exact sum), every answer equals the result of
    its use, and the switch counts each worker's contribution to each use once."""
    n, nb, slots = 4, 24, 3
    topo = fabric.program([JobSpec(301, tuple(HOSTS[:n]), slots=slots, mode="sparse"),
                           JobSpec(302, tuple(HOSTS[:n]), slots=slots, encoding="cnat8",
                                   mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(301)
    before = fabric.counters()
    uses, totals = 0, {"sent": 0, "lost": 0, "dups": 0, "replays": 0, "results_lost": 0}
    for job, enc in ((301, "fixed32"), (302, "cnat8")):
        numbers = {}
        for density in (0.2, 0.6):
            workers = random_workers(rng, HOSTS[:n], nb, density, "cnat8", codec.max_code(n))
            log, stats = run_call_lossy(fabric, topo, job, session, workers, nb, slots,
                                        numbers, enc, rng, loss=0.2, dup=0.15, replay=0.3)
            check_coverage(log, workers, nb, slots)
            uses += log.uses
            for key in totals:
                totals[key] += stats[key]
    assert all(totals.values()), totals     # every impairment happened
    assert not any(fabric.quiet(HOSTS).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): uses})
    ev = delta.of("s1", "events")
    assert ev[CONTRIB] == n * uses and ev[COMPLETE] == ev[RESULT] == uses, ev
    assert ev.get(DUPLICATE, 0) > 0 and ev.get(ANSWERED, 0) > 0, ev
    assert set(delta.of("s1", "drops_in")) <= {STALE}


def _use(fabric, topo, job, session, sends):
    """Sends (host, frame) pairs; returns the result each host received."""
    for host, frame in sends:
        fabric.send(host, frame)
    return {host: received_sparse(fabric, host) for host, _ in sends}


def test_retransmissions_are_answered_with_the_stored_result(fabric):
    """After a use completes, each worker's retransmission, the EMPTY ones (padded or not)
    included, is answered to it alone with the stored result: the same block, next, exp,
    count and payload, the CNAT8 codes the switch drew included; a prime's retransmission
    gets the EMPTY prime result. The previous use stays answerable while the next one is
    open (the shadow copy); a use two behind is STALE."""
    hosts = HOSTS[:3]
    topo = fabric.program([JobSpec(311, tuple(hosts), slots=2, mode="sparse"),
                           JobSpec(312, tuple(hosts), slots=2, encoding="cnat8",
                                   mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(311)
    for job, pad in ((311, True), (312, False)):
        v1 = rng.integers(-(1 << 20), 1 << 20, ELEMS).astype(np.int32)
        v3 = rng.integers(-(1 << 20), 1 << 20, ELEMS).astype(np.int32)
        prime = [(h, sparse(topo, h, job, session, 1, 9, nxt, prime=True, exp=e))
                 for h, nxt, e in (("h1", 3, 130), ("h2", NO_BLOCK, 0), ("h3", 3, 140))]
        data = [("h1", sparse(topo, "h1", job, session, 1, 3, NO_BLOCK, v1, exp=0, use=1)),
                ("h2", sparse(topo, "h2", job, session, 1, 3, NO_BLOCK, pad=pad, exp=0,
                              use=1)),
                ("h3", sparse(topo, "h3", job, session, 1, 3, 7, v3, exp=120, use=1))]
        nxt = [(h, sparse(topo, h, job, session, 1, 7, NO_BLOCK, pad=pad, exp=0, use=2))
               for h in ("h1", "h2")]
        first = _use(fabric, topo, job, session, prime)
        assert {(r.block.block, r.block.next, r.agg.exp) for r in first.values()} == {
            (9, 3, 140)}
        before = fabric.counters()
        res = _use(fabric, topo, job, session, data)
        want = v1.astype(np.int64) + v3
        r0 = res["h1"]
        assert (r0.block.block, r0.block.next, r0.agg.exp, r0.agg.count) == (3, 7, 120, 3)
        if job == 311:
            assert np.array_equal(r0.payload.astype(np.int64), want)
        for host, frame in data + prime:
            fabric.send(host, frame)
            again = received_sparse(fabric, host)
            orig = (first if frame in dict(prime).values() else res)[host]
            assert bytes(again.agg) == bytes(orig.agg), host
            check_sparse_addressing(topo, host, again)
            assert not any(fabric.quiet(hosts).values()), "an answer went to another host"
        # the next use opens on version 0 (h1, h2 sent; h3 not yet): use 3 still answers
        for host, frame in nxt:
            fabric.send(host, frame)
        for host, frame in data:
            fabric.send(host, frame)
            assert bytes(received_sparse(fabric, host).agg) == bytes(res[host].agg)
        # the prime, use 0, two uses back on version 0, is STALE now
        fabric.send("h3", prime[2][1])
        assert not any(fabric.quiet(hosts).values())
        delta = fabric.counters() - before
        assert delta.of("s1", "events")[ANSWERED] == 9
        assert delta.of("s1", "drops_in") == {STALE: 1}
        fabric.send("h3", sparse(topo, "h3", job, session, 1, 7, NO_BLOCK, exp=0, pad=pad,
                                 use=2))
        last = [received_sparse(fabric, h) for h in hosts]
        assert all(r.block.block == 7 and r.block.next == NO_BLOCK and not r.payload.any()
                   for r in last)
    assert not any(fabric.quiet(HOSTS).values())


def test_duplicates_of_an_open_use_are_not_added_twice(fabric):
    """Before the use completes, a worker's contribution or EMPTY packet sent again is a
    DUPLICATE: dropped, nothing added, no answer; the result counts it once."""
    hosts = HOSTS[:3]
    topo = fabric.program([JobSpec(321, tuple(hosts), slots=1, mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(321)
    _use(fabric, topo, 321, session,
         [(h, sparse(topo, h, 321, session, 0, 4, 0, prime=True)) for h in hosts])
    vals = {h: rng.integers(-(1 << 20), 1 << 20, ELEMS).astype(np.int32) for h in hosts[:2]}
    frames = {h: sparse(topo, h, 321, session, 0, 0, NO_BLOCK, vals[h], use=1)
              for h in hosts[:2]}
    frames["h3"] = sparse(topo, "h3", 321, session, 0, 0, NO_BLOCK, pad=True, use=1)
    before = fabric.counters()
    for h in ("h1", "h3", "h1", "h3", "h2"):
        fabric.send(h, frames[h])
    want = vals["h1"].astype(np.int64) + vals["h2"]
    for h in hosts:
        r = received_sparse(fabric, h)
        assert r.agg.count == 3 and np.array_equal(r.payload.astype(np.int64), want)
    assert not any(fabric.quiet(hosts).values())
    delta = fabric.counters() - before
    assert delta.of("s1", "events") == {CONTRIB: 3, DUPLICATE: 2, COMPLETE: 1, RESULT: 1}
