"""The check of a burst of results as one compiled loop (numba), for AllReduceClient.

A burst is handled at once when every frame is the awaited result of its own running
slot (client._accept_many); telling so took two dozen numpy calls per burst, most of a
worker's per-burst cost when results arrive a few at a time. This loop reads the header
fields it needs by their offsets and widths (from frames.HEADER_DTYPE, so the layout is
declared once) and checks them against the slots' state. Cached on disk beside this file
(or in NUMBA_CACHE_DIR); without numba, the client keeps its numpy checks.
"""

from __future__ import annotations

import numba
import numpy as np

from worker.frames import HEADER_DTYPE

# The fields awaited() reads, in this order, and where they lie in the header.
FIELDS = ("msg_type", "job_id", "session", "count", "slot", "version", "chunk", "exp")
AT = np.array([HEADER_DTYPE.fields[f][1] for f in FIELDS], np.int64)
WIDTH = np.array([HEADER_DTYPE[f].itemsize for f in FIELDS], np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def _field(row, at, width):
    v = np.int64(0)
    for k in range(width):
        v = (v << 8) | np.int64(row[at + k])
    return v


@numba.njit(cache=True, nogil=True)
def awaited(hdr, at, width, want, state, uses, cur, sent_exp, running, job_slots, used,
            n_chunks, window, slots, last, exps):
    """True if every row of hdr (AGG headers, bytes) is the awaited result of a distinct
    slot in state `running`: the first four FIELDS equal `want`, the slot is below `used`,
    the version and chunk are its current use's (wire.use_chunk with `job_slots`), the
    exponent is at least the one it sent. Fills slots, last (1 where that chunk is the
    slot's last of the call) and exps."""
    n = hdr.shape[0]
    seen = np.zeros(used, np.bool_)
    for i in range(n):
        row = hdr[i]
        for f in range(4):
            if _field(row, at[f], width[f]) != want[f]:
                return False
        s = _field(row, at[4], width[4])
        if s >= used or seen[s] or state[s] != running:
            return False
        seen[s] = True
        c = cur[s]
        e = _field(row, at[7], width[7])
        if (_field(row, at[5], width[5]) != uses[s] & 1
                or _field(row, at[6], width[6]) != (uses[s] * job_slots + s) & 0xFFFFFFFF
                or e < sent_exp[s]):
            return False
        slots[i] = s
        last[i] = c + window >= n_chunks
        exps[i] = e
    return True
