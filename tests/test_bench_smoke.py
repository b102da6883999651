"""The benches that need no root, in quick mode (BENCH_QUICK=1), end to end through the
report: they run, count what they claim from the packets, and the report has its rows.
Figures are not checked here beyond what the protocol fixes (frame sizes, packet counts)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worker import wire
from worker.frames import Framer

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    report = out / "results.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "all.py"), "--no-root", "--dir", str(out),
         "--report", str(report)],
        capture_output=True, text=True, timeout=300, cwd=str(REPO),
        env=dict(os.environ, BENCH_QUICK="1", MPLBACKEND="Agg"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, report, proc.stdout


def frame_len(encoding: int) -> int:
    f = Framer(("02:00:00:00:00:01", "10.0.0.1"), ("02:00:00:00:00:02", "10.0.0.2"))
    return f.lengths[encoding]


def test_every_bench_ran_and_the_report_has_its_sections(quick_run):
    out, report, stdout = quick_run
    assert "bench: all ok" in stdout
    md = report.read_text()
    for heading in ("## Machine", "## Targets", "## Bytes per gradient element",
                    "## Convergence", "## C_nat codec", "## softswitch against BMv2",
                    "## PyTorch DDP on MNIST-1D: convergence"):
        assert heading in md
    # without root the Mininet bench is left out, and the report says so
    assert "Not run (needs root and Mininet)." in md
    # the 4-bit side by side has its rows and the switch's own rates; a quick run leaves
    # out the wide profiles (tests/test_bench_report.py has the wide4 columns)
    assert "| uniform THC INA (UQ4, SUM8 down) |" in md and "uq4 aggregates" in md
    assert "wide4" not in (out / "torch_convergence.txt").read_text()
    for png in ("convergence.png", "torch_convergence.png"):
        assert (report.with_suffix("") / png).stat().st_size > 1000
    assert "CNAT8 encode" in (out / "codec.txt").read_text()
    assert "softswitch:" in (out / "softswitch_pps.txt").read_text()


def test_wire_counts_whole_frames_of_each_encoding(quick_run):
    out, report, _ = quick_run
    data = json.loads((out / "wire.json").read_text())
    rows = {r["variant"]: r for r in data["rows"]}
    assert list(rows) == ["C_nat INA", "C_nat up, FIXED32 down", "int32 INA",
                          "parameter server"]
    cnat, fixed = frame_len(wire.ENC_CNAT8), frame_len(wire.ENC_FIXED32)
    # no loss in process: every packet is a full frame of the variant's encodings
    assert rows["C_nat INA"]["up_bytes_per_packet"] == cnat
    assert rows["C_nat INA"]["down_bytes_per_packet"] == cnat
    assert rows["C_nat up, FIXED32 down"]["down_bytes_per_packet"] == fixed
    assert rows["int32 INA"]["up_bytes_per_packet"] == fixed
    assert rows["parameter server"]["up_bytes_per_packet"] == fixed    # float32: 4 bytes too
    for r in rows.values():
        # nothing is lost in process: no timer may fire, however loaded the machine
        assert r["retransmissions"] == 0, r
        # the switch's counters saw the packets the hosts' taps saw
        assert r["switch_up_packets"] == r["up_packets"]
        assert r["switch_down_packets"] == r["down_packets"]
    # the parameter server's own link carries every worker's traffic
    ps = rows["parameter server"]
    assert ps["busiest"] in ("h5->s1", "s1->h5")
    assert ps["busiest_bytes_per_element"] == pytest.approx(4 * ps["up_bytes_per_element"],
                                                             rel=0.05)
    for t in data["targets"]:
        assert t["met"] is True, t["text"]       # 3.2x follows from 168 elements per packet
    for name in rows:
        assert f"| {name} |" in report.read_text()


def test_convergence_has_a_curve_per_method_on_identical_steps(quick_run):
    out, report, _ = quick_run
    data = json.loads((out / "convergence.json").read_text())
    names = [r[0] for r in data["rows"]]
    assert names[:3] == ["uncompressed", "int32 INA (switch)", "C_nat INA (switch)"]
    assert len(names) > 3 and all(n.endswith("(sim.)") for n in names[3:])
    assert data["eval_steps"][-1] == data["steps"]
    for name, curve in data["curves"].items():
        assert len(curve) == len(data["eval_steps"]), name
        assert all(0.0 <= a <= 1.0 for a in curve)
    # chance on 10 digits is 0.1; 20 steps already do far better whatever the method
    assert all(r[2] > 0.3 for r in data["rows"])
    assert data["targets"][0]["name"].startswith("C_nat INA (switch)")
    for name in names:
        assert f"| {name} |" in report.read_text()
