#!/usr/bin/env python3
"""Time to accuracy per seed, with intervals: from bench/torch_convergence.py's per-seed
curves (the same seeds and batches for every method), the step at which each run first
reaches a target test accuracy fixed in advance, times seconds per step, each method against
Gloo's allreduce and against int32 INA paired by seed (bench/torch_tta.py calls it; alone:)

    .venv/bin/python bench/tta_seeds.py --convergence results/bench/torch_convergence.json \\
        [--measured docs/results/torch_tta_mininet.json] [--target 0.8] [--compute-ms M]

Rules, fixed before any run was looked at:
- *steps to target*: the first evaluated step whose test accuracy is at least the target
  (the first crossing: a run that falls back below it later keeps that step); a run that
  never reaches it within its steps is *not reached*.
- *seconds per step*: measured in Mininet only where the run's bound line says a link bound
  it (`link: ...`; a run bound by this machine's CPU or the software switch describes no
  network); projected by the step-time model (mininet/steptime.py `project`) for the
  workers of the job on a line-rate v1model switch and on the compiled Tofino 1 and 2
  designs, with one worker's compute per step measured here (one thread, the job's batch).
  A method the model has no packets for on a switch has no projected time there.
- *speed-up* of a method against a baseline: per seed, the baseline's time to target over
  the method's; the row gives their geometric mean over seeds and its 95 % interval,
  Student's t on the per-seed log ratios (n - 1 degrees of freedom, bench/paired.py) taken
  back by exp. A seed that either side did not reach has no ratio: a row with one gives
  the counts and no interval.
- *Holm*: each block of rows (one switch and link rate) is a family, every method with a
  time against the one baseline, corrected by Holm (bench/paired.py).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from common import OUT, markdown, save, say, step_model
from paired import HOLM_EXPLAINED, Paired, holm, paired

TARGET = 0.8


@dataclass(frozen=True)
class Goal:
    """What a workload's runs are timed to: a metric of its evaluations (the key of a step's
    record, worker/ddp/train.py) and a level of it, fixed before the runs."""

    metric: str
    higher_is_better: bool
    target: float
    axis: str                           # the plot's y label
    limits: tuple[float, float]         # the plot's y range

    def reached(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    def text(self, target: float) -> str:
        return f"{target:.0%}" if self.metric == "test_accuracy" else f"{target:g} nats"


# workload (worker/ddp/workload.py) -> its goal. charlm's 2.35 nats per character was fixed
# from two Gloo curves of seeds 0 and 1 (reached at steps 65 and 85 of 150, leaving room
# for a method needing twice the steps), before the seeds timed (40 and up) ran.
GOALS = {"mnist1d": Goal("test_accuracy", True, TARGET, "test accuracy", (0.5, 0.95)),
         "charlm": Goal("test_loss", False, 2.35, "validation loss (nats/char)", (2.2, 2.8))}


def goal_of(conv: dict) -> Goal:
    w = conv.get("workload", "mnist1d")
    if w not in GOALS:
        raise ValueError(f"workload {w!r} has no goal: one of {sorted(GOALS)}")
    return GOALS[w]
GBITS = (10.0, 25.0, 100.0)
SWITCHES = (("line-rate", "v1model at line rate"), ("tofino1", "Tofino 1"),
            ("tofino2", "Tofino 2"))
# convergence name -> (label, step-time model's method, Mininet label or None)
METHODS = {"uncompressed (Gloo)": ("Gloo", "ring", "Gloo ring (TCP via the switch)"),
           "int32 INA (switch)": ("int32 INA", "int32", "int32 INA"),
           "C_nat INA (switch)": ("C_nat INA", "cnat", "C_nat INA"),
           "C_nat INA wide (switch)": ("C_nat INA wide", "cnat-wide", "C_nat INA wide"),
           "natural dithering INA (switch)": ("NAT4 INA", "nat4", None),
           "uniform (THC) INA (switch)": ("UQ4 INA", "uq4", None)}
GLOO, INT32 = "uncompressed (Gloo)", "int32 INA (switch)"
BASELINES = (GLOO, INT32)
SOONER, LATER = "sooner", "later"
AS_TIME = {"better": SOONER, "worse": LATER}     # paired.py's verdicts, said of a time
# the plot's panels: the measured link-bound rate, then each switch at 10 Gbit/s
PANELS = ["Mininet, 10 Mbit/s, measured", *(f"{n}, 10 Gbit/s, projected" for _, n in SWITCHES)]


def steps_to_target(steps: list[int], accs: list[float], target: float,
                    higher_is_better: bool = True) -> int | None:
    """The first evaluated step at which the accuracy is at least `target` (a loss at most
    `target`, higher_is_better False), else None."""
    if len(steps) != len(accs):
        raise ValueError(f"{len(steps)} steps against {len(accs)} evaluations")
    for s, a in zip(steps, accs, strict=True):
        if (a >= target) if higher_is_better else (a <= target):
            return s
    return None


@dataclass(frozen=True)
class Speedup:
    """baseline time / method time over paired seeds: the geometric mean, its 95 % CI."""

    n: int
    not_reached: tuple[int, int]        # seeds the method, the baseline did not reach
    estimate: float | None
    low: float | None
    high: float | None
    test: Paired | None                 # on the log ratios; None where a seed has no ratio

    @property
    def verdict(self) -> str:
        if self.test is None:
            return "-"
        return AS_TIME.get(self.test.verdict, self.test.label)

    def interval(self) -> str:
        if self.test is None:
            m, b = self.not_reached
            return f"not reached: method {m}/{self.n}, baseline {b}/{self.n}"
        if self.low is None:
            return f"{self.estimate:.3f}x [no CI], n={self.n}"
        return f"{self.estimate:.3f}x [{self.low:.3f}, {self.high:.3f}], n={self.n}"


def speedup(method: list[float | None], baseline: list[float | None]) -> Speedup:
    """Per seed baseline / method (times or steps to target; None: not reached)."""
    if len(method) != len(baseline) or not method:
        raise ValueError(f"one value per seed on both sides: {len(method)} against "
                         f"{len(baseline)}")
    missing = (sum(x is None for x in method), sum(x is None for x in baseline))
    if any(missing):
        return Speedup(len(method), missing, None, None, None, None)
    if any(not x > 0 for x in (*method, *baseline)):
        raise ValueError("times to target must be > 0")
    # log(baseline / method), higher is better for the method
    d = paired([-math.log(x) for x in method], [-math.log(x) for x in baseline])
    return Speedup(d.n, missing, math.exp(d.diff),
                   None if d.low is None else math.exp(d.low),
                   None if d.high is None else math.exp(d.high), d)


def per_seed_steps(conv: dict, target: float) -> dict[str, list[int | None]]:
    """Per method, each seed's steps to `target` (None: not reached): from the curves, or
    as a run kept them (`steps_to_target`, for the target it was kept for)."""
    curves = curves_of(conv)
    if curves is not None:
        up = goal_of(conv).higher_is_better
        return {name: [steps_to_target(conv["eval_steps"], c, target, up) for c in runs]
                for name, runs in curves.items()}
    if conv.get("target") != target:
        raise ValueError(f"the steps were kept for target {conv.get('target')}, not {target}: "
                         "another target needs the run's curves")
    return conv["steps_to_target"]


def curves_of(conv: dict) -> dict | None:
    """Per method, each seed's curve of the goal's metric (per_seed, as
    bench/torch_convergence.py and bench/separation.py write it); None where kept without."""
    return conv.get("per_seed")


def compute_seconds(batch: int, reps: int = 40, workload: str = "mnist1d") -> float:
    """One worker's compute per step (forward, backward, SGD with momentum), one thread,
    the median of `reps` steps after 5 unmeasured."""
    import torch

    from worker.ddp.workload import load_data, make_model

    torch.set_num_threads(1)
    data = load_data(workload)
    model = make_model(0, workload)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    times = []
    for i in range(reps + 5):
        idx = torch.randint(0, len(data.x_train), (batch,), generator=gen)
        t = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx]).backward()
        opt.step()
        if i >= 5:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


@lru_cache(maxsize=4)
def model_parameters(workload: str = "mnist1d") -> int:
    """The parameters of the workload's model (the MNIST-1D CNN bench/torch_convergence.py
    trains, charlm's transformer): what each worker all-reduces per step."""
    from worker.ddp.workload import make_model, num_params

    return num_params(make_model(0, workload))


def projected_seconds(method: str, switch: str, gbit: float, compute_s: float,
                      workers: int, workload: str = "mnist1d") -> tuple[float | None, str]:
    """(seconds per step, what carried it) from the step-time model, or (None, why)."""
    model = step_model()
    why = model.no_packets(switch, method)
    if why:
        return None, why
    p = model.project(model_parameters(workload), compute_s, gbit, workers, method, switch=switch)
    what = "ring" if p.elements_per_packet is None else \
        f"{p.variant or 'v1model'}, {p.elements_per_packet}/packet"
    return p.step_s, f"{what}, {p.bound}"


def measured_seconds(runs: list[dict]) -> dict[tuple[float, str], tuple[float, str]]:
    """(Mbit/s, Mininet label) -> (seconds per step, bound line), link-bound runs only."""
    return {(r["bw"], r["method"]): (r["seconds_per_step"], r.get("bound") or "")
            for r in runs if (r.get("bound") or "").startswith("link")}


def block(title: str, per_step: dict[str, float | None], what: dict[str, str],
          steps: dict[str, list[int | None]]) -> list[dict]:
    """One family: every method with a time per step against each baseline."""
    times = {k: None if s is None else [None if n is None else n * s for n in steps[k]]
             for k, s in per_step.items()}
    rows = []
    vs = {b: {k: speedup(t, times[b]) for k, t in times.items()
              if t is not None and k != b and times.get(b) is not None} for b in BASELINES}
    corrected = {b: holm({k: v.test for k, v in fam.items() if v.test is not None})
                 for b, fam in vs.items()}
    for k, s in per_step.items():
        t = times[k]
        reached = [x for x in (t or []) if x is not None]
        row = {"block": title, "method": k, "label": METHODS[k][0], "seconds_per_step": s,
               "carried_by": what[k],
               "time_to_target_geomean": math.exp(statistics.fmean(map(math.log, reached)))
               if t and len(reached) == len(t) else None}
        for b in BASELINES:
            v = vs[b].get(k)
            h = corrected[b].get(k, "-")
            row[b] = None if v is None else {
                "interval": v.interval(), "verdict": v.verdict,
                "holm": AS_TIME.get(h, h), "estimate": v.estimate,
                "low": v.low, "high": v.high, "n": v.n, "not_reached": v.not_reached}
        rows.append(row)
    return rows


KEPT = ("workload", "eval_steps", "batch", "workers", "steps", "lr", "mode", "first_seed")


def kept(conv: dict, target: float) -> dict:
    """What analyse() reads of a convergence run, the methods of METHODS only: the settings,
    each seed's steps to `target` and, where the input has them, the curves. Small enough to
    commit beside the tables it makes, and a --convergence input again."""
    steps = {k: v for k, v in per_seed_steps(conv, target).items() if k in METHODS}
    out = {**{k: conv[k] for k in KEPT if k in conv}, "seeds": len(steps[GLOO]),
           "target": target, "steps_to_target": steps}
    curves = curves_of(conv)
    if curves is not None:
        out["per_seed"] = {k: v for k, v in curves.items() if k in METHODS}
    return out


def dumps_kept(k: dict) -> str:
    """kept() as JSON with a method's steps, and a seed's curve, to a line, so that a diff
    shows which changed."""
    lines = [f" {json.dumps(x)}: {json.dumps(y)}" for x, y in k.items()
             if x not in ("steps_to_target", "per_seed")]
    lines.append(' "steps_to_target": {\n' + ",\n".join(
        f"  {json.dumps(m)}: {json.dumps(v)}" for m, v in k["steps_to_target"].items()) + "}")
    if "per_seed" in k:
        lines.append(' "per_seed": {\n' + ",\n".join(
            f"  {json.dumps(m)}: [\n" + ",\n".join(f"   {json.dumps(c)}" for c in v) + "]"
            for m, v in k["per_seed"].items()) + "}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def analyse(conv: dict, target: float, compute_s: float, mininet: list[dict] | None) -> dict:
    steps = per_seed_steps(conv, target)
    workload = conv.get("workload", "mnist1d")
    goal = goal_of(conv)
    names = [k for k in METHODS if k in steps]
    if GLOO not in names:
        raise ValueError("the convergence run has no uncompressed (Gloo) runs")
    seeds = len(steps[GLOO])
    if any(len(steps[k]) != seeds for k in names):
        raise ValueError("every method needs one run per seed: "
                         + ", ".join(f"{k} {len(steps[k])}" for k in names))
    # steps alone: the ratio every switch and rate shares where steps take equal time
    step_rows = block("steps", {k: 1.0 for k in names}, {k: "-" for k in names}, steps)
    blocks, left_out = [], {}
    if mininet:
        meas = measured_seconds(mininet)
        for bw in sorted({bw for bw, _ in meas}):
            per = {k: meas[bw, METHODS[k][2]][0] for k in names
                   if (bw, METHODS[k][2]) in meas}
            if len(per) >= 2 and GLOO in per:
                blocks.append(block(f"Mininet, {bw:g} Mbit/s, measured", per,
                                    {k: meas[bw, METHODS[k][2]][1] for k in per}, steps))
    for sw, sw_name in SWITCHES:
        for g in GBITS:
            got = {k: projected_seconds(METHODS[k][1], sw, g, compute_s, conv["workers"],
                                        workload) for k in names}
            per = {k: s for k, (s, _) in got.items() if s is not None}
            title = f"{sw_name}, {g:g} Gbit/s, projected"
            blocks.append(block(title, per, {k: got[k][1] for k in per}, steps))
            left_out[title] = {k: why for k, (s, why) in got.items() if s is None}
    curves = curves_of(conv)
    return {"target": target, "target_text": goal.text(target), "workload": workload,
            "seeds": seeds, "workers": conv["workers"],
            "steps_to_target": steps,
            "eval_steps": conv["eval_steps"], "compute_seconds": compute_s,
            "per_seed": {k: curves[k] for k in names} if curves is not None else None,
            "step_rows": step_rows, "blocks": blocks, "left_out": left_out}


def _cells(row: dict, b: str) -> list:
    v = row.get(b)
    if row["method"] == b:
        return ["baseline", "-", "-"]
    if v is None:
        return ["-", "-", "-"]
    return [v["interval"], v["verdict"], v["holm"]]


def _family(rows: list[dict], b: str) -> int:
    """The comparisons with an interval: what Holm's correction counts."""
    return sum(1 for r in rows if r.get(b) and r[b]["low"] is not None)


def _target(a: dict) -> str:
    return a.get("target_text") or GOALS["mnist1d"].text(a["target"])


def steps_table(a: dict) -> str:
    rows = a["step_rows"]
    head = ["method", f"steps to {_target(a)}, per seed", "median",
            "Gloo / method [95 % CI]", "verdict", f"Holm (family of {_family(rows, GLOO)})",
            "int32 INA / method [95 % CI]", "verdict", f"Holm (family of {_family(rows, INT32)})"]
    body = []
    for r in rows:
        s = a["steps_to_target"][r["method"]]
        reached = [x for x in s if x is not None]
        body.append([r["label"], " ".join("-" if x is None else str(x) for x in s),
                     statistics.median(reached) if len(reached) == len(s) else
                     f"{len(s) - len(reached)} not reached", *_cells(r, GLOO),
                     *_cells(r, INT32)])
    return markdown(head, body)


def time_table(a: dict) -> str:
    head = ["switch, link", "method", "s/step", "packet, bound", f"time to {_target(a)} "
            "(s, geometric mean)", "speed-up vs Gloo [95 % CI]", "verdict",
            "Holm (per switch, link)", "vs int32 INA [95 % CI]", "verdict",
            "Holm (per switch, link)"]
    body = []
    for rows in a["blocks"]:
        for r in rows:
            body.append([r["block"], r["label"], f"{r['seconds_per_step'] * 1e3:.3f} ms",
                         r["carried_by"], r["time_to_target_geomean"], *_cells(r, GLOO),
                         *_cells(r, INT32)])
        # a method the switch cannot carry: a row that says why, not a silent gap
        title = rows[0]["block"] if rows else None
        for k, why in a.get("left_out", {}).get(title, {}).items():
            body.append([title, METHODS[k][0], "-", f"no packets: {why}", "-",
                         *["-"] * 6])
    return markdown(head, body)


def plot(a: dict, path: Path, panels: list[str] | None = None) -> bool:
    """The goal's metric (test accuracy, validation loss) against wall-clock time (steps x
    s/step) per method, the mean over seeds and the band from the lowest to the highest
    seed, one panel per block named."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        return False
    if not a.get("per_seed"):           # steps kept without their curves
        return False
    goal = GOALS[a.get("workload", "mnist1d")]
    blocks = {rows[0]["block"]: rows for rows in a["blocks"] if rows}
    panels = [p for p in (panels or list(blocks)[:4]) if p in blocks]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.6), squeeze=False)
    steps = np.array(a["eval_steps"], dtype=float)
    for ax, name in zip(axes[0], panels, strict=True):
        for r in blocks[name]:
            accs = np.array(a["per_seed"][r["method"]])
            t = steps * r["seconds_per_step"]
            # one colour a method in every panel: a panel without a method keeps the others'
            line, = ax.plot(t, accs.mean(axis=0), lw=1.5, label=r["label"],
                            color=f"C{list(METHODS).index(r['method'])}")
            ax.fill_between(t, accs.min(axis=0), accs.max(axis=0), color=line.get_color(),
                            alpha=0.15, lw=0)
        ax.axhline(a["target"], color="k", lw=0.8, ls="--")
        ax.set_ylim(*goal.limits)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("wall-clock time (s)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{goal.axis}\n(mean, min-max of {a['seeds']} seeds)")
    for ax in axes[0]:                  # each panel names the methods it has
        ax.legend(fontsize=6, loc="lower right" if goal.higher_is_better else "upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


EXPLAINED = ("*steps to target*: the first evaluated step at or above the target accuracy "
             "(at or below a target loss; first crossing); *speed-up*: per seed the "
             "baseline's time to target over the method's, their geometric mean over seeds "
             "and its 95 % interval (Student's t on "
             "the per-seed log ratios, seeds - 1 degrees of freedom, taken back by exp); "
             "*sooner*/*later* where the interval excludes 1, else *cannot tell*; a seed "
             "either side did not reach has no ratio and its row gives the counts; "
             + HOLM_EXPLAINED.replace("the family named",
                                      "each block (one switch and link rate, or the steps)"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--convergence", type=Path, default=OUT / "torch_convergence.json")
    ap.add_argument("--measured", type=Path, help="a torch_tta.json (its Mininet runs)")
    ap.add_argument("--target", type=float, help="the level of the workload's metric timed to "
                    "(default: " + "; ".join(f"{w} {g.metric} {g.text(g.target)}"
                                             for w, g in GOALS.items())
                    + ", fixed before their runs)")
    ap.add_argument("--compute-ms", type=float,
                    help="a worker's compute per step, ms (default: measured here)")
    ap.add_argument("--plot", type=Path, default=OUT / "tta_seeds.png")
    ap.add_argument("--json", type=Path, default=OUT / "tta_seeds.json")
    ap.add_argument("--keep", type=Path, metavar="PATH",
                    help="also write what this analysis reads, the steps to the target per "
                    "seed (and the curves, where the input has them), as a JSON that "
                    "--convergence takes again, e.g. docs/results/torch_tta_steps.json")
    args = ap.parse_args(argv)
    try:
        conv = json.loads(args.convergence.read_text())
        curves = "steps_to_target" if curves_of(conv) is None else "eval_steps"
        missing = {curves, "eval_steps", "batch", "workers"} - set(conv)
        if missing:
            raise KeyError(", ".join(sorted(missing)))
        goal = goal_of(conv)
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--convergence {args.convergence}: not a bench/torch_convergence.py JSON "
                 f"({type(e).__name__}: {e})")
    try:
        mininet = json.loads(args.measured.read_text())["runs"] if args.measured else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--measured {args.measured}: not a bench/torch_tta.py JSON "
                 f"({type(e).__name__}: {e})")
    if args.target is None:
        args.target = goal.target
    if args.keep:
        args.keep.parent.mkdir(parents=True, exist_ok=True)
        args.keep.write_text(dumps_kept(kept(conv, args.target)))
    compute_s = args.compute_ms / 1e3 if args.compute_ms else compute_seconds(
        conv["batch"], workload=conv.get("workload", "mnist1d"))
    say(f"compute per step {compute_s * 1e3:.2f} ms")
    a = analyse(conv, args.target, compute_s, mininet)
    print(steps_table(a))
    print(time_table(a))
    drew = plot(a, args.plot, PANELS)
    save(args.json, {**a, "steps_table": steps_table(a), "time_table": time_table(a),
                     "plot": str(args.plot) if drew else None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
