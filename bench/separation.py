#!/usr/bin/env python3
"""A workload that separates methods: the character-level language model (worker/ddp/charlm.py)
trained with DDP by 4 ranks, each method on the same seeds, judged by the mean validation
loss of a run's last evaluations; the paired differences' 95 % confidence intervals against
the baseline (and between the pairs PAIRS names), and their half-width against the target.

    .venv/bin/python bench/separation.py [--seeds 10] [--first-seed 0] [--steps 150]

Ranks are threads with their own Gloo groups (bench/torch_convergence.py's runner): the
runs of a seed share data, initial model and batches, and differ only in how gradients are
reduced. Target (issue 39): a paired difference's half-width of at most 0.005 nats of loss
with at most 10 seeds, in minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from common import OUT, Target, machine, markdown, quick, save, say, table
from paired import EXPLAINED, HOLM_EXPLAINED, holm, paired, tost
from torch_convergence import WORKERS, run

TARGET_NATS = 0.005
BASELINE = "uncompressed (Gloo)"
# A run is judged by its mean validation loss over its last LATE evaluations, EVAL_EVERY
# steps apart: the last 50 of 150 steps. Chosen on seeds 0-9 (natural dithering's paired
# half-width 0.0053 nats from the final model alone, 0.0043 from these five), checked on
# seeds 10-19 (docs/results.md).
LATE = 5
EVAL_EVERY = 10
# name -> (how, what): torch_convergence.run's plan entries
METHODS = {BASELINE: ("gloo", None),
           "int32 INA (switch)": ("switch", "fixed32"),
           "C_nat INA (switch)": ("switch", "cnat8"),
           "C_nat INA wide (switch)": ("switch", "cnat8:wide"),
           "natural dithering INA (switch)": ("switch", "nat4"),
           "uniform (THC) INA (switch)": ("switch", "uq4"),
           "top-k 1% (hook)": ("hook", "topk:0.01"),
           # 4 bits each (sign + 3): levels 1, 1/2, ..., 1/64 against 1, 6/7, ..., 1/7
           "natural dithering s=7 (hook)": ("hook", "dnat:s=7"),
           "random dithering s=7 (hook)": ("hook", "qsgd:s=7")}
DEFAULT_METHODS = ["int32 INA (switch)", "C_nat INA (switch)", "top-k 1% (hook)"]
# methods compared with each other as well as with the baseline: (method, against)
PAIRS = (("natural dithering s=7 (hook)", "random dithering s=7 (hook)"),)


def measured(args, losses, seconds, curves, eval_steps) -> dict:
    """What a run's JSON holds for --from-json, partial or final."""
    return {"workload": "charlm", "workers": WORKERS, "batch": args.batch, "steps": args.steps,
            "lr": args.lr, "first_seed": args.first_seed, "late": args.late,
            "margin": args.margin, "losses": losses, "seconds": seconds, "per_seed": curves,
            "eval_steps": eval_steps}


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--seeds", type=int, default=2 if q else 10)
    ap.add_argument("--steps", type=int, default=10 if q else 150)
    ap.add_argument("--batch", type=int, default=16, help="windows per rank and step")
    ap.add_argument("--lr", type=float, default=0.3)
    ap.add_argument("--first-seed", type=int, default=0, metavar="S",
                    help="seeds S, S+1, ... (default 0)")
    ap.add_argument("--late", type=int, default=1 if q else LATE, metavar="K",
                    help="judge a run by its mean validation loss over its last K "
                         f"evaluations (default {LATE}; 1: the final model alone)")
    ap.add_argument("--eval-every", type=int, default=None, metavar="N",
                    help=f"steps between evaluations (default {EVAL_EVERY}, or fewer when "
                         "the run is too short for K of them)")
    ap.add_argument("--methods", nargs="*", default=DEFAULT_METHODS,
                    help="methods besides the baseline, of "
                         f"{', '.join(list(METHODS)[1:])} "
                         f"(default: {', '.join(DEFAULT_METHODS)}); "
                         "pairs of them are compared too: "
                         + "; ".join(f"{a} against {b}" for a, b in PAIRS))
    ap.add_argument("--margin", type=float, metavar="NATS",
                    help="also test each method's equivalence to the baseline within +-NATS "
                         "(two one-sided t tests at 5 %%, bench/paired.py tost); the margin "
                         "is to be fixed before the runs")
    ap.add_argument("--from-json", type=Path, metavar="JSON",
                    help="no runs: the tables again from a previous run's JSON (an "
                         "interrupted run's too, with the seeds it finished)")
    ap.add_argument("--json", type=Path, default=OUT / "separation.json")
    args = ap.parse_args(argv)
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown or args.seeds < 2 or args.steps < 1:
        ap.error(f"unknown methods {unknown}" if unknown else "need --seeds >= 2, --steps >= 1")
    if args.eval_every is None:
        args.eval_every = max(1, min(EVAL_EVERY, args.steps // max(args.late, 1)))
    # evaluations come every eval_every steps and after the last step
    evaluations = -(-args.steps // max(args.eval_every, 1))
    if args.late < 1 or args.eval_every < 1 or args.late > evaluations:
        ap.error(f"--late {args.late} with --eval-every {args.eval_every}: a run of "
                 f"{args.steps} steps has {evaluations} evaluations")
    if args.first_seed < 0:
        ap.error("--first-seed must be >= 0")
    args.workload, args.mode = "charlm", "layer"
    from worker.ddp import charlm
    from worker.ddp.workload import load_data

    old = None
    if args.from_json:
        try:
            old = json.loads(args.from_json.read_text())
            missing = {"losses", "seconds", "first_seed", "late"} - set(old)
            if missing:
                raise KeyError(", ".join(sorted(missing)))
            args.methods = [m for m in old["losses"] if m != BASELINE]
            args.seeds = old.get("seeds_done", old.get("seeds"))
            args.first_seed, args.late = old["first_seed"], old["late"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--from-json {args.from_json}: not a JSON this bench wrote "
                     f"({type(e).__name__}: {e})")
    data = None if old else load_data("charlm")
    names = [BASELINE, *args.methods]
    losses: dict[str, list[float]] = {n: [] for n in names}
    curves: dict[str, list[list[float]]] = {n: [] for n in names}
    eval_steps: list[int] = []
    seconds: dict[str, list[float]] = {n: [] for n in names}
    t0 = time.monotonic()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if old:
        losses, seconds = old["losses"], old["seconds"]
        # per_seed: each seed's curve (runs before 2026-12-07 called it curves)
        curves = old.get("per_seed", old.get("curves", curves))
        eval_steps = old.get("eval_steps", [])
    for seed in seeds if not old else ():
        for name in names:
            how, what = METHODS[name]
            t = time.monotonic()
            r = run(how, what, seed, args, data)
            evals = [s for s in r["steps"] if s["test_loss"] is not None]
            eval_steps = [s["step"] for s in evals]
            curves[name].append([s["test_loss"] for s in evals])
            # SGD at a constant rate ends noisy: the mean over the last evaluations is
            # steadier than the final model's loss alone
            losses[name].append(float(np.mean(curves[name][-1][-args.late:])))
            seconds[name].append(time.monotonic() - t)
            say(f"seed {seed}: {name:<20} validation loss {losses[name][-1]:.4f} nats "
                f"({seconds[name][-1]:.0f} s)")
        # what a long run has measured survives an interruption
        save(args.json, {"partial": True, "seeds_done": seed - args.first_seed + 1,
                         **measured(args, losses, seconds, curves, eval_steps)})
    base = losses[BASELINE]
    judged = ("validation loss (nats/char)" if args.late == 1 else
              f"validation loss, mean of last {args.late} evals (nats/char)")
    header = ["method", judged, "vs uncompressed [95 % CI]", "seeds",
              "verdict", f"Holm (family of {len(names) - 1})", "CI half-width", "s per run"]
    if args.margin:
        header.append(f"equivalence within +-{args.margin:g} (TOST)")
    equiv = {n: tost(losses[n], base, args.margin) for n in names[1:]} if args.margin else {}
    rows, versus = [], {}
    for name in names[1:]:
        versus[name] = paired(losses[name], base, higher_is_better=False)
    # the family: every method against the one baseline (the PAIRS below are apart)
    corrected = holm(dict(versus))
    for name in names:
        mean, secs = float(np.mean(losses[name])), float(np.mean(seconds[name]))
        if name == BASELINE:
            rows.append([name, mean, "-", len(base), "baseline", "-", "-", secs]
                        + (["-"] if args.margin else []))
            continue
        d = versus[name]
        rows.append([name, mean, d.interval(4), d.n, d.label, corrected[name],
                     f"{d.half_width:.4f}" if d.half_width is not None else "-", secs]
                    + ([equiv[name].text()] if args.margin else []))
    pair_rows = []
    for a, b in PAIRS:
        if a in names and b in names:
            d = versus[f"{a} - {b}"] = paired(losses[a], losses[b], higher_is_better=False)
            pair_rows.append([a, b, d.interval(4), d.n, d.label])
    wall = time.monotonic() - t0
    print(f"{args.seeds} seeds ({seeds.start}-{seeds.stop - 1}), {args.steps} steps, "
          f"4 workers x {args.batch} windows of "
          f"{charlm.CONTEXT} characters, lr {args.lr} momentum 0.9, judged by the mean "
          f"validation loss at steps {eval_steps[-args.late:]}; corpus sha256 "
          f"{charlm.corpus_sha256()[:16]}; {wall:.0f} s")
    print(table(header, rows))
    print(f"columns: {EXPLAINED}; {HOLM_EXPLAINED}")
    pair_header = ["method", "against", "method - against [95 % CI]", "seeds", "verdict"]
    if pair_rows:
        print(table(pair_header, pair_rows))
    widths = {k: d.half_width for k, d in versus.items() if d.half_width is not None}
    targets = [Target(f"{k}: 95 % CI half-width of the paired loss difference",
                      w, TARGET_NATS, "max", " nats").as_dict() for k, w in widths.items()]
    for t in targets:
        print(f"target {t['text']}")
    save(args.json, {"machine": machine(), "seeds": args.seeds,
                     **measured(args, losses, seconds, curves, eval_steps),
                     "corpus_sha256": charlm.corpus_sha256(),
                     "paired": {k: d.as_dict() for k, d in versus.items()},
                     "tost": {k: vars(t) for k, t in equiv.items()},
                     "rows": rows, "table": markdown(header, rows), "targets": targets,
                     "pairs": pair_rows,
                     "pairs_table": markdown(pair_header, pair_rows) if pair_rows else "",
                     "wall_seconds": wall})
    return 0


if __name__ == "__main__":
    sys.exit(main())
