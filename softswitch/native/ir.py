"""LLVM IR as text: a module of functions, constant arrays, and values with known ranges.

Every data value is an integer of 64, 128 or 256 bits holding the true (infinite
precision) value of a BMv2 expression in two's complement: the interval [lo, hi] of
what it can be is known at load time, and a width is picked that holds it, so
arithmetic never wraps and comparisons are exact. A value no width holds makes the
program Unsupported (it then runs on the Python tier).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

WIDTHS = (64, 128, 256)


class Unsupported(Exception):
    """The program uses something the native tier does not compile."""


@dataclass(frozen=True)
class V:
    ref: str  # %name or a literal
    w: int  # LLVM width: 1 for booleans, else one of WIDTHS
    lo: int = 0
    hi: int = 0
    const: int | None = None
    low: bool = False  # only the low 64 bits are known (see exprs.Ctx: modular values)

    @property
    def is_bool(self) -> bool:
        return self.w == 1


def need(lo: int, hi: int) -> int:
    """The smallest width holding every value in [lo, hi] as a signed integer."""
    for w in WIDTHS:
        if -(1 << (w - 1)) <= lo and hi < (1 << (w - 1)):
            return w
    raise Unsupported(f"a value in [{lo}, {hi}] needs more than {WIDTHS[-1]} bits")


def const(c: int) -> V:
    c = int(c)
    return V(str(c), need(c, c), c, c, c)


def cbool(b: bool) -> V:
    return V("true" if b else "false", 1, int(b), int(b), int(b))


class Module:
    """Functions and constant globals of one program, rendered as one IR module."""

    def __init__(self):
        self.fns: list[Fn] = []
        self.globals: list[str] = []
        self._consts: dict[tuple, str] = {}
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}.{self._n}"

    def array(self, values, hint: str = "k", ty: str = "i64") -> str:
        """A constant global array; returns its @name (shared between equal arrays)."""
        key = (ty, tuple(values))
        g = self._consts.get(key)
        if g is None:
            g = "@" + self.name(hint)
            body = ", ".join(f"{ty} {int(v)}" for v in values)
            self.globals.append(f"{g} = internal constant [{len(values)} x {ty}] [{body}]")
            self._consts[key] = g
        return g

    def fn(self, name: str, args: list[str], ret: str = "void", export: bool = False,
           attrs: str = "") -> Fn:
        f = Fn(self, name, args, ret, export, attrs)
        self.fns.append(f)
        return f

    def render(self) -> str:
        decls = [
            "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
            "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
            "declare i64 @llvm.smin.i64(i64, i64)",
            "declare i64 @llvm.umin.i64(i64, i64)",
        ]
        return "\n".join(decls + self.globals + [f.render() for f in self.fns]) + "\n"


class Fn:
    """One function under construction: an entry block of allocas, then blocks of code."""

    def __init__(self, mod: Module, name: str, args: list[str], ret: str, export: bool,
                 attrs: str):
        self.mod = mod
        self.name = name
        self.args = args  # e.g. ["ptr noalias %F", "i64 %p0"]
        self.ret = ret
        self.export = export
        self.attrs = attrs
        self.allocas: list[str] = []
        self.body: list[str] = []
        self._n = 0
        self.open = True  # the current block has no terminator yet

    def t(self, hint: str = "t") -> str:
        self._n += 1
        return f"%{hint}{self._n}"

    def label(self, hint: str = "b") -> str:
        self._n += 1
        return f"{hint}{self._n}"

    def emit(self, line: str) -> None:
        if not self.open:  # code after a terminator: give it a block of its own
            self.block(self.label("dead"))
        self.body.append("  " + line)

    def op(self, text: str, hint: str = "t") -> str:
        r = self.t(hint)
        self.emit(f"{r} = {text}")
        return r

    def block(self, label: str) -> None:
        if self.open:
            self.body.append(f"  br label %{label}")
        self.body.append(f"{label}:")
        self.open = True

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")
        self.open = False

    def cbr(self, cond: str, yes: str, no: str) -> None:
        self.emit(f"br i1 {cond}, label %{yes}, label %{no}")
        self.open = False

    def retv(self, value: str | None = None) -> None:
        self.emit("ret void" if value is None else f"ret {self.ret} {value}")
        self.open = False

    def local(self, ty: str = "i64", init: str | None = "0") -> str:
        """A stack slot (mem2reg makes it a register)."""
        r = self.t("l")
        self.allocas.append(f"  {r} = alloca {ty}")
        if init is not None:
            self.allocas.append(f"  store {ty} {init}, ptr {r}")
        return r

    # -- memory ---------------------------------------------------------------------------

    def gep(self, base: str, index: str, ty: str = "i64") -> str:
        return self.op(f"getelementptr inbounds {ty}, ptr {base}, i64 {index}", "p")

    def load(self, base: str, index: str, ty: str = "i64") -> str:
        p = self.gep(base, index, ty)
        return self.op(f"load {ty}, ptr {p}")

    def store(self, base: str, index: str, value: str, ty: str = "i64") -> None:
        p = self.gep(base, index, ty)
        self.emit(f"store {ty} {value}, ptr {p}")

    # -- values ---------------------------------------------------------------------------

    def ext(self, v: V, w: int) -> str:
        """v's reference at width w (>= its own): constants as literals, else sign-extended."""
        if v.is_bool:
            raise Unsupported("a boolean where a value is needed")
        if v.const is not None:
            return str(v.const)
        if v.w == w:
            return v.ref
        if v.w > w:
            return self.op(f"trunc i{v.w} {v.ref} to i{w}")
        return self.op(f"sext i{v.w} {v.ref} to i{w}")

    def i64(self, v: V) -> str:
        """v as i64 (its low 64 bits)."""
        if v.const is not None:
            c = v.const & ((1 << 64) - 1)
            return str(c - (1 << 64) if c >> 63 else c)
        return self.ext(v, 64) if v.w >= 64 else v.ref

    def as_bool(self, v: V) -> V:
        if v.is_bool:
            return v
        if v.const is not None:
            return cbool(v.const != 0)
        return V(self.op(f"icmp ne i{v.w} {v.ref}, 0"), 1, 0, 1)

    def as_data(self, v: V) -> V:
        if not v.is_bool:
            return v
        if v.const is not None:
            return const(v.const)
        return V(self.op(f"zext i1 {v.ref} to i64"), 64, 0, 1)

    def render(self) -> str:
        # NATSWITCH_PERF_MAP: every function external, so engine.py can name them for perf
        link = "" if self.export or os.environ.get("NATSWITCH_PERF_MAP") else "internal "
        head = f"define {link}{self.ret} @{self.name}({', '.join(self.args)}) {self.attrs} {{"
        body = list(self.body)
        if self.open:
            body.append("  unreachable" if self.ret != "void" else "  ret void")
        return "\n".join([head, "entry:"] + self.allocas + ["  br label %start", "start:"]
                         + body + ["}"])
