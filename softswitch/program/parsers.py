"""BMv2 JSON parsers -> one Python function per parse state.

A state function `ps(F, D, LD, pos)` runs the state's ops on packet bytes D
(length LD) from byte `pos` and returns (next state function or None, pos).
Errors raise ParserError with the v1model error value; the driver records it.
"""

from __future__ import annotations

import struct

from .actions import PrimitiveCompiler
from .exprs import Ex, parse_hex
from .layout import VLEN, HeaderType, bad
from .module import struct_read

MAX_STATES = 4096  # parser transitions per packet before ParserTimeout


def header_reader(mod, ht: HeaderType) -> tuple[str, list[str], bool] | None:
    """(global unpack function, [field expression over tuple t], direct) for a header type.

    direct: the unpacked tuple is exactly the field values in order.
    """
    widths = [f.width for f in ht.fields]
    if not widths or sum(widths) == 0:
        return None
    plan = struct_read(widths, "t")
    if plan is None:
        raise bad(f"header type {ht.name!r} is not a whole number of bytes")
    fmt, exprs = plan
    exprs = list(exprs)
    for i, f in enumerate(ht.fields):
        if f.signed:
            h = 1 << (f.width - 1)
            exprs[i] = f"((({exprs[i]}) ^ {h}) - {h})"
    direct = all(e == f"t[{i}]" for i, e in enumerate(exprs)) and len(exprs) == len(fmt) - 1
    fn = mod.bind(struct.Struct(fmt).unpack_from, "unpack")
    return fn, exprs, direct


class ParserCompiler:
    def __init__(self, env, mod):
        self.env = env
        self.L = env.L
        self.mod = mod
        self.pc = PrimitiveCompiler(env, [], "parser")
        self.x = self.pc.x
        self.err = self.L.errors

    def compile_parser(self, p: dict) -> str:
        """Emits the state functions and a driver; returns the driver's name."""
        pname = p["name"]
        states = {s["name"]: s for s in p.get("parse_states", [])}
        fnames = {n: self.mod.fresh("ps") for n in states}
        for s in states.values():
            self.mod.emit(self.compile_state(s, fnames))
        init = p.get("init_state")
        if init is not None and init not in fnames:
            raise bad(f"parser {pname!r}: unknown init state {init!r}")
        drv = self.mod.fresh("parse")
        first = fnames[init] if init is not None else "None"
        tmo = self.err["ParserTimeout"]
        self.mod.emit([
            f"def {drv}(F, D):",
            "    LD = len(D)",
            "    pos = 0",
            f"    st = {first}",
            "    n = 0",
            "    try:",
            "        while st is not None:",
            "            n += 1",
            f"            if n > {MAX_STATES}:",
            f"                raise ParserError({tmo}, pos)",
            "            st, pos = st(F, D, LD, pos)",
            "    except ParserError as e:",
            "        return e.pos, e.code",
            "    return pos, 0",
        ])
        return drv

    def compile_state(self, s: dict, fnames: dict) -> list[str]:
        name = fnames[s["name"]]
        body: list[str] = []
        for op in s.get("parser_ops", []):
            body += self.parser_op(op)
        body += self.transition(s, fnames)
        return [f"def {name}(F, D, LD, pos):"] + ["    " + b for b in body]

    # -- ops ----------------------------------------------------------------------------

    def too_short(self) -> str:
        return f"raise ParserError({self.err['PacketTooShort']}, pos)"

    def extract_into(self, base: str, ht: HeaderType, header=None) -> list[str]:
        nb = ht.nbits // 8
        out = [f"if pos + {nb} > LD:", "    " + self.too_short()]
        rd = header_reader(self.mod, ht)
        n = len(ht.fields)
        if rd is not None:
            fn, exprs, direct = rd
            lo = f"{base} + 1" if not base.isdigit() else str(int(base) + 1)
            hi = f"{base} + {1 + n}" if not base.isdigit() else str(int(base) + 1 + n)
            if direct:
                out.append(f"F[{lo}:{hi}] = {fn}(D, pos)")
            else:
                out.append(f"t = {fn}(D, pos)")
                out.append(f"F[{lo}:{hi}] = ({', '.join(exprs)},)")
        out += self.pc.set_valid(Ex(base, "header", header=header, htype=ht))
        if nb:
            out.append(f"pos += {nb}")
        return out

    def extract_union_stack(self, stack: str, member: str, nbits: Ex | None = None) -> list[str]:
        """extract(stack.next.member), or extract_VL(stack.next.member, nbits) of a member
        with a varbit field: the member of the next element; the element's other members
        become invalid, as for any union."""
        us = self.L.union_stacks.get(stack)
        if us is None:
            raise bad(f"parser: unknown header union stack {stack!r}")
        heads = [us.member(i, member) for i in range(us.size)]
        ht = heads[0].htype
        if any(h.htype is not ht for h in heads):
            raise bad(f"parser: union stack {stack!r} member {member!r} has mixed types")
        if (ht.varbit is None) != (nbits is None):
            raise bad(f"parser: union stack {stack!r} member {member!r}: extract_VL takes "
                      f"headers with a varbit field, extract those without")
        bases = self.mod.const(tuple(h.base for h in heads), "ub")
        others = self.mod.const(tuple(tuple(o.base for o in us.unions[i].headers
                                            if o is not heads[i]) for i in range(us.size)),
                                "uo")
        return [
            f"n_ = F[{us.next_slot}]",
            f"if n_ >= {us.size}:",
            f"    raise ParserError({self.err['StackOutOfBounds']}, pos)",
            f"b_ = {bases}[n_]",
        ] + (self.extract_into("b_", ht) if nbits is None else
             self.extract_varbit("b_", ht, nbits)) + [
            f"for o_ in {others}[n_]:",
            "    F[o_] = 0",
            f"F[{us.next_slot}] = n_ + 1",
        ]

    def extract_varbit(self, base: str, ht: HeaderType, nbits: Ex, header=None) -> list[str]:
        """BMv2's extract_VL into the header at slot `base` (a number, or a name bound by
        the code before): the varbit field takes `nbits` bits; the header is read as one
        integer, field by field from the top. Its checks, in BMv2's order: a length that is
        not whole bytes is ParserInvalidArgument, a header past the packet's end
        PacketTooShort, a length past the field's maximum HeaderTooShort."""
        vb = ht.fields[ht.varbit]

        def slot(i: int) -> str:
            return str(int(base) + 1 + i) if base.isdigit() else f"{base} + {1 + i}"

        out = [f"vl_ = {nbits.code}",
               "if vl_ % 8:",
               f"    raise ParserError({self.err['ParserInvalidArgument']}, pos)",
               f"nb_ = ({ht.nbits} + vl_ + 7) >> 3",
               "if pos + nb_ > LD:",
               "    " + self.too_short(),
               f"if vl_ > {vb.width}:",
               f"    raise ParserError({self.err['HeaderTooShort']}, pos)",
               "v_ = int.from_bytes(D[pos:pos + nb_], 'big')",
               "r_ = nb_ * 8"]
        for i, f in enumerate(ht.wire_fields):
            w = "vl_" if i == ht.varbit else str(f.width)
            out += [f"r_ -= {w}", f"F[{slot(i)}] = (v_ >> r_) & ((1 << {w}) - 1)"]
            if f.signed:
                hb = 1 << (f.width - 1)
                out.append(f"F[{slot(i)}] = (F[{slot(i)}] ^ {hb}) - {hb}")
        out.append(f"F[{slot(ht.offsets[VLEN])}] = vl_")
        out += self.pc.set_valid(Ex(base, "header", header=header, htype=ht))
        out.append("pos += nb_")
        return out

    def extract_to_stack(self, p: dict, nbits: Ex | None) -> list[str]:
        """extract(stack.next), or extract_VL(stack.next, nbits) of a stack of headers
        with a varbit field."""
        st = self.L.stack(p["value"])
        if (st.htype.varbit is None) != (nbits is None):
            raise bad(f"parser: stack {st.name!r}: extract_VL takes headers with a varbit "
                      f"field, extract those without")
        hb = self.x.stack_bases(st)
        into = self.extract_into("b_", st.htype) if nbits is None else \
            self.extract_varbit("b_", st.htype, nbits)
        return [
            f"n_ = F[{st.next_slot}]",
            f"if n_ >= {st.size}:",
            f"    raise ParserError({self.err['StackOutOfBounds']}, pos)",
            f"b_ = {hb}[n_]",
        ] + into + [f"F[{st.next_slot}] = n_ + 1"]

    def parser_op(self, op: dict) -> list[str]:
        kind = op.get("op")
        ps = op.get("parameters", [])
        if kind == "extract":
            p = ps[0]
            t = p.get("type")
            if t == "regular":
                h = self.L.header(p["value"])
                if h.htype.varbit is not None:  # one-argument extract: an empty varbit
                    return self.extract_varbit(str(h.base), h.htype, Ex("0", "data", 0), h)
                return self.extract_into(str(h.base), h.htype, h)
            if t == "stack":
                return self.extract_to_stack(p, None)
            if t == "union_stack":
                return self.extract_union_stack(*p["value"])
            raise bad(f"parser: unsupported extract type {t!r}")
        if kind == "extract_VL":
            p = ps[0]
            if p.get("type") == "stack":
                return self.extract_to_stack(p, self.x.data(ps[1]))
            if p.get("type") == "union_stack":
                return self.extract_union_stack(*p["value"], self.x.data(ps[1]))
            if p.get("type") != "regular":
                raise bad(f"parser: extract_VL into a {p.get('type')!r} is not supported")
            h = self.L.header(p["value"])
            if h.htype.varbit is None:
                raise bad(f"parser: extract_VL of {h.name!r}, which has no varbit field")
            return self.extract_varbit(str(h.base), h.htype, self.x.data(ps[1]), h)
        if kind == "set":
            dst, src = ps
            if dst.get("type") != "field":
                raise bad("parser: set needs a field destination")
            if src.get("type") == "lookahead":
                off, w = int(src["value"][0]), int(src["value"][1])
                nbytes = (w + 7) // 8
                e = Ex(f"_peek(D, pos * 8 + {off}, {w})", "data", None, w)
                return [f"if LD - pos < {nbytes}:", "    " + self.too_short()] + \
                    self.pc.store(dst, e)
            return self.pc.store(dst, self.x.data(src))
        if kind == "verify":
            cond = self.x.boolean(ps[0])
            e = ps[1]
            code = str(int(e)) if isinstance(e, int) else self.x.data(e).code
            return [f"if not {cond.code}:", f"    raise ParserError({code}, pos)"]
        if kind == "primitive":
            return self.pc.compile(ps[0])
        if kind in ("shift", "advance"):
            if kind == "shift":
                nbits = Ex(str(int(ps[0]) * 8), "data", int(ps[0]) * 8)
            else:
                nbits = self.x.data(ps[0])
            inv = self.err["ParserInvalidArgument"]
            return [
                f"a_ = {nbits.code}",
                "if a_ < 0 or a_ % 8:",
                f"    raise ParserError({inv}, pos)",
                "a_ >>= 3",
                "if LD - pos < a_:",
                "    " + self.too_short(),
                "pos += a_",
            ]
        raise bad(f"parser: unsupported op {kind!r}")

    # -- transitions --------------------------------------------------------------------

    def key_parts(self, key: list) -> tuple[list[str], list[int]]:
        codes, widths = [], []
        for k in key:
            t, v = k.get("type"), k.get("value")
            if t == "field":
                h, fi, slot = self.L.field(v[0], v[1])
                code = f"F[{slot}]"
                if fi.signed:
                    code = f"({code} & {fi.mask})"
                codes.append(code)
                widths.append(fi.width)
            elif t == "stack_field":
                st = self.L.stack(v[0])
                off = self.x.field_offset(st.htype, v[1])
                fi = st.htype.fields[off]
                hb = self.x.stack_bases(st)
                code = f"F[{hb}[F[{st.next_slot}] - 1] + {1 + off}]"
                if fi.signed:
                    code = f"({code} & {fi.mask})"
                codes.append(code)
                widths.append(fi.width)
            elif t == "lookahead":
                off, w = int(v[0]), int(v[1])
                codes.append(f"_peek(D, pos * 8 + {off}, {w})")
                widths.append(w)
            else:
                raise bad(f"parser: unsupported transition key type {t!r}")
        return codes, widths

    def transition(self, s: dict, fnames: dict) -> list[str]:
        def target(t):
            ns = t.get("next_state")
            if ns is None:
                return "None"
            if ns not in fnames:
                raise bad(f"parser: unknown next state {ns!r}")
            return fnames[ns]

        trans = s.get("transitions", [])
        key = s.get("transition_key", [])
        default = "None"
        cases = []
        for t in trans:
            typ = t.get("type", "hexstr")
            val = t.get("value")
            if typ == "default" or (typ == "hexstr" and val == "default"):
                default = target(t)
            elif typ == "hexstr":
                v = parse_hex(val)
                m = t.get("mask")
                cases.append(("v", v, None if m is None else parse_hex(m), target(t)))
            elif typ == "parse_vset":
                vs = self.env.vsets.get(val)
                if vs is None:
                    raise bad(f"parser: unknown parse value set {val!r}")
                m = t.get("mask")
                cases.append(("s", self.mod.bind(vs, "vset"), None if m is None else parse_hex(m),
                              target(t)))
            else:
                raise bad(f"parser: unsupported transition type {typ!r}")
        if not key or not cases:
            return [f"return {default}, pos"]
        codes, widths = self.key_parts(key)
        pad = [((w + 7) // 8) * 8 for w in widths]
        total = sum(pad)
        parts = []
        shift = total
        for c, p in zip(codes, pad, strict=True):
            shift -= p
            parts.append(f"({c} << {shift})" if shift else c)
        out = [f"k = {' | '.join(parts)}"]
        plain = all(kind == "v" and m is None for kind, _, m, _ in cases)
        if plain and len(cases) > 6:
            d = {}
            for _, v, _, tgt in cases:
                d.setdefault(v, tgt)
            items = ", ".join(f"{v}: {tgt}" for v, tgt in d.items())
            table = self.mod.fresh("sel")
            out.append(f"return {table}.get(k, {default}), pos")
            self.mod.deferred.append(f"{table} = {{{items}}}")
            return out
        for kind, v, m, tgt in cases:
            if kind == "v":
                if m is None:
                    out.append(f"if k == {v}:")
                else:
                    out.append(f"if k & {m} == {v & m}:")
            else:
                cond = f"(k & {m}) in {{x & {m} for x in {v}}}" if m is not None else f"k in {v}"
                out.append(f"if {cond}:")
            out.append(f"    return {tgt}, pos")
        out.append(f"return {default}, pos")
        return out
