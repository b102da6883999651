"""Match-action tables for native code: each table's entries as one int64 buffer.

The softswitch.tables.Table stays the control plane's truth; when it changes, its buffer
is rebuilt before the next packet. Buffer layout (S = 2 * keys + 2 + P, P the table's
largest action parameter count):

    [0] entries n   [1] miss action (-1: none)   [2 .. 2+P) miss parameters
    [2+P] hash capacity (exact tables; 0 otherwise)
    rows from R0 = 3 + P, S cells each: (value, mask) per key -- (low, high) for a range
        key --, the action's index in the table's action list, the entry's index (its
        direct counter), then P parameters
    after the rows, exact tables: the hash index (row number or -1, linear probing)

Rows are in the order Table's own lookup prefers them (rank, then insertion), so the
first row that matches is the entry the Python tier would pick.
"""

from __future__ import annotations

import numpy as np

from ..tables import Table

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def s64(v: int) -> int:
    """An unsigned 64-bit value as the int64 with its bits."""
    v &= M64
    return v - (1 << 64) if v >> 63 else v


def key_hash(keys) -> int:
    h = 0
    for k in keys:
        h = ((h ^ (k & M64)) * GOLDEN) & M64
    return h ^ (h >> 29)


def cells(kind: str, w: int, k) -> tuple[int, int]:
    full = (1 << w) - 1
    if kind == "exact":
        return k, full
    if kind == "valid":
        return int(k), 1
    if kind == "lpm":
        m = full ^ ((1 << (w - k[1])) - 1)
        return k[0] & m, m
    if kind == "ternary":
        return k[0] & k[1], k[1]
    if kind == "range":
        return k[0], k[1]
    if kind == "optional":
        return (0, 0) if k is None else (k, full)
    raise ValueError(kind)


class Layout:
    """A table's buffer geometry (known at load time)."""

    def __init__(self, tbl: Table):
        self.tbl = tbl
        self.nkeys = len(tbl.match_fields)
        self.nparams = max([len(tbl.params_of(a)) for a in tbl.action_names] + [0])
        self.stride = 2 * self.nkeys + 2 + self.nparams
        self.r0 = 3 + self.nparams
        self.hashed = tbl.exact_only

    def build(self) -> tuple[np.ndarray, list]:
        """(buffer, entries in row order) from the table as it is now."""
        tbl = self.tbl
        ents = sorted(tbl._entries.values(), key=lambda e: (-tbl._rank(e), e.seq))
        n, S, P = len(ents), self.stride, self.nparams
        cap = 0
        if self.hashed:
            cap = 8
            while cap < 2 * n:
                cap <<= 1
        buf = np.zeros(self.r0 + n * S + cap, dtype=np.int64)
        buf[0] = n
        name, params = tbl.default
        buf[1] = tbl.action_names.index(name) if name else -1
        for i, v in enumerate(params):
            buf[2 + i] = s64(v)
        buf[2 + P] = cap
        index = {a: i for i, a in enumerate(tbl.action_names)}
        for r, e in enumerate(ents):
            row = self.r0 + r * S
            for i, ((_, kind, w), k) in enumerate(zip(tbl.match_fields, e.key, strict=True)):
                a, b = cells(kind, w, k)
                buf[row + 2 * i] = s64(a)
                buf[row + 2 * i + 1] = s64(b)
            buf[row + 2 * self.nkeys] = index[e.action]
            buf[row + 2 * self.nkeys + 1] = r
            for i, v in enumerate(e.params):
                buf[row + 2 * self.nkeys + 2 + i] = s64(v)
        if cap:
            hix = self.r0 + n * S
            buf[hix:hix + cap] = -1
            for r, e in enumerate(ents):
                keys = [cells(kind, w, k)[0] for (_, kind, w), k in
                        zip(tbl.match_fields, e.key, strict=True)]
                slot = key_hash(keys) & (cap - 1)
                while buf[hix + slot] >= 0:
                    slot = (slot + 1) & (cap - 1)
                buf[hix + slot] = r
        return buf, ents


class NativeTables:
    """Every table's buffer and direct counters, rebuilt when its Table changes."""

    def __init__(self, tables: dict[str, Table], order: list[str]):
        self.order = order
        self.index = {name: i for i, name in enumerate(order)}
        self.layouts = [Layout(tables[n]) for n in order]
        self.ptrs = np.zeros(max(1, len(order)), dtype=np.int64)  # TP: buffer addresses
        self.dptrs = np.zeros(max(1, len(order)), dtype=np.int64)  # DCP: counter addresses
        self.bufs: list = [None] * len(order)
        self.counts: list = [None] * len(order)
        self.ents: list = [[] for _ in order]
        self.dirty: set[int] = set(range(len(order)))
        for i, n in enumerate(order):
            tables[n].native = self
            tables[n]._native_index = i
        self.refresh()

    def changed(self, tbl: Table) -> None:
        self.dirty.add(tbl._native_index)

    def sync(self, tbl: Table) -> None:
        """Adds what native code counted to the table's entries (direct counters)."""
        i = tbl._native_index
        c = self.counts[i]
        if c is None or not len(self.ents[i]):
            return
        nz = np.flatnonzero(c)
        if not len(nz):
            return
        ents = self.ents[i]
        for k in np.unique(nz // 2):
            ents[k].packets += int(c[2 * k])
            ents[k].bytes += int(c[2 * k + 1])
        c[:] = 0

    def refresh(self) -> None:
        """Rebuilds the buffers of tables changed since the last packet."""
        while self.dirty:
            i = self.dirty.pop()
            lay = self.layouts[i]
            self.sync(lay.tbl)
            buf, ents = lay.build()
            self.bufs[i], self.ents[i] = buf, ents
            self.ptrs[i] = buf.ctypes.data
            if lay.tbl.with_counters:
                c = np.zeros(max(2, 2 * len(ents)), dtype=np.int64)
                self.counts[i] = c
                self.dptrs[i] = c.ctypes.data

    def detach(self, tables: dict[str, Table]) -> None:
        for n in self.order:
            t = tables[n]
            self.sync(t)
            t.native = None
