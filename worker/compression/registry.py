"""Compressors by name, for command lines: `--compressor topk:0.01`.

Grammar:
    spec   := "ef:" spec | term | term "+" term
    term   := name [":" arg ("," arg)*]
    arg    := value | key "=" value
A bare value fills the operator's first parameter. "a+b" applies b to the
values a keeps (a must be a sparsifier): "topk:0.01+cnat" is C_nat after top-k.
"ef:" wraps error feedback around any spec. Examples: cnat, dnat:s=4,p=inf,
qsgd:s=4,bucket=512, randk:0.01,scaled=0, strom:tau=0.01, ef:topk:0.01+cnat,
ef:blocktopk:0.1+cnat (C_nat after block top-k, with error feedback).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from worker.compression.base import Compressor, Identity
from worker.compression.compose import Compose
from worker.compression.dithering import RandomDithering, TernGrad
from worker.compression.feedback import ErrorFeedback
from worker.compression.natural import NaturalCompression, NaturalDithering
from worker.compression.quantize import DrydenQuantizer, OneBit, StromQuantizer
from worker.compression.sparsify import AdaptiveThreshold, BlockTopK, RandomK, Threshold, TopK

_REQUIRED = object()


def _float(text: str) -> float:
    v = float(text)
    if math.isnan(v):
        raise ValueError("nan")
    return v


def _int(text: str) -> int:
    v = float(text)
    if v != int(v):
        raise ValueError("not an integer")
    return int(v)


def _bool(text: str) -> bool:
    t = text.lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a boolean")


@dataclass(frozen=True)
class Entry:
    build: Callable[..., Compressor]
    params: dict[str, tuple[Callable[[str], object], object]]  # name -> (parser, default)
    help: str

    @property
    def first(self) -> str | None:
        return next(iter(self.params), None)


def _ef(cls):
    return lambda rng, **kw: ErrorFeedback(cls(rng, **kw))


REGISTRY: dict[str, Entry] = {
    "none": Entry(lambda rng: Identity(rng), {}, "no compression (32 bits/element)"),
    "cnat": Entry(NaturalCompression, {}, "natural compression C_nat (9 bits/element)"),
    "dnat": Entry(NaturalDithering, {"s": (_int, 8), "p": (_float, 2.0), "bucket": (_int, 0)},
                  "natural dithering D_nat^{p,s}"),
    "qsgd": Entry(lambda rng, **kw: RandomDithering(rng, p=2.0, **kw),
                  {"s": (_int, 4), "bucket": (_int, 0)}, "QSGD: random dithering, p = 2"),
    "dither": Entry(RandomDithering, {"s": (_int, 4), "p": (_float, 2.0), "bucket": (_int, 0)},
                    "random dithering D^{p,s}"),
    "terngrad": Entry(TernGrad, {}, "TernGrad"),
    "topk": Entry(TopK, {"ratio": (_float, None), "k": (_int, None)}, "top-k"),
    "blocktopk": Entry(BlockTopK, {"ratio": (_float, None), "k": (_int, None),
                                   "block": (_int, 168)},
                       "block top-k: the k blocks (of `block` elements) of largest norm; "
                       "blocktopk:0.1+cnat is C_nat after it, ef: adds error feedback"),
    "randk": Entry(RandomK, {"ratio": (_float, None), "k": (_int, None),
                             "scaled": (_bool, True)},
                   "random-k (scaled=1: unbiased d/k scaling; 0: unscaled)"),
    "threshold": Entry(Threshold, {"v": (_float, _REQUIRED)}, "keep |x| >= v"),
    "adaptive": Entry(AdaptiveThreshold, {"fraction": (_float, 0.5)},
                      "keep |x| >= fraction * max|x|"),
    "onebit": Entry(lambda rng, ef=True: ErrorFeedback(OneBit(rng)) if ef else OneBit(rng),
                    {"ef": (_bool, True)},
                    "1-bit SGD with error feedback (Seide et al.); ef=0: without it"),
    "strom": Entry(_ef(StromQuantizer), {"tau": (_float, _REQUIRED)},
                   "Strom's threshold quantization with error feedback"),
    "dryden": Entry(_ef(DrydenQuantizer), {"pi": (_float, 0.01)},
                    "Dryden et al.'s adaptive quantization with error feedback"),
}


@dataclass(frozen=True)
class Factory:
    """A parsed spec: call it with a seeded Generator to get a fresh compressor."""

    spec: str
    build: Callable[[np.random.Generator], Compressor]

    def __call__(self, rng: np.random.Generator) -> Compressor:
        c = self.build(rng)
        c.spec = self.spec
        return c


def _term(text: str) -> Callable[[np.random.Generator], Compressor]:
    name, _, argtext = text.partition(":")
    name = name.strip().lower()
    if name not in REGISTRY:
        raise ValueError(f"unknown compressor {name!r} in {text!r}; known: "
                         f"{', '.join(sorted(REGISTRY))}, and ef:<spec>, <a>+<b>")
    entry = REGISTRY[name]
    kwargs: dict[str, object] = {}
    args = [a.strip() for a in argtext.split(",")] if argtext.strip() else []
    for i, arg in enumerate(args):
        key, eq, value = arg.partition("=")
        if not eq:
            if entry.first is None:
                raise ValueError(f"{name} takes no parameters, got {arg!r}")
            if i > 0:
                raise ValueError(f"{name}: only the first argument may omit its name "
                                 f"({entry.first}), got {arg!r}")
            key, value = entry.first, arg
        key = key.strip()
        if key not in entry.params:
            known = ", ".join(entry.params) or "none"
            raise ValueError(f"{name}: unknown parameter {key!r} (parameters: {known})")
        if key in kwargs:
            raise ValueError(f"{name}: parameter {key!r} given twice")
        parse, _ = entry.params[key]
        try:
            kwargs[key] = parse(value.strip())
        except ValueError:
            raise ValueError(f"{name}: bad value {value!r} for {key} "
                             f"(expected {parse.__name__.strip('_')})") from None
    for key, (_, default) in entry.params.items():
        if key not in kwargs and default is _REQUIRED:
            raise ValueError(f"{name}: parameter {key!r} is required")
    if name in ("topk", "randk", "blocktopk") and "ratio" not in kwargs and "k" not in kwargs:
        raise ValueError(f"{name}: give a ratio ({name}:0.01) or a count ({name}:k=100)")
    # construct once now so that out-of-range values fail at parse time
    entry.build(np.random.default_rng(0), **kwargs)
    label = text.strip()

    def build(rng):
        c = entry.build(rng, **kwargs)
        c.spec = label
        return c

    return build


def parse(spec: str) -> Factory:
    """The factory for a spec string; ValueError with the reason when it is bad."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("empty compressor spec")
    text = spec.strip()
    if text.lower().startswith("ef:"):
        inner = parse(text[3:])
        return Factory(text, lambda rng: ErrorFeedback(inner(rng)))
    parts = text.split("+")
    if len(parts) > 2:
        raise ValueError(f"{text!r}: composition takes two operators (a+b)")
    if len(parts) == 2:
        first, then = _term(parts[0]), _term(parts[1])
        probe = first(np.random.default_rng(0))
        Compose(probe, then(np.random.default_rng(0)))  # fails early unless a sparsifier
        return Factory(text, lambda rng: Compose(first(rng), then(rng)))
    return Factory(text, _term(text))


def make(spec: str, rng: np.random.Generator) -> Compressor:
    """A compressor for a spec string, drawing from rng."""
    return parse(spec)(rng)


def describe() -> str:
    """One line per registered name, for --help texts."""
    lines = []
    for name, e in REGISTRY.items():
        ps = ",".join(f"{k}={'?' if d is _REQUIRED else d}" for k, (_, d) in e.params.items())
        lines.append(f"{name}{':' + ps if ps else ''}  {e.help}")
    return "\n".join(lines)
