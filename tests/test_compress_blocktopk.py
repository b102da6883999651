"""Block top-k, C_nat after it (C_nat o block-top-k), and error feedback around both."""

import numpy as np
import pytest

from worker.compression.compose import Compose
from worker.compression.feedback import ErrorFeedback
from worker.compression.natural import NaturalCompression
from worker.compression.registry import make
from worker.compression.sparsify import BlockTopK

BLOCK = 8


def _x(seed, blocks=12, tail=3):
    """Blocks of distinct norms (block i scaled by a permutation), a short last block and two
    all-zero blocks."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(blocks * BLOCK + tail).astype(np.float32)
    scale = g.permutation(blocks + 1).astype(np.float32) + 1
    for i in range(blocks + 1):
        x[i * BLOCK:(i + 1) * BLOCK] *= scale[i]
    x[2 * BLOCK:3 * BLOCK] = 0
    x[7 * BLOCK:8 * BLOCK] = 0
    return x


@pytest.mark.parametrize("k", [1, 4, 11, 13])
def test_keeps_exactly_the_k_blocks_of_largest_norm(k):
    x = _x(k)
    op = BlockTopK(k=k, block=BLOCK)
    c = op.compress(x)
    rows = op.blocks_of(x)
    norms = np.linalg.norm(rows.astype(np.float64), axis=1)
    nonzero = np.flatnonzero(norms)
    expect = np.sort(nonzero[np.argsort(norms[nonzero])[::-1][:k]])
    assert np.array_equal(c.payload["blocks"], expect)     # zero blocks are never kept
    y = op.decompress(c)
    assert y.shape == x.shape
    mask = np.zeros(rows.shape[0], bool)
    mask[expect] = True
    inside = np.repeat(mask, BLOCK)[:x.size]
    assert np.array_equal(y[inside], x[inside]) and not y[~inside].any()
    assert op.bits(c) == 32 + expect.size * (32 + 32 * BLOCK)
    err = np.sum((x.astype(np.float64) - y) ** 2)
    assert err <= (1 - k / rows.shape[0]) * np.sum(x.astype(np.float64) ** 2) + 1e-9


def test_ratio_and_bad_parameters():
    x = _x(1)
    assert BlockTopK(ratio=0.25, block=BLOCK).compress(x).payload["blocks"].size == 3
    for bad in ({"ratio": 0}, {"k": 0}, {}, {"ratio": 0.1, "block": 0}):
        with pytest.raises(ValueError):
            BlockTopK(**bad)


def test_cnat_after_block_topk_is_unbiased_on_the_kept_blocks_with_cnat_variance():
    x = _x(5)
    op = Compose(BlockTopK(k=4, block=BLOCK), NaturalCompression(np.random.default_rng(6)))
    kept = BlockTopK(k=4, block=BLOCK).roundtrip(x).astype(np.float64)
    n = 20000
    out = np.stack([op.roundtrip(x) for _ in range(n)]).astype(np.float64)
    assert not out[:, kept == 0].any()                      # the support is the kept blocks
    t = np.abs(kept)
    lo = np.where(t > 0, 2.0 ** np.floor(np.log2(np.where(t > 0, t, 1))), 0)
    var = (t - lo) * (2 * lo - t)                           # C_nat's exact variance
    # the mean within 5 standard errors (plus float slack for exact powers of two)
    assert np.all(np.abs(out.mean(axis=0) - kept) <= 5 * np.sqrt(var / n) + 1e-12 * t)
    # the variance: C_nat's values are lo or 2 lo, so the sample variance's std is <= lo^2/sqrt n
    assert np.all(np.abs(out.var(axis=0) - var) <= 5 * lo**2 / np.sqrt(n) + 1e-12)
    # and at most 1/8 of the kept blocks' squared norm (C_nat's omega)
    assert var.sum() <= np.sum(kept**2) / 8


def test_error_feedback_carries_the_dropped_blocks():
    op = make("ef:blocktopk:k=1,block=2", np.random.default_rng(0))
    assert isinstance(op, ErrorFeedback)
    y = op.roundtrip(np.array([3, 4, 1, 0, 0, 2], np.float32))
    assert np.array_equal(y, [3, 4, 0, 0, 0, 0])
    assert np.array_equal(op.residual, [0, 0, 1, 0, 0, 2])
    # the residual joins the next input: block 1 (norm^2 1 + 9 = 10) now beats block 2 (4)
    y = op.roundtrip(np.array([0, 0, 0, 3, 0, 0], np.float32))
    assert np.array_equal(y, [0, 0, 1, 3, 0, 0])
    assert np.array_equal(op.residual, [0, 0, 0, 0, 0, 2])


@pytest.mark.parametrize("spec", ["ef:blocktopk:k=2,block=8", "ef:blocktopk:0.2,block=8+cnat"])
def test_sent_plus_residual_equals_the_inputs(spec):
    # integer inputs and power-of-two or copied outputs keep every float32 step exact
    g = np.random.default_rng(1)
    op = make(spec, np.random.default_rng(2))
    inputs = [g.integers(-100, 100, 100).astype(np.float32) for _ in range(25)]
    sent = sum(op.roundtrip(x).astype(np.float64) for x in inputs)
    assert np.array_equal(sent + op.residual, np.sum(inputs, axis=0))
