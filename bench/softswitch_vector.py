#!/usr/bin/env python3
"""softswitch's vector fast path against its scalar code, in process, on the aggregation program
at any elements per packet.

Two softswitch.Switch engines load the same BMv2 JSON (default p4src/build/agg.json; give a
build of another ELEMS with --json, e.g. `python3 p4src/build_tools.py compile DIR 352`), one
with the vector fast path (docs/SOFTSWITCH.md) and one with `vectorize=False`, and get the
same frames: W workers' CNAT8 contributions to S slots of one job, round after round, results
re-compressed to CNAT8 and multicast (bench/softswitch_pps.py's stream, handed to
Switch.process). Runs alternate between the engines; the medians and their ratio are
printed, and the outputs compared (equal byte for byte).

    .venv/bin/python bench/softswitch_vector.py [--json build/agg.json] [--packets 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import median  # noqa: E402
from softswitch import Switch  # noqa: E402
from softswitch.tables import Entry  # noqa: E402
from worker import wire  # noqa: E402
from worker.frames import Framer  # noqa: E402

JOB, GROUP = 1, 1


def elems_of(j: dict) -> int:
    ht = next(h for h in j["header_types"] if any(f[0] == "c0" for f in h["fields"]))
    return sum(1 for f in ht["fields"] if f[0].startswith("c"))


def fitted(sw: Switch, action: str, params: list, later: list) -> list:
    """`params`, then as many of `later` as the program's action takes: the parameters
    programs of older checkouts lacked (a job's session and rounding key, a port's bound)."""
    return params + later[:len(sw.action_params(action)) - len(params)]


def job_entry(sw: Switch, workers: int, slots: int, session: int) -> Entry:
    """The job's entry, in `session`, with a fixed rounding key."""
    action = "NatIngress.agg.job_root"
    return Entry((JOB,), action, fitted(sw, action, [0, slots, workers, GROUP,
                                                     wire.ENC_CNAT8, 255], [session, 0x5EED]))


def set_session(sw: Switch, workers: int, slots: int, session: int) -> None:
    """Moves the job to `session` (a stream's contributions carry theirs)."""
    sw.tables["NatIngress.agg.jobs"].modify(job_entry(sw, workers, slots, session))


def engine(j: dict, vectorize: bool, workers: int, slots: int,
           native: bool | None = False, session: int = 1) -> Switch:
    """One switch running the program with one job of `workers` children in `session`
    (Python tier by default: this bench compares its vector code with its scalar code)."""
    sw = Switch(seed=1, vectorize=vectorize, native=native)
    sw.load(j)
    sw.tables["NatIngress.agg.jobs"].insert(job_entry(sw, workers, slots, session))
    child = "NatIngress.agg.set_child"
    for w in range(workers):        # bound: a worker's share of 2^30, as the controller's
        sw.tables["NatIngress.agg.children"].insert(Entry(
            (JOB, w + 1), child, fitted(sw, child, [w, 1], [(1 << 30) // workers])))
    sw.pre.create(GROUP, [(w + 1, 0) for w in range(workers)])
    return sw


def stream(workers: int, slots: int, packets: int, elems: int, session: int, seed: int):
    rng = np.random.default_rng(seed)
    framer = Framer(("02:00:00:00:00:01", "10.0.0.1"), ("02:00:00:00:00:fe", "10.0.0.254"),
                    elems=elems)
    out = []
    for r in range(max(1, packets // workers)):
        slot, version = r % slots, (r // slots) % 2
        codes = rng.integers(0, 21, (workers, elems)).astype(np.uint8) \
            | (rng.integers(0, 2, (workers, elems)).astype(np.uint8) << 7)
        out += [(w + 1, framer.build(wire.MSG_CONTRIB, wire.ENC_CNAT8, JOB, session, slot,
                                     version, 120, 1, r, codes[w])) for w in range(workers)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=ROOT / "p4src/build/agg.json")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--packets", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    j = json.loads(args.json.read_text())
    elems = elems_of(j)
    engines = {"vector": engine(j, True, args.workers, args.slots),
               "scalar": engine(j, False, args.workers, args.slots)}
    print(f"{args.json}: {elems} elements per packet; {args.packets} CNAT8 contributions per "
          f"run, {args.workers} workers, {args.slots} slots; load {os.getloadavg()[0]:.2f}")
    rates = {k: [] for k in engines}
    outs = {}
    for run in range(args.runs):
        pkts = stream(args.workers, args.slots, args.packets, elems, run + 1, args.seed)
        for name, sw in engines.items():
            set_session(sw, args.workers, args.slots, run + 1)
            t = time.perf_counter()
            outs[name] = [sw.process(p, f) for p, f in pkts]
            rates[name].append(len(pkts) / (time.perf_counter() - t))
            if sw.stats["errors"]:
                raise SystemExit(f"{name}: {sw.stats}")
        results = sum(len(o) for o in outs["vector"])
        if results != sum(len(o) for o in outs["scalar"]) or not results:
            raise SystemExit("the engines sent different numbers of results (or none)")
        for a, b in zip(outs["vector"], outs["scalar"], strict=True):
            for (pa, fa), (pb, fb) in zip(a, b, strict=True):
                if pa != pb or fa != fb:
                    raise SystemExit(f"outputs differ:\n{fa.hex()}\n{fb.hex()}")
    for name in engines:
        r = median(rates[name])
        print(f"{name}: {r:,.0f} packets/s, {r * elems:,.0f} elements/s (median of {args.runs})")
    print(f"ratio vector/scalar: {median(rates['vector']) / median(rates['scalar']):.2f}x; "
          "outputs equal byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
