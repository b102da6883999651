#!/usr/bin/env python3
"""Steps per second and time to accuracy of the PyTorch DDP job in Mininet: Gloo's ring
allreduce, int32 INA and C_nat INA (the default profile, and the wide one with its 1456
elements per packet), 4 workers on a star, the same seeds (root; run under the shared lock).

    flock /tmp/natswitch-root.lock .venv/bin/python bench/torch_tta.py --switch soft \\
        [--bw 1000 100 10] [--steps 20] [--target 0.8] \\
        [--convergence results/bench/torch_convergence.json]

Each method runs `mininet/run.py --framework torch` for a few steps per link rate and
gives its seconds per step (median over the steps after the first, which builds DDP's
buckets) and the bytes on the busiest link per step (the most any worker's interface sent
or received in a step; on a star every link is a host's). Which step first reaches the
target accuracy comes per seed from bench/torch_convergence.py's run of the same methods
and seeds: at the same seeds every rank's arithmetic is the same whatever the timing, so a
seed's time to accuracy is its step count times the seconds per step, measured where a link
bound the run and projected for a cluster by the step-time model (bench/tta_seeds.py: the
rules, the paired intervals over seeds, the plot). Issue targets (softswitch): C_nat INA's
steps/s at least 1.0x Gloo's at 1000 Mbit/s, 1.5x at 100 Mbit/s and 4.5x at 10 Mbit/s, and
its time to 80% at least 4x sooner than Gloo's at 10 Mbit/s (the best of its profiles, the
geometric mean over seeds). Each run also says what bound it (mininet/bounds.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import tta_seeds
from common import OUT, REPO, Target, machine, markdown, save, say, table

METHODS = [("Gloo ring (TCP via the switch)", "uncompressed (Gloo)", ["--aggregation", "gloo"]),
           ("int32 INA", "int32 INA (switch)", ["--encoding", "fixed32"]),
           ("C_nat INA", "C_nat INA (switch)", ["--encoding", "cnat8"]),
           ("C_nat INA wide", "C_nat INA wide (switch)", ["--encoding", "cnat8", "--profile",
                                                          "wide"])]
# C_nat INA's steps/s against Gloo's, per link rate (Mbit/s); and its time to accuracy at
# the slowest, against Gloo's
STEP_TARGETS = {1000.0: 1.0, 100.0: 1.5, 10.0: 4.5}
TTA_TARGET = 4.0


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
    report = json.loads((out / "report.json").read_text())
    bound = report["jobs"][0].get("bound") or {}
    return {"switch": report["switch"], "seconds_per_step": per_step,
            "busiest_link_bytes_per_step": busiest,
            "identical": len({w["params_sha256"] for w in workers}) == 1,
            "bound": bound.get("text")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--bw", type=float, nargs="+", default=sorted(STEP_TARGETS, reverse=True),
                    help="link rates, Mbit/s (default 1000 100 10)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.8, help="test accuracy (default 0.8)")
    ap.add_argument("--switch", default="soft",
                    help="soft (default: the issue's targets are softswitch's), bmv2 or auto")
    ap.add_argument("--convergence", type=Path, default=OUT / "torch_convergence.json")
    ap.add_argument("--json", type=Path, default=OUT / "torch_tta.json")
    ap.add_argument("--compute-ms", type=float,
                    help="a worker's compute per step for the projections, ms (default: "
                         "measured here, one thread)")
    ap.add_argument("--plot", type=Path, default=OUT / "torch_tta.png")
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
    header = ["link Mbit/s", "method", "steps/s", "vs Gloo", "busiest link kB/step",
              "link bound s/step", "bound"]
    rows, runs = [], []
    t0 = time.monotonic()
    for bw in args.bw:
        base_rate = None
        for label, _, flags in METHODS:
            if measured is not None:
                keep = ("switch", "seconds_per_step", "busiest_link_bytes_per_step", "identical",
                        "bound")
                m = {k: measured[bw, label].get(k) for k in keep}
            else:
                m = measure(flags, bw, args.steps, args.switch,
                            OUT / "torch_tta" / f"{bw:g}-{label.replace(' ', '_')}")
            rate = 1 / m["seconds_per_step"]
            if base_rate is None:
                base_rate = rate
            runs.append({"bw": bw, "method": label, **m, "steps_per_second": rate,
                         "steps_vs_gloo": rate / base_rate})
            bound = m["busiest_link_bytes_per_step"] * 8 / (bw * 1e6)
            rows.append([bw, label, rate, rate / base_rate,
                         m["busiest_link_bytes_per_step"] / 1e3, bound, m.get("bound")])
            say(f"{bw:g} Mbit/s {label}: {rate:.2f} steps/s, busiest link "
                f"{m['busiest_link_bytes_per_step'] / 1e3:.0f} kB/step; {m.get('bound')}")
    print(f"4 workers, star, MNIST-1D CNN (134,922 parameters); {time.monotonic() - t0:.0f} s")
    print(table(header, rows))
    targets = []

    def best(bw, key):
        """C_nat INA's better profile at this rate by `key`."""
        cands = [r for r in runs if r["bw"] == bw and r["method"].startswith("C_nat INA")
                 and r[key] is not None]
        return max(cands, key=lambda r: r[key]) if cands else None

    for bw in args.bw:
        if bw in STEP_TARGETS:
            r = best(bw, "steps_vs_gloo")
            targets.append(Target(f"C_nat INA steps/s vs Gloo at {bw:g} Mbit/s "
                                  f"({r['method']})", r["steps_vs_gloo"], STEP_TARGETS[bw],
                                  "min", why=r.get("bound") or "").as_dict())
    # time to accuracy per seed (bench/tta_seeds.py): measured where a link bound the run,
    # projected by the step-time model for a cluster
    compute_s = (args.compute_ms / 1e3 if args.compute_ms
                 else tta_seeds.compute_seconds(conv["batch"]))
    a = tta_seeds.analyse(conv, args.target, compute_s, runs)
    a["load_average"] = [round(x, 2) for x in os.getloadavg()]     # beside the compute figure
    a["steps_table"], a["time_table"] = tta_seeds.steps_table(a), tta_seeds.time_table(a)
    print(f"steps to {args.target:.0%} per seed ({a['seeds']} seeds), compute "
          f"{compute_s * 1e3:.2f} ms/step")
    print(a["steps_table"])
    print(a["time_table"])
    tta_seeds.plot(a, args.plot, tta_seeds.PANELS)
    slowest = min(args.bw)
    measured = next((rows for rows in a["blocks"]
                     if rows[0]["block"] == f"Mininet, {slowest:g} Mbit/s, measured"), [])
    cands = [r for r in measured if r["label"].startswith("C_nat INA")
             and r.get(tta_seeds.GLOO) and r[tta_seeds.GLOO]["estimate"] is not None]
    r = max(cands, key=lambda r: r[tta_seeds.GLOO]["estimate"]) if cands else None
    t = Target(f"C_nat INA vs Gloo, time to {args.target:.0%} at {slowest:g} Mbit/s"
               + (f" ({r['label']}; geometric mean over {a['seeds']} seeds)" if r else ""),
               r and r[tta_seeds.GLOO]["estimate"], TTA_TARGET, "min")
    targets.append({**t.as_dict(), "ci": r[tta_seeds.GLOO]["interval"]} if r else t.as_dict())
    for t in targets:
        print("target " + t["text"] + (f" ({t['ci']})" if t.get("ci") else ""))
    save(args.json, {"machine": machine(), "switch": runs[0]["switch"], "steps": args.steps,
                     "target": args.target, "runs": runs, "table": markdown(header, rows),
                     "seeds_analysis": a,
                     "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
