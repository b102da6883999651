#!/usr/bin/env python3
"""softswitch's per-packet CPU against elements per packet, this code beside a baseline checkout.

Each BMv2 JSON (--json, repeatable: builds of the aggregation program at several elements per
packet) is loaded by this tree's softswitch and, with --baseline DIR, by the softswitch of
another checkout (e.g. `git worktree add --detach ../base main`). Every engine runs in its own
process (loaded once; load time = JSON parse + translation, printed) and gets
bench/softswitch_vector.py's stream: W workers' CNAT8 contributions to S slots, round after
round, results re-compressed and multicast, handed to Switch.process in process. Runs alternate
between the engines; each prints the median CPU time per input packet and elements/s. Ratios:
per-packet cost of each JSON against the first one (the same code), and this code against the
baseline (the same JSON). --stages adds one more run per engine with every step of
Switch.process timed (wall clock, so on a loaded machine it is a guide to shares, not a figure):
parser, checksum verification, ingress and egress pipelines, replication, checksum update,
deparser, and the rest (the packet's slots copied and freed, the switch's own code).

    .venv/bin/python bench/softswitch_elems.py --json p4src/build/agg.json \\
        --json WIDE/agg.json [--baseline ../base] [--packets 800] [--runs 3] [--stages]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The steps of Switch.process --stages times: program functions, then the switch's own.
STAGES = ("parse", "verify_checksums", "ingress", "egress", "update_checksums", "deparse")
NATIVE_STAGES = ("ingress", "egress")  # softswitch/native/: whole passes in one call each


def timed(sw) -> dict:
    """Wraps the steps of sw's packet path with timers; returns the dict they add to."""
    acc = dict.fromkeys((*STAGES, "replicate"), 0.0)
    clock = time.perf_counter

    def wrap(name, fn):
        def step(*a):
            t = clock()
            try:
                return fn(*a)
            finally:
                acc[name] += clock() - t
        return step

    nat = getattr(sw._prog, "native", None)
    if nat is not None:  # compiled: the calls into native code, and the rest
        acc = dict.fromkeys(NATIVE_STAGES, 0.0)
        for name in NATIVE_STAGES:
            setattr(nat, name, wrap(name, getattr(nat, name)))
        return acc
    for name in STAGES:
        setattr(sw._prog, name, wrap(name, getattr(sw._prog, name)))
    sw._replicate = wrap("replicate", sw._replicate)
    return acc


def serve(tree: Path, path: Path, workers: int, slots: int, packets: int) -> None:
    """One engine: loads the program, then answers each seed read from stdin with the CPU
    seconds per packet of one run of fresh contributions."""
    sys.path[:0] = [str(tree)]  # that checkout's softswitch (and its bench helpers)
    import softswitch  # noqa: PLC0415
    from bench.softswitch_vector import elems_of, engine, stream  # noqa: PLC0415

    t = time.perf_counter()
    j = json.loads(path.read_text())
    t_json = time.perf_counter() - t
    try:  # the tier Switch picks by itself (the native one where it compiles)
        sw = engine(j, True, workers, slots, native=None)
    except TypeError:  # a checkout from before the native tier
        sw = engine(j, True, workers, slots)
    t_load = time.perf_counter() - t
    elems = elems_of(j)
    print(json.dumps({"elems": elems, "json_s": t_json, "load_s": t_load,
                      "softswitch": softswitch.__file__,
                      "tier": getattr(sw, "tier", "python")}), flush=True)
    acc = None
    for line in sys.stdin:
        if line.startswith("stages") and acc is None:
            acc = timed(sw)  # from now on every run is timed step by step
        session = int(line.split()[-1])
        try:  # the job moves to the stream's session (a checkout from before sessions: any)
            from bench.softswitch_vector import set_session  # noqa: PLC0415
            set_session(sw, workers, slots, session)
        except ImportError:
            pass
        pkts = stream(workers, slots, packets, elems, session, 7)
        for k in acc or ():
            acc[k] = 0.0
        t, w = time.process_time(), time.perf_counter()
        for p, f in pkts:
            sw.process(p, f)
        cpu = (time.process_time() - t) / len(pkts)
        w = time.perf_counter() - w
        if sw.stats["errors"] or not sw.stats["packets_out"]:
            raise SystemExit(f"{path}: {sw.stats}")
        res = {"cpu": cpu}
        if acc is not None:
            res["stages"] = {k: v / len(pkts) for k, v in acc.items()}
            res["stages"]["rest"] = w / len(pkts) - sum(res["stages"].values())
        print(json.dumps(res), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, action="append")
    ap.add_argument("--baseline", type=Path, help="a checkout whose softswitch/ is the 'before'")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--packets", type=int, default=800)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stages", action="store_true",
                    help="one more run per engine, each step of Switch.process timed")
    ap.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(Path(args.serve[0]), Path(args.serve[1]), args.workers, args.slots, args.packets)
        return 0
    jsons = args.json or [ROOT / "p4src/build/agg.json"]
    if len(set(jsons)) != len(jsons):
        ap.error("each --json once")
    for jp in jsons:
        if not jp.is_file():
            ap.error(f"--json {jp}: no such file (the compiled programs are "
                     f"p4src/build/agg.json and p4src/build/wide/agg.json)")
    if args.baseline and not (args.baseline / "softswitch").is_dir():
        ap.error(f"--baseline {args.baseline}: no softswitch/ there")
    for name, v in (("--workers", args.workers), ("--slots", args.slots),
                    ("--packets", args.packets), ("--runs", args.runs)):
        if v < 1:
            ap.error(f"{name} must be at least 1")
    trees = [("new", ROOT)] + ([("old", args.baseline.resolve())] if args.baseline else [])
    procs, info = {}, {}
    for name, tree in trees:
        for jp in jsons:
            p = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(tree), str(jp), "--workers",
                 str(args.workers), "--slots", str(args.slots), "--packets", str(args.packets)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            line = p.stdout.readline()  # one load at a time
            if not line:
                raise SystemExit(f"the engine of {tree} could not load {jp} (exit status "
                                 f"{p.wait()}; its error is above)")
            info[name, jp] = json.loads(line)
            procs[name, jp] = p
    print(f"{args.packets} CNAT8 contributions per run, {args.workers} workers, {args.slots} "
          f"slots, {args.runs} runs; load {os.getloadavg()[0]:.2f}")
    cpu = {k: [] for k in procs}
    for run in range(args.runs):
        for k, p in procs.items():
            p.stdin.write(f"{run + 1}\n")
            p.stdin.flush()
            cpu[k].append(json.loads(p.stdout.readline())["cpu"])
    stages = {}
    if args.stages:
        for k, p in procs.items():
            p.stdin.write(f"stages {args.runs + 1}\n")
            p.stdin.flush()
            stages[k] = json.loads(p.stdout.readline())["stages"]
    for p in procs.values():
        p.stdin.close()
        p.wait()
    med = {k: sorted(v)[len(v) // 2] for k, v in cpu.items()}
    for (name, jp), m in med.items():
        i = info[name, jp]
        print(f"{name} {jp} ({i.get('tier', 'python')} tier): {i['elems']} elements/packet: "
              f"{m * 1e6:7.1f} us CPU per packet, "
              f"{1 / m:8,.0f} packets/s, {i['elems'] / m:11,.0f} elements/s; load "
              f"{i['load_s']:.1f} s (JSON parse {i['json_s']:.1f} s)")
    for (name, jp), st in stages.items():
        print(f"{name} {jp}: steps in us per input packet: "
              + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in st.items()))
    for name, _ in trees:
        first = med[name, jsons[0]]
        for jp in jsons[1:]:
            e0, e1 = info[name, jsons[0]]["elems"], info[name, jp]["elems"]
            r = med[name, jp] / first
            print(f"{name}: per-packet cost at {e1} elements / at {e0}: {r:.2f}x "
                  f"(elements/s x{e1 / e0 / r:.2f})")
    if args.baseline:
        for jp in jsons:
            print(f"{jp.name} ({info['new', jp]['elems']} elements): new/old per-packet cost "
                  f"{med['new', jp] / med['old', jp]:.2f}x, load {info['new', jp]['load_s']:.1f}"
                  f" s vs {info['old', jp]['load_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
