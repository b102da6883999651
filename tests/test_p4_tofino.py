"""The Tofino profile (p4src/tna/, docs/PROTOCOL.md "Tofino profile"): its tables hold the
protocol's arithmetic, and the committed compiler summaries (p4src/build/tofino/) are what
p4c-tofino reports for the committed sources."""

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import p4_ahead

REPO = Path(__file__).resolve().parent.parent
TNA = REPO / "p4src" / "tna"
SUMMARIES = REPO / "p4src" / "build" / "tofino"
M32 = 0xFFFFFFFF

sys.path.insert(0, str(TNA))
try:
    import build_tofino
    import gen_tna
finally:
    sys.path.pop(0)


def test_generated_elements_match_generator(tmp_path):
    out = tmp_path / "elements_tna.p4"
    subprocess.run([sys.executable, str(TNA / "gen_tna.py"), "--out", str(out)], check=True)
    assert out.read_text() == (TNA / "elements_tna.p4").read_text()


def v1model_decode(code: int) -> int:
    """p4src/gen_elements.py DECODE on 32 bits: +-(1 << (m - 1)), a shift past 31 gives 0."""
    m, sign = code & 0x7F, code >> 7
    shift = (m - 1) & 0xFF
    mag = (1 << shift) & M32 if shift < 32 else 0
    return ((mag ^ (-sign & M32)) + sign) & M32


def test_decode_table_is_the_v1model_decode():
    for code in range(256):
        assert gen_tna.decode_value(code) == v1model_decode(code), code


def ternary(entries: list[str]):
    """The const entries as (value, mask, action, argument), in priority order."""
    out = []
    for e in entries:
        m = re.fullmatch(r"32w(\w+) &&& 32w(\w+) : (\w+)\((?:\d+w)?(\w*)\);", e)
        out.append((int(m[1], 0), int(m[2], 0), m[3], int(m[4], 0) if m[4] else None))
    return out


LEAD = ternary(gen_tna.round_entries())
CODE = ternary(gen_tna.code_entries())


def first_match(table, key):
    return next((a, arg) for v, m, a, arg in table if key & m == v)


def recompress(s: int, r: int) -> int:
    """The egress steps on one element: lead match, masked random bits, add, code match."""
    action, mask = first_match(LEAD, s)
    c, mag = (0x80, -s & M32) if action == "neg" else (0, s)
    r = 0 if action == "zero" else r & mask
    c = 0 if action == "zero" else c
    _, m = first_match(CODE, (mag + r) & M32)
    return c | m


def signed(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


def test_recompression_is_unbiased_and_lands_on_a_neighbouring_power_of_two():
    """Over every r below the leading one, the codes' mean is s exactly; each code is the
    power of two below |s| or the one above, with s's sign."""
    rng = random.Random(7)
    samples = [0, 1, -1, 2, -2, 3, -3, 5, -6, 7, 1 << 30, -(1 << 30), (1 << 30) + 1,
               -(1 << 31), (1 << 31) - 1, *(rng.randrange(-(1 << 20), 1 << 20)
                                             for _ in range(40))]
    assert {recompress(0, r) for r in (0, 1, M32)} == {0}
    for s in samples[1:]:
        p = abs(s).bit_length() - 1
        rs = range(1 << p) if p <= 10 else [rng.randrange(1 << 32) for _ in range(2000)]
        codes = [recompress(s & M32, r) for r in rs]
        values = [signed(gen_tna.decode_value(c)) if c != 0x20 else 1 << 31 for c in codes]
        lo, hi = 1 << p, 1 << (p + 1)
        assert {abs(v) for v in values} <= {lo, hi}, s
        assert all((v < 0) == (s < 0) for v in values), s
        if p <= 10:     # every r: exactly unbiased
            assert sum(values) == s * len(values), s


def test_recompression_uses_every_random_bit_below_the_leading_one():
    """Rounding up happens exactly when |s| + (r mod 2^p) carries into bit p + 1."""
    for s in (5, 6, 1000, -1000, 123456, -(1 << 29) - 77):
        a = abs(s)
        p = a.bit_length() - 1
        for r in (0, 1, (1 << p) - 1, (1 << p) - (a - (1 << p)), (1 << p) - (a - (1 << p)) - 1):
            up = a + (r % (1 << p)) >= 1 << (p + 1)
            code = recompress(s & M32, r & M32)
            assert code & 0x7F == p + 1 + up, (s, r)


def test_committed_summaries_cover_every_variant():
    found = [p.stem for p in SUMMARIES.glob("*.json") if not p.stem.endswith(".next")]
    assert sorted(found) == sorted(build_tofino.VARIANTS)
    for name, (target, _, elems, _, harvest) in build_tofino.VARIANTS.items():
        summary = json.loads((SUMMARIES / f"{name}.json").read_text())
        passes = build_tofino.passes(name)
        assert summary["target"] == target and summary["elements_per_pass"] == elems
        assert (summary["passes_per_packet"], summary["elements_per_packet"]) == \
            (passes, elems * passes)
        # every pass but a contribution's first, then the harvest
        assert summary["harvest_passes"] == harvest
        assert summary["recirculations_per_result"] == passes - 1 + harvest
        # A pass fits the pipe: the sums' registers, two int32 elements each, four in 16-bit
        # lanes or one in the walk's, are in it.
        assert summary["stages_ingress"] <= summary["stages_available"]
        assert summary["stages_egress"] <= summary["stages_available"]
        lanes = "-DLANES_ONLY" in build_tofino.VARIANTS[name][3]
        assert summary["elements_per_pair_register"] == (4 if lanes else 1 if passes > 1
                                                         else 2)
        assert summary["pair_registers"] * summary["elements_per_pair_register"] == elems


def test_every_committed_summary_was_compiled_from_these_sources():
    """A summary records the sha256 of the sources it was compiled from (CI recompiles one
    variant): a change to p4src/tna/ or the protocol's headers without `make p4-tofino`
    leaves every summary stale, and this fails."""
    now = build_tofino.source_hash()
    stale = [name for name in build_tofino.VARIANTS
             if json.loads((SUMMARIES / f"{name}.json").read_text())["sources_sha256"] != now]
    assert not stale, f"{stale}: run `make p4-tofino` and commit p4src/build/tofino/"
    assert set(build_tofino.sources()) >= set(TNA.glob("*.p4"))


def test_the_walk_carries_the_targets_elements_per_packet():
    """Issue 48's targets, as compiled: CNAT8 both ways, at least 64 elements a packet on
    Tofino 1 and 128 on Tofino 2, every pass within the pipe's stages."""
    for name, most in (("cnat8-mp-t1", 64), ("cnat8-mp-t2", 128)):
        s = json.loads((SUMMARIES / f"{name}.json").read_text())
        assert "-DCNAT8_RESULTS" in s["flags"] and s["elements_per_packet"] >= most
        assert s["passes_per_packet"] > 1 and s["harvest_passes"] == s["passes_per_packet"] - 1


# The variant the test recompiles: the SwitchML-style FIXED32 profile on Tofino 1 (about a
# minute of one core); `make p4-tofino` recompiles them all.
RECOMPILED = p4_ahead.TOFINO_VARIANT


# Compiled in the background from the start of the session (tests/p4_ahead.py), after the
# default profile's p4c run: the test may wait for both.
@pytest.mark.tofino
@pytest.mark.timeout(3600)
@pytest.mark.skipif(shutil.which("p4c-tofino") is None,
                    reason="p4c-tofino is not on PATH (make setup installs it from "
                           "../shared/p4-toolchain-tofino): cannot recompile the Tofino profile")
def test_recompiling_gives_the_committed_summary(tmp_path):
    out = p4_ahead.result(p4_ahead.TOFINO_KEY)
    if out is None:
        build_tofino.compile_variant(RECOMPILED, tmp_path)
        out = tmp_path
    fresh = build_tofino.summarize(RECOMPILED, out)
    committed = json.loads((SUMMARIES / f"{RECOMPILED}.json").read_text())
    assert fresh == committed, "make p4-tofino and commit p4src/build/tofino/"


def walk_table(passes: int) -> dict:
    """gen_tna's walk_step entries for `passes` segments, keyed (harvest, seg, dest) with
    dest None for a wildcard, as (action, [arguments])."""
    out = {}
    for e in gen_tna.walk_entries(passes):
        m = re.fullmatch(r"\((\d), (\d+), (\w+)\) : (\w+)\(([\d, ]*)\);", e)
        args = [int(a) for a in m[5].split(",") if a.strip()]
        out[int(m[1]), int(m[2]), None if m[3] == "_" else m[3]] = (m[4], args)
    return out


def step(table, harvest, seg, dest):
    return table.get((harvest, seg, dest)) or table[harvest, seg, None]


@pytest.mark.parametrize("passes", [2, 3, 4, 8])
@pytest.mark.parametrize("dest", ["OUT_MCAST", "OUT_UCAST", "OUT_NONE"])
def test_the_walk_sums_every_segment_once_and_harvests_them_in_order(passes, dest):
    """A packet walked through the generated entries and passes_tna.p4's actions: pass k
    sums segment k at its own cells (SLOT_REGS after segment k - 1's), consuming it; a
    completing packet then reads the segments back last first, each prepended to the codes
    already harvested, and leaves with segments 0..N-1 in order; a packet for a use still
    open is absorbed after its last segment."""
    slot_regs, base = 1024, 7
    table = walk_table(passes)
    payload = list(range(passes))          # the segments the packet carries, in order
    harvest, seg, ridx, summed, read = 0, 0, base, [], []
    summed.append((payload.pop(0), ridx))  # the first pass sums segment 0
    while True:
        action, args = step(table, harvest, seg, dest)
        if action == "absorb":
            assert dest == "OUT_NONE" and not payload and harvest == 0
            break
        if action in ("out_mcast", "out_ucast"):
            assert action == {"OUT_MCAST": "out_mcast", "OUT_UCAST": "out_ucast"}[dest]
            payload.insert(0, ("sum", seg))             # the egress re-compresses it
            read.append((seg, ridx))
            break
        if action == "consume":                         # consume(seg): ridx += SLOT_REGS
            (nxt,) = args
            assert harvest == 0 and nxt == seg + 1
            ridx += slot_regs
            seg = nxt
            summed.append((payload.pop(0), ridx))
        else:                                           # harvest(seg, read): ridx -= SLOT_REGS
            assert action == "harvest"
            nxt, this = args
            assert this == seg and nxt == seg - 1
            payload.insert(0, ("sum", seg))             # this pass's sums, re-compressed
            read.append((seg, ridx))
            ridx -= slot_regs
            harvest, seg = 1, nxt
    assert summed == [(k, base + k * slot_regs) for k in range(passes)]
    if dest != "OUT_NONE":
        assert payload == [("sum", k) for k in range(passes)]
        # each segment read where it was summed, last first
        assert read == [(k, base + k * slot_regs) for k in reversed(range(passes))]
