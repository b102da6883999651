"""Sparse (block) jobs, docs/PROTOCOL.md "Sparse jobs": the switch aggregates, per slot, the
smallest block any worker has pending, and every result is the exact integer sum of the
holders' payloads (FIXED32 results), or its CNAT8 rounding, with the next block the min over
the workers' next and that block's exponent."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import COMPLETE, CONTRIB, ELEMS, RESULT
from tests.dataplane.sparse import (
    Worker,
    check_coverage,
    random_workers,
    run_call,
)
from worker import codec

HOSTS = [f"h{i}" for i in range(1, 33)]


def test_random_sparsity_fixed32_exact(fabric):
    """4 workers, 40 blocks over 4 slots, random supports at several densities, one call
    each (use numbers carry over between calls): every block some worker holds is aggregated
    once, in stream order, to the exact sum; the rest are skipped."""
    n, nb, slots = 4, 40, 4
    topo = fabric.program([JobSpec(201, tuple(HOSTS[:n]), slots=slots, mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(201)
    before = fabric.counters()
    numbers, uses = {}, 0
    for density in (0.05, 0.3, 0.9):
        workers = random_workers(rng, HOSTS[:n], nb, density, "fixed32",
                                 1 << (30 - codec.headroom(n)))
        log = run_call(fabric, topo, 201, session, workers, nb, slots, numbers, rng=rng)
        check_coverage(log, workers, nb, slots)
        uses += log.uses
    assert sum(numbers.values()) == uses
    assert not any(fabric.quiet(HOSTS[:n + 1]).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): uses})
    assert delta.of("s1", "events") == {CONTRIB: n * uses, COMPLETE: uses, RESULT: uses}
    assert delta.of("s1", "drops_in") == {}


def test_all_zero_workers_and_disjoint_supports(fabric):
    """Disjoint supports (each block held by one worker: the sum is its payload), two workers
    with no non-zero block at all (they prime with NO_BLOCK and send EMPTY packets to the
    end), and a call where nobody holds anything: the prime's result says NO_BLOCK and the
    call ends there."""
    n, nb, slots = 5, 30, 3
    topo = fabric.program([JobSpec(202, tuple(HOSTS[:n]), slots=slots, mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(202)
    owner = rng.integers(0, 3, nb)
    supports = [{b for b in range(nb) if owner[b] == i and rng.random() < 0.6}
                for i in range(3)] + [set(), set()]
    workers = random_workers(rng, HOSTS[:n], nb, 0, "fixed32", 1 << 27, supports)
    numbers = {}
    log = run_call(fabric, topo, 202, session, workers, nb, slots, numbers, rng=rng)
    check_coverage(log, workers, nb, slots)
    empty = [Worker(h, {}) for h in HOSTS[:n]]
    log = run_call(fabric, topo, 202, session, empty, nb, slots, numbers, rng=rng)
    assert log.order == {} and log.uses == slots      # the primes only
    assert not any(fabric.quiet(HOSTS[:n + 1]).values())


def test_cnat8_contributions_exact_and_cnat8_results_rounded(fabric):
    """CNAT8 contributions: decoded and added exactly (FIXED32 results), and the same sums
    re-compressed to CNAT8 by the switch (each code one of the two powers of two around the
    exact sum); a retransmission gets the same codes (tested in test_dp_sparse_loss)."""
    n, nb, slots = 3, 24, 2
    topo = fabric.program([JobSpec(203, tuple(HOSTS[:n]), slots=slots, mode="sparse"),
                           JobSpec(204, tuple(HOSTS[:n]), slots=slots, encoding="cnat8",
                                   mode="sparse")])
    session = fabric.session()
    rng = np.random.default_rng(203)
    numbers = {203: {}, 204: {}}
    for job, enc in ((203, "fixed32"), (204, "cnat8")):
        workers = random_workers(rng, HOSTS[:n], nb, 0.4, "cnat8", codec.max_code(n))
        log = run_call(fabric, topo, job, session, workers, nb, slots, numbers[job],
                       result_enc=enc, rng=rng)
        check_coverage(log, workers, nb, slots)
    # A CNAT8-result job takes padded EMPTY packets as well (the padding is ignored).
    workers = random_workers(rng, HOSTS[:n], nb, 0.3, "fixed32", 1 << 20)
    log = run_call(fabric, topo, 204, session, workers, nb, slots, numbers[204],
                   result_enc="cnat8", rng=rng, pad=True)
    check_coverage(log, workers, nb, slots)
    assert not any(fabric.quiet(HOSTS[:n + 1]).values())


def test_worst_case_magnitudes(fabric):
    """Every worker holds every block at the top magnitude of an n-worker job (2^(30-h)
    units, CNAT8 code 31-h, both signs) with the largest exponent the job allows: the sums
    reach 2^30 and arrive exact (or, for CNAT8 results, rounded to a power of two <= 2^30)."""
    for n in (2, 3, 5, 32):
        h = codec.headroom(n)
        top = 1 << (30 - h)
        nb, slots = 4, 2
        jobs = [JobSpec(210 + n, tuple(HOSTS[:n]), slots=slots, mode="sparse"),
                JobSpec(250 + n, tuple(HOSTS[:n]), slots=slots, encoding="cnat8",
                        mode="sparse")]
        topo = fabric.program(jobs)
        session = fabric.session()
        rng = np.random.default_rng(n)
        for job, enc in ((210 + n, "fixed32"), (250 + n, "cnat8")):
            workers = []
            for i, host in enumerate(HOSTS[:n]):
                sign = np.int32(1 if i % 2 else -1)
                blocks = {0: np.full(ELEMS, top, np.int32), 1: np.full(ELEMS, -top, np.int32),
                          2: np.full(ELEMS, 31 - h, np.uint8),
                          3: np.full(ELEMS, (31 - h) | 0x80, np.uint8)}
                if i == 0:
                    blocks[0] = np.full(ELEMS, sign * top, np.int32)
                workers.append(Worker(host, blocks, dict.fromkeys(range(nb), 158)))
            log = run_call(fabric, topo, job, session, workers, nb, slots, {},
                           result_enc=enc, rng=rng)
            check_coverage(log, workers, nb, slots)
            assert np.abs(log.sums[1]).max() == n * top <= 1 << 30
    assert not any(fabric.quiet(HOSTS).values())
