"""Biased quantizers that papers pair with error feedback (see feedback.py).

registry.py wraps each in ErrorFeedback, as their papers define them; alone they
are the memoryless quantization step.
"""

from __future__ import annotations

import numpy as np

from worker.compression.base import FLOAT_BITS, Compressed, Compressor, as_float32


class OneBit(Compressor):
    """1-bit SGD (Seide et al.): one bit per element, each group sent as its mean.

    Elements >= 0 become the mean of the elements >= 0, the others the mean of
    the negative ones. Wire: 1 bit per element and two 32-bit means.
    """

    def compress(self, x):
        x = as_float32(x)
        flat = x.reshape(-1).astype(np.float64)
        pos = flat >= 0
        mp = flat[pos].mean() if pos.any() else 0.0
        mn = flat[~pos].mean() if (~pos).any() else 0.0
        return Compressed({"bits": np.packbits(pos), "pos": np.float32(mp),
                           "neg": np.float32(mn)}, x.shape)

    def decompress(self, c):
        pos = np.unpackbits(c.payload["bits"], count=c.size).astype(bool)
        return np.where(pos, c.payload["pos"], c.payload["neg"]).astype(np.float32).reshape(c.shape)

    def bits(self, c):
        return c.size + 2 * FLOAT_BITS


class StromQuantizer(Compressor):
    """Strom's threshold quantization: +-tau where |x_i| >= tau, nothing elsewhere.

    Wire: one 32-bit word per sent element, 31-bit index and the sign bit
    (tau is agreed beforehand).
    """

    def __init__(self, rng=None, tau: float | None = None):
        super().__init__(rng)
        if tau is None or not (tau > 0):
            raise ValueError(f"Strom's quantization needs tau > 0, got {tau}")
        self.tau = float(tau)

    def compress(self, x):
        x = as_float32(x)
        flat = x.reshape(-1)
        if flat.size >= 2**31:
            raise ValueError("a 31-bit index cannot address this tensor")
        idx = np.flatnonzero(np.abs(flat) >= self.tau).astype(np.uint32)
        words = (idx << 1) | np.signbit(flat[idx]).astype(np.uint32)
        return Compressed({"words": words}, x.shape)

    def decompress(self, c):
        w = c.payload["words"]
        out = np.zeros(c.size, np.float32)
        out[w >> 1] = np.where(w & 1, -self.tau, self.tau)
        return out.reshape(c.shape)

    def bits(self, c):
        return 32 * int(c.payload["words"].size)


def dryden_counts(flat: np.ndarray, pi: float) -> tuple[int, int]:
    """How many positive and negative entries Dryden's quantizer keeps: ceil(pi * count)."""
    npos = int((flat > 0).sum())
    nneg = int((flat < 0).sum())
    return int(np.ceil(pi * npos)), int(np.ceil(pi * nneg))


def encode_words(idx: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Dryden's wire words for ascending indices: (index - previous index) << 1 | sign."""
    delta = np.diff(idx.astype(np.int64), prepend=0)
    if delta.size and delta.max() >= 2**31:
        raise ValueError("index delta does not fit in 31 bits")
    return (delta.astype(np.uint32) << 1) | neg.astype(np.uint32)


def decode_words(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices and negative flags back from Dryden's wire words."""
    w = np.asarray(words, np.uint32)
    return np.cumsum((w >> 1).astype(np.int64)), (w & 1).astype(bool)


class DrydenQuantizer(Compressor):
    """Dryden et al.'s adaptive quantization (2016).

    Of the positive entries the ceil(pi * #positive) largest are kept and sent as
    their mean; likewise the negative ones. Wire: one 32-bit word per kept entry,
    (index delta) << 1 | sign, indices ascending, and the two 32-bit means.
    """

    def __init__(self, rng=None, pi: float = 0.01):
        super().__init__(rng)
        if not (0 < pi <= 1):
            raise ValueError(f"Dryden's proportion pi must be in (0, 1], got {pi}")
        self.pi = float(pi)

    def compress(self, x):
        x = as_float32(x)
        flat = x.reshape(-1)
        kp, kn = dryden_counts(flat, self.pi)
        pos = np.flatnonzero(flat > 0)
        neg = np.flatnonzero(flat < 0)
        top_p = pos[np.argpartition(-flat[pos], kp - 1)[:kp]] if kp else pos[:0]
        top_n = neg[np.argpartition(flat[neg], kn - 1)[:kn]] if kn else neg[:0]
        mp = np.float32(flat[top_p].astype(np.float64).mean()) if kp else np.float32(0)
        mn = np.float32(flat[top_n].astype(np.float64).mean()) if kn else np.float32(0)
        idx = np.concatenate([top_p, top_n])
        sign = np.concatenate([np.zeros(kp, bool), np.ones(kn, bool)])
        order = np.argsort(idx, kind="stable")
        words = encode_words(idx[order], sign[order])
        return Compressed({"words": words, "pos": mp, "neg": mn}, x.shape)

    def decompress(self, c):
        idx, neg = decode_words(c.payload["words"])
        out = np.zeros(c.size, np.float32)
        out[idx] = np.where(neg, c.payload["neg"], c.payload["pos"])
        return out.reshape(c.shape)

    def bits(self, c):
        return 32 * int(c.payload["words"].size) + 2 * FLOAT_BITS
