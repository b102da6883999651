#!/usr/bin/env python3
"""Block-sparse aggregation in Mininet, link-bound: bytes and time against dense C_nat INA.

    sudo .venv/bin/python bench/sparse.py [--densities 0.01 0.1 0.5 1] [--bw 1]

A star of 4 workers and a fifth host, links shaped with HTB at --bw Mbit/s (low, so the
links and not the software switch bound the time), the embedded switch target (softswitch;
--switch bmv2 for BMv2). Each worker's tensor has --elements float32 values in blocks of
ELEMS (168); a worker holds round(density * blocks) blocks non-zero, the rest are zero:
  random     each worker draws its blocks independently: with 4 workers at density d the
             union is about 1 - (1 - d)^4 of the blocks (34% at d = 10%);
  clustered  every worker holds the same contiguous run: the union is d.
Every result goes to every worker, so a sparse job moves the union, not d: the bytes on
the busiest link follow the union. Contenders, one after the other on the same tensors:
  dense C_nat INA     the dense job (CNAT8 up and down): every block travels
  sparse int32 INA    a sparse job on the switch, FIXED32 up and down
  sparse C_nat INA    a sparse job on the switch, CNAT8 up and down
  host aggregator     the same block protocol on the fifth host (worker/block_aggregator.py,
                      OmniReduce's design), CNAT8 up and down, over kernel UDP
Each runs bench/host_probe.py on the workers: a warm-up call, then --reps timed calls; a
call's time is the slowest worker's, the figure the median. The bound is the bytes that
crossed the busiest link direction during the timed calls (the kernel's counters of the
switch's interfaces) per call, over the link bandwidth.
Targets (as ratios measured in the same run): at 10% density sparse C_nat INA moves >= 5x
fewer bytes on the busiest link than dense C_nat INA, in time within 1.3x of its bound; at
100% it costs (time) <= 1.1x dense C_nat INA.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from common import OUT, REPO, Target, machine, markdown, median, quick, save, say, table
from host_probe import sparse_mask

from controller import topology as topology_mod
from controller.topology import JobSpec

WINDOW = 64
WORKERS = 4
ELEMS = 168
# contender -> (job id or None for the host aggregator, encoding, sparse)
CONTENDERS = {
    "dense C_nat INA": (1, "cnat8", False),
    "sparse int32 INA": (2, "fixed32", True),
    "sparse C_nat INA": (3, "cnat8", True),
    "host aggregator": (None, "cnat8", True),
}


def make_topo(bw: float, contenders: list[str]):
    topo = topology_mod.star(hosts=WORKERS + 1, bw_mbit=bw)
    workers = tuple(h.name for h in topo.hosts[:WORKERS])
    jobs = []
    for name in contenders:
        job, enc, sparse = CONTENDERS[name]
        if job is not None:
            jobs.append(JobSpec(job, workers, WINDOW, enc,
                                mode="sparse" if sparse else "dense"))
    return topo.with_jobs(jobs), list(workers), topo.hosts[WORKERS]


def union_density(blocks: int, density: float, placement: str) -> float:
    held = np.zeros(blocks, bool)
    for r in range(WORKERS):
        held |= sparse_mask(r, blocks, density, placement)
    return float(held.mean())


def run(args, workdir: Path) -> list[dict]:
    import emu

    topo, workers, agg_host = make_topo(args.bw, args.contenders)
    topo_path = workdir / "sparse.json"
    topo.save(str(topo_path))
    blocks = -(-args.elements // ELEMS)
    rows = []
    say(f"star, {WORKERS} workers + aggregator host, {args.bw:g} Mbit/s links, {args.switch}; "
        f"{args.elements} elements ({blocks} blocks) x {args.reps} calls")
    with emu.started(topo, args.switch, workdir / "emu") as net:
        session = int(time.time()) % 20000 + 1
        for placement in args.placements:
            for density in args.densities:
                union = union_density(blocks, density, placement)
                for name in args.contenders:
                    job, enc, sparse = CONTENDERS[name]
                    session += 1
                    extra = ("--density", str(density), "--placement", placement) + \
                        (("--sparse",) if sparse else ())
                    say(f"  {placement} {density:.0%} (union {union:.1%}): {name} ...")
                    ps = None if job is not None else (agg_host.name, agg_host.ip)
                    records, loads, _ = emu.run_probes(
                        net, topo_path, workers, workdir, job=job or 9, session=session,
                        encoding=enc, elements=args.elements, reps=args.reps, topo=topo,
                        ps=ps, timeout=args.timeout, budget=args.budget, extra=extra,
                        ps_cmd=("block_aggregator.py", "--result-encoding", "cnat8"))
                    per_call = [max(r["calls"][i]["seconds"] for r in records)
                                for i in range(args.reps)]
                    busiest = max(loads, key=lambda x: x.bytes)
                    per_call_bytes = busiest.bytes / args.reps
                    bound = per_call_bytes * 8 / (args.bw * 1e6)
                    t = median(per_call)
                    row = {"placement": placement, "density": density, "union": union,
                           "variant": name, "seconds": per_call, "median_s": t,
                           "bound_s": bound, "x_bound": t / bound,
                           "busiest": f"{busiest.src}->{busiest.dst}",
                           "busiest_bytes_per_call": per_call_bytes,
                           "busiest_bytes_per_element": per_call_bytes / args.elements,
                           "retransmissions": sum(c["retransmissions"] for r in records
                                                  for c in r["calls"]),
                           "loads": [vars(x) for x in loads if x.bytes]}
                    rows.append(row)
                    say(f"    median {t:.2f} s, bound {bound:.2f} s ({row['busiest']}, "
                        f"{row['busiest_bytes_per_element']:.3f} B/element), "
                        f"{row['retransmissions']} retransmissions")
    return rows


def find(rows, placement, density, variant):
    for r in rows:
        if (r["placement"], r["density"], r["variant"]) == (placement, density, variant):
            return r
    return None


def targets(rows: list[dict]) -> list[Target]:
    out = []
    for placement in dict.fromkeys(r["placement"] for r in rows):
        sp, de = (find(rows, placement, 0.1, v) for v in ("sparse C_nat INA", "dense C_nat INA"))
        if sp and de:
            t = Target(f"{placement}, 10% of blocks per worker (union {sp['union']:.0%}): "
                       "dense C_nat INA bytes / sparse C_nat INA bytes on the busiest link",
                       de["busiest_bytes_per_call"] / sp["busiest_bytes_per_call"], 5, "min")
            if not t.met:
                t.why = (f"every result goes to every worker, so the busiest link carries "
                         f"the union of the workers' blocks, {sp['union']:.0%} of them, "
                         f"plus headers: at most {1 / max(sp['union'], 1e-9):.1f}x")
            out.append(t)
        if sp:
            t = Target(f"{placement}, 10%: sparse C_nat INA time / its bound", sp["x_bound"],
                       1.3, "max")
            if not t.met:
                t.why = f"{sp['retransmissions']} retransmissions; per-packet work"
            out.append(t)
        sp, de = (find(rows, placement, 1.0, v) for v in ("sparse C_nat INA", "dense C_nat INA"))
        if sp and de:
            t = Target(f"{placement}, 100%: sparse C_nat INA time / dense C_nat INA time",
                       sp["median_s"] / de["median_s"], 1.1, "max")
            t.why = (f"bytes {sp['busiest_bytes_per_call'] / de['busiest_bytes_per_call']:.3f}x"
                     " (8 more header bytes per block, a prime per slot)")
            out.append(t)
    return out


def report_rows(rows: list[dict]) -> tuple[list[str], list[list]]:
    header = ["placement", "density", "union", "variant", "median s", "bound s", "x bound",
              "busiest link", "B/elem there", "x dense bytes", "retx"]
    body = []
    for r in rows:
        de = find(rows, r["placement"], r["density"], "dense C_nat INA")
        ratio = (r["busiest_bytes_per_call"] / de["busiest_bytes_per_call"]) if de else None
        body.append([r["placement"], r["density"], r["union"], r["variant"], r["median_s"],
                     r["bound_s"], r["x_bound"], r["busiest"], r["busiest_bytes_per_element"],
                     ratio, r["retransmissions"]])
    return header, body


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--densities", type=float, nargs="+",
                    default=[0.1, 1.0] if q else [0.01, 0.1, 0.5, 1.0])
    ap.add_argument("--placements", nargs="+", choices=["random", "clustered"],
                    default=["clustered"] if q else ["random", "clustered"])
    ap.add_argument("--contenders", nargs="+", choices=list(CONTENDERS),
                    default=list(CONTENDERS))
    ap.add_argument("--bw", type=float, default=1.0, help="link bandwidth, Mbit/s")
    ap.add_argument("--switch", choices=["soft", "bmv2"], default="soft")
    ap.add_argument("--elements", type=int, default=200 * ELEMS if q else 1000 * ELEMS)
    ap.add_argument("--reps", type=int, default=1 if q else 3)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--budget", type=float, default=900.0, help="seconds per variant at most")
    ap.add_argument("--json", type=Path, default=OUT / "sparse.json")
    args = ap.parse_args(argv)
    import emu

    why = emu.why_not_runnable()
    if why:
        print(f"sparse bench skipped: {why}")
        save(args.json, {"skipped": why})
        return 0
    workdir = REPO / "results" / "bench" / "sparse"
    workdir.mkdir(parents=True, exist_ok=True)
    rows = run(args, workdir)
    header, body = report_rows(rows)
    print(table(header, body))
    ts = targets(rows)
    for t in ts:
        print("target " + t.text())
    save(args.json, {"machine": machine(), "bw": args.bw, "switch": args.switch,
                     "elements": args.elements, "reps": args.reps,
                     "command": " ".join(["bench/sparse.py", *(argv or sys.argv[1:])]),
                     "rows": rows, "table": markdown(header, body),
                     "targets": [t.as_dict() for t in ts]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
