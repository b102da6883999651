"""BMv2 JSON expressions -> Python expression source.

Data values are Python ints with BMv2's infinite-precision semantics;
truncation to a width happens only when a value is stored into a field
(see `store`). Each compiled expression carries what is known about its
range (`bits`: the value is in [0, 2**bits)) so stores and shifts can skip
masks and guards that cannot matter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .layout import Header, HeaderType, Layout, Stack, bad
from .module import Module

# A non-constant shift amount below 2**12 is safe to hand to Python directly.
SAFE_SHIFT_BITS = 12
# Statements whose expression trees have more operator nodes than this are
# compiled as DAGs: p4c sometimes substitutes a temporary into each of its
# uses, so the tree of one assignment doubles with every step it inlines.
CSE_MIN_NODES = 256
INLINE_MAX = 2000  # longer subexpression code goes to a temporary (bounds nesting)


@dataclass
class Ex:
    code: str
    kind: str  # "data", "bool", "header", "stack", "union"
    const: int | bool | None = None
    bits: int | None = None  # data: value known to be in [0, 2**bits)
    sbits: int | None = None  # data: value known to fit a signed sbits-wide field
    header: Header | None = None  # header kind, static
    htype: HeaderType | None = None  # header kind
    stack: Stack | None = None
    union: object | None = None


def cdata(v: int) -> Ex:
    v = int(v)
    return Ex(str(v) if -(1 << 62) < v < (1 << 62) else hex(v), "data", v,
              v.bit_length() if v >= 0 else None)


def parse_hex(s) -> int:
    if isinstance(s, int):
        return s
    s = str(s).strip()
    try:
        return int(s, 16) if s.lower().lstrip("-").startswith("0x") else int(s, 0)
    except ValueError:
        raise bad(f"bad hexstr {s!r}") from None


class ExprCompiler:
    """Compiles expressions for one context (an action, a parser state, ...)."""

    def __init__(self, layout: Layout, mod: Module, locals_widths: list[int] | None = None,
                 registers=None):
        self.L = layout
        self.mod = mod
        self.locals_widths = locals_widths or []
        self.registers = registers or {}  # name -> Register (runtime object)
        self.pre: list[str] = []  # temporaries the current statement needs first
        self._cse = False
        self._tmp = 0

    # -- common subexpressions of one statement -------------------------------------

    def start(self, *roots) -> None:
        """Begins a statement over the JSON `roots`; call `take_pre()` after compiling it."""
        self.pre = []
        self._memo: dict[int, Ex] = {}
        self._sid: dict[int, int] = {}  # id(op dict) -> structural id
        self._count: dict[int, int] = {}  # references to each structural id
        intern: dict[tuple, int] = {}
        by_obj: dict[int, tuple[int, int]] = {}  # id -> (structural id, tree size)

        def sid(n) -> tuple[int, int]:
            if isinstance(n, dict):
                k = id(n)
                hit = by_obj.get(k)
                if hit is None:
                    if "op" in n:
                        parts = [sid(n.get(c)) for c in ("left", "right", "cond")]
                        key = ("op", n.get("op")) + tuple(p[0] for p in parts)
                        size = 1 + sum(p[1] for p in parts)
                    elif n.get("type") == "expression":
                        inner = sid(n.get("value"))
                        key, size = ("x", inner[0]), inner[1]
                    else:
                        key, size = ("leaf", n.get("type"), repr(n.get("value"))), 0
                    hit = (intern.setdefault(key, len(intern)), size)
                    by_obj[k] = hit
                    if "op" in n:
                        self._sid[k] = hit[0]
                if "op" in n:  # every reference counts, shared objects included
                    self._count[hit[0]] = self._count.get(hit[0], 0) + 1
                return hit
            if isinstance(n, list):
                parts = [sid(x) for x in n]
                key = ("list",) + tuple(p[0] for p in parts)
                return intern.setdefault(key, len(intern)), sum(p[1] for p in parts)
            return intern.setdefault(("atom", repr(n)), len(intern)), 0

        nodes = sum(sid(r)[1] for r in roots)
        self._cse = nodes > CSE_MIN_NODES

    def take_pre(self) -> list[str]:
        out, self.pre = self.pre, []
        self._cse = False
        return out

    def _op_cse(self, v: dict) -> Ex:
        s = self._sid.get(id(v))
        if s is None:
            return self.op(v)
        e = self._memo.get(s)
        if e is None:
            e = self.op(v)
            simple = e.const is not None or e.code.isidentifier() or \
                (e.code.startswith("F[") and e.code.count("[") == 1)
            if e.kind in ("data", "bool") and not simple and \
                    (self._count.get(s, 0) > 1 or len(e.code) > INLINE_MAX):
                self._tmp += 1
                name = f"x{self._tmp}"
                self.pre.append(f"{name} = {e.code}")
                e = replace(e, code=name)
            self._memo[s] = e
        return e

    # -- header bases for stacks ------------------------------------------------

    def stack_bases(self, st: Stack) -> str:
        """Global tuple of the stack's header bases plus a scratch base at the end."""
        scratch = self.scratch(st.htype)
        return self.mod.const(tuple(h.base for h in st.headers) + (scratch,), "hb")

    def scratch(self, ht: HeaderType) -> int:
        """Slots for out-of-range stack accesses: harmless reads and writes."""
        sc = self.mod.globals.setdefault("__scratch__", {})
        if ht.name not in sc:
            sc[ht.name] = self.L.nslots
            self.L.nslots += 1 + len(ht.fields)
        return sc[ht.name]

    def index(self, st: Stack, idx: Ex) -> str:
        """Expression for the base of st[idx], clamped into the scratch header."""
        hb = self.stack_bases(st)
        n = st.size
        if idx.bits is not None and (1 << idx.bits) <= n:
            return f"{hb}[{idx.code}]"
        return f"{hb}[min({idx.code}, {n})]"

    # -- entry points -----------------------------------------------------------

    def data(self, j) -> Ex:
        e = self.compile(j)
        if e.kind == "bool":  # tolerated: BMv2 would reject, but be lenient
            return self._as_data(e)
        if e.kind != "data":
            raise bad(f"expected a data expression, got {e.kind}")
        return e

    def boolean(self, j) -> Ex:
        e = self.compile(j)
        if e.kind == "data":
            return Ex(f"({e.code} != 0)", "bool", None if e.const is None else e.const != 0)
        if e.kind != "bool":
            raise bad(f"expected a boolean expression, got {e.kind}")
        return e

    def compile(self, j) -> Ex:
        if j is None:
            raise bad("missing expression")
        if isinstance(j, bool):
            return Ex(str(j), "bool", j)
        if isinstance(j, int):
            return cdata(j)
        if not isinstance(j, dict):
            raise bad(f"bad expression {j!r}")
        t = j.get("type")
        v = j.get("value")
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self._op_cse(v) if self._cse else self.op(v)
            return self.compile(v)
        if t == "field":
            return self.field(v[0], v[1])
        if t == "hexstr":
            return cdata(parse_hex(v))
        if t == "bool":
            return Ex(str(bool(v)), "bool", bool(v))
        if t == "local" or t == "runtime_data":
            i = int(v)
            if i >= len(self.locals_widths):
                raise bad(f"runtime data index {i} out of range")
            return Ex(f"p{i}", "data", None, self.locals_widths[i])
        if t == "header":
            h = self.L.header(v)
            return Ex(str(h.base), "header", header=h, htype=h.htype)
        if t == "header_stack":
            st = self.L.stack(v)
            return Ex(repr(st.name), "stack", stack=st)
        if t == "stack_field":
            st = self.L.stack(v[0])
            off = self.field_offset(st.htype, v[1])
            fi = st.htype.fields[off] if off < len(st.htype.fields) else None
            base = f"{self.stack_bases(st)}[F[{st.next_slot}] - 1]"
            return self.load(f"F[{base} + {1 + off}]" if fi else f"F[{base}]", fi)
        if t == "header_union":
            u = self.L.unions.get(v)
            if u is None:
                raise bad(f"unknown header union {v!r}")
            return Ex(repr(u.name), "union", union=u)
        if t == "register":
            reg = self.registers.get(v[0])
            if reg is None:
                raise bad(f"unknown register array {v[0]!r}")
            idx = self.data(v[1])
            r = self.mod.bind(reg.values, "R")
            cell = f"{r}[{idx.code}]"
            if not isinstance(reg.values, list):  # a column of a vector bank
                cell = f"int({cell})"
            return Ex(f"({cell} if {idx.code} < {reg.size} else 0)", "data", None,
                      reg.bitwidth)
        if t == "string":
            raise bad("a string is not an expression")
        raise bad(f"unsupported expression type {t!r}")

    def field_offset(self, ht: HeaderType, name: str) -> int:
        if name == "$valid$":
            return -1
        try:
            return ht.offsets[name]
        except KeyError:
            raise bad(f"header type {ht.name!r} has no field {name!r}") from None

    def field(self, hname: str, fname: str) -> Ex:
        h, fi, slot = self.L.field(hname, fname)
        return self.load(f"F[{slot}]", fi)

    @staticmethod
    def load(code: str, fi) -> Ex:
        if fi is None or fi.name == "$valid$":
            return Ex(code, "data", None, 1)
        if fi.signed:
            return Ex(code, "data", None, None, fi.width)
        return Ex(code, "data", None, fi.width)

    # -- operators --------------------------------------------------------------

    def op(self, v: dict) -> Ex:
        op = v.get("op")
        left, right = v.get("left"), v.get("right")
        if op == "?":
            c = self.boolean(v.get("cond"))
            a, b = self.compile(left), self.compile(right)
            if c.const is not None:
                return a if c.const else b
            kind = a.kind
            bits = None if a.bits is None or b.bits is None else max(a.bits, b.bits)
            return Ex(f"({a.code} if {c.code} else {b.code})", kind, None, bits,
                      header=a.header if a.header is b.header else None, htype=a.htype)
        if op in ("and", "or"):
            a, b = self.boolean(left), self.boolean(right)
            if a.const is not None and b.const is not None:
                r = (a.const and b.const) if op == "and" else (a.const or b.const)
                return Ex(str(bool(r)), "bool", bool(r))
            return Ex(f"({a.code} {op} {b.code})", "bool")
        if op == "not":
            b = self.boolean(right)
            if b.const is not None:
                return Ex(str(not b.const), "bool", not b.const)
            return Ex(f"(not {b.code})", "bool")
        if op == "d2b":
            b = self.data(right)
            if b.const is not None:
                return Ex(str(b.const != 0), "bool", b.const != 0)
            return Ex(f"({b.code} != 0)", "bool")
        if op == "b2d":
            b = self.boolean(right)
            if b.const is not None:
                return cdata(int(bool(b.const)))
            return Ex(f"(1 if {b.code} else 0)", "data", None, 1)
        if op in ("valid", "valid_union"):
            e = self.compile(right)
            if e.kind == "header":
                return Ex(f"(F[{e.code}] == 1)", "bool")
            if e.kind == "union":
                return Ex("(" + " or ".join(f"F[{h.base}] == 1" for h in e.union.headers) + ")",
                          "bool")
            raise bad(f"'{op}' needs a header or union")
        if op in ("==", "!="):
            a, b = self.compile(left), self.compile(right)
            if a.kind == "header" and b.kind == "header":
                return self.header_eq(a, b, op == "!=")
            if a.kind != b.kind and {a.kind, b.kind} <= {"data", "bool"}:
                a, b = self._as_data(a), self._as_data(b)
            if a.kind not in ("data", "bool"):
                raise bad(f"cannot compare {a.kind} values")
            if a.const is not None and b.const is not None:
                r = (a.const == b.const) if op == "==" else (a.const != b.const)
                return Ex(str(r), "bool", r)
            return Ex(f"({a.code} {op} {b.code})", "bool")
        if op in (">", "<", ">=", "<="):
            a, b = self.data(left), self.data(right)
            if a.const is not None and b.const is not None:
                r = eval(f"{a.const} {op} {b.const}")  # noqa: S307 - two ints
                return Ex(str(r), "bool", r)
            return Ex(f"({a.code} {op} {b.code})", "bool")
        if op == "dereference_header_stack" or op == "dereference_stack":
            s = self.compile(left)
            if s.kind != "stack":
                raise bad("dereference_header_stack needs a header stack")
            idx = self.data(right)
            st = s.stack
            if idx.const is not None and 0 <= idx.const < st.size:
                h = st.headers[idx.const]
                return Ex(str(h.base), "header", header=h, htype=h.htype)
            return Ex(self.index(st, idx), "header", htype=st.htype)
        if op == "last_stack_index":
            s = self.compile(right)
            return Ex(f"(F[{s.stack.next_slot}] - 1)", "data")
        if op == "size_stack":
            s = self.compile(right)
            return Ex(f"F[{s.stack.next_slot}]", "data", None, s.stack.size.bit_length())
        if op == "access_field":
            h = self.compile(left)
            if h.kind != "header":
                raise bad("access_field needs a header")
            off = int(right)
            ht = h.htype
            if off == len(ht.fields):  # the hidden $valid$ field
                return Ex(f"F[{h.code}]", "data", None, 1)
            if not 0 <= off < len(ht.fields):
                raise bad(f"access_field offset {off} out of range for {ht.name!r}")
            if h.header is not None:
                return self.load(f"F[{h.header.base + 1 + off}]", ht.fields[off])
            return self.load(f"F[{h.code} + {1 + off}]", ht.fields[off])
        if op == "access_union_header":
            u = self.compile(left)
            if u.kind != "union" or u.union is None:
                raise bad("access_union_header needs a header union")
            hh = u.union.headers[int(right)]
            return Ex(str(hh.base), "header", header=hh, htype=hh.htype)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            a, w = self.data(left), self.data(right)
            if w.const is None:
                fn = {"two_comp_mod": "_tcm", "sat_cast": "_satc", "usat_cast": "_usatc"}[op]
                return Ex(f"{fn}({a.code}, {w.code})", "data")
            return self.cast(op, a, int(w.const))
        if op == "~":
            b = self.data(right)
            if b.const is not None:
                return cdata(~b.const)
            return Ex(f"(~{b.code})", "data")
        if op in ("+", "-") and left is None:
            b = self.data(right)
            if op == "+":
                return b
            if b.const is not None:
                return cdata(-b.const)
            return Ex(f"(-{b.code})", "data")
        if op in ("+", "-", "*", "&", "|", "^", "<<", ">>", "%", "/"):
            return self.arith(op, self.data(left), self.data(right))
        raise bad(f"unsupported expression operator {op!r}")

    @staticmethod
    def _as_data(e: Ex) -> Ex:
        if e.kind == "bool":
            c = None if e.const is None else int(e.const)
            return Ex(f"(1 if {e.code} else 0)", "data", c, 1)
        return e

    def header_eq(self, a: Ex, b: Ex, negate: bool) -> Ex:
        n = len(a.htype.fields)
        code = f"_hdr_eq(F, {a.code}, {b.code}, {n})"
        return Ex(f"(not {code})" if negate else code, "bool")

    def cast(self, op: str, a: Ex, w: int) -> Ex:
        if w <= 0:
            raise bad(f"{op} width {w}")
        m = (1 << w) - 1
        h = 1 << (w - 1)
        if op == "two_comp_mod":
            if a.const is not None:
                return cdata(((a.const + h) & m) - h)
            if a.sbits is not None and a.sbits <= w:
                return a
            if a.bits is not None and a.bits < w:
                return a
            return Ex(f"(((({a.code}) + {h}) & {m}) - {h})", "data", None, None, w)
        if op == "usat_cast":
            if a.const is not None:
                return cdata(min(max(a.const, 0), m))
            return Ex(f"min(max({a.code}, 0), {m})", "data", None, w)
        if a.const is not None:
            return cdata(min(max(a.const, -h), h - 1))
        return Ex(f"min(max({a.code}, {-h}), {h - 1})", "data", None, None, w)

    def arith(self, op: str, a: Ex, b: Ex) -> Ex:
        ca, cb = a.const, b.const
        if ca is not None and cb is not None:
            return cdata(self._fold(op, int(ca), int(cb)))
        bits = None
        if op == "&":
            if cb is not None and cb >= 0:
                if cb == 0:
                    return cdata(0)
                if a.bits is not None and cb & ((1 << a.bits) - 1) == (1 << a.bits) - 1:
                    return a  # the mask keeps every bit the value can have
                bits = cb.bit_length()
            elif ca is not None and ca >= 0:
                bits = ca.bit_length()
            if a.bits is not None and b.bits is not None:
                bits = min(a.bits, b.bits) if bits is None else min(bits, a.bits, b.bits)
            elif a.bits is not None:
                bits = a.bits if bits is None else min(bits, a.bits)
            elif b.bits is not None:
                bits = b.bits if bits is None else min(bits, b.bits)
            return Ex(f"({a.code} & {b.code})", "data", None, bits)
        if op in ("|", "^"):
            if cb == 0:
                return a
            if ca == 0:
                return b
            if a.bits is not None and b.bits is not None:
                bits = max(a.bits, b.bits)
            return Ex(f"({a.code} {op} {b.code})", "data", None, bits)
        if op == "+":
            if cb == 0:
                return a
            if ca == 0:
                return b
            if a.bits is not None and b.bits is not None:
                bits = max(a.bits, b.bits) + 1
            return Ex(f"({a.code} + {b.code})", "data", None, bits)
        if op == "-":
            if cb == 0:
                return a
            return Ex(f"({a.code} - {b.code})", "data")
        if op == "*":
            if a.bits is not None and b.bits is not None:
                bits = a.bits + b.bits
            return Ex(f"({a.code} * {b.code})", "data", None, bits)
        if op == "<<":
            if cb is not None:
                if cb < 0:
                    return a  # BMv2 asserts; leave the value unchanged
                if a.bits is not None:
                    bits = a.bits + cb
                return Ex(f"({a.code} << {cb})", "data", None, bits)
            if b.bits is not None and b.bits <= SAFE_SHIFT_BITS:
                return Ex(f"({a.code} << {b.code})", "data")
            return Ex(f"_shl({a.code}, {b.code})", "data")
        if op == ">>":
            if cb is not None:
                if cb < 0:
                    return a
                if a.bits is not None:
                    bits = max(a.bits - cb, 0)
                return Ex(f"({a.code} >> {cb})", "data", None, bits)
            if b.bits is not None:
                return Ex(f"({a.code} >> {b.code})", "data", None, a.bits)
            return Ex(f"_shr({a.code}, {b.code})", "data", None, a.bits)
        if op in ("%", "/"):
            py = "%" if op == "%" else "//"
            if cb is not None and cb > 0:
                if op == "%":
                    bits = (cb - 1).bit_length()
                else:
                    bits = a.bits
                return Ex(f"({a.code} {py} {cb})", "data", None, bits)
            fn = "_mod" if op == "%" else "_div"
            return Ex(f"{fn}({a.code}, {b.code})", "data", None, a.bits)
        raise bad(f"unsupported operator {op!r}")

    @staticmethod
    def _fold(op: str, a: int, b: int) -> int:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "<<":
            return a << b if 0 <= b < 4096 else a
        if op == ">>":
            return a >> b if b >= 0 else a
        if op == "%":
            return a % b if b > 0 else 0
        if op == "/":
            return a // b if b > 0 else 0
        raise bad(f"unsupported operator {op!r}")

    # -- lvalues and stores -----------------------------------------------------

    def lvalue(self, j) -> tuple[str, object]:
        """(target code like F[12], FieldInfo) for a field, stack field or access_field."""
        t = j.get("type")
        v = j.get("value")
        if t == "field":
            h, fi, slot = self.L.field(v[0], v[1])
            return f"F[{slot}]", fi
        if t == "stack_field":
            st = self.L.stack(v[0])
            off = self.field_offset(st.htype, v[1])
            base = f"{self.stack_bases(st)}[F[{st.next_slot}] - 1]"
            return f"F[{base} + {1 + off}]", st.htype.fields[off]
        if t == "expression":
            inner = v if "op" in v else v.get("value")
            if inner.get("op") != "access_field":
                raise bad("assignment target must be a field")
            h = self.compile(inner["left"])
            if h.kind != "header":
                raise bad("access_field needs a header")
            off = int(inner["right"])
            ht = h.htype
            if not 0 <= off < len(ht.fields):
                raise bad("access_field offset out of range")
            if h.header is not None:
                return f"F[{h.header.base + 1 + off}]", ht.fields[off]
            return f"F[{h.code} + {1 + off}]", ht.fields[off]
        raise bad(f"unsupported assignment target type {t!r}")

    @staticmethod
    def store_value(fi, e: Ex) -> str:
        """Python expression for e truncated to the field's width (BMv2 Field::set)."""
        if fi.name == "$valid$":
            return f"(1 if {e.code} else 0)"
        w = fi.width
        m = (1 << w) - 1
        if fi.saturating:
            if fi.signed:
                h = 1 << (w - 1)
                return f"min(max({e.code}, {-h}), {h - 1})"
            return f"min(max({e.code}, 0), {m})"
        if e.const is not None:
            c = int(e.const)
            if fi.signed:
                h = 1 << (w - 1)
                return str(((c + h) & m) - h)
            return str(c & m)
        if fi.signed:
            if e.sbits is not None and e.sbits <= w:
                return e.code
            if e.bits is not None and e.bits < w:
                return e.code
            h = 1 << (w - 1)
            return f"((({e.code}) + {h}) & {m}) - {h}"
        if e.bits is not None and e.bits <= w:
            return e.code
        return f"({e.code}) & {m}"
