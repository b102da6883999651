#!/usr/bin/env python3
"""Time to accuracy of the PyTorch DDP job in Mininet: Gloo's ring allreduce, int32 INA and
C_nat INA, 4 workers on a star, the same seeds (root; run under the shared lock).

    flock /tmp/natswitch-root.lock .venv/bin/python bench/torch_tta.py \\
        [--bw 100 1] [--steps 6] [--target 0.8] [--convergence results/bench/torch_convergence.json]

Each method runs `mininet/run.py --framework torch` for a few steps per link rate and
gives its seconds per step (median over the steps after the first, which builds DDP's
buckets) and the bytes on the busiest link per step (the most any worker's interface sent
or received in a step; on a star every link is a host's). Which step first reaches the
target accuracy comes from bench/torch_convergence.py's run of the same methods and seeds:
at the same seeds every rank's arithmetic is the same whatever the timing, so the time to
accuracy is that step count times the seconds per step. Issue target: C_nat INA 2.5x
sooner than Gloo where the links are the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, REPO, Target, machine, markdown, save, say, table

METHODS = [("Gloo ring (TCP via the switch)", "uncompressed (Gloo)", ["--aggregation", "gloo"]),
           ("int32 INA", "int32 INA (switch)", ["--encoding", "fixed32"]),
           ("C_nat INA", "C_nat INA (switch)", ["--encoding", "cnat8"])]


def steps_to(curve_steps: list[int], curve: list[float], target: float) -> int | None:
    for s, a in zip(curve_steps, curve, strict=True):
        if a >= target:
            return s
    return None


def measure(flags: list[str], bw: float, steps: int, switch: str, out: Path) -> dict:
    cmd = [sys.executable, str(REPO / "mininet" / "run.py"), "--framework", "torch",
           "--switch", switch, "--bw", str(bw), "--steps", str(steps), "--eval-every",
           str(steps), "--out", str(out), *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    workers = [json.loads(p.read_text()) for p in sorted((out / "workers").glob("*.json"))]
    later = [s for s in workers[0]["steps"] if s["step"] > 1]
    per_step = statistics.median(s["step_seconds"] for s in later)
    busiest = statistics.median(
        max(max(w["steps"][i]["comm"].get("wire_tx", 0), w["steps"][i]["comm"].get("wire_rx", 0))
            for w in workers)
        for i in range(1, len(workers[0]["steps"])))
    kind = json.loads((out / "report.json").read_text())["switch"]
    return {"switch": kind, "seconds_per_step": per_step, "busiest_link_bytes_per_step": busiest,
            "identical": len({w["params_sha256"] for w in workers}) == 1}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--bw", type=float, nargs="+", default=[100.0, 1.0],
                    help="link rates, Mbit/s (default 100 1)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--target", type=float, default=0.8, help="test accuracy (default 0.8)")
    ap.add_argument("--switch", default="auto")
    ap.add_argument("--convergence", type=Path, default=OUT / "torch_convergence.json")
    ap.add_argument("--json", type=Path, default=OUT / "torch_tta.json")
    ap.add_argument("--measured", type=Path,
                    help="a torch_tta.json to take the Mininet figures from (no Mininet run): "
                    "the time to accuracy again, for another convergence run")
    args = ap.parse_args(argv)
    conv = json.loads(args.convergence.read_text())
    measured = None
    if args.measured:
        old = json.loads(args.measured.read_text())
        measured = {(r["bw"], r["method"]): r for r in old["runs"]}
        args.bw = sorted({bw for bw, _ in measured}, reverse=True)
        args.steps = old["steps"]
    header = ["link Mbit/s", "method", "s/step", "busiest link kB/step", "link bound s/step",
              f"steps to {args.target:.0%}", f"time to {args.target:.0%} (s)", "vs Gloo"]
    rows, runs = [], []
    t0 = time.monotonic()
    for bw in args.bw:
        base = None
        for label, conv_name, flags in METHODS:
            if measured is not None:
                keep = ("switch", "seconds_per_step", "busiest_link_bytes_per_step", "identical")
                m = {k: measured[bw, label][k] for k in keep}
            else:
                m = measure(flags, bw, args.steps, args.switch,
                            OUT / "torch_tta" / f"{bw:g}-{conv_name.split()[0]}")
            n = steps_to(conv["eval_steps"], conv["curves"][conv_name], args.target)
            tta = None if n is None else n * m["seconds_per_step"]
            if base is None:
                base = tta
            speedup = None if tta is None or base is None else base / tta
            runs.append({"bw": bw, "method": label, **m, "steps_to_target": n,
                         "time_to_target": tta, "vs_gloo": speedup})
            bound = m["busiest_link_bytes_per_step"] * 8 / (bw * 1e6)
            rows.append([bw, label, m["seconds_per_step"], m["busiest_link_bytes_per_step"] / 1e3,
                         bound, n, tta, speedup])
            say(f"{bw:g} Mbit/s {label}: {m['seconds_per_step']:.2f} s/step, busiest link "
                f"{m['busiest_link_bytes_per_step'] / 1e3:.0f} kB/step, steps to target {n}")
    print(f"4 workers, star, MNIST-1D CNN (134,922 parameters); {time.monotonic() - t0:.0f} s")
    print(table(header, rows))
    slowest = min(args.bw)
    cnat = next(r for r in runs if r["bw"] == slowest and r["method"] == "C_nat INA")
    t = Target(f"C_nat INA vs Gloo, time to {args.target:.0%} at {slowest:g} Mbit/s",
               cnat["vs_gloo"], 2.5, "min")
    print("target " + t.text())
    save(args.json, {"machine": machine(), "switch": runs[0]["switch"], "steps": args.steps,
                     "target": args.target,
                     "runs": runs, "table": markdown(header, rows), "targets": [t.as_dict()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
