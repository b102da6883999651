#!/usr/bin/env python3
"""The 4-bit encodings side by side with int32 and C_nat INA: allreduce speed and bytes per
element, on softswitch (in process) and on BMv2 (simple_switch_grpc in a network namespace,
root), through the data-plane fabric the tests use (harness/fabric.py, harness/netns.py).

    sudo .venv/bin/python bench/fourbit.py [--elements 134922] [--reps 3] [--targets soft bmv2]
        [--profile default|wide4]

4 workers (h1..h4 under one switch), a window of 64 slots, one warm-up call, then --reps
timed calls of a gradient-sized tensor (default: the MNIST-1D CNN's 134,922 parameters);
a call's time is the slowest worker's, the figure the median. *steps/s*: calls per second
(the communication of one DDP step with one bucket, no compute); *elements/s*: elements per
worker per second. *bytes/element up, down*: frame bytes (Ethernet header on) each worker
sent and received per element of its tensor, priming rounds included. --profile wide4
(1024 elements per packet) runs the encodings that profile has (CNAT8 both ways, NAT4, UQ4:
no FIXED32).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import OUT, markdown, save, say, table

from controller.profiles import PROFILES
from controller.topology import JobSpec
from harness.fabric import FabricPort
from harness.workers import run_workers
from worker import wire
from worker.allreduce import AllReduceClient, job_params
from worker.allreduce.job import JOB_ENCODINGS
from worker.frames import Framer

HOSTS = ("h1", "h2", "h3", "h4")
METHODS = [("int32 INA", "fixed32"), ("C_nat INA", "cnat8"),
           ("natural dithering INA (NAT4)", "nat4"), ("uniform THC INA (UQ4)", "uq4")]


def fabric_of(target: str, workdir: Path, build: Path):
    if target == "soft":
        from harness.fabric import SoftFabric
        return SoftFabric(build=build)
    from harness.netns import Bmv2Fabric
    return Bmv2Fabric(workdir, build=build)


def measure(fabric, job_id: int, encoding: str, elements: int, reps: int,
            elems: int = wire.ELEMS) -> dict:
    result, partials = JOB_ENCODINGS[encoding]
    topo = fabric.program([JobSpec(job_id, HOSTS, slots=64, encoding=result,
                                   partials=partials)])
    session = fabric.session()
    job = job_params(topo, job_id, session, wire.ENCODING_BY_NAME[encoding], elems)

    def make(rank):
        h = topo.host(HOSTS[rank])
        framer = Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip), elems=elems)
        return AllReduceClient(FabricPort(fabric, HOSTS[rank]), framer, job, seed=rank,
                               timeout=120.0)
    rng = np.random.default_rng(job_id)
    tensors = [[(rng.standard_normal(elements) * 1e-2).astype(np.float32)
                for _ in range(reps + 1)] for _ in HOSTS]
    spans = [[] for _ in HOSTS]
    made = []

    def timed(rank):
        made.append(c := _Timed(make(rank), spans[rank]))
        return c
    _, _, errors = run_workers(timed, tensors, calls=reps + 1, join_timeout=1800)
    if any(errors):
        raise RuntimeError(f"{encoding}: {errors}")
    # a call's time: from the first worker's start to the last worker's end
    times = [max(sp[k][1] for sp in spans) - min(sp[k][0] for sp in spans)
             for k in range(reps + 1)]
    stats = [c.client.stats for c in made]
    calls = reps + 1
    up = np.mean([s.bytes_sent for s in stats]) / (elements * calls)
    down = np.mean([s.bytes_received for s in stats]) / (elements * calls)
    t = float(np.median(times[1:]))
    fabric.quiet(HOSTS)
    return {"seconds": t, "steps_per_s": 1 / t, "elements_per_s": elements / t,
            "up": float(up), "down": float(down)}


class _Timed:
    """A client that records when each of its calls started and ended."""

    def __init__(self, client, spans):
        self.client, self.spans = client, spans

    def allreduce(self, tensor):
        t = time.monotonic()
        out = self.client.allreduce(tensor)
        self.spans.append((t, time.monotonic()))
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=134_922)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--targets", nargs="*", default=["soft", "bmv2"])
    ap.add_argument("--profile", choices=("default", "wide4"), default="default",
                    help="compiled profile (controller/profiles.py): default, 168 elements "
                         "per packet, or wide4, 1024 (no int32 INA there)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    prof = PROFILES[args.profile]
    if args.json is None:
        args.json = OUT / ("fourbit.json" if args.profile == "default"
                           else f"fourbit_{args.profile}.json")
    methods = [(n, e) for n, e in METHODS if prof.fits_mtu(4) or e != "fixed32"]
    rows, out = [], {}
    for target in args.targets:
        with tempfile.TemporaryDirectory() as tmp:
            fabric = fabric_of(target, Path(tmp), prof.build)
            try:
                for i, (name, enc) in enumerate(methods):
                    r = measure(fabric, 300 + i, enc, args.elements, args.reps, prof.elems)
                    out[f"{target}/{enc}"] = r
                    say(f"{target} {name}: {r['seconds']:.2f} s a call, up {r['up']:.3f} "
                        f"down {r['down']:.3f} bytes/element")
                    rows.append([target, name, r["up"], r["down"], r["steps_per_s"],
                                 r["elements_per_s"]])
            finally:
                fabric.close()
    header = ["switch", "method", "bytes/element up", "bytes/element down", "steps/s",
              "elements/s per worker"]
    print(table(header, rows))
    save(args.json, {"elements": args.elements, "reps": args.reps, "profile": args.profile,
                     "elems": prof.elems, "results": out,
                     "table": markdown(header, rows)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
