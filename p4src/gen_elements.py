#!/usr/bin/env python3
"""Writes p4src/include/elements.p4: the per-element repetitions P4 cannot loop over, and
what the program knows of the encodings (protocol/encodings.py): their wire numbers and the
lane encodings' headers, parser states and actions.

Each macro expands to ELEMS copies of one statement (GROUP_MACROS: ELEMS / 4, one per
group of four elements), for every compiled profile (PROFILES): the file holds the
statements in segments and ELEMS picks the first ones.
The statements stay arithmetic only (no `if` inside actions), because p4c predicates
an `if` in an action into nested ternaries, which grows the BMv2 JSON quadratically.
"""

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))    # the repository: protocol/
from protocol.encodings import LANES, SWITCHED  # noqa: E402

OUT = Path(__file__).resolve().parent / "include" / "elements.p4"

# CNAT8 code c -> +-(1 << (m-1)) on 32 bits; m = 0 shifts by 255 and gives 0.
DECODE = (
    "hdr.fixed.v{i} = ((((bit<32>)1) << ((hdr.cnat.c{i} & 0x7f) - 1))"
    " ^ (0 - (bit<32>)(hdr.cnat.c{i} >> 7))) + (bit<32>)(hdr.cnat.c{i} >> 7);"
)

# Per element, the packet's seed (murmur3's finalizer of key and chunk, codec.p4) steps by
# GOLDEN, so element i mixes seed + (i + 1) GOLDEN: every element's statements are the same
# (no per-element constant), which softswitch's vector compiler needs to run them as one
# loop. The mixer is xorshift, multiply (an odd constant below 2^30: a product of 32-bit
# values stays within the vector compiler's int64 bounds), xorshift: the last brings the
# product's well-mixed high bits into the low ones the rounding compares. Four operations:
# the wide profile's 1456 copies must stay within what p4c can compile in this memory.
GOLDEN = 0x9E3779B9

# int32 sum -> CNAT8 code: p is the leading one of |s| (smear the bits right,
# then popcount gives p + 1), rounded up to 2^(p+1) with probability
# (|s| - 2^p) / 2^p, compared with the low p bits of rc_r. rc_r is a function of the
# packet's seed rc_k (codec.p4: the job's key and the chunk) and the element's place,
# never of arrival order (DESIGN contract 10). rc_ovf collects sums above 2^30 units:
# their code would exceed 31, and 32 reads back as -2^31 (docs/PROTOCOL.md "Payload").
RECOMPRESS = " ".join(
    [
        "rc_s = (bit<32>)(hdr.fixed.v{i} >> 31);",
        "rc_a = (hdr.fixed.v{i} ^ (0 - rc_s)) + rc_s;",
        "rc_ovf = rc_ovf | (bit<32>)(bit<1>)(rc_a > 0x40000000);",
        "rc_x = rc_a | (rc_a >> 1); rc_x = rc_x | (rc_x >> 2); rc_x = rc_x | (rc_x >> 4);",
        "rc_x = rc_x | (rc_x >> 8); rc_x = rc_x | (rc_x >> 16);",
        "rc_mag = rc_x ^ (rc_x >> 1);",
        "rc_x = rc_x - ((rc_x >> 1) & 0x55555555);",
        "rc_x = (rc_x & 0x33333333) + ((rc_x >> 2) & 0x33333333);",
        "rc_x = ((rc_x + (rc_x >> 4)) & 0x0f0f0f0f) * 0x01010101;",
        f"rc_k = rc_k + {GOLDEN:#x};",
        "rc_r = rc_k ^ (rc_k >> 16); rc_r = rc_r * 0x2c1b3c6d; rc_r = rc_r ^ (rc_r >> 15);",
        "rc_up = (bit<32>)(bit<1>)((rc_r & (rc_mag - 1)) < (rc_a - rc_mag));",
        "hdr.cnat.c{i} = (bit<8>)((rc_s << 7) | ((rc_x >> 24) + rc_up));",
    ]
)

# |v| above the bound of the port the contribution came from (meta.max_mag = M, installed
# with the job; M < 2^31): |v| <= M exactly when v + M, unsigned, is at most 2M (rg_2m).
# Collected in rg_bad, so one check refuses the packet before it touches a slot.
RANGE = "rg_bad = rg_bad | (bit<32>)(bit<1>)((hdr.fixed.v{i} + meta.max_mag) > rg_2m);"

# NAT4 nibble (bit 3 sign, bits 0-2 level m) -> +-(1 << (m-1)), as CNAT8's code m; the
# shift is on 8 bits so that m = 0 shifts by 255 and gives 0. nb_bad collects, in bit 7,
# whether any nibble is 0x8 ("negative zero", never encoded: docs/PROTOCOL.md).
DECODE_NAT4 = (
    "hdr.fixed.v{i} = ((((bit<32>)1) << (((bit<8>)(hdr.nib.n{i} & 7)) - 1))"
    " ^ (0 - (bit<32>)(hdr.nib.n{i} >> 3))) + (bit<32>)(hdr.nib.n{i} >> 3);"
    " nb_bad = nb_bad | (((bit<8>)(hdr.nib.n{i} ^ 8)) - 1);"
)

MACROS = {
    "FIXED_FIELDS": "bit<32> v{i};",
    "CNAT_FIELDS": "bit<8> c{i};",
    # NAT4 payloads: two elements per byte, element 2k in the high nibble.
    "NIB_FIELDS": "bit<4> n{i};",
    "DECODE_NAT4": DECODE_NAT4,
    "ACC_REGISTERS": "register<bit<32>>(SLOT_REGS) acc{i};",
    "ACC_WRITE": "acc{i}.write(meta.ridx, hdr.fixed.v{i});",
    "ACC_ADD": (
        "acc{i}.read(acc_t, meta.ridx); hdr.fixed.v{i} = hdr.fixed.v{i} + acc_t;"
        " acc{i}.write(meta.ridx, hdr.fixed.v{i});"
    ),
    "ACC_READ": "acc{i}.read(hdr.fixed.v{i}, meta.ridx);",
    "ACC_ZERO": "acc{i}.write(meta.ridx, 0);",
    "DECODE_CNAT": DECODE,
    "RECOMPRESS": RECOMPRESS,
    "RANGE": RANGE,
}

# The lane encodings (protocol/encodings.py `lanes`: a 4-bit contribution and its one-byte
# sums) are added four elements at a time (SWAR), never decoded one by one: each group of
# four (a 16-bit word of 4-bit integers, a 32-bit word of bytes) is spread into four 16-bit
# lanes of one 64-bit register, so one register add sums four elements. A lane holds sums
# up to 65535, far above what a use can add up (at most 32 children, each 255 at most), so
# no carry crosses lanes; a lane above 255 cannot leave as a byte (ln_ovf). Lane 0 (the
# high one) holds the group's first element, as the wire's byte order does.


@dataclass(frozen=True)
class Layout:
    """A lane encoding's payload in the v1model program, by its bits per element: a header
    of one field a group of four elements, and the SWAR spread of a group into four lanes
    (ln_x, then the lanes' expression)."""

    header: str         # hdr.<header>, of type <header>_h; its field macro <HEADER>_FIELDS
    field: str          # the fields <field>0, <field>1, ...
    spread: str         # the group, where the lanes' expression takes it
    lanes: str          # the four lanes of ln_x


# By bits per element, so a lane encoding takes its layout from its declaration. The names
# (hdr.uq, hdr.sum, their fields) are the program's since before the lanes were generated:
# the JSON, softswitch and the tests know them.
LAYOUTS = {
    4: Layout("uq", "q", "ln_x = (ln_x | (ln_x << 24)) & 0x000000ff000000ff;",
              "((ln_x | (ln_x << 12)) & 0x000f000f000f000f)"),    # nibbles -> one a lane
    8: Layout("sum", "s", "ln_x = (ln_x | (ln_x << 16)) & 0x0000ffff0000ffff;",
              "((ln_x | (ln_x << 8)) & 0x00ff00ff00ff00ff)"),     # bytes -> one a lane
}
# The one lane encoding the switch sends (results and partial sums): the lanes' low bytes.
(RESULT,) = (e for e in LANES if e.result)


def layout(enc) -> Layout:
    return LAYOUTS[enc.bits]


def spread(enc) -> list[str]:
    lay = layout(enc)
    return [f"ln_x = (bit<64>)hdr.{lay.header}.{lay.field}{{j}};", lay.spread]


GROUP_MACROS = {
    **{f"{layout(e).header.upper()}_FIELDS": f"bit<{4 * e.bits}> {layout(e).field}{{j}};"
       for e in LANES},
    "LANE_REGISTERS": "register<bit<64>>(SLOT_REGS) lane{j};",
}
for _e in LANES:
    GROUP_MACROS[f"LANE_WRITE_{_e.label}"] = " ".join(
        [*spread(_e), f"lane{{j}}.write(meta.ridx, {layout(_e).lanes});"])
    GROUP_MACROS[f"LANE_ADD_{_e.label}"] = " ".join(
        [*spread(_e), "lane{j}.read(ln_t, meta.ridx);",
         f"lane{{j}}.write(meta.ridx, ln_t + {layout(_e).lanes});"])
# lanes -> the result's bytes; ln_ovf collects every lane's bits, of which those above the
# lanes' low bytes say a sum is outside 0..255.
GROUP_MACROS[f"LANE_{RESULT.label}"] = " ".join([
    "lane{j}.read(ln_t, meta.ridx);",
    "ln_ovf = ln_ovf | ln_t;",
    "ln_t = (ln_t | (ln_t >> 8)) & 0x0000ffff0000ffff;",
    f"hdr.{layout(RESULT).header}.{layout(RESULT).field}{{j}} = (bit<32>)(ln_t | (ln_t >> 16));",
])


def enc_constants() -> list[str]:
    """The wire numbers (ENC_*) of every encoding a switch sums or sends."""
    return ["// The encodings' wire numbers (protocol/encodings.py: those a switch sums or "
            "sends).",
            *(f"const bit<8> ENC_{e.label} = {e.code};" for e in SWITCHED), ""]


def macro(name: str, items: list[str], sep: str = "") -> list[str]:
    """#define NAME of the items, one a line (sep between them)."""
    return [f"#define {name} \\\n    " + f"{sep} \\\n    ".join(items), ""]


def lane_headers() -> list[str]:
    """include/headers.p4's lane headers: their types (each a word of four elements) and
    the headers_t members, shared by the TNA program's headers (gen_tna.py)."""
    lays = [layout(e) for e in LANES]
    return [*macro("LANE_HEADER_TYPES", [
                f"header {lay.header}_h {{ {lay.header.upper()}_FIELDS }}" for lay in lays]),
            *macro("LANE_HEADERS", [f"{lay.header}_h {lay.header};" for lay in lays])]


def lane_macros() -> list[str]:
    """What the v1model program does with the lane encodings, each in wire-number order:
    parse, emit, test, invalidate, and sum them (aggregation.p4's lane actions)."""
    lays = [(e, layout(e)) for e in LANES]
    first = (
        "if (hdr.{h}.isValid()) {{ if (meta.first) {{ lane_write_{n}(); }} "
        "else {{ lane_add_{n}(); }} }} else"
    )
    return [
        "// The lane encodings (protocol/encodings.py `lanes`), "
        + ", ".join(e.label for e in LANES) + ".",
        *lane_headers(),
        *macro("LANE_PARSE_SELECT", [
            f"(_, ENC_{e.label}): parse_{lay.header};" for e, lay in lays]),
        *macro("LANE_PARSE_STATES", [
            f"state parse_{lay.header} {{ pkt.extract(hdr.{lay.header}); transition accept; }}"
            for e, lay in lays]),
        *macro("LANE_EMIT", [f"pkt.emit(hdr.{lay.header});" for e, lay in lays]),
        # (a bare || of them, as it stands alone in the hand-written P4)
        *macro("LANE_VALID", [f"hdr.{lay.header}.isValid()" for e, lay in lays], " ||"),
        *macro("LANE_NONE_VALID", [f"!hdr.{lay.header}.isValid()" for e, lay in lays], " &&"),
        # what a result leaves behind: every lane header but the result's
        *macro("LANE_INPUTS_INVALID", [f"hdr.{lay.header}.setInvalid();"
                                       for e, lay in lays if not e.result]),
        *macro("LANE_ACTIONS", [
            f"action lane_write_{e.name}() {{ bit<64> ln_x; LANE_WRITE_{e.label} }} "
            f"action lane_add_{e.name}() {{ bit<64> ln_x; bit<64> ln_t; LANE_ADD_{e.label} }}"
            for e, lay in lays]),
        # the lane action of the packet's lane header, or else what follows
        *macro("LANE_APPLY", [first.format(h=lay.header, n=e.name) for e, lay in lays]),
    ]


# The compiled profiles (p4src/build/ and p4src/build/wide/): elements per packet, each
# compiled from the same sources with -DELEMS=N. 168: a CNAT8 contribution may leave as a
# FIXED32 result or partial sum (3 * 168 <= 512 bytes of growth BMv2 allows); 1456: the
# largest CNAT8 packet in a 1500-byte MTU (20 IPv4 + 8 UDP + 16 AGG + 1456), CNAT8 both
# ways only (the program drops anything that would grow it: DROP_TOO_WIDE); 1024: the
# widest packet whose 4-bit contribution (ELEMS/2 bytes) may grow into one-byte sums (by
# ELEMS/2 <= 512 bytes): the 4-bit encodings at their fewest bytes per element.
PROFILES = (168, 1024, 1456)


def render(profiles=PROFILES) -> str:
    """Each macro in segments between the profiles' sizes; ELEMS picks how many."""
    sizes = sorted(set(profiles))
    if any(size % 4 for size in sizes):
        raise ValueError(f"profiles {sizes}: each must be a multiple of 4 (GROUP_MACROS)")
    bounds = list(zip([0, *sizes[:-1]], sizes, strict=True))
    lines = [
        "// Generated by p4src/gen_elements.py for the profiles ELEMS = "
        + ", ".join(map(str, sizes)) + "; edit the generator, not this.",
        "#ifndef NATSWITCH_ELEMENTS_P4",
        "#define NATSWITCH_ELEMENTS_P4",
        "",
        *enc_constants(),
        *lane_macros(),
    ]
    for name, stmt in MACROS.items():
        for k, (lo, hi) in enumerate(bounds):
            body = " \\\n    ".join(stmt.format(i=i) for i in range(lo, hi))
            lines += [f"#define {name}_{k} \\\n    {body}", ""]
    for name, stmt in GROUP_MACROS.items():
        for k, (lo, hi) in enumerate(bounds):
            body = " \\\n    ".join(stmt.format(j=j) for j in range(lo // 4, hi // 4))
            lines += [f"#define {name}_{k} \\\n    {body}", ""]
    for k, size in enumerate(sizes):
        lines.append(f"#{'if' if k == 0 else 'elif'} ELEMS == {size}")
        for name in [*MACROS, *GROUP_MACROS]:
            lines.append(f"#define {name} " + " ".join(f"{name}_{j}" for j in range(k + 1)))
    lines += ["#else",
              f'#error "ELEMS must be one of the profiles {", ".join(map(str, sizes))} '
              '(p4src/gen_elements.py)"',
              "#endif", "", "#endif"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT})")
    args = ap.parse_args(argv)
    args.out.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
