"""BMv2 JSON expressions -> IR values, with the Python tier's semantics (program/exprs.py).

Values are exact: each carries the interval it can take, and its width holds the
interval, so `a - b` of two unsigned fields is the negative number BMv2's infinite
precision gives, truncated only where it is stored (`store_value`). Expressions have no
branches (a guarded register read is a select), so a subexpression computed once can be
reused anywhere later in the statement.

Where only the low bits of a value matter (it is masked by a constant below 2^64, stored
into a field, written to a register), it is compiled modulo 2^64 instead: +, -, *, the
bitwise operators and << keep the low bits of their results from the low bits of their
operands, so `(1 << (c - 1)) & 0xffffffff` needs no 2^255-wide intermediate.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..program.exprs import ExprCompiler, parse_hex
from ..program.layout import Header, HeaderType, Layout
from .ir import WIDTHS, Fn, Unsupported, V, cbool, const, need

U64 = (1 << 64) - 1


@dataclass
class HRef:
    """A header: the slot of its validity bit (an IR i64 or a literal) and its type."""

    base: str
    htype: HeaderType
    header: Header | None = None


@dataclass
class URef:
    union: object


def _sbits(lo: int, hi: int) -> int:
    """n such that every value of [lo, hi] fits a signed (n + 1)-bit integer."""
    return max((lo if lo >= 0 else ~lo).bit_length(), (hi if hi >= 0 else ~hi).bit_length())


def field_range(fi) -> tuple[int, int]:
    if fi.name == "$valid$":
        return 0, 1
    if fi.signed:
        h = 1 << (fi.width - 1)
        return -h, h - 1
    return 0, (1 << fi.width) - 1


class Ctx:
    """What expressions of one function refer to: the function, the program's layout, the
    register storage and, inside a lane loop, where each lane's fields and registers are."""

    def __init__(self, fn: Fn, L: Layout, store, params: list[V] | None = None):
        self.fn = fn
        self.L = L
        self.st = store  # native.state.Storage: register offsets, context slots
        self.params = params or []
        self.lanes: dict[int, object] = {}  # id(JSON leaf) -> LaneRef (actions.py)
        self._ptrs: dict[int, str] = {}
        self._memo: dict[int, V] = {}
        self._keys: dict[int, tuple] = {}

    # -- context pointers ---------------------------------------------------------------

    def ptr(self, k: int) -> str:
        """The k-th pointer of the context array %C, loaded once per function."""
        p = self._ptrs.get(k)
        if p is None:
            f = self.fn
            slot = f.t("c")
            f.allocas.append(f"  {slot} = getelementptr inbounds i64, ptr %C, i64 {k}")
            raw = f.t("c")
            f.allocas.append(f"  {raw} = load i64, ptr {slot}")
            p = f.t("cp")
            f.allocas.append(f"  {p} = inttoptr i64 {raw} to ptr")
            self._ptrs[k] = p
        return p

    # -- statements -----------------------------------------------------------------------

    def start(self) -> None:
        """A new statement: values computed for the last one are stale."""
        self._memo = {}

    # -- leaves ---------------------------------------------------------------------------

    def field_slot(self, j: dict):
        """(slot as IR i64 or literal, FieldInfo, header) of a field node."""
        lane = self.lanes.get(id(j))
        if lane is not None:
            return lane.slot(self), lane.fi, lane.header
        h, fi, slot = self.L.field(j["value"][0], j["value"][1])
        return str(slot), fi, h

    def load_field(self, j: dict) -> V:
        slot, fi, _ = self.field_slot(j)
        return self.load_slot(slot, fi)

    def load_slot(self, slot: str, fi) -> V:
        raw = self.fn.load("%F", slot)
        lo, hi = field_range(fi)
        if hi > (1 << 63) - 1:  # a 64-bit unsigned field: its bits, read as unsigned
            return V(self.fn.op(f"zext i64 {raw} to i128"), 128, lo, hi)
        return V(raw, 64, lo, hi)

    def header_of(self, j: dict) -> HRef:
        lane = self.lanes.get(id(j))
        if lane is not None:
            return HRef(lane.slot(self), lane.htype, lane.header)
        h = self.L.header(j["value"])
        return HRef(str(h.base), h.htype, h)

    # -- entry points -------------------------------------------------------------------

    def data(self, j, low: bool = False) -> V:
        """j's value; with low, possibly only its low 64 bits (a V with .low)."""
        e = self.compile(j, low)
        if isinstance(e, V):
            return self.fn.as_data(e)
        raise Unsupported(f"expected a data expression, got {type(e).__name__}")

    def boolean(self, j) -> V:
        e = self.compile(j)
        if isinstance(e, V):
            return self.fn.as_bool(e)
        raise Unsupported(f"expected a boolean, got {type(e).__name__}")

    def compile(self, j, low: bool = False):
        if j is None:
            raise Unsupported("missing expression")
        if isinstance(j, bool):
            return cbool(j)
        if isinstance(j, int):
            return const(j)
        if not isinstance(j, dict):
            raise Unsupported(f"expression {j!r}")
        t, v = j.get("type"), j.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self._op_memo(v, low)
            return self.compile(v, low)
        if t == "field":
            return self.load_field(j)
        if t == "hexstr":
            return const(parse_hex(v))
        if t == "bool":
            return cbool(bool(v))
        if t in ("local", "runtime_data"):
            i = int(v)
            if i >= len(self.params):
                raise Unsupported(f"runtime data index {i} out of range")
            return self.params[i]
        if t == "header":
            return self.header_of(j)
        if t == "header_union":
            u = self.L.unions.get(v)
            if u is None:
                raise Unsupported(f"unknown header union {v!r}")
            return URef(u)
        if t == "register":
            name = v[0]
            return self.reg_read(name, self.data(v[1]))
        raise Unsupported(f"expression type {t!r}")

    # -- memo of repeated subexpressions ---------------------------------------------------

    def _key(self, n) -> tuple:
        """A structural key of a JSON subtree (p4c repeats a temporary's expression in
        each of its uses)."""
        if isinstance(n, dict):
            k = self._keys.get(id(n))
            if k is None:
                k = tuple((a, self._key(b)) for a, b in sorted(n.items())
                          if a != "source_info")
                if id(n) in self.lanes:  # a lane leaf differs per lane: never shared
                    k = ("lane", id(n))
                self._keys[id(n)] = k
            return k
        if isinstance(n, list):
            return ("[",) + tuple(self._key(x) for x in n)
        return ("=", repr(n))

    def _op_memo(self, v: dict, low: bool = False):
        k = (self._key(v), low)
        e = self._memo.get(k)
        if e is None:
            e = self.op(v, low)
            if isinstance(e, V):
                self._memo[k] = e
        return e

    # -- operators --------------------------------------------------------------------------

    def op(self, v: dict, low: bool = False):
        f = self.fn
        op = v.get("op")
        left, right = v.get("left"), v.get("right")
        if op == "?":
            c = self.boolean(v.get("cond"))
            a, b = self.compile(left, low), self.compile(right, low)
            if c.const is not None:
                return a if c.const else b
            if not isinstance(a, V) or not isinstance(b, V):
                raise Unsupported("?: over headers")
            if a.is_bool and b.is_bool:
                return V(f.op(f"select i1 {c.ref}, i1 {a.ref}, i1 {b.ref}"), 1, 0, 1)
            a, b = f.as_data(a), f.as_data(b)
            if a.low or b.low:
                r = f.op(f"select i1 {c.ref}, i64 {f.i64(a)}, i64 {f.i64(b)}")
                return V(r, 64, -(1 << 63), (1 << 63) - 1, low=True)
            lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
            w = need(lo, hi)
            r = f.op(f"select i1 {c.ref}, i{w} {f.ext(a, w)}, i{w} {f.ext(b, w)}")
            return V(r, w, lo, hi)
        if op in ("and", "or"):
            a, b = self.boolean(left), self.boolean(right)
            if a.const is not None and b.const is not None:
                return cbool((a.const and b.const) if op == "and" else (a.const or b.const))
            if a.const is not None:  # true and x = x, false or x = x, ...
                return b if bool(a.const) == (op == "and") else a
            if b.const is not None:
                return a if bool(b.const) == (op == "and") else b
            return V(f.op(f"{op} i1 {a.ref}, {b.ref}"), 1, 0, 1)
        if op == "not":
            b = self.boolean(right)
            if b.const is not None:
                return cbool(not b.const)
            return V(f.op(f"xor i1 {b.ref}, true"), 1, 0, 1)
        if op == "d2b":
            return f.as_bool(self.data(right))
        if op == "b2d":
            return f.as_data(self.boolean(right))
        if op in ("valid", "valid_union"):
            e = self.compile(right)
            if isinstance(e, HRef):
                return self.valid(e.base)
            if isinstance(e, URef):
                acc = None
                for h in e.union.headers:
                    x = self.valid(str(h.base))
                    acc = x if acc is None else V(f.op(f"or i1 {acc.ref}, {x.ref}"), 1, 0, 1)
                return acc if acc is not None else cbool(False)
            raise Unsupported(f"'{op}' needs a header or union")
        if op in ("==", "!="):
            a, b = self.compile(left), self.compile(right)
            if isinstance(a, HRef) and isinstance(b, HRef):
                return self.header_eq(a, b, op == "!=")
            if not isinstance(a, V) or not isinstance(b, V):
                raise Unsupported(f"cannot compare {type(a).__name__} values")
            if a.is_bool != b.is_bool:
                a, b = f.as_data(a), f.as_data(b)
            return self.compare("eq" if op == "==" else "ne", a, b)
        if op in (">", "<", ">=", "<="):
            a, b = self.data(left), self.data(right)
            return self.compare({">": "sgt", "<": "slt", ">=": "sge", "<=": "sle"}[op], a, b)
        if op == "access_field":
            h = self.compile(left)
            if not isinstance(h, HRef):
                raise Unsupported("access_field needs a header")
            off = int(right)
            ht = h.htype
            if off == len(ht.fields):
                return self._valid_data(h.base)
            if not 0 <= off < len(ht.fields):
                raise Unsupported(f"access_field offset {off}")
            return self.load_slot(self.add_slot(h.base, 1 + off), ht.fields[off])
        if op == "access_union_header":
            u = self.compile(left)
            if not isinstance(u, URef):
                raise Unsupported("access_union_header needs a header union")
            hh = u.union.headers[int(right)]
            return HRef(str(hh.base), hh.htype, hh)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            w = self.data(right)
            if w.const is None:
                raise Unsupported(f"{op} to a width known only at run time")
            a = self.data(left, op == "two_comp_mod" and 0 < w.const <= 64)
            return self.cast(op, a, int(w.const))
        if op == "~":
            b = self.data(right, low)
            if b.const is not None:
                return const(~b.const)
            if b.low:
                return V(f.op(f"xor i64 {b.ref}, -1"), 64, -(1 << 63), (1 << 63) - 1, low=True)
            w = need(-b.hi - 1, -b.lo - 1)
            return V(f.op(f"xor i{w} {f.ext(b, w)}, -1"), w, -b.hi - 1, -b.lo - 1)
        if op in ("+", "-") and left is None:
            b = self.data(right, low)
            if op == "+":
                return b
            if b.const is not None:
                return const(-b.const)
            if b.low:
                return V(f.op(f"sub i64 0, {b.ref}"), 64, -(1 << 63), (1 << 63) - 1, low=True)
            w = need(-b.hi, -b.lo)
            return V(f.op(f"sub i{w} 0, {f.ext(b, w)}"), w, -b.hi, -b.lo)
        if op == "&":
            # a constant mask below 2^64 needs only the other side's low 64 bits
            for x, y in ((left, right), (right, left)):
                m = self._hexstr(y)
                if m is not None and 0 <= m <= U64:
                    return self.arith("&", self.data(x, True), const(m))
        if op in ("+", "-", "*", "&", "|", "^"):
            return self.arith(op, self.data(left, low), self.data(right, low), low)
        if op == "<<":
            return self.shl(self.data(left, low), self.data(right), low)
        if op in (">>", "%", "/"):
            return self.arith(op, self.data(left), self.data(right))
        raise Unsupported(f"expression operator {op!r}")

    @staticmethod
    def _hexstr(j) -> int | None:
        while isinstance(j, dict) and j.get("type") == "expression":
            j = j.get("value")
        if isinstance(j, dict) and j.get("type") == "hexstr":
            return parse_hex(j["value"])
        return None

    def _valid_data(self, base: str) -> V:
        return V(self.fn.load("%F", base), 64, 0, 1)

    def add_slot(self, base: str, k: int) -> str:
        if base.lstrip("-").isdigit():
            return str(int(base) + k)
        return self.fn.op(f"add i64 {base}, {k}")

    def valid(self, base: str) -> V:
        x = self.fn.load("%F", base)
        return V(self.fn.op(f"icmp eq i64 {x}, 1"), 1, 0, 1)

    def compare(self, cc: str, a: V, b: V) -> V:
        f = self.fn
        if a.low or b.low:
            raise Unsupported("a modular value compared")
        if a.const is not None and b.const is not None:
            r = {"eq": a.const == b.const, "ne": a.const != b.const, "sgt": a.const > b.const,
                 "slt": a.const < b.const, "sge": a.const >= b.const,
                 "sle": a.const <= b.const}[cc]
            return cbool(r)
        if a.is_bool:
            return V(f.op(f"icmp {cc} i1 {a.ref}, {b.ref}"), 1, 0, 1)
        w = max(need(a.lo, a.hi), need(b.lo, b.hi))
        return V(f.op(f"icmp {cc} i{w} {f.ext(a, w)}, {f.ext(b, w)}"), 1, 0, 1)

    def header_eq(self, a: HRef, b: HRef, negate: bool) -> V:
        """BMv2 Header::cmp: both valid and every field equal."""
        f = self.fn
        n = len(a.htype.fields)
        acc = V(f.op(f"and i1 {self.valid(a.base).ref}, {self.valid(b.base).ref}"), 1, 0, 1)
        for i in range(1, 1 + n):
            x = f.load("%F", self.add_slot(a.base, i))
            y = f.load("%F", self.add_slot(b.base, i))
            e = f.op(f"icmp eq i64 {x}, {y}")
            acc = V(f.op(f"and i1 {acc.ref}, {e}"), 1, 0, 1)
        if negate:
            acc = V(f.op(f"xor i1 {acc.ref}, true"), 1, 0, 1)
        return acc

    def cast(self, op: str, a: V, w: int) -> V:
        if w <= 0:
            raise Unsupported(f"{op} width {w}")
        m, h = (1 << w) - 1, 1 << (w - 1)
        if a.const is not None:
            if op == "two_comp_mod":
                return const(((a.const + h) & m) - h)
            if op == "usat_cast":
                return const(min(max(a.const, 0), m))
            return const(min(max(a.const, -h), h - 1))
        if op == "two_comp_mod":
            if -h <= a.lo and a.hi <= h - 1:
                return a
            return self.sext_low(a, w)
        lo, hi = (0, m) if op == "usat_cast" else (-h, h - 1)
        return self.clamp(a, lo, hi)

    def clamp(self, a: V, lo: int, hi: int) -> V:
        f = self.fn
        if a.low:
            raise Unsupported("a modular value saturated")
        if lo <= a.lo and a.hi <= hi:
            return a
        w = max(need(a.lo, a.hi), need(lo, hi))
        x = f.ext(a, w)
        c1 = f.op(f"icmp slt i{w} {x}, {lo}")
        x = f.op(f"select i1 {c1}, i{w} {lo}, i{w} {x}")
        c2 = f.op(f"icmp sgt i{w} {x}, {hi}")
        x = f.op(f"select i1 {c2}, i{w} {hi}, i{w} {x}")
        return V(x, w, max(lo, min(a.lo, hi)), min(hi, max(a.hi, lo)))

    def low_bits(self, a: V, w: int) -> V:
        """a mod 2^w, w <= 64, as an unsigned value."""
        f = self.fn
        m = (1 << w) - 1
        if 0 <= a.lo and a.hi <= m:
            return a
        x = f.i64(a)
        if w < 64:
            x = f.op(f"and i64 {x}, {m}")
            return V(x, 64, 0, m)
        return V(f.op(f"zext i64 {x} to i128"), 128, 0, m)

    def sext_low(self, a: V, w: int) -> V:
        """The low w bits of a (w <= 64) read as a signed w-bit value."""
        f = self.fn
        x = f.i64(a)
        if w < 64:
            x = f.op(f"shl i64 {x}, {64 - w}")
            x = f.op(f"ashr i64 {x}, {64 - w}")
        h = 1 << (w - 1)
        return V(x, 64, -h, h - 1)

    def arith(self, op: str, a: V, b: V, low: bool = False) -> V:
        f = self.fn
        if a.const is not None and b.const is not None:
            return const(ExprCompiler._fold(op, a.const, b.const))
        if op in ("+", "-", "*", "&", "|", "^"):
            if a.low or b.low:
                return self.modular(op, a, b)
            if low:
                try:
                    return self.arith(op, a, b)
                except Unsupported:
                    return self.modular(op, a, b)
            if op == "+":
                lo, hi = a.lo + b.lo, a.hi + b.hi
            elif op == "-":
                lo, hi = a.lo - b.hi, a.hi - b.lo
            elif op == "*":
                ps = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
                lo, hi = min(ps), max(ps)
            elif op == "&":
                if a.lo >= 0 and b.lo >= 0:
                    lo, hi = 0, min(a.hi, b.hi)
                elif a.lo >= 0:
                    lo, hi = 0, a.hi
                elif b.lo >= 0:
                    lo, hi = 0, b.hi
                else:
                    n = max(_sbits(a.lo, a.hi), _sbits(b.lo, b.hi))
                    lo, hi = -(1 << n), (1 << n) - 1
            else:
                if a.lo >= 0 and b.lo >= 0:
                    lo, hi = 0, (1 << max(a.hi.bit_length(), b.hi.bit_length())) - 1
                else:
                    n = max(_sbits(a.lo, a.hi), _sbits(b.lo, b.hi))
                    lo, hi = -(1 << n), (1 << n) - 1
            w = max(need(lo, hi), need(a.lo, a.hi), need(b.lo, b.hi))
            ins = {"+": "add", "-": "sub", "*": "mul", "&": "and", "|": "or", "^": "xor"}[op]
            return V(f.op(f"{ins} i{w} {f.ext(a, w)}, {f.ext(b, w)}"), w, lo, hi)
        if op == "<<":
            return self.shl(a, b, low)
        if a.low or b.low:
            raise Unsupported("a modular value where its high bits matter")
        if op == ">>":
            return self.shr(a, b)
        return self.divmod(op, a, b)

    def modular(self, op: str, a: V, b: V) -> V:
        """a op b modulo 2^64 (exact, with its range, for a mask by a constant >= 0)."""
        f = self.fn
        ins = {"+": "add", "-": "sub", "*": "mul", "&": "and", "|": "or", "^": "xor"}[op]
        r = f.op(f"{ins} i64 {f.i64(a)}, {f.i64(b)}")
        for m in (a, b):
            if op == "&" and not m.low and m.lo >= 0 and m.hi <= (1 << 63) - 1:
                return V(r, 64, 0, m.hi)
        return V(r, 64, -(1 << 63), (1 << 63) - 1, low=True)

    def shl(self, a: V, b: V, low: bool = False) -> V:
        if b.low:
            raise Unsupported("a modular shift amount")
        if a.low:
            return self.shl_modular(a, b)
        if low:
            try:
                return self.shl(a, b)
            except Unsupported:
                return self.shl_modular(a, b)
        return self.shl_exact(a, b)

    def shl_modular(self, a: V, b: V) -> V:
        """(a << b) modulo 2^64 (a negative amount leaves a, as runtime._shl)."""
        f = self.fn
        x = f.i64(a)
        bw = max(need(b.lo, b.hi), 64)
        amt = f.ext(b, bw)
        neg = f.op(f"icmp slt i{bw} {amt}, 0")
        big = f.op(f"icmp sgt i{bw} {amt}, 63")
        safe = f.op(f"select i1 {big}, i{bw} 0, i{bw} {amt}")
        safe = f.op(f"select i1 {neg}, i{bw} 0, i{bw} {safe}")
        s64 = safe if bw == 64 else f.op(f"trunc i{bw} {safe} to i64")
        r = f.op(f"shl i64 {x}, {s64}")
        r = f.op(f"select i1 {big}, i64 0, i64 {r}")
        r = f.op(f"select i1 {neg}, i64 {x}, i64 {r}")
        return V(r, 64, -(1 << 63), (1 << 63) - 1, low=True)

    def shl_exact(self, a: V, b: V) -> V:
        f = self.fn
        if b.const is not None:
            c = b.const
            if c < 0:
                return a  # BMv2 asserts; the value stays
            if a.lo == a.hi == 0:
                return const(0)
            if c > 1024:
                raise Unsupported("a left shift by more than 1024 bits")
            lo, hi = min(a.lo << c, a.lo), max(a.hi << c, a.hi)
            w = max(need(lo, hi), need(a.lo, a.hi))
            return V(f.op(f"shl i{w} {f.ext(a, w)}, {c}"), w, lo, hi)
        # a variable amount: below 0 the value stays, above 2^16 it becomes 0 (runtime._shl)
        bhi = b.hi
        if a.lo == a.hi == 0:
            return const(0)
        if bhi > 1024:
            raise Unsupported("a left shift by an amount of unknown range")
        lo = min(a.lo, a.lo << bhi, 0)
        hi = max(a.hi, a.hi << bhi, 0)
        w = max(need(lo, hi), need(a.lo, a.hi))
        x = f.ext(a, w)
        bw = max(need(b.lo, b.hi), 64)
        amt = f.ext(b, bw)
        neg = f.op(f"icmp slt i{bw} {amt}, 0")
        safe = f.op(f"select i1 {neg}, i{bw} 0, i{bw} {amt}")
        sw = safe if bw == w else f.op(f"{'trunc' if bw > w else 'zext'} i{bw} {safe} to i{w}")
        r = f.op(f"shl i{w} {x}, {sw}")
        r = f.op(f"select i1 {neg}, i{w} {x}, i{w} {r}")
        return V(r, w, lo, hi)

    def shr(self, a: V, b: V) -> V:
        f = self.fn
        if b.const is not None:
            c = b.const
            if c < 0:
                return a
            w = need(a.lo, a.hi)
            if c >= w:
                c = w - 1
            return V(f.op(f"ashr i{w} {f.ext(a, w)}, {c}"), w, a.lo >> b.const, a.hi >> b.const)
        w = need(a.lo, a.hi)
        x = f.ext(a, w)
        bw = max(need(b.lo, b.hi), 64)
        amt = f.ext(b, bw)
        neg = f.op(f"icmp slt i{bw} {amt}, 0")
        big = f.op(f"icmp sgt i{bw} {amt}, {w - 1}")
        amt = f.op(f"select i1 {big}, i{bw} {w - 1}, i{bw} {amt}")
        amt = f.op(f"select i1 {neg}, i{bw} 0, i{bw} {amt}")
        sw = amt if bw == w else f.op(f"{'trunc' if bw > w else 'zext'} i{bw} {amt} to i{w}")
        r = f.op(f"ashr i{w} {x}, {sw}")
        return V(r, w, min(a.lo, 0), max(a.hi, 0))

    def divmod(self, op: str, a: V, b: V) -> V:
        """Python's floor division and modulo; a divisor <= 0 gives 0 (runtime._div).
        Operands that fit unsigned 64 bits divide as i64: at 128 bits LLVM calls the
        compiler's runtime (__udivti3 ..., engine.py resolves them from libgcc)."""
        f = self.fn
        if b.const is not None and b.const <= 0:
            return const(0)
        if op == "%":
            lo, hi = 0, max(b.hi - 1, 0)
            if a.lo >= 0 and a.hi < b.lo:
                return a
        else:
            lo, hi = min(a.lo, 0), max(a.hi, 0)
            if b.const is not None:
                lo, hi = a.lo // b.const, a.hi // b.const
        if a.lo >= 0 and a.hi <= U64 and b.hi <= U64:
            return self._udivmod64(op, a, b, lo, hi)
        w = max(need(a.lo, a.hi), need(b.lo, b.hi), need(lo, hi))
        x, y = f.ext(a, w), f.ext(b, w)
        pos = None
        if b.const is None:
            pos = f.op(f"icmp sgt i{w} {y}, 0")
            y = f.op(f"select i1 {pos}, i{w} {y}, i{w} 1")
        if a.lo >= 0:
            r = f.op(f"{'udiv' if op == '/' else 'urem'} i{w} {x}, {y}")
        else:  # floor: truncation moves toward zero, a negative remainder moves it back
            q = f.op(f"sdiv i{w} {x}, {y}")
            rem = f.op(f"srem i{w} {x}, {y}")
            negr = f.op(f"icmp slt i{w} {rem}, 0")
            if op == "/":
                q1 = f.op(f"sub i{w} {q}, 1")
                r = f.op(f"select i1 {negr}, i{w} {q1}, i{w} {q}")
            else:
                r1 = f.op(f"add i{w} {rem}, {y}")
                r = f.op(f"select i1 {negr}, i{w} {r1}, i{w} {rem}")
        if pos is not None:
            r = f.op(f"select i1 {pos}, i{w} {r}, i{w} 0")
        return V(r, w, lo, hi)

    def _udivmod64(self, op: str, a: V, b: V, lo: int, hi: int) -> V:
        """divmod of a in [0, 2^64) by b < 2^64 as i64 unsigned (b <= 0 gives 0)."""
        f = self.fn
        x = f.i64(a)
        pos = None
        if b.const is not None:
            y = f.i64(b)
        elif b.lo > 0:
            y = f.i64(b)
        else:  # b's sign matters: test it at its own width
            wb = need(b.lo, b.hi)
            pos = f.op(f"icmp sgt i{wb} {f.ext(b, wb)}, 0")
            y = f.op(f"select i1 {pos}, i64 {f.i64(b)}, i64 1")
        r = f.op(f"{'udiv' if op == '/' else 'urem'} i64 {x}, {y}")
        if pos is not None:
            r = f.op(f"select i1 {pos}, i64 {r}, i64 0")
        wr = need(lo, hi)
        if wr > 64:  # a quotient of 2^63 or more: its i64 bits, unsigned
            r = f.op(f"zext i64 {r} to i{wr}")
        return V(r, wr, lo, hi)

    # -- registers ------------------------------------------------------------------------

    def reg_cell(self, off: str, stride: int, reg, idx: V) -> tuple[str | None, str | None]:
        """(address of cell idx of a register array whose cells are at off + i * stride,
        the in-range condition or None when the index is always in range); (None, _) for
        an empty array. Out of range, the address is cell 0's (read, never written)."""
        f = self.fn
        R = self.ptr(self.st.REGS)
        size = reg.size
        if size == 0:
            return None, "false"
        if 0 <= idx.lo and idx.hi < size:
            i = f.i64(idx)
            cond = None
        else:
            w = max(need(idx.lo, idx.hi), 64)
            x = f.ext(idx, w)
            ok1 = f.op(f"icmp sge i{w} {x}, 0")
            ok2 = f.op(f"icmp slt i{w} {x}, {size}")
            cond = f.op(f"and i1 {ok1}, {ok2}")
            i = f.op(f"select i1 {cond}, i64 {f.i64(idx)}, i64 0")
        if stride != 1:
            i = str(int(i) * stride) if i.lstrip("-").isdigit() else \
                f.op(f"mul i64 {i}, {stride}")
        if off.lstrip("-").isdigit() and i.lstrip("-").isdigit():
            cell = str(int(off) + int(i))
        else:
            cell = f.op(f"add i64 {off}, {i}")
        return f.gep(R, cell), cond

    def reg_read(self, name: str, idx: V) -> V:
        f = self.fn
        reg = self.st.register(name)
        off, stride = self.st.reg_offset(name)
        p, cond = self.reg_cell(str(off), stride, reg, idx)
        if p is None:
            return const(0)
        x = f.op(f"load i64, ptr {p}")
        hi = (1 << reg.bitwidth) - 1
        w = 64
        if reg.bitwidth >= 64:
            x = f.op(f"zext i64 {x} to i128")
            w = 128
        if cond is not None:
            x = f.op(f"select i1 {cond}, i{w} {x}, i{w} 0")
        return V(x, w, 0, hi)

    # -- stores ---------------------------------------------------------------------------

    def store_value(self, fi, e: V) -> str:
        """The i64 a field holds after BMv2's Field::set of e (truncation or saturation)."""
        w = fi.width
        m = (1 << w) - 1
        if fi.saturating:
            h = 1 << (w - 1)
            lo, hi = (-h, h - 1) if fi.signed else (0, m)
            return self.fn.i64(self.clamp(e, lo, hi))
        if e.const is not None:
            c = int(e.const)
            v = (((c + (1 << (w - 1))) & m) - (1 << (w - 1))) if fi.signed else c & m
            return self.fn.i64(const(v))
        if fi.signed:
            h = 1 << (w - 1)
            if -h <= e.lo and e.hi <= h - 1:
                return self.fn.i64(e)
            return self.sext_low(e, w).ref
        return self.fn.i64(self.low_bits(e, w))


assert WIDTHS[0] == 64  # i64 is the storage type of every field and register cell
