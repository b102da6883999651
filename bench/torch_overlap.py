#!/usr/bin/env python3
"""Steps per second of the PyTorch DDP job through the switch with and without overlap:
buckets reduced on the rank's communication thread while the backward pass goes on
(the default), against reduced on the autograd thread (`--no-overlap`), where a step's
computation and its communication take about equally long (root; run under the lock).

    flock /tmp/natswitch-emu.lock .venv/bin/python bench/torch_overlap.py \\
        [--bw 25] [--batch 1000] [--profile wide] [--steps 12] [--reps 3] [--switch soft]

Each repetition runs `mininet/run.py --framework torch` once each way, interleaved, the
same seed, flags and packets; a run's time per step is the median over its steps after
the first. Without overlap a step is computation then communication, so those runs also
give the two parts (the hook's time, `comm_seconds`, and the rest): the bench says how
close to equal they were. Overlap can save at most the shorter of the two.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from common import OUT, Target, machine, markdown, save, say, table
from torch_tta import measure

GAIN_TARGET = 1.0      # overlap must not be slower; what it gains is the figure


def parts(out: Path) -> tuple[float, float]:
    """(computation, communication) seconds of a step: medians over rank 0's later steps."""
    import json

    rank0 = json.loads(sorted((out / "workers").glob("*.json"))[0].read_text())
    later = [s for s in rank0["steps"] if s["step"] > 1]
    comm = statistics.median(s["comm_seconds"] for s in later)
    step = statistics.median(s["step_seconds"] for s in later)
    return step - comm, comm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--bw", type=float, default=25.0, help="link rate, Mbit/s (default 25)")
    ap.add_argument("--batch", type=int, default=1000,
                    help="examples per worker and step (default 1000, a worker's whole "
                         "shard: on 2 cores about as long as the step's 142 kB take at 25 "
                         "Mbit/s on the wide profile)")
    ap.add_argument("--profile", default="wide", help="compiled program (default wide)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--switch", default="soft", help="soft (default), bmv2 or auto")
    ap.add_argument("--json", type=Path, default=OUT / "torch_overlap.json")
    args = ap.parse_args(argv)
    if args.steps < 3 or args.reps < 1 or args.batch < 1 or args.bw <= 0:
        ap.error("--steps at least 3, --reps and --batch at least 1, --bw above 0")
    runs = {"overlap": [], "no overlap": []}
    split = []
    base = ["--encoding", "cnat8", "--batch", str(args.batch), "--profile", args.profile]
    for rep in range(args.reps):
        for name, flags in (("overlap", []), ("no overlap", ["--no-overlap"])):
            out = OUT / "torch_overlap" / f"{rep}-{name.replace(' ', '-')}"
            r = measure([*base, *flags], args.bw, args.steps, args.switch, out)
            runs[name].append(r["seconds_per_step"])
            if flags:
                split.append(parts(out))
            say(f"{name}: {r['seconds_per_step']:.3f} s/step; {r['bound']}")
    med = {k: statistics.median(v) for k, v in runs.items()}
    compute = statistics.median(c for c, _ in split)
    comm = statistics.median(m for _, m in split)
    gain = med["no overlap"] / med["overlap"]
    rows = [[k, f"{med[k]:.3f}", f"{1 / med[k]:.2f}", " ".join(f"{v:.3f}" for v in runs[k])]
            for k in runs]
    head = ["hook", "s/step (median)", "steps/s", "each repetition"]
    say(table(head, rows))
    say(f"without overlap a step was {compute:.3f} s of computation and {comm:.3f} s of "
        f"communication (ratio {comm / compute:.2f}); overlap gains {gain:.2f}x, at most "
        f"{(compute + comm) / max(compute, comm):.2f}x")
    targets = [Target("overlap steps/s against no overlap", gain, GAIN_TARGET, "min")]
    for t in targets:
        say("target " + t.text())
    save(args.json, {"machine": machine(), "bw": args.bw, "batch": args.batch,
                     "profile": args.profile,
                     "steps": args.steps, "reps": args.reps, "switch": args.switch,
                     "runs": runs, "median": med, "compute": compute, "comm": comm,
                     "gain": gain, "table": markdown(head, rows),
                     "targets": [t.as_dict() for t in targets]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
