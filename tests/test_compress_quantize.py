"""One-bit, Strom's and Dryden's quantizers, each with its error feedback."""

import numpy as np
import pytest

from worker.compression.feedback import ErrorFeedback
from worker.compression.quantize import (
    DrydenQuantizer,
    OneBit,
    StromQuantizer,
    decode_words,
    dryden_counts,
    encode_words,
)
from worker.compression.registry import make


def test_strom_example_from_the_issue():
    op = ErrorFeedback(StromQuantizer(tau=4))
    grad = np.array([-6, -2, 3, 1, 10, 5, -3, 2, -8, 0], np.float32)
    op.residual = np.array([-3, 1, -1, 5, -2, 2, 3, -7, -2, -100], np.float32)
    c = op.compress(grad)
    assert np.array_equal(op.decompress(c), [-4, 0, 0, 4, 4, 4, 0, -4, -4, -4])
    assert np.array_equal(op.residual, [-5, -1, 2, 2, 4, 3, 0, -1, -6, -96])
    # wire: one 32-bit word per sent element, index << 1 | sign
    assert op.bits(c) == 7 * 32
    assert list(c.payload["words"]) == [0 << 1 | 1, 3 << 1, 4 << 1, 5 << 1, 7 << 1 | 1,
                                        8 << 1 | 1, 9 << 1 | 1]


def test_registry_strom_is_with_error_feedback():
    op = make("strom:tau=4", np.random.default_rng(0))
    assert isinstance(op, ErrorFeedback) and isinstance(op.inner, StromQuantizer)


def test_onebit_sends_the_two_means():
    x = np.array([1.0, 3.0, -2.0, 0.0, -4.0], np.float32)
    op = OneBit()
    c = op.compress(x)
    assert op.bits(c) == 5 + 64
    assert np.allclose(op.decompress(c), [4 / 3, 4 / 3, -3, 4 / 3, -3])
    # the sum is kept: each group is replaced by its mean
    assert np.isclose(op.decompress(c).sum(), x.sum())


@pytest.mark.parametrize("pi", [0.01, 0.1, 0.5, 1.0])
def test_dryden_keeps_the_proportion_of_each_sign(pi):
    g = np.random.default_rng(1)
    x = g.standard_normal(997).astype(np.float32)
    x[:50] = 0
    op = DrydenQuantizer(pi=pi)
    c = op.compress(x)
    y = op.decompress(c)
    kp, kn = dryden_counts(x, pi)
    assert kp == int(np.ceil(pi * (x > 0).sum())) and kn == int(np.ceil(pi * (x < 0).sum()))
    assert (y > 0).sum() == kp and (y < 0).sum() == kn
    # the kept ones are the largest of their sign, each sent as its group's mean
    pos_kept = x[y > 0]
    assert pos_kept.min() >= x[(x > 0) & (y == 0)].max(initial=0)
    assert np.allclose(y[y > 0], pos_kept.astype(np.float64).mean())
    neg_kept = x[y < 0]
    assert neg_kept.max() <= x[(x < 0) & (y == 0)].min(initial=0)
    assert np.allclose(y[y < 0], neg_kept.astype(np.float64).mean())
    assert op.bits(c) == 32 * (kp + kn) + 64


def test_dryden_wire_words():
    idx = np.array([3, 4, 10, 1000, 1001])
    neg = np.array([True, False, False, True, True])
    w = encode_words(idx, neg)
    assert list(w) == [3 << 1 | 1, 1 << 1, 6 << 1, 990 << 1 | 1, 1 << 1 | 1]
    i2, n2 = decode_words(w)
    assert np.array_equal(i2, idx) and np.array_equal(n2, neg)
    with pytest.raises(ValueError):
        encode_words(np.array([0, 2**31]), np.array([False, False]))


def test_dryden_with_error_feedback_keeps_the_sum():
    g = np.random.default_rng(2)
    op = make("dryden:0.05", np.random.default_rng(0))
    steps = [g.integers(-50, 50, 400).astype(np.float32) for _ in range(30)]
    sent = sum(op.roundtrip(s).astype(np.float64) for s in steps)
    # means make the sent values inexact in float32: compare to a tight relative tolerance
    assert np.allclose(sent + op.residual, np.sum(steps, axis=0), atol=1e-3)
