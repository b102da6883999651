"""The switch: simple_switch's packet flow around a translated v1model program.

process() follows targets/simple_switch/simple_switch.cpp: parse, verify
checksums, ingress, then ingress clones, resubmit, multicast, drop or
unicast; per copy egress, egress clones, drop, deparse, recirculate or
transmit. BMv2 runs ingress and egress on their own threads; here one call
runs a packet and everything it spawns to completion, in a fixed order:
each ingress pass is followed by the egress of the copies it enqueued.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque

from . import native
from .errors import SwitchError
from .native import enabled as native_ok
from .pre import PRE, CloneSessions
from .program import Program, compile_program
from .program import decode as decode_program
from .program.layout import (
    ABORT,
    CLONE,
    CLONE_FL,
    DIGEST,
    EXIT,
    INLEN,
    INSTANCE_EGRESS_CLONE,
    INSTANCE_INGRESS_CLONE,
    INSTANCE_NORMAL,
    INSTANCE_RECIRC,
    INSTANCE_REPLICATION,
    INSTANCE_RESUBMIT,
    PAYLOAD,
    PKTLEN,
    RECIRC,
    RESUBMIT,
    TRUNC,
)
from .program.vector import RandomBatch

# Resubmissions plus recirculations one input packet may cause before the
# rest is dropped: BMv2 would loop forever on a program that always does it.
MAX_PASSES = 64
# BMv2 keeps a packet in a buffer of its received length + 512 bytes and
# aborts the whole switch when the deparser needs more; here that packet is
# dropped and logged instead.
HEADROOM = 512
NB_QUEUES_PER_PORT = 1  # simple_switch's default; a higher priority is dropped


class Switch:
    def __init__(self, device_id: int = 0, cpu_port: int | None = None, drop_port: int = 511,
                 log: logging.Logger | None = None, seed: int | None = None,
                 vectorize: bool = True, native: bool | None = None):
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.drop_port = drop_port
        self.log = log or logging.getLogger("softswitch")
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        # vector code draws the random extern's values from numpy (program/vector.py)
        self._nprng = RandomBatch(seed)
        self.vectorize = vectorize
        # the packet path compiled to machine code where it can be (softswitch/native/)
        self.native = native_ok() if native is None else bool(native) and native_ok()
        self._prog: Program | None = None
        self._t0 = time.monotonic()
        self.tables: dict = {}
        self.registers: dict = {}
        self.counters: dict = {}
        self.meters: dict = {}
        self.parse_vsets: dict = {}
        self.pre = PRE(self._lock)
        self.clones = CloneSessions(self._lock)
        self.program_json: dict | None = None
        self.program_source: str | None = None
        self.digests: deque = deque(maxlen=1024)  # (learn list id, packet bytes)
        # too_big: packets BMv2 would have aborted on (more than HEADROOM bytes added)
        self.stats = {"packets_in": 0, "packets_out": 0, "dropped": 0, "errors": 0,
                      "too_big": 0}
        self._slow_native = False  # ns_process left a packet after ingress to _run

    # -- program ------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._prog is not None

    def load(self, config) -> None:
        """Translate and install a BMv2 JSON program; resets all runtime state."""
        self._install(self._compile(config))

    def _compile(self, config) -> Program:
        """The Python tier's program and, where the native tier takes it, its compiled
        packet path (then the Python tier needs no vector code: it only serves the
        control plane)."""
        kw = dict(lock=self._lock, rng=self._rng, log=self.log, drop_port=self.drop_port,
                  nprng=self._nprng)
        if self.native:
            j = decode_program(config)
            try:
                why = native.unsupported_features(j)
            except Exception:  # noqa: BLE001 - malformed: the Python tier says how
                why = "a malformed program"
            if why is None:
                prog = compile_program(j, vectorize=False, **kw)
                try:
                    prog.native = native.build(prog, j, seed=self._rng.getrandbits(63),
                                               drop_port=self.drop_port)
                    return prog
                except native.Unsupported as e:
                    why = str(e)
                except Exception:  # a bug of the native tier must not cost the program
                    self.log.warning("native tier failed on this program; it runs on the "
                                     "Python tier", exc_info=True)
                    why = "it (internal error)"
            self.log.info("program runs on the Python tier: the native tier does not "
                          "compile %s", why)
            config = j
        return compile_program(config, vectorize=self.vectorize, **kw)

    @property
    def tier(self) -> str:
        """'native' when packets run as compiled code, 'python' otherwise."""
        return "native" if self._prog is not None and self._prog.native else "python"

    def scratch(self) -> Switch:
        """An engine to load a candidate program into without touching this one. It shares
        this engine's lock and random sources, so the program it compiled can be moved here
        with adopt() rather than compiled again (seconds for a wide program)."""
        other = Switch(self.device_id, self.cpu_port, self.drop_port, self.log,
                       vectorize=self.vectorize, native=self.native)
        other._lock, other._rng, other._nprng = self._lock, self._rng, self._nprng
        other.pre, other.clones = PRE(self._lock), CloneSessions(self._lock)
        other._origin = self
        return other

    def adopt(self, other: Switch) -> None:
        """Install the program a scratch() engine of this one has just loaded (no packet or
        table write in between); all state starts empty, as with load()."""
        if getattr(other, "_origin", None) is not self or other._prog is None:
            raise ValueError("adopt() takes a loaded scratch() engine of this switch")
        self._install(other._prog)
        other._prog = None

    def _install(self, prog: Program) -> None:
        with self._lock:
            self._prog = prog
            self.tables = prog.tables
            self.registers = prog.registers
            self.counters = prog.counters
            self.meters = prog.meters
            self.parse_vsets = prog.vsets
            self.pre.reset()
            self.clones.reset()
            self.program_json = prog.json
            self.program_source = prog.source
            self.digests.clear()

    def action_params(self, action_name: str, table: str | None = None) -> list[tuple[str, int]]:
        """Parameters of an action; of the copy `table` runs where p4c emitted several
        actions of that name (without a table: the first in the program)."""
        with self._lock:
            if self._prog is None or action_name not in self._prog.action_params:
                raise SwitchError("NOT_FOUND", f"no action {action_name!r}")
            tbl = self._prog.tables.get(table) if table is not None else None
            if tbl is not None and action_name in tbl.action_names:
                return tbl.params_of(action_name)
            return list(self._prog.action_params[action_name])

    # -- data plane ---------------------------------------------------------------------

    def _now(self) -> int:
        return int((time.monotonic() - self._t0) * 1e6)

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        with self._lock:
            self.stats["packets_in"] += 1
            prog = self._prog
            if prog is None or not isinstance(port, int) or port < 0:
                self.stats["dropped"] += 1
                return out
            nat = prog.native
            if nat is not None and nat.fast:  # the whole packet in one call, where it can be
                try:
                    done = self._run_native(nat, port, bytes(data))
                except Exception:  # as below
                    self.stats["errors"] += 1
                    self.stats["dropped"] += 1
                    self.log.exception("packet on port %s dropped: internal error", port)
                    return []
                if done is not None:
                    self.stats["packets_out"] += len(done)
                    return done
            try:
                self._run(prog, port, bytes(data), out)
            except Exception:  # a bug must cost one packet, never the caller
                self.stats["errors"] += 1
                self.stats["dropped"] += 1
                self.log.exception("packet on port %s dropped: internal error", port)
                return []
            self.stats["packets_out"] += len(out)
        return out

    def _run_native(self, nat, port: int, data: bytes) -> list | None:
        """ns_process: the frames sent, or None when ingress left what the Python
        orchestration does (then self._slow_native goes on from it)."""
        self._capacity = len(data) + HEADROOM
        r = nat.run(data, port, self._now(), self.pre)
        if r is None:
            self._slow_native = True
            return None
        drops, big, event, frames = r
        if drops:
            self.stats["dropped"] += drops
        for _ in range(big):
            self._too_big(None, counted=True)
        if event:
            self.log.error(event)
        return frames

    def native_program(self):
        """The compiled program, where whole packets run as one call (the lock held)."""
        prog = self._prog
        nat = prog.native if prog is not None else None
        return nat if nat is not None and nat.fast else None

    def resume_native(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """The rest of a packet ns_rx ran ingress for (the lock held): its frames."""
        out: list = []
        self._slow_native = True
        try:
            self._run(self._prog, port, data, out)
        except Exception:  # as in process()
            self.stats["errors"] += 1
            self.stats["dropped"] += 1
            self.log.exception("packet on port %s dropped: internal error", port)
            return []
        self.stats["packets_out"] += len(out)
        return out

    def count_native_leftover(self, n: int) -> None:
        """ns_rx left a packet's n frames for Python to send."""
        self.stats["packets_out"] += n

    def _run(self, prog: Program, port: int, data: bytes, out: list) -> None:
        self._capacity = len(data) + HEADROOM
        ingress_q: deque = deque()
        egress_q: deque = deque()
        # (bytes, physical port, instance type, preserved [(slot, value)], length, ingress length)
        item = (data, port, INSTANCE_NORMAL, None, len(data), len(data))
        passes = 0
        if self._slow_native:  # ns_process ran ingress; the rest is done here
            self._slow_native = False
            nat = prog.native
            self._events(nat)
            self._data = data
            self._route(prog, nat.F, item, ingress_q, egress_q)
            passes = 1
        else:
            ingress_q.append(item)
        while True:
            while egress_q:
                self._egress(prog, egress_q.popleft(), ingress_q, egress_q, out)
            if not ingress_q:
                return
            item = ingress_q.popleft()
            passes += 1
            if passes > MAX_PASSES:
                self.stats["dropped"] += 1
                self.log.warning("packet from port %s: too many resubmit/recirculate passes", port)
                continue
            self._ingress(prog, item, ingress_q, egress_q)

    def _set(self, F: list, prog: Program, name: str, value: int) -> None:
        s = prog.sm[name]
        if s is not None:
            F[s[0]] = value & s[1]

    def _get(self, F: list, prog: Program, name: str) -> int:
        s = prog.sm[name]
        return 0 if s is None else int(F[s[0]])

    def _ingress(self, prog: Program, item, ingress_q: deque, egress_q: deque) -> None:
        data, phys_port, itype, preserved, pktlen, inlen = item
        nat = prog.native
        F = nat.fresh() if nat else prog.init_slots[:]
        F[INLEN] = inlen
        F[PKTLEN] = pktlen
        if preserved is not None:
            for slot, v in preserved:
                F[slot] = v
        if nat:
            self._data = data  # the payload of every copy this pass sends
            nat.ingress(F, data, phys_port, pktlen, itype, self._now(), preserved is None)
            self._events(nat)
        else:
            # a new packet gets its port and timestamp (receive_ in simple_switch.cpp)
            prog.set_ingress_meta(F, phys_port, pktlen, itype, self._now(), preserved is None)
            pos, err = prog.parse(F, data)
            F[PAYLOAD] = data[pos:]
            ck_err = prog.verify_checksums(F)
            prog.set_parse_result(F, err, 1 if ck_err else 0)
            prog.ingress(F)
            F[EXIT] = 0
        self._route(prog, F, item, ingress_q, egress_q)

    def _route(self, prog: Program, F, item, ingress_q: deque, egress_q: deque) -> None:
        """What simple_switch does after ingress: drop, clone, digest, resubmit, multicast
        or unicast (F as ingress left it)."""
        data, phys_port, itype, preserved, pktlen, inlen = item
        nat = prog.native
        if F[ABORT]:
            self.stats["dropped"] += 1
            return
        if F[CLONE]:
            # An ingress clone is the packet as it arrived, re-parsed.
            if nat:
                C = nat.fresh()
                self._set(C, prog, "ingress_port", phys_port)
                nat.parse(C, data)
            else:
                C = prog.init_slots[:]
                self._set(C, prog, "ingress_port", phys_port)
                cpos, _ = prog.parse(C, data)
                C[PAYLOAD] = data[cpos:]
            C[PKTLEN] = pktlen
            C[INLEN] = inlen
            self._clone(prog, F, C, INSTANCE_INGRESS_CLONE, egress_q, phys_port)
        if F[DIGEST]:
            self.digests.append((int(F[DIGEST]), data))
            F[DIGEST] = 0
        rfl = int(F[RESUBMIT])
        if rfl:
            keep = [(s, F[s]) for s in prog.field_lists.get(rfl, ())]
            ingress_q.append((data, phys_port, INSTANCE_RESUBMIT, keep, pktlen, inlen))
            return
        mgid = self._get(F, prog, "mcast_grp")
        if mgid:
            self._set(F, prog, "instance_type", INSTANCE_REPLICATION)
            grp = self.pre.groups.get(mgid)
            if grp:
                self._replicate(prog, F, grp, egress_q, 0, phys_port)
            else:
                self.stats["dropped"] += 1
            return
        es = self._get(F, prog, "egress_spec")
        if es == self.drop_port:
            self.stats["dropped"] += 1
            return
        self._set(F, prog, "instance_type", INSTANCE_NORMAL)
        self._enqueue(prog, es, F, egress_q, phys_port)

    def _events(self, nat) -> None:
        msg = nat.take_event()
        if msg:
            self.log.error(msg)

    def _replicate(self, prog: Program, F: list, replicas, egress_q: deque, trunc: int,
                   phys_port: int) -> None:
        """Enqueues a copy of F per replica. F is the caller's to give away: the last
        replica takes it instead of a copy (a packet's slots are thousands of fields)."""
        rid = prog.sm["egress_rid"]
        last = len(replicas) - 1
        for i, (port, r) in enumerate(replicas):
            C = F if i == last else F.copy()
            if rid is not None:
                C[rid[0]] = r & rid[1]
            C[CLONE] = C[CLONE_FL] = C[RESUBMIT] = C[RECIRC] = C[DIGEST] = 0
            C[TRUNC] = trunc if trunc > 0 else -1
            self._enqueue(prog, port, C, egress_q, phys_port)

    def _enqueue(self, prog: Program, port: int, F: list, egress_q: deque, phys_port: int) -> None:
        if self._get(F, prog, "priority") >= NB_QUEUES_PER_PORT:
            self.stats["dropped"] += 1
            return
        self._set(F, prog, "enq_timestamp", self._now())
        self._set(F, prog, "enq_qdepth", 0)
        egress_q.append((port, F, phys_port))

    def _clone(self, prog: Program, F: list, C: list, instance_type: int,
               egress_q: deque, phys_port: int) -> None:
        """Sends C, the clone F asked for, to its session's replicas; clears the request."""
        clone, fl = F[CLONE], F[CLONE_FL]
        F[CLONE] = F[CLONE_FL] = C[CLONE] = C[CLONE_FL] = 0
        sess = self.clones.sessions.get(int(clone) & 0x7FFF)
        if sess is None:
            return
        for s in prog.metadata_slots:
            C[s] = 0
        for s in prog.field_lists.get(int(fl), ()):
            C[s] = F[s]
        self._set(C, prog, "instance_type", instance_type)
        self._replicate(prog, C, sess["replicas"], egress_q,
                        sess.get("packet_length_bytes", 0), phys_port)

    def _egress(self, prog: Program, item, ingress_q: deque, egress_q: deque, out: list) -> None:
        port, F, phys_port = item
        nat = prog.native
        if nat:
            data = self._egress_native(prog, nat, F, port, egress_q, phys_port)
            if data is None:
                return
        else:
            prog.set_egress_meta(F, port, self._now(), F[PKTLEN])
            F[EXIT] = 0
            prog.egress(F)
            if F[ABORT]:
                self.stats["dropped"] += 1
                return
            if F[CLONE]:
                # An egress clone is the packet as egress left it.
                self._clone(prog, F, F[:], INSTANCE_EGRESS_CLONE, egress_q, phys_port)
            if self._get(F, prog, "egress_spec") == self.drop_port:
                self.stats["dropped"] += 1
                return
            prog.update_checksums(F)
            data = prog.deparse(F) + F[PAYLOAD]
            if len(data) > self._capacity:
                self._too_big(len(data))
                return
        rfl = int(F[RECIRC])
        if rfl:
            keep = [(s, F[s]) for s in prog.field_lists.get(rfl, ())]
            ingress_q.append((data, phys_port, INSTANCE_RECIRC, keep, len(data), len(data)))
            return
        if F[TRUNC] >= 0:
            data = data[: F[TRUNC]]
        out.append((port, data))

    def _egress_native(self, prog, nat, F, port, egress_q, phys_port) -> bytes | None:
        """Egress, checksums and deparser of one copy as compiled code: the frame, or None
        when it was dropped."""
        data = self._data
        n = nat.egress(F, data, port, self._now(), self._capacity)
        self._events(nat)
        if n == -2:  # an egress clone is the packet as egress left it
            self._clone(prog, F, F.copy(), INSTANCE_EGRESS_CLONE, egress_q, phys_port)
            n = -3 if self._get(F, prog, "egress_spec") == self.drop_port else \
                nat.emit(F, data, self._capacity)
        if n == -4:
            self._too_big(None)
            return None
        if n < 0:
            self.stats["dropped"] += 1
            return None
        return nat.out[:n].tobytes()

    def _too_big(self, length: int | None, counted: bool = False) -> None:
        if not counted:  # ns_process counted it among its drops
            self.stats["dropped"] += 1
        self.stats["too_big"] += 1
        self.log.error("packet of %d bytes grew to %s: more than BMv2's %d bytes of "
                       "headroom (simple_switch would abort); dropped",
                       self._capacity - HEADROOM, length if length is not None else "more",
                       HEADROOM)
