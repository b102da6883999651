"""Error feedback with any compressor: nothing is lost, only delayed."""

import numpy as np
import pytest

from worker.compression.feedback import ErrorFeedback
from worker.compression.registry import make


@pytest.mark.parametrize("spec", ["topk:0.05", "cnat", "randk:0.1,scaled=0", "strom:tau=20",
                                  "threshold:30", "topk:0.1+cnat"])
def test_sent_plus_residual_equals_inputs_exactly(spec):
    # integer inputs and power-of-two or copied outputs keep every float32 step exact
    g = np.random.default_rng(1)
    op = make(spec, np.random.default_rng(2))
    if not isinstance(op, ErrorFeedback):
        op = ErrorFeedback(op)
    inputs = [g.integers(-100, 100, 300).astype(np.float32) for _ in range(25)]
    sent = np.zeros(300, np.float64)
    for x in inputs:
        sent += op.roundtrip(x)
    assert np.array_equal(sent + op.residual, np.sum(inputs, axis=0))


@pytest.mark.parametrize("spec", ["onebit", "qsgd:s=2", "terngrad", "dnat:s=3", "adaptive"])
def test_sent_plus_residual_equals_inputs(spec):
    g = np.random.default_rng(3)
    op = make(spec, np.random.default_rng(4))
    if not isinstance(op, ErrorFeedback):
        op = ErrorFeedback(op)
    inputs = [g.standard_normal(200).astype(np.float32) for _ in range(25)]
    sent = sum(op.roundtrip(x).astype(np.float64) for x in inputs)
    # float32 rounding of each residual update: 25 steps of 2^-24 relative error at the
    # largest magnitude seen (error feedback around a high-variance operator such as
    # QSGD with s = 2 lets the residual grow, which this invariant does not care about)
    scale = max(1.0, np.abs(op.residual).max(), np.abs(sent).max())
    assert np.allclose(sent + op.residual, np.sum(inputs, axis=0, dtype=np.float64),
                       rtol=0, atol=25 * 2.0**-23 * scale)


def test_the_residual_is_carried_into_the_next_step():
    op = ErrorFeedback(make("topk:k=1", np.random.default_rng(0)))
    assert np.array_equal(op.roundtrip(np.array([3.0, 2.0, 0.0], np.float32)), [3, 0, 0])
    assert np.array_equal(op.residual, [0, 2, 0])
    assert np.array_equal(op.roundtrip(np.array([0.0, 2.0, 1.0], np.float32)), [0, 4, 0])
    op.reset()
    assert op.residual is None


def test_one_residual_per_tensor():
    op = ErrorFeedback(make("cnat", np.random.default_rng(0)))
    op.compress(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="one instance per tensor"):
        op.compress(np.ones(5, np.float32))
