"""The native tier: a program's packet path compiled to machine code through LLVM.

The Python tier (softswitch/program/) translates a BMv2 JSON program into Python and stays
the reference: it builds the tables, registers and counters the control plane sees. Where
llvmlite is there and the program uses only what this tier compiles, its parser, checksums,
pipelines and deparser are also generated as LLVM IR (a function per pipeline, action,
parser ...), compiled once per machine (engine.py), and the switch runs packets through
them; registers, counters and tables then live in numpy buffers both sides read. A
program using anything else (varbit fields, header stacks, meters, log_msg, fields wider
than 64 bits, values no 256-bit integer holds ...) stays on the Python tier, and the
reason is logged. NATSWITCH_NATIVE=0, or Switch(native=False), turns the tier off.
"""

from __future__ import annotations

import ctypes
import os

from ..program.vector import lane_register_sets
from .actions import compile_action
from .algos import runtime
from .build import Build
from .entry import emit_entries, fast_path
from .ir import Unsupported
from .packet import compile_checksums, compile_deparser, compile_parser
from .packet import intrinsics as packet_intrinsics
from .pipeline import compile_pipeline
from .program import NativeProgram
from .storage import Storage
from .tables import NativeTables


def enabled() -> bool:
    if os.environ.get("NATSWITCH_NATIVE", "1") == "0":
        return False
    try:
        import llvmlite.binding  # noqa: F401
    except ImportError:
        return False
    return True


def unsupported_features(j: dict) -> str | None:
    """What of the program the native tier does not compile, seen from its JSON alone."""
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


P, I = ctypes.c_void_p, ctypes.c_int64
EXPORTS = {
    "ns_ingress": (I, [P, P, ctypes.c_char_p, I, I, I, I, I, I]),
    "ns_parse": (I, [P, P, ctypes.c_char_p, I]),
    "ns_egress": (I, [P, P, ctypes.c_char_p, I, I, I, P, I]),
    "ns_emit": (I, [P, P, ctypes.c_char_p, I, P, I]),
    "ns_process": (I, [P, P, ctypes.c_char_p, I, I, I, P, I, P, P]),
}
RX = ("ns_rx", (I, [P, P, P, I, P, P, P, P, P, P, P, P, I]))  # programs with the fast path


def build(prog, j: dict, *, seed: int, drop_port: int = 511) -> NativeProgram:
    """The NativeProgram for a Python-tier Program, or Unsupported with the reason."""
    why = unsupported_features(j)
    if why is not None:
        raise Unsupported(why)
    from .engine import compile_module

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
        emit_entries(b, parse, verify, update, deparse, ingress, egress)
        b.mod.globals[:0] = packet_intrinsics() + [runtime(Storage.RNG)]
        text = b.mod.render()
        code = compile_module(text, dict(EXPORTS, **dict([RX])) if fast_path(j) else EXPORTS)
    except BaseException:
        tables.detach(prog.tables)
        raise
    store.attach(tables)
    return NativeProgram(prog, store, tables, code, b.events, text, fast_path(j))


def _pick(objs: list, name: str) -> dict:
    for o in objs:
        if o.get("name") == name:
            return o
    return objs[0]


__all__ = ["NativeProgram", "Unsupported", "build", "enabled", "unsupported_features"]
