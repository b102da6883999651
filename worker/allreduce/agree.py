"""Workers learn that they disagree: after a call, a digest of what each worker received goes
through the same switch as one more small call, and every worker raises when they differ.

A frame corrupted on its way to one worker with a checksum that still adds up (or on a path
with no payload checksum, as the Tofino profile's) leaves that worker with another result
than the others; nothing else would tell. The digest is the first `elems` bits of BLAKE2b
over the call's result bytes (float32, NaN included), one element per bit, sent as 0.0 or
1.0: every encoding declared `exact_ones` (protocol/encodings.py) carries those exactly (1.0
is a power of two: a FIXED32 value at any unit, a CNAT8 code, a NAT4 level), so each element
of the mean is k / n for the k workers whose bit is set. Equal digests: every element is 0
or 1. Different ones: some element is neither, and every worker sees it in the same result.
(A CNAT8 result re-rounds k to a power of two, which can turn 3 of 4 into 4: one bit in a
few can hide; with about half of 168 bits differing, none hides in practice.)

Cost per verified call: one call of one chunk, that is a priming round and the chunk: two
round trips and two packets each way. "auto" verifies a call that takes at least
AUTO_ROUNDS round trips itself (its chunks over the window, plus its priming round), where
that is at most 1 %; the others (a rotated, uniformly quantized encoding carries no exact 0
or 1; FLOAT32 goes host to host) are not verified.
"""

from __future__ import annotations

import hashlib

import numpy as np

from protocol.encodings import BY_CODE

AUTO_ROUNDS = 200           # 2 extra round trips are at most 1 % from here on
MODES = ("auto", "on", "off")


def rounds(n_chunks: int, window: int) -> int:
    """The round trips a call of `n_chunks` takes at least: its priming round and its
    chunks, `window` at a time."""
    return 1 + -(-n_chunks // window)


def verifies(mode: str, encoding: int, n_chunks: int, window: int) -> bool:
    if mode not in MODES:
        raise ValueError(f"verify must be one of {MODES}, got {mode!r}")
    enc = BY_CODE.get(encoding)
    if mode == "off" or (enc is not None and not enc.exact_ones) or not n_chunks:
        return False
    return mode == "on" or rounds(n_chunks, window) >= AUTO_ROUNDS


def digest_bits(result: np.ndarray, elems: int) -> np.ndarray:
    """The digest of a call's result as `elems` float32 values, each 0.0 or 1.0."""
    data = np.ascontiguousarray(result, dtype=np.float32).tobytes()
    size = min(64, -(-elems // 8))
    raw = hashlib.blake2b(data, digest_size=size).digest()
    bits = np.unpackbits(np.frombuffer(raw, np.uint8))[:elems]
    out = np.zeros(elems, np.float32)
    out[:bits.size] = bits
    return out


def disagreeing(mean: np.ndarray) -> int:
    """Elements of the digests' mean that are neither 0 nor 1: where workers differ."""
    return int(np.count_nonzero((mean != 0) & (mean != 1)))
