"""The randomized Hadamard transform of the rotated encodings (THC-style uniform quantization).

protocol/encodings.py says which encodings rotate.

Before quantizing, every worker rotates its tensor with the same random orthogonal map,
R = H D / sqrt(B) on blocks of B elements (D random signs, H the Walsh-Hadamard matrix):
the rotated values are spread evenly (near-Gaussian, no outlier dominates a chunk's scale),
so 16 uniform levels lose less. The signs come from a seed all workers derive from the same
numbers (the job and the call's number in its session: `seed_of`; not the session's number,
which the controller draws from the clock, so that a rerun rotates alike), so no extra round
trip is needed;
the switch sums rotated vectors, and since R is linear, R^-1 of the mean of the rotated
tensors is the mean of the tensors.
"""

from __future__ import annotations

import numpy as np

MAX_BLOCK = 1024    # elements per transform block (a power of two)


def block_size(n: int) -> int:
    """The block of a tensor of n elements: the next power of two, at most MAX_BLOCK."""
    return min(MAX_BLOCK, 1 << max(0, int(n) - 1).bit_length())


def padded_size(n: int) -> int:
    """Elements of the rotated tensor: n rounded up to whole blocks."""
    b = block_size(n)
    return -(-int(n) // b) * b


def seed_of(*numbers: int) -> np.random.SeedSequence:
    """The seed of one call's rotation, from numbers every worker of the job shares."""
    return np.random.SeedSequence([int(x) & 0xFFFFFFFF for x in numbers])


def _signs(seed, m: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, m, dtype=np.int8)
    return (1 - 2 * bits).astype(np.float32)


def fwht(a: np.ndarray) -> np.ndarray:
    """The (unnormalized) Walsh-Hadamard transform of each row of a (rows, B), in place."""
    rows, b = a.shape
    h = 1
    while h < b:
        v = a.reshape(rows, b // (2 * h), 2, h)
        x = v[:, :, 0, :].copy()
        v[:, :, 0, :] += v[:, :, 1, :]
        v[:, :, 1, :] = x - v[:, :, 1, :]
        h *= 2
    return a


def rotate(x, seed) -> np.ndarray:
    """R x: the flat float32 tensor zero padded to padded_size(n), rotated block-wise."""
    flat = np.asarray(x, dtype=np.float32).reshape(-1)
    n = flat.size
    b, m = block_size(n), padded_size(n)
    out = np.zeros(m, np.float32)
    out[:n] = flat
    out *= _signs(seed, m)
    fwht(out.reshape(-1, b))
    out *= np.float32(1 / np.sqrt(b))
    return out


def unrotate(y, n: int, seed) -> np.ndarray:
    """R^-1 y (y of padded_size(n) elements): the first n elements of the tensor."""
    b, m = block_size(n), padded_size(n)
    v = np.array(y, dtype=np.float32).reshape(-1)
    if v.size != m:
        raise ValueError(f"a rotated tensor of {n} elements has {m}, got {v.size}")
    fwht(v.reshape(-1, b))
    v *= np.float32(1 / np.sqrt(b))
    v *= _signs(seed, m)
    return v[:n]
