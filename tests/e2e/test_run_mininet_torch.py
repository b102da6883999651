"""mininet/run.py --framework torch: PyTorch DDP through the P4 switch (the communication
hook) and the Gloo baseline whose TCP the same switch routes as plain IPv4."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import e2e_switch

pytest.importorskip("torch")
pytest.importorskip("mnist1d")

REPO = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(REPO / "mininet" / "run.py")]


@pytest.mark.slow
@pytest.mark.parametrize("aggregation, profile", [("switch", None), ("switch", "wide"),
                                                  ("gloo", None)])
def test_torch_job_trains_in_lockstep_and_reports(tmp_path, aggregation, profile):
    out = tmp_path / "run"
    extra = ["--profile", profile] if profile else []
    r = subprocess.run([*RUN, "--switch", e2e_switch(),
                        "--framework", "torch", "--aggregation", aggregation, "--steps", "4",
                        "--eval-every", "2", "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["framework"] == "torch"
    (job,) = report["jobs"]
    assert job["ok"] and job["workers"] == 4 and job["steps"] == 4, job
    assert job["identical_models"]                   # DDP's broadcast, then equal means
    assert [s for s, _ in job["accuracy_curve"]] == [2, 4]
    # From the broadcast model at time 0 to the two evaluations.
    assert len(job["accuracy_time"]) == 3 and job["accuracy_time"][1][0] > 0
    for plot in ("accuracy.png", "accuracy_time.png"):
        assert (out / plot).stat().st_size > 0
    worker = json.loads((out / "workers" / "h1.json").read_text())
    assert worker["parameters"] >= 100_000 and worker["framework"] == "torch"
    counters = report["switch_counters"]["s1"]
    if aggregation == "switch":
        assert job["encoding"] == "CNAT8" and worker["path"] == "switch"
        assert counters["NatIngress.agg.events"]["2"][0] > 0        # slots completed
        # Each gradient went up as CNAT8: about a byte per element and a packet's headers
        # (168 elements per packet; 1456 fill the MTU on the wide profile). Resends on a
        # loaded machine add to the wire's bytes, not to what the encoding costs.
        first = job["bytes_per_element_up"] - job["bytes_per_element_resent"]
        assert first < (1.1 if profile == "wide" else 2), job
        assert first > (1.0 if profile == "wide" else 1.2), job
    else:
        assert job["aggregation"] == "gloo" and worker["path"] == "gloo"
        assert "NatIngress.agg.events" not in counters or not any(
            v[0] for k, v in counters["NatIngress.agg.events"].items() if k == "2")
        # Gloo's ring moves float32: 2 (n - 1) / n * 4 = 6 bytes per element, plus the
        # model broadcast and TCP/IP headers, all through the switch's ports.
        assert job["bytes_per_element_up"] > 5
        rx = sum(v[1] for v in counters["NatIngress.port_rx"].values())
        assert rx >= 6 * worker["parameters"] * 4


@pytest.mark.slow
def test_a_sparse_torch_job_sends_the_blocks_its_embedding_gradient_touched(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([*RUN, "--switch", e2e_switch(),
                        "--framework", "torch", "--sparse", "--model", "embedding",
                        "--steps", "4", "--eval-every", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["sparse"] and report["model"] == "embedding"
    (job,) = report["jobs"]
    assert job["ok"] and job["identical_models"], job
    worker = json.loads((out / "workers" / "h1.json").read_text())
    assert worker["path"] == "switch" and worker["parameters"] == 172_462
    # a step touches a fraction of the table's blocks: far below CNAT8's 1.35 bytes per
    # element of a dense job (168 elements and the headers per packet)
    assert job["bytes_per_element_up"] < 0.8, job["bytes_per_element_up"]
    counters = report["switch_counters"]["s1"]
    assert counters["NatIngress.agg.events"]["2"][0] > 0        # blocks completed
