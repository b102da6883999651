"""Bytes in and out: the parser, the deparser, calculations over field lists, checksums.

Headers are read and written at a byte position known only at run time, their fields at
offsets known at load time: a byte-aligned field of 8, 16, 32 or 64 bits is one load or
store (byte-swapped), others are assembled from their bytes, and a run of at least
MIN_RUN such fields of one width is a loop.
"""

from __future__ import annotations

from ..program.exprs import parse_hex
from ..program.layout import PAYLOAD, HeaderType
from .actions import Prims
from .exprs import Ctx
from .ir import Fn, Unsupported, V, const

MIN_RUN = 16
MAX_STATES = 4096  # parser transitions per packet before ParserTimeout (parsers.py)
_BSWAP = {16: "i16", 32: "i32", 64: "i64"}


def intrinsics() -> list[str]:
    return [f"declare {t} @llvm.bswap.{t}({t})" for t in _BSWAP.values()]


def field_plan(ht: HeaderType) -> list[tuple]:
    """How to move a header's wire fields: ("run", first field, count, width, bit offset),
    ("word", field, width, bit offset) or ("bits", field, width, bit offset)."""
    out: list[tuple] = []
    fields = ht.wire_fields
    off = 0
    i = 0
    while i < len(fields):
        w = fields[i].width
        if w in (8, 16, 32, 64) and off % 8 == 0:
            n = 1
            while i + n < len(fields) and fields[i + n].width == w and \
                    fields[i + n].signed == fields[i].signed:
                n += 1
            if n >= MIN_RUN:
                out.append(("run", i, n, w, off))
                off += n * w
                i += n
                continue
            out.append(("word", i, w, off))
        else:
            out.append(("bits", i, w, off))
        off += w
        i += 1
    return out


class Bytes:
    """Field <-> byte moves inside one function."""

    def __init__(self, f: Fn):
        self.f = f

    def read_word(self, buf: str, byte: str, w: int) -> str:
        """The unsigned big-endian w-bit word at buf[byte] as i64."""
        f = self.f
        p = f.op(f"getelementptr inbounds i8, ptr {buf}, i64 {byte}", "p")
        x = f.op(f"load i{w}, ptr {p}, align 1")
        if w == 8:
            return f.op(f"zext i8 {x} to i64")
        x = f.op(f"call i{w} @llvm.bswap.i{w}(i{w} {x})")
        return x if w == 64 else f.op(f"zext i{w} {x} to i64")

    def write_word(self, buf: str, byte: str, w: int, v: str) -> None:
        f = self.f
        p = f.op(f"getelementptr inbounds i8, ptr {buf}, i64 {byte}", "p")
        x = v if w == 64 else f.op(f"trunc i64 {v} to i{w}")
        if w > 8:
            x = f.op(f"call i{w} @llvm.bswap.i{w}(i{w} {x})")
        f.emit(f"store i{w} {x}, ptr {p}, align 1")

    def read_bits(self, buf: str, pos: str, off: int, w: int) -> str:
        """w bits (w <= 64) at bit `off` from byte `pos`, unsigned, as i64."""
        f = self.f
        first, last = off // 8, (off + w - 1) // 8
        n = last - first + 1
        acc = "0"
        for k in range(n):
            b = self.read_word(buf, self.add(pos, first + k), 8)
            b = f.op(f"zext i64 {b} to i128")
            acc = b if acc == "0" else f.op(f"or i128 {f.op(f'shl i128 {acc}, 8')}, {b}")
        sh = 8 * n - (off % 8) - w
        if sh:
            acc = f.op(f"lshr i128 {acc}, {sh}")
        acc = f.op(f"and i128 {acc}, {(1 << w) - 1}")
        return f.op(f"trunc i128 {acc} to i64")

    def add(self, pos: str, k: int) -> str:
        if k == 0:
            return pos
        if pos.lstrip("-").isdigit():
            return str(int(pos) + k)
        return self.f.op(f"add i64 {pos}, {k}")

    def signed(self, x: str, w: int) -> str:
        if w >= 64:
            return x
        f = self.f
        return f.op(f"ashr i64 {f.op(f'shl i64 {x}, {64 - w}')}, {64 - w}")

    def extract(self, ht: HeaderType, base: str, buf: str, pos: str, add_slot) -> None:
        """The header's wire fields from buf[pos...] into F (base: its validity slot)."""
        f = self.f
        fields = ht.wire_fields
        for step in field_plan(ht):
            if step[0] == "run":
                _, i0, n, w, off = step
                sg = fields[i0].signed
                self.loop(n, lambda j, i0=i0, w=w, off=off, sg=sg: self._read_lane(
                    buf, pos, base, i0, w, off, j, sg, add_slot))
                continue
            _, i, w, off = step
            x = self.read_word(buf, self.add(pos, off // 8), w) if step[0] == "word" else \
                self.read_bits(buf, pos, off, w)
            if fields[i].signed:
                x = self.signed(x, w)
            f.store("%F", add_slot(base, 1 + i), x)

    def _read_lane(self, buf, pos, base, i0, w, off, j, sg, add_slot):
        f = self.f
        byte = f.op(f"add i64 {self.add(pos, off // 8)}, {f.op(f'mul i64 {j}, {w // 8}')}")
        x = self.read_word(buf, byte, w)
        if sg:
            x = self.signed(x, w)
        f.store("%F", f.op(f"add i64 {add_slot(base, 1 + i0)}, {j}"), x)

    def loop(self, n: int, body) -> None:
        f = self.f
        jv = f.local("i64", "0")
        head, blk, done = f.label("run"), f.label("runbody"), f.label("rundone")
        f.br(head)
        f.block(head)
        j = f.op(f"load i64, ptr {jv}", "j")
        f.cbr(f.op(f"icmp slt i64 {j}, {n}"), blk, done)
        f.block(blk)
        body(j)
        f.emit(f"store i64 {f.op(f'add i64 {j}, 1')}, ptr {jv}")
        f.br(head)
        f.block(done)

    def emit_fields(self, ht: HeaderType, base: str, buf: str, pos: str, add_slot,
                    fields=None) -> None:
        """The header's fields (or `fields`: [(slot ref, width)] of one byte-aligned
        segment) into buf[pos...], packed big-endian as on the wire."""
        f = self.f
        if fields is None:
            wf = ht.wire_fields
            plan = field_plan(ht)
            fields = []
            for step in plan:
                if step[0] == "run":
                    _, i0, n, w, off = step
                    fields.append(("run", add_slot(base, 1 + i0), n, w, off))
                else:
                    _, i, w, off = step
                    mask = wf[i].signed
                    fields.append(("one", add_slot(base, 1 + i), w, off, mask))
        acc, nacc, start = None, 0, 0  # pending bits that do not end on a byte
        for item in fields:
            if item[0] == "run":
                _, s0, n, w, off = item
                self.loop(n, lambda j, s0=s0, w=w, off=off: self.write_word(
                    buf, f.op(f"add i64 {self.add(pos, off // 8)}, "
                              f"{f.op(f'mul i64 {j}, {w // 8}')}"), w,
                    f.load("%F", f.op(f"add i64 {s0}, {j}"))))
                continue
            _, slot, w, off, sg = item
            x = f.load("%F", slot) if not isinstance(slot, V) else f.i64(slot)
            if sg and w < 64:
                x = f.op(f"and i64 {x}, {(1 << w) - 1}")
            if acc is None and off % 8 == 0 and w in (8, 16, 32, 64):
                self.write_word(buf, self.add(pos, off // 8), w, x)
                continue
            if acc is None:
                acc, nacc, start = "0", 0, off
            x128 = f.op(f"zext i64 {x} to i128")
            acc = x128 if acc == "0" else f.op(f"or i128 {f.op(f'shl i128 {acc}, {w}')}, {x128}")
            nacc += w
            full = nacc // 8  # whole bytes leave at once: at most 7 bits stay pending
            for k in range(full):
                b = f.op(f"lshr i128 {acc}, {nacc - 8 * (k + 1)}")
                b = f.op(f"trunc i128 {b} to i64")
                self.write_word(buf, self.add(pos, start // 8 + k), 8, b)
            if full:
                start += 8 * full
                nacc -= 8 * full
                acc = f.op(f"and i128 {acc}, {(1 << nacc) - 1}") if nacc else None
        if acc is not None:
            raise Unsupported("a header that does not end on a byte")


# -- the parser ---------------------------------------------------------------------------

def compile_parser(env, p: dict) -> str:
    """`i64 @parse(F, C, D, LD, ptr POS)`: the error (0 for none), the bytes consumed in
    *POS; fields extracted before an error stay, as in the Python tier."""
    L = env.L
    name = env.mod.name("parse")
    f = env.mod.fn(name, ["ptr noalias %F", "ptr noalias %C", "ptr noalias %D", "i64 %LD",
                          "ptr noalias %POS"], "i64")
    ctx = Ctx(f, L, env.store)
    pc = Prims(ctx, env, "parser")
    by = Bytes(f)
    err = L.errors
    states = {s["name"]: s for s in p.get("parse_states", [])}
    labels = {n: f.label("ps") for n in states}
    posv = f.local("i64", "0")
    nst = f.local("i64", "0")
    fail = f.local("i64", "0")
    done, bad = f.label("accept"), f.label("reject")

    def raise_(code) -> None:
        f.emit(f"store i64 {code}, ptr {fail}")
        f.br(bad)

    def check(cond: str, code: int) -> None:
        ok = f.label("ok")
        no = f.label("err")
        f.cbr(cond, no, ok)
        f.block(no)
        raise_(code)
        f.block(ok)

    def pos() -> str:
        return f.op(f"load i64, ptr {posv}", "pos")

    init = p.get("init_state")
    if init is not None and init not in labels:
        raise Unsupported(f"parser: unknown init state {init!r}")
    if init is None:
        f.br(done)
    else:
        f.br(labels[init])
    for sname, s in states.items():
        f.block(labels[sname])
        n = f.op(f"add i64 {f.op(f'load i64, ptr {nst}')}, 1")
        f.emit(f"store i64 {n}, ptr {nst}")
        check(f.op(f"icmp sgt i64 {n}, {MAX_STATES}"), err["ParserTimeout"])
        for op in s.get("parser_ops", []):
            kind = op.get("op")
            ps = op.get("parameters", [])
            ctx.start()
            if kind == "extract":
                q = ps[0]
                if q.get("type") != "regular":
                    raise Unsupported(f"parser: extract of a {q.get('type')}")
                h = L.header(q["value"])
                ht = h.htype
                if ht.varbit is not None:
                    raise Unsupported("parser: varbit headers")
                nb = ht.nbits // 8
                at = pos()
                check(f.op(f"icmp sgt i64 {f.op(f'add i64 {at}, {nb}')}, %LD"),
                      err["PacketTooShort"])
                by.extract(ht, str(h.base), "%D", at, ctx.add_slot)
                pc.set_valid(ctx.header_of({"type": "header", "value": h.name}))
                if nb:
                    f.emit(f"store i64 {f.op(f'add i64 {at}, {nb}')}, ptr {posv}")
            elif kind == "set":
                dst, src = ps
                if dst.get("type") != "field":
                    raise Unsupported("parser: set needs a field destination")
                if src.get("type") == "lookahead":
                    e = lookahead(f, ctx, pos(), src["value"], check, err)
                    pc.store(dst, e)
                else:
                    pc.store(dst, ctx.data(src))
            elif kind == "verify":
                c = ctx.boolean(ps[0])
                e = ps[1]
                code = const(int(e)) if isinstance(e, int) else ctx.data(e)
                if c.const is None or not c.const:
                    no, ok = f.label("verr"), f.label("vok")
                    f.cbr(c.ref, ok, no)
                    f.block(no)
                    raise_(f.i64(code))
                    f.block(ok)
            elif kind == "primitive":
                pc.compile(ps[0])
            elif kind in ("shift", "advance"):
                nbits = const(int(ps[0]) * 8) if kind == "shift" else ctx.data(ps[0])
                w = max(nbits.w, 64)
                a = f.ext(nbits, w)
                neg = f.op(f"icmp slt i{w} {a}, 0")
                odd = f.op(f"icmp ne i{w} {f.op(f'and i{w} {a}, 7')}, 0")
                check(f.op(f"or i1 {neg}, {odd}"), err["ParserInvalidArgument"])
                nby = f.op(f"ashr i{w} {a}, 3")
                at = pos()
                left = f.op(f"sext i64 {f.op(f'sub i64 %LD, {at}')} to i{w}") if w > 64 else \
                    f.op(f"sub i64 %LD, {at}")
                check(f.op(f"icmp slt i{w} {left}, {nby}"), err["PacketTooShort"])
                f.emit(f"store i64 {f.op(f'add i64 {at}, {f.i64(V(nby, w, 0, 1))}')}, "
                       f"ptr {posv}")
            else:
                raise Unsupported(f"parser: op {kind!r}")
        transition(env, f, ctx, s, labels, done, pos, check, err)
    f.block(done)
    f.emit(f"store i64 {pos()}, ptr %POS")
    f.retv("0")
    f.block(bad)
    f.emit(f"store i64 {pos()}, ptr %POS")
    f.retv(f.op(f"load i64, ptr {fail}"))
    return name


def lookahead(f: Fn, ctx: Ctx, at: str, spec, check, err) -> V:
    off, w = int(spec[0]), int(spec[1])
    if w > 64:
        raise Unsupported("a lookahead of more than 64 bits")
    nbytes = (w + 7) // 8
    left = f.op(f"sub i64 %LD, {at}")
    check(f.op(f"icmp slt i64 {left}, {nbytes}"), err["PacketTooShort"])
    bit = f.op(f"add i64 {f.op(f'mul i64 {at}, 8')}, {off}")
    x = f.op(f"call i64 @ns.peek(ptr %D, i64 %LD, i64 {bit}, i64 {w})")
    hi = (1 << w) - 1
    if w == 64:
        return V(f.op(f"zext i64 {x} to i128"), 128, 0, hi)
    return V(x, 64, 0, hi)


def transition(env, f: Fn, ctx: Ctx, s: dict, labels: dict, done: str, pos, check, err):
    def target(t) -> str:
        ns = t.get("next_state")
        if ns is None:
            return done
        if ns not in labels:
            raise Unsupported(f"parser: unknown next state {ns!r}")
        return labels[ns]

    default = done
    cases = []
    for t in s.get("transitions", []):
        typ, val = t.get("type", "hexstr"), t.get("value")
        if typ == "default" or (typ == "hexstr" and val == "default"):
            default = target(t)
        elif typ == "hexstr":
            m = t.get("mask")
            cases.append((parse_hex(val), None if m is None else parse_hex(m), target(t)))
        else:
            raise Unsupported(f"parser: transition type {typ!r}")
    key = s.get("transition_key", [])
    if not key or not cases:
        f.br(default)
        return
    ctx.start()
    parts = []
    for k in key:
        t, v = k.get("type"), k.get("value")
        if t == "field":
            h, fi, slot = ctx.L.field(v[0], v[1])
            x = ctx.load_slot(str(slot), fi)
            if fi.signed:
                x = ctx.low_bits(x, fi.width)
            parts.append((x, fi.width))
        elif t == "lookahead":
            parts.append((lookahead(f, ctx, pos(), v, check, err), int(v[1])))
        else:
            raise Unsupported(f"parser: transition key {t!r}")
    total = sum(((w + 7) // 8) * 8 for _, w in parts)
    k = const(0)
    shift = total
    for x, w in parts:
        shift -= ((w + 7) // 8) * 8
        k = ctx.arith("|", k, ctx.arith("<<", x, const(shift)) if shift else x)
    for v, m, tgt in cases:
        kk = k if m is None else ctx.arith("&", k, const(m))
        c = ctx.compare("eq", kk, const(v if m is None else v & m))
        nxt = f.label("sel")
        f.cbr(c.ref, tgt, nxt)
        f.block(nxt)
    f.br(default)


# -- calculations and checksums -------------------------------------------------------------

def segments(env, c: dict) -> list[tuple]:
    """A calculation's inputs as byte-aligned segments sharing one validity condition:
    (header base or None, [(slot, width, signed) or ("const", value, width)],
    payload?)."""
    L = env.L
    segs: list[list] = []
    payload = False
    for inp in c.get("input", []):
        t = inp.get("type")
        if payload:
            raise Unsupported("calculation input after the payload")
        if t == "field":
            h, fi, slot = L.field(inp["value"][0], inp["value"][1])
            if h.htype.varbit is not None:
                raise Unsupported("varbit fields in a calculation")
            cond = None if h.metadata else h.base
            item = (slot, fi.width, fi.signed)
        elif t == "hexstr":
            w = int(inp["bitwidth"])
            cond, item = None, ("const", parse_hex(inp["value"]) & ((1 << w) - 1), w)
        elif t == "header":
            h = L.header(inp["value"])
            if h.htype.varbit is not None:
                raise Unsupported("varbit headers in a calculation")
            segs.append([h.base, [("header", h)]])
            continue
        elif t == "payload":
            payload = True
            continue
        else:
            raise Unsupported(f"calculation input {t!r}")
        if segs and segs[-1][0] == cond and segs[-1][1][-1][0] != "header":
            segs[-1][1].append(item)
        else:
            segs.append([cond, [item]])
    out = []
    for cond, items in segs:
        bits = sum(it[1].htype.nbits if it[0] == "header" else
                   (it[2] if it[0] == "const" else it[1]) for it in items)
        if bits % 8:
            raise Unsupported("a calculation input that does not end on a byte")
        out.append((cond, items, bits // 8))
    return out, payload


def compile_calculation(env, c: dict) -> str:
    """`i64 @calc(F, C)`: the algorithm over the packed inputs (unsigned, as bits)."""
    algo = env.algorithm(c.get("algo"))
    segs, payload = segments(env, c)
    name = env.mod.name("calc")
    f = env.mod.fn(name, ["ptr noalias %F", "ptr noalias %C"], "i64")
    ctx = Ctx(f, env.L, env.store)
    by = Bytes(f)
    buf = ctx.ptr(env.store.SCRATCH)
    posv = f.local("i64", "0")
    for cond, items, nbytes in segs:
        def body(items=items, nbytes=nbytes):
            at = f.op(f"load i64, ptr {posv}", "pos")
            if items[0][0] == "header":
                h = items[0][1]
                by.emit_fields(h.htype, str(h.base), buf, at, ctx.add_slot)
            else:
                flds, off = [], 0
                for it in items:
                    if it[0] == "const":
                        flds.append(("one", const(it[1]), it[2], off, False))
                        off += it[2]
                    else:
                        slot, w, sg = it
                        flds.append(("one", str(slot), w, off, sg))
                        off += w
                by.emit_fields(None, None, buf, at, ctx.add_slot, flds)
            f.emit(f"store i64 {f.op(f'add i64 {at}, {nbytes}')}, ptr {posv}")
        if cond is None:
            body()
        else:
            v = f.load("%F", str(cond))
            on = f.op(f"icmp ne i64 {v}, 0")
            yes, no = f.label("seg"), f.label("segdone")
            f.cbr(on, yes, no)
            f.block(yes)
            body()
            f.br(no)
            f.block(no)
    n = f.op(f"load i64, ptr {posv}", "n")
    if payload:
        D = ctx.ptr(env.store.DATA)
        ld = f.load("%C", str(env.store.DLEN))
        pp = f.load("%F", str(PAYLOAD))
        plen = f.op(f"sub i64 {ld}, {pp}")
        src = f.op(f"getelementptr inbounds i8, ptr {D}, i64 {pp}", "p")
        dst = f.op(f"getelementptr inbounds i8, ptr {buf}, i64 {n}", "p")
        f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {src}, i64 {plen}, i1 false)")
        n = f.op(f"add i64 {n}, {plen}")
    f.retv(f.op(f"call i64 @{algo}(ptr {buf}, i64 {n})"))
    return name


def compile_checksums(env, checksums: list) -> tuple[str, str]:
    """(`i1 @verify(F, C)`, `void @update(F, C)`) over the JSON checksums."""
    L = env.L
    vf = env.mod.fn(env.mod.name("ck_verify"), ["ptr noalias %F", "ptr noalias %C"], "i1")
    uf = env.mod.fn(env.mod.name("ck_update"), ["ptr noalias %F", "ptr noalias %C"])
    vctx, uctx = Ctx(vf, L, env.store), Ctx(uf, L, env.store)
    errv = vf.local("i1", "false")
    for ck in checksums:
        if ck.get("type", "generic") != "generic":
            raise Unsupported(f"checksum {ck.get('name')!r} of type {ck.get('type')!r}")
        calc = ck.get("calculation")
        h, fi, slot = L.field(ck["target"][0], ck["target"][1])
        if ck.get("verify", True):
            vctx.start()
            on = vctx.valid(str(h.base))
            if ck.get("if_cond") is not None:
                c = vctx.boolean(ck["if_cond"])
                on = V(vf.op(f"and i1 {on.ref}, {c.ref}"), 1, 0, 1)
            yes, no = vf.label("ck"), vf.label("ckdone")
            vf.cbr(on.ref, yes, no)
            vf.block(yes)
            got = vf.op(f"call i64 @{env.calc_fn(calc)}(ptr %F, ptr %C)")
            have = vf.load("%F", str(slot))
            if fi.width < 64:
                have = vf.op(f"and i64 {have}, {fi.mask}")
            ne = vf.op(f"icmp ne i64 {got}, {have}")
            was = vf.op(f"load i1, ptr {errv}")
            vf.emit(f"store i1 {vf.op(f'or i1 {was}, {ne}')}, ptr {errv}")
            vf.br(no)
            vf.block(no)
        if ck.get("update", True):
            uctx.start()
            yes, no = uf.label("up"), uf.label("updone")
            if ck.get("if_cond") is not None:
                c = uctx.boolean(ck["if_cond"])
                uf.cbr(c.ref, yes, no)
            else:
                uf.br(yes)
            uf.block(yes)
            got = uf.op(f"call i64 @{env.calc_fn(calc)}(ptr %F, ptr %C)")
            val = V(uf.op(f"zext i64 {got} to i128"), 128, 0, (1 << 64) - 1)
            uf.store("%F", str(slot), uctx.store_value(fi, val))
            uf.br(no)
            uf.block(no)
    vf.retv(vf.op(f"load i1, ptr {errv}"))
    uf.retv()
    return vf.name, uf.name


def compile_deparser(env, d: dict) -> str:
    """`i64 @deparse(F, C, OUT, CAP)`: the valid headers in order, then the payload; the
    length, or -1 when it would pass CAP bytes."""
    L = env.L
    name = env.mod.name("deparse")
    f = env.mod.fn(name, ["ptr noalias %F", "ptr noalias %C", "ptr noalias %OUT", "i64 %CAP"],
                   "i64")
    ctx = Ctx(f, L, env.store)
    pc = Prims(ctx, env, "deparser")
    for prim in d.get("primitives", []):
        pc.compile(prim)
    by = Bytes(f)
    posv = f.local("i64", "0")
    big = f.label("toobig")
    for hname in d.get("order", []):
        h = L.header(hname)
        if h.htype.varbit is not None:
            raise Unsupported("varbit headers in the deparser")
        nb = h.htype.nbits // 8
        if not nb:
            continue
        on = ctx.valid(str(h.base))
        yes, no, room = f.label("dp"), f.label("dpdone"), f.label("dproom")
        f.cbr(on.ref, yes, no)
        f.block(yes)
        at = f.op(f"load i64, ptr {posv}", "pos")
        end = f.op(f"add i64 {at}, {nb}")
        f.cbr(f.op(f"icmp sgt i64 {end}, %CAP"), big, room)
        f.block(room)
        by.emit_fields(h.htype, str(h.base), "%OUT", at, ctx.add_slot)
        f.emit(f"store i64 {end}, ptr {posv}")
        f.br(no)
        f.block(no)
    at = f.op(f"load i64, ptr {posv}", "pos")
    D = ctx.ptr(env.store.DATA)
    ld = f.load("%C", str(env.store.DLEN))
    pp = f.load("%F", str(PAYLOAD))
    plen = f.op(f"sub i64 {ld}, {pp}")
    end = f.op(f"add i64 {at}, {plen}")
    ok = f.label("pl")
    f.cbr(f.op(f"icmp sgt i64 {end}, %CAP"), big, ok)
    f.block(ok)
    src = f.op(f"getelementptr inbounds i8, ptr {D}, i64 {pp}", "p")
    dst = f.op(f"getelementptr inbounds i8, ptr %OUT, i64 {at}", "p")
    f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {src}, i64 {plen}, i1 false)")
    f.retv(end)
    f.block(big)
    f.retv("-1")
    return name
