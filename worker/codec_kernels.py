"""Compiled loops of the codec (numba): encode_cnat8 for the calls of a few chunks,
decode_cnat8 and chunk_exponents for every call.

A worker woken by one result encodes one chunk: numpy's two dozen passes then cost their
call overhead, not their work (about 0.1 ms a chunk, most of a link-bound worker's CPU).
These loops do each block's element-wise part in one pass each; every element gets the
same random bits as in the numpy path (worker/keyed.py: 7 bits an element, 16 more for a
tie, then the Bernoulli draws of a value below one unit, each keyed by its row and place),
so both paths give the same codes for the same keys. The keyed words themselves are
computed here too (keyed_words, keyed_at, keyed_rows). The decoder reads each code from a table
of its row's 2 x 33 values, built as the numpy passes compute them, so both give the same
bits. Cached on disk beside this file (or in NUMBA_CACHE_DIR); without numba, codec.py
keeps its numpy passes.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def carries(bits, r7, t, ties):
    """t = (top 7 mantissa bits + r7) per element; the ties (t == 127) into `ties`.
    Returns the number of ties."""
    n = 0
    for i in range(bits.shape[0]):
        v = ((bits[i] >> np.uint32(16)) & np.uint32(0x7F)) + np.uint32(r7[i])
        t[i] = np.uint8(v)
        if v == 127:
            ties[n] = i
            n += 1
    return n


@numba.njit(cache=True, nogil=True)
def codes(bits, t, ties, nties, draws, b_rows, elems, top, out, sub, d):
    """The codes of one block (codec.encode_cnat8's passes in one loop) into `out`.

    b_rows: B per row (e - 30 + h, may be negative); top: 30 - h. Ties take their carry
    from the low 16 mantissa bits and `draws`. Elements below one unit go to `sub`, with
    d = B - (e' - 1) for the Bernoulli draw. Returns (entries in sub, -1), or (0, row) of
    the first row holding a value above its exponent (the caller raises)."""
    for k in range(nties):
        i = ties[k]
        lo = (bits[i] & np.uint32(0xFFFF)) + np.uint32(draws[k])
        t[i] = np.uint8(127 + (lo >> np.uint32(16)))
    ns = 0
    for r in range(bits.shape[0] // elems):
        braw = b_rows[r]
        b = np.uint8(braw if braw > 0 else 0)
        lo, hi = r * elems, (r + 1) * elems
        # slices, so that the loops index from 0 and vectorise (no negative-index checks)
        most, below = _row(bits[lo:hi], t[lo:hi], b, out[lo:hi])
        if most > top:
            return 0, r
        if below:
            ns = _below(bits[lo:hi], t[lo:hi], b, lo, sub, d, ns)
    return ns, -1


@numba.njit(cache=True, nogil=True)
def _row(bits, t, b, out):
    """codes() for one row (B clipped at 0 is b) in one branch-free pass: (the largest
    code before rounding, 1 if an element lies below one unit)."""
    most = np.uint8(0)
    below = np.uint8(0)
    for i in range(bits.shape[0]):
        carry = t[i] >> np.uint8(7)
        h16 = np.uint16(bits[i] >> np.uint32(16))
        e = np.uint8((h16 >> np.uint16(7)) & np.uint16(0xFF))
        m = (e if e > b else b) - b
        most = m if m > most else most
        sign = np.uint8(0x80) if h16 >= np.uint16(0x8080) else np.uint8(0)
        out[i] = np.uint8(m + carry) | sign
        e1 = np.uint8(np.uint8(e + carry) - np.uint8(1))  # uint8 arithmetic, as numpy's
        below |= np.uint8(e1 < b)
    return most, below


@numba.njit(cache=True, nogil=True)
def _below(bits, t, b, base, sub, d, ns):
    """Appends the row's elements below one unit (index base + i) to sub, in order, with
    d = B - (e' - 1); returns the new count."""
    for i in range(bits.shape[0]):
        e = np.uint8((bits[i] >> np.uint32(23)) & np.uint32(0xFF))
        e1 = np.uint8(np.uint8(e + (t[i] >> np.uint8(7))) - np.uint8(1))
        if e1 < b:
            sub[ns] = base + i
            d[ns] = np.int64(b) - np.int64(e1)
            ns += 1
    return ns


@numba.njit(cache=True, nogil=True)
def exponents(bits, out):
    """Per row of bits (float32 as uint32), the largest biased exponent (255: inf or NaN)."""
    for r in range(bits.shape[0]):
        row = bits[r]
        most = np.uint32(0)
        for i in range(row.shape[0]):
            v = row[i] & np.uint32(0x7FFFFFFF)  # |x| orders as its bits do
            most = v if v > most else most
        out[r] = np.uint8(most >> np.uint32(23))


@numba.njit(cache=True, nogil=True)
def codes_valid(codes):
    """True if no code of the flat uint8 array is above 32 (its sign bit aside):
    codec.cnat8_valid, one pass (a received result's payload, or a burst's)."""
    acc = np.uint8(0)
    for i in range(codes.shape[0]):  # m + 95 (at most 222) has bit 7 set iff m > 32
        acc |= (codes[i] & np.uint8(0x7F)) + np.uint8(95)
    return (acc & np.uint8(0x80)) == 0


@numba.njit(cache=True, nogil=True)
def decode(codes, b_all, u_all, n, mean, out):
    """float32 of CNAT8 codes (rows, elems) into `out`: codec.decode_cnat8's values.

    b_all: B per row: where 0 <= B and B + 32 <= 254 the float32 exponent of code m is
    m + B, otherwise the row's values are +-2^(m - 1 + u) rounded to float32 (u_all:
    the unit exponents). Divided by n where `mean`. Returns the first row holding a
    code above 32, or -1."""
    bits = np.zeros(256, np.uint32)   # by code; codes above 32 fail the check below
    val = bits.view(np.float32)
    nf = np.float32(n)
    for r in range(codes.shape[0]):
        b = b_all[r]
        if b >= 0 and b + 32 <= 254:
            for m in range(33):
                # sign << 31 | (m + B) << 23; code 0 keeps its sign (-0.0 for 0x80)
                e = np.uint32(m + b) << np.uint32(23) if m else np.uint32(0)
                bits[m] = e
                bits[0x80 | m] = e | np.uint32(0x80000000)
        else:
            val[0] = val[0x80] = np.float32(0.0)
            for m in range(1, 33):
                val[m] = np.float32(math.ldexp(1.0, m - 1 + u_all[r]))
                val[0x80 | m] = -val[m]
        if mean:
            for m in range(33):
                val[m] = val[m] / nf
                val[0x80 | m] = val[0x80 | m] / nf
        row = codes[r]
        above = 0
        for i in range(row.shape[0]):
            above |= (row[i] & np.uint8(0x7F)) > np.uint8(32)
            out[r, i] = val[row[i]]
        if above:
            return r
    return -1


# ---------------------------------------------------------------- keyed random bits
# worker/keyed.py's words (SplitMix64's output at a counter), the same bits as its numpy
# passes; every operand uint64 (numba turns int64 with uint64 into float64).

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def keyed_words(keys, purpose, out):
    """out[r, j] = word j of `purpose` of row r (keyed.RowBits.words)."""
    base = purpose << np.uint64(32)
    for r in range(out.shape[0]):
        k = keys[r]
        for j in range(out.shape[1]):
            out[r, j] = _mix(k + (base + np.uint64(j) + np.uint64(1)) * _GAMMA)


@numba.njit(cache=True, nogil=True)
def keyed_at(keys, elems, purpose, idx, out):
    """out[i] = word idx[i] % elems of `purpose` of row idx[i] // elems (keyed.RowBits.at)."""
    base = purpose << np.uint64(32)
    for i in range(idx.shape[0]):
        r, j = idx[i] // elems, idx[i] % elems
        out[i] = _mix(keys[r] + (base + np.uint64(j) + np.uint64(1)) * _GAMMA)


@numba.njit(cache=True, nogil=True)
def keyed_rows(key, ids, out):
    """out[i] = the key of row ids[i] of the call keyed `key` (keyed.row_keys)."""
    for i in range(ids.shape[0]):
        out[i] = _mix(key + (np.uint64(ids[i]) + np.uint64(1)) * _GAMMA)


@numba.njit(cache=True, nogil=True)
def keyed_bytes(keys, elems, purpose, shift, out):
    """out[r * elems + i] = byte i % 8 of word i // 8 of `purpose` of row r, >> shift
    (keyed.RowBits.bytes): straight into the caller's buffer."""
    base = purpose << np.uint64(32)
    for r in range(keys.shape[0]):
        k = keys[r]
        o = r * elems
        for j in range((elems + 7) // 8):
            w = _mix(k + (base + np.uint64(j) + np.uint64(1)) * _GAMMA)
            for b in range(min(8, elems - 8 * j)):
                out[o + 8 * j + b] = np.uint8((w >> np.uint64(8 * b)) & np.uint64(0xFF)) >> shift


@numba.njit(cache=True, nogil=True)
def keyed_u16(keys, elems, purpose, idx, out):
    """out[i] = the low 16 bits of keyed_at's word (keyed.RowBits.u16)."""
    base = purpose << np.uint64(32)
    for i in range(out.shape[0]):
        r, j = idx[i] // elems, idx[i] % elems
        out[i] = np.uint16(_mix(keys[r] + (base + np.uint64(j) + np.uint64(1)) * _GAMMA)
                           & np.uint64(0xFFFF))
