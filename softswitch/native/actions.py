"""Action primitives -> IR statements, as the Python tier's program/actions.py runs them.

A run of m repetitions of one block of primitives that differ only in the numbers ending
field, header and register names (vector.find_groups: `v0 = v0 + t; ... v167 = ...`)
becomes a loop over the m lanes: each lane runs the first lane's primitives with its own
fields, headers and registers, in order, so the loop does exactly what the unrolled
primitives do, whatever one lane reads of another's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..program.exprs import parse_hex
from ..program.layout import (
    ABORT,
    CLONE,
    CLONE_FL,
    DIGEST,
    EXIT,
    INLEN,
    PKTLEN,
    RECIRC,
    RESUBMIT,
    TRUNC,
    Header,
)
from ..program.vector import find_groups
from .exprs import Ctx, HRef, URef, field_range
from .ir import Fn, Unsupported, V, const, need

U64 = (1 << 64) - 1
MIN_LOOP_LANES = 8


def leaves(node, out: list) -> list:
    """The nodes whose numbered names may differ between lanes, in a fixed order (that of
    vector.canon): fields, headers and register arrays."""
    if isinstance(node, dict):
        t = node.get("type")
        if t == "field" and isinstance(node.get("value"), list) and len(node["value"]) == 2:
            out.append(("field", tuple(node["value"]), node))
            return out
        if t in ("register_array", "header") and isinstance(node.get("value"), str):
            out.append((t, node["value"], node))
            return out
        for k in sorted(node):
            if k != "source_info":
                leaves(node[k], out)
    elif isinstance(node, list):
        for x in node:
            leaves(x, out)
    return out


@dataclass
class LaneRef:
    """Where lane j finds one leaf: start + j * step, or a constant array of m values."""

    start: int
    step: int | None
    table: str | None  # @global of the per-lane values when they are not a progression
    fi: object = None
    header: Header | None = None
    htype: object = None
    reg: object = None
    stride: int = 1  # a register array's: cell i of lane j at start + j * step + i * stride

    def slot(self, ctx: Ctx) -> str:
        f = ctx.fn
        j = ctx.lane
        if self.table is not None:
            return f.load(self.table, j)
        if self.step == 0:
            return str(self.start)
        x = f.op(f"mul i64 {j}, {self.step}") if self.step != 1 else j
        return f.op(f"add i64 {x}, {self.start}")


def _progression(vals: list[int]) -> int | None:
    step = vals[1] - vals[0]
    return step if all(b - a == step for a, b in zip(vals, vals[1:], strict=False)) else None


class Prims:
    """Compiles primitives of one function (an action, a parser state, the deparser)."""

    def __init__(self, ctx: Ctx, env, where: str):
        self.x = ctx
        self.f: Fn = ctx.fn
        self.env = env  # native.Build: layout, storage, calculations, program facts
        self.L = ctx.L
        self.where = where

    # -- helpers --------------------------------------------------------------------------

    def setf(self, slot, value) -> None:
        self.f.store("%F", str(slot), str(value))

    def getf(self, slot) -> str:
        return self.f.load("%F", str(slot))

    def val(self, p, low: bool = False) -> V:
        t = p.get("type")
        if t in ("field", "hexstr", "expression", "stack_field", "runtime_data", "local",
                 "register", "bool"):
            return self.x.data(p, low)
        raise Unsupported(f"{self.where}: parameter of type {t!r} is not a value")

    def header(self, p) -> HRef:
        t = p.get("type")
        if t == "header":
            return self.x.header_of(p)
        if t == "expression":
            e = self.x.compile(p)
            if isinstance(e, HRef):
                return e
        raise Unsupported(f"{self.where}: expected a header, got {t!r}")

    def if_then(self, cond: str, body) -> None:
        """if cond: body() (cond an i1)."""
        f = self.f
        yes, done = f.label("then"), f.label("fi")
        f.cbr(cond, yes, done)
        f.block(yes)
        body()
        f.block(done)

    def set_valid(self, h: HRef) -> None:
        self.setf(h.base, 1)
        if h.header is not None and h.header.union is not None:
            for o in self.L.unions[h.header.union].headers:
                if o is not h.header:
                    self.setf(o.base, 0)

    def lvalue(self, j) -> tuple[str, object]:
        t = j.get("type")
        if t == "field":
            slot, fi, _ = self.x.field_slot(j)
            return slot, fi
        if t == "expression":
            inner = j["value"] if "op" in j["value"] else j["value"].get("value")
            if inner.get("op") != "access_field":
                raise Unsupported("assignment target must be a field")
            h = self.x.compile(inner["left"])
            if not isinstance(h, HRef):
                raise Unsupported("access_field needs a header")
            off = int(inner["right"])
            if not 0 <= off < len(h.htype.fields):
                raise Unsupported("access_field offset out of range")
            return self.x.add_slot(h.base, 1 + off), h.htype.fields[off]
        raise Unsupported(f"assignment target type {t!r}")

    def store(self, p, e: V) -> None:
        slot, fi = self.lvalue(p)
        if fi.name == "$valid$":
            return  # the Python tier ignores it too
        self.setf(slot, self.x.store_value(fi, e))

    # -- dispatch -------------------------------------------------------------------------

    def compile(self, prim: dict) -> None:
        op = prim.get("op")
        fn = getattr(self, "p_" + str(op), None)
        if fn is None:
            raise Unsupported(f"{self.where}: primitive {op!r}")
        self.x.start()
        try:
            fn(*prim.get("parameters", []))
        except TypeError as e:
            raise Unsupported(f"{self.where}: parameters of {op!r}: {e}") from None

    def run(self, prims: list[dict], loops: bool = True) -> None:
        """Primitives in order, runs of repeated blocks as lane loops."""
        groups = find_groups(prims) if loops else []
        i = 0
        for s, k, m in groups + [(len(prims), 0, 0)]:
            for p in prims[i:s]:
                self.compile(p)
            if m:
                self.lane_loop(prims, s, k, m)
            i = s + k * m

    # -- lane loops -----------------------------------------------------------------------

    def lane_refs(self, prims, s: int, k: int, m: int) -> dict[int, LaneRef] | None:
        lanes = [leaves(prims[s + j * k:s + (j + 1) * k], []) for j in range(m)]
        if any(len(ln) != len(lanes[0]) for ln in lanes):
            return None
        refs: dict[int, LaneRef] = {}
        st = self.env.store
        for pos, (kind, first, node) in enumerate(lanes[0]):
            names = [ln[pos][1] for ln in lanes]
            if any(ln[pos][0] != kind for ln in lanes):
                return None
            if all(n == first for n in names):
                continue
            if kind == "field":
                got = [self.L.field(h, fl) for h, fl in names]
                fi = got[0][1]
                if any((g[1].width, g[1].signed, g[1].saturating, g[1].name == "$valid$") !=
                       (fi.width, fi.signed, fi.saturating, fi.name == "$valid$") for g in got):
                    return None
                vals = [g[2] for g in got]
                ref = LaneRef(vals[0], None, None, fi=fi)
            elif kind == "header":
                hs = [self.L.header(n) for n in names]
                if any(len(h.htype.fields) != len(hs[0].htype.fields) or
                       [f.width for f in h.htype.fields] != [f.width for f in hs[0].htype.fields]
                       or h.union is not None for h in hs):
                    return None
                vals = [h.base for h in hs]
                ref = LaneRef(vals[0], None, None, htype=hs[0].htype)
            else:  # register_array
                regs = [st.register(n) for n in names]
                at = [st.reg_offset(n) for n in names]
                if any((r.size, r.bitwidth, a[1]) != (regs[0].size, regs[0].bitwidth, at[0][1])
                       for r, a in zip(regs, at, strict=True)):
                    return None
                vals = [a[0] for a in at]
                ref = LaneRef(vals[0], None, None, reg=regs[0], stride=at[0][1])
            step = _progression(vals)
            if step is None:
                ref.table = self.f.mod.array(vals, "lane")
            ref.step = step
            refs[id(node)] = ref
        return refs

    def lane_loop(self, prims, s: int, k: int, m: int) -> None:
        refs = self.lane_refs(prims, s, k, m) if m >= MIN_LOOP_LANES else None
        if refs is None:
            for p in prims[s:s + k * m]:
                self.compile(p)
            return
        f = self.f
        jv = f.local("i64", "0")
        head, body, done = f.label("lane"), f.label("lanebody"), f.label("lanedone")
        f.br(head)
        f.block(head)
        j = f.op(f"load i64, ptr {jv}", "j")
        more = f.op(f"icmp slt i64 {j}, {m}")
        f.cbr(more, body, done)
        f.block(body)
        saved_lanes, saved_j = self.x.lanes, getattr(self.x, "lane", None)
        self.x.lanes, self.x.lane = refs, j
        try:
            for p in prims[s:s + k]:
                self.compile(p)
        finally:
            self.x.lanes, self.x.lane = saved_lanes, saved_j
        nj = f.op(f"add i64 {j}, 1")
        f.emit(f"store i64 {nj}, ptr {jv}")
        f.br(head)
        f.block(done)

    # -- primitives -----------------------------------------------------------------------

    def p_assign(self, dst, src):
        if dst.get("type") == "header":
            return self.p_assign_header(dst, src)
        slot, fi = self.lvalue(dst)
        if fi.name == "$valid$":
            return
        # a field keeps only its width's bits: the value is needed modulo 2^64 at most
        e = self.val(src, low=not fi.saturating)
        self.setf(slot, self.x.store_value(fi, e))

    p_modify_field = p_assign

    def copy_header(self, d: HRef, s: HRef) -> None:
        n = len(d.htype.fields)
        if s.htype is not d.htype and len(s.htype.fields) != n:
            raise Unsupported(f"{self.where}: assign_header between different header types")
        f = self.f
        v = self.getf(s.base)
        ok = f.op(f"icmp ne i64 {v}, 0")
        yes, no, done = f.label("cp"), f.label("cpno"), f.label("cpdone")
        f.cbr(ok, yes, no)
        f.block(yes)
        for i in range(1, 1 + n):
            self.setf(self.x.add_slot(d.base, i), self.getf(self.x.add_slot(s.base, i)))
        self.set_valid(d)
        f.br(done)
        f.block(no)
        self.setf(d.base, 0)
        f.br(done)
        f.block(done)

    def p_assign_header(self, dst, src):
        self.copy_header(self.header(dst), self.header(src))

    p_copy_header = p_assign_header

    def p_assign_union(self, dst, src):
        du, su = self.x.compile(dst), self.x.compile(src)
        if not isinstance(du, URef) or not isinstance(su, URef) or \
                len(du.union.headers) != len(su.union.headers):
            raise Unsupported(f"{self.where}: bad assign_union")
        for d, s in zip(du.union.headers, su.union.headers, strict=True):
            self.copy_header(HRef(str(d.base), d.htype, d), HRef(str(s.base), s.htype, s))

    def p_exit(self):
        self.setf(EXIT, 1)

    def p_no_op(self):
        pass

    def _assert(self, cond, what):
        c = self.val(cond)
        site = self.env.event(f"{what} failed in {self.where}; packet dropped")
        ev = self.x.ptr(self.env.store.EVENTS)
        zero = self.f.op(f"icmp eq i{c.w} {c.ref}, 0") if c.const is None else \
            ("true" if c.const == 0 else "false")

        def body():
            self.f.store(ev, "0", str(site))
            self.setf(ABORT, 1)
            self.setf(EXIT, 1)

        self.if_then(zero, body)

    def p_assert(self, cond):
        self._assert(cond, "assert")

    def p_assume(self, cond):
        self._assert(cond, "assume")

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        f = self.f
        lo_e, hi_e = self.val(lo), self.val(hi)
        if lo_e.const is not None and hi_e.const is not None:
            lo_c, hi_c = lo_e.const & U64, hi_e.const & U64
            if lo_c > hi_c:
                return
            r = self.env.draw(self.x, hi_c - lo_c + 1)
            if lo_c:
                r = V(f.op(f"add i128 {f.ext(r, 128)}, {lo_c}"), 128, lo_c, hi_c)
            self.store(dst, r)
            return
        lo_u = self.x.low_bits(lo_e, 64)
        hi_u = self.x.low_bits(hi_e, 64)
        a, b = f.ext(lo_u, 128), f.ext(hi_u, 128)
        ok = f.op(f"icmp sle i128 {a}, {b}")

        def body():
            n = f.op(f"sub i128 {b}, {a}")
            n = f.op(f"add i128 {n}, 1")
            r = self.env.draw_runtime(self.x, n)
            v = f.op(f"add i128 {r}, {a}")
            self.store(dst, V(v, 128, 0, U64))

        self.if_then(ok, body)

    def _binop(self, dst, a, b, op):
        low = not self.lvalue(dst)[1].saturating and op != ">>"
        self.store(dst, self.x.arith(op, self.val(a, low), self.val(b, low and op != "<<"),
                                     low))

    def p_add_to_field(self, fl, d):
        self._binop(fl, fl, d, "+")

    def p_subtract_from_field(self, fl, d):
        self._binop(fl, fl, d, "-")

    def p_add(self, fl, a, b):
        self._binop(fl, a, b, "+")

    def p_subtract(self, fl, a, b):
        self._binop(fl, a, b, "-")

    def p_bit_xor(self, fl, a, b):
        self._binop(fl, a, b, "^")

    def p_bit_or(self, fl, a, b):
        self._binop(fl, a, b, "|")

    def p_bit_and(self, fl, a, b):
        self._binop(fl, a, b, "&")

    def p_shift_left(self, fl, a, b):
        self._binop(fl, a, b, "<<")

    def p_shift_right(self, fl, a, b):
        self._binop(fl, a, b, ">>")

    def _sm(self, hdr: Header | None, name: str):
        if hdr is not None and name in hdr.htype.offsets:
            return hdr.finfo(name), hdr.slot(name)
        return self.L.resolve(name)

    def _drop(self, hdr: Header | None):
        es = self._sm(hdr, "egress_spec") if hdr is not None else \
            self.L.resolve("standard_metadata.egress_spec")
        if es is None:
            raise Unsupported(f"{self.where}: mark_to_drop needs standard_metadata.egress_spec")
        fi, slot = es
        self.setf(slot, self.env.drop_port & fi.mask)
        mg = self._sm(hdr, "mcast_grp") if hdr is not None else \
            self.L.resolve("intrinsic_metadata.mcast_grp")
        if mg is not None:
            self.setf(mg[1], 0)

    def p_drop(self):
        self._drop(None)

    def p_mark_to_drop(self, std):
        h = self.header(std)
        if h.header is None:
            raise Unsupported(f"{self.where}: mark_to_drop needs the standard metadata header")
        self._drop(h.header)

    def _low16(self, p) -> str:
        return self.f.i64(self.x.low_bits(self.val(p), 16))

    def p_generate_digest(self, receiver, learn_id):
        self.setf(DIGEST, self._low16(learn_id))

    def p_add_header(self, hp):
        h = self.header(hp)
        nb = h.htype.nbits // 8
        if h.htype.varbit is not None:
            raise Unsupported("varbit headers")
        f = self.f
        v = self.getf(h.base)
        off = f.op(f"icmp eq i64 {v}, 0")

        def body():
            self.zero_fields(h)
            self.set_valid(h)
            n = f.op(f"add i64 {self.getf(PKTLEN)}, {nb}")
            self.setf(PKTLEN, n)

        self.if_then(off, body)

    def zero_fields(self, h: HRef) -> None:
        n = len(h.htype.fields)
        if n < 16:
            for i in range(1, 1 + n):
                self.setf(self.x.add_slot(h.base, i), 0)
            return
        p = self.f.gep("%F", self.x.add_slot(h.base, 1))
        self.f.emit(f"call void @llvm.memset.p0.i64(ptr {p}, i8 0, i64 {8 * n}, i1 false)")

    def p_add_header_fast(self, hp):
        self.set_valid(self.header(hp))

    def p_remove_header(self, hp):
        h = self.header(hp)
        if h.htype.varbit is not None:
            raise Unsupported("varbit headers")
        nb = h.htype.nbits // 8
        f = self.f
        v = self.getf(h.base)
        on = f.op(f"icmp ne i64 {v}, 0")

        def body():
            n = f.op(f"sub i64 {self.getf(PKTLEN)}, {nb}")
            self.setf(PKTLEN, n)
            self.setf(h.base, 0)

        self.if_then(on, body)

    def _clone(self, sid, fl):
        f = self.f
        s = f.i64(self.x.low_bits(self.val(sid), 15))
        self.setf(CLONE, f.op(f"or i64 {s}, 32768"))
        self.setf(CLONE_FL, self._low16(fl))

    def p_clone_ingress_pkt_to_egress(self, sid, fl):
        self._clone(sid, fl)

    def p_clone_egress_pkt_to_egress(self, sid, fl):
        self._clone(sid, fl)

    def p_resubmit(self, fl):
        self.setf(RESUBMIT, self._low16(fl))

    def p_recirculate(self, fl):
        self.setf(RECIRC, self._low16(fl))

    def p_truncate(self, ln):
        f = self.f
        v = self.val(ln)
        w = max(need(v.lo, v.hi), 64)
        tl = f.ext(v, w)
        cur = self.getf(TRUNC)
        c64 = f.ext(V(cur, 64, -(1 << 63), (1 << 63) - 1), w)
        neg = f.op(f"icmp slt i64 {cur}, 0")
        less = f.op(f"icmp slt i{w} {tl}, {c64}")
        take = f.op(f"or i1 {neg}, {less}")
        self.if_then(take, lambda: self.setf(TRUNC, f.i64(v)))

    def p_modify_field_with_hash_based_offset(self, dst, base, calc, size):
        if calc.get("type") != "calculation":
            raise Unsupported(f"{self.where}: bad calculation reference")
        f = self.f
        h = self.env.calc(self.x, calc.get("value"))  # i64, the algorithm's unsigned result
        hv = V(f.op(f"zext i64 {h} to i128"), 128, 0, U64)
        b, sz = self.val(base), self.val(size)
        bu = self.x.low_bits(b, 64)
        if sz.const is not None:
            szc = (sz.const & U64) or 1
            m = self.x.divmod("%", hv, const(szc))
        else:
            su = self.x.low_bits(sz, 64)
            s = f.ext(su, 128)
            z = f.op(f"icmp eq i128 {s}, 0")
            s = f.op(f"select i1 {z}, i128 1, i128 {s}")
            m = self.x.divmod("%", hv, V(s, 128, 1, U64))
        r = self.x.arith("+", m, bu)
        self.store(dst, r)

    def p_count(self, carr, idx):
        if carr.get("type") != "counter_array":
            raise Unsupported(f"{self.where}: count needs a counter array")
        st = self.env.store
        c, off = st.counter(carr.get("value"))
        i = self.val(idx)
        f = self.f
        if c.size == 0:
            return
        if 0 <= i.lo and i.hi < c.size:
            cond = None
            ii = f.i64(i)
        else:
            w = max(need(i.lo, i.hi), 64)
            x = f.ext(i, w)
            a = f.op(f"icmp sge i{w} {x}, 0")
            b = f.op(f"icmp slt i{w} {x}, {c.size}")
            cond = f.op(f"and i1 {a}, {b}")
            ii = f.i64(i)

        def body():
            cell = f.op(f"add i64 {ii}, {off}")
            P, B = self.x.ptr(st.CNTP), self.x.ptr(st.CNTB)
            n = f.op(f"add i64 {f.load(P, cell)}, 1")
            f.store(P, cell, n)
            nb = f.op(f"add i64 {f.load(B, cell)}, {self.getf(INLEN)}")
            f.store(B, cell, nb)

        if cond is None:
            body()
        else:
            self.if_then(cond, body)

    def _reg(self, rarr):
        if rarr.get("type") != "register_array":
            raise Unsupported(f"{self.where}: expected a register array")
        lane = self.x.lanes.get(id(rarr))
        name = rarr.get("value")
        if lane is not None:
            return lane.reg, lane.slot(self.x), lane.stride
        st = self.env.store
        off, stride = st.reg_offset(name)
        return st.register(name), str(off), stride

    def p_register_read(self, dst, rarr, idx):
        reg, off, stride = self._reg(rarr)
        i = self.val(idx)
        f = self.f
        p, cond = self.x.reg_cell(off, stride, reg, i)
        if p is None:
            return
        hi = (1 << reg.bitwidth) - 1

        def body():
            x = f.op(f"load i64, ptr {p}")
            v = V(f.op(f"zext i64 {x} to i128"), 128, 0, hi) if reg.bitwidth >= 64 else \
                V(x, 64, 0, hi)
            self.store(dst, v)

        if cond is None:
            body()
        else:
            self.if_then(cond, body)

    def p_register_write(self, rarr, idx, src):
        reg, off, stride = self._reg(rarr)
        i = self.val(idx)
        v = self.val(src, low=True)
        f = self.f
        p, cond = self.x.reg_cell(off, stride, reg, i)
        if p is None:
            return
        val = f.i64(self.x.low_bits(v, min(reg.bitwidth, 64)))

        def body():
            f.emit(f"store i64 {val}, ptr {p}")

        if cond is None:
            body()
        else:
            self.if_then(cond, body)


def compile_action(env, a: dict) -> str:
    """An internal function `void @name(ptr F, ptr C, i64 p0, ...)` for one JSON action."""
    rd = a.get("runtime_data", [])
    widths = [int(r["bitwidth"]) for r in rd]
    if any(w > 64 for w in widths):
        raise Unsupported(f"action {a.get('name')!r}: a parameter wider than 64 bits")
    name = env.mod.name("a")
    f = env.mod.fn(name, ["ptr noalias %F", "ptr noalias %C"] +
                   [f"i64 %arg{i}" for i in range(len(widths))])
    params = []
    for i, w in enumerate(widths):
        hi = (1 << w) - 1
        if w == 64:
            params.append(V(f.op(f"zext i64 %arg{i} to i128"), 128, 0, hi))
        else:
            params.append(V(f"%arg{i}", 64, 0, hi))
    ctx = Ctx(f, env.L, env.store, params)
    pc = Prims(ctx, env, f"action {a.get('name')!r}")
    prims = a.get("primitives", [])
    if not any(p.get("op") in ("_jump", "_jump_if_zero") for p in prims):
        pc.run(prims)
        f.retv()
        return name
    # if/else inside the action: a block per jump target (p4c only jumps forward)
    starts = {0}
    for i, p in enumerate(prims):
        if p.get("op") in ("_jump", "_jump_if_zero"):
            tgt = p["parameters"][-1]
            if tgt.get("type") != "hexstr":
                raise Unsupported("a jump to a target known only at run time")
            t = int(parse_hex(tgt["value"]))
            if t <= i:
                raise Unsupported("a backward jump")
            starts.add(t)
            starts.add(i + 1)
    starts = sorted(s for s in starts if 0 <= s <= len(prims))
    labels = {s: f.label("pc") for s in starts}
    end = f.label("end")
    labels[len(prims)] = end
    for bi, s in enumerate(starts):
        f.block(labels[s])
        stop = starts[bi + 1] if bi + 1 < len(starts) else len(prims)
        for p in prims[s:stop]:
            op = p.get("op")
            if op == "_jump":
                f.br(labels[int(parse_hex(p["parameters"][0]["value"]))])
            elif op == "_jump_if_zero":
                ctx.start()
                c = ctx.data(p["parameters"][0])
                z = f.op(f"icmp eq i{c.w} {c.ref}, 0") if c.const is None else \
                    ("true" if c.const == 0 else "false")
                cont = f.label("pc")
                f.cbr(z, labels[int(parse_hex(p["parameters"][1]["value"]))], cont)
                f.block(cont)
            else:
                pc.compile(p)
        f.br(labels.get(stop, end))
    f.block(end)
    f.retv()
    return name


__all__ = ["Prims", "compile_action", "field_range", "leaves"]
