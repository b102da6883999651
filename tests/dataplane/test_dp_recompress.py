"""Results re-compressed to CNAT8 on the switch (job result encoding cnat8): each element is
one of the two powers of two around the exact sum, rounded up with probability
(|S| - 2^p) / 2^p so the code is unbiased, and a retransmission after completion gets the
very codes the multicast carried."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import ELEMS, check_rounding, contrib, received
from worker import codec, wire

TRIALS = 64
BOUND = 1 << 29     # the largest element a worker of a 2-worker job may send


def targets(rng):
    """ELEMS sums: leading one p = 0..29 crossed with fractions q = k/8 of 2^p (as far as
    2^p has the bits), random signs, and the extremes 0, +-2^30, 2^30 - 1, 3 * 2^28."""
    e = np.arange(ELEMS)
    p = e % 30
    k = (e // 30) % 8
    mag = (1 << p) + ((k << p) >> 3)
    sums = np.where(rng.integers(0, 2, ELEMS) == 1, -mag, mag).astype(np.int64)
    sums[-5:] = [0, 1 << 30, -(1 << 30), (1 << 30) - 1, 3 << 28]
    return sums


def test_recompressed_results_are_bracketing_and_unbiased(fabric):
    """TRIALS completions of the same sums through one slot pool (fresh rounding each time).
    Tolerances, 5 standard deviations (a false failure about once in 10^6 runs):
    - the mean of decoded / exact over all non-zero elements and trials is 1 within
      5 * sqrt(1/8 / samples) (the variance of one decoded / exact is q(1-q)/(1+q)^2 <= 1/8);
    - per fraction q, the rate of rounding up is q within 5 * sqrt(q(1-q) / samples).
    The rounding bits are a hash of the job's key, the session, the chunk and the element
    (codec.p4), so each trial, a chunk of its own, draws afresh."""
    topo = fabric.program([JobSpec(51, ("h1", "h2"), slots=8, encoding="cnat8")])
    session = fabric.session()
    rng = np.random.default_rng(51)
    sums = targets(rng)
    nz = sums != 0
    mag = np.abs(sums[nz])
    p = np.frexp(mag.astype(np.float64))[1] - 1
    q = (mag - (1 << p)) / (1 << p).astype(np.float64)
    ups, ratios = [], []
    for t in range(TRIALS):
        slot, use = t % 8, t // 8          # chunk number use * 8 + slot = t
        version = use % 2
        # two shares within each worker's bound (2^29 units for 2 workers), the rest random
        lo, hi = np.maximum(-BOUND, sums - BOUND), np.minimum(BOUND, sums + BOUND)
        share = np.clip(sums // 2 + rng.integers(-(1 << 20), 1 << 20, ELEMS), lo, hi)
        a, b = (sums - share).astype(np.int32), share.astype(np.int32)
        fabric.send("h1", contrib(topo, "h1", 51, session, slot, a, use=use))
        fabric.send("h2", contrib(topo, "h2", 51, session, slot, b, use=use))
        r1, r2 = received(fabric, "h1"), received(fabric, "h2")
        assert (r1.agg.encoding, r1.agg.slot, r1.agg.version, r1.agg.chunk) == (
            wire.ENC_CNAT8, slot, version, t)
        assert np.array_equal(r1.payload, r2.payload), "the multicast copies differ"
        assert ((r1.payload & 0x7F) <= 31).all(), "a code above 31 for a sum within 2^30"
        up = check_rounding(sums, r1.payload)
        ups.append(up[nz])
        ratios.append(np.abs(codec.switch_decode_cnat8(r1.payload)[nz].astype(np.float64))
                      / mag)
        if t % 16 == 15:
            # h1 lost it: the stored, rounded sums re-encode to the same codes
            fabric.send("h1", contrib(topo, "h1", 51, session, slot, a, use=use))
            again = received(fabric, "h1")
            assert again.agg.chunk == t
            assert np.array_equal(again.payload, r1.payload), "retransmission got other codes"
    assert not any(fabric.quiet(["h1", "h2", "h3"]).values())
    ups, ratios = np.array(ups), np.array(ratios)
    samples = ratios.size
    assert abs(ratios.mean() - 1) < 5 * np.sqrt(0.125 / samples), ratios.mean()
    for frac in np.unique(q):
        cols = q == frac
        rate = ups[:, cols].mean()
        n = ups[:, cols].size
        tol = 5 * np.sqrt(frac * (1 - frac) / n)
        assert abs(rate - frac) <= tol, f"q = {frac}: rounded up {rate:.4f} of {n}"
    # and the rounding is random, not a fixed pattern: some element went both ways
    assert (ups.any(axis=0) & ~ups.all(axis=0)).sum() > ELEMS // 2
