"""Deparser, named calculations (hash inputs) and checksums -> Python functions."""

from __future__ import annotations

import struct

from .. import hashes
from .actions import PrimitiveCompiler
from .exprs import Ex, parse_hex
from .layout import PAYLOAD, VLEN, HeaderType, bad
from .module import struct_write


def header_writer(mod, ht: HeaderType, base: str) -> str | None:
    """Expression packing the header at `base` (a slot or expression) into bytes."""
    widths = [f.width for f in ht.fields]
    if not widths or sum(widths) == 0:
        return None
    b = int(base) if base.isdigit() else None
    if b is not None and len(widths) > 1 and all(f.width == 8 and not f.signed
                                                 for f in ht.fields):
        return f"bytes(F[{b + 1}:{b + 1 + len(widths)}])"  # bytes() beats struct for 8 bits
    vals = []
    for i, f in enumerate(ht.fields):
        slot = str(b + 1 + i) if b is not None else f"{base} + {1 + i}"
        v = f"F[{slot}]"
        if f.signed:
            v = f"({v} & {f.mask})"
        vals.append(v)
    plan = struct_write(widths, vals)
    if plan is None:
        raise bad(f"header type {ht.name!r} is not a whole number of bytes")
    fmt, items = plan
    fn = mod.bind(struct.Struct(fmt).pack, "pack")
    direct = items == vals and not any(f.signed for f in ht.fields)
    if direct and b is not None:
        return f"{fn}(*F[{b + 1}:{b + 1 + len(widths)}])"
    return f"{fn}({', '.join(items)})"


def varbit_writer(h) -> list[str]:
    """Appends the bytes of a header with a varbit field at its current length."""
    ht = h.htype
    out = [f"vl_ = F[{h.slot(VLEN)}]", "v_ = 0"]
    for i, f in enumerate(ht.wire_fields):
        w = "vl_" if i == ht.varbit else str(f.width)
        out.append(f"v_ = (v_ << {w}) | (F[{h.base + 1 + i}] & ((1 << {w}) - 1))")
    out.append(f"out.append(v_.to_bytes(({ht.nbits} + vl_ + 7) >> 3, 'big'))")
    return out


def compile_calculation(env, mod, c: dict) -> str:
    """A function calc(F) -> int for one JSON calculation (BMv2 BufBuilder + hash)."""
    L = env.L
    algo = c.get("algo")
    fn_algo = hashes.algorithm(algo)
    if fn_algo is None:
        raise bad(f"calculation {c.get('name')!r}: unsupported algorithm {algo!r}")
    algo_name = mod.bind(fn_algo, "algo")
    name = mod.fresh("calc")
    body = ["v = 0", "n = 0"]
    payload = False
    aligned = True  # the bits gathered so far are whole bytes whichever headers are valid
    packed = False  # some headers go to `parts` as bytes packed by struct
    for inp in c.get("input", []):
        t = inp.get("type")
        if t == "header" and aligned:
            h = L.header(inp["value"])
            w = None
            if h.htype.varbit is None and h.htype.nbits % 8 == 0:
                w = header_writer(mod, h.htype, str(h.base))
            if w is not None:
                # a whole header packed at once rather than shifted in field by field
                if not packed:
                    body.insert(0, "parts = []")
                    packed = True
                body += ["if n:", "    parts.append(_bits_to_bytes(v, n))", "    v = 0",
                         "    n = 0", f"if F[{h.base}]:", f"    parts.append({w})"]
                continue
        if t == "field":
            h, fi, slot = L.field(inp["value"][0], inp["value"][1])
            val = f"F[{slot}]" + (f" & {fi.mask}" if fi.signed else "")
            w = fi.width
            if h.htype.varbit is not None and fi is h.htype.fields[h.htype.varbit]:
                w = f"F[{h.slot(VLEN)}]"
            line = [f"v = (v << {w}) | ({val})", f"n += {w}"]
            if not isinstance(w, int) or w % 8:
                aligned = False
            if h.metadata:
                body += line
            else:
                body += [f"if F[{h.base}]:"] + ["    " + s for s in line]
        elif t == "hexstr":
            w = int(inp["bitwidth"])
            v = parse_hex(inp["value"]) & ((1 << w) - 1)
            body += [f"v = (v << {w}) | {v}", f"n += {w}"]
            if w % 8:
                aligned = False
        elif t == "header":
            h = L.header(inp["value"])
            parts = []
            vlen = f"F[{h.slot(VLEN)}]" if h.htype.varbit is not None else "0"
            for i, f in enumerate(h.htype.wire_fields):
                val = f"F[{h.base + 1 + i}]" + (f" & {f.mask}" if f.signed else "")
                parts.append((val, vlen if i == h.htype.varbit else f.width))
            line = []
            for val, w in parts:
                line.append(f"v = (v << {w}) | ({val})")
            line.append(f"n += {h.htype.nbits} + {vlen}")
            body += [f"if F[{h.base}]:"] + ["    " + s for s in line]
            if h.htype.varbit is not None or h.htype.nbits % 8:
                aligned = False
        elif t == "payload":
            payload = True
        else:
            raise bad(f"calculation {c.get('name')!r}: unsupported input type {t!r}")
    data = "_bits_to_bytes(v, n)"
    if packed:
        body.append(f"parts.append({data})")
        data = "b''.join(parts)"
    if payload:
        data += f" + F[{PAYLOAD}]"
    body.append(f"return {algo_name}({data})")
    mod.emit([f"def {name}(F):"] + ["    " + s for s in body])
    return name


def compile_checksums(env, mod, checksums: list, calcs: dict) -> tuple[str, str]:
    """(verify(F) -> bool error, update(F)) functions over all JSON checksums."""
    L = env.L
    x = PrimitiveCompiler(env, [], "checksum").x
    ver = ["err = False"]
    upd = []
    for ck in checksums:
        if ck.get("type", "generic") != "generic":
            raise bad(f"checksum {ck.get('name')!r}: only generic checksums are supported")
        cname = ck.get("calculation")
        if cname not in calcs:
            raise bad(f"checksum {ck.get('name')!r}: unknown calculation {cname!r}")
        h, fi, slot = L.field(ck["target"][0], ck["target"][1])
        cond = None
        if ck.get("if_cond") is not None:
            cond = x.boolean(ck["if_cond"]).code
        fn = calcs[cname]
        if ck.get("verify", True):
            c = f"F[{h.base}]" + (f" and {cond}" if cond else "")
            ver += [f"if {c}:", f"    if {fn}(F) != (F[{slot}] & {fi.mask}):", "        err = True"]
        if ck.get("update", True):
            store = x.store_value(fi, Ex(f"{fn}(F)", "data"))
            if cond:
                upd += [f"if {cond}:", f"    F[{slot}] = {store}"]
            else:
                upd += [f"F[{slot}] = {store}"]
    vname, uname = mod.fresh("ck_verify"), mod.fresh("ck_update")
    mod.emit([f"def {vname}(F):"] + ["    " + s for s in ver + ["return err"]])
    mod.emit([f"def {uname}(F):"] + ["    " + s for s in (upd or ["pass"])])
    return vname, uname


def compile_deparser(env, mod, d: dict) -> str:
    """deparse(F) -> bytes of the valid headers in order (checksums updated first)."""
    L = env.L
    pc = PrimitiveCompiler(env, [], "deparser")
    name = mod.fresh("deparse")
    body = []
    for prim in d.get("primitives", []):
        body += pc.compile(prim)
    body.append("out = []")
    for hname in d.get("order", []):
        h = L.header(hname)
        if h.htype.varbit is not None:
            body += [f"if F[{h.base}]:"] + ["    " + s for s in varbit_writer(h)]
            continue
        w = header_writer(mod, h.htype, str(h.base))
        if w is None:
            continue
        body += [f"if F[{h.base}]:", f"    out.append({w})"]
    body.append("return b''.join(out)")
    mod.emit([f"def {name}(F):"] + ["    " + s for s in body])
    return name
