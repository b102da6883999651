"""bench/layerwise_charlm.py: how a row of layer-wise against entire-model becomes a verdict
(divergence included), its argument checks, and one tiny run through its own main()."""

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from layerwise_charlm import (  # noqa: E402  (bench/ is on the path from here)
    CANNOT_TELL,
    CONFIGS,
    LAYER_BETTER,
    MATCH_TOL,
    MODEL_BETTER,
    bits_per_element,
    calibrate,
    compare,
    diverged,
    main,
    matched_key,
    report,
)

from worker.ddp.charlm import VOCAB  # noqa: E402

BAD = math.log(VOCAB) + 0.5      # worse than guessing a character uniformly


def test_divergence_is_worse_than_guessing_or_not_finite():
    assert diverged(float("nan")) and diverged(float("inf")) and diverged(BAD)
    assert not diverged(2.3) and not diverged(math.log(VOCAB))


def test_a_mode_better_on_every_seed_gets_its_verdict_with_the_interval():
    layer, model = [2.30, 2.31, 2.29, 2.32], [2.35, 2.37, 2.33, 2.36]
    c = compare(layer, model)
    assert c["verdict"] == LAYER_BETTER and c["n"] == 4
    assert c["paired"]["high"] < 0 and c["interval"].startswith("-0.0")
    assert compare(model, layer)["verdict"] == MODEL_BETTER
    # differences that straddle zero cannot be told apart
    assert compare([2.30, 2.40, 2.31], [2.35, 2.33, 2.32])["verdict"] == CANNOT_TELL


def test_divergence_decides_only_when_one_mode_always_and_the_other_never_diverges():
    c = compare([2.3, 2.4], [BAD, float("nan")])
    assert c["verdict"].startswith(LAYER_BETTER) and c["paired"] is None
    assert compare([BAD, BAD], [2.3, 2.4])["verdict"].startswith(MODEL_BETTER)
    for layer, model in (([BAD, 2.3], [2.3, 2.4]), ([BAD, BAD], [BAD, BAD]),
                         ([BAD, 2.3], [BAD, 2.4])):
        c = compare(layer, model)
        assert c["verdict"].startswith(CANNOT_TELL), (layer, model, c)
        assert "diverged" in c["interval"]
    with pytest.raises(ValueError, match="one loss per seed"):
        compare([2.3, 2.4], [2.3])


def test_report_gives_a_row_per_measured_config_and_the_baseline():
    spec = CONFIGS[0][2]
    header, rows = report({spec: {"layer": [2.3, 2.31, 9.0], "model": [2.4, 2.42, 9.0]}},
                          [2.2, 2.21, 2.22], seeds=2)      # only the first 2 seeds count
    assert len(rows) == 2 and rows[0][2] == spec and rows[0][7] == 2
    assert rows[0][3] == CONFIGS[0][3] and rows[0][8] == LAYER_BETTER
    assert rows[-1][8] == "baseline"
    assert len(header) == len(rows[0]) and header[9] == "Holm (family of 1)"
    # no bits recorded for the row: the columns say so rather than show a number
    assert header[10:] == ["bits/element layer-wise", "entire-model"] and rows[0][10:] == ["-"] * 2
    # one comparison in the family: Holm's verdict is its own
    assert rows[0][9] == rows[0][8]


def test_holm_column_counts_only_the_rows_with_an_interval():
    # one row clearly better layer-wise (p 0.0002), two borderline ones (p 0.035 and 0.037,
    # each better uncorrected), one diverged: the family is the three tested rows, and
    # Holm's second step (0.035 x 2 > 0.05) takes the borderline verdicts away
    clear, b1, b2, bad = (c[2] for c in CONFIGS[:4])
    base = [2.32, 2.32, 2.31, 2.33]
    losses = {clear: {"layer": [2.30, 2.31, 2.29, 2.30], "model": [2.40, 2.42, 2.41, 2.40]},
              b1: {"layer": [2.31, 2.30, 2.28, 2.32], "model": base},
              b2: {"layer": [2.30, 2.30, 2.27, 2.32], "model": base},
              bad: {"layer": [2.3, 2.3, 2.3, 2.3], "model": [BAD, 2.3, 2.3, 2.3]}}
    header, rows = report(losses, [2.2] * 4, seeds=4)
    by = {r[2]: r for r in rows}
    assert header[9] == "Holm (family of 3)"
    assert by[clear][8] == LAYER_BETTER and by[clear][9] == LAYER_BETTER
    for b in (b1, b2):
        assert by[b][8] == LAYER_BETTER and by[b][9] == CANNOT_TELL
    assert by[bad][9] == "-"


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1"], "--seeds >= 2"),
    (["--lr", "0"], "--lr > 0"),
    (["--only", "nosuch"], "matches no spec"),
])
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_tiny_run_writes_both_modes_per_seed(tmp_path):
    out = tmp_path / "lw.json"
    assert main(["--seeds", "2", "--steps", "1", "--batch", "2", "--only", "topk:0.1",
                 "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["seeds_done"] == 2 and list(got["losses"]) == ["topk:0.1"]
    lay, mod = got["losses"]["topk:0.1"]["layer"], got["losses"]["topk:0.1"]["model"]
    assert len(lay) == len(mod) == len(got["uncompressed"]) == 2
    assert all(math.isfinite(x) for x in lay + mod)
    # one step from the same model and batches: the modes' compressors differ, so do losses
    assert lay != mod
    assert "topk:0.1" in got["table"]


@pytest.mark.parametrize("spec, bits", [("qsgd:s=4", 4), ("qsgd:s=16", 6)])
def test_qsgd_rows_send_the_bits_the_comment_says(spec, bits):
    # CONFIGS' comment gives QSGD's bits per element with sign: 4 at s=4, 6 at s=16
    import numpy as np

    from worker.compression.registry import make
    assert spec in [c[2] for c in CONFIGS]
    c = make(spec, np.random.default_rng(0))
    x = np.random.default_rng(1).normal(size=4096).astype(np.float32)
    sent = c.compress(x)
    per_norm = 32 * sent.payload["norm"].size
    assert (c.bits(sent) - per_norm) / x.size == bits


def test_bits_per_element_is_the_compressors_bits_over_every_steps_elements():
    r = {"steps": [{"hook": {"elements": 100, "compressor_bits": 640}},
                   {"hook": {"elements": 100, "compressor_bits": 160}}, {"hook": {}}]}
    assert bits_per_element(r) == 4.0
    with pytest.raises(ValueError, match="no compressed elements"):
        bits_per_element({"steps": [{"hook": {}}]})


def test_calibration_finds_the_fraction_that_sends_the_target_bits():
    # a threshold's bits fall as its fraction rises: here 64 * (1 - f)^3 per element
    seen = []

    def bits_at(f):
        seen.append(f)
        return 64 * (1 - f) ** 3

    f, b, n = calibrate(64 * 0.7 ** 3, bits_at)           # the answer is f = 0.3
    assert abs(b / (64 * 0.7 ** 3) - 1) <= MATCH_TOL and n == len(seen) and f == seen[-1]
    assert 0.25 < f < 0.35
    # a target it cannot reach within its tries: the closest it ran, and every try spent
    f, b, n = calibrate(1e-9, bits_at, tries=4)
    assert n == 4 and b == min(64 * (1 - x) ** 3 for x in seen[-4:])
    with pytest.raises(ValueError, match="must be > 0"):
        calibrate(0.0, bits_at)


def test_a_matched_row_pairs_layer_wise_with_the_calibrated_entire_model_run(tmp_path,
                                                                            monkeypatch):
    # runs stand in for training (the tiny run above trains): entire-model sends
    # 64 (1 - f)^3 bits per element at fraction f, layer-wise 0.5 at any fraction
    import layerwise_charlm

    calls = []

    def fake(how, spec, seed, args, data):
        calls.append((spec, args.mode, seed))
        f = float(spec.split(":")[1]) if spec else 0.0
        bits = 64 * (1 - f) ** 3 if args.mode == "model" else 0.5
        return {"final_test_loss": 2.0 + f + seed / 10 + (args.mode == "model") / 100,
                "steps": [{"hook": {"elements": 1000, "compressor_bits": bits * 1000}}]}

    monkeypatch.setattr(layerwise_charlm, "run", fake)
    out = tmp_path / "lw.json"
    assert main(["--seeds", "2", "--steps", "1", "--batch", "2", "--only", "adaptive:0.1",
                 "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    (name, ratio, key, lr), = got["matched"]
    cal = got["calibration"][key]
    assert key == matched_key("adaptive:0.1", f"adaptive:{cal['fraction']}")
    assert "at equal bits" in ratio and key in got["table"]
    # the row is one markdown row of as many cells as the header
    lines = got["table"].splitlines()
    assert next(ln for ln in lines if key in ln).count("|") == lines[0].count("|")
    row, plain = got["losses"][key], got["losses"]["adaptive:0.1"]
    # the same layer-wise runs on both rows; the entire-model side is the calibrated one
    assert row["layer"] == plain["layer"] and row["bits"]["layer"] == plain["bits"]["layer"]
    assert cal["layer_bits"] == plain["bits"]["layer"][0]
    assert row["bits"]["model"][0] == cal["model_bits"]
    assert abs(cal["model_bits"] / cal["layer_bits"] - 1) <= MATCH_TOL and cal["runs"] < 10
    assert cal["layer_bits"] == 0.5 and 0.75 < cal["fraction"] < 0.8
    assert row["bits"]["model"] == [cal["model_bits"]] * 2
    # each seed runs each spec and mode once: the matched row reuses layer-wise's run, and
    # seed 0 the runs its calibration made
    assert len(calls) == len(set(calls))
    seeds = [c for c in calls if c[0] is not None and c[2] == 1]
    assert sorted(seeds) == sorted({("adaptive:0.1", "layer", 1), ("adaptive:0.1", "model", 1),
                                    (f"adaptive:{cal['fraction']}", "model", 1)})
