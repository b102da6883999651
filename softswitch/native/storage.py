"""Registers and counters of a program in flat int64 buffers, and the context array.

Native code reaches everything through the context array %C: its cells are the addresses
of these buffers (and of the tables', the random state's ...), the Storage.* constants
their indices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .ir import Unsupported

if TYPE_CHECKING:
    from .tables import NativeTables

SCRATCH_BYTES = 1 << 17  # calculation inputs: headers and a payload of up to ~128 KiB


def s64(v: int) -> int:
    """An unsigned 64-bit value as the int64 with its bits."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


class Storage:
    """Registers and counters in flat int64 buffers; the context array %C points at them.

    Register and Counter objects keep working for the control plane: their cells become
    views of these buffers."""

    (REGS, CNTP, CNTB, TABLES, DCOUNTERS, RNG, SCRATCH, EVENTS, DATA, DLEN, F0, GROUPS,
     REPLICAS) = range(13)
    NCTX = 13

    def __init__(self, registers: dict, counters: dict, seed: int, banks=()):
        self._regs = registers
        self._cnts = counters
        # register -> (first cell, stride): arrays a lane loop runs over (banks: one array a
        # lane) are interleaved, so the lanes' cells of one index are adjacent
        self.reg_at: dict[str, tuple[int, int]] = {}
        n = 0
        for names in banks:
            m, size = len(names), registers[names[0]].size
            for j, name in enumerate(names):
                self.reg_at[name] = (n + j, m)
            n += m * size
        for name, r in registers.items():
            if r.bitwidth > 64:
                raise Unsupported(f"register {name!r} is {r.bitwidth} bits wide")
            if name not in self.reg_at:
                self.reg_at[name] = (n, 1)
                n += r.size
        self.regs = np.zeros(max(n, 1), dtype=np.int64)
        self.cnt_off: dict[str, int] = {}
        n = 0
        for name, c in counters.items():
            self.cnt_off[name] = n
            n += c.size
        self.cntp = np.zeros(max(n, 1), dtype=np.int64)
        self.cntb = np.zeros(max(n, 1), dtype=np.int64)
        self.rng = np.array([seed & ((1 << 63) - 1)], dtype=np.int64)
        self.scratch = np.zeros(SCRATCH_BYTES, dtype=np.uint8)
        self.events = np.zeros(4, dtype=np.int64)
        self.ctx = np.zeros(self.NCTX, dtype=np.int64)

    def register(self, name: str):
        r = self._regs.get(name)
        if r is None:
            raise Unsupported(f"unknown register array {name!r}")
        return r

    def reg_offset(self, name: str) -> tuple[int, int]:
        """(first cell, stride) of a register array in the buffer."""
        self.register(name)
        return self.reg_at[name]

    def counter(self, name: str):
        c = self._cnts.get(name)
        if c is None:
            raise Unsupported(f"unknown counter array {name!r}")
        return c, self.cnt_off[name]

    def attach(self, tables: NativeTables) -> None:
        """Moves the registers' and counters' cells into the buffers (keeping their values)
        and fills the context array."""
        for name, r in self._regs.items():
            o, k = self.reg_at[name]
            view = self.regs[o:o + r.size * k:k]
            view[:] = [s64(int(v)) for v in r.values] if r.size else []
            r.values = view
        for name, c in self._cnts.items():
            o = self.cnt_off[name]
            p, b = self.cntp[o:o + c.size], self.cntb[o:o + c.size]
            p[:] = [s64(int(v)) for v in c.packets] if c.size else []
            b[:] = [s64(int(v)) for v in c.bytes] if c.size else []
            c.packets, c.bytes = p, b
        x = self.ctx
        x[self.REGS] = self.regs.ctypes.data
        x[self.CNTP] = self.cntp.ctypes.data
        x[self.CNTB] = self.cntb.ctypes.data
        x[self.TABLES] = tables.ptrs.ctypes.data
        x[self.DCOUNTERS] = tables.dptrs.ctypes.data
        x[self.RNG] = self.rng.ctypes.data
        x[self.SCRATCH] = self.scratch.ctypes.data
        x[self.EVENTS] = self.events.ctypes.data
