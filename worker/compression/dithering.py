"""Random dithering (QSGD) and TernGrad: a norm per bucket, a few levels per element."""

from __future__ import annotations

import math

import numpy as np

from worker.compression.base import Compressed, Compressor, as_float32
from worker.compression.natural import _pnorm, buckets


class RandomDithering(Compressor):
    """Random dithering D^{p,s} with uniform levels; QSGD is p = 2 (Alistarh et al.).

    Per bucket v: t = |v_i| / ||v||_p is rounded at random, unbiasedly, to one of
    its two neighbours in {0, 1/s, ..., 1}; the output is sign(v_i) ||v||_p level.
    For p = 2, omega <= min(d/s^2, sqrt(d)/s), d the bucket size.

    Wire per bucket: the 32-bit norm, then per element a sign bit and the level
    (s + 1 values) in ceil(log2(s + 1)) bits. (QSGD's Elias coding would pack
    sparse levels tighter; this is the plain fixed-width layout.)
    """

    unbiased = True
    randomized = True

    def __init__(self, rng=None, s: int = 4, p: float = 2.0, bucket: int = 0):
        super().__init__(rng)
        if int(s) != s or s < 1:
            raise ValueError(f"dithering needs an integer s >= 1, got {s}")
        if not (p >= 1):
            raise ValueError(f"dithering needs p >= 1, got {p}")
        self.s, self.p, self.bucket = int(s), float(p), int(bucket)

    def compress(self, x):
        x = as_float32(x)
        v = buckets(x, self.bucket).astype(np.float64)
        norm = _pnorm(v, self.p)
        safe = np.where(norm > 0, norm, 1.0)
        t = np.minimum(np.abs(v) / safe[:, None], 1.0) * self.s
        lo = np.floor(t)
        level = lo + (self.rng.random(t.shape) < (t - lo))
        return Compressed({"norm": norm.astype(np.float32), "level": level.astype(np.uint16),
                           "sign": np.signbit(v)}, x.shape)

    def decompress(self, c):
        mag = c.payload["level"].astype(np.float64) / self.s
        val = np.where(c.payload["sign"], -mag, mag) * c.payload["norm"].astype(np.float64)[:, None]
        return val.reshape(-1)[: c.size].astype(np.float32).reshape(c.shape)

    def bits(self, c):
        return 32 * c.payload["norm"].size + (1 + math.ceil(math.log2(self.s + 1))) * c.size


class TernGrad(Compressor):
    """TernGrad (Wen et al.): g~ = ||g||_inf * sign(g) * b, b_i ~ Bernoulli(|g_i| / ||g||_inf).

    Unbiased; E||g~||^2 = ||g||_inf ||g||_1. (The paper's optional gradient
    clipping is left to the caller.) Wire: the 32-bit scale and 2 bits per element.
    """

    unbiased = True
    randomized = True

    def compress(self, x):
        x = as_float32(x)
        a = np.abs(x.reshape(-1).astype(np.float64))
        scale = a.max() if a.size else 0.0
        keep = self.rng.random(a.shape) * scale < a
        tern = np.where(keep, np.where(np.signbit(x.reshape(-1)), -1, 1), 0).astype(np.int8)
        return Compressed({"scale": np.float32(scale), "tern": tern}, x.shape)

    def decompress(self, c):
        return (c.payload["tern"].astype(np.float32) * c.payload["scale"]).reshape(c.shape)

    def bits(self, c):
        return 32 + 2 * c.size
