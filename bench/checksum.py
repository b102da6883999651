#!/usr/bin/env python3
"""What the hardened slot protocol costs softswitch: packets/s of the committed program
against a baseline build, with the same packets, in one run.

The stream is bench/softswitch_pps.py's (W workers' CNAT8 contributions, slot after slot,
re-compressed CNAT8 results), every frame with its UDP checksum over the payload: a
program that verifies it (docs/PROTOCOL.md "Integrity") takes them, an older one ignores
it. The baseline is p4src/build/agg.json at a git revision (default: `main`; give the
revision before the change, e.g. `--baseline 010627b`) or a JSON file. Runs alternate
between the two programs so both see the same machine load; the best of --repeat each.

    .venv/bin/python bench/checksum.py [--baseline REV|FILE] [--packets 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.softswitch_pps import elems_of, names, run_engine, stream  # noqa: E402


def load_baseline(spec: str) -> dict:
    path = Path(spec)
    if path.is_file():
        return json.loads(path.read_text())
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"{spec}:p4src/build/agg.json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"no baseline {spec!r}: neither a file nor a git revision "
                         f"({r.stderr.strip()})")
    return json.loads(r.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git revision or JSON file")
    ap.add_argument("--json", type=Path, default=ROOT / "p4src/build/agg.json")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--packets", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    progs = {"baseline": load_baseline(args.baseline), "current": json.loads(args.json.read_text())}
    elems = {elems_of(j) for j in progs.values()}
    if len(elems) != 1:
        raise SystemExit(f"the programs differ in elements per packet: {elems}")
    pkts = stream(args.workers, args.slots, args.packets, elems.pop(), args.seed)
    best = dict.fromkeys(progs, float("inf"))
    results = {}
    for _ in range(args.repeat):
        for name, j in progs.items():
            dt, outs = run_engine(j, names(j), pkts, args.workers, args.slots, 1)
            best[name] = min(best[name], dt)
            results[name] = sum(len(o) for o in outs)
    if results["baseline"] != results["current"]:
        raise SystemExit(f"the programs answered differently: {results}")
    pps = {k: len(pkts) / v for k, v in best.items()}
    print(f"stream: {len(pkts)} CNAT8 contributions, {args.workers} workers, {args.slots} "
          f"slots; {results['current']} results out of each program")
    for k in progs:
        print(f"{k:9s} {pps[k]:9,.0f} packets/s (best of {args.repeat})")
    print(f"ratio current/baseline: {pps['current'] / pps['baseline']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
