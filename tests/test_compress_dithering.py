"""QSGD / random dithering and TernGrad."""

import numpy as np
import pytest

from worker.compression.dithering import RandomDithering, TernGrad


def rng(seed=0):
    return np.random.default_rng(seed)


def _omega(op, x, n):
    x = x.astype(np.float32)
    sq = np.sum(x.astype(np.float64) ** 2)
    errs = np.array([np.sum((op.roundtrip(x) - x.astype(np.float64)) ** 2) / sq
                     for _ in range(n)])
    return errs.mean(), errs.std() / np.sqrt(n)


@pytest.mark.parametrize("d,s", [(16, 1), (16, 4), (100, 2), (100, 10), (1000, 4), (1000, 64)])
def test_qsgd_variance_bound(d, s):
    g = rng(1)
    # equal entries put every t at 1/sqrt(d): the rounding is far from a level for
    # most of these (d, s), which makes the bound nearly tight for small s
    vectors = [np.ones(d), g.standard_normal(d), g.standard_t(2, d), g.uniform(0, 1, d)]
    op = RandomDithering(rng(2), s=s)
    bound = min(d / s**2, np.sqrt(d) / s)
    for x in vectors:
        omega, se = _omega(op, x, 2000)
        assert omega <= bound + 5 * se, (omega, bound)


def test_qsgd_is_unbiased_and_on_its_levels():
    x = rng(3).standard_normal(50).astype(np.float32)
    op = RandomDithering(rng(4), s=3)
    y = np.stack([op.roundtrip(x) for _ in range(20000)]).astype(np.float64)
    se = y.std(axis=0) / np.sqrt(y.shape[0])
    assert np.all(np.abs(y.mean(axis=0) - x) <= 5 * se + 1e-9)
    lev = np.abs(y) / np.linalg.norm(x.astype(np.float64)) * 3
    assert np.allclose(lev, np.round(lev), atol=1e-5)
    assert np.round(lev).max() <= 3


def test_dithering_buckets_and_bits():
    op = RandomDithering(rng(5), s=4, bucket=64)
    x = rng(6).standard_normal(200).astype(np.float32)
    c = op.compress(x)
    assert c.payload["norm"].size == 4
    assert op.bits(c) == 4 * 32 + 200 * (1 + 3)
    # each bucket is scaled by its own norm: the output keeps bucket-wise levels
    y = op.decompress(c).astype(np.float64)
    for b in range(4):
        part = x[b * 64:(b + 1) * 64].astype(np.float64)
        lev = np.abs(y[b * 64:(b + 1) * 64]) / np.linalg.norm(part) * 4
        assert np.allclose(lev, np.round(lev), atol=1e-4)


def test_terngrad_second_moment():
    g = rng(7).standard_normal(400).astype(np.float32)
    op = TernGrad(rng(8))
    n = 20000
    sq = np.array([np.sum(op.roundtrip(g).astype(np.float64) ** 2) for _ in range(n)])
    a = np.abs(g.astype(np.float64))
    expect = a.max() * a.sum()
    p = a / a.max()
    se = np.sqrt(a.max() ** 4 * np.sum(p * (1 - p)) / n)  # ||g~||^2 = s^2 * #kept
    assert abs(sq.mean() - expect) <= 5 * se


def test_terngrad_is_ternary_and_unbiased():
    g = rng(9).standard_normal(30).astype(np.float32)
    op = TernGrad(rng(10))
    y = np.stack([op.roundtrip(g) for _ in range(40000)]).astype(np.float64)
    s = np.abs(g).max()
    assert set(np.unique(y)) <= {-s, 0.0, s}
    se = y.std(axis=0) / np.sqrt(y.shape[0])
    assert np.all(np.abs(y.mean(axis=0) - g) <= 5 * se + 1e-9)
    assert op.bits(op.compress(g)) == 32 + 2 * 30
    assert np.array_equal(op.roundtrip(np.zeros(5, np.float32)), np.zeros(5))
