#!/usr/bin/env python3
"""Writes p4src/tna/elements_tna.p4: the per-element repetitions of the Tofino profile,
and p4src/twin/elements_twin.p4, those its v1model twin has in place of TNA externs.

Each macro lists one declaration or statement per 32-bit word of the sums (WORDS of them,
the FIXED32 payload's fields), per pair register (WORDS / 2) or per element (ELEMS), in
segments of SEG: WORDS or ELEMS picks how many segments. WORDS is ELEMS, or ELEMS / 2 where
the program sums lanes only (LANES_ONLY: two 16-bit lanes a word, word j holding elements
2j and 2j + 1). The payload field macros are the ones p4src/include/headers.p4 expects, so
the TNA program shares its header layouts (read-only) with the v1model program. What the
program knows of the encodings comes from protocol/encodings.py: their wire numbers and,
for each lane encoding, its header, length, parser state and lane spread.
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))    # the repository
from p4src import gen_elements  # noqa: E402
from protocol.encodings import LANES  # noqa: E402

OUT = Path(__file__).resolve().parent / "elements_tna.p4"
TWIN_OUT = Path(__file__).resolve().parents[1] / "twin" / "elements_twin.p4"
SEG = 8
MAX_WORDS = 128
MAX_ELEMS = 256

# Per word of the sums (chosen by WORDS).
PER_WORD = {
    "FIXED_FIELDS": "bit<32> v{i};",
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
# Per element (chosen by ELEMS): the byte and nibble payloads.
PER_ELEM = {
    "CNAT_FIELDS": "bit<8> c{i};",
    "NIB_FIELDS": "bit<4> n{i};",
}
# Per group of four elements: the v1model program's views of the lane encodings' bytes
# (include/headers.p4's lane headers, gen_elements.py LAYOUTS).
PER_GROUP = {
    f"{gen_elements.layout(e).header.upper()}_FIELDS":
        f"bit<{4 * e.bits}> {gen_elements.layout(e).field}{{g}};"
    for e in LANES
}


@dataclass(frozen=True)
class TnaLayout:
    """A lane encoding's payload in the TNA program (hdr.NAME), by its bits per element:
    one field an element."""

    header_type: str    # the payload header type it shares with another encoding
    field: str          # its fields <field>0, <field>1, ...


TNA_LAYOUTS = {4: TnaLayout("nib_h", "n"), 8: TnaLayout("cnat_h", "c")}
# The one lane encoding the switch sends (results and partial sums).
(RESULT,) = (e for e in LANES if e.result)


def spread_word(e) -> str:
    """Elements 2j and 2j + 1 of lane encoding e into the lanes of word j."""
    f, pad = f"hdr.{e.name}.{TNA_LAYOUTS[e.bits].field}", 16 - e.bits
    return f"@in_hash {{{{ hdr.fixed.v{{j}} = {pad}w0 ++ {f}{{a}} ++ {pad}w0 ++ {f}{{b}}; }}}}"


# Lanes (p4src/tna/lanes_tna.p4): elements 2j and 2j + 1 in the 16-bit lanes of word j, the
# first in the high one, as the wire orders them; one 32-bit add sums both. A lane's sum
# stays below 2^16 (at most 32 children of at most 255), so no carry crosses. Each is a
# hash-unit copy (the ALUs cannot move a nibble or byte to another offset of a container),
# and each @in_hash statement becomes a logical table of its own. NAME_SPREAD for each lane
# encoding, NARROW the lanes' low bytes into the result's.
_R = f"hdr.{RESULT.name}.{TNA_LAYOUTS[RESULT.bits].field}"
PER_LANE_WORD = {
    **{f"{e.label}_SPREAD": spread_word(e) for e in LANES},
    "NARROW": f"@in_hash {{{{ {_R}{{a}} = hdr.fixed.v{{j}}[23:16]; }}}} "
              f"@in_hash {{{{ {_R}{{b}} = hdr.fixed.v{{j}}[7:0]; }}}}",
}


def payload_len(e) -> str:
    """The payload bytes of ELEMS elements of e, as a P4 expression."""
    return "ELEMS" if e.bits == 8 else (f"ELEMS / {8 // e.bits}" if e.bits < 8
                                        else f"{e.bits // 8} * ELEMS")


def lane_macros() -> list[str]:
    """What the TNA program and its twin do with the lane encodings, each in wire-number
    order: headers (tna_headers_t's members), UDP lengths, parser entries and states,
    validity, the payload table's keys and entries, the spread into lanes."""
    macro = gen_elements.macro
    n = len(LANES)

    def onehot(k: int) -> str:
        return ", ".join("true" if i == k else "false" for i in range(n))

    return [
        "// The lane encodings (protocol/encodings.py `lanes`), "
        + ", ".join(e.label for e in LANES) + ".",
        *gen_elements.lane_headers(),
        *macro("LANE_TNA_HEADERS", [f"{TNA_LAYOUTS[e.bits].header_type} {e.name};"
                                    for e in LANES]),
        *macro("LANE_UDP_LENS", [f"const bit<16> UDP_LEN_{e.label} = 8 + AGG_HDR_BYTES + "
                                 f"{payload_len(e)};" for e in LANES]),
        *macro("LANE_PARSE_SELECT", [f"ENC_{e.label}: parse_{e.name};" for e in LANES]),
        *macro("LANE_PARSE_STATES", [
            f"state parse_{e.name} {{ pkt.extract(hdr.{e.name}); transition accept; }}"
            for e in LANES]),
        # (a bare || of them, as it stands alone in the hand-written P4)
        *macro("LANE_VALID", [f"hdr.{e.name}.isValid()" for e in LANES], " ||"),
        *macro("LANE_INVALIDATE", [f"hdr.{e.name}.setInvalid();" for e in LANES]),
        # the payload table: a key of each lane header's validity (KIND: its match), the
        # keys' values of no lane header, and the entries of each lane header with the
        # keys before them (...): its length fits, or any length is refused
        *macro("LANE_KEYS(KIND)", [f"hdr.{e.name}.isValid(): KIND;" for e in LANES]),
        *macro("LANES_NONE", [onehot(-1)]),
        *macro("LANE_FITS(...)", [f"(__VA_ARGS__, {onehot(k)}, UDP_LEN_{e.label}): fits_lanes();"
                                  for k, e in enumerate(LANES)]),
        *macro("LANE_REFUSED(...)", [f"(__VA_ARGS__, {onehot(k)}, _): no_payload();"
                                     for k in range(n)]),
        # lanes_tna.p4's SpreadLanes: the spread of the packet's lane header, the first
        # lane encoding's or else one of the others'
        *macro("LANE_FIRST_VALID", [f"hdr.{LANES[0].name}.isValid()"]),
        *macro("LANE_FIRST_SPREAD", [f"{LANES[0].label}_SPREAD"]),
        *macro("LANE_OTHER_SPREAD", [
            *(f"if (hdr.{e.name}.isValid()) {{ {e.label}_SPREAD }} else" for e in LANES[1:-1]),
            f"{LANES[-1].label}_SPREAD" if n == 2 else f"{{ {LANES[-1].label}_SPREAD }}"]),
    ]


# The twin's (p4src/twin/codec_twin.p4): v1model's one CRC-32 over the key and the element's
# index, where Tofino's Hash extern takes a polynomial per element.
TWIN_PER_ELEM = {
    "ROUND_DECLS_TWIN": "RoundCode() rnd{i};",
    "DRAW_TWIN": "hash(meta.r{i}, HashAlgorithm.crc32, 32w0, {{ ROUND_KEY, 8w{i} }}, "
                 "33w0x100000000);",
    # CRC-32 is linear: two elements' bits differ by a pattern fixed by their keys, and
    # where its low bits are 0 they round alike every use. MurmurHash3's finalizer mixes
    # every bit into the low ones (the walk's twin, PASSES > 1).
    "MIX_TWIN": "meta.r{i} = meta.r{i} ^ (meta.r{i} >> 16); "
                "meta.r{i} = meta.r{i} * 32w0x85ebca6b; "
                "meta.r{i} = meta.r{i} ^ (meta.r{i} >> 13); "
                "meta.r{i} = meta.r{i} * 32w0xc2b2ae35; "
                "meta.r{i} = meta.r{i} ^ (meta.r{i} >> 16);",
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
# The walk's registers (PASSES > 1, esum_tna.p4): one element each, four to a stage as the
# pair registers (the TNA program pins them: unpinned, Tofino 1 needs a 13th stage).
PER_ELEM_SUM = {
    "ESUM_DECLS": "ElemSumS{stage}() esum{i};",
    "ESUM_APPLY": "esum{i}.apply(hdr.fixed.v{i}, hdr, meta);",
}
MAX_PASSES = 8


def walk_entries(passes: int) -> list[str]:
    """passes_tna.p4's walk_step for `passes` segments: consume 1..passes-1, then the
    harvest from the last segment down to 0 (harvest(next, read)), then out."""
    last = passes - 1
    out = [f"(0, {k}, _) : consume({k + 1});" for k in range(last)]
    out += [f"(0, {last}, OUT_NONE) : absorb();", f"(0, {last}, _) : harvest({last - 1}, {last});"]
    out += [f"(1, {k}, _) : harvest({k - 1}, {k});" for k in range(last - 1, 0, -1)]
    return out + ["(1, 0, OUT_MCAST) : out_mcast();", "(1, 0, OUT_UCAST) : out_ucast();"]


def walks() -> list[str]:
    """WALK_ENTRIES for each PASSES from 2 to MAX_PASSES."""
    lines = []
    for n in range(2, MAX_PASSES + 1):
        lines.append(f"#{'if' if n == 2 else 'elif'} PASSES == {n}")
        lines += define("WALK_ENTRIES", walk_entries(n))[:1]
    return lines + ["#endif", ""]


def or_tree(words: int) -> list[str]:
    """Word 0 ORed with every other word, pairwise (log2 steps, each a stage at most): the
    lanes' high bytes then say whether any sum is outside 0..255."""
    out, step = [], 1
    while step < words:
        out += [f"hdr.fixed.v{j} = hdr.fixed.v{j} | hdr.fixed.v{j + step};"
                for j in range(0, words, 2 * step) if j + step < words]
        step *= 2
    return out


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




def define(name: str, items: list[str]) -> list[str]:
    """A macro of one item a line."""
    return [f"#define {name} \\\n    " + " \\\n    ".join(items), ""]


def segments(name: str, items_of, nseg: int) -> list[str]:
    """NAME_0 .. NAME_{nseg-1}: segment s holds items_of(s)."""
    return [line for s in range(nseg) for line in define(f"{name}_{s}", items_of(s))]


def chooser(names: list[str], var: str = "ELEMS", most: int = MAX_ELEMS) -> list[str]:
    """Each NAME as the segments `var` takes."""
    lines = []
    for s in range(1, most // SEG + 1):
        lines.append(f"#{'if' if s == 1 else 'elif'} {var} == {s * SEG}")
        lines += [f"#define {n} " + " ".join(f"{n}_{j}" for j in range(s)) for n in names]
    return lines + ["#else", f'#error "{var} must be a multiple of {SEG} up to {most}"',
                    "#endif"]


def elements(s: int) -> range:
    return range(s * SEG, (s + 1) * SEG)


def lane_words() -> list[str]:
    """The lanes' macros: per word of lanes (segment s: elements 8s..8s+7, words 4s..4s+3),
    OR_TREE over the ELEMS / 2 words of a packet's lanes, and ZERO_REST for the words above
    them where WORDS is ELEMS (so the pair registers past the lanes add zeros)."""
    lines = []
    for name, stmt in PER_LANE_WORD.items():
        lines += segments(name, lambda s, stmt=stmt: [
            stmt.format(j=j, a=2 * j, b=2 * j + 1)
            for j in range(s * SEG // 2, (s + 1) * SEG // 2)],
            MAX_ELEMS // SEG)
    lines += chooser(list(PER_LANE_WORD))
    for s in range(1, MAX_ELEMS // SEG + 1):
        lines.append(f"#{'if' if s == 1 else 'elif'} ELEMS == {s * SEG}")
        tree = or_tree(s * SEG // 2) or ["/* one word */"]
        lines.append("#define OR_TREE " + " \\\n    ".join(tree))
        lines.append("#define ZERO_REST " + " ".join(
            f"hdr.fixed.v{j} = 0;" for j in range(s * SEG // 2, min(s * SEG, MAX_WORDS))))
    return lines + ["#endif", ""]


def render() -> str:
    p = polys(MAX_ELEMS)
    lines = ["// Generated by p4src/tna/gen_tna.py; edit the generator, not this.",
             "#ifndef NATSWITCH_ELEMENTS_TNA_P4", "#define NATSWITCH_ELEMENTS_TNA_P4", "",
             *gen_elements.enc_constants(), *lane_macros()]
    lines += define("DECODE_ENTRIES", [f"8w{c:#04x} : value(32w{decode_value(c):#010x});"
                                       for c in range(256)])
    lines += define("ROUND_ENTRIES", round_entries())
    lines += define("CODE_ENTRIES", code_entries())
    for name, stmt in PER_WORD.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i, poly=p[i])
                                                      for i in elements(s)], MAX_WORDS // SEG)
    for name, stmt in PER_PAIR.items():
        lines += segments(name, lambda s, stmt=stmt: [
            stmt.format(k=k, lo=2 * k, hi=2 * k + 1, stage=pair_stage(k))
            for k in range(s * SEG // 2, (s + 1) * SEG // 2)], MAX_WORDS // SEG)
    stages = sorted({pair_stage(k) for k in range(MAX_WORDS // 2)})
    lines += define("PAIR_TYPES", [f"PAIR_SUM(PairSumS{st}, {st})" for st in stages])
    for name, stmt in PER_ELEM_SUM.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i, stage=pair_stage(i))
                                                      for i in elements(s)], MAX_WORDS // SEG)
    stages = sorted({pair_stage(i) for i in range(MAX_WORDS)})
    lines += define("ESUM_TYPES", [f"ELEM_SUM(ElemSumS{st}, {st})" for st in stages])
    lines += chooser([*PER_WORD, *PER_PAIR, *PER_ELEM_SUM], "WORDS", MAX_WORDS) + [""]
    for name, stmt in PER_ELEM.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i) for i in elements(s)],
                          MAX_ELEMS // SEG)
    for name, stmt in PER_GROUP.items():
        lines += segments(name, lambda s, stmt=stmt: [
            stmt.format(g=g) for g in range(s * SEG // 4, (s + 1) * SEG // 4)], MAX_ELEMS // SEG)
    lines += chooser([*PER_ELEM, *PER_GROUP]) + [""]
    lines += lane_words() + walks() + ["#endif"]
    return "\n".join(lines) + "\n"


def render_twin() -> str:
    lines = ["// Generated by p4src/tna/gen_tna.py; edit the generator, not this.",
             "#ifndef NATSWITCH_ELEMENTS_TWIN_P4", "#define NATSWITCH_ELEMENTS_TWIN_P4", ""]
    for name, stmt in TWIN_PER_ELEM.items():
        lines += segments(name, lambda s, stmt=stmt: [stmt.format(i=i) for i in elements(s)],
                          MAX_WORDS // SEG)
    lines += [*chooser(list(TWIN_PER_ELEM), "WORDS", MAX_WORDS), "", "#endif"]
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
