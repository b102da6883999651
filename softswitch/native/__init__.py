"""The native tier: a program's packet path compiled to machine code through LLVM.

The Python tier (softswitch/program/) translates a BMv2 JSON program into Python and stays
the reference: it builds the tables, registers and counters the control plane sees. Where
llvmlite is there and the program uses only what this tier compiles, its parser, checksums,
pipelines and deparser are also generated as LLVM IR (one function a pipeline, an action,
a parser ...), compiled once per machine (engine.py), and the switch runs packets through
them; registers, counters and tables then live in numpy buffers both sides read. A
program using anything else (varbit fields, header stacks, meters, log_msg, fields wider
than 64 bits, values no 256-bit integer holds ...) stays on the Python tier, and the
reason is logged. NATSWITCH_NATIVE=0, or Switch(native=False), turns the tier off.
"""

from __future__ import annotations

import ctypes
import logging
import os

import numpy as np

from ..program.layout import PAYLOAD
from ..program.vector import lane_register_sets
from .actions import compile_action
from .algos import Algorithms, runtime
from .exprs import Ctx
from .ir import Module, Unsupported, V, const
from .packet import compile_calculation, compile_checksums, compile_deparser, compile_parser
from .packet import intrinsics as packet_intrinsics
from .pipeline import compile_pipeline
from .tables import NativeTables

log = logging.getLogger("softswitch.native")
SCRATCH_BYTES = 1 << 17  # calculation inputs: headers and a payload of up to ~128 KiB
MAX_FRAME = 1 << 16


def enabled() -> bool:
    if os.environ.get("NATSWITCH_NATIVE", "1") == "0":
        return False
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError:
        return False
    return True


class Storage:
    """Registers and counters in flat int64 buffers; the context array %C points at them.

    Register and Counter objects keep working for the control plane: their cells become
    views of these buffers."""

    REGS, CNTP, CNTB, TABLES, DCOUNTERS, RNG, SCRATCH, EVENTS, DATA, DLEN = range(10)
    NCTX = 10

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
            view[:] = [_s64(int(v)) for v in r.values] if r.size else []
            r.values = view
        for name, c in self._cnts.items():
            o = self.cnt_off[name]
            p, b = self.cntp[o:o + c.size], self.cntb[o:o + c.size]
            p[:] = [_s64(int(v)) for v in c.packets] if c.size else []
            b[:] = [_s64(int(v)) for v in c.bytes] if c.size else []
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


def _s64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


class Build:
    """What the compilers of one program share (the `env` of actions.py and packet.py)."""

    def __init__(self, prog, j: dict, store: Storage, tables: NativeTables, drop_port: int):
        self.prog = prog
        self.j = j
        self.L = prog.layout
        self.store = store
        self.tables = tables
        self.drop_port = drop_port
        self.mod = Module()
        self.algos = Algorithms(self.mod)
        self.events: list[str] = [""]
        self.action_fn: dict[int, str] = {}
        self.calc_names: dict[str, str] = {}
        self.calcs = {c["name"]: c for c in j.get("calculations", [])}
        self.controls = prog.controls
        self.direct_meter_targets = {m.get("binding") for m in j.get("meter_arrays", [])
                                     if m.get("is_direct")}

    def event(self, msg: str) -> int:
        self.events.append(msg)
        return len(self.events) - 1

    def algorithm(self, name) -> str:
        return self.algos.get(name)

    def calc_fn(self, name: str) -> str:
        fn = self.calc_names.get(name)
        if fn is None:
            c = self.calcs.get(name)
            if c is None:
                raise Unsupported(f"unknown calculation {name!r}")
            fn = compile_calculation(self, c)
            self.calc_names[name] = fn
        return fn

    def calc(self, ctx: Ctx, name: str) -> str:
        return ctx.fn.op(f"call i64 @{self.calc_fn(name)}(ptr %F, ptr %C)")

    def draw(self, ctx: Ctx, n: int) -> V:
        """A uniform value in [0, n), 1 <= n <= 2^64."""
        f = ctx.fn
        if n == 1:
            return const(0)
        if n & (n - 1) == 0:
            r = f.op("call i64 @ns.rng(ptr %C)")
            bits = n.bit_length() - 1
            if bits == 64:
                return V(f.op(f"zext i64 {r} to i128"), 128, 0, n - 1)
            return V(f.op(f"lshr i64 {r}, {64 - bits}"), 64, 0, n - 1)
        r = f.op(f"call i128 @ns.below(ptr %C, i128 {n})")
        return V(r, 128, 0, n - 1)

    def draw_runtime(self, ctx: Ctx, n: str) -> str:
        return ctx.fn.op(f"call i128 @ns.below(ptr %C, i128 {n})")


ENTRY = ["ptr noalias %F", "ptr noalias %C"]


def _metadata(f, prog, names_values: list[tuple[str, str]]) -> None:
    for name, value in names_values:
        s = prog.sm.get(name)
        if s is not None:
            slot, mask = s
            f.store("%F", str(slot), f.op(f"and i64 {value}, {_s64(mask)}"))


def _entries(b: Build, parse: str, verify: str, update: str, deparse: str,
             ingress: str, egress: str) -> None:
    from ..program.layout import ABORT, CLONE, EXIT, PKTLEN
    prog, mod = b.prog, b.mod
    st = Storage

    def data(f):
        f.store("%C", str(st.DATA), f.op("ptrtoint ptr %D to i64"))
        f.store("%C", str(st.DLEN), "%LD")

    f = mod.fn("ns_ingress", ENTRY + ["ptr noalias %D", "i64 %LD", "i64 %port", "i64 %pktlen",
                                      "i64 %itype", "i64 %now", "i64 %new"], "i64", export=True)
    data(f)
    yes, go = f.label("new"), f.label("old")
    f.cbr(f.op("icmp ne i64 %new, 0"), yes, go)
    f.block(yes)
    _metadata(f, prog, [("ingress_port", "%port"), ("ingress_global_timestamp", "%now")])
    f.br(go)
    f.block(go)
    _metadata(f, prog, [("packet_length", "%pktlen"), ("instance_type", "%itype")])
    posp = f.local("i64", "0")
    err = f.op(f"call i64 @{parse}(ptr %F, ptr %C, ptr %D, i64 %LD, ptr {posp})")
    pos = f.op(f"load i64, ptr {posp}")
    f.store("%F", str(PAYLOAD), pos)
    ck = f.op(f"zext i1 {f.op(f'call i1 @{verify}(ptr %F, ptr %C)')} to i64")
    _metadata(f, prog, [("parser_error", err), ("checksum_error", ck)])
    f.emit(f"call void @{ingress}(ptr %F, ptr %C)")
    f.store("%F", str(EXIT), "0")
    f.retv(pos)

    f = mod.fn("ns_parse", ENTRY + ["ptr noalias %D", "i64 %LD"], "i64", export=True)
    data(f)
    posp = f.local("i64", "0")
    f.op(f"call i64 @{parse}(ptr %F, ptr %C, ptr %D, i64 %LD, ptr {posp})")
    pos = f.op(f"load i64, ptr {posp}")
    f.store("%F", str(PAYLOAD), pos)
    f.retv(pos)

    def emit(f) -> None:
        f.emit(f"call void @{update}(ptr %F, ptr %C)")
        n = f.op(f"call i64 @{deparse}(ptr %F, ptr %C, ptr %OUT, i64 %CAP)")
        big = f.op(f"icmp slt i64 {n}, 0")
        f.retv(f.op(f"select i1 {big}, i64 -4, i64 {n}"))

    f = mod.fn("ns_egress", ENTRY + ["ptr noalias %D", "i64 %LD", "i64 %port", "i64 %now",
                                     "ptr noalias %OUT", "i64 %CAP"], "i64", export=True)
    data(f)
    sm = prog.sm
    now_enq = []
    if sm.get("enq_timestamp") is not None:
        enq = f.load("%F", str(sm["enq_timestamp"][0]))
        now_enq = [("deq_timedelta", f.op(f"sub i64 %now, {enq}"))]
    pktlen = f.load("%F", str(PKTLEN))
    _metadata(f, prog, [("egress_global_timestamp", "%now")] + now_enq +
              [("deq_qdepth", "0"), ("qid", "0"), ("egress_port", "%port"),
               ("egress_spec", str(b.drop_port + 1)), ("packet_length", pktlen)])
    f.store("%F", str(EXIT), "0")
    f.emit(f"call void @{egress}(ptr %F, ptr %C)")
    for slot, code in ((ABORT, -1), (CLONE, -2)):
        yes, no = f.label("ret"), f.label("on")
        f.cbr(f.op(f"icmp ne i64 {f.load('%F', str(slot))}, 0"), yes, no)
        f.block(yes)
        f.retv(str(code))
        f.block(no)
    es = sm["egress_spec"]
    yes, no = f.label("drop"), f.label("send")
    f.cbr(f.op(f"icmp eq i64 {f.load('%F', str(es[0]))}, {b.drop_port}"), yes, no)
    f.block(yes)
    f.retv("-3")
    f.block(no)
    emit(f)

    f = mod.fn("ns_emit", ENTRY + ["ptr noalias %D", "i64 %LD", "ptr noalias %OUT", "i64 %CAP"],
               "i64", export=True)
    data(f)
    emit(f)


def unsupported_features(j: dict) -> str | None:
    if j.get("meter_arrays"):
        return "meters"
    if j.get("parse_vsets"):
        return "parser value sets"
    if j.get("header_stacks") or j.get("header_union_stacks"):
        return "header stacks"
    for ht in j.get("header_types", []):
        for fl in ht.get("fields", []):
            if fl[1] == "*":
                return "varbit fields"
            if int(fl[1]) > 64:
                return f"a field of {fl[1]} bits ({ht['name']}.{fl[0]})"
    for a in j.get("actions", []):
        for p in a.get("primitives", []):
            if p.get("op") in ("log_msg", "execute_meter", "assign_VL"):
                return f"the {p['op']} primitive"
    return None


def build(prog, j: dict, *, seed: int, drop_port: int = 511):
    """The NativeProgram for a Python-tier Program, or Unsupported with the reason."""
    why = unsupported_features(j)
    if why is not None:
        raise Unsupported(why)
    banks = list(lane_register_sets(j.get("actions", []), prog.registers, 64))
    store = Storage(prog.registers, prog.counters, seed, banks)
    tables = NativeTables(prog.tables, list(prog.tables))
    try:
        b = Build(prog, j, store, tables, drop_port)
        for a in j.get("actions", []):
            b.action_fn[int(a["id"])] = compile_action(b, a)
        parse = compile_parser(b, _pick(j["parsers"], "parser"))
        deparse = compile_deparser(b, _pick(j["deparsers"], "deparser"))
        verify, update = compile_checksums(b, j.get("checksums", []))
        pipes = {p["name"]: p for p in j.get("pipelines", [])}
        ingress = compile_pipeline(b, pipes["ingress"])
        egress = compile_pipeline(b, pipes["egress"])
        _entries(b, parse, verify, update, deparse, ingress, egress)
        b.mod.globals[:0] = packet_intrinsics() + [runtime(Storage.RNG)]
        text = b.mod.render()
    except Exception:
        tables.detach(prog.tables)
        raise
    from .engine import compile_module
    P, I = ctypes.c_void_p, ctypes.c_int64
    try:
        code = compile_module(text, {
            "ns_ingress": (I, [P, P, ctypes.c_char_p, I, I, I, I, I, I]),
            "ns_parse": (I, [P, P, ctypes.c_char_p, I]),
            "ns_egress": (I, [P, P, ctypes.c_char_p, I, I, I, P, I]),
            "ns_emit": (I, [P, P, ctypes.c_char_p, I, P, I]),
        })
    except Exception:
        tables.detach(prog.tables)
        raise
    store.attach(tables)
    return NativeProgram(prog, store, tables, code, b.events, text)


def _pick(objs: list, name: str) -> dict:
    for o in objs:
        if o.get("name") == name:
            return o
    return objs[0]


class NativeProgram:
    """The compiled packet path of one program and the buffers it works on."""

    def __init__(self, prog, store: Storage, tables: NativeTables, code, events, ir: str):
        self.store = store
        self.tables = tables
        self.code = code
        self.events = events
        self.ir = ir
        init = [0 if (v is None or isinstance(v, bytes)) else int(v) for v in prog.init_slots]
        self.F0 = np.array(init, dtype=np.int64)
        self.out = np.zeros(MAX_FRAME + 4096, dtype=np.uint8)
        self.out_ptr = self.out.ctypes.data
        self.ctx_ptr = store.ctx.ctypes.data
        fns = code.fns
        self._ingress = fns["ns_ingress"]
        self._parse = fns["ns_parse"]
        self._egress = fns["ns_egress"]
        self._emit = fns["ns_emit"]

    def fresh(self) -> np.ndarray:
        return self.F0.copy()

    def _room(self, data: bytes, cap: int) -> int:
        if len(data) > MAX_FRAME:
            raise ValueError(f"frame of {len(data)} bytes: the native tier takes at most "
                             f"{MAX_FRAME}")
        return min(cap, len(self.out))

    def ingress(self, F: np.ndarray, data: bytes, port: int, pktlen: int, itype: int,
                now: int, new: bool) -> int:
        if len(data) > MAX_FRAME:
            raise ValueError(f"frame of {len(data)} bytes: the native tier takes at most "
                             f"{MAX_FRAME}")
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
                            self.out_ptr, self._room(data, cap))

    def emit(self, F: np.ndarray, data: bytes, cap: int) -> int:
        return self._emit(F.ctypes.data, self.ctx_ptr, data, len(data), self.out_ptr,
                          self._room(data, cap))

    def take_event(self) -> str | None:
        """The message of an assert that failed in the last call, if any."""
        e = int(self.store.events[0])
        if not e:
            return None
        self.store.events[0] = 0
        return self.events[e] if e < len(self.events) else "assert failed"


__all__ = ["NativeProgram", "Unsupported", "build", "enabled", "unsupported_features"]
