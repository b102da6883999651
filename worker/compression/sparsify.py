"""Sparsifiers: send some elements (values and where they are), drop the rest.

Every payload holds a float32 array "values"; compose.py may compress it further.
"""

from __future__ import annotations

import numpy as np

from worker.compression.base import FLOAT_BITS, INDEX_BITS, Compressed, Compressor, as_float32


def count_for(d: int, ratio: float | None, k: int | None) -> int:
    """How many of d elements a ratio (rounded, at least 1) or an absolute k keeps."""
    if d == 0:
        return 0
    if k is not None:
        return min(int(k), d)
    return min(d, max(1, int(round(ratio * d))))


def _check_ratio_k(ratio, k):
    if (ratio is None) == (k is None):
        raise ValueError("give exactly one of ratio (0 < ratio <= 1) and k (k >= 1)")
    if ratio is not None and not (0 < ratio <= 1):
        raise ValueError(f"ratio must be in (0, 1], got {ratio}")
    if k is not None and (int(k) != k or k < 1):
        raise ValueError(f"k must be an integer >= 1, got {k}")


class Sparsifier(Compressor):
    """Payload with the kept values in "values" (float32, 32 bits each) and their positions."""

    def position_bits(self, c: Compressed) -> int:
        """Wire bits that say where the values go."""
        raise NotImplementedError

    def bits(self, c):
        return self.position_bits(c) + FLOAT_BITS * int(c.payload["values"].size)


class _Indexed(Sparsifier):
    """Payload: values (float32) and indices (int32). Wire: 32-bit count, then 32 + 32 bits each."""

    def _pack(self, x, idx):
        flat = x.reshape(-1)
        idx = np.sort(idx).astype(np.int32)
        return Compressed({"values": flat[idx].copy(), "indices": idx}, x.shape)

    def decompress(self, c):
        out = np.zeros(c.size, np.float32)
        out[c.payload["indices"]] = c.payload["values"]
        return out.reshape(c.shape)

    def position_bits(self, c):
        return 32 + INDEX_BITS * int(c.payload["indices"].size)


class TopK(_Indexed):
    """Top-k: the k elements of largest magnitude, exactly k (ties broken arbitrarily).

    ||x - topk(x)||^2 <= (1 - k/d) ||x||^2. Wire: k * (32 value + 32 index) + 32.
    """

    def __init__(self, rng=None, ratio: float | None = None, k: int | None = None):
        super().__init__(rng)
        _check_ratio_k(ratio, k)
        self.ratio, self.k = ratio, k

    def compress(self, x):
        x = as_float32(x)
        flat = x.reshape(-1)
        k = count_for(flat.size, self.ratio, self.k)
        if k == flat.size:
            idx = np.arange(k)
        else:
            idx = np.argpartition(np.abs(flat), flat.size - k)[flat.size - k :]
        return self._pack(x, idx)


class RandomK(Sparsifier):
    """Random-k: k elements chosen uniformly without replacement.

    scaled=True multiplies them by d/k, which makes the operator unbiased;
    scaled=False sends them as they are (the form Dutta et al. used). The
    indices are drawn from a 64-bit seed the receiver replays. Wire: the 64-bit
    seed and k * 32-bit values.
    """

    randomized = True

    def __init__(self, rng=None, ratio: float | None = None, k: int | None = None,
                 scaled: bool = True):
        super().__init__(rng)
        _check_ratio_k(ratio, k)
        self.ratio, self.k, self.scaled = ratio, k, bool(scaled)
        self.unbiased = self.scaled

    @staticmethod
    def _indices(seed: int, d: int, k: int) -> np.ndarray:
        return np.random.default_rng(seed).choice(d, size=k, replace=False)

    def compress(self, x):
        x = as_float32(x)
        flat = x.reshape(-1)
        k = count_for(flat.size, self.ratio, self.k)
        seed = int(self.rng.integers(0, 2**63))
        idx = self._indices(seed, flat.size, k)
        return Compressed({"values": flat[idx].copy(), "seed": seed}, x.shape)

    def decompress(self, c):
        vals = c.payload["values"]
        idx = self._indices(c.payload["seed"], c.size, vals.size)
        out = np.zeros(c.size, np.float32)
        out[idx] = vals * np.float32(c.size / vals.size) if self.scaled and vals.size else vals
        return out.reshape(c.shape)

    def position_bits(self, c):
        return 64


class Threshold(_Indexed):
    """Threshold-v: every element with |x_i| >= v. Wire: 32-bit count, then 64 bits each."""

    def __init__(self, rng=None, v: float | None = None):
        super().__init__(rng)
        if v is None or not (v >= 0):
            raise ValueError(f"threshold needs v >= 0, got {v}")
        self.v = float(v)

    def compress(self, x):
        x = as_float32(x)
        return self._pack(x, np.flatnonzero(np.abs(x.reshape(-1)) >= self.v))


class AdaptiveThreshold(_Indexed):
    """Adaptive threshold: every element with |x_i| >= fraction * max|x| (fraction 1/2).

    Wire: 32-bit count, then 64 bits each.
    """

    def __init__(self, rng=None, fraction: float = 0.5):
        super().__init__(rng)
        if not (0 < fraction <= 1):
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        self.fraction = float(fraction)

    def compress(self, x):
        x = as_float32(x)
        a = np.abs(x.reshape(-1))
        if a.size == 0 or a.max() == 0:
            return self._pack(x, np.zeros(0, np.int64))
        return self._pack(x, np.flatnonzero(a >= self.fraction * a.max()))


class BlockTopK(Sparsifier):
    """Block top-k: cut x into blocks of `block` elements (the last one zero padded), keep
    the k blocks of largest L2 norm whole, drop the others.

    What a block-sparse allreduce sends (docs/PROTOCOL.md "Sparse jobs"): only the kept
    blocks travel, each with its block index. All-zero blocks are never kept, so fewer
    than k blocks may be kept. ||x - blocktopk(x)||^2 <= (1 - k/B) ||x||^2 for B blocks.
    Payload: "values" (float32, the kept blocks' elements in block order, padding
    included) and "blocks" (int32, sorted). Wire: 32-bit count, then per kept block a
    32-bit index and `block` 32-bit values.
    """

    def __init__(self, rng=None, ratio: float | None = None, k: int | None = None,
                 block: int = 168):
        super().__init__(rng)
        _check_ratio_k(ratio, k)
        if int(block) != block or block < 1:
            raise ValueError(f"block must be an integer >= 1, got {block}")
        self.ratio, self.k, self.block = ratio, k, int(block)

    def blocks_of(self, x: np.ndarray) -> np.ndarray:
        """x flat as rows of `block` elements, the last one zero padded."""
        flat = as_float32(x).reshape(-1)
        rows = -(-flat.size // self.block)
        out = np.zeros(rows * self.block, np.float32)
        out[:flat.size] = flat
        return out.reshape(rows, self.block)

    def compress(self, x):
        x = as_float32(x)
        rows = self.blocks_of(x)
        k = count_for(rows.shape[0], self.ratio, self.k)
        norms = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
        if k < rows.shape[0]:
            idx = np.argpartition(norms, rows.shape[0] - k)[rows.shape[0] - k:]
        else:
            idx = np.arange(rows.shape[0])
        idx = np.sort(idx[norms[idx] > 0]).astype(np.int32)
        return Compressed({"values": rows[idx].reshape(-1).copy(), "blocks": idx}, x.shape)

    def decompress(self, c):
        blocks = c.payload["blocks"]
        rows = -(-c.size // self.block)
        out = np.zeros((rows, self.block), np.float32)
        out[blocks] = c.payload["values"].reshape(blocks.size, self.block)
        return out.reshape(-1)[:c.size].reshape(c.shape)

    def position_bits(self, c):
        return 32 + INDEX_BITS * int(c.payload["blocks"].size)
