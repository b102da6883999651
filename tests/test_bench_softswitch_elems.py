"""bench/softswitch_elems.py runs end to end on the committed build (twice, under two names):
two engines of this tree and two of a 'baseline' (this tree again), every row and ratio
printed. Figures are not checked (speed is the bench's to print, not the tests' to assert)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_softswitch_elems_prints_every_engine_and_ratio(tmp_path):
    build = REPO / "p4src" / "build" / "agg.json"
    again = tmp_path / "again.json"  # a second program (the same one) under another name
    again.write_bytes(build.read_bytes())
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "softswitch_elems.py"), "--json", str(build),
         "--json", str(again), "--baseline", str(REPO), "--packets", "40", "--runs", "1"],
        capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if "us CPU per packet" in ln]
    assert len(rows) == 4 and sum(ln.startswith("new ") for ln in rows) == 2
    assert all("elements/s" in ln and "load" in ln for ln in rows)
    assert proc.stdout.count("per-packet cost at") == 2
    assert proc.stdout.count("new/old per-packet cost") == 2


@pytest.mark.parametrize("args, why", [
    (["--json", "no-such.json"], "no such file"),
    (["--baseline", "/nonexistent"], "no softswitch/ there"),
    (["--packets", "0"], "--packets must be at least 1"),
])
def test_bad_arguments_are_usage_errors(args, why):
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "softswitch_elems.py"), *args],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr[-2000:]


def test_a_program_the_engine_cannot_load_is_named(tmp_path):
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "softswitch_elems.py"),
                           "--json", str(garbage)],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert proc.returncode == 1
    assert f"could not load {garbage}" in proc.stderr
    assert "Expecting value" not in proc.stderr  # the parent no longer parses an empty line
