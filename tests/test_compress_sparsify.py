"""Sparsifiers: top-k, random-k (scaled and unscaled), threshold-v, adaptive threshold."""

import numpy as np
import pytest

from worker.compression.sparsify import AdaptiveThreshold, RandomK, Threshold, TopK


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("d,k", [(10, 1), (100, 7), (1000, 10), (1000, 1000), (37, 36)])
def test_topk_keeps_exactly_k_largest(d, k):
    g = rng(d + k)
    for x in (g.standard_normal(d), g.integers(-3, 4, d) + 0.0, np.ones(d)):
        x = x.astype(np.float32)
        y = TopK(k=k).roundtrip(x)
        kept = np.flatnonzero(y != 0) if np.all(x != 0) else None
        if kept is not None:
            assert kept.size == k
        c = TopK(k=k).compress(x)
        assert c.payload["indices"].size == k
        assert np.array_equal(y[c.payload["indices"]], x[c.payload["indices"]])
        # nothing dropped is larger than something kept
        dropped = np.setdiff1d(np.arange(d), c.payload["indices"])
        if dropped.size:
            assert np.abs(x[dropped]).max() <= np.abs(x[c.payload["indices"]]).min()
        err = np.sum((x.astype(np.float64) - y) ** 2)
        assert err <= (1 - k / d) * np.sum(x.astype(np.float64) ** 2) * (1 + 1e-12)


def test_topk_ratio_and_bits():
    x = rng(1).standard_normal(1000).astype(np.float32)
    op = TopK(ratio=0.01)
    c = op.compress(x)
    assert c.payload["indices"].size == 10
    assert op.bits(c) == 32 + 10 * 64
    assert TopK(ratio=0.0001).compress(x).payload["indices"].size == 1  # at least one
    for bad in ({"ratio": 0}, {"ratio": 1.5}, {"k": 0}, {}, {"ratio": 0.1, "k": 3}):
        with pytest.raises(ValueError):
            TopK(**bad)


def test_randk_scaled_is_unbiased_unscaled_is_not():
    x = rng(2).standard_normal(20).astype(np.float32)
    n = 40000
    scaled = RandomK(rng(3), k=5)
    plain = RandomK(rng(4), k=5, scaled=False)
    ys = np.stack([scaled.roundtrip(x) for _ in range(n)]).astype(np.float64)
    yp = np.stack([plain.roundtrip(x) for _ in range(n)]).astype(np.float64)
    se = ys.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(ys.mean(axis=0) - x) <= 5 * se)
    assert np.all(np.count_nonzero(ys, axis=1) == 5)
    # unscaled: each entry survives with probability k/d, so the mean is (k/d) x
    sep = yp.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(yp.mean(axis=0) - x * 5 / 20) <= 5 * sep)
    assert scaled.unbiased and not plain.unbiased


def test_randk_indices_come_from_the_seed():
    x = rng(5).standard_normal(500).astype(np.float32)
    op = RandomK(rng(6), ratio=0.02)
    c = op.compress(x)
    assert set(c.payload) == {"values", "seed"}
    assert op.bits(c) == 64 + 10 * 32
    y = op.decompress(c)
    idx = np.flatnonzero(y)
    assert idx.size == 10
    assert np.allclose(y[idx], x[idx] * 50)


def test_threshold_and_adaptive():
    x = np.array([0.1, -2.0, 0.5, 1.0, -0.49, 3.0, 0.0], np.float32)
    y = Threshold(v=0.5).roundtrip(x)
    assert np.array_equal(y, np.where(np.abs(x) >= 0.5, x, 0))
    a = AdaptiveThreshold()
    ya = a.roundtrip(x)
    assert np.array_equal(ya, np.where(np.abs(x) >= 1.5, x, 0))
    c = a.compress(x)
    assert a.bits(c) == 32 + 2 * 64
    assert np.array_equal(a.roundtrip(np.zeros(4, np.float32)), np.zeros(4))
    with pytest.raises(ValueError):
        Threshold()
    with pytest.raises(ValueError):
        AdaptiveThreshold(fraction=0)
