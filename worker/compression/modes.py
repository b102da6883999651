"""Layer-wise or entire-model: the same operator per layer, or once on all layers.

A model's gradient is a flat float32 vector made of layers (parameter tensors)
of known sizes. In "layer" mode every layer has its own compressor (and, with
error feedback, its own residual); in "model" mode one compressor sees the
concatenation. Statistics the operator takes over its input (top-k's ranking,
a norm, a mean, a maximum) are then per layer or global.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from worker.compression.base import Compressed, Compressor

MODES = ("layer", "model")


class ModelCompressor:
    """Compresses a flat gradient layer-wise or as a whole; `make()` builds one compressor."""

    def __init__(self, make: Callable[[], Compressor], layer_sizes: Sequence[int],
                 mode: str = "layer"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        sizes = [int(s) for s in layer_sizes]
        if not sizes or min(sizes) < 1:
            raise ValueError("layer sizes must be positive")
        self.mode = mode
        self.sizes = sizes
        self.bounds = np.cumsum([0] + sizes)
        self.compressors = [make() for _ in (sizes if mode == "layer" else [0])]

    @property
    def size(self) -> int:
        return int(self.bounds[-1])

    def _check(self, flat) -> np.ndarray:
        x = np.asarray(flat, dtype=np.float32).reshape(-1)
        if x.size != self.size:
            raise ValueError(f"expected {self.size} elements, got {x.size}")
        return x

    def compress(self, flat) -> list[Compressed]:
        x = self._check(flat)
        if self.mode == "model":
            return [self.compressors[0].compress(x)]
        return [c.compress(x[a:b]) for c, a, b in
                zip(self.compressors, self.bounds[:-1], self.bounds[1:], strict=True)]

    def decompress(self, parts: list[Compressed]) -> np.ndarray:
        if len(parts) != len(self.compressors):
            raise ValueError(f"expected {len(self.compressors)} parts, got {len(parts)}")
        out = [c.decompress(p).reshape(-1) for c, p in zip(self.compressors, parts, strict=True)]
        return np.concatenate(out).astype(np.float32, copy=False)

    def bits(self, parts: list[Compressed]) -> int:
        return int(sum(c.bits(p) for c, p in zip(self.compressors, parts, strict=True)))

    def roundtrip(self, flat) -> tuple[np.ndarray, int]:
        """What the receiver sees, and the bits it cost."""
        parts = self.compress(flat)
        return self.decompress(parts), self.bits(parts)

    def reset(self) -> None:
        for c in self.compressors:
            c.reset()
