#!/usr/bin/env python3
"""Writes p4src/tna/elements_tna.p4: the per-element repetitions of the Tofino profile,
and p4src/twin/elements_twin.p4, those its v1model twin has in place of TNA externs.

Each macro lists ELEMS copies of one declaration or statement (or ELEMS / 2, one per pair
register), in segments of SEG elements: ELEMS picks how many segments. The payload field
macros are the ones p4src/include/headers.p4 expects, so the TNA program shares its header
layouts (read-only) with the v1model program.
"""

import argparse
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "elements_tna.p4"
TWIN_OUT = Path(__file__).resolve().parents[1] / "twin" / "elements_twin.p4"
SEG = 8
MAX_ELEMS = 128

PER_ELEM = {
    "FIXED_FIELDS": "bit<32> v{i};",
    "CNAT_FIELDS": "bit<8> c{i};",
    "DECODE_DECLS": "DecodeCode() dec{i};",
    "DECODE_APPLY": "dec{i}.apply(hdr.cnat.c{i}, hdr.fixed.v{i});",
    "ROUND_DECLS": "RoundCode() rnd{i}; Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly{i}) hsh{i};",
    "ROUND_POLYS": "CRCPolynomial<bit<32>>(32w{poly:#010x}, true, false, false, "
                   "32w0xffffffff, 32w0xffffffff) poly{i};",
    "ROUND_FIELDS": "bit<32> r{i};",
    # The steps of codec_tna.p4's rounding: a hash per element (a table passes 32 bits of
    # hash), the two leading-one matches per element, the adds in one action.
    "DRAW_ACTIONS": "action draw{i}() {{ meta.r{i} = hsh{i}.get({{ ROUND_KEY }}); }}",
    "DRAW_CALLS": "draw{i}();",
    "ROUND_LEAD": "rnd{i}.apply(hdr.fixed.v{i}, meta.r{i}, hdr.cnat.c{i});",
    "ROUND_ADD": "hdr.fixed.v{i} = hdr.fixed.v{i} + meta.r{i};",
    "ROUND_CODE": "cod{i}.apply(hdr.fixed.v{i}, hdr.cnat.c{i});",
    "CODE_DECLS": "CodeOf() cod{i};",
}
# The twin's (p4src/twin/codec_twin.p4): v1model's one CRC-32 over the key and the element's
# index, where Tofino's Hash extern takes a polynomial per element.
TWIN_PER_ELEM = {
    "ROUND_DECLS_TWIN": "RoundCode() rnd{i};",
    "DRAW_TWIN": "hash(meta.r{i}, HashAlgorithm.crc32, 32w0, {{ ROUND_KEY, 8w{i} }}, "
                 "33w0x100000000);",
}
# The first stage the slot's flags reach (jobs 0, admit and use 1, bitmap 2), and how
# many pair registers share it with the remaining and max_exp registers (4 ALUs a stage).
FIRST_STAGE = 3
FIRST_STAGE_PAIRS = 2


def pair_stage(k: int) -> int:
    """Stage of pair register k: four to a stage, two in the first beside the slot's."""
    return FIRST_STAGE + (k + 4 - FIRST_STAGE_PAIRS) // 4


PER_PAIR = {
    "PAIR_DECLS": "PairSumS{stage}() pair{k};",
    "PAIR_APPLY": "pair{k}.apply(hdr.fixed.v{lo}, hdr.fixed.v{hi}, meta);",
}


def polys(n: int) -> list[int]:
    """Distinct odd 32-bit CRC coefficients, one per element: a fixed sequence (an LCG),
    so every build and every switch rounds element i with the same hash function."""
    out, x = [], 0x2545F491
    while len(out) < n:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        p = x | 0x80000001
        if p not in out and p != 0x04C11DB7:
            out.append(p)
    return out


def decode_value(code: int) -> int:
    """CNAT8 code -> int32 bits, as the v1model program's shift gives it (m > 32: 0)."""
    m, sign = code & 0x7F, code >> 7
    mag = (1 << (m - 1)) & 0xFFFFFFFF if 1 <= m <= 32 else 0
    return ((mag ^ (0xFFFFFFFF if sign else 0)) + sign) & 0xFFFFFFFF


def round_rows() -> list[tuple[int, int, str, int | None]]:
    """Leading one p of |s| for an int32 sum s, as (value, mask, action, mask argument) in
    priority order: the action masks the random bits to [0, 2^p) and, for s < 0, takes -s
    and the sign. |s| in [2^p, 2^(p+1)): s = 2^p with the bits above p zero; or s = -2^p
    exactly (first), or the prefix 1...10 at bit p."""
    m32 = 0xFFFFFFFF
    out = [(0, m32, "zero", None)]
    for p in range(32):
        out.append(((-(1 << p)) & m32, m32, "neg", (1 << p) - 1))
    for p in range(31):
        hi = ~((1 << (p + 1)) - 1) & m32
        out.append((1 << p, hi | (1 << p), "pos", (1 << p) - 1))
        out.append((hi, hi | (1 << p), "neg", (1 << p) - 1))
    return out


def code_rows() -> list[tuple[int, int, int]]:
    """Leading one q of |s| + r (unsigned) as (value, mask, code): the code is q + 1; 0
    stays 0. Disjoint: any priority order."""
    out = [(0, 0xFFFFFFFF, 0)]
    for q in range(32):
        out.append((1 << q, ~((1 << q) - 1) & 0xFFFFFFFF, q + 1))
    return out


def w32(v: int) -> str:
    """A key's 32-bit value or mask as the entries write it."""
    return "32w0" if v == 0 else f"32w{v:#x}"


def round_entries() -> list[str]:
    """round_rows() as the TNA program's const entries."""
    return [f"{w32(v)} &&& {w32(m)} : {a}({'' if arg is None else f'32w{arg:#x}'});"
            for v, m, a, arg in round_rows()]


def code_entries() -> list[str]:
    """code_rows() as the TNA program's const entries."""
    return [f"{w32(v)} &&& {w32(m)} : code(8w{c});" for v, m, c in code_rows()]


NSEG = MAX_ELEMS // SEG


def define(name: str, items: list[str]) -> list[str]:
    """A macro of one item a line."""
    return [f"#define {name} \\\n    " + " \\\n    ".join(items), ""]


def segments(name: str, items_of) -> list[str]:
    """NAME_0 .. NAME_{NSEG-1}: segment s holds items_of(s)."""
    return [line for s in range(NSEG) for line in define(f"{name}_{s}", items_of(s))]


def chooser(names: list[str]) -> list[str]:
    """Each NAME as the segments ELEMS takes."""
    lines = []
    for s in range(1, NSEG + 1):
        lines.append(f"#{'if' if s == 1 else 'elif'} ELEMS == {s * SEG}")
        lines += [f"#define {n} " + " ".join(f"{n}_{j}" for j in range(s)) for n in names]
    return lines + ["#else", f'#error "ELEMS must be a multiple of {SEG} up to {MAX_ELEMS}"',
                    "#endif"]


def elements(s: int) -> range:
    return range(s * SEG, (s + 1) * SEG)


def render() -> str:
    p = polys(MAX_ELEMS)
    lines = ["// Generated by p4src/tna/gen_tna.py; edit the generator, not this.",
             "#ifndef NATSWITCH_ELEMENTS_TNA_P4", "#define NATSWITCH_ELEMENTS_TNA_P4", ""]
    lines += define("DECODE_ENTRIES", [f"8w{c:#04x} : value(32w{decode_value(c):#010x});"
                                       for c in range(256)])
    lines += define("ROUND_ENTRIES", round_entries())
    lines += define("CODE_ENTRIES", code_entries())
    for name, stmt in PER_ELEM.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i, poly=p[i])
                                                      for i in elements(s)])
    for name, stmt in PER_PAIR.items():
        lines += segments(name, lambda s, stmt=stmt: [
            stmt.format(k=k, lo=2 * k, hi=2 * k + 1, stage=pair_stage(k))
            for k in range(s * SEG // 2, (s + 1) * SEG // 2)])
    stages = sorted({pair_stage(k) for k in range(MAX_ELEMS // 2)})
    lines += define("PAIR_TYPES", [f"PAIR_SUM(PairSumS{st}, {st})" for st in stages])
    lines += [*chooser([*PER_ELEM, *PER_PAIR]), "", "#endif"]
    return "\n".join(lines) + "\n"


def render_twin() -> str:
    lines = ["// Generated by p4src/tna/gen_tna.py; edit the generator, not this.",
             "#ifndef NATSWITCH_ELEMENTS_TWIN_P4", "#define NATSWITCH_ELEMENTS_TWIN_P4", ""]
    for name, stmt in TWIN_PER_ELEM.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i) for i in elements(s)])
    lines += [*chooser(list(TWIN_PER_ELEM)), "", "#endif"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--twin-out", type=Path, default=TWIN_OUT)
    args = ap.parse_args(argv)
    args.out.write_text(render())
    args.twin_out.write_text(render_twin())
    return 0


if __name__ == "__main__":
    sys.exit(main())
