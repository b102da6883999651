"""Error feedback: what a compressor dropped is added to the next input.

residual <- input + residual - decompress(compress(input + residual)). Works
with any compressor; one instance per tensor (per layer in layer-wise mode, per
worker), since the residual belongs to that stream. Over any number of steps,
the sum of what was sent plus the final residual equals the sum of the inputs.
"""

from __future__ import annotations

import numpy as np

from worker.compression.base import Compressed, Compressor, as_float32


class ErrorFeedback(Compressor):
    """Wraps a compressor; same payload and wire cost, plus a residual kept locally."""

    def __init__(self, inner: Compressor):
        super().__init__(inner.rng)
        self.inner = inner
        self.residual: np.ndarray | None = None
        self.spec = f"ef:{inner.spec}"

    def compress(self, x) -> Compressed:
        x = as_float32(x)
        if self.residual is None:
            self.residual = np.zeros(x.shape, np.float32)
        elif self.residual.shape != x.shape:
            raise ValueError(f"error feedback keeps a residual of shape {self.residual.shape}, "
                             f"got an input of shape {x.shape}: use one instance per tensor")
        corrected = x + self.residual
        c = self.inner.compress(corrected)
        self.residual = corrected - self.inner.decompress(c)
        return c

    def decompress(self, c):
        return self.inner.decompress(c)

    def bits(self, c):
        return self.inner.bits(c)

    def reset(self):
        self.residual = None
        self.inner.reset()
