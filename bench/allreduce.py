#!/usr/bin/env python3
"""Time to allreduce 2^20 float32 per worker in Mininet, against the bound of the busiest link.

    sudo .venv/bin/python bench/allreduce.py [--parts star-link star-switch fat-link]

Parts (each one emulation; links shaped with HTB at the part's bandwidth):
  star-link         star, 4 workers and a parameter-server host, low bandwidth (--link-bw),
                    softswitch: C_nat INA (CNAT8 up and down), int32 INA (FIXED32 up and
                    down) and the host parameter server (float32), one after the other
  star-switch       the same at high bandwidth (--fast-bw): the switch, not the links, limits;
                    also Gloo's ring allreduce among the 4 hosts (torch.distributed, TCP
                    routed by the switch; --no-gloo leaves it out)
  star-switch-bmv2  the same on BMv2 (simple_switch_grpc; skipped where not installed)
  fat-link          k=4 fat-tree, C_nat INA with 2, 4, 8, 16 workers (h1..hn), lower
                    bandwidth (--fat-link-bw): 36 emulated nodes share the cores
  fat-switch        the same at high bandwidth
BMv2 sums about 1e5 elements/s here: a link-bound regime on it would need links of about
0.1 Mbit/s and an hour, so the link-bound parts run on the embedded target (softswitch),
whose speed is enough below 1 Mbit/s per link.
Each variant runs bench/host_probe.py in its workers' hosts: one warm-up call, then --reps
timed calls; a call's time is the slowest worker's, the figure the median over the calls.
The bound of a variant is the bytes that crossed its busiest link direction during the
timed calls (the switches' port counters) per call, over the link's bandwidth.
Targets (issue 8), as ratios measured in the same run: link-bound at 4 workers C_nat INA
<= 0.35x int32 INA and <= 0.15x the parameter server, and within 1.3x of its bound; INA
time from 2 to 16 workers grows <= 1.2x.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from common import OUT, REPO, Target, machine, markdown, median, quick, save, say, table

from controller import topology as topology_mod
from controller.topology import JobSpec

WINDOW = 64
GLOO_PORT = 29700           # + the session: a rendezvous port of its own for each run
# part -> (topology, regime, switch target)
PARTS = {"star-link": ("star", "link", "soft"), "star-switch": ("star", "switch", "soft"),
         "star-switch-bmv2": ("star", "switch", "bmv2"), "fat-link": ("fat", "link", "soft"),
         "fat-switch": ("fat", "switch", "soft")}


def topo_star(bw: float, window: int = WINDOW):
    topo = topology_mod.star(hosts=5, bw_mbit=bw)
    workers = tuple(h.name for h in topo.hosts[:4])
    jobs = [JobSpec(1, workers, window, "cnat8"), JobSpec(2, workers, window, "fixed32")]
    return topo.with_jobs(jobs), list(workers), topo.hosts[4]


# fat-tree variants: (name, job id offset, what switches below the root send up)
FAT_VARIANTS = (("C_nat INA", 0, "fixed32"), ("C_nat INA, CNAT8 partials", 100, "cnat8"))


def topo_fat(bw: float, sizes: list[int]):
    topo = topology_mod.fat_tree(k=4, bw_mbit=bw)
    jobs = [JobSpec(n + offset, tuple(h.name for h in topo.hosts[:n]), WINDOW, "cnat8",
                    partials)
            for _, offset, partials in FAT_VARIANTS for n in sizes]
    return topo.with_jobs(jobs)


def summarize(name: str, topo, records: list[dict], loads, counted, bw: float, elements: int,
              reps: int, **extra) -> dict:
    """One row: median call time (slowest worker per call), busiest link, bound. loads: the
    kernel's counts per link direction; counted: the switches' (on a host's link, the
    packets the switch program received: fewer where the switch's input overflowed)."""
    per_call = [max(r["calls"][i]["seconds"] for r in records) for i in range(reps)]
    busiest = max(loads, key=lambda x: x.bytes)
    per_call_bytes = busiest.bytes / reps
    bound = per_call_bytes * 8 / (bw * 1e6)
    t = median(per_call)
    retx = sum(c["retransmissions"] for r in records for c in r["calls"])
    n = len(records)
    return {"variant": name, "workers": n, "bw_mbit": bw, "elements": elements, "reps": reps,
            "seconds": per_call, "median_s": t, "bound_s": bound, "x_bound": t / bound,
            "busiest": f"{busiest.src}->{busiest.dst}", "busiest_bytes_per_call": per_call_bytes,
            "busiest_bytes_per_element": per_call_bytes / elements,
            "switch_elements_per_s": n * elements / t, "retransmissions": retx,
            "lost_before_switch": sum(x.packets for x in loads if topo.is_host(x.src))
            - sum(x.packets for x in counted if topo.is_host(x.src)),
            "loads": [vars(x) for x in loads if x.bytes], **extra}


def part_star(args, part: str, workdir: Path) -> list[dict]:
    import emu

    _, regime, kind = PARTS[part]
    bw = args.link_bw if regime == "link" else args.fast_bw
    topo, workers, ps_host = topo_star(bw)
    topo_path = workdir / f"{part}.json"
    topo.save(str(topo_path))
    rows = []
    say(f"{part}: star, 4 workers + parameter server, {bw:g} Mbit/s links, {kind}")
    with emu.started(topo, kind, workdir / part) as net:
        session = int(time.time()) % 20000 + 1
        variants = [("C_nat INA", 1, "cnat8", None), ("int32 INA", 2, "fixed32", None),
                    ("parameter server", 9, "float32", (ps_host.name, ps_host.ip))]
        if regime == "switch" and args.gloo:
            variants.append(("Gloo ring", 1, "float32", None))
        for k, (name, job, enc, ps) in enumerate(variants):
            gloo = (f"{topo.host(workers[0]).ip}:{GLOO_PORT + session % 1000 + k}"
                    if name == "Gloo ring" else None)
            say(f"  {name}: {args.reps} x {args.elements} elements ...")
            records, loads, counted = emu.run_probes(
                net, topo_path, workers, workdir / part, job=job, session=session + k,
                encoding=enc, elements=args.elements, reps=args.reps, topo=topo, ps=ps,
                gloo=gloo, timeout=args.timeout, budget=args.budget)
            row = summarize(name, topo, records, loads, counted, bw, args.elements, args.reps,
                            part=part, regime=regime, switch=kind)
            rows.append(row)
            say(f"  {name}: median {row['median_s']:.2f} s, bound {row['bound_s']:.2f} s "
                f"({row['busiest']}), {row['retransmissions']} retransmissions")
    return rows


def part_fat(args, part: str, workdir: Path) -> list[dict]:
    import emu

    from controller.tree import build_tree

    _, regime, kind = PARTS[part]
    bw = args.fat_link_bw if regime == "link" else args.fast_bw
    topo = topo_fat(bw, args.sizes)
    topo_path = workdir / f"{part}.json"
    topo.save(str(topo_path))
    rows = []
    say(f"{part}: k=4 fat-tree, C_nat INA with {args.sizes} workers, {bw:g} Mbit/s, {kind}")
    with emu.started(topo, kind, workdir / part) as net:
        session = int(time.time()) % 20000 + 101
        runs = [(v, n) for v in FAT_VARIANTS for n in args.sizes if v[2] in args.partials]
        for k, ((name, offset, partials), n) in enumerate(runs):
            job = topo.job(n + offset)
            say(f"  {name}, {n} workers: {args.reps} x {args.elements} elements ...")
            records, loads, counted = emu.run_probes(
                net, topo_path, list(job.workers), workdir / part, job=job.id,
                session=session + k, encoding="cnat8", elements=args.elements, reps=args.reps,
                topo=topo, timeout=args.timeout, budget=args.budget)
            tree = build_tree(topo, job)
            row = summarize(name, topo, records, loads, counted, bw, args.elements,
                            args.reps, part=part, regime=regime, switch=kind,
                            switches=len(tree.nodes), depth=tree.depth(), partials=partials)
            rows.append(row)
            say(f"  {name}, {n} workers: median {row['median_s']:.2f} s, bound "
                f"{row['bound_s']:.2f} s ({row['busiest']}), {row['retransmissions']} "
                "retransmissions")
    return rows


def targets(rows: list[dict]) -> list[Target]:
    def find(part, variant, workers=None):
        for r in rows:
            if r["part"] == part and r["variant"] == variant and \
                    (workers is None or r["workers"] == workers):
                return r
        return None

    out = []
    cnat, i32, ps = (find("star-link", v) for v in ("C_nat INA", "int32 INA", "parameter server"))
    if cnat and i32 and ps:
        t = Target("link-bound, 4 workers: C_nat INA time / int32 INA time",
                   cnat["median_s"] / i32["median_s"], 0.35, "max")
        if not t.met:
            t.why = (f"int32 INA ran at {i32['x_bound']:.2f}x its bound, C_nat INA at "
                     f"{cnat['x_bound']:.2f}x: bytes alone give "
                     f"{cnat['bound_s'] / i32['bound_s']:.2f}x")
        out.append(t)
        t = Target("link-bound, 4 workers: C_nat INA time / parameter server time",
                   cnat["median_s"] / ps["median_s"], 0.15, "max")
        if not t.met:
            t.why = (f"the parameter server ran at {ps['x_bound']:.2f}x its bound; bytes "
                     f"alone give {cnat['bound_s'] / ps['bound_s']:.2f}x")
        out.append(t)
        t = Target("link-bound, 4 workers: C_nat INA time / its bound",
                   cnat["x_bound"], 1.3, "max")
        if not t.met:
            t.why = ("the rest is per-packet work on the switch and the workers; "
                     f"{cnat['retransmissions']} retransmissions")
        out.append(t)
    sizes = sorted({r["workers"] for r in rows if r["part"] == "fat-link"})
    for variant in ("C_nat INA, CNAT8 partials", "C_nat INA"):
        lo, hi = (find("fat-link", variant, sizes[0]) if sizes else None,
                  find("fat-link", variant, sizes[-1]) if sizes else None)
        if lo is None or hi is None or lo is hi:
            continue
        t = Target(f"link-bound fat-tree, {variant}: time at {sizes[-1]} / at {sizes[0]} "
                   "workers", hi["median_s"] / lo["median_s"], 1.2, "max")
        if not t.met:
            mid = find("fat-link", variant, 4)
            flat = (f"; from 4 to {sizes[-1]} workers, all trees of edge, aggregation and "
                    f"core switches, time grows {hi['median_s'] / mid['median_s']:.2f}x"
                    if mid and mid is not hi else "")
            fixed = hi.get("partials") == "fixed32" and hi["switches"] > 1
            t.why = (f"the link bound grows {hi['bound_s'] / lo['bound_s']:.2f}x "
                     f"({lo['busiest_bytes_per_element']:.2f} -> "
                     f"{hi['busiest_bytes_per_element']:.2f} B/element on the busiest link"
                     + ("; the switches below the root send FIXED32 partial sums" if fixed
                        else "") + f"); time/bound {lo['x_bound']:.2f} -> {hi['x_bound']:.2f}"
                     + flat)
        out.append(t)
    return out


def report_rows(rows: list[dict]) -> tuple[list[str], list[list]]:
    header = ["part", "variant", "workers", "Mbit/s", "median s", "bound s", "x bound",
              "busiest link", "B/elem there", "retx", "lost at switch input"]
    body = [[r["part"], r["variant"], r["workers"], r["bw_mbit"], r["median_s"], r["bound_s"],
             r["x_bound"], r["busiest"], r["busiest_bytes_per_element"], r["retransmissions"],
             r["lost_before_switch"]] for r in rows]
    return header, body


def ratio_rows(rows: list[dict]) -> list[list]:
    """Within each part, every row's time and bound against the part's baseline."""
    out = []
    for part in dict.fromkeys(r["part"] for r in rows):
        mine = [r for r in rows if r["part"] == part]
        base = next((r for r in mine if r["variant"] == "parameter server"), mine[0]) \
            if part.startswith("star") else mine[0]
        for r in mine:
            out.append([part, f"{r['variant']} ({r['workers']})",
                        f"{base['variant']} ({base['workers']})",
                        r["median_s"] / base["median_s"], r["bound_s"] / base["bound_s"]])
    return out


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    ap.add_argument("--link-bw", type=float, default=1.0, help="link-bound parts, Mbit/s")
    ap.add_argument("--fast-bw", type=float, default=1000.0, help="switch-bound parts, Mbit/s")
    ap.add_argument("--fat-link-bw", type=float, default=0.5,
                    help="the link-bound fat-tree, Mbit/s: 16 workers and 20 switches share "
                         "the cores, so its links must be slower than the star's")
    ap.add_argument("--partials", nargs="+", choices=[v[2] for v in FAT_VARIANTS],
                    default=[v[2] for v in FAT_VARIANTS],
                    help="fat-tree variants by the encoding of partial sums between switches")
    ap.add_argument("--no-gloo", dest="gloo", action="store_false",
                    help="leave Gloo's ring allreduce out of the switch-bound star")
    ap.add_argument("--elements", type=int, default=4096 if q else 1 << 20)
    ap.add_argument("--reps", type=int, default=1 if q else 3)
    ap.add_argument("--sizes", default="2,4,8,16", help="fat-tree worker counts")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds without progress before a worker gives up")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds per variant at most")
    ap.add_argument("--json", type=Path, default=OUT / "allreduce.json")
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    import emu

    why = emu.why_not_runnable()
    if why:
        print(f"allreduce bench skipped: {why}")
        save(args.json, {"skipped": why})
        return 0
    if "star-switch-bmv2" in args.parts and not shutil.which("simple_switch_grpc"):
        print("star-switch-bmv2 skipped: simple_switch_grpc is not on PATH")
        args.parts.remove("star-switch-bmv2")
    workdir = REPO / "results" / "bench" / "allreduce"
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for part in args.parts:
        rows += part_star(args, part, workdir) if PARTS[part][0] == "star" else \
            part_fat(args, part, workdir)
    header, body = report_rows(rows)
    print(table(header, body))
    print("\ntime and bound against the part's baseline (star: parameter server; fat-tree: "
          "fewest workers):")
    rheader = ["part", "row", "baseline", "time ratio", "bound ratio"]
    print(table(rheader, ratio_rows(rows)))
    ts = targets(rows)
    for t in ts:
        print("target " + t.text())
    save(args.json, {"machine": machine(), "link_bw": args.link_bw,
                     "fat_link_bw": args.fat_link_bw, "fast_bw": args.fast_bw,
                     "elements": args.elements, "reps": args.reps,
                     "rows": rows, "table": markdown(header, body),
                     "ratios": markdown(rheader, ratio_rows(rows)),
                     "targets": [t.as_dict() for t in ts]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
