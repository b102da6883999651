"""Natural compression C_nat and natural dithering D_nat^{p,s} (Horvath et al., 2019).

C_nat rounds every value at random to one of the two powers of two around it,
unbiasedly: for 2^e <= |t| < 2^(e+1) it returns sign(t)*2^(e+1) with probability
(|t| - 2^e) / 2^e and sign(t)*2^e otherwise. For a float32 that probability is
exactly mantissa / 2^23, so the rounding is a carry into the exponent field: add
a uniform 23-bit integer to the mantissa and keep sign and exponent.

Random bits are the cost that matters on the hot path, so the carry is decided
lazily: a uniform 7-bit integer is added to the top 7 mantissa bits; only when
their sum is exactly 127 (probability 1/128) do the lower 16 mantissa bits decide,
against 16 more random bits. The carry probability is still exactly
mantissa / 2^23.

Special values: zero stays zero (sign kept). A subnormal t (exponent field 0)
rounds to 0 or to 2^-126 (exponent field 1) with mean t: unbiased, with more
variance than a rounding between powers of two, and powers of two below 2^-126
are not kept. Infinity stays infinity; NaN stays NaN. A value at or above 2^127
that rounds up becomes infinity, as a float32 overflow does.
"""

from __future__ import annotations

import numpy as np

from worker.compression.base import Compressed, Compressor, as_float32

# Elements per block of the kernel: amortises per-call overhead, stays in L3.
BLOCK = 1 << 19


def random_r7(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform integers in 0..127 (uint8), one random byte each."""
    raw = rng.bit_generator.random_raw((n + 7) // 8).view(np.uint8)[:n]
    np.right_shift(raw, 1, out=raw)
    return raw


def random_u16(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniform 16-bit integers (uint16)."""
    return rng.bit_generator.random_raw((n + 3) // 4).view(np.uint16)[:n]


def tie_carry(bits, ties, tie_draw) -> np.ndarray:
    """Carry (0/1, uint8) for the tied elements: low 16 mantissa bits + 16 random bits >= 2^16."""
    mant_lo = np.take(bits, ties) & np.uint32(0xFFFF)
    mant_lo += tie_draw(ties.size)
    return (mant_lo >> 16).astype(np.uint8)


def round_hi16(bits, r7, tie_draw, out=None, tmp=None):
    """Upper half-words of C_nat(bits): sign << 15 | exponent << 7 | (7 bits to ignore).

    bits: uint32 view of float32 values; r7: uint8 uniform on 0..127, one per
    element; tie_draw(k): k uniform uint16, used for the elements whose carry the
    top 7 mantissa bits do not decide. out/tmp: optional uint16/uint32 scratch.
    The caller must mask or shift away the low 7 bits, and must handle NaN
    (exponent 255 with a mantissa), whose carry would reach the sign.
    """
    n = bits.shape[0]
    wide = np.empty(n, np.uint32) if tmp is None else tmp[:n]
    hi = np.empty(n, np.uint16) if out is None else out[:n]
    np.right_shift(bits, 16, out=wide)
    np.copyto(hi, wide, casting="unsafe")
    np.add(hi, r7, out=hi)
    # A tie: the top 7 mantissa bits plus r7 sum to exactly 127 (they never reach 255).
    low = wide.view(np.uint16)[:n]
    np.bitwise_and(hi, 0x7F, out=low)
    ties = np.flatnonzero(low == 0x7F)
    if ties.size:
        hi[ties] += tie_carry(bits, ties, tie_draw).astype(np.uint16)
    return hi


def cnat_hi16(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """C_nat of a float32 array as upper half-words: sign << 15 | exponent << 7."""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    bits = x.view(np.uint32)
    n = bits.size
    hi = np.empty(n, np.uint16)
    tmp = np.empty(min(n, BLOCK), np.uint32)
    for s in range(0, n, BLOCK):
        e = min(n, s + BLOCK)
        h = round_hi16(bits[s:e], random_r7(rng, e - s), lambda k: random_u16(rng, k),
                       out=hi[s:e], tmp=tmp)
        np.bitwise_and(h, 0xFF80, out=h)
        nan = np.isnan(x[s:e])
        if nan.any():
            h[nan] = 0x7FC0
    return hi
def hi16_to_float32(hi: np.ndarray) -> np.ndarray:
    """Widen upper half-words (mantissa-free floats) to float32."""
    out = np.empty(hi.shape, np.uint32)
    np.left_shift(hi, 16, out=out, dtype=np.uint32)
    return out.view(np.float32)


def cnat(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """C_nat(x) as float32, same shape as x."""
    x = np.asarray(x, dtype=np.float32)
    return hi16_to_float32(cnat_hi16(x, rng)).reshape(x.shape)


class NaturalCompression(Compressor):
    """C_nat: every element rounded at random to a neighbouring power of two.

    Unbiased, omega = 1/8. Wire: 9 bits per element, sign and 8-bit biased exponent
    (the mantissa of a power of two is zero). The payload keeps them as the upper
    half-word of the float32 (sign << 15 | exponent << 7), which is the same value.
    """

    unbiased = True
    randomized = True

    def compress(self, x):
        x = as_float32(x)
        return Compressed({"hi16": cnat_hi16(x, self.rng)}, x.shape)

    def decompress(self, c):
        return hi16_to_float32(c.payload["hi16"]).reshape(c.shape)

    def bits(self, c):
        return 9 * c.size


def _pnorm(v: np.ndarray, p: float, axis=-1) -> np.ndarray:
    a = np.abs(v.astype(np.float64))
    if np.isinf(p):
        return a.max(axis=axis)
    return (a**p).sum(axis=axis) ** (1.0 / p)


def buckets(x: np.ndarray, bucket: int) -> np.ndarray:
    """x flat as rows of `bucket` elements (0: one row), zero padded."""
    flat = x.reshape(-1)
    if bucket <= 0 or bucket >= flat.size:
        return flat.reshape(1, -1)
    rows = -(-flat.size // bucket)
    out = np.zeros((rows, bucket), flat.dtype)
    out.reshape(-1)[: flat.size] = flat
    return out


class NaturalDithering(Compressor):
    """D_nat^{p,s}: natural dithering (Horvath et al., Definition of natural dithering).

    Per bucket v: t = |v_i| / ||v||_p in [0, 1] is rounded at random, unbiasedly,
    to a neighbour in the levels {0, 2^(1-s), ..., 2^-1, 1}: between two powers of
    two as C_nat does, below 2^(1-s) to 0 or 2^(1-s). The output is
    sign(v_i) * ||v||_p * level. Theorem 7 bounds omega by
    1/8 + d^(1/r) 2^(1-s) min(1, d^(1/r) 2^(1-s)), r = min(p, 2).

    Wire per bucket: the 32-bit norm, then per element a sign bit and the level
    index (s + 1 symbols) in ceil(log2(s + 1)) bits.
    """

    unbiased = True
    randomized = True

    def __init__(self, rng=None, p: float = 2.0, s: int = 8, bucket: int = 0):
        super().__init__(rng)
        if not (p >= 1):
            raise ValueError(f"natural dithering needs p >= 1, got {p}")
        if int(s) != s or s < 1:
            raise ValueError(f"natural dithering needs an integer s >= 1, got {s}")
        self.p, self.s, self.bucket = float(p), int(s), int(bucket)

    def compress(self, x):
        x = as_float32(x)
        v = buckets(x, self.bucket)
        norm = _pnorm(v, self.p).astype(np.float32)
        safe = np.where(norm > 0, norm, 1).astype(np.float32)
        t = np.minimum(np.abs(v) / safe[:, None], np.float32(1))  # float32, in [0, 1]
        floor = np.float32(2.0 ** (1 - self.s))
        # within [2^(1-s), 1]: C_nat rounding (stays within); below: 0 or 2^(1-s)
        lev = cnat(t, self.rng)
        low = np.flatnonzero(t < floor)
        tl = t.reshape(-1)[low].astype(np.float64)
        lev.reshape(-1)[low] = np.where(self.rng.random(low.size) < tl / floor, floor, 0)
        # level index: 0 for zero, else j + 1 for the level 2^-j
        j = np.zeros(lev.shape, np.uint8)
        nz = lev > 0
        j[nz] = 1 - np.frexp(lev[nz])[1]  # lev = 2^-j = 0.5 * 2^(1-j)
        return Compressed({"norm": norm, "level": j + nz, "sign": np.signbit(v)}, x.shape)

    def decompress(self, c):
        norm = c.payload["norm"].astype(np.float32)
        idx = c.payload["level"].astype(np.int32)
        mag = np.where(idx > 0, np.ldexp(np.float32(1), 1 - idx), 0).astype(np.float32)
        val = np.where(c.payload["sign"], -mag, mag) * norm[:, None]
        return val.reshape(-1)[: c.size].reshape(c.shape)

    def bits(self, c):
        per = 1 + int(np.ceil(np.log2(self.s + 1)))
        return 32 * c.payload["norm"].size + per * c.size
