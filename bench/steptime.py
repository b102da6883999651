#!/usr/bin/env python3
"""The step-time model (mininet/steptime.py) against measured runs: calibrated on one run per
method and switch, it predicts that method's steps/s at the other link rates (root).

    .venv/bin/python bench/steptime.py [--bw 1000 100 30 10 3 1] [--bmv2-bw 1000 1] \\
        [--steps 200] [--torch-steps 16] [--quick] [--measured results/bench/steptime.json]

A star of 4 workers; methods: C_nat INA and int32 INA (the numpy MLP), the host parameter
server (numpy), Gloo's ring and C_nat INA under PyTorch DDP (MNIST-1D CNN). Each run is
`mininet/run.py` under the emulation lock (one emulation at a time on a machine). The
fastest run of each method and switch gives the CPU figures (bytes and packets per step, CPU
per step of switch, workers and kernel, compute, overlap, round trip, window), the slowest
the share of the link's rate the protocol gets and the CPU per step the job grows to as a
slow link spreads its packets; the model predicts every other run of the method from its
link rate and the cores other work left it; no run is predicted from its own time.
Targets: median relative error of steps/s <= 15 %, the largest <= 30 %. `--measured`
recomputes everything from a previous JSON (no Mininet).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from common import (
    OUT,
    REPO,
    Target,
    machine,
    markdown,
    median,
    save,
    say,
    step_model,
    table,
)

model = step_model()

# (label, mininet/run.py flags, torch?)
METHODS = [("C_nat INA", ["--encoding", "cnat8"], False),
           ("int32 INA", ["--encoding", "fixed32", "--result-encoding", "fixed32"], False),
           ("parameter server", ["--aggregation", "ps"], False),
           ("Gloo ring (torch)", ["--framework", "torch", "--aggregation", "gloo"], True),
           ("C_nat INA (torch)", ["--framework", "torch", "--encoding", "cnat8"], True)]
QUICK_METHODS = ("C_nat INA", "Gloo ring (torch)")
MEDIAN_TARGET, MAX_TARGET = 0.15, 0.30
LOCK = "/tmp/natswitch-emu.lock"


def measure(label: str, flags: list[str], torch: bool, bw: float, switch: str, steps: int,
            out: Path, lock: str | None) -> dict:
    cmd = [sys.executable, str(REPO / "mininet" / "run.py"), "--switch", switch, "--bw",
           str(bw), "--steps", str(steps), "--out", str(out), *flags]
    if torch:
        cmd += ["--eval-every", str(steps)]
    if lock:
        cmd = ["flock", lock, *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=str(REPO))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    f = model.figures(out)
    bound = json.loads((out / "report.json").read_text())["jobs"][0]["bound"]
    return {"method": label, "switch": switch, "bw": bw, "steps": steps, "out": str(out),
            "figures": model.asdict(f), "bound": bound["text"],
            "load_average": os.getloadavg()[0]}


def plot(rows: list[dict], path: Path) -> bool:
    """Predicted against measured steps/s, log-log, with the diagonal and the +-30% band."""
    pred = [r for r in rows if not r["calibration"]]
    if not pred:
        return False
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 5.2))
    markers = "osD^v<>"
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for switch, color in (("soft", "tab:blue"), ("bmv2", "tab:red")):
        for i, m in enumerate(methods):
            pts = [r for r in pred if r["switch"] == switch and r["method"] == m]
            if pts:
                ax.scatter([r["measured"] for r in pts], [r["predicted"] for r in pts],
                           marker=markers[i % len(markers)], color=color, s=30,
                           label=f"{m}, {switch}", zorder=3)
    values = [v for r in pred for v in (r["measured"], r["predicted"])]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    # the band and the diagonal under the points
    ax.fill_between([lo, hi], [lo * 0.7, hi * 0.7], [lo * 1.3, hi * 1.3], color="0.85",
                    label="within 30 %", zorder=1)
    ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="predicted = measured", zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured steps/s")
    ax.set_ylabel("predicted steps/s (calibrated at another rate)")
    ax.set_title("step-time model, star of 4 workers", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def targets(rows: list[dict]) -> list[Target]:
    errs = [r["error"] for r in rows if not r["calibration"]]
    worst = max((r for r in rows if not r["calibration"]), key=lambda r: r["error"],
                default=None)
    why = (f"largest at {worst['method']} {worst['switch']} {worst['bw']:g} Mbit/s, measured "
           f"bound: {worst['measured_bound']}") if worst else ""
    return [Target("step-time model: median relative error of steps/s",
                   100 * median(errs) if errs else None, 100 * MEDIAN_TARGET, "max", " %"),
            Target("step-time model: largest relative error of steps/s",
                   100 * max(errs) if errs else None, 100 * MAX_TARGET, "max", " %", why)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--bw", type=float, nargs="+", default=[1000, 100, 30, 10, 3, 1],
                    help="link rates on softswitch, Mbit/s (default 1000 100 30 10 3 1; the "
                         "fastest and the slowest calibrate)")
    ap.add_argument("--bmv2-bw", type=float, nargs="*", default=[1000, 1],
                    help="link rates on BMv2 (default 1000 1; none: leave BMv2 out)")
    ap.add_argument("--steps", type=int, default=200,
                    help="steps of a numpy run (default 200: its steps take a few ms, and the "
                         "CPU is sampled every 0.1 s)")
    ap.add_argument("--torch-steps", type=int, default=16,
                    help="steps of a PyTorch run (default 16)")
    ap.add_argument("--methods", nargs="+", choices=[m[0] for m in METHODS],
                    help="some methods only (default all)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: softswitch at 1000, 30 and 10 Mbit/s, C_nat INA and Gloo, "
                         "few steps")
    ap.add_argument("--lock", default=LOCK,
                    help=f"flock file each emulation waits for (default {LOCK}; '' none)")
    ap.add_argument("--json", type=Path, default=OUT / "steptime.json",
                    help="figures out (default results/bench/steptime.json)")
    ap.add_argument("--plot", type=Path, default=REPO / "docs" / "results" / "steptime.png",
                    help="predicted against measured, log-log (default "
                         "docs/results/steptime.png)")
    ap.add_argument("--measured", type=Path,
                    help="a steptime.json to take the runs' figures from (no Mininet)")
    ap.add_argument("--reread", action="store_true",
                    help="with --measured: read each run's figures again from its folder")
    args = ap.parse_args(argv)
    for name in ("bw", "bmv2_bw"):
        if any(not b > 0 for b in getattr(args, name)):
            ap.error(f"--{name.replace('_', '-')}: rates must be above 0 Mbit/s")
    if args.steps < 3 or args.torch_steps < 3:
        ap.error("--steps and --torch-steps: at least 3 (the first step is not timed)")
    methods = [m for m in METHODS if m[0] in (args.methods or [m[0] for m in METHODS])]
    if args.quick:
        methods = [m for m in methods if m[0] in QUICK_METHODS]
        args.bw, args.bmv2_bw, args.steps, args.torch_steps = [1000, 30, 10], [], 6, 3
    t0 = time.monotonic()
    if args.measured:
        runs = json.loads(args.measured.read_text())["runs"]
        if args.reread:
            for r in runs:
                r["figures"] = model.asdict(model.figures(Path(r["out"])))
    else:
        if os.geteuid() != 0:
            print("bench/steptime.py needs root (Mininet)", file=sys.stderr)
            return 2
        runs = []
        for switch, rates in (("soft", args.bw), ("bmv2", args.bmv2_bw)):
            for label, flags, torch in methods:
                for bw in sorted(rates, reverse=True):
                    out = OUT / "steptime" / f"{switch}-{bw:g}-{label.replace(' ', '_')}"
                    r = measure(label, flags, torch, bw, switch,
                                args.torch_steps if torch else args.steps, out, args.lock)
                    runs.append(r)
                    say(f"{switch} {bw:g} Mbit/s {label}: "
                        f"{1 / r['figures']['step_s']:.2f} steps/s; {r['bound']}")
    rows = model.validate(runs)
    header = ["switch", "method", "Mbit/s", "measured steps/s", "predicted", "error %",
              "model's bound", "run's bound"]
    body = [[r["switch"], r["method"], r["bw"], r["measured"], r["predicted"],
             None if r["calibration"] else 100 * r["error"],
             r["role"] or r["predicted_bound"],
             r["measured_bound"].split(" -- ")[0]] for r in rows]
    print(f"star of 4 workers; each method calibrated at its fastest and slowest rates; "
          f"{time.monotonic() - t0:.0f} s")
    print(table(header, body))
    ts = targets(rows)
    for t in ts:
        print("target " + t.text())
    if plot(rows, args.plot):
        print(f"plot: {args.plot}")
    save(args.json, {"machine": machine(), "quick": args.quick, "runs": runs, "rows": rows,
                     "table": markdown(header, body), "targets": [t.as_dict() for t in ts]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
