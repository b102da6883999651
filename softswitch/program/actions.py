"""Action primitives (core + simple_switch's primitives.cpp) -> Python statements."""

from __future__ import annotations

import re

from .exprs import Ex, ExprCompiler, cdata, parse_hex
from .layout import (
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
    VLEN,
    Header,
    bad,
)
from .lazy import FALLBACK
from .runtime import HELPERS
from .vector import Unsupported, VectorCompiler, find_groups

U64 = (1 << 64) - 1


class Env:
    """What primitives may refer to, shared by all actions of one program."""

    def __init__(self, layout, mod, registers, counters, meters, calcs, drop_port):
        self.L = layout
        self.mod = mod
        self.registers = registers  # name -> Register
        self.counters = counters  # name -> Counter (indirect)
        self.meters = meters  # name -> MeterArray
        self.calcs = calcs  # name -> global name of the compiled calculation function
        self.drop_port = drop_port
        self.banks: dict = {}  # register name -> (vector.Bank, column)
        self.vectorize = False
        self.nprng = None  # global name of the vector.RandomBatch


class PrimitiveCompiler:
    def __init__(self, env: Env, local_widths: list[int] | None = None, where: str = "action"):
        self.env = env
        self.L = env.L
        self.mod = env.mod
        self.x = ExprCompiler(env.L, env.mod, local_widths, env.registers)
        self.where = where
        self._tmp = 0

    def tmp(self) -> str:
        self._tmp += 1
        return f"t{self._tmp}"

    # -- parameters -------------------------------------------------------------

    def val(self, p) -> Ex:
        t = p.get("type")
        if t in ("field", "hexstr", "expression", "stack_field", "runtime_data", "local",
                 "register", "bool"):
            return self.x.data(p)
        raise bad(f"{self.where}: parameter of type {t!r} is not a value")

    def header(self, p) -> Ex:
        t = p.get("type")
        if t == "header":
            h = self.L.header(p["value"])
            return Ex(str(h.base), "header", header=h, htype=h.htype)
        if t == "expression":
            e = self.x.compile(p)
            if e.kind == "header":
                return e
        raise bad(f"{self.where}: expected a header, got {t!r}")

    def stack(self, p):
        if p.get("type") != "header_stack":
            raise bad(f"{self.where}: expected a header stack")
        return self.L.stack(p["value"])

    def named(self, p, kind: str, table: dict):
        if p.get("type") != kind or p.get("value") not in table:
            raise bad(f"{self.where}: unknown {kind} {p.get('value')!r}")
        return table[p["value"]]

    def simple(self, e: Ex, out: list[str]) -> str:
        """e's code if cheap to repeat, else a temporary holding it."""
        if e.const is not None or e.code.startswith("F[") and e.code.count("[") == 1 \
                or e.code.isidentifier():
            return e.code
        t = self.tmp()
        out.append(f"{t} = {e.code}")
        return t

    # -- header validity ------------------------------------------------------------

    def set_valid(self, h: Ex) -> list[str]:
        out = [f"F[{h.code}] = 1"]
        if h.header is not None and h.header.union is not None:
            u = self.L.unions[h.header.union]
            out += [f"F[{o.base}] = 0" for o in u.headers if o is not h.header]
        return out

    def zero_fields(self, h: Ex) -> list[str]:
        n = len(h.htype.fields)
        if n == 0:
            return []
        z = self.mod.const((0,) * n, "z")
        if h.header is not None:
            b = h.header.base
            # one statement per field, so the action body can keep them in locals
            return [f"F[{i}] = 0" for i in range(b + 1, b + 1 + n)]
        return [f"b_ = {h.code}", f"F[b_ + 1:b_ + {1 + n}] = {z}"]

    def copy_header(self, dst: Ex, src: Ex) -> list[str]:
        n = len(dst.htype.fields)
        if src.htype is not dst.htype and len(src.htype.fields) != n:
            raise bad(f"{self.where}: assign_header between different header types")
        out = []
        sb, db = src.code, dst.code
        if src.header is None:
            out.append(f"sb_ = {sb}")
            sb = "sb_"
        if dst.header is None:
            out.append(f"db_ = {db}")
            db = "db_"
        body = [f"F[{db} + 1:{db} + {1 + n}] = F[{sb} + 1:{sb} + {1 + n}]"] if n else []
        out.append(f"if F[{sb}]:")
        out += ["    " + s for s in body + self.set_valid(Ex(db, "header", header=dst.header,
                                                            htype=dst.htype))]
        out.append("else:")
        out.append(f"    F[{db}] = 0")
        return out

    # -- stores -----------------------------------------------------------------------

    def store(self, p, e: Ex) -> list[str]:
        target, fi = self.x.lvalue(p)
        if fi.name == "$valid$":
            return []
        value = self.x.store_value(fi, e)
        return [f"{target} = {tabulate(self, value) or value}"]

    def sm_field(self, hdr: Header | None, name: str):
        """A standard metadata field, by name in the given header or via aliases."""
        if hdr is not None and name in hdr.htype.offsets:
            return hdr.finfo(name), hdr.slot(name)
        return self.L.resolve(name)

    # -- primitives --------------------------------------------------------------------

    def compile(self, prim: dict) -> list[str]:
        op = prim.get("op")
        ps = prim.get("parameters", [])
        fn = getattr(self, "p_" + str(op), None)
        if fn is None:
            raise bad(f"{self.where}: unsupported primitive {op!r}")
        self.x.start(ps)
        try:
            lines = fn(*ps)
        except TypeError as e:
            raise bad(f"{self.where}: wrong parameters for primitive {op!r}: {e}") from None
        return self.x.take_pre() + lines

    def p_assign(self, dst, src):
        if dst.get("type") == "header":
            return self.p_assign_header(dst, src)
        return self.store(dst, self.val(src))

    p_modify_field = p_assign

    def p_assign_VL(self, dst, src):  # noqa: N802 - BMv2's primitive name
        """A varbit field takes the other's value and length."""
        slots = []
        for p in (dst, src):
            if p.get("type") != "field":
                raise bad(f"{self.where}: assign_VL needs varbit fields")
            h, fi, slot = self.L.field(p["value"][0], p["value"][1])
            if h.htype.varbit is None or h.htype.fields[h.htype.varbit] is not fi:
                raise bad(f"{self.where}: assign_VL of {p['value']!r}, which is not varbit")
            slots.append((slot, h.slot(VLEN), fi.mask))
        (dv, dl, dm), (sv, sl, _) = slots
        return [f"F[{dl}] = min(F[{sl}], {dm.bit_length()})", f"F[{dv}] = F[{sv}] & {dm}"]

    def p_assign_header(self, dst, src):
        return self.copy_header(self.header(dst), self.header(src))

    p_copy_header = p_assign_header

    def p_assign_union(self, dst, src):
        du = self.L.unions.get(dst.get("value"))
        su = self.L.unions.get(src.get("value"))
        if du is None or su is None or len(du.headers) != len(su.headers):
            raise bad(f"{self.where}: bad assign_union")
        out = []
        for d, s in zip(du.headers, su.headers, strict=True):
            out += self.copy_header(Ex(str(d.base), "header", header=d, htype=d.htype),
                                    Ex(str(s.base), "header", header=s, htype=s.htype))
        return out

    def p_assign_header_stack(self, dst, src):
        d, s = self.stack(dst), self.stack(src)
        if d.size != s.size:
            raise bad(f"{self.where}: assign_header_stack between stacks of different sizes")
        out = [f"F[{d.next_slot}] = F[{s.next_slot}]"]
        for dh, sh in zip(d.headers, s.headers, strict=True):
            out += self.copy_header(Ex(str(dh.base), "header", header=dh, htype=dh.htype),
                                    Ex(str(sh.base), "header", header=sh, htype=sh.htype))
        return out

    def _union_stack_op(self, st_p, num_p, push: bool):
        us = self.L.union_stacks.get(st_p.get("value"))
        if us is None:
            raise bad(f"{self.where}: unknown header union stack {st_p.get('value')!r}")
        n = self.val(num_p)
        columns = []
        for k in range(len(us.unions[0].headers)):
            heads = [u.headers[k] for u in us.unions]
            if any(h.htype is not heads[0].htype for h in heads):
                raise bad(f"{self.where}: header union stack {us.name!r} has mixed members")
            columns.append((tuple(h.base for h in heads), 1 + len(heads[0].htype.fields)))
        cols = self.mod.const(tuple(columns), "uc")
        return [f"_ustack_shift(F, {cols}, {n.code}, {us.next_slot}, {push})"]

    def _stack_op(self, fn, st_p, num_p):
        if st_p.get("type") == "header_union_stack":
            return self._union_stack_op(st_p, num_p, fn == "_stack_push")
        st = self.stack(st_p)
        n = self.val(num_p)
        hb = self.x.stack_bases(st)
        return [f"{fn}(F, {hb}, {1 + len(st.htype.fields)}, {n.code}, {st.next_slot})"]

    def p_push(self, st, num):
        return self._stack_op("_stack_push", st, num)

    def p_pop(self, st, num):
        return self._stack_op("_stack_pop", st, num)

    def p_exit(self):
        return [f"F[{EXIT}] = 1"]

    def p_no_op(self):
        return []

    def _assert(self, cond, what):
        c = self.val(cond)
        lg = self.mod.globals["_log_error"]
        name = self.mod.bind(lg, "logerr")
        msg = repr(f"{what} failed in {self.where}; packet dropped")
        return [f"if {c.code} == 0:", f"    {name}({msg})", f"    F[{ABORT}] = 1",
                f"    F[{EXIT}] = 1"]

    def p_assert(self, cond):
        return self._assert(cond, "assert")

    def p_assume(self, cond):
        return self._assert(cond, "assume")

    def p_log_msg(self, fmt, args):
        if fmt.get("type") != "string":
            raise bad(f"{self.where}: log_msg needs a format string")
        vals = []
        if args.get("type") == "parameters_vector":
            vals = [self.val(a).code for a in args["value"]]
        lg = self.mod.bind(self.mod.globals["_log_msg"], "logmsg")
        tup = "(" + "".join(v + ", " for v in vals) + ")"
        return [f"{lg}({fmt['value']!r}, {tup})"]

    def p_modify_field_rng_uniform(self, dst, lo, hi):
        lo_e, hi_e = self.val(lo), self.val(hi)
        target, fi = self.x.lvalue(dst)
        rnd = self.mod.bind(self.mod.globals["_rng"], "rng")
        if lo_e.const is not None and hi_e.const is not None:
            lo_c, hi_c = lo_e.const & U64, hi_e.const & U64
            if lo_c > hi_c:
                return []
            if lo_c == 0 and (hi_c + 1) & hi_c == 0:
                e = Ex(f"{rnd}.getrandbits({hi_c.bit_length()})", "data", None, hi_c.bit_length())
            else:
                e = Ex(f"{rnd}.randint({lo_c}, {hi_c})", "data", None, hi_c.bit_length())
            return [f"{target} = {self.x.store_value(fi, e)}"]
        out = [f"lo_ = ({lo_e.code}) & {U64}", f"hi_ = ({hi_e.code}) & {U64}", "if lo_ <= hi_:"]
        e = Ex(f"{rnd}.randint(lo_, hi_)", "data")
        out.append(f"    {target} = {self.x.store_value(fi, e)}")
        return out

    def _binop(self, dst, a, b, op):
        e = self.x.arith(op, self.val(a), self.val(b))
        return self.store(dst, e)

    def p_add_to_field(self, f, d):
        return self._binop(f, f, d, "+")

    def p_subtract_from_field(self, f, d):
        return self._binop(f, f, d, "-")

    def p_add(self, f, a, b):
        return self._binop(f, a, b, "+")

    def p_subtract(self, f, a, b):
        return self._binop(f, a, b, "-")

    def p_bit_xor(self, f, a, b):
        return self._binop(f, a, b, "^")

    def p_bit_or(self, f, a, b):
        return self._binop(f, a, b, "|")

    def p_bit_and(self, f, a, b):
        return self._binop(f, a, b, "&")

    def p_shift_left(self, f, a, b):
        return self._binop(f, a, b, "<<")

    def p_shift_right(self, f, a, b):
        return self._binop(f, a, b, ">>")

    def _drop(self, hdr: Header | None):
        out = []
        es = self.sm_field(hdr, "egress_spec") if hdr is not None else \
            self.L.resolve("standard_metadata.egress_spec")
        if es is None:
            raise bad(f"{self.where}: mark_to_drop needs standard_metadata.egress_spec")
        fi, slot = es
        out.append(f"F[{slot}] = {self.env.drop_port & fi.mask}")
        mg = self.sm_field(hdr, "mcast_grp") if hdr is not None else \
            self.L.resolve("intrinsic_metadata.mcast_grp")
        if mg is not None:
            out.append(f"F[{mg[1]}] = 0")
        return out

    def p_drop(self):
        return self._drop(None)

    def p_mark_to_drop(self, std):
        h = self.header(std)
        if h.header is None:
            raise bad(f"{self.where}: mark_to_drop needs the standard metadata header")
        return self._drop(h.header)

    def p_generate_digest(self, receiver, learn_id):
        return [f"F[{DIGEST}] = ({self.val(learn_id).code}) & 0xffff"]

    def p_add_header(self, hp):
        h = self.header(hp)
        nb = h.htype.nbits // 8
        out = []
        code = h.code
        if h.header is None:
            out.append(f"hb_ = {code}")
            code = "hb_"
            h = Ex(code, "header", htype=h.htype)
        body = self.zero_fields(h) + self.set_valid(h) + [f"F[{PKTLEN}] += {nb}"]
        out.append(f"if not F[{code}]:")
        out += ["    " + s for s in body]
        return out

    def p_add_header_fast(self, hp):
        return self.set_valid(self.header(hp))

    def p_remove_header(self, hp):
        h = self.header(hp)
        nb = h.htype.nbits // 8
        out = []
        code = h.code
        if h.header is None:
            out.append(f"hb_ = {code}")
            code = "hb_"
        ht = h.htype
        if ht.varbit is not None:  # the varbit's current length counts too
            vl = f"F[{code} + {1 + ht.offsets[VLEN]}]"
            nb = f"(({ht.nbits} + {vl}) >> 3)"
        out += [f"if F[{code}]:", f"    F[{PKTLEN}] -= {nb}", f"    F[{code}] = 0"]
        return out

    def _clone(self, sid, fl):
        s, f = self.val(sid), self.val(fl)
        return [f"F[{CLONE}] = (({s.code}) & 0x7fff) | 0x8000",
                f"F[{CLONE_FL}] = ({f.code}) & 0xffff"]

    def p_clone_ingress_pkt_to_egress(self, sid, fl):
        return self._clone(sid, fl)

    def p_clone_egress_pkt_to_egress(self, sid, fl):
        return self._clone(sid, fl)

    def p_resubmit(self, fl):
        return [f"F[{RESUBMIT}] = ({self.val(fl).code}) & 0xffff"]

    def p_recirculate(self, fl):
        return [f"F[{RECIRC}] = ({self.val(fl).code}) & 0xffff"]

    def p_modify_field_with_hash_based_offset(self, dst, base, calc, size):
        if calc.get("type") != "calculation" or calc.get("value") not in self.env.calcs:
            raise bad(f"{self.where}: unknown calculation {calc.get('value')!r}")
        fn = self.env.calcs[calc["value"]]
        b, sz = self.val(base), self.val(size)
        out = []
        # BMv2 adds in uint64: the sum wraps at 2^64 before a wider field takes it
        if sz.const is not None:
            szc = (sz.const & U64) or 1
            e = Ex(f"((({fn}(F) % {szc}) + (({b.code}) & {U64})) & {U64})", "data")
        else:
            out.append(f"sz_ = (({sz.code}) & {U64}) or 1")
            e = Ex(f"((({fn}(F) % sz_) + (({b.code}) & {U64})) & {U64})", "data")
        return out + self.store(dst, e)

    def p_execute_meter(self, marr, idx, dst):
        m = self.named(marr, "meter_array", self.env.meters)
        name = self.mod.bind(m, "M")
        i = self.val(idx)
        e = Ex(f"{name}.execute({i.code}, F[{INLEN}])", "data", None, 2)
        return self.store(dst, e)

    def p_count(self, carr, idx):
        c = self.named(carr, "counter_array", self.env.counters)
        pk = self.mod.bind(c.packets, "Cp")
        by = self.mod.bind(c.bytes, "Cb")
        out = []
        i = self.simple(self.val(idx), out)
        out += [f"if {i} < {c.size}:", f"    {pk}[{i}] += 1", f"    {by}[{i}] += F[{INLEN}]"]
        return out

    def p_register_read(self, dst, rarr, idx):
        r = self.named(rarr, "register_array", self.env.registers)
        name = self.mod.bind(r.values, "R")
        out = []
        i = self.simple(self.val(idx), out)
        # a register held in a vector bank is a numpy column: its cells become Python ints
        cell = f"int({name}[{i}])" if r.name in self.env.banks else f"{name}[{i}]"
        e = Ex(cell, "data", None, r.bitwidth)
        st = self.store(dst, e)
        out.append(f"if {i} < {r.size}:")
        out += ["    " + s for s in st] or ["    pass"]
        return out

    def p_register_write(self, rarr, idx, src):
        r = self.named(rarr, "register_array", self.env.registers)
        name = self.mod.bind(r.values, "R")
        out = []
        i = self.simple(self.val(idx), out)
        v = self.val(src)
        m = (1 << r.bitwidth) - 1
        code = v.code if v.bits is not None and v.bits <= r.bitwidth else f"({v.code}) & {m}"
        out += [f"if {i} < {r.size}:", f"    {name}[{i}] = {code}"]
        return out

    def p_truncate(self, ln):
        v = self.val(ln)
        out = [f"tl_ = {v.code}", f"if F[{TRUNC}] < 0 or tl_ < F[{TRUNC}]:",
               f"    F[{TRUNC}] = tl_"]
        return out


# Pure operations an expression may use and still be tabulated.
_PURE = re.compile(r"F\[\d+\]|\bp\d+\b|0x[0-9a-f]+|\d+|[-+*&|^~<>%/()=!, ]+|"
                   r"\b(?:if|else|and|or|not|True|False|min|max|_shl|_shr|_mod|_div|_tcm|"
                   r"_usatc|_satc)\b")
_VAR = re.compile(r"F\[\d+\]|\bp\d+\b")
_OPS = re.compile(r"[-+*&|^~%/]|<<|>>|\bif\b")
MAX_TABLE_BITS = 10
MAX_JUMP_STEPS = 100_000


def tabulate(pc: PrimitiveCompiler, code: str) -> str | None:
    """A table lookup replacing a pure expression of one narrow unsigned input.

    E.g. a decode of an 8-bit code into a 32-bit value becomes `tab[F[12]]`:
    the expression is evaluated once per possible input at load time. Tables
    are shared between expressions that differ only in their input.
    """
    found = set(_VAR.findall(code))
    if len(found) != 1 or len(_OPS.findall(code)) < 4:
        return None
    if _PURE.sub("", code).strip():
        return None  # something that is not plainly pure arithmetic
    var = found.pop()
    if var.startswith("F["):
        fi = pc.L.slot_info().get(int(var[2:-1]))
        if fi is None or fi.signed:
            return None
        width = fi.width
    else:
        width = pc.x.locals_widths[int(var[1:])]
    if width > MAX_TABLE_BITS:
        return None
    norm = code.replace(var, "x") if var.startswith("F[") else re.sub(rf"\b{var}\b", "x", code)
    cache = pc.mod.globals.setdefault("__tables__", {})
    name = cache.get((norm, width))
    if name is None:
        try:
            fn = eval(f"lambda x: {norm}", dict(HELPERS))  # noqa: S307 - generated, pure
            table = tuple(fn(v) for v in range(1 << width))
        except Exception:
            return None
        name = pc.mod.const(table, "tab")
        cache[(norm, width)] = name
    return f"{name}[{var}]"


def compile_action(env: Env, fname: str, action: dict) -> list[str]:
    """A Python function `fname(F, p0, p1, ...)` for one JSON action."""
    rd = action.get("runtime_data", [])
    widths = [int(r["bitwidth"]) for r in rd]
    pc = PrimitiveCompiler(env, widths, f"action {action.get('name')!r}")
    prims = action.get("primitives", [])
    args = "".join(f", p{i}" for i in range(len(widths)))
    head = [f"def {fname}(F{args}):"]
    jumps = any(p.get("op") in ("_jump", "_jump_if_zero") for p in prims)
    if not jumps:
        groups = find_groups(prims) if env.vectorize else []
        body = []
        vectored = False
        i = 0
        for run in adjacent_runs(groups) + [[(len(prims), 0, 0)]]:
            s = run[0][0]
            for p in prims[i:s]:
                body += pc.compile(p)
            fused = None
            if len(run) > 1:
                fused = vector_group(env, pc, interleave(prims, run), 0,
                                     sum(k for _, k, _ in run), run[0][2], fused=True)
            for s, k, m in [] if fused is not None else run:
                if m:
                    vec = vector_group(env, pc, prims, s, k, m) if pays(prims[s:s + k], m) \
                        else None
                    vectored |= vec is not None
                    body += with_fallback(pc, vec, prims[s:s + k * m])
            if fused is not None:
                vectored = True
                body += with_fallback(pc, fused, prims[s:run[-1][0] + run[-1][1] * run[-1][2]])
            i = run[-1][0] + run[-1][1] * run[-1][2]
        if vectored:
            return head + ["    " + s for s in zero_runs(pc.mod, body) or ["pass"]]
        local = localize(body)
        return head + ["    " + s for s in (zero_runs(pc.mod, body) if local is body else local)]
    # Jumps (if/else inside actions): basic blocks dispatched on a program counter.
    starts = {0}
    for i, p in enumerate(prims):
        if p.get("op") in ("_jump", "_jump_if_zero"):
            tgt = p["parameters"][-1]
            starts.add(int(parse_hex(tgt["value"])) if tgt.get("type") == "hexstr" else -1)
            starts.add(i + 1)
    if -1 in starts:
        raise bad(f"action {action.get('name')!r}: jump target must be a constant")
    starts = sorted(s for s in starts if 0 <= s <= len(prims))
    # steps bounds a program whose jumps loop (p4c only jumps forward)
    body = ["pc = 0", "steps = 0", "while True:", "    steps += 1",
            f"    if steps > {MAX_JUMP_STEPS}:", f"        F[{ABORT}] = 1",
            f"        F[{EXIT}] = 1", "        return"]
    for bi, s in enumerate(starts):
        end = starts[bi + 1] if bi + 1 < len(starts) else len(prims)
        blk = []
        fell = True
        for p in prims[s:end]:
            op = p.get("op")
            if op == "_jump":
                tgt = int(parse_hex(p["parameters"][0]["value"]))
                blk.append(f"pc = {tgt}")
                blk.append("continue")
                fell = False
            elif op == "_jump_if_zero":
                c = pc.val(p["parameters"][0])
                tgt = int(parse_hex(p["parameters"][1]["value"]))
                blk += [f"if ({c.code}) == 0:", f"    pc = {tgt}", "    continue"]
            else:
                blk += pc.compile(p)
        if fell:
            blk += [f"pc = {end}", "continue"] if end < len(prims) else ["return"]
        cond = "if" if bi == 0 else "elif"
        body.append(f"    {cond} pc == {s}:")
        body += ["        " + x for x in blk]
    body.append("    else:")
    body.append("        return")
    return head + ["    " + s for s in body]


WIDE_LANES = 512  # lanes from which a one-statement template pays in numpy
BANK_WRITE_LANES = 32  # lanes from which one register write per lane pays


def pays(template: list, m: int) -> bool:
    """Whether numpy beats the scalar code: a lane doing one copy, lookup or register write
    costs less in Python than moving its values into an array and back, unless there are
    many lanes (a register write per lane costs a numpy item store in the scalar code)."""
    if len(template) > 1 or template[0].get("op") == "register_read":
        return True
    if template[0].get("op") == "register_write":
        return m >= BANK_WRITE_LANES
    return m >= WIDE_LANES


def adjacent_runs(groups: list) -> list[list[tuple[int, int, int]]]:
    """Groups split into runs of adjacent groups with the same number of lanes."""
    runs: list[list[tuple[int, int, int]]] = []
    for g in groups:
        last = runs[-1][-1] if runs else None
        if last is not None and last[2] == g[2] and last[0] + last[1] * last[2] == g[0]:
            runs[-1].append(g)
        else:
            runs.append([g])
    return runs


def interleave(prims: list, run: list) -> list:
    """The primitives of adjacent groups of m lanes as one group whose template is their
    templates one after the other: lane j runs its part of each group in turn."""
    m = run[0][2]
    return [p for j in range(m) for s, k, _ in run for p in prims[s + j * k:s + (j + 1) * k]]


def with_fallback(pc: PrimitiveCompiler, vec, prims: list) -> list[str]:
    """A group's vector code, guarded by its register bounds with the scalar code as the
    alternative; the scalar code alone when `vec` is None."""
    scalar = []
    for p in prims:
        scalar += pc.compile(p)
    if vec is None:
        return scalar
    pre, guard, lines = vec
    if guard is None:
        return pre + lines
    return pre + [f"if {guard}:"] + ["    " + x for x in lines] + ["else:" + FALLBACK] + \
        ["    " + x for x in scalar]


def vector_group(env: Env, pc: PrimitiveCompiler, prims: list, s: int, k: int, m: int,
                 fused: bool = False):
    """(lines before the guard, guard or None, vector lines) for a group, or None when it
    must run as scalar code. fused: the group interleaves adjacent groups (interleave()),
    exact only when no lane-invariant location is written."""
    try:
        vc = VectorCompiler(pc, env.banks, env.nprng, prims, s, k, m)
        lines = vc.compile()
        if fused and vc.written_inv:
            return None
    except Unsupported:
        return None
    except Exception:  # noqa: BLE001 - an optimisation: the scalar code is always right
        return None
    return vc.pre, vc.guard_code(), lines


_ZERO = re.compile(r"^(\s*)F\[(\d+)\] = 0$")
MIN_ZERO_RUN = 16


def zero_runs(mod, body: list[str]) -> list[str]:
    """Runs of `F[i] = 0` over consecutive slots (a header made valid, say) as one slice
    store, where the body does not keep fields in locals."""
    out: list[str] = []
    run: list = []  # (indent, first slot, count)

    def flush():
        if run:
            ind, lo, n = run
            if n >= MIN_ZERO_RUN:
                out.append(f"{ind}F[{lo}:{lo + n}] = {mod.const((0,) * n, 'z')}")
            else:
                out.extend(f"{ind}F[{i}] = 0" for i in range(lo, lo + n))
            run.clear()

    for ln in body:
        mt = _ZERO.match(ln)
        if mt and run and run[0] == mt.group(1) and run[1] + run[2] == int(mt.group(2)):
            run[2] += 1
            continue
        flush()
        if mt:
            run.extend((mt.group(1), int(mt.group(2)), 1))
        else:
            out.append(ln)
    flush()
    return out


def _runs(slots: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs [lo, hi) of sorted slot numbers."""
    runs: list[tuple[int, int]] = []
    for x in slots:
        if runs and runs[-1][1] == x:
            runs[-1] = (runs[-1][0], x + 1)
        else:
            runs.append((x, x + 1))
    return runs


def localize(body: list[str]) -> list[str]:
    """Keep constant-index fields in Python locals for the whole action body.

    Only when every F access in the body uses a constant index and F is not
    passed to any call, so no other code can observe F while the body runs.
    Locals are loaded and stored back with one slice per run of slots.
    """
    text = "\n".join(body)
    if not text:
        return ["pass"]
    consts = re.findall(r"\bF\[(\d+)\]", text)
    if not consts or re.search(r"\bF\[(?!\d+\])", text) or re.search(r"[(,]\s*F\s*[,)]", text):
        return body
    used = sorted(set(int(c) for c in consts))
    written = set(int(m) for m in re.findall(r"\bF\[(\d+)\]\s*(?:[+\-]?=)(?!=)", text))
    if len(consts) <= len(used) + len(written):
        return body  # each slot touched about once: locals would only add work
    new = re.sub(r"\bF\[(\d+)\]", lambda m: f"f{m.group(1)}", text).split("\n")
    pro, epi = [], []
    for lo, hi in _runs(used):
        names = ", ".join(f"f{i}" for i in range(lo, hi))
        pro.append(f"{names}, = F[{lo}:{hi}]" if hi - lo > 1 else f"f{lo} = F[{lo}]")
    for lo, hi in _runs(sorted(written)):
        names = ", ".join(f"f{i}" for i in range(lo, hi))
        epi.append(f"F[{lo}:{hi}] = ({names},)" if hi - lo > 1 else f"F[{lo}] = f{lo}")
    return pro + hoist_guards(new, written) + epi


_GUARD = re.compile(r"^(\s*)if (f\d+) < (\d+):$")


def hoist_guards(lines: list[str], written: set[int]) -> list[str]:
    """Check repeated bounds guards on an unchanging index once for the whole body.

    Register accesses are guarded (`if f12 < 1024:`); when the index is not
    written in the body, one test up front selects a copy of the body without
    the guards, and the original runs only when some index is out of range.
    """
    guards = set()
    for ln in lines:
        m = _GUARD.match(ln)
        if m and int(m.group(2)[1:]) not in written:
            guards.add((m.group(2), int(m.group(3))))
    if not guards or sum(1 for ln in lines if _GUARD.match(ln)) < 4:
        return lines
    fast: list[str] = []
    drop_indent = []  # indents of removed guards still open
    for ln in lines:
        indent = len(ln) - len(ln.lstrip())
        while drop_indent and indent <= drop_indent[-1]:
            drop_indent.pop()
        m = _GUARD.match(ln)
        if m and (m.group(2), int(m.group(3))) in guards:
            drop_indent.append(indent)
            continue
        fast.append(ln[4 * len(drop_indent):] if drop_indent else ln)
    cond = " and ".join(f"{v} < {k}" for v, k in sorted(guards))
    return [f"if {cond}:"] + ["    " + ln for ln in fast] + ["else:"] + \
        ["    " + ln for ln in lines]


__all__ = ["Env", "PrimitiveCompiler", "compile_action", "cdata"]
