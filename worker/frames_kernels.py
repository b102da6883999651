"""Compiled loops of worker/frames.py (numba): the per-byte work of a burst of frames.

Framer.parse_many checks every frame's IPv4/UDP fields and UDP checksum, and
Framer.build_many writes every frame's header fields and checksum; numpy needs a dozen
passes and temporaries for each, which is most of a worker's per-packet cost when results
arrive a few at a time. These loops do it in one pass per frame. The header's layout is
not repeated here: the callers pass each field's offset and width from frames.HEADER_DTYPE.
Cached on disk beside this file (or in NUMBA_CACHE_DIR); without numba, frames.py keeps
its numpy passes.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _sum16(row, lo, hi):
    """A number congruent modulo 0xffff to the sum of the big-endian 16-bit words of
    row[lo:hi] (the last byte padded if odd), and positive where any byte is. lo even.

    The words are summed as the machine reads them (little-endian, so each is 256 times
    its big-endian value modulo 0xffff, as 2^16 = 1) and the sum multiplied by 256 again
    (256 * 256 = 2^16 = 1): RFC 1071's byte-order independence."""
    even = hi - ((hi - lo) & 1)
    w = row[lo:even].view(np.uint16)
    s = np.int64(0)
    for i in range(w.shape[0]):
        s += w[i]
    s *= 256
    if even < hi:
        s += np.int64(row[even]) << 8
    return s


@numba.njit(cache=True, nogil=True)
def check(buf, enc_at, enc, dport, udp_len):
    """True if every row of buf (Ethernet frames of one length) is IPv4 (IHL 5)/UDP to
    `dport` with UDP length `udp_len`, holds encoding `enc` at byte `enc_at` and has a
    UDP checksum that adds up (frames.udp_checksum_ok)."""
    end = 34 + udp_len
    for r in range(buf.shape[0]):
        row = buf[r]
        if (row[12] != 0x08 or row[13] != 0 or row[14] != 0x45 or row[23] != 17
                or ((np.int64(row[36]) << 8) | row[37]) != dport
                or ((np.int64(row[38]) << 8) | row[39]) != udp_len or row[enc_at] != enc):
            return False
        # the pseudo-header's addresses lie just before the UDP header (bytes 26..33)
        if (_sum16(row, 26, end) + 17 + udp_len) % 0xFFFF:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def fill(buf, prefix, off, values, offsets, widths, pay, fixed_sum):
    """Frames into the rows of buf: `prefix` (Ethernet/IPv4/UDP), at `off` the header,
    each field values[row, f] big-endian in widths[f] bytes at off + offsets[f], then the
    payload bytes; where off > 0 the UDP checksum of header and payload over `fixed_sum`
    (the pseudo-header's and UDP header's sum) goes into the UDP header.
    Returns the index of the first field whose value does not fit, or -1."""
    n = buf.shape[0]
    nf = values.shape[1]
    for f in range(nf):
        top = (np.int64(1) << (8 * widths[f])) - 1
        for r in range(n):
            v = values[r, f]
            if v < 0 or v > top:
                return f
    hsize = 0
    for f in range(nf):
        hsize = max(hsize, offsets[f] + widths[f])
    body = off + hsize
    end = body + pay.shape[1]
    for r in range(n):
        row = buf[r]
        row[:off] = prefix
        for f in range(nf):
            v = values[r, f]
            at = off + offsets[f]
            for k in range(widths[f] - 1, -1, -1):
                row[at + k] = np.uint8(v & 0xFF)
                v >>= 8
        row[body:end] = pay[r]
        if off:
            s = _sum16(row, off, end) + fixed_sum
            while s >> 16:
                s = (s & 0xFFFF) + (s >> 16)
            c = ~s & 0xFFFF
            if c == 0:
                c = 0xFFFF
            row[off - 2] = np.uint8(c >> 8)
            row[off - 1] = np.uint8(c & 0xFF)
    return -1
