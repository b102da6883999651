"""bench/tta_seeds.py: steps to a target per seed (first crossing), the paired speed-up and
its interval over seeds, 'not reached', the per-block Holm family, link-bound runs only."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import tta_seeds  # noqa: E402  (bench/ is on the path from here)
from tta_seeds import GLOO, INT32, LATER, SOONER, speedup, steps_to_target  # noqa: E402

STEPS = [10, 20, 30, 40, 50]


def test_a_curve_that_crosses_reaches_at_its_first_evaluation_at_or_above_the_target():
    assert steps_to_target(STEPS, [0.5, 0.7, 0.79, 0.81, 0.9], 0.8) == 40
    assert steps_to_target(STEPS, [0.5, 0.8, 0.7, 0.9, 0.9], 0.8) == 20     # equal counts


def test_a_curve_that_never_crosses_is_not_reached():
    assert steps_to_target(STEPS, [0.5, 0.6, 0.7, 0.79, 0.7999], 0.8) is None


def test_a_curve_that_crosses_and_falls_back_keeps_its_first_crossing():
    assert steps_to_target(STEPS, [0.5, 0.82, 0.6, 0.7, 0.75], 0.8) == 20


def test_steps_and_accuracies_must_pair_up():
    with pytest.raises(ValueError):
        steps_to_target(STEPS, [0.9], 0.8)


def test_equal_ratios_on_every_seed_give_that_ratio_exactly():
    s = speedup([100.0, 50.0, 80.0], [200.0, 100.0, 160.0])
    assert s.estimate == pytest.approx(2.0) and s.low == pytest.approx(2.0)
    assert s.high == pytest.approx(2.0) and s.verdict == SOONER
    assert s.interval() == "2.000x [2.000, 2.000], n=3"
    assert speedup([2.0, 2.0], [1.0, 1.0]).verdict == LATER
    assert speedup([1.0, 3.0], [1.0, 3.0]).verdict == "equal on every seed"


def test_the_interval_covers_a_known_ratio_95_percent_of_the_time():
    # synthetic experiments with a known geometric-mean speed-up of 1.5: per seed the
    # baseline's time is 1.5 x the method's times a log-normal factor (sd 0.2 in logs).
    # Over 4000 experiments of 8 seeds (fixed seed) the t interval on the log ratios must
    # cover 1.5 in 95 % +- 1.1 % of them (3 binomial standard deviations).
    rng = np.random.default_rng(20261207)
    hits = 0
    for _ in range(4000):
        method = rng.uniform(50, 400, 8)
        base = method * 1.5 * np.exp(rng.normal(0, 0.2, 8))
        s = speedup(list(method), list(base))
        hits += s.low <= 1.5 <= s.high
    assert abs(hits / 4000 - 0.95) <= 0.011
    # and the estimate of a large experiment is within 2 % of the known ratio
    method = rng.uniform(50, 400, 400)
    s = speedup(list(method), list(method * 1.5 * np.exp(rng.normal(0, 0.2, 400))))
    assert s.estimate == pytest.approx(1.5, rel=0.02)


def test_a_seed_either_side_did_not_reach_leaves_the_row_without_an_interval():
    s = speedup([100.0, None, 90.0], [120.0, 130.0, None])
    assert s.test is None and s.estimate is None and s.not_reached == (1, 1)
    assert s.interval() == "not reached: method 1/3, baseline 1/3"
    assert s.verdict == "-"


def _conv(curves: dict) -> dict:
    return {"eval_steps": STEPS, "batch": 32, "workers": 4, "per_seed": curves}


def test_each_block_is_a_family_and_only_link_bound_runs_are_measured():
    # three seeds; C_nat reaches 2 evaluations sooner than Gloo on every seed, int32 one
    # later; NAT4 never reaches the target, so it has counts and no interval
    up = [0.5, 0.6, 0.7, 0.85, 0.9]
    early = [0.5, 0.85, 0.9, 0.9, 0.9]
    late = [0.5, 0.6, 0.7, 0.75, 0.85]
    conv = _conv({GLOO: [up] * 3, INT32: [late] * 3, "C_nat INA (switch)": [early] * 3,
                  "natural dithering INA (switch)": [[0.5] * 5] * 3,
                  "uniform (THC) INA (switch)": [early] * 3})
    runs = [{"bw": 10.0, "method": "Gloo ring (TCP via the switch)", "seconds_per_step": 0.8,
             "bound": "link: s1->h4 85 % busy"},
            {"bw": 10.0, "method": "int32 INA", "seconds_per_step": 0.5,
             "bound": "link: s1->h2 97 % busy"},
            {"bw": 10.0, "method": "C_nat INA", "seconds_per_step": 0.2,
             "bound": "link: s1->h1 88 % busy"},
            {"bw": 100.0, "method": "Gloo ring (TCP via the switch)", "seconds_per_step": 0.1,
             "bound": "link: s1->h2 67 % busy"},
            {"bw": 100.0, "method": "C_nat INA", "seconds_per_step": 0.08,
             "bound": "switch s1: 26 % of a core -- bound by this machine's CPU"}]
    a = tta_seeds.analyse(conv, 0.8, 0.02, runs)
    assert a["steps_to_target"]["C_nat INA (switch)"] == [20, 20, 20]
    assert a["steps_to_target"]["natural dithering INA (switch)"] == [None] * 3
    steps = {r["method"]: r for r in a["step_rows"]}
    assert steps["C_nat INA (switch)"][GLOO]["estimate"] == pytest.approx(2.0)
    assert steps["natural dithering INA (switch)"][GLOO]["interval"].startswith("not reached")
    blocks = {rows[0]["block"]: rows for rows in a["blocks"]}
    # 100 Mbit/s: only Gloo was link-bound, so no measured block there
    assert "Mininet, 100 Mbit/s, measured" not in blocks
    meas = {r["method"]: r for r in blocks["Mininet, 10 Mbit/s, measured"]}
    # Gloo 40 steps x 0.8 s against C_nat 20 x 0.2 s: 8x sooner on every seed
    assert meas["C_nat INA (switch)"][GLOO]["estimate"] == pytest.approx(8.0)
    assert meas["C_nat INA (switch)"][GLOO]["holm"] == SOONER
    assert meas["C_nat INA (switch)"][INT32]["estimate"] == pytest.approx(50 * 0.5 / 4)
    assert "natural dithering INA (switch)" not in meas
    # the projections name what carried each method: UQ4 its compiled Tofino variant, NAT4
    # none (no Tofino program decodes it), which the table says instead of leaving a gap
    uq4, nat4 = "uniform (THC) INA (switch)", "natural dithering INA (switch)"
    title = "Tofino 2, 10 Gbit/s, projected"
    proj = {r["method"]: r for r in blocks[title]}
    assert proj["C_nat INA (switch)"]["carried_by"].startswith("cnat8")
    assert proj[uq4]["carried_by"].startswith("uq4-t2")
    assert set(proj) == {GLOO, INT32, "C_nat INA (switch)", uq4}
    assert math.isfinite(proj[GLOO]["seconds_per_step"])
    assert "decodes NAT4" in a["left_out"][title][nat4]
    assert "| NAT4 INA | - | no packets: no Tofino variant decodes NAT4" in \
        tta_seeds.time_table(a)
    # on the line-rate v1model switch both 4-bit codecs go up in half a byte and come back
    # in a byte, as C_nat does: the same busiest direction, the same projected step
    line = {r["method"]: r for r in blocks["v1model at line rate, 10 Gbit/s, projected"]}
    assert line[uq4]["seconds_per_step"] == line[nat4]["seconds_per_step"] == \
        pytest.approx(line["C_nat INA (switch)"]["seconds_per_step"])
    assert line[uq4]["seconds_per_step"] < line[INT32]["seconds_per_step"]


def test_the_tables_say_their_families():
    up = [0.5, 0.6, 0.7, 0.85, 0.9]
    conv = _conv({GLOO: [up, up], INT32: [up, up], "C_nat INA (switch)": [up, up]})
    a = tta_seeds.analyse(conv, 0.8, 0.02, None)
    assert "Holm (family of 2)" in tta_seeds.steps_table(a)
    assert "Holm (per switch, link)" in tta_seeds.time_table(a)


@pytest.mark.parametrize("flag, content, says", [
    ("--convergence", None, "not a bench/torch_convergence.py JSON"),
    ("--convergence", json.dumps({"per_seed": {}}), "eval_steps"),
    ("--measured", "[1, 2]", "not a bench/torch_tta.py JSON")])
def test_an_input_that_is_not_the_benches_json_is_a_clear_error(tmp_path, capsys, flag,
                                                                  content, says):
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(_conv({GLOO: [[0.5] * 5]})))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    args = {"--convergence": conv, "--measured": None, flag: bad}
    argv = [x for k, v in args.items() if v is not None for x in (k, str(v))]
    with pytest.raises(SystemExit) as e:
        tta_seeds.main([*argv, "--compute-ms", "20", "--json", str(tmp_path / "out.json")])
    assert e.value.code == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_the_kept_curves_are_a_convergence_input_that_gives_the_same_tables(tmp_path):
    up = [0.5, 0.6, 0.7, 0.85, 0.9]
    early = [0.5, 0.85, 0.9, 0.9, 0.9]
    conv = {**_conv({GLOO: [up, early], INT32: [up, up], "C_nat INA (switch)": [early, up],
                     "one-bit": [up, up]}), "machine": {"cpu": "x"}, "curves": {}}
    src, keep = tmp_path / "conv.json", tmp_path / "kept.json"
    src.write_text(json.dumps(conv))
    out1, out2 = tmp_path / "a.json", tmp_path / "b.json"
    common = ["--compute-ms", "20", "--plot", str(tmp_path / "p.png")]
    assert tta_seeds.main(["--convergence", str(src), "--keep", str(keep), "--json",
                           str(out1), *common]) == 0
    k = json.loads(keep.read_text())
    # the methods the tables read, and nothing of the run's other output
    assert set(k["per_seed"]) == {GLOO, INT32, "C_nat INA (switch)"} and k["seeds"] == 2
    assert "machine" not in k and k["per_seed"][GLOO] == [up, early]
    assert k["target"] == 0.8 and k["steps_to_target"][GLOO] == [40, 20]
    # one seed's curve, and one method's steps, to a line: a diff shows which changed
    lines = keep.read_text().splitlines()
    assert f"   {json.dumps(early)}," in lines and f'  "{GLOO}": [40, 20],' in lines
    assert tta_seeds.main(["--convergence", str(keep), "--json", str(out2), *common]) == 0
    a, b = json.loads(out1.read_text()), json.loads(out2.read_text())
    assert a["steps_table"] == b["steps_table"] and a["time_table"] == b["time_table"]
    # the steps alone (no curves) are kept again as they are, and give the same tables
    steps_only = {x: y for x, y in k.items() if x != "per_seed"}
    src.write_text(json.dumps(steps_only))
    again = tmp_path / "again.json"
    assert tta_seeds.main(["--convergence", str(src), "--keep", str(again), "--json",
                           str(out2), *common]) == 0
    assert json.loads(again.read_text()) == steps_only
    assert json.loads(out2.read_text())["time_table"] == a["time_table"]


REPO = Path(__file__).resolve().parents[1]
COMPUTE_MS = 2.03       # the compute per step docs/results.md states it used, MNIST-1D
CHARLM_COMPUTE_MS = 13.2    # and charlm
# (steps kept, Mininet figures, compute per step in ms): the tables docs/results.md shows
COMMITTED = {"mnist1d": ("torch_tta_steps.json", "torch_tta_mininet.json", COMPUTE_MS),
             "charlm": ("charlm_tta_steps.json", None, CHARLM_COMPUTE_MS)}


@pytest.mark.parametrize("workload", sorted(COMMITTED))
def test_the_committed_tables_are_what_the_committed_steps_make(workload):
    """docs/results.md's time-to-accuracy tables, remade from the steps per seed and the
    Mininet figures committed beside them, the step-time model and the compiled Tofino
    summaries: a change to any of them that the docs do not follow fails here."""
    res = REPO / "docs" / "results"
    kept_as, mininet, compute_ms = COMMITTED[workload]
    steps = json.loads((res / kept_as).read_text())
    assert steps.get("workload", "mnist1d") == workload
    runs = json.loads((res / mininet).read_text())["runs"] if mininet else None
    doc = (REPO / "docs" / "results.md").read_text()
    assert f"--convergence docs/results/{kept_as} " in doc
    assert f"--compute-ms {compute_ms}" in doc
    a = tta_seeds.analyse(steps, steps["target"], compute_ms / 1e3, runs)
    assert tta_seeds.steps_table(a).strip() in doc
    assert tta_seeds.time_table(a).strip() in doc
    # every method of the run has a row in every projected block, with a time or a reason
    table = tta_seeds.time_table(a)
    methods = len(steps["steps_to_target"])
    for title in a["left_out"]:
        assert sum(f"| {title} |" in ln for ln in table.splitlines()) == methods


def test_kept_steps_answer_only_the_target_they_were_kept_for():
    kept = json.loads((REPO / "docs" / "results" / "torch_tta_steps.json").read_text())
    steps = {k: v for k, v in kept.items() if k != "per_seed"}
    with pytest.raises(ValueError, match="kept for target 0.8, not 0.9"):
        tta_seeds.analyse(steps, 0.9, 0.02, None)
    # kept with their curves, the steps answer any target: later ones for a higher one
    at_08 = tta_seeds.per_seed_steps(kept, 0.8)
    at_09 = tta_seeds.per_seed_steps(kept, 0.9)
    assert at_08 == kept["steps_to_target"]
    assert all(b is None or b >= a for k in at_08 for a, b in
               zip(at_08[k], at_09[k], strict=True))
    assert at_09 != at_08


# charlm: a loss goal, lower is better (bench/separation.py's runs)
FALLING = [3.0, 2.6, 2.36, 2.34, 2.3]
FAST = [3.0, 2.34, 2.3, 2.3, 2.28]


def _charlm(curves: dict) -> dict:
    """What bench/separation.py writes: per-seed validation-loss curves under "per_seed"."""
    return {"workload": "charlm", "eval_steps": STEPS, "batch": 16, "workers": 4,
            "losses": {k: [c[-1] for c in v] for k, v in curves.items()}, "per_seed": curves}


def test_a_loss_reaches_at_its_first_evaluation_at_or_below_the_target():
    assert steps_to_target(STEPS, FALLING, 2.35, higher_is_better=False) == 40
    assert steps_to_target(STEPS, [3.0, 2.35, 2.4, 2.3, 2.3], 2.35, False) == 20   # equal
    # read as an accuracy, the same curve would be at the target from the first evaluation
    assert steps_to_target(STEPS, FALLING, 2.35) == 10
    assert steps_to_target(STEPS, [3.0, 2.9, 2.8, 2.5, 2.351], 2.35, False) is None


def test_a_charlm_run_is_timed_to_its_loss_goal_with_its_own_model(tmp_path):
    curves = {GLOO: [FALLING, FALLING, FAST], INT32: [FAST, FAST, FALLING]}
    src, out = tmp_path / "sep.json", tmp_path / "out.json"
    src.write_text(json.dumps(_charlm(curves)))
    assert tta_seeds.main(["--convergence", str(src), "--compute-ms", "20", "--json",
                           str(out), "--plot", str(tmp_path / "p.png")]) == 0
    a = json.loads(out.read_text())
    goal = tta_seeds.GOALS["charlm"]
    assert not goal.higher_is_better and a["target"] == goal.target
    assert a["steps_to_target"] == {GLOO: [40, 40, 20], INT32: [20, 20, 40]}
    assert f"steps to {goal.target:g} nats, per seed" in a["steps_table"]
    # the projection all-reduces charlm's parameters, not MNIST-1D's (more of them)
    assert tta_seeds.model_parameters("charlm") < tta_seeds.model_parameters("mnist1d")
    mn = tta_seeds.analyse(_conv(curves), 0.8, 0.02, None)
    ring = {rows[0]["block"]: rows[0]["seconds_per_step"] for rows in a["blocks"]}
    for rows in mn["blocks"]:
        assert ring[rows[0]["block"]] < rows[0]["seconds_per_step"]
    # the curves are kept with the workload, and give the same tables again
    keep, out2 = tmp_path / "kept.json", tmp_path / "out2.json"
    assert tta_seeds.main(["--convergence", str(src), "--keep", str(keep), "--compute-ms",
                           "20", "--json", str(out2), "--plot", str(tmp_path / "p.png")]) == 0
    k = json.loads(keep.read_text())
    assert k["workload"] == "charlm" and k["per_seed"] == curves
    assert tta_seeds.main(["--convergence", str(keep), "--compute-ms", "20", "--json",
                           str(out2), "--plot", str(tmp_path / "p.png")]) == 0
    assert json.loads(out2.read_text())["time_table"] == a["time_table"]


def test_torch_convergence_means_are_not_read_as_per_seed_curves():
    # torch_convergence's "curves" are the means over seeds, never read as one seed's curve
    conv = {"eval_steps": STEPS, "batch": 32, "workers": 4, "curves": {GLOO: FAST}}
    assert tta_seeds.curves_of(conv) is None
    assert tta_seeds.curves_of(_charlm({GLOO: [FAST]})) == {GLOO: [FAST]}


def test_a_workload_without_a_goal_is_a_clear_error(tmp_path, capsys):
    src = tmp_path / "c.json"
    src.write_text(json.dumps({**_charlm({GLOO: [FAST, FAST]}), "workload": "imagenet"}))
    with pytest.raises(SystemExit) as e:
        tta_seeds.main(["--convergence", str(src), "--compute-ms", "20", "--json",
                        str(tmp_path / "o.json")])
    assert e.value.code == 2 and "workload 'imagenet' has no goal" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
