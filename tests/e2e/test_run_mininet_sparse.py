"""mininet/run.py --sparse: a block-sparse job trains, on the switch and on the host block
aggregator, and only the blocks some worker holds travel."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import e2e_switch

REPO = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(REPO / "mininet" / "run.py")]
STEPS = 30


def run_sparse(out: Path, *extra: str) -> tuple[dict, list[dict]]:
    r = subprocess.run([*RUN, "--switch", e2e_switch(),
                        "--sparse", "--steps", str(STEPS), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "sparse job" in r.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["sparse"] is True
    workers = [json.loads(p.read_text()) for p in sorted((out / "workers").glob("h*.json"))]
    return report, workers


def blocks_per_step(worker: dict) -> int:
    return -(-worker["parameters"] // 168)


def test_a_sparse_embedding_job_trains_on_the_switch(tmp_path):
    report, workers = run_sparse(tmp_path / "switch", "--model", "embedding")
    (job,) = report["jobs"]
    assert job["ok"] and job["identical_models"] and job["aggregation"] == "switch"
    assert job["final_test_accuracy"] > 0.15          # 30 steps at lr 0.1 (~0.2); chance 0.1
    w = workers[0]
    assert w["sparse"] and w["comm"]["chunks"] < 0.95 * STEPS * blocks_per_step(w)
    counters = report["switch_counters"]["s1"]
    assert counters["NatIngress.agg.events"]["2"][0] > 0       # completions were counted


def test_block_topk_with_cnat_trains_through_the_host_block_aggregator(tmp_path):
    report, workers = run_sparse(tmp_path / "ps", "--aggregation", "ps", "--compressor",
                                 "ef:blocktopk:0.1")
    (job,) = report["jobs"]
    assert job["ok"] and job["identical_models"] and job["aggregation"] == "ps"
    assert job["encoding"] == "CNAT8" and job["result_encoding"] == "CNAT8"
    assert job["final_test_accuracy"] > 0.3
    # each worker keeps 10% of each layer's blocks: the union of 4 is well below all blocks
    w = workers[0]
    assert w["comm"]["chunks"] < 0.6 * STEPS * blocks_per_step(w)
