"""What the compilers of one program share."""

from __future__ import annotations

from .algos import Algorithms
from .exprs import Ctx
from .ir import Module, Unsupported, V, const
from .packet import compile_calculation
from .storage import Storage
from .tables import NativeTables


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
