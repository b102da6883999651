"""The P4 sources, their generators, the Makefile's builds and the dissector say what
protocol/ declares: each number is read out of its file here, in tests only, and compared
with the declaration, so a change on one side alone fails."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import encodings, profiles, sizes

ROOT = Path(__file__).resolve().parents[1]
P4SRC = ROOT / "p4src"
INCLUDE = P4SRC / "include"

# sizes.p4's #defines (the default of each `#ifndef`) and what declares them
SIZES_P4 = {"ELEMS": sizes.ELEMS, "MAX_GROWTH": sizes.MAX_GROWTH,
            "POOL_SIZE": sizes.POOL_SIZE, "SLOT_REGS": sizes.SLOT_REGS,
            "MAX_JOBS": sizes.MAX_JOBS, "MAX_CHILD_ENTRIES": sizes.MAX_CHILD_ENTRIES,
            "MAX_ROUTES": sizes.MAX_ROUTES, "NUM_PORTS": sizes.NUM_PORTS}
SIZES_TNA_P4 = {"POOL_SIZE": sizes.TNA_POOL_SIZE, "MAX_JOBS": sizes.MAX_JOBS,
                "MAX_CHILD_ENTRIES": sizes.MAX_CHILD_ENTRIES,
                "MAX_ROUTES": sizes.MAX_ROUTES, "NUM_PORTS": sizes.NUM_PORTS}
CONSTANTS_P4 = {"AGG_UDP_PORT": sizes.AGG_PORT, "AGG_HDR_BYTES": sizes.AGG_HDR,
                "BLOCK_HDR_BYTES": sizes.BLOCK_HDR}


def defines(text: str) -> dict[str, int]:
    """NAME -> value of each `#define NAME <integer>` (the first, the default of an
    `#ifndef`)."""
    found: dict[str, int] = {}
    for name, value in re.findall(r"^#define (\w+) (\d+)\s*$", text, re.M):
        found.setdefault(name, int(value))
    return found


def consts(text: str) -> dict[str, int]:
    """NAME -> value of each `const bit<N> NAME = <integer>;`."""
    return {name: int(value, 0)
            for name, value in re.findall(r"^const bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+);",
                                          text, re.M)}


def differences(found: dict[str, int], declared: dict[str, int]) -> dict[str, tuple]:
    """name -> (in the source, declared) where they differ or the source lacks it."""
    return {k: (found.get(k), v) for k, v in declared.items() if found.get(k) != v}


def test_sizes_p4_says_what_is_declared():
    assert differences(defines((INCLUDE / "sizes.p4").read_text()), SIZES_P4) == {}


def test_the_tofino_sizes_say_what_is_declared():
    text = (P4SRC / "tna" / "sizes_tna.p4").read_text()
    assert differences(defines(text), SIZES_TNA_P4) == {}
    assert "#define SLOT_REGS (2 * POOL_SIZE)\n" in text


# The generated files that hold the encodings' numbers, and their generators.
GENERATED = {INCLUDE / "elements.p4": (P4SRC, "gen_elements"),
             P4SRC / "tna" / "elements_tna.p4": (P4SRC / "tna", "gen_tna")}
SWITCHED = {f"ENC_{e.label}": e.code for e in encodings.ALL if e.sums or e.result}


def test_constants_p4_says_the_declared_numbers():
    found = consts((INCLUDE / "constants.p4").read_text())
    assert differences(found, CONSTANTS_P4) == {}
    # the encodings' numbers are generated (below), never written by hand
    assert not {k for k in found if k.startswith("ENC_")}


@pytest.mark.parametrize("path", GENERATED, ids=lambda p: p.name)
def test_the_generated_enc_constants_are_the_declared_ones(path):
    """Every encoding a switch sums or sends has its number in the committed generated file
    and in what its generator writes now, and no other encoding has one."""
    folder, name = GENERATED[path]
    for text in (path.read_text(), _script(folder, name).render()):
        found = {k: v for k, v in consts(text).items() if k.startswith("ENC_")}
        assert found == SWITCHED
    assert encodings.SWITCHED == tuple(encodings.BY_CODE[c] for c in sorted(SWITCHED.values()))


def test_the_lane_macros_follow_the_declaration():
    """The lane encodings' parser entries in both generated files, and in wire-number order;
    a number changed in the declaration changes them (render() reads it)."""
    lanes = [e for e in encodings.ALL if e.lanes]
    assert list(encodings.LANES) == lanes and lanes
    for path in GENERATED:
        text = path.read_text()
        select = re.search(r"#define LANE_PARSE_SELECT \\\n(.*?)\n\n", text, re.S).group(1)
        assert re.findall(r"ENC_(\w+)", select) == [e.label for e in lanes]


# At most this many hand-written files outside tests/, bench/ and docs/ name UQ4 (issue 51):
# the declaration, the wire layer, the codec, the dissector, the README's commands and a few
# more; the P4 programs take it from the declaration (p4src/gen_elements.py, gen_tna.py).
MOST_NAMING_UQ4 = 12


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")
def test_few_hand_written_files_name_uq4():
    out = subprocess.run(["git", "grep", "-il", "uq4", "--", ".", ":!tests", ":!bench",
                          ":!docs", ":!p4src/build"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    hand = sorted(set(out) - {str(p.relative_to(ROOT)) for p in GENERATED})
    assert len(hand) <= MOST_NAMING_UQ4, hand
    # no hand-written P4 names a lane contribution: they speak of lanes
    contributions = [e.name for e in encodings.LANES if e.worker]
    for p4 in P4SRC.rglob("*.p4"):
        if "build" in p4.relative_to(P4SRC).parts or p4 in GENERATED:
            continue
        text = p4.read_text().lower()
        assert not [n for n in contributions if n in text], p4


def test_a_slot_bitmap_has_as_many_bits_as_children():
    text = (INCLUDE / "aggregation.p4").read_text()
    width = re.search(r"register<bit<(\d+)>>\(SLOT_REGS\) bitmap;", text).group(1)
    assert int(width) == sizes.MAX_CHILDREN


def test_a_changed_constant_is_told_apart():
    text = (INCLUDE / "sizes.p4").read_text().replace("#define POOL_SIZE 512",
                                                      "#define POOL_SIZE 1024")
    assert differences(defines(text), SIZES_P4) == {"POOL_SIZE": (1024, 512)}
    text = (INCLUDE / "elements.p4").read_text().replace("ENC_SUM8 = 5", "ENC_SUM8 = 6")
    assert differences(consts(text), {"ENC_SUM8": 5}) == {"ENC_SUM8": (6, 5)}


def _script(folder: Path, name: str):
    sys.path.insert(0, str(folder))
    try:
        return __import__(name)
    finally:
        # by value: the script may itself have put the repository root in front
        sys.path.remove(str(folder))


def test_the_generators_and_builds_make_the_declared_profiles():
    gen = _script(P4SRC, "gen_elements")
    v1model = [p for p in profiles.PROFILES.values() if not p.twin]
    assert sorted(gen.PROFILES) == sorted(p.elems for p in v1model)
    assert profiles.PROFILES["default"].elems == sizes.ELEMS
    # the Makefile compiles each profile into its build, elements per pass and passes
    make = (ROOT / "Makefile").read_text()
    built = {(d or ".", int(n) * int(k or 1), int(k or 1)) for d, n, k in re.findall(
        r"build_tools\.py compile(?:-twin)? \$\(P4OUT\)/?(\S*) (\d+)(?: (\d+))?", make)}
    assert built == {(p.build, p.elems, p.passes) for p in profiles.PROFILES.values()}


def test_the_tofino_variants_are_the_declared_ones():
    bt = _script(P4SRC / "tna", "build_tofino")
    assert sorted(bt.VARIANTS) == sorted(profiles.variants())
    # The twins run Tofino 1's walk, and as many elements a pass as its CNAT8 programs sum.
    for prof in profiles.PROFILES.values():
        for fam in prof.families:
            name = f"{fam}-t1"
            assert bt.passes(name) == prof.passes, name
            if profiles.FAMILIES[fam].result == "cnat8":
                assert bt.VARIANTS[name][2] == prof.elems // prof.passes, name


def _lua_table(text: str, name: str) -> dict[int, str]:
    body = re.search(rf"local {name} = \{{(.*?)\}}", text, re.S).group(1)
    return {int(k): v.strip().strip('"') for k, v in re.findall(r"\[(\d+)\]\s*=\s*([^,}]+)",
                                                                 body)}


def test_the_dissector_knows_the_declared_encodings():
    text = (ROOT / "worker" / "dissector" / "natswitch.lua").read_text()
    assert _lua_table(text, "encodings") == {e.code: e.label for e in encodings.ALL}
    assert {k: float(v) for k, v in _lua_table(text, "elem_size").items()} == {
        e.code: e.bits / 8 for e in encodings.ALL}
    assert f"local AGG_PORT = {sizes.AGG_PORT}\n" in text
    assert f"local HDR_LEN = {sizes.AGG_HDR}\n" in text


@pytest.mark.parametrize("enc", encodings.ALL, ids=lambda e: e.name)
def test_every_encoding_s_rules_name_declared_encodings(enc):
    assert encodings.encoding(enc.name) is encodings.encoding(enc.code) is enc
    assert set(enc.sums) <= set(encodings.RESULTS)
    if enc.job:
        assert enc.job[0] in enc.sums and enc.job[1] in enc.sums
    # a packet of the default profile: 168 elements, 84 bytes at 4 bits, 672 at 32
    assert enc.payload_bytes(168) == {4: 84, 8: 168, 32: 672}[enc.bits]


def test_the_combination_check_names_what_is_wrong():
    from protocol.combos import problem, sums_problem
    wide, tofino = profiles.PROFILES["wide"], profiles.PROFILES["tofino"]
    assert problem("cnat8", "cnat8", "fixed32") is None
    assert problem("uq4", "sum8", "sum8", workers=17) is None
    assert "carries at most 17" in problem("uq4", "sum8", "sum8", workers=18)
    assert "need sum8 results" in problem("uq4", "cnat8", "cnat8")
    assert "need cnat8 partial sums" in problem("nat4", "cnat8", "fixed32", tree_switches=2)
    assert problem("nat4", "cnat8", "fixed32") is None      # one switch: no partial sums
    assert "need fixed32 or cnat8 results" in problem("cnat8", "sum8", "sum8")
    assert "the sums of UQ4 contributions, not of FLOAT32" in sums_problem(
        1, encodings.BY_NAME["float32"].code, "sum8", "sum8")
    assert "profile wide has no nat4" in problem("nat4", "cnat8", "cnat8", prof=wide)
    assert "has no NAT4 decode" in problem("nat4", "cnat8", "cnat8", prof=tofino)
    assert problem("uq4", "sum8", "sum8", prof=tofino) is None
    assert problem("uq4", "sum8", "sum8", sparse=True) == "sparse jobs take cnat8 or fixed32"
