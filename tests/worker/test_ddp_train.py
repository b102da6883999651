"""The DDP training loop's per-step log: what a step's time covers."""

import time

import pytest

pytest.importorskip("torch")

from worker.ddp import train as ddp_train  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.ddp.workload import load_mnist1d  # noqa: E402

EVAL_S = 0.3


def test_an_evaluation_is_timed_apart_from_the_training_step(monkeypatch):
    """mininet/bounds.py measures the steps' window from step_seconds and end: an evaluation
    inside it made a run's last step look a third slower than the others."""
    real = ddp_train.evaluate

    def slow_evaluate(*a, **k):
        time.sleep(EVAL_S)
        return real(*a, **k)

    monkeypatch.setattr(ddp_train, "evaluate", slow_evaluate)
    cfg = ddp_train.DDPConfig(steps=3, eval_every=2)
    data = load_mnist1d()
    out = run_ranks(2, lambda rank, group: ddp_train.train(group, cfg, data=data))
    assert not [o for o in out if isinstance(o, BaseException)], out
    steps = out[0]["steps"]
    evaluated = [s["step"] for s in steps if s["test_accuracy"] is not None]
    assert evaluated == [2, 3]
    for s in steps:
        assert s["step_seconds"] < EVAL_S, s
        assert (s["eval_seconds"] >= EVAL_S) == (s["step"] in evaluated), s
    # the next step starts after the evaluation: the gap between ends holds it
    assert steps[2]["end"] - steps[1]["end"] >= EVAL_S + steps[2]["step_seconds"] - 1e-3
    assert steps[-1]["wall_seconds"] >= 2 * EVAL_S      # wall time holds them: 2 and 3


def test_an_evaluation_records_accuracy_and_loss_of_the_model_at_that_step():
    """bench/separation.py judges a run by its last evaluations' validation loss."""
    cfg = ddp_train.DDPConfig(steps=4, eval_every=2)
    data = load_mnist1d()
    out = run_ranks(2, lambda rank, group: ddp_train.train(group, cfg, data=data))
    assert not [o for o in out if isinstance(o, BaseException)], out
    evals = [s for s in out[0]["steps"] if s["test_loss"] is not None]
    assert [s["step"] for s in evals] == [2, 4]
    assert all(s["test_accuracy"] is not None for s in evals)
    # the last evaluation is of the final model
    assert evals[-1]["test_loss"] == pytest.approx(out[0]["final_test_loss"], rel=1e-6)
    assert evals[-1]["test_accuracy"] == out[0]["final_test_accuracy"]
    assert evals[0]["test_loss"] != evals[1]["test_loss"]
