"""bench/separation.py: a tiny run through its own main(): every method against the baseline,
and the pairs it names against each other, from the same seeds' losses."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from separation import BASELINE, PAIRS, main  # noqa: E402  (bench/ is on the path from here)


def test_a_pair_is_compared_seed_by_seed(tmp_path):
    a, b = PAIRS[0]
    out = tmp_path / "sep.json"
    assert main(["--seeds", "2", "--steps", "1", "--late", "1", "--batch", "2", "--methods", a, b,
                 "--margin", "0.01", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got["losses"]) == {BASELINE, a, b}
    # each method's equivalence test is that of its own per-seed losses
    from paired import tost
    for m in (a, b):
        want = tost(got["losses"][m], got["losses"][BASELINE], 0.01)
        assert got["tost"][m]["verdict"] == want.verdict and got["margin"] == 0.01
        assert got["tost"][m]["diff"] == pytest.approx(want.diff)
    pair = got["paired"][f"{a} - {b}"]
    want = np.mean(np.subtract(got["losses"][a], got["losses"][b]))
    assert pair["n"] == 2 and pair["diff"] == pytest.approx(want)
    assert got["pairs"][0][:2] == [a, b] and a in got["pairs_table"]


def test_unknown_methods_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--methods", "nosuch"])
    assert e.value.code == 2 and "unknown methods ['nosuch']" in capsys.readouterr().err


def test_a_run_is_judged_by_the_mean_of_its_last_evaluations(tmp_path):
    out = tmp_path / "sep.json"
    assert main(["--seeds", "2", "--steps", "4", "--batch", "2", "--eval-every", "1",
                 "--late", "2", "--methods", "top-k 1% (hook)", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["eval_steps"] == [1, 2, 3, 4]
    for name, runs in got["per_seed"].items():
        assert len(runs) == 2 and all(len(c) == 4 for c in runs)
        assert got["losses"][name] == pytest.approx([np.mean(c[-2:]) for c in runs])
        # the last two evaluations of a training run are two different models
        assert all(c[-1] != c[-2] for c in runs)


@pytest.mark.parametrize("argv", [["--late", "0"], ["--steps", "4", "--eval-every", "2",
                                                     "--late", "3"]])
def test_more_evaluations_than_a_run_has_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "evaluations" in capsys.readouterr().err


def test_first_seed_runs_the_same_seeds_as_a_longer_series(tmp_path):
    """A check on fresh seeds (--first-seed) reruns exactly what a series from 0 ran there."""
    argv = ["--steps", "2", "--late", "1", "--batch", "2", "--methods", "top-k 1% (hook)"]
    main([*argv, "--seeds", "3", "--json", str(tmp_path / "a.json")])
    main([*argv, "--seeds", "2", "--first-seed", "1", "--json", str(tmp_path / "b.json")])
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert b["first_seed"] == 1
    for name in a["losses"]:
        assert b["losses"][name] == a["losses"][name][1:]
        assert a["losses"][name][0] not in b["losses"][name]


def test_an_interrupted_runs_json_is_rendered_again_without_running(tmp_path):
    # a partial JSON as the run saves it after each seed: the tables and the equivalence
    # test come back from its losses alone
    from paired import EQUIVALENT, UNDECIDED
    base = [2.30, 2.28, 2.29, 2.31, 2.30, 2.27]
    near = [b + d for b, d in zip(base, [0.001, -0.002, 0.002, 0.0, 0.001, -0.001], strict=True)]
    far = [b + d for b, d in zip(base, [0.02, -0.03, 0.025, -0.01, 0.03, -0.02], strict=True)]
    a, b = "C_nat INA (switch)", "natural dithering s=7 (hook)"
    old = tmp_path / "partial.json"
    old.write_text(json.dumps({"partial": True, "seeds_done": 6, "first_seed": 20, "late": 5,
                               "losses": {BASELINE: base, a: near, b: far},
                               "seconds": {k: [1.0] * 6 for k in (BASELINE, a, b)}}))
    out = tmp_path / "again.json"
    assert main(["--from-json", str(old), "--margin", "0.01", "--json", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["seeds"] == 6 and got["first_seed"] == 20 and got["late"] == 5
    assert got["tost"][a]["verdict"] == EQUIVALENT and got["tost"][b]["verdict"] == UNDECIDED
    assert got["paired"][a]["n"] == 6 and "TOST" in got["table"]


@pytest.mark.parametrize("content", [None, "not json", json.dumps({"losses": {}})])
def test_a_from_json_that_is_not_a_run_of_this_bench_is_a_clear_error(tmp_path, capsys,
                                                                      content):
    path = tmp_path / "old.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as e:
        main(["--from-json", str(path), "--json", str(tmp_path / "out.json")])
    assert e.value.code == 2
    assert f"--from-json {path}: not a JSON this bench wrote" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
