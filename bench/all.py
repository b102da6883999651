#!/usr/bin/env python3
"""Every bench in order, then the report: what `make bench` runs.

    sudo .venv/bin/python bench/all.py                 # the full run, writes docs/results.md
    BENCH_QUICK=1 .venv/bin/python bench/all.py        # smoke run, writes results/bench/results.md

Each bench runs as its own process; its output is shown as it comes and kept in
<dir>/<name>.txt, its figures in <dir>/<name>.json (default dir results/bench). A bench
that fails is reported and the others still run; the exit code says whether all passed.
Without root (or with --no-root) the Mininet benches are left out and wire.py runs in
process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from common import OUT, REPO, machine, quick, save

BENCH = REPO / "bench"


def steps(q: bool, root: bool, out: Path) -> list[tuple[str, list[str]]]:
    py = sys.executable
    codec = ["--elements", str(1 << 18), "--repeat", "2"] if q else []
    pps = ["--packets", "400", "--repeat", "1", "--no-bmv2"] if q else []
    return [
        ("codec", [py, str(BENCH / "codec.py"), *codec]),
        ("softswitch_pps", [py, str(BENCH / "softswitch_pps.py"), *pps]),
        ("wire", [py, str(BENCH / "wire.py"), "--net", "mininet" if root else "inprocess",
                  "--json", str(out / "wire.json")]),
        *([("allreduce", [py, str(BENCH / "allreduce.py"), "--json",
                          str(out / "allreduce.json")])] if root else []),
        *([("sparse", [py, str(BENCH / "sparse.py"), "--json",
                       str(out / "sparse.json")])] if root else []),
        ("speed_targets", [py, str(BENCH / "speed_targets.py"), "--json",
                           str(out / "speed_targets.json"),
                           *(["--quick", "--no-baseline"] if q else []),
                           *([] if root else ["--no-root"])]),
        ("convergence", [py, str(BENCH / "convergence.py"), "--json",
                         str(out / "convergence.json")]),
        ("torch_convergence", [py, str(BENCH / "torch_convergence.py"), "--json",
                               str(out / "torch_convergence.json")]),
        # the entire-model mode of the INA methods, for the 4-bit side by side
        ("torch_convergence_model", [py, str(BENCH / "torch_convergence.py"), "--mode", "model",
                                     "--methods", "int32", "C_nat INA (switch)", "natural",
                                     "THC", "--compressors", "--json",
                                     str(out / "torch_convergence_model.json")]),
        ("fourbit", [py, str(BENCH / "fourbit.py"), "--json", str(out / "fourbit.json"),
                     *(["--reps", "1", "--elements", "20000"] if q else []),
                     *([] if root else ["--targets", "soft"])]),
        # the 4-bit encodings at their fewest bytes per element, and the switch's own rate
        # (full runs only: softswitch compiles the wide4 program in about 30 s a process)
        *([("fourbit_wide4", [py, str(BENCH / "fourbit.py"), "--profile", "wide4", "--json",
                              str(out / "fourbit_wide4.json"),
                              *([] if root else ["--targets", "soft"])])] if not q else []),
        ("fourbit_pps", [py, str(BENCH / "softswitch_pps.py"), "--encodings", "cnat8", "uq4",
                         *(pps or ["--packets", "4000"])]),
        ("fourbit_variance", [py, str(BENCH / "fourbit_variance.py"),
                              *(["--draws", "100"] if q else [])]),
        *([("torch_tta", [py, str(BENCH / "torch_tta.py"), "--convergence",
                          str(out / "torch_convergence.json"), "--json",
                          str(out / "torch_tta.json"), *(["--bw", "100", "--steps", "3"]
                                                         if q else [])])] if root else []),
        *([("torch_overlap", [py, str(BENCH / "torch_overlap.py"), "--json",
                              str(out / "torch_overlap.json"),
                              *(["--steps", "4", "--reps", "1"] if q else [])])]
          if root else []),
        *([("steptime", [py, str(BENCH / "steptime.py"), "--json", str(out / "steptime.json"),
                         "--plot", str(out / "steptime.png"), *(["--quick"] if q else [])])]
          if root else []),
    ]


def run(name: str, cmd: list[str], out: Path) -> tuple[int, float]:
    print(f"\n=== {name}: {' '.join(Path(c).name if c.startswith('/') else c for c in cmd)}",
          flush=True)
    t = time.monotonic()
    with open(out / f"{name}.txt", "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=str(REPO), env=dict(os.environ,
                                                                   PYTHONUNBUFFERED="1"))
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)
        code = proc.wait()
    dt = time.monotonic() - t
    print(f"=== {name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {dt:.0f} s",
          flush=True)
    return code, dt


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=OUT, help="outputs (default results/bench)")
    ap.add_argument("--report", type=Path, default=None,
                    help="the report (default docs/results.md; quick: <dir>/results.md)")
    ap.add_argument("--no-root", action="store_true", help="leave out the Mininet benches")
    ap.add_argument("--only", nargs="+", help="run only these benches (then the report)")
    args = ap.parse_args(argv)
    root = os.geteuid() == 0 and not args.no_root
    args.dir.mkdir(parents=True, exist_ok=True)
    report = args.report or (args.dir / "results.md" if q else REPO / "docs" / "results.md")
    plan = steps(q, root, args.dir)
    if args.only:
        plan = [(n, c) for n, c in plan if n in args.only]
    print(f"bench: {len(plan)} benches{' (quick)' if q else ''}: "
          f"{', '.join(n for n, _ in plan)}; outputs in {args.dir}", flush=True)
    # a bench's old figures must not reach the report as if this run had made them
    for name, _ in plan if args.only else steps(q, True, args.dir):
        for ext in ("json", "txt"):
            (args.dir / f"{name}.{ext}").unlink(missing_ok=True)
    save(args.dir / "start.json", {"machine": machine(), "quick": q,
                                   "benches": [n for n, _ in plan]})
    status = {}
    for name, cmd in plan:
        status[name] = run(name, cmd, args.dir)
    code, _ = run("report", [sys.executable, str(BENCH / "report.py"), "--dir", str(args.dir),
                             "--out", str(report)], args.dir)
    failed = [n for n, (c, _) in status.items() if c] + (["report"] if code else [])
    print(f"\nbench: {'all ok' if not failed else 'FAILED: ' + ', '.join(failed)}; "
          f"report {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
