"""The committed p4src/build/, build/wide/ and build/wide4/ are the compiled forms of the
committed sources (one program, three profiles: controller/profiles.py), and build/twin/ of
the Tofino profile's v1model twin (p4src/twin/)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import p4_ahead

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "p4src" / "build"


def source_hash(which: str = "hash") -> str:
    out = subprocess.run([sys.executable, str(REPO / "p4src" / "build_tools.py"), which],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


PROFILES = ("default", "wide", "wide4")


def build_of(name: str) -> Path:
    from controller.profiles import PROFILES as ALL

    return ALL[name].build


@pytest.mark.parametrize("name", PROFILES)
def test_build_matches_source_hash(name):
    recorded = (build_of(name) / "agg.sha256").read_text().strip()
    assert recorded == source_hash(), (
        f"p4src/ changed since {build_of(name)} was compiled: run `make p4` where p4c-bm2-ss "
        "is installed and commit p4src/build/")


def test_generated_elements_match_generator(tmp_path):
    out = tmp_path / "elements.p4"
    subprocess.run([sys.executable, str(REPO / "p4src" / "gen_elements.py"), "--out", str(out)],
                   check=True)
    assert out.read_text() == (REPO / "p4src" / "include" / "elements.p4").read_text()


def program(build: Path = BUILD) -> dict:
    """A committed build's JSON (the wide ones are 30 MB: read each once where it can)."""
    return json.loads((build / "agg.json").read_text())


def elems_in_program(prog: dict) -> int:
    (fixed,) = [h for h in prog["header_types"] if h["name"] == "fixed_h"]
    return len(fixed["fields"])


def elems_in_build(build: Path = BUILD) -> int:
    return elems_in_program(program(build))


def recompiled(name: str, tmp_path: Path) -> Path:
    """The folder where p4c compiled profile `name` from the committed sources: the
    session's background compile (tests/p4_ahead.py), or here when there was none."""
    fresh = p4_ahead.result(name)
    if fresh is None:
        subprocess.run(p4_ahead.command(name, tmp_path), check=True, capture_output=True)
        fresh = tmp_path
    return fresh


def test_profiles_are_the_generators_and_the_builds():
    """Each profile's build holds its elements per packet; the generator writes exactly
    the profiles; the default is the workers' default."""
    sys.path.insert(0, str(REPO / "p4src"))
    try:
        import gen_elements
    finally:
        sys.path.pop(0)
    from controller.profiles import PROFILES as ALL
    from controller.profiles import elems_in, elems_of

    agg = [p for p in ALL.values() if not p.twin]
    assert sorted(p.elems for p in agg) == sorted(gen_elements.PROFILES)
    for prof in ALL.values():
        # a walk's packet is its passes' segments (p4src/tna/passes_tna.p4); elems_of()
        # is elems_in() of the file bmv2_json names, each JSON read once here
        assert Path(prof.bmv2_json) == prof.build / "agg.json"
        prog = program(prof.build)
        assert elems_in_program(prog) * prof.passes == elems_in(prog) == prof.elems
    assert ALL["default"].build == BUILD
    assert elems_of(ALL["default"].bmv2_json) == ALL["default"].elems


# Recompiling a wide profile takes 10-15 minutes of one core and up to 19 GB of memory (p4c
# 1.2.4.8): only when asked for.
WIDE_OPT_IN = p4_ahead.WIDE_OPT_IN
RECOMPILED = ("default", *(pytest.param(name, marks=[
    pytest.mark.slow, pytest.mark.timeout(7200),
    pytest.mark.skipif(os.environ.get(WIDE_OPT_IN) != "1",
                       reason=f"recompiling a wide profile takes 10-15 min: {WIDE_OPT_IN}=1")])
    for name in p4_ahead.WIDE))


# The recompiles run one after the other in the background from the start of the session
# (tests/p4_ahead.py): a test that comes early may wait for the ones before its own.
@pytest.mark.p4c
@pytest.mark.timeout(3600)
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                    reason="p4c-bm2-ss is not on PATH: cannot recompile p4src/ to compare")
@pytest.mark.parametrize("name", RECOMPILED)
def test_recompiling_gives_the_committed_build(tmp_path, name):
    build = build_of(name)
    fresh = recompiled(name, tmp_path)
    assert json.loads((fresh / "agg.json").read_text()) == program(build)
    assert (fresh / "agg.p4info.txt").read_text() == (build / "agg.p4info.txt").read_text()


def test_twin_build_matches_its_sources_and_the_tofino_variant():
    """The twin is compiled from its sources, with the elements per pass of the Tofino
    variants that carry CNAT8 both ways (p4src/tna/build_tofino.py)."""
    sys.path.insert(0, str(REPO / "p4src" / "tna"))
    try:
        import build_tofino
    finally:
        sys.path.pop(0)
    from controller.profiles import PROFILES as ALL

    twin, walk = ALL["tofino"], ALL["tofino-mp"]
    for prof, target in ((twin, "p4-twin"), (walk, "p4-twin-mp")):
        assert (prof.build / "agg.sha256").read_text().strip() == source_hash("hash-twin"), (
            f"p4src/twin/ or p4src/tna/ changed since {prof.build} was compiled: run "
            f"`make {target}` and commit it")
    assert elems_in_build(twin.build) == twin.elems
    assert {build_tofino.VARIANTS[v][2] for v in ("cnat8-t1", "cnat8-t2")} == {twin.elems}
    # the walk's twin: the cnat8-mp-t1 variant's segments and passes
    _, _, elems, flags, _ = build_tofino.VARIANTS["cnat8-mp-t1"]
    assert (elems_in_build(walk.build), walk.passes) == (elems, build_tofino.passes("cnat8-mp-t1"))


@pytest.mark.p4c
@pytest.mark.timeout(3600)
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                    reason="p4c-bm2-ss is not on PATH: cannot recompile p4src/twin/ to compare")
@pytest.mark.parametrize("name", ["tofino", "tofino-mp"])
def test_recompiling_the_twin_gives_the_committed_build(tmp_path, name):
    build = build_of(name)
    fresh = recompiled(name, tmp_path)
    assert json.loads((fresh / "agg.json").read_text()) == program(build)
    assert (fresh / "agg.p4info.txt").read_text() == (build / "agg.p4info.txt").read_text()


def test_workers_use_the_programs_elements_per_packet():
    from worker import codec, wire

    assert wire.ELEMS == codec.ELEMS == elems_in_build()


def test_profiles_share_one_p4info_but_the_payload_headers():
    """The same program: the P4Info of every profile names the same tables, actions and
    counters (the controller programs them alike), but for the conversions of the 4-bit and
    SUM8 payloads, which only the default and wide4 profiles have (FOUR_BIT,
    p4src/include/sizes.p4), actions no table holds."""
    import re

    def names(build):
        found = re.findall(r'name: "([^"]+)"', (build / "agg.p4info.txt").read_text())
        return sorted({n for n in found if not re.fullmatch(r"(.*\.)?(acc|lane)\d+", n)})

    four_bit = {"NatIngress.agg.decode_nat4.decode_nat4", "NatIngress.agg.lane_write_uq4",
                "NatIngress.agg.lane_add_uq4", "NatIngress.agg.lane_write_sum8",
                "NatIngress.agg.lane_add_sum8", "NatIngress.agg.lane_result"}
    default = names(build_of("default"))
    assert four_bit <= set(default)
    assert names(build_of("wide4")) == default
    assert sorted(set(default) - four_bit) == names(build_of("wide"))


def test_the_build_names_its_sources_relative_to_p4src():
    """Absolute paths would tie the committed JSON to one checkout (the recompile test
    then fails in every other clone)."""
    prog = program(BUILD)
    names = {prog["program"]} | {p["source_info"]["filename"]
                                 for action in prog["actions"] for p in action["primitives"]
                                 if "source_info" in p}
    assert names and not any(Path(n).is_absolute() for n in names), sorted(names)[:3]


def test_drop_reasons_are_distinct_and_named_as_the_controller_names_them():
    """Every DROP_* of constants.p4 has its own index below DROP_REASONS (the counters' size)
    and the name `controller/main.py stats` prints for it."""
    import re

    from controller.stats import DROP_NAMES

    text = (REPO / "p4src" / "include" / "constants.p4").read_text()
    reasons = {name: int(v) for name, v in re.findall(r"const bit<8> DROP_(\w+) = (\d+);", text)}
    size = int(re.search(r"#define DROP_REASONS (\d+)", text).group(1))
    assert len(set(reasons.values())) == len(reasons), reasons
    assert max(reasons.values()) < size
    assert {v: name for name, v in reasons.items() if name != "NONE"} == DROP_NAMES


def test_a_background_compile_is_waited_for_until_its_chain_dies(tmp_path, monkeypatch):
    """p4_ahead.result: a finished compile's output; a chain that died before writing the
    compile's exit code fails the waiting test with the log, instead of waiting for ever."""
    monkeypatch.setenv(p4_ahead.ENV, str(tmp_path))
    assert p4_ahead.result("default") is None           # not started this session
    done, dead = tmp_path / "default", tmp_path / "twin"
    for d in (done, dead):
        d.mkdir()
    (done / "rc").write_text("0\n")
    (dead / "log").write_text("p4c: killed\n")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "pid").write_text(str(gone.pid))
    assert p4_ahead.result("default") == done / "out"
    with pytest.raises(AssertionError, match="stopped before twin ended:\np4c: killed"):
        p4_ahead.result("twin")
    (done / "rc").write_text("2\n")
    with pytest.raises(AssertionError, match=r"compiling default failed \(exit 2\)"):
        p4_ahead.result("default")
