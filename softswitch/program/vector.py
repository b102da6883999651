"""Superword-level parallelism: runs of isomorphic primitives become numpy vector code.

An action such as `v0 = v0 + t; ...; v167 = v167 + t` (or a register per element, or a
block of statements per element) repeats one template over numbered fields and register
arrays. `find_groups` finds such runs in an action's primitives: k consecutive
primitives (the template) repeated m times, equal once the trailing digits of every
field, header and register name are ignored. `VectorCompiler` turns a group into numpy
code over int64 vectors of m lanes when that is exactly what running the primitives one
after the other does:

- every lane touches fields and registers of its own (no location shared between lanes);
- a field every lane writes (a temporary such as `t`) is written before it is read in
  each lane, so it is a vector of per-lane values, and after the group holds the last
  lane's, as it would after the scalar code;
- register arrays repeated per lane are held as one 2-D array (a bank: row = index,
  column = lane), indexed by one lane-invariant index;
- every intermediate value provably fits in int64 (interval bounds from the field widths),
  so two's complement wrap, masks, shifts and comparisons give Python's results; an
  expression of one narrow field (<= 10 bits) is a table lookup instead, as in the
  scalar code.

Anything else (other primitives, header operations, unbounded values, variable shifts
that could leave int64) makes the group run as scalar code, unchanged.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from .exprs import parse_hex
from .fuse import fuse

MIN_LANES = 8  # below this the numpy call overhead outweighs the scalar code
MAX_PERIOD = 64  # primitives in one template
SAFE = (1 << 62) - 1  # every intermediate stays within +-SAFE
TABLE_BITS = 10
MAX_NODES = 4096  # JSON nodes of one primitive compared for grouping
MAX_BANK_CELLS = 1 << 22  # int64 cells of one register bank (32 MiB)
OPS = ("assign", "modify_field", "register_read", "register_write", "modify_field_rng_uniform")
_DIGITS = re.compile(r"\d+$")


class Unsupported(Exception):
    """The group cannot be vectorised; it runs as scalar code."""


def _strip(name) -> str:
    return _DIGITS.sub("#", str(name))


def canon(node, leaves: list, budget: list | None = None) -> object:
    """A hashable shape of a JSON primitive with numbered names abstracted; the concrete
    names go to `leaves` in traversal order. More than MAX_NODES nodes (a tree p4c shares
    exponentially, say) raise Unsupported."""
    if budget is None:
        budget = [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise Unsupported("primitive too large to compare")
    if isinstance(node, dict):
        t = node.get("type")
        if t == "field" and isinstance(node.get("value"), list) and len(node["value"]) == 2:
            h, f = node["value"]
            leaves.append(("field", (h, f)))
            return ("field", _strip(h), _strip(f))
        if t in ("register_array", "header") and isinstance(node.get("value"), str):
            leaves.append((t, node["value"]))
            return (t, _strip(node["value"]))
        return tuple((k, canon(v, leaves, budget)) for k, v in sorted(node.items())
                     if k != "source_info")
    if isinstance(node, list):
        return ("[",) + tuple(canon(x, leaves, budget) for x in node)
    return node


_SHAPES: dict[int, tuple] = {}  # id(primitive) -> (primitive, shape, leaves); see shape_of


def shape_of(p) -> tuple[object, tuple]:
    """canon(p) and its leaves, computed once per primitive while a program is translated
    (finding groups, planning banks and compiling lanes all need them). The entry holds p,
    so its id cannot be reused while cached; forget_shapes() empties the cache."""
    e = _SHAPES.get(id(p))
    if e is None or e[0] is not p:
        leaves: list = []
        e = (p, canon(p, leaves), tuple(leaves))
        _SHAPES[id(p)] = e
    return e[1], e[2]


def forget_shapes() -> None:
    _SHAPES.clear()


def find_groups(prims: list[dict]) -> list[tuple[int, int, int]]:
    """[(start, period k, lanes m)]: maximal runs of one template repeated >= MIN_LANES
    times, left to right, not overlapping; the longest run wins, then the shortest period."""
    shapes: dict = {}
    ids = []
    for p in prims:
        try:
            key = shape_of(p)[0]
            ids.append(shapes.setdefault(key, len(shapes)))
        except (TypeError, Unsupported):  # oversized or odd: never part of a group
            ids.append(-1 - len(ids))
    n = len(ids)
    out = []
    i = 0
    while i < n:
        best = None
        for k in range(1, min(MAX_PERIOD, (n - i) // MIN_LANES) + 1):
            tpl = ids[i:i + k]
            m = 1
            while i + (m + 1) * k <= n and ids[i + m * k:i + (m + 1) * k] == tpl:
                m += 1
            if m >= MIN_LANES and (best is None or m * k > best[0] * best[1]):
                best = (k, m)
        if best is None:
            i += 1
            continue
        out.append((i, best[0], best[1]))
        i += best[0] * best[1]
    return out


@dataclass
class Bank:
    """Register arrays of one size and width held as columns of one 2-D int64 array."""

    names: tuple[str, ...]
    size: int
    bitwidth: int
    array: np.ndarray = field(repr=False, default=None)


def lane_register_sets(actions: list[dict], registers: dict, max_width: int,
                       max_cells: int | None = None):
    """Tuples of register arrays a group's lanes use at one position, one array a lane,
    all of one size and width <= max_width (and at most max_cells cells together), each
    array in one tuple at most."""
    taken: set[str] = set()
    for a in actions:
        prims = a.get("primitives", [])
        if any(p.get("op") in ("_jump", "_jump_if_zero") for p in prims):
            continue
        for s, k, m in find_groups(prims):
            lanes = []
            for j in range(m):
                leaves: list = []
                for p in prims[s + j * k:s + (j + 1) * k]:
                    leaves.extend(shape_of(p)[1])
                lanes.append(leaves)
            for pos, (kind, _) in enumerate(lanes[0]):
                if kind != "register_array":
                    continue
                names = tuple(lane[pos][1] for lane in lanes)
                if len(set(names)) != m or any(n in taken for n in names):
                    continue
                regs = [registers.get(n) for n in names]
                if any(r is None for r in regs):
                    continue
                size, bw = regs[0].size, regs[0].bitwidth
                if bw > max_width or any(r.size != size or r.bitwidth != bw for r in regs):
                    continue
                if max_cells is not None and size * m > max_cells:
                    continue
                taken.update(names)
                yield names


def plan_banks(actions: list[dict], registers: dict) -> dict[str, tuple[Bank, int]]:
    """register name -> (bank, column) for register arrays repeated per lane in a group."""
    banks: dict[str, tuple[Bank, int]] = {}
    # a bank too big to hold twice stays lists
    for names in lane_register_sets(actions, registers, 62, MAX_BANK_CELLS):
        regs = [registers[n] for n in names]
        size, bw, m = regs[0].size, regs[0].bitwidth, len(names)
        bank = Bank(names, size, bw, np.zeros((size, m), dtype=np.int64))
        for c, (n, r) in enumerate(zip(names, regs, strict=True)):
            bank.array[:, c] = r.values  # keeps what is there
            r.values = bank.array[:, c]
            banks[n] = (bank, c)
    return banks


class RandomBatch:
    """The `random` extern's draws for vectors, from a buffer of 32-bit words refilled in
    batches from a numpy generator (PCG64)."""

    BATCH = 1 << 16

    def __init__(self, seed):
        self.gen = np.random.default_rng(seed)
        self.buf = np.empty(0, dtype=np.int64)
        self.pos = 0

    def bits(self, m: int, nbits: int) -> np.ndarray:
        """m uniform values in [0, 2**nbits), nbits <= 32."""
        if self.pos + m > len(self.buf):
            self.buf = self.gen.integers(0, 1 << 32, max(self.BATCH, m), dtype=np.int64)
            self.pos = 0
        out = self.buf[self.pos:self.pos + m]
        self.pos += m
        return out >> (32 - nbits) if nbits < 32 else out.copy()

    def uniform(self, lo: int, hi: int, m: int) -> np.ndarray:
        n = hi - lo + 1
        if n & (n - 1) == 0 and n <= 1 << 32:
            return self.bits(m, n.bit_length() - 1) + lo
        return self.gen.integers(lo, hi + 1, m, dtype=np.int64)


@dataclass
class V:
    """A vector (or lane-invariant) value: its code and bounds [lo, hi]."""

    code: str
    lo: int
    hi: int
    kind: str = "data"  # or "bool"
    vec: bool = True  # False: one Python value for every lane


def _fits(lo: int, hi: int) -> None:
    if lo < -SAFE or hi > SAFE:
        raise Unsupported("value may leave int64")


def _tolist(v, m: int) -> list:
    if isinstance(v, np.ndarray) and v.ndim:
        return v.tolist()
    return [int(v)] * m


def _tobytes8(v, m: int) -> bytes:
    """8-bit unsigned lanes as bytes, which a list slice takes as ints faster than tolist()."""
    if isinstance(v, np.ndarray) and v.ndim:
        return v.astype(np.uint8).tobytes()
    return bytes((int(v),)) * m


def _last(v) -> int:
    if isinstance(v, np.ndarray) and v.ndim:
        return int(v[-1])
    return int(v)


def _b2d(c):
    return np.where(c, 1, 0)


def _read(pack, dtype, seq, m: int) -> np.ndarray:
    """Field values (Python ints of one width) as an int64 vector: packed into bytes by
    struct, about twice as fast as numpy converting the ints one by one."""
    try:
        return np.frombuffer(pack(*seq), dtype).astype(np.int64)
    except struct.error:  # a value outside the field's width: numpy takes any int64
        return np.fromiter(seq, np.int64, m)


def _read_kept(memo: dict, key: str, pack, dtype, seq: list, m: int) -> np.ndarray:
    """_read, or the vector last written back to this run of fields when the fields still
    hold the very list it was written as (compared by identity first, so quickly)."""
    e = memo.get(key)
    if e is not None and e[0] == seq:
        return e[1]
    return _read(pack, dtype, seq, m)


def _keep(memo: dict, key: str, v, m: int) -> list:
    """v's lanes as a list for a run of fields; remembered with v (made read-only) for
    _read_kept, which validates by content, so any later write to the fields is seen."""
    out = _tolist(v, m)
    if isinstance(v, np.ndarray) and v.ndim and v.dtype == np.int64:
        v.flags.writeable = False
        memo[key] = (out, v)
    return out


def _read8(seq, m: int) -> np.ndarray:
    """8-bit unsigned field values as an int64 vector, through bytes()."""
    try:
        return np.frombuffer(bytes(seq), np.uint8).astype(np.int64)
    except ValueError:
        return np.fromiter(seq, np.int64, m)


HELPERS = {"np": np, "_vtolist": _tolist, "_vtobytes8": _tobytes8, "_vlast": _last,
           "_vb2d": _b2d, "_vread": _read, "_vread8": _read8, "_vread_kept": _read_kept,
           "_vkeep": _keep}


def reader(mod, fi, m: int, seq: str) -> str:
    """Code reading the values of m fields like `fi` (code `seq`: a slice of F or a tuple
    of them) as an int64 vector."""
    if not fi.signed and fi.width <= 8:
        return f"_vread8({seq}, {m})"
    code = next(c for bits, c in ((8, "b"), (16, "h"), (32, "i"), (64, "q")) if fi.width <= bits)
    if not fi.signed:
        code = code.upper()
    cache = mod.globals.setdefault("__vreaders__", {})
    if (m, code) not in cache:
        cache[m, code] = (mod.bind(struct.Struct(f"={m}{code}").pack, "vpack"),
                          mod.bind(np.dtype(f"={code}"), "vdt"))
    pack, dt = cache[m, code]
    if seq.startswith("F["):  # a run of fields: maybe what a vector wrote there last
        mod.globals.setdefault("_vmemo", {})
        return f"_vread_kept(_vmemo, {seq!r}, {pack}, {dt}, {seq}, {m})"
    return f"_vread({pack}, {dt}, {seq}, {m})"


class VectorCompiler:
    """Numpy code for one group of an action; raises Unsupported when it cannot."""

    def __init__(self, pc, banks: dict, nprng_name: str, prims: list[dict], s: int, k: int,
                 m: int):
        self.pc = pc  # the action's PrimitiveCompiler (scalar code, layout, module)
        self.L = pc.L
        self.mod = pc.mod
        self.banks = banks
        self.rng = nprng_name
        self.m = m
        self.lanes = []  # per lane: [(kind, name)] leaves in template order
        for j in range(m):
            leaves: list = []
            for p in prims[s + j * k:s + (j + 1) * k]:
                leaves.extend(shape_of(p)[1])
            self.lanes.append(leaves)
        self.template = prims[s:s + k]
        self.lines: list[str] = []
        self.kinds: dict[str, tuple[bool, str]] = {}  # V name -> (vec, kind), for fuse()
        self.env: dict = {}  # location -> V (current value inside the group)
        self.written_inv: set[int] = set()  # lane-invariant slots written (privatised)
        self.read_inv: set[int] = set()  # lane-invariant slots read before any write
        self.pre: list[str] = []  # register indices, computed before the guard
        self.post: list[str] = []  # OR-reductions, after the lanes' lines (p_assign)
        self.stores: dict = {}  # location -> slots tuple, written back at the end
        self.narrow: set = set()  # stored slot tuples of unsigned fields of <= 8 bits
        self.guards: list[str] = []
        self._n = 0
        self._leaf = 0
        self._check_locations()

    # -- analysis ---------------------------------------------------------------------

    def _slot(self, hf) -> tuple[int, object]:
        h, fi, slot = self.L.field(hf[0], hf[1])
        if fi.name == "$valid$" or h.stack is not None or h.htype.varbit is not None:
            raise Unsupported("validity, stack or varbit field")
        if fi.width > 62:
            raise Unsupported("field wider than 62 bits")
        return slot, fi

    def _check_locations(self) -> None:
        """Lanes must not share a location a lane varies over."""
        owner: dict = {}
        inv = set()
        for pos, (kind, _) in enumerate(self.lanes[0]):
            names = [lane[pos][1] for lane in self.lanes]
            if any(lane[pos][0] != kind for lane in self.lanes):
                raise Unsupported("leaf kinds differ")
            if kind == "header":
                raise Unsupported("header operation")
            same = all(n == names[0] for n in names)
            for j, n in enumerate(names):
                key = (kind, tuple(n) if isinstance(n, list) else n)
                if same:
                    inv.add(key)
                    continue
                if owner.setdefault(key, j) != j:
                    raise Unsupported("a location is shared between lanes")
        if inv & set(owner):
            raise Unsupported("a location is lane-invariant in one place, per lane in another")

    def _next_leaf(self):
        """(kind, [name per lane]) of the next leaf in template order."""
        pos = self._leaf
        self._leaf += 1
        kind = self.lanes[0][pos][0]
        return kind, [lane[pos][1] for lane in self.lanes]

    def fresh(self) -> str:
        self._n += 1
        return f"V{self._n}"

    def emit(self, code: str, lo: int, hi: int, kind: str = "data", vec: bool = True) -> V:
        name = self.fresh()
        self.lines.append(f"{name} = {code}")
        self.kinds[name] = (vec, kind)
        return V(name, lo, hi, kind, vec)

    # -- leaves -------------------------------------------------------------------------

    def read_field(self, names) -> V:
        if all(n == names[0] for n in names):
            slot, fi = self._slot(names[0])
            if slot in self.env:
                return self.env[slot]
            self.read_inv.add(slot)
            lo, hi = self._range(fi)
            return V(f"F[{slot}]", lo, hi, vec=False)
        slots = tuple(self._slot(n)[0] for n in names)
        if slots in self.env:
            return self.env[slots]
        fi = self._slot(names[0])[1]
        if any(self._slot(n)[1].width != fi.width or self._slot(n)[1].signed != fi.signed
               for n in names):
            raise Unsupported("lanes of different field types")
        lo, hi = self._range(fi)
        v = self.emit(reader(self.mod, fi, self.m, self._slice(slots)), lo, hi)
        self.env[slots] = v
        return v

    @staticmethod
    def _range(fi) -> tuple[int, int]:
        if fi.signed:
            return -(1 << (fi.width - 1)), (1 << (fi.width - 1)) - 1
        return 0, fi.mask

    def _slice(self, slots: tuple) -> str:
        step = slots[1] - slots[0] if len(slots) > 1 else 1
        if step > 0 and all(b - a == step for a, b in zip(slots, slots[1:], strict=False)):
            end = slots[-1] + 1
            return f"F[{slots[0]}:{end}]" if step == 1 else f"F[{slots[0]}:{end}:{step}]"
        ig = self.mod.bind(__import__("operator").itemgetter(*slots), "ig")
        return f"{ig}(F)"

    def write_field(self, names, value: V, fi_of=None) -> None:
        if all(n == names[0] for n in names):
            slot, fi = self._slot(names[0])
            v = self.store(value, fi)
            self.env[slot] = v
            self.written_inv.add(slot)
            self.stores[slot] = slot
            return
        slots = tuple(self._slot(n)[0] for n in names)
        fis = [self._slot(n)[1] for n in names]
        fi = fis[0]
        if any(f.width != fi.width or f.signed != fi.signed or f.saturating != fi.saturating
               for f in fis):
            raise Unsupported("lanes of different field types")
        self.env[slots] = self.store(value, fi)
        self.stores[slots] = slots
        if not fi.signed and fi.width <= 8:
            self.narrow.add(slots)

    def store(self, v: V, fi) -> V:
        """v truncated to the field's width (BMv2 Field::set), as the scalar store_value."""
        if v.kind == "bool":
            v = self.b2d(v)
        w, m = fi.width, fi.mask
        if fi.saturating:
            lo, hi = self._range(fi)
            return self.emit(f"np.clip({v.code}, {lo}, {hi})", lo, hi, vec=v.vec)
        if fi.signed:
            h = 1 << (w - 1)
            if -h <= v.lo and v.hi < h:
                return self.named(v)
            return self.emit(f"(({v.code} + {h}) & {m}) - {h}", -h, h - 1, vec=v.vec)
        if 0 <= v.lo and v.hi <= m:
            return self.named(v)
        return self.emit(f"{v.code} & {m}", 0, m, vec=v.vec)

    def named(self, v: V) -> V:
        """v computed once into a variable: a stored value is read again by name."""
        if v.code.isidentifier() or re.fullmatch(r"F\[\d+\]|-?\d+", v.code):
            return v
        return self.emit(v.code, v.lo, v.hi, v.kind, v.vec)

    # -- expressions --------------------------------------------------------------------

    def expr(self, j) -> V:
        if isinstance(j, bool):
            return V(str(j), int(j), int(j), "bool", vec=False)
        if isinstance(j, int):
            return V(str(j), j, j, vec=False)
        if not isinstance(j, dict):
            raise Unsupported("expression")
        t, v = j.get("type"), j.get("value")
        if t == "expression":
            return self.op(v) if isinstance(v, dict) and "op" in v else self.expr(v)
        if t == "field":
            kind, names = self._next_leaf()
            return self.read_field(names)
        if t == "hexstr":
            c = parse_hex(v)
            _fits(c, c)
            return V(str(c), c, c, vec=False)
        if t == "bool":
            return V(str(bool(v)), int(bool(v)), int(bool(v)), "bool", vec=False)
        if t in ("runtime_data", "local"):
            i = int(v)
            w = self.pc.x.locals_widths[i]
            if w > 62:
                raise Unsupported("wide action parameter")
            return V(f"p{i}", 0, (1 << w) - 1, vec=False)
        raise Unsupported(f"expression of type {t!r}")

    def data(self, j) -> V:
        e = self.expr(j)
        return self.b2d(e) if e.kind == "bool" else e

    def boolean(self, j) -> V:
        e = self.expr(j)
        if e.kind == "bool":
            return e
        return V(f"({e.code} != 0)", 0, 1, "bool", e.vec)

    def b2d(self, c: V) -> V:
        if not c.vec:
            return V(f"(1 if {c.code} else 0)", 0, 1, vec=False)
        return V(f"_vb2d({c.code})", 0, 1)

    def op(self, v: dict) -> V:
        op = v.get("op")
        left, right = v.get("left"), v.get("right")
        if op == "?":
            c = self.boolean(v.get("cond"))
            a, b = self.expr(left), self.expr(right)
            if a.kind != b.kind:
                a, b = self.b2d(a) if a.kind == "bool" else a, self.b2d(b) if b.kind == "bool" \
                    else b
            vec = a.vec or b.vec or c.vec
            if not vec:
                return V(f"({a.code} if {c.code} else {b.code})", min(a.lo, b.lo),
                         max(a.hi, b.hi), a.kind, False)
            return self.emit(f"np.where({c.code}, {a.code}, {b.code})", min(a.lo, b.lo),
                             max(a.hi, b.hi), a.kind)
        if op in ("and", "or"):
            a, b = self.boolean(left), self.boolean(right)
            fn = "np.logical_and" if op == "and" else "np.logical_or"
            return V(f"{fn}({a.code}, {b.code})", 0, 1, "bool", a.vec or b.vec)
        if op == "not":
            b = self.boolean(right)
            return V(f"np.logical_not({b.code})", 0, 1, "bool", b.vec)
        if op == "d2b":
            b = self.data(right)
            return V(f"({b.code} != 0)", 0, 1, "bool", b.vec)
        if op == "b2d":
            return self.b2d(self.boolean(right))
        if op in ("==", "!=", ">", "<", ">=", "<="):
            a, b = self.data(left), self.data(right)
            return V(f"({a.code} {op} {b.code})", 0, 1, "bool", a.vec or b.vec)
        if op == "~":
            b = self.data(right)
            return V(f"(~{b.code})", -b.hi - 1, -b.lo - 1, vec=b.vec)
        if op in ("+", "-") and left is None:
            b = self.data(right)
            return b if op == "+" else V(f"(-{b.code})", -b.hi, -b.lo, vec=b.vec)
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            a, w = self.data(left), self.data(right)
            if w.vec or w.lo != w.hi or not 0 < w.lo <= 62:
                raise Unsupported("cast to a width not known at load time")
            w = w.lo
            mask, h = (1 << w) - 1, 1 << (w - 1)
            if op == "two_comp_mod":
                if -h <= a.lo and a.hi < h:
                    return a
                return V(f"(((({a.code}) + {h}) & {mask}) - {h})", -h, h - 1, vec=a.vec)
            lo, hi = (0, mask) if op == "usat_cast" else (-h, h - 1)
            return V(f"np.clip({a.code}, {lo}, {hi})", lo, hi, vec=a.vec)
        if op in ("+", "-", "*", "&", "|", "^", "<<", ">>", "%", "/"):
            return self.arith(op, self.data(left), self.data(right))
        raise Unsupported(f"operator {op!r}")

    def arith(self, op: str, a: V, b: V) -> V:
        vec = a.vec or b.vec
        if op == "&":
            for x, c in ((a, b), (b, a)):
                if re.fullmatch(r"\d+", c.code) and int(c.code) & (int(c.code) + 1) == 0 \
                        and 0 <= x.lo and x.hi <= int(c.code):
                    return x  # a mask of all ones over a value known to fit: no vector op
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        elif op == "*":
            ps = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            lo, hi = min(ps), max(ps)
        elif op in ("&", "|", "^"):
            if a.lo >= 0 and b.lo >= 0:
                if op == "&":
                    lo, hi = 0, min(a.hi, b.hi)
                else:
                    lo, hi = 0, (1 << max(a.hi, b.hi).bit_length()) - 1
            elif op == "&" and (a.lo >= 0 or b.lo >= 0):
                lo, hi = 0, a.hi if a.lo >= 0 else b.hi
            else:
                bits = max(abs(x).bit_length() for x in (a.lo, a.hi, b.lo, b.hi)) + 1
                lo, hi = -(1 << bits), (1 << bits) - 1
        elif op == "<<":
            if b.lo < 0 or (vec and b.hi > 62):
                raise Unsupported("shift by a value that may be negative or too large")
            lo, hi = min(a.lo << b.lo, a.lo << b.hi), max(a.hi << b.lo, a.hi << b.hi)
        elif op == ">>":
            if b.lo < 0:
                raise Unsupported("shift by a value that may be negative")
            lo, hi = min(a.lo >> b.lo, a.lo >> b.hi), max(a.hi >> b.lo, a.hi >> b.hi)
            if b.hi > 62 and vec:
                # numpy shifts of 64 or more are undefined; Python's leave 0 or -1
                return self._bounded(f"({a.code} >> np.minimum({b.code}, 63))", lo, hi, vec)
        else:  # % and /
            if b.vec or b.lo != b.hi or b.lo <= 0:
                raise Unsupported("division by a value not known to be positive")
            if op == "%":
                lo, hi = 0, b.lo - 1
            else:
                lo, hi = min(a.lo // b.lo, 0), max(a.hi // b.lo, 0)
            op = "%" if op == "%" else "//"
        return self._bounded(f"({a.code} {op} {b.code})", lo, hi, vec)

    def _bounded(self, code: str, lo: int, hi: int, vec: bool) -> V:
        _fits(lo, hi)
        return V(code, lo, hi, vec=vec)

    # -- primitives ---------------------------------------------------------------------

    def compile(self) -> list[str]:
        for p in self.template:
            op = p.get("op")
            if op not in OPS:
                raise Unsupported(f"primitive {op!r}")
            getattr(self, "p_" + op)(*p.get("parameters", []))
        if self.read_inv & self.written_inv:
            # a later lane would read what an earlier one wrote: a loop-carried value
            raise Unsupported("a lane-invariant field is read before it is written")
        out = self.lines + self.post
        n = len(out)
        for loc, slots in self.stores.items():
            v = self.env[loc]
            if isinstance(slots, int):
                out.append(f"F[{slots}] = _vlast({v.code})" if v.vec else
                           f"F[{slots}] = int({v.code})")
            else:
                tgt = self._slice(slots)
                if tgt.startswith("ig"):  # scattered lanes: one store each
                    k = self.mod.const(slots, "slots")
                    out += [f"for s_, x_ in zip({k}, _vtolist({v.code}, {self.m})):",
                            "    F[s_] = x_"]
                elif slots in self.narrow:
                    out.append(f"{tgt} = _vtobytes8({v.code}, {self.m})")
                else:
                    self.mod.globals.setdefault("_vmemo", {})
                    out.append(f"{tgt} = _vkeep(_vmemo, {tgt!r}, {v.code}, {self.m})")
        return fuse(out[:n], self.kinds, self.m, self.mod.bind, "\n".join(out[n:])) + out[n:]

    def guard_code(self) -> str | None:
        return " and ".join(self.guards) if self.guards else None

    def dest(self, p: dict):
        if p.get("type") != "field":
            raise Unsupported("destination is not a field")
        kind, names = self._next_leaf()
        return names

    def p_assign(self, dst, src):
        names = self.dest(dst)
        if self.reduction(names, src):
            return
        value = self.tabulated(src, names) or self.data(src)
        self.write_field(names, value)

    def occurrences(self, names) -> list[int]:
        """Where a lane's leaves name the lane-invariant field `names[0]`, in template order."""
        key = tuple(names[0])
        return [i for i, (kind, n) in enumerate(self.lanes[0])
                if kind == "field" and tuple(n) == key]

    def induction(self, names, v) -> bool:
        """`f = f + c` on a lane-invariant f, c a constant, where f appears nowhere in the
        lane before (an element's offset, as `rc_k = rc_k + 0x9e3779b9`): lane j sees
        f + (j + 1) c, wrapped to f's width, and f keeps the last lane's. (p4c may write the
        wrap itself, `(f + c) & mask`: storing into f wraps alike.)"""
        mask = v.get("right") if v.get("op") == "&" else None
        if isinstance(mask, dict) and mask.get("type") == "hexstr":
            m = parse_hex(mask["value"])
            if m & (m + 1) == 0 and m >= self._slot(names[0])[1].mask:
                v = v.get("left")
                while isinstance(v, dict) and v.get("type") == "expression":
                    v = v.get("value")
                if not isinstance(v, dict):
                    return False
        if not (v.get("op") == "+" and all(n == names[0] for n in names)):
            return False
        left, right = v.get("left"), v.get("right")
        if not (isinstance(left, dict) and left.get("type") == "field"
                and list(left.get("value")) == list(names[0])
                and isinstance(right, dict) and right.get("type") == "hexstr"):
            return False
        if self.occurrences(names)[:2] != [self._leaf - 1, self._leaf]:
            return False        # f read or written earlier in the lane
        slot, fi = self._slot(names[0])
        c = parse_hex(right["value"])
        if slot in self.env or fi.signed or c < 0 or fi.mask * (self.m + 1) > SAFE:
            return False
        self._next_leaf()       # f's own leaf in the expression
        self.read_inv.discard(slot)
        steps = self.mod.bind(np.arange(1, self.m + 1, dtype=np.int64) * c, "vsteps")
        start = self.emit(f"F[{slot}] + {steps}", c, fi.mask + self.m * c)
        self.write_field(names, start)
        return True

    def reduction(self, names, src) -> bool:
        """An induction (above), or `f = f | e` on a lane-invariant f that no other leaf of
        the template names (a flag every lane may raise, as `rg_bad = rg_bad | (x > m)`):
        f's value after the group is its value before OR every lane's e, whatever the order.
        Returns False for anything else; the lines go after the lanes' (self.post), so they
        do not split a fused run."""
        v = src
        while isinstance(v, dict) and v.get("type") == "expression":
            v = v.get("value")      # p4c nests expressions in expressions
        if isinstance(v, dict) and self.induction(names, v):
            return True
        if not (isinstance(v, dict) and v.get("op") == "|" and all(n == names[0] for n in names)):
            return False
        left = v.get("left")
        if not (isinstance(left, dict) and left.get("type") == "field"
                and list(left.get("value")) == list(names[0])):
            return False
        if len(self.occurrences(names)) != 2:
            return False        # f is read or written elsewhere in a lane: loop-carried
        slot, fi = self._slot(names[0])
        if slot in self.env or fi.signed:
            return False
        self._next_leaf()       # f's own leaf in `src`
        e = self.data(v.get("right"))
        if e.lo < 0:
            raise Unsupported("an OR-reduction of values that may be negative")
        acc = self.named(e)
        code = f"np.bitwise_or.reduce({acc.code})" if acc.vec else acc.code
        name = self.fresh()
        self.post.append(f"{name} = (F[{slot}] | int({code})) & {fi.mask}")
        self.kinds[name] = (False, "data")
        self.env[slot] = self.store(V(name, 0, fi.mask, vec=False), fi)
        self.written_inv.add(slot)
        self.stores[slot] = slot
        return True

    p_modify_field = p_assign

    def tabulated(self, src, names) -> V | None:
        """An expression of one narrow unsigned field as a table lookup (as the scalar
        code does), or None (nothing consumed, nothing emitted)."""
        leaves: list = []
        canon(src, leaves)
        text = repr(src)
        if not leaves or any(k != "field" for k, _ in leaves) or text.count("'op'") < 4:
            return None
        if any(t in text for t in ("'register'", "'runtime_data'", "'local'", "'header'")):
            return None
        per_lane = [[lane[self._leaf + i][1] for lane in self.lanes] for i in range(len(leaves))]
        if any(x != per_lane[0] for x in per_lane):
            return None  # more than one input
        slot, fi = self._slot(per_lane[0][0])
        if fi.signed or fi.width > TABLE_BITS:
            return None
        dfi = self._slot(names[0])[1]
        x = self.pc.x
        x.start(src)
        e = x.data(src)
        pre = x.take_pre()
        if pre or e.const is not None:
            return None
        code = x.store_value(dfi, e)
        if re.search(rf"F\[(?!{slot}\])", code) or re.search(r"\bp\d", code):
            return None
        try:
            fn = eval(f"lambda F: {code}", dict(self.mod.globals))  # noqa: S307 - ours
            table = [fn({slot: v}) for v in range(1 << fi.width)]
        except Exception:
            return None
        if min(table) < -SAFE or max(table) > SAFE:
            return None
        inp = self.read_field(per_lane[0])
        self._leaf += len(leaves)
        tab = self.mod.bind(np.array(table, dtype=np.int64), "vtab")
        if not inp.vec:
            return V(f"int({tab}[{inp.code}])", min(table), max(table), vec=False)
        return self.emit(f"{tab}.take({inp.code})", min(table), max(table))  # beats tab[ix]

    def register(self, p: dict):
        kind, names = self._next_leaf()
        if kind != "register_array":
            raise Unsupported("register array expected")
        return names

    def index(self, idx_json) -> tuple[str, int]:
        """A lane-invariant register index, computed once, and its upper bound."""
        e = self.data(idx_json)
        if e.vec or re.search(r"\bV\d+\b", e.code):
            raise Unsupported("register index differs between lanes or is computed here")
        name = self.fresh()
        self.pre.append(f"{name} = {e.code}")
        return name, e.lo

    def bank_of(self, names) -> tuple[str, str, int, int]:
        """(bank global, column selector, size, bitwidth) of per-lane register arrays."""
        if any(n not in self.banks for n in names):
            raise Unsupported("register arrays not held as one bank")
        bank = self.banks[names[0]][0]
        if any(self.banks[n][0] is not bank for n in names):
            raise Unsupported("register arrays of several banks")
        cols = [self.banks[n][1] for n in names]
        b = self.mod.bind(bank.array, "B")
        if cols == list(range(cols[0], cols[0] + len(cols))):
            sel = f"{cols[0]}:{cols[-1] + 1}"
        else:
            sel = self.mod.bind(np.array(cols), "cols")
        return b, sel, bank.size, bank.bitwidth

    def guard(self, ix: str, lo: int, size: int) -> None:
        g = f"0 <= {ix} < {size}" if lo < 0 else f"{ix} < {size}"
        if g not in self.guards:
            self.guards.append(g)

    def p_register_read(self, dst, rarr, idx):
        names = self.dest(dst)
        regs = self.register(rarr)
        ix, lo = self.index(idx)
        if all(r == regs[0] for r in regs):
            reg = self.pc.env.registers.get(regs[0])
            if reg is None or reg.bitwidth > 62:
                raise Unsupported("register")
            self.guard(ix, lo, reg.size)
            arr = self.mod.bind(reg.values, "R")
            v = V(f"int({arr}[{ix}])", 0, (1 << reg.bitwidth) - 1, vec=False)
        else:
            b, sel, size, bw = self.bank_of(regs)
            self.guard(ix, lo, size)
            v = self.emit(f"{b}[{ix}, {sel}].copy()", 0, (1 << bw) - 1)
        self.write_field(names, v)

    def p_register_write(self, rarr, idx, src):
        regs = self.register(rarr)
        if all(r == regs[0] for r in regs):
            raise Unsupported("every lane writes one register")
        ix, lo = self.index(idx)
        b, sel, size, bw = self.bank_of(regs)
        self.guard(ix, lo, size)
        v = self.data(src)
        m = (1 << bw) - 1
        code = v.code if 0 <= v.lo and v.hi <= m else f"{v.code} & {m}"
        self.lines.append(f"{b}[{ix}, {sel}] = {code}")

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        names = self.dest(dst)
        a, b = self.data(lo), self.data(hi)
        if a.vec or b.vec or a.lo != a.hi or b.lo != b.hi:
            raise Unsupported("random bounds not known at load time")
        u64 = (1 << 64) - 1
        lo_c, hi_c = a.lo & u64, b.lo & u64
        if lo_c > hi_c or hi_c > SAFE:
            raise Unsupported("random bounds")
        v = self.emit(f"{self.rng}.uniform({lo_c}, {hi_c}, {self.m})", lo_c, hi_c)
        self.write_field(names, v)
