"""The committed p4src/build/ is the compiled form of the committed sources."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "p4src" / "build"


def source_hash() -> str:
    out = subprocess.run([sys.executable, str(REPO / "p4src" / "build_tools.py"), "hash"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_build_matches_source_hash():
    recorded = (BUILD / "agg.sha256").read_text().strip()
    assert recorded == source_hash(), (
        "p4src/ changed since p4src/build/ was compiled: run `make p4` where p4c-bm2-ss is "
        "installed and commit p4src/build/")


def test_generated_elements_match_generator(tmp_path):
    out = tmp_path / "elements.p4"
    subprocess.run([sys.executable, str(REPO / "p4src" / "gen_elements.py"), "--elems",
                    str(elems_in_build()), "--out", str(out)], check=True)
    assert out.read_text() == (REPO / "p4src" / "include" / "elements.p4").read_text()


def elems_in_build() -> int:
    prog = json.loads((BUILD / "agg.json").read_text())
    (fixed,) = [h for h in prog["header_types"] if h["name"] == "fixed_h"]
    return len(fixed["fields"])


@pytest.mark.p4c
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None,
                    reason="p4c-bm2-ss is not on PATH: cannot recompile p4src/ to compare")
def test_recompiling_gives_the_committed_build(tmp_path):
    subprocess.run([sys.executable, str(REPO / "p4src" / "build_tools.py"), "compile",
                    str(tmp_path), str(elems_in_build())], check=True, capture_output=True)
    fresh = json.loads((tmp_path / "agg.json").read_text())
    assert fresh == json.loads((BUILD / "agg.json").read_text())
    assert (tmp_path / "agg.p4info.txt").read_text() == (BUILD / "agg.p4info.txt").read_text()


def test_workers_use_the_programs_elements_per_packet():
    from worker import codec, wire

    assert wire.ELEMS == codec.ELEMS == elems_in_build()


def test_the_build_names_its_sources_relative_to_p4src():
    """Absolute paths would tie the committed JSON to one checkout (the recompile test
    then fails in every other clone)."""
    prog = json.loads((BUILD / "agg.json").read_text())
    names = {prog["program"]} | {p["source_info"]["filename"]
                                 for action in prog["actions"] for p in action["primitives"]
                                 if "source_info" in p}
    assert names and not any(Path(n).is_absolute() for n in names), sorted(names)[:3]
