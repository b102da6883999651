"""A compiled program at run time: its buffers, its multicast mirror, the calls into it."""

from __future__ import annotations

import numpy as np

from .res import MAX_FAST_REPLICAS, RES_HEAD
from .storage import Storage
from .tables import NativeTables

MAX_FRAME = 1 << 16  # the largest frame the native tier takes (a UDP datagram's payload)
ROOM = MAX_FRAME + 1024  # OUT bytes per copy: the frame, BMv2's 512 bytes of growth, spare
NO_GROUP, LARGE_GROUP = -1, -2


class NativeProgram:
    """The compiled packet path of one program and the buffers it works on."""

    def __init__(self, prog, store: Storage, tables: NativeTables, code, events, ir: str,
                 fast: bool):
        self.store = store
        self.tables = tables
        self.code = code  # holds the machine code: the callables below need it alive
        self.events = events
        self.ir = ir
        self.fast = fast  # ns_process may run whole packets (entry.fast_path)
        init = [0 if (v is None or isinstance(v, bytes)) else int(v) for v in prog.init_slots]
        self.F0 = np.array(init, dtype=np.int64)
        self.F = self.F0.copy()  # ns_process's packet, and its copies' scratch
        self.F2 = self.F0.copy()
        self.out = np.zeros(ROOM * (MAX_FAST_REPLICAS + 1), dtype=np.uint8)
        self.res = np.zeros(RES_HEAD + 3 * (MAX_FAST_REPLICAS + 1), dtype=np.int64)
        self.groups = np.full(1 << 16, NO_GROUP, dtype=np.int64)
        self.replicas = np.zeros(1, dtype=np.int64)
        self.pre_version = None
        x = store.ctx
        x[Storage.F0] = self.F0.ctypes.data
        x[Storage.GROUPS] = self.groups.ctypes.data
        x[Storage.REPLICAS] = self.replicas.ctypes.data
        self._ptrs = (self.F.ctypes.data, store.ctx.ctypes.data, self.out.ctypes.data,
                      self.res.ctypes.data, self.F2.ctypes.data)
        self.out_ptr = self._ptrs[2]
        self.mv = memoryview(self.out)
        self.ctx_ptr = self._ptrs[1]
        fns = code.fns
        self._ingress = fns["ns_ingress"]
        self._parse = fns["ns_parse"]
        self._egress = fns["ns_egress"]
        self._emit = fns["ns_emit"]
        self._process = fns["ns_process"]
        self._rx = fns.get("ns_rx")

    # -- the multicast groups, mirrored ------------------------------------------------------

    def mirror(self, pre) -> None:
        """Copies the replication engine's groups into the buffers ns_process reads."""
        self.groups[:] = NO_GROUP
        flat = [0]
        for gid, reps in pre.groups.items():
            if len(reps) > MAX_FAST_REPLICAS:
                self.groups[gid] = LARGE_GROUP
                continue
            self.groups[gid] = len(flat)
            flat.append(len(reps))
            for port, rid in reps:
                flat += [port, rid]
        self.replicas = np.array(flat, dtype=np.int64)
        self.store.ctx[Storage.REPLICAS] = self.replicas.ctypes.data
        self.pre_version = pre.version

    # -- calls ---------------------------------------------------------------------------------

    def run(self, data: bytes, port: int, now: int, pre):
        """A whole packet (self.fast only): (drops, frames too big, failed assert's message or
        None, [(port, frame)]), or None when the switch must go on from self.F as ingress
        left it. Kept short: it is most of the Python a packet costs."""
        if len(data) > MAX_FRAME:
            self._too_long(data)
        if self.tables.dirty:
            self.tables.refresh()
        if pre.version != self.pre_version:
            self.mirror(pre)
        F, C, OUT, RES, F2 = self._ptrs
        n = self._process(F, C, data, len(data), port, now, OUT, len(data) + 512, RES, F2)
        if n < 0:
            return None
        r = self.res[:RES_HEAD].tolist()
        return r[1], r[2], (self.events[r[4]] if r[4] else None), self.frames(n)

    def rx(self, ring, now: int, ports, pre, budget: int) -> int:
        """Up to `budget` frames of a port's receive ring (native/rx.py): the number taken,
        -1 when the last needs the Python orchestration (its frame in ports.slow), -2 when
        its outputs are for Python to send (leftover())."""
        if self.tables.dirty:
            self.tables.refresh()
        if pre.version != self.pre_version:
            self.mirror(pre)
        F, C, OUT, RES, F2 = self._ptrs
        return self._rx(F, C, ring.rec_ptr, now, OUT, RES, F2, ports.slow_ptr, ports.txfd_ptr,
                        ports.txn_ptr, ports.st_ptr, ports.send, budget)

    def leftover(self) -> list[tuple[int, bytes]]:
        """The frames of the last packet ns_rx did not send."""
        return self.frames(int(self.res[0]))

    def frames(self, n: int) -> list[tuple[int, bytes]]:
        r = self.res[:RES_HEAD + 3 * n].tolist()
        mv = self.mv
        return [(r[k], bytes(mv[r[k + 1]:r[k + 1] + r[k + 2]]))
                for k in range(RES_HEAD, RES_HEAD + 3 * n, 3)]

    def fresh(self) -> np.ndarray:
        return self.F0.copy()

    @staticmethod
    def _too_long(data: bytes):
        raise ValueError(f"frame of {len(data)} bytes: the native tier takes at most "
                         f"{MAX_FRAME}")

    def ingress(self, F: np.ndarray, data: bytes, port: int, pktlen: int, itype: int,
                now: int, new: bool) -> int:
        if len(data) > MAX_FRAME:
            self._too_long(data)
        if self.tables.dirty:
            self.tables.refresh()
        return self._ingress(F.ctypes.data, self.ctx_ptr, data, len(data), port, pktlen,
                             itype, now, 1 if new else 0)

    def parse(self, F: np.ndarray, data: bytes) -> int:
        return self._parse(F.ctypes.data, self.ctx_ptr, data, len(data))

    def egress(self, F: np.ndarray, data: bytes, port: int, now: int, cap: int) -> int:
        if self.tables.dirty:
            self.tables.refresh()
        return self._egress(F.ctypes.data, self.ctx_ptr, data, len(data), port, now,
                            self.out_ptr, min(cap, ROOM))

    def emit(self, F: np.ndarray, data: bytes, cap: int) -> int:
        return self._emit(F.ctypes.data, self.ctx_ptr, data, len(data), self.out_ptr,
                          min(cap, ROOM))

    def take_event(self) -> str | None:
        """The message of an assert that failed in the last call, if any."""
        e = int(self.store.events[0])
        if not e:
            return None
        self.store.events[0] = 0
        return self.events[e] if e < len(self.events) else "assert failed"
