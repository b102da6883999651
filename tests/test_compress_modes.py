"""Layer-wise versus entire-model application; composition."""

import numpy as np
import pytest

from worker.compression.modes import ModelCompressor
from worker.compression.registry import make, parse

SIZES = [4096, 64, 640, 10]


def _grad(seed=0):
    g = np.random.default_rng(seed)
    parts = [g.standard_normal(SIZES[0]), g.standard_normal(SIZES[1]) * 0.001,
             g.standard_normal(SIZES[2]), g.standard_normal(SIZES[3])]
    return np.concatenate(parts).astype(np.float32)


def _per_layer_counts(y):
    bounds = np.cumsum([0] + SIZES)
    return [int(np.count_nonzero(y[a:b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def test_layerwise_topk_keeps_its_share_of_every_layer():
    k = 0.05
    mc = ModelCompressor(lambda: make(f"topk:{k}", np.random.default_rng(0)), SIZES, "layer")
    y, bits = mc.roundtrip(_grad())
    counts = _per_layer_counts(y)
    assert counts == [max(1, round(k * d)) for d in SIZES]
    assert bits == sum(32 + 64 * c for c in counts)


def test_entire_model_topk_can_leave_a_layer_empty():
    k = 0.05
    mc = ModelCompressor(lambda: make(f"topk:{k}", np.random.default_rng(0)), SIZES, "model")
    y, bits = mc.roundtrip(_grad())
    counts = _per_layer_counts(y)
    assert sum(counts) == round(k * sum(SIZES))
    assert counts[1] == 0, "the small-gradient layer should lose all its elements"
    assert bits == 32 + 64 * sum(counts)


def test_modes_differ_only_in_what_the_statistics_see():
    x = _grad(1)
    # an element-wise operator is the same in both modes
    for mode in ("layer", "model"):
        mc = ModelCompressor(lambda: make("cnat", np.random.default_rng(0)), SIZES, mode)
        y, bits = mc.roundtrip(x)
        assert bits == 9 * x.size
        assert np.all((y == 0) == (x == 0))
    # a norm-based one scales each layer by its own norm in layer mode
    mc = ModelCompressor(lambda: make("terngrad", np.random.default_rng(0)), SIZES, "layer")
    y, _ = mc.roundtrip(x)
    assert np.abs(y[4096:4160]).max() == np.abs(x[4096:4160]).max()
    mc = ModelCompressor(lambda: make("terngrad", np.random.default_rng(0)), SIZES, "model")
    y, _ = mc.roundtrip(x)
    assert set(np.unique(np.abs(y))) <= {0, np.abs(x).max()}


def test_layerwise_error_feedback_keeps_one_residual_per_layer():
    mc = ModelCompressor(lambda: make("onebit", np.random.default_rng(0)), SIZES, "layer")
    mc.compress(_grad())
    assert [c.residual.size for c in mc.compressors] == SIZES
    mc.reset()
    assert all(c.residual is None for c in mc.compressors)


def test_bad_modes_and_sizes():
    with pytest.raises(ValueError, match="mode"):
        ModelCompressor(lambda: make("cnat", np.random.default_rng(0)), SIZES, "per-row")
    mc = ModelCompressor(lambda: make("cnat", np.random.default_rng(0)), SIZES, "model")
    with pytest.raises(ValueError, match="elements"):
        mc.compress(np.zeros(10, np.float32))


def test_cnat_after_topk():
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    op = parse("topk:0.02+cnat")(np.random.default_rng(3))
    c = op.compress(x)
    assert op.bits(c) == 32 + 20 * (32 + 9)
    y = op.decompress(c)
    idx = np.flatnonzero(y)
    top = np.argsort(-np.abs(x))[:20]
    assert set(idx) == set(top)
    assert np.all(y[idx].view(np.uint32) & 0x7FFFFF == 0)  # powers of two
    # unbiased on the kept values: average many draws
    ys = np.stack([op.roundtrip(x) for _ in range(20000)]).astype(np.float64)[:, top]
    se = ys.std(axis=0) / np.sqrt(ys.shape[0])
    assert np.all(np.abs(ys.mean(axis=0) - x[top]) <= 5 * se)
