"""Compressor specs on the command line: every name builds, bad ones say why."""

import numpy as np
import pytest

from worker.compression.compose import Compose
from worker.compression.dithering import RandomDithering
from worker.compression.feedback import ErrorFeedback
from worker.compression.registry import REGISTRY, describe, make, parse
from worker.compression.sparsify import RandomK, TopK

EXAMPLES = {
    "none": "none", "cnat": "cnat", "dnat": "dnat:s=4,p=inf", "qsgd": "qsgd:s=4,bucket=512",
    "dither": "dither:3,p=1", "terngrad": "terngrad", "topk": "topk:0.01", "randk": "randk:k=5",
    "threshold": "threshold:2.0", "adaptive": "adaptive:fraction=0.25", "onebit": "onebit",
    "strom": "strom:tau=0.1", "dryden": "dryden:0.05", "blocktopk": "blocktopk:0.25,block=16",
}


def test_every_registered_name_builds_and_roundtrips():
    assert set(EXAMPLES) == set(REGISTRY)
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    for name, spec in EXAMPLES.items():
        op = make(spec, np.random.default_rng(1))
        c = op.compress(x)
        assert op.decompress(c).shape == x.shape, name
        assert 0 < op.bits(c) <= 32 * x.size + 64, name
        assert op.spec == spec
    assert all(name in describe() for name in REGISTRY)


def test_parameters_reach_the_operator():
    op = make("qsgd:s=7,bucket=64", np.random.default_rng(0))
    assert isinstance(op, RandomDithering) and (op.s, op.p, op.bucket) == (7, 2.0, 64)
    op = make("randk:0.25,scaled=no", np.random.default_rng(0))
    assert isinstance(op, RandomK) and op.ratio == 0.25 and not op.scaled
    op = make("ef:topk:k=3+cnat", np.random.default_rng(0))
    assert isinstance(op, ErrorFeedback) and isinstance(op.inner, Compose)
    assert isinstance(op.inner.first, TopK) and op.inner.first.k == 3


def test_factories_give_independent_instances():
    f = parse("ef:topk:0.1")
    a, b = f(np.random.default_rng(0)), f(np.random.default_rng(0))
    a.compress(np.ones(10, np.float32))
    assert a.residual is not None and b.residual is None


@pytest.mark.parametrize("spec,reason", [
    ("bogus", "unknown compressor 'bogus'"),
    ("topk", "give a ratio"),
    ("topk:2", "ratio must be in"),
    ("topk:abc", "bad value 'abc' for ratio"),
    ("topk:0.1,depth=3", "unknown parameter 'depth'"),
    ("topk:0.1,0.2", "only the first argument"),
    ("topk:ratio=0.1,ratio=0.2", "given twice"),
    ("threshold", "'v' is required"),
    ("cnat:3", "takes no parameters"),
    ("qsgd:s=2.5", "expected int"),
    ("randk:0.1,scaled=maybe", "expected bool"),
    ("cnat+topk:0.1", "compose a sparsifier"),
    ("topk:0.1+cnat+cnat", "two operators"),
    ("", "empty"),
    ("ef:", "empty"),
    ("dnat:s=0", "integer s >= 1"),
])
def test_bad_specs_say_why(spec, reason):
    with pytest.raises(ValueError, match=reason):
        parse(spec)
