"""Runs inside an emulated host: timed allreduce calls of one tensor, results as JSON.

    python bench/host_probe.py --topology T --host h1 --job 1 --encoding cnat8 \
        --elements 1000000 --reps 3 --sync DIR --out h1.json
    python bench/host_probe.py ... --ps 10.0.0.5 --rank 0 --workers 4   # parameter server
    python bench/host_probe.py ... --gloo 10.0.0.1:29600 --rank 0 --workers 4  # Gloo's ring
    python bench/host_probe.py ... --sparse --density 0.1 --placement random  # sparse job

One warm-up call first (a window's worth of chunks), so every worker has started, the
timer has round-trip samples and the window has opened before anything is timed. With
--sync the probe then writes DIR/ready-<host> and waits for DIR/go: the bench reads the
switches' counters in between, so they cover the timed calls and nothing else, and all
workers start the timed calls together. The record keeps a digest of the last call's result
(every rank must hold the same) and its largest error against the exact mean of all ranks'
tensors, relative to the mean's largest magnitude.

With --gloo the calls are torch.distributed's Gloo allreduce (a ring over TCP through the
switches, which only route it), the rendezvous at MASTER as the DDP workers' is
(mininet/torch_workers.py), on the host's interface.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np

from worker import main as worker_main
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError
from worker.allreduce.client import RTO_INITIAL, RTO_MAX, RTO_MIN


def gradient(rank: int, size: int, seed: int = 11) -> np.ndarray:
    """Gaussian values over many binades, as gradients have; one tensor per rank."""
    g = np.random.default_rng([seed, rank])
    return (g.standard_normal(size) * 2.0 ** g.integers(-12, 2, size)).astype(np.float32)


def check(record: dict, out: np.ndarray, workers: int, size: int, rank: int,
          error: bool = True) -> None:
    """The last result's digest and (rank 0, with `error`) its error against the exact mean
    of every rank's dense tensor."""
    record["result_sha256"] = hashlib.sha256(np.ascontiguousarray(out, np.float32)).hexdigest()
    if rank != 0 or not error:
        return
    exact = sum(gradient(k, size).astype(np.float64) for k in range(workers)) / workers
    scale = float(np.abs(exact).max()) or 1.0
    record["max_rel_err"] = float(np.abs(out.astype(np.float64) - exact).max()) / scale


def gloo_main(args) -> int:
    """Timed calls of Gloo's allreduce of the same tensor (sum, then / workers: the mean)."""
    import datetime

    from controller.topology import ifname
    os.environ["GLOO_SOCKET_IFNAME"] = ifname(args.host, 0)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    x = gradient(args.rank, args.elements)
    record = {"host": args.host, "rank": args.rank, "workers": args.workers,
              "to": f"Gloo ring (rendezvous {args.gloo})", "encoding": "FLOAT32",
              "elements": args.elements, "calls": [], "error": None}
    try:
        dist.init_process_group("gloo", init_method=f"tcp://{args.gloo}", rank=args.rank,
                                world_size=args.workers,
                                timeout=datetime.timedelta(seconds=args.timeout))
        dist.all_reduce(torch.from_numpy(x[:args.warmup or 64 * 168].copy()))
        if args.sync:
            (args.sync / f"ready-{args.host}").touch()
            wait_for(args.sync / "go", args.timeout)
        for _ in range(args.reps):
            t = torch.from_numpy(x.copy())
            t0 = time.monotonic()
            dist.all_reduce(t)
            record["calls"].append({"seconds": time.monotonic() - t0, "retransmissions": 0})
        check(record, t.numpy() / np.float32(args.workers), args.workers, args.elements, args.rank)
        dist.destroy_process_group()
    except (RuntimeError, AllReduceError) as e:
        record["error"] = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"{args.host}: {'error: ' + record['error'] if record['error'] else 'ok'} "
          f"{[round(c['seconds'], 3) for c in record['calls']]}", flush=True)
    return 1 if record["error"] else 0


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
    ap.add_argument("--gloo", metavar="MASTER",
                    help="ip:port of the rendezvous: Gloo's allreduce instead of the switch")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--elems", type=int,
                    help=f"elements per packet: the switches' profile's (default {wire.ELEMS})")
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
    if args.gloo:
        return gloo_main(args)

    wargv = ["--topology", args.topology, "--host", args.host, "--job", str(args.job),
             "--session", str(args.session), "--timeout", str(args.timeout)]
    if args.sparse:
        wargv.append("--sparse")
    if args.ps:
        wargv += ["--baseline-ps", args.ps, "--ps-encoding", args.encoding, "--rank",
                  str(args.rank), "--workers", str(args.workers), "--window", str(args.window)]
    else:
        wargv += ["--encoding", args.encoding]
        # only when given: a baseline checkout's worker has no --elems (bench/speed_targets.py)
        wargv += ["--elems", str(args.elems)] if args.elems is not None else []
    wargs = worker_main.build_parser().parse_args(wargv)
    r = worker_main.resolve(wargs)
    port, framer, encoding, what = worker_main.open_transport(wargs, r)
    # worker/main.py's one construction of the job (named job_params in older checkouts,
    # which bench/speed_targets.py also runs this probe on)
    make_job = getattr(worker_main, "worker_job", None) or worker_main.job_params
    job = make_job(wargs, r, encoding, framer)
    # The worker's defaults (worker/main.py): the client as a training job runs it.
    if args.sparse:
        # imported here: bench/speed_targets.py runs this probe on checkouts without it
        from worker.allreduce.sparse import SparseAllReduceClient
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
            t, c = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
            out = client.allreduce(x)
            dt, c2 = time.monotonic() - t, resource.getrusage(resource.RUSAGE_SELF)
            record["calls"].append({"seconds": dt, "cpu_s": c2.ru_utime - c.ru_utime
                                    + c2.ru_stime - c.ru_stime,
                                    "sys_s": c2.ru_stime - c.ru_stime, **client.last.as_dict()})
        if args.reps:
            check(record, out, r["workers"], args.elements, r["rank"],
                  error=args.density is None)      # a sparsified tensor is not gradient()
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
