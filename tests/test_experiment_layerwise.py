"""The layer-wise experiment's command line and outputs, on a short run."""

import csv
import subprocess
import sys

import numpy as np
import pytest

from worker.experiments import layerwise


def test_short_run_writes_csv_plot_and_table(tmp_path, capsys):
    out = tmp_path / "lw"
    rc = layerwise.main(["--workers", "2", "--steps", "20", "--eval-every", "10", "--seeds", "2",
                         "--compressors", "topk:0.05", "cnat", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "[1/10]" in printed and "[10/10]" in printed  # progress, one line per run
    rows = list(csv.DictReader((out / "layerwise.csv").open()))
    runs = {(r["compressor"], r["mode"], r["seed"]) for r in rows}
    assert len(runs) == 2 + 2 * 2 * 2  # baseline and every compressor in both modes, 2 seeds
    assert {r["step"] for r in rows} == {"10", "20"}
    cnat_bits = {float(r["bits_per_element"]) for r in rows if r["compressor"] == "cnat"}
    assert cnat_bits == {9.0}
    assert all(0 <= float(r["test_accuracy"]) <= 1 for r in rows)
    assert (out / "layerwise.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "layerwise.md").read_text()
    assert "| topk:0.05 | layer |" in table and "| topk:0.05 | model |" in table
    assert "| none | - | 32.000 |" in table


def test_runs_are_deterministic_and_paired():
    args = layerwise.parse_args(["--workers", "2", "--steps", "15", "--eval-every", "5"])
    data = layerwise.load_digits_split(seed=0)
    a = layerwise.train("qsgd:s=2", "layer", 0, args, data)
    b = layerwise.train("qsgd:s=2", "layer", 0, args, data)
    assert a.accuracy == b.accuracy and a.bits == b.bits
    # an element-wise operator sees the same batches in both modes: same bits, close curves
    lay = layerwise.train("cnat", "layer", 0, args, data)
    mod = layerwise.train("cnat", "model", 0, args, data)
    assert lay.bits == mod.bits
    assert np.allclose(lay.loss, mod.loss, rtol=0.1)


def test_summary_calls_a_clear_difference():
    runs = []
    for seed in range(4):
        for mode, acc in (("layer", 0.9 + 0.001 * seed), ("model", 0.8 + 0.002 * seed)):
            r = layerwise.Run("topk:0.01", mode, seed, [10], [acc], [0.1], [1.0])
            runs.append(r)
    rows = {r["mode"]: r for r in layerwise.summary(runs)}
    assert rows["layer"]["verdict"].startswith("layer +0.09")
    runs[2].accuracy = [0.70]  # one seed reverses: no longer clear
    rows = {r["mode"]: r for r in layerwise.summary(runs)}
    assert rows["layer"]["verdict"].startswith("tie")


def test_help_and_bad_arguments(capsys):
    done = subprocess.run([sys.executable, "-m", "worker.experiments.layerwise", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--compressors" in done.stdout and "topk" in done.stdout
    for argv, msg in ((["--compressors", "bogus"], "unknown compressor"),
                      (["--steps", "0"], "--steps must be >= 1"),
                      (["--hidden", "a,b"], "comma-separated integers")):
        with pytest.raises(SystemExit) as e:
            layerwise.parse_args(argv)
        assert e.value.code == 2 and msg in capsys.readouterr().err
