"""Runs inside an emulated host: timed allreduce calls of one tensor, results as JSON.

    python bench/host_probe.py --topology T --host h1 --job 1 --encoding cnat8 \
        --elements 1000000 --reps 3 --sync DIR --out h1.json
    python bench/host_probe.py ... --ps 10.0.0.5 --rank 0 --workers 4   # parameter server
    python bench/host_probe.py ... --sparse --density 0.1 --placement random  # sparse job

One warm-up call first (a window's worth of chunks), so every worker has started, the
timer has round-trip samples and the window has opened before anything is timed. With
--sync the probe then writes DIR/ready-<host> and waits for DIR/go: the bench reads the
switches' counters in between, so they cover the timed calls and nothing else, and all
workers start the timed calls together.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np

from worker import main as worker_main
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError
from worker.allreduce.client import RTO_INITIAL, RTO_MAX, RTO_MIN
from worker.allreduce.sparse import SparseAllReduceClient


def gradient(rank: int, size: int, seed: int = 11) -> np.ndarray:
    """Gaussian values over many binades, as gradients have; one tensor per rank."""
    g = np.random.default_rng([seed, rank])
    return (g.standard_normal(size) * 2.0 ** g.integers(-12, 2, size)).astype(np.float32)


def sparse_mask(rank: int, blocks: int, density: float, placement: str,
                seed: int = 11) -> np.ndarray:
    """Which of `blocks` blocks this rank holds non-zero: round(density * blocks) of them
    (at least one). random: each rank draws its own, independently (the union over n ranks
    is about 1 - (1 - density)^n of the blocks); clustered: every rank holds the same
    contiguous run, at an offset all ranks draw alike (the union is `density`)."""
    k = max(1, int(round(density * blocks)))
    keep = np.zeros(blocks, bool)
    if placement == "random":
        keep[np.random.default_rng([seed, rank, 7]).choice(blocks, k, replace=False)] = True
    elif placement == "clustered":
        start = int(np.random.default_rng([seed, 7]).integers(0, blocks - k + 1))
        keep[start:start + k] = True
    else:
        raise ValueError(f"unknown placement {placement!r}")
    return keep


def wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AllReduceError(f"no {path.name} from the bench within {timeout:.0f} s")
        time.sleep(0.005)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--job", type=int, default=1)
    ap.add_argument("--session", type=int, required=True)
    ap.add_argument("--encoding", choices=["cnat8", "fixed32", "float32"], default="cnat8")
    ap.add_argument("--elements", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=None,
                    help="elements of the warm-up call (default: one window of chunks)")
    ap.add_argument("--ps", help="the parameter server's address (host parameter server)")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--sync", type=Path, help="folder of the ready/go handshake")
    ap.add_argument("--sparse", action="store_true",
                    help="the block-sparse client (a sparse job, or with --ps the host block "
                    "aggregator)")
    ap.add_argument("--density", type=float, default=None,
                    help="fraction of blocks (of ELEMS elements) holding non-zero values; the "
                    "rest are zero (default: all)")
    ap.add_argument("--placement", choices=["random", "clustered"], default="random")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)

    wargv = ["--topology", args.topology, "--host", args.host, "--job", str(args.job),
             "--session", str(args.session), "--timeout", str(args.timeout)]
    if args.sparse:
        wargv.append("--sparse")
    if args.ps:
        wargv += ["--baseline-ps", args.ps, "--ps-encoding", args.encoding, "--rank",
                  str(args.rank), "--workers", str(args.workers), "--window", str(args.window)]
    else:
        wargv += ["--encoding", args.encoding]
    wargs = worker_main.build_parser().parse_args(wargv)
    r = worker_main.resolve(wargs)
    port, framer, encoding, what = worker_main.open_transport(wargs, r)
    job = worker_main.job_params(wargs, r, encoding, framer)
    # The worker's defaults (worker/main.py): the client as a training job runs it.
    if wargs.sparse:
        client = SparseAllReduceClient(port, framer, job, seed=r["rank"], rto=RTO_INITIAL,
                                       rto_min=RTO_MIN, rto_max=RTO_MAX, timeout=args.timeout,
                                       pad_empty=worker_main.pad_empty(wargs, r))
    else:
        client = AllReduceClient(port, framer, job, seed=r["rank"], rto=RTO_INITIAL,
                                 rto_min=RTO_MIN, rto_max=RTO_MAX, timeout=args.timeout)
    x = gradient(r["rank"], args.elements)
    if args.density is not None:
        blocks = -(-args.elements // framer.elems)
        keep = sparse_mask(r["rank"], blocks, args.density, args.placement)
        x[~np.repeat(keep, framer.elems)[:x.size]] = 0
    warm = args.warmup if args.warmup is not None else r["window"] * framer.elems
    record = {"host": args.host, "rank": r["rank"], "workers": r["workers"], "to": what,
              "encoding": wire.ENCODINGS[encoding], "elements": args.elements, "calls": [],
              "error": None}
    try:
        if warm:
            client.allreduce(x[:warm])
        if args.sync:
            (args.sync / f"ready-{args.host}").touch()
            wait_for(args.sync / "go", args.timeout)
        for _ in range(args.reps):
            t = time.monotonic()
            client.allreduce(x)
            dt = time.monotonic() - t
            record["calls"].append({"seconds": dt, **client.last.as_dict()})
    except AllReduceError as e:
        record["error"] = str(e)
    finally:
        port.close()
    record["pacing"] = client.pacing()
    args.out.write_text(json.dumps(record, indent=1))
    print(f"{args.host}: {'error: ' + record['error'] if record['error'] else 'ok'} "
          f"{[round(c['seconds'], 3) for c in record['calls']]}", flush=True)
    return 1 if record["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
