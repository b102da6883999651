"""Switch-compatible encodings: what a worker sends and what the switch adds.

This module is the worker's half of docs/PROTOCOL.md ("Scaling", "Payload");
the P4 program is tested against it. All functions work on many chunks at once:
a tensor is cut into rows of ELEMS float32 elements (zero padded), and every
row has its own negotiated exponent E (biased float32 exponent, 0..254).

Scaling: for n workers, headroom h = ceil(log2 n) and unit 2^u with
u = (E - 127 + 1) - (30 - h). A float32 with exponent <= E, and its C_nat
rounding, is at most 2^(30-h) units, so n of them sum to at most 2^30.

- FIXED32: int32 = round_stochastic(x / 2^u), unbiased.
- CNAT8: one byte, bit 7 the sign, bits 0-6 a code m; m = 0 is zero, otherwise
  2^(m-1) units. C_nat(x) = +-2^k gives m = k - u + 1 when 2^k >= 2^u; a value
  below one unit becomes one unit (m = 1) with probability C_nat(x) / 2^u, else 0.
- The switch adds int32; a CNAT8 code enters the sum as +-(1 << (m-1)).
- recompress_with() is the switch's re-compression of an int32 sum to CNAT8,
  bit for bit given its 32-bit random numbers.

Every encoder is unbiased: E[decode(encode(x))] == x element-wise, exactly:
each rounding probability is a comparison of integers with uniform random bits
(drawn lazily: 8 or 7 bits first, more only where those tie).

Random bits: `rng` is a keyed.RowBits (one key per row: the worker's client keys each
chunk by its identity, so a chunk's codes do not depend on what was encoded before it or
in which order) or a np.random.Generator, which then gives one key per row, in row order.
An element's bits depend only on its row's key and its position (keyed.py). The decoders
return float32, so a decoded sum is rounded to 24 bits (and beyond float32's
range it is infinity). In CNAT8, C_nat rounds a subnormal input to 0 or 2^-126
(see worker/compression/natural.py), before scaling.

The encoders are vectorised in blocks of uint8/uint16 passes that numpy runs
with SIMD loops; bench/codec.py measures them against np.copy.
"""

from __future__ import annotations

import numpy as np

from protocol.encodings import BY_NAME
from protocol.sizes import ELEMS  # noqa: F401  (elements per packet)
from worker.keyed import SUBUNIT, TIES, UNIFORM, RowBits, bernoulli_pow2

try:  # compiled loops for calls of a few chunks (the numpy passes stay the reference)
    from worker import codec_kernels as _kernels
except ImportError:  # no numba
    _kernels = None

FIXED32 = BY_NAME["fixed32"].code
CNAT8 = BY_NAME["cnat8"].code
MAX_EXP = 254  # largest finite biased exponent
MAX_CODE = 32  # the switch decodes larger codes to 0; encoders send at most 31 - h
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

_BLOCK = 1 << 19  # elements per block: amortises per-call overhead, stays in L3
_SMALL = 1 << 16  # elements from which encode_cnat8's numpy passes beat its loops
_NO_DRAWS = np.zeros(0, np.uint16)


# ---------------------------------------------------------------- scaling


def headroom(n: int) -> int:
    """h = ceil(log2 n): the bits kept free so that n values can be added."""
    n = int(n)
    if n < 1:
        raise ValueError(f"worker count must be >= 1, got {n}")
    return (n - 1).bit_length()


def _exps(exps, rows: int) -> np.ndarray:
    e = np.asarray(exps)
    if e.ndim == 0:
        e = np.full(rows, int(e), dtype=np.int64)
    e = e.astype(np.int64, copy=False).reshape(-1)
    if e.shape[0] != rows:
        raise ValueError(f"{e.shape[0]} exponents for {rows} chunks")
    if rows and (e.min() < 0 or e.max() > MAX_EXP):
        raise ValueError(f"chunk exponents must be biased float32 exponents 0..{MAX_EXP}")
    return e


def unit_exponent(exps, n: int) -> np.ndarray:
    """u per chunk: one fixed-point unit is 2^u."""
    e = np.asarray(exps, dtype=np.int64)
    return e - 126 - 30 + headroom(n)


def max_code(n: int) -> int:
    """The largest CNAT8 code a worker of an n-worker job sends: 2^(30-h) units."""
    return 31 - headroom(n)


# ---------------------------------------------------------------- chunking


def chunk(x, elems: int = ELEMS) -> np.ndarray:
    """A flat float32 tensor as rows of `elems` elements, the last one zero padded."""
    if elems < 1:
        raise ValueError("elems must be >= 1")
    flat = np.asarray(x, dtype=np.float32).reshape(-1)
    rows = -(-flat.size // elems)
    out = np.zeros((rows, elems), dtype=np.float32)
    out.reshape(-1)[: flat.size] = flat
    return out


def unchunk(chunks: np.ndarray, size: int) -> np.ndarray:
    """The first `size` elements of the rows, flat (inverse of chunk())."""
    flat = np.asarray(chunks).reshape(-1)
    if size > flat.size:
        raise ValueError(f"asked for {size} elements of {flat.size}")
    return flat[:size]


def _rows(chunks) -> np.ndarray:
    c = np.asarray(chunks)
    if c.ndim != 2:
        raise ValueError(f"chunks must be 2-D (rows, elems), got shape {c.shape}")
    return c


def chunk_exponents(chunks, *, raw: bool = False) -> np.ndarray:
    """Per row, the largest biased exponent (bits 23-30) of its float32 elements.

    0 for an all-zero (or all-subnormal) row. Rows holding inf or NaN cannot be
    scaled: ValueError, or (`raw`) 255 for them.
    """
    c = np.ascontiguousarray(_rows(chunks), dtype=np.float32)
    rows, elems = c.shape
    bits = c.view(np.uint32)
    if _kernels is not None:  # one pass, no temporaries
        exps = np.empty(rows, np.uint8)
        _kernels.exponents(bits, exps)
        return exps if raw else _finite(exps)
    out = np.empty(rows, np.uint32)
    step = max(1, _BLOCK // max(elems, 1))
    tmp = np.empty((min(rows, step), elems), np.uint32)
    for s in range(0, rows, step):
        e = min(rows, s + step)
        t = tmp[: e - s]
        np.left_shift(bits[s:e], 1, out=t)  # drop the sign
        np.max(t, axis=1, out=out[s:e]) if elems else out[s:e].fill(0)
    exps = (out >> 24).astype(np.uint8)
    return exps if raw else _finite(exps)


def _finite(exps: np.ndarray) -> np.ndarray:
    bad = np.flatnonzero(exps == 255)
    if bad.size:
        raise ValueError(f"chunk {int(bad[0])} holds inf or NaN: it cannot be encoded")
    return exps


def max_exponent(x) -> int:
    """The largest biased float32 exponent in x (0 for zeros and subnormals, 255 where
    it holds inf or NaN)."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(1, -1)
    if _kernels is not None:
        out = np.empty(1, np.uint8)
        _kernels.exponents(flat.view(np.uint32), out)
        return int(out[0])
    if not flat.size:
        return 0
    return int((np.left_shift(flat.view(np.uint32), 1).max()) >> 24)


# ---------------------------------------------------------------- FIXED32


def _within(c: np.ndarray, exps) -> np.ndarray:
    """The rows' negotiated exponents (int64); raises for a row with a value above its own
    (_raise_above) or inf/NaN."""
    e = _exps(exps, c.shape[0])
    if (chunk_exponents(c) > e).any():
        _raise_above(c, e, 0, c.shape[0])
    return e


def encode_fixed32(chunks, exps, n: int, rng: np.random.Generator | RowBits) -> np.ndarray:
    """int32 fixed-point values at each row's unit, stochastically rounded (unbiased).

    Exact probabilities: |x| / 2^u = y is split into floor(y) and a fraction that,
    for y >= 1/2, is a multiple of 2^-24 and is compared with 24 random bits; below
    1/2 unit the probability y = M * 2^-k (M the 24-bit significand) is drawn
    from integer comparisons as well.
    """
    c = np.ascontiguousarray(_rows(chunks), dtype=np.float32)
    rows, elems = c.shape
    bits = RowBits.of(rng, rows, elems)
    e = _within(c, exps)
    u = unit_exponent(e, n)
    out = np.empty((rows, elems), np.int32)
    step = max(1, _BLOCK // max(elems, 1))
    size = min(rows, step) * elems
    ybuf, flbuf = np.empty(size, np.float32), np.empty(size, np.float32)
    t8buf = np.empty(size, np.uint8)
    lt, up = np.empty(size, bool), np.empty(size, bool)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        k = (r1 - r0) * elems
        blk = c[r0:r1].reshape(-1)
        ub = u[r0:r1]
        q = out[r0:r1].reshape(-1)
        y, fl, t8, lt_, up_ = (a[:k] for a in (ybuf, flbuf, t8buf, lt, up))
        # y = |x| / 2^u, exact: 2^-u is a float32 where u >= -127; in rows with a
        # smaller unit (values below 2^-97) y still has at most 24 significant bits
        # above 2^-22, so a float64 product rounds to float32 without loss
        tiny = ub < -127
        scale = np.ldexp(np.float32(1), np.where(tiny, 0, -ub)).astype(np.float32)
        np.abs(blk, out=y)
        y2 = y.reshape(r1 - r0, elems)
        y2 *= scale[:, None]
        if tiny.any():
            wide = np.abs(blk.reshape(r1 - r0, elems)[tiny].astype(np.float64))
            y2[tiny] = wide * np.ldexp(1.0, -ub[tiny])[:, None]
        np.less(y, 0.5, out=lt_)
        np.floor(y, out=fl)
        np.copyto(q, fl, casting="unsafe")
        np.subtract(y, fl, out=y)  # the fraction: a multiple of 2^-24 when y >= 1/2
        # round up with probability frac = f24 / 2^24: 8 random bits against the top 8
        # bits of f24, 16 more where they are equal (1 in 256)
        np.multiply(y, np.float32(256), out=fl)
        np.copyto(t8, fl, casting="unsafe")
        r8 = bits.sub(r0, r1).bytes()
        np.less(r8, t8, out=up_)
        ties = np.flatnonzero(r8 == t8)
        if ties.size:
            low = (np.take(y, ties) * np.float32(2**24)).astype(np.uint32) & np.uint32(0xFFFF)
            up_[ties] = _u16(bits, r0 * elems + ties) < low
        np.add(q, up_, out=q)
        if np.count_nonzero(lt_) != k - np.count_nonzero(blk):
            idx = np.flatnonzero(lt_ & (blk != 0))  # 0 < y < 1/2: exact draw from the bits
            q[idx] = _below_half(blk[idx], np.repeat(ub, elems)[idx], bits, r0 * elems + idx)
        neg = blk.view(np.int32) >> 31  # -1 for negative values, else 0
        np.bitwise_xor(q, neg, out=q)
        np.subtract(q, neg, out=q)
    return out


def _u16(bits: RowBits, idx: np.ndarray) -> np.ndarray:
    """The 16 bits a tied element draws (flat element indices idx)."""
    return bits.u16(TIES, idx)


def _below_half(x: np.ndarray, u: np.ndarray, rbits: RowBits, at: np.ndarray) -> np.ndarray:
    """1 with probability |x| / 2^u exactly (each below 1/2), else 0; int32. `at`: the
    elements' flat indices (their random bits)."""
    bits = x.view(np.uint32).astype(np.int64)
    ex = (bits >> 23) & 0xFF
    m = (bits & 0x7FFFFF) | np.where(ex > 0, 1 << 23, 0)  # |x| = m * 2^(max(ex,1) - 150)
    k = 150 + u - np.maximum(ex, 1)  # |x| / 2^u = m * 2^-k, k >= 1
    r24 = (rbits.at(SUBUNIT, at) >> np.uint64(40)).astype(np.int64)
    thr = np.where(k <= 24, m << np.clip(24 - k, 0, 24), m)
    up = r24 < thr  # probability m * 2^-min(k, 24)
    far = np.flatnonzero(up & (k > 24))
    if far.size:  # the remaining factor 2^-(k - 24)
        up[far] = bernoulli_pow2(rbits, at[far], k[far] - 24).astype(bool)
    return up.astype(np.int32)


def decode_fixed32(values, exps, n: int, mean: bool = False) -> np.ndarray:
    """float32 of int values (one contribution or a sum) at each row's unit; /n if mean."""
    v = _rows(values)
    e = _exps(exps, v.shape[0])
    scale = np.ldexp(1.0, unit_exponent(e, n))
    if mean:
        scale = scale / n
    return (v.astype(np.float64) * scale[:, None]).astype(np.float32)


# ---------------------------------------------------------------- CNAT8


def encode_cnat8(chunks, exps, n: int, rng: np.random.Generator | RowBits) -> np.ndarray:
    """CNAT8 codes (uint8, same shape) of C_nat(chunks) at each row's unit.

    exps: the negotiated exponent per row; a row holding a value with a larger
    exponent (or inf/NaN) raises ValueError, as its sum could overflow.
    """
    c = np.ascontiguousarray(_rows(chunks), dtype=np.float32)
    rows, elems = c.shape
    rbits = RowBits.of(rng, rows, elems)
    e = _exps(exps, rows)
    h = headroom(n)
    b_all = e - 30 + h  # a rounded biased exponent e' is code m = e' - B
    bits = c.view(np.uint32).reshape(-1)
    codes = np.empty(rows * elems, np.uint8)
    if _kernels is not None and rows * elems <= _SMALL:
        _encode_compiled(c, bits, e, b_all, h, rbits, codes.reshape(rows, elems))
        return codes.reshape(rows, elems)
    step = max(1, _BLOCK // max(elems, 1))
    size = min(rows, step) * elems
    hi = np.empty(size, np.uint16)
    e8, t8, s8, bx = (np.empty(size, np.uint8) for _ in range(4))
    sign, flag = np.empty(size, bool), np.empty(size, bool)
    c80 = np.full(size, 0x80, np.uint8)
    # numpy has SIMD loops for these uint8 operations between arrays; scalar min/max
    # and left shifts of uint8 are several times slower, so none is used here.
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        k = (r1 - r0) * elems
        blk_bits = bits[r0 * elems : r1 * elems]
        blk_b = b_all[r0:r1]
        out = codes[r0 * elems : r1 * elems]
        h16, e_, t_, s_, b_, sg, f_ = (a[:k] for a in (hi, e8, t8, s8, bx, sign, flag))
        b_.reshape(r1 - r0, elems)[...] = np.maximum(blk_b, 0).astype(np.uint8)[:, None]
        r7 = rbits.sub(r0, r1).bytes(shift=1)  # 7 bits: the top of the element's byte
        # upper half-words: sign << 15 | e << 7 | top 7 mantissa bits
        np.copyto(h16, blk_bits.view(np.uint16)[1::2])
        # carry into the exponent with probability mantissa / 2^23 (see natural.py)
        np.copyto(t_, h16, casting="unsafe")
        np.bitwise_and(t_, 0x7F, out=t_)
        np.add(t_, r7, out=t_)
        np.equal(t_, 127, out=f_)
        ties = np.flatnonzero(f_)
        if ties.size:  # 127 + carry: 127 stays below the 128 that carries
            np.put(t_, ties, _tie_carry(blk_bits, ties, rbits, r0 * elems) + 127)
        np.right_shift(t_, 7, out=t_)
        # negative and normal (e >= 1): the sign of every code above 0 but the rare ones
        # fixed below (negative subnormals, sub-unit values)
        np.greater_equal(h16, 0x8080, out=sg)
        np.right_shift(h16, 7, out=h16)
        np.copyto(e_, h16, casting="unsafe")  # e, the exponent before rounding
        # code before rounding, max(e - B, 0); above 30 - h means e > E
        np.maximum(e_, b_, out=out)
        np.subtract(out, b_, out=out)
        if k and out.max() > 30 - h:
            _raise_above(c, e, r0, r1)
        neg_b = np.flatnonzero(blk_b < 0)
        if neg_b.size and (e_.reshape(r1 - r0, elems)[neg_b] > e[r0 + neg_b, None]).any():
            _raise_above(c, e, r0, r1)
        # after rounding: e' = e + carry, code e' - B where e' > B (then e >= B too)
        np.add(out, t_, out=out)
        np.add(e_, t_, out=e_)
        # 1 <= e' <= B: C_nat(x) = 2^-d units with d = B + 1 - e', rounded to 0 or 1 unit
        np.subtract(e_, 1, out=e_)
        np.less(e_, b_, out=f_)
        np.multiply(sg.view(np.uint8), c80[:k], out=s_)
        np.bitwise_or(out, s_, out=out)
        if f_.any():
            idx = np.flatnonzero(f_)
            up = bernoulli_pow2(rbits, r0 * elems + idx, b_[idx].astype(np.int64) - e_[idx])
            neg = (np.take(blk_bits, idx) >> 24).astype(np.uint8) & 0x80
            out[idx] = up | (neg & (0 - up))  # the sign only on a nonzero code
        if neg_b.size:  # rows with B < 0 (tiny or zero): every nonzero e' is >= 1 unit
            view = out.reshape(r1 - r0, elems)
            part = view[neg_b] & 0x7F
            nz = part > 0
            neg = (blk_bits.reshape(r1 - r0, elems)[neg_b] >> 24).astype(np.uint8) & 0x80
            view[neg_b] = np.where(nz, (part - blk_b[neg_b, None]) | neg, 0).astype(np.uint8)
    return codes.reshape(rows, elems)


def _tie_carry(bits: np.ndarray, ties: np.ndarray, rbits: RowBits, base: int) -> np.ndarray:
    """Carry (0/1, uint8) of tied elements (indices `ties` of a block starting at flat
    element `base`): low 16 mantissa bits + 16 random bits >= 2^16."""
    lo = np.take(bits, ties) & np.uint32(0xFFFF)
    lo += _u16(rbits, base + ties)
    return (lo >> 16).astype(np.uint8)


def _encode_compiled(c, bits, e, b_all, h, rbits, out):
    """encode_cnat8 of one block by codec_kernels' loops: the same codes for the same
    keys as the numpy passes (every element the same random bits)."""
    rows, elems = out.shape
    k = rows * elems
    flat = out.reshape(-1)
    t = np.empty(k, np.uint8)
    idx = np.empty(k, np.int64)
    r7 = rbits.bytes(shift=1)
    nties = _kernels.carries(bits, r7, t, idx)
    draws = _u16(rbits, idx[:nties]) if nties else _NO_DRAWS
    d = np.empty(k, np.int64)
    nsub, bad = _kernels.codes(bits, t, idx, nties, draws, b_all, elems, 30 - h, flat, idx, d)
    if bad >= 0:
        _raise_above(c, e, 0, rows)
    neg_b = np.flatnonzero(b_all < 0)
    if neg_b.size and (((c[neg_b].view(np.uint32) >> 23) & 0xFF) > e[neg_b, None]).any():
        _raise_above(c, e, 0, rows)
    if nsub:
        sub = idx[:nsub]
        up = bernoulli_pow2(rbits, sub, d[:nsub])
        neg = (np.take(bits, sub) >> 24).astype(np.uint8) & 0x80
        flat[sub] = up | (neg & (0 - up))
    if neg_b.size:  # rows with B < 0 (tiny or zero): every nonzero e' is >= 1 unit
        part = out[neg_b] & 0x7F
        nz = part > 0
        neg = (c[neg_b].view(np.uint32) >> 24).astype(np.uint8) & 0x80
        out[neg_b] = np.where(nz, (part - b_all[neg_b, None]) | neg, 0).astype(np.uint8)


def _raise_above(c, e, r0, r1):
    local = chunk_exponents(c[r0:r1]).astype(np.int64)  # raises for inf/NaN
    bad = r0 + int(np.flatnonzero(local > e[r0:r1])[0])
    raise ValueError(f"chunk {bad} has exponent {int(local[bad - r0])} above the "
                     f"negotiated {int(e[bad])}: the sum could overflow")


def cnat8_valid(codes) -> bool:
    """True if every CNAT8 code is part of the encoding (magnitude 0..32): a switch never
    sends another, so a result holding one was corrupted on the way (decode_cnat8 refuses
    it)."""
    c = np.asarray(codes, dtype=np.uint8)
    if _kernels is not None:
        return _kernels.codes_valid(c.reshape(-1))
    return not c.size or int(np.bitwise_and(c, 0x7F).max()) <= MAX_CODE


def decode_cnat8(codes, exps, n: int, mean: bool = False) -> np.ndarray:
    """float32 of CNAT8 codes at each row's unit: +-2^(m-1) units; /n if mean.

    Codes above 32 are not part of the encoding: ValueError.
    """
    c = np.ascontiguousarray(_rows(codes), dtype=np.uint8)
    rows, elems = c.shape
    e = _exps(exps, rows)
    b_all = e - 30 + headroom(n)  # float32 biased exponent of code m is m + B
    if _kernels is not None:  # one pass instead of a dozen (codec_kernels.decode)
        res = np.empty((rows, elems), np.float32)
        if _kernels.decode(c, b_all, unit_exponent(e, n), n, mean, res) >= 0:
            raise ValueError(f"CNAT8 code above {MAX_CODE}")
        return res
    out = np.empty((rows, elems), np.uint32)
    fast = (b_all >= 0) & (b_all + MAX_CODE <= MAX_EXP)
    step = max(1, _BLOCK // max(elems, 1))
    size = min(rows, step) * elems
    m8, bx = np.empty(size, np.uint8), np.empty(size, np.uint8)
    nz = np.empty(size, bool)
    h16, s16 = np.empty(size, np.uint16), np.empty(size, np.uint16)
    flat = c.reshape(-1)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        k = (r1 - r0) * elems
        blk = flat[r0 * elems : r1 * elems]
        m_, b_, z_, h_, s_ = (a[:k] for a in (m8, bx, nz, h16, s16))
        b_.reshape(r1 - r0, elems)[...] = b_all[r0:r1].clip(0, 255).astype(np.uint8)[:, None]
        np.bitwise_and(blk, 0x7F, out=m_)
        if k and m_.max() > MAX_CODE:
            raise ValueError(f"CNAT8 code above {MAX_CODE}")
        np.not_equal(m_, 0, out=z_)
        np.add(m_, b_, out=m_)  # the float32 exponent m + B of a nonzero code
        np.multiply(m_, z_.view(np.uint8), out=m_)
        np.left_shift(m_, 7, out=h_, dtype=np.uint16)
        np.bitwise_and(blk, 0x80, out=b_)
        np.left_shift(b_, 8, out=s_, dtype=np.uint16)
        np.bitwise_or(h_, s_, out=h_)  # upper half-word: sign << 15 | exponent << 7
        np.left_shift(h_, 16, out=out.reshape(-1)[r0 * elems : r1 * elems], dtype=np.uint32)
    res = out.view(np.float32)
    slow = np.flatnonzero(~fast)
    if slow.size:
        m = c[slow] & 0x7F
        sign = np.where(c[slow] & 0x80, -1.0, 1.0)
        u = unit_exponent(e[slow], n)[:, None]
        val = np.where(m > 0, sign * np.ldexp(1.0, m.astype(np.int64) - 1 + u), 0.0)
        with np.errstate(over="ignore"):  # beyond float32: infinity, as documented
            res[slow] = val.astype(np.float32)
    if mean:
        res /= np.float32(n)
    return res


# ---------------------------------------------------------------- the switch's side


def switch_decode_cnat8(codes) -> np.ndarray:
    """What the switch adds for CNAT8 codes: +-(1 << (m-1)) on 32 bits, m = 0 or m > 32 -> 0."""
    c = np.asarray(codes, dtype=np.uint8)
    m = (c & 0x7F).astype(np.uint32)
    valid = (m >= 1) & (m <= MAX_CODE)
    mag = np.where(valid, np.left_shift(np.uint32(1), np.where(valid, m - 1, 0)), 0)
    mag = mag.astype(np.uint32)
    neg = (c & 0x80) != 0
    val = np.where(neg, (~mag) + np.uint32(1), mag).astype(np.uint32)
    return val.view(np.int32)


def recompress_with(sums, r) -> np.ndarray:
    """The switch's re-compression of int32 sums to CNAT8 codes, given its random words.

    abs = |S| on 32 bits, p = position of its leading one, mag = 1 << p,
    up = (r & (mag - 1)) < (abs - mag) unsigned, m = p + 1 + up,
    code = sign << 7 | m; S = 0 gives code 0. Unbiased: E[2^(m-1)] = |S|.
    """
    s = np.asarray(sums)
    if s.dtype != np.int32:
        if s.size and (s.min() < INT32_MIN or s.max() > INT32_MAX):
            raise OverflowError("sums outside int32")
        s = s.astype(np.int32)
    r = np.asarray(r)
    if r.shape != s.shape:
        raise ValueError(f"need one random word per sum: {r.shape} vs {s.shape}")
    r = r.astype(np.uint32)
    u = s.view(np.uint32)
    neg = s < 0
    a = np.where(neg, (~u) + np.uint32(1), u).astype(np.uint32)
    # leading one: exact through float64 (integers below 2^53)
    p = (np.frexp(a.astype(np.float64))[1] - 1).clip(0).astype(np.uint32)
    mag = np.left_shift(np.uint32(1), p).astype(np.uint32)
    up = (r & (mag - np.uint32(1))) < (a - mag)
    m = (p + 1 + up).astype(np.uint8)
    code = m | (neg.astype(np.uint8) << 7)
    code[a == 0] = 0
    return code


def recompress(sums, rng: np.random.Generator) -> np.ndarray:
    """recompress_with() with uniform 32-bit random words from rng."""
    s = np.asarray(sums)
    r = rng.integers(0, 2**32, size=s.shape, dtype=np.uint32)
    return recompress_with(s, r)


def aggregate(contribs, encoding: int = FIXED32) -> np.ndarray:
    """Reference switch: the exact integer sum of the children's encoded chunks.

    contribs: a sequence (or array with a leading child axis) of int32 values
    (FIXED32), CNAT8 codes, NAT4 / UQ4 nibbles (unpacked) or SUM8 bytes (switch_decode).
    Raises OverflowError if the sum leaves int32: the scaling is meant to make that
    impossible.
    """
    parts = [np.asarray(p) for p in contribs]
    if not parts:
        raise ValueError("no contributions")
    shape = parts[0].shape
    total = np.zeros(shape, np.int64)
    for p in parts:
        if p.shape != shape:
            raise ValueError(f"contribution shapes differ: {p.shape} vs {shape}")
        total += switch_decode(p, encoding)
    if total.size and (total.min() < INT32_MIN or total.max() > INT32_MAX):
        raise OverflowError("the sum of the contributions leaves int32")
    return total.astype(np.int32)


# ---------------------------------------------------------------- 4-bit encodings
# docs/PROTOCOL.md "Payload": NAT4 (natural dithering) and UQ4 (uniform, THC-style), two
# elements per byte, element 2k in the high nibble; SUM8, the switch's byte sums of UQ4.

NAT4 = BY_NAME["nat4"].code
UQ4 = BY_NAME["uq4"].code
SUM8 = BY_NAME["sum8"].code
# NAT4: levels 2^0 .. 2^-6 of the chunk's scale 2^(E-126) (E the negotiated exponent: every
# value of the chunk is below it), and 0. Its codes are CNAT8's of a job whose headroom is
# NAT4_HEADROOM: the unit is 2^(E-132), the top code 7 is the scale itself.
NAT4_LEVELS = 7
NAT4_HEADROOM = 30 - NAT4_LEVELS + 1
NAT4_N = 1 << NAT4_HEADROOM          # the worker count CNAT8's scaling sees for NAT4
NAT4_BAD = 0x8                       # the nibble "negative zero": never encoded
UQ4_MAX = BY_NAME["uq4"].top         # UQ4 integers 0..15 stand for -scale .. +scale
SUM8_MAX = BY_NAME["sum8"].top


def pack4(nibbles) -> np.ndarray:
    """(rows, elems) values 0..15 -> (rows, elems / 2) bytes, element 2k in the high nibble."""
    a = np.asarray(nibbles, dtype=np.uint8)
    if a.shape[-1] % 2:
        raise ValueError(f"4-bit payloads hold an even number of elements, not {a.shape[-1]}")
    return ((a[..., 0::2] << 4) | (a[..., 1::2] & 0x0F)).astype(np.uint8)


def unpack4(packed) -> np.ndarray:
    """pack4's inverse: bytes -> twice as many nibbles, high nibble first."""
    p = np.asarray(packed, dtype=np.uint8)
    out = np.empty(p.shape[:-1] + (2 * p.shape[-1],), np.uint8)
    out[..., 0::2] = p >> 4
    out[..., 1::2] = p & 0x0F
    return out


def encode_nat4(chunks, exps, rng: np.random.Generator | RowBits) -> np.ndarray:
    """NAT4 nibbles (uint8 0..15, unpacked, same shape): natural dithering of each row with
    NAT4_LEVELS levels below its scale 2^(E-126), E its negotiated exponent. C_nat at a
    fixed-point unit 2^(E-132) rounds a value between two levels to one of them and a value
    below the lowest to 0 or the lowest level, unbiased: natural dithering exactly (a
    two-point distribution is fixed by its mean). A value above the scale raises."""
    codes = encode_cnat8(chunks, exps, NAT4_N, rng)
    return ((codes >> 4) & 0x8) | (codes & 0x7)


def nat4_valid(nibbles) -> bool:
    """True if no nibble is NAT4_BAD (a switch drops such a payload: BAD_CODE)."""
    a = np.asarray(nibbles, dtype=np.uint8)
    return not np.any(a == NAT4_BAD)


def nat4_to_cnat8(nibbles) -> np.ndarray:
    """NAT4 nibbles as the CNAT8 codes they stand for (sign to bit 7, the level kept)."""
    a = np.asarray(nibbles, dtype=np.uint8)
    if not nat4_valid(a):
        raise ValueError("NAT4 nibble 0x8 (negative zero) is not part of the encoding")
    return ((a & 0x8) << 4) | (a & 0x7)


def decode_nat4(nibbles, exps, mean_of: int = 1) -> np.ndarray:
    """float32 of NAT4 nibbles at each row's unit (one contribution); / mean_of."""
    out = decode_cnat8(nat4_to_cnat8(nibbles), exps, NAT4_N)
    return out / np.float32(mean_of) if mean_of != 1 else out


def uq4_scale(exps) -> np.ndarray:
    """Per row, the UQ4 scale 2^(E-126) (float64): every value of the row is below it."""
    return np.ldexp(1.0, _exps(exps, np.size(exps)) - 126)


def encode_uq4(chunks, exps, rng: np.random.Generator | RowBits) -> np.ndarray:
    """UQ4 integers (uint8 0..15, unpacked, same shape): x in (-s, s), s = 2^(E-126) the
    row's scale, as t = (x / s + 1) * 15 / 2 rounded down or up at random with mean t
    (stochastic rounding, unbiased; q = 0 is -s, q = 15 is +s, spacing 2s / 15)."""
    c = np.asarray(_rows(chunks), dtype=np.float32)
    e = _within(c, exps)
    t = (c.astype(np.float64) * np.ldexp(1.0, 126 - e)[:, None] + 1.0) * (UQ4_MAX / 2)
    rbits = RowBits.of(rng, c.shape[0], c.shape[1])
    uniform = (rbits.words(UNIFORM, c.shape[1]) >> np.uint64(11)) * 2.0**-53   # [0, 1)
    q = np.floor(t + uniform)
    return np.clip(q, 0, UQ4_MAX).astype(np.uint8)


def decode_uq4(values, exps, mean_of: int = 1) -> np.ndarray:
    """float32 of UQ4 integers (one contribution) at each row's scale; / mean_of."""
    return decode_sum8(values, exps, 1, mean=False) / np.float32(mean_of)


def decode_sum8(sums, exps, n: int, mean: bool = False) -> np.ndarray:
    """float32 of the sums S of n workers' UQ4 integers: s * (2 S / 15 - n), /n if mean."""
    v = np.asarray(_rows(sums)).astype(np.float64)
    s = uq4_scale(exps)[:, None]
    out = s * (2.0 * v / UQ4_MAX - n)
    if mean:
        out = out / n
    return out.astype(np.float32)


_ENCODE4 = {NAT4: encode_nat4, UQ4: encode_uq4}


def encode4(encoding: int, chunks, exps, rng: np.random.Generator | RowBits) -> np.ndarray:
    """Packed payload rows (pack4) of a 4-bit encoding."""
    try:
        encode = _ENCODE4[encoding]
    except KeyError:
        raise ValueError(f"encoding {encoding} is not a 4-bit encoding") from None
    return pack4(encode(chunks, exps, rng))


def decode_mean4(contribution: int, result: int, payloads, exps, workers: int) -> np.ndarray:
    """The mean over `workers` of result rows of 4-bit contributions: sums of UQ4's
    integers (SUM8 or FIXED32), or NAT4's CNAT8 (or FIXED32) sums at NAT4's unit."""
    if contribution not in _ENCODE4:
        raise ValueError(f"encoding {contribution} is not a 4-bit encoding")
    if contribution == UQ4:
        return decode_sum8(payloads, exps, workers, mean=True)
    dec = decode_cnat8 if result == CNAT8 else decode_fixed32
    return dec(payloads, exps, NAT4_N) / np.float32(workers)


def switch_decode(values, encoding: int) -> np.ndarray:
    """What the switch adds for one contribution's payload (unpacked for 4-bit encodings):
    int32. FIXED32 as is, CNAT8 and NAT4 +-(1 << (m-1)), UQ4 and SUM8 as unsigned integers.
    A NAT4 payload holding 0x8 raises ValueError: the switch drops it (BAD_CODE)."""
    v = np.asarray(values)
    if encoding == FIXED32:
        if v.dtype != np.int32:
            raise ValueError(f"FIXED32 contributions must be int32, got {v.dtype}")
        return v
    if encoding == CNAT8:
        return switch_decode_cnat8(v)
    if encoding == NAT4:
        return switch_decode_cnat8(nat4_to_cnat8(v))
    if encoding == UQ4:
        if v.size and int(np.max(v)) > UQ4_MAX:
            raise ValueError("UQ4 integers are 0..15")
        return v.astype(np.int32)
    if encoding == SUM8:
        return np.asarray(v, dtype=np.uint8).astype(np.int32)
    raise ValueError(f"unknown encoding {encoding}")


def to_sum8(sums) -> np.ndarray:
    """The switch's SUM8 result of int sums; a sum outside 0..255 raises OverflowError (the
    switch drops the packet: SUM_OVERFLOW)."""
    s = np.asarray(sums)
    if s.size and (int(s.min()) < 0 or int(s.max()) > SUM8_MAX):
        raise OverflowError("a sum outside 0..255 cannot travel as SUM8")
    return s.astype(np.uint8)


def nat4_omega_bound(x, exp) -> float:
    """The variance bound of natural dithering (Horvath et al., "Natural compression for
    distributed deep learning": D_nat^{p,s} has E||D(x) - x||^2 <= omega ||x||^2 with
    omega = 1/8 + d^(1/r) 2^(1-s) min(1, d^(1/r) 2^(1-s)), r = min(p, 2)) for one NAT4
    chunk x at exponent E. Its proof needs only that every |x_i| is within the top level and
    that the lowest level is L; here L = 2^(E-132) (the unit), and for p = 2 the term
    d^(1/2) 2^(1-s) is sqrt(d) L / ||x||_2: omega = 1/8 + a min(1, a), a = sqrt(d) L / ||x||_2
    (1/8 from rounding between two powers of two, the rest from dithering below L)."""
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    norm = float(np.linalg.norm(v))
    if norm == 0:
        return 0.0
    a = np.sqrt(v.size) * np.ldexp(1.0, int(exp) - 126 - NAT4_LEVELS + 1) / norm
    return 0.125 + a * min(1.0, a)
