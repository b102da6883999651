"""One rank of a PyTorch DDP job: gradients through the P4 switch, or Gloo's allreduce.

    python worker/ddp/main.py --topology topo.json --host h1 --master 10.0.1.1:29500
    python worker/ddp/main.py --topology topo.json --host h1 --master 10.0.1.1:29500 \\
        --aggregation gloo

    torchrun --nnodes 4 --node-rank 0 --master-addr 10.0.1.1 worker/ddp/main.py \\
        --topology topo.json

torch.distributed (Gloo backend) does the rendezvous (a TCP store on --master, which rank 0
serves; or, launched by torchrun without --master, torchrun's env://: RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT), broadcasts rank 0's model and, with --aggregation gloo,
all-reduces the gradients itself. With --aggregation switch (default) a communication hook
sends each bucket through the worker's allreduce client (worker/ddp/hook.py); compressors
the switch cannot add go through a Gloo allgather. Host, job, session and switch options are
worker/main.py's; --host and --job may be left out: the host is the one whose IP is on this
machine, the job the one holding it (worker/ddp/attach.py), and under torchrun its RANK must
be the host's position in the job. Writes a JSON result (--result) with the per-step log;
exit code 1 when training failed.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file: the repository instead of this folder (whose module names are generic).
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parents[1]))

from controller.topology import Topology, TopologyError  # noqa: E402
from worker import wire  # noqa: E402
from worker.allreduce import AllReduceError  # noqa: E402
from worker.ddp.attach import AttachError, check_rank, find_host, find_job  # noqa: E402
from worker.impair import ImpairedPort  # noqa: E402
from worker.main import (  # noqa: E402
    UsageError,
    make_client,
    open_transport,
    resolve,
    worker_job,
)
from worker.main import build_parser as worker_parser  # noqa: E402
from worker.transport import PortError  # noqa: E402

MASTER_PORT = 29500
ENV_RENDEZVOUS = ("RANK", "WORLD_SIZE", "MASTER_ADDR")     # what torchrun sets


def build_parser():
    ap = worker_parser()
    ap.prog = "worker/ddp/main.py"
    ap.description = __doc__.split("\n\n")[0]
    ap.set_defaults(steps=300, lr=0.1, eval_every=10, job=None)
    host, job = ap._option_string_actions["--host"], ap._option_string_actions["--job"]
    host.required = False
    host.help = ("this rank's host in the topology, e.g. h1 (default: the host whose IP is "
                 "on this machine)")
    job.help = "job id (default: the job whose workers hold the host)"
    g = ap.add_argument_group("torch")
    g.add_argument("--aggregation", choices=("switch", "gloo"), default="switch",
                   help="switch: the hook sends gradients through the P4 switch (default); "
                   "gloo: DDP's own Gloo allreduce over TCP (the baseline)")
    g.add_argument("--master", metavar="HOST[:PORT]",
                   help=f"rendezvous: the TCP store rank 0 serves (default: torchrun's "
                   f"env:// where RANK, WORLD_SIZE and MASTER_ADDR are set, else the job's "
                   f"first worker's IP, port {MASTER_PORT})")
    g.add_argument("--ifname", help="the interface Gloo uses (sets GLOO_SOCKET_IFNAME; "
                   "default: GLOO_SOCKET_IFNAME, else the interface holding the host's IP)")
    g.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    g.add_argument("--amp-scale", type=float, default=0.0, metavar="S",
                   help="mixed precision: float16 forward (torch.autocast) and a GradScaler "
                   "starting at loss scale S, which skips steps whose mean gradient is not "
                   "finite (default 0: off)")
    g.add_argument("--gloo-timeout", type=float, default=60.0,
                   help="seconds a Gloo operation (rendezvous, broadcast, allreduce, "
                   "allgather) may wait for a peer (default %(default)s)")
    g.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: one core per worker)")
    g.add_argument("--bucket-mb", type=float,
                   help="DDP's bucket size in MB (default: worker/ddp/train.py's): smaller "
                   "buckets are ready sooner, so more of their communication overlaps the "
                   "backward pass")
    g.add_argument("--workload", choices=("mnist1d", "embedding", "charlm"), default="mnist1d",
                   help="mnist1d: a 1-D CNN on MNIST-1D (default); embedding: a bag-of-tokens "
                   "classifier with an embedding table on scikit-learn's digits, whose "
                   "gradient is sparse (--sparse with a sparse job sends its non-zero blocks); "
                   "charlm: a character-level transformer language model on the Python "
                   "standard library's sources, judged by validation loss")
    g.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="reduce each bucket on the autograd thread instead of the rank's "
                   "communication thread (the same bits, no overlap)")
    return ap


def under_torchrun(args) -> bool:
    """Launched by torchrun (its env:// variables are set) and no --master given."""
    return args.master is None and all(os.environ.get(k) for k in ENV_RENDEZVOUS)


def place(args) -> str | None:
    """Fills in --host (the host whose IP is on this machine), --job (the job holding it)
    and --port (a raw socket on the interface holding the host's IP) where not given;
    returns that interface, or None."""
    topo = Topology.load(args.topology)
    args.host, nic = find_host(topo, args.host, where=args.topology)
    if args.job is None:
        args.job = find_job(topo, args.host, where=args.topology) if topo.jobs else 1
    if args.port is None and nic is not None:
        args.port = f"raw:{nic}"
    return nic


def rank_names(r) -> tuple[str, ...]:
    """The job's workers in rank order (their hosts, where the topology holds the job)."""
    return (r["job"].workers if r["job"] is not None
            else tuple(f"rank {i}" for i in range(r["workers"])))


def fault_board(r, rank: int):
    """The job's fault board (worker/ddp/faults.py) on the store of the default group, and
    SIGTERM and SIGINT posting to it before the rank ends."""
    import signal

    import torch.distributed as dist

    from worker.ddp.faults import FaultBoard
    # The default group's store: torch has no public accessor, and a second store would need
    # a rendezvous of its own.
    board = FaultBoard(dist.distributed_c10d._get_default_store(), rank, rank_names(r))

    def stop(signum, _frame):
        board.post(f"stopped by {signal.Signals(signum).name}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    return board


def check_torchrun_rank(args, r) -> None:
    """torchrun's RANK and WORLD_SIZE against the host's position in the job."""
    names = rank_names(r)
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except ValueError:
        raise UsageError(f"RANK={os.environ['RANK']!r} and WORLD_SIZE="
                         f"{os.environ['WORLD_SIZE']!r}: expected integers") from None
    check_rank(args.host, args.job, names, r["rank"], rank, world)


def master_addr(args, r) -> tuple[str, int]:
    if under_torchrun(args):
        return os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT") or MASTER_PORT)
    if args.master:
        host, _, port = args.master.rpartition(":") if ":" in args.master else (
            args.master, "", str(MASTER_PORT))
        return host, int(port)
    job = r["job"]
    if job is None:
        raise UsageError("give --master HOST:PORT (the job is not in the topology)")
    return r["topo"].host(job.workers[0]).ip, MASTER_PORT


def iface_bytes(ifname: str | None) -> tuple[int, int] | None:
    """(tx, rx) bytes of an interface, for the bytes every path put on the wire."""
    if not ifname:
        return None
    base = Path("/sys/class/net", ifname, "statistics")
    try:
        return int((base / "tx_bytes").read_text()), int((base / "rx_bytes").read_text())
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torchrun = under_torchrun(args)
    try:
        nic = place(args)
        r = resolve(args, aggregating=args.aggregation == "switch")
        if torchrun:
            check_torchrun_rank(args, r)
        from worker.ddp.train import DDPConfig
        bucket = {} if args.bucket_mb is None else {"bucket_mb": args.bucket_mb}
        cfg = DDPConfig(steps=args.steps, batch=args.batch, lr=args.lr, momentum=args.momentum,
                        seed=args.seed, compressor=args.compressor, mode=args.mode,
                        eval_every=args.eval_every, overlap=args.overlap,
                        workload=args.workload, amp_scale=args.amp_scale, **bucket)
        master = master_addr(args, r)
        if args.gloo_timeout <= 0 or args.threads < 1:
            raise UsageError("--gloo-timeout must be > 0 s and --threads >= 1")
        switch = args.aggregation == "switch"
        port = framer = encoding = None
        if switch:
            port, framer, encoding, what = open_transport(args, r)
    except (TopologyError, UsageError, AttachError, PortError, ValueError) as e:
        print(f"worker: {e}", file=sys.stderr)
        return 2
    name, rank, workers = args.host, r["rank"], r["workers"]
    if args.ifname is None:
        args.ifname = os.environ.get("GLOO_SOCKET_IFNAME") or nic
    say = (lambda text: None) if args.quiet else (
        lambda text: print(f"[{name} rank {rank}] {text}", flush=True))
    if args.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    import torch
    import torch.distributed as dist

    from worker.ddp.train import train
    from worker.ddp.workload import load_data
    torch.set_num_threads(args.threads)
    client = None
    if switch:
        if args.impair_loss or args.impair_dup or args.impair_reorder:
            port = ImpairedPort(port, args.impair_loss, args.impair_dup, args.impair_reorder,
                                seed=args.impair_seed * 1000 + rank)
        job = worker_job(args, r, encoding, framer)
        client = make_client(args, r, port, framer, job)     # --sparse: the block client
        say(f"job {args.job} session {r['session']}: {workers} workers, window "
            f"{r['window']}, {wire.ENCODINGS[encoding]} to the {what}")
    result = {"host": name, "job": args.job, "session": r["session"], "rank": rank,
              "framework": "torch", "aggregation": args.aggregation,
              "encoding": wire.ENCODINGS[encoding] if switch else "FLOAT32",
              "result_encoding": (r["job"].encoding.upper()
                                  if switch and r["job"] and not args.baseline_ps else None),
              "window": r["window"], "master": f"{master[0]}:{master[1]}",
              "started": time.time()}
    status = 0
    data = load_data(cfg.workload)
    wire_before = iface_bytes(args.ifname)
    last = [client.stats.copy() if client else None, wire_before]

    def comm_stats() -> dict:
        """Per step: the allreduce client's counters and the interface's bytes."""
        out = {}
        if client:
            now = client.stats.copy()
            out, last[0] = now.since(last[0]).as_dict(), now
        wire_now = iface_bytes(args.ifname)
        if wire_now and last[1]:
            out["wire_tx"], out["wire_rx"] = (wire_now[0] - last[1][0],
                                              wire_now[1] - last[1][1])
        last[1] = wire_now
        return out

    faults = None
    try:
        say(f"rendezvous at {master[0]}:{master[1]} as rank {rank} of {workers}")
        timeout = datetime.timedelta(seconds=args.gloo_timeout)
        if torchrun:        # RANK and WORLD_SIZE, checked against the job's above
            dist.init_process_group("gloo", init_method="env://", timeout=timeout)
        else:
            dist.init_process_group("gloo", init_method=f"tcp://{master[0]}:{master[1]}",
                                    rank=rank, world_size=workers, timeout=timeout)
        group = dist.group.WORLD
        faults = fault_board(r, rank)
        if client:
            client.abort = faults.check     # another rank's fault ends this one's call
        result.update(train(group, cfg, allreduce=client.allreduce if client else None,
                            sparse=bool(client and args.sparse),
                            comm_stats=comm_stats, log=say, data=data, faults=faults))
    except (AllReduceError, RuntimeError) as e:
        # A hook's AllReduceError reaches here wrapped in backward()'s RuntimeError; a
        # peer that is gone shows as a Gloo error (connection closed, timeout).
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not isinstance(e, AllReduceError) and "allreduce of job" not in text:
            text = (f"torch.distributed (Gloo) failed: {text} -- a peer rank has likely "
                    f"stopped, or --master {master[0]}:{master[1]} is unreachable")
        print(f"worker {name}: {text}", file=sys.stderr, flush=True)
        result["error"] = text
        status = 1
    finally:
        if port is not None:
            port.close()
    wire_after = iface_bytes(args.ifname)
    if wire_before and wire_after:
        result["wire_bytes"] = {"tx": wire_after[0] - wire_before[0],
                                "rx": wire_after[1] - wire_before[1]}
    comm = client.stats.as_dict() if client else {}
    if not client:
        n = sum(p for p in [result.get("parameters", 0)]) * len(result.get("steps", []))
        comm = {"elements": n, "bytes_sent": result.get("wire_bytes", {}).get("tx", 0),
                "bytes_received": result.get("wire_bytes", {}).get("rx", 0),
                "retransmissions": 0}
    result["comm"] = comm
    if client:
        say(client.stats.summary())
    if status == 0:
        say(f"final test accuracy {result['final_test_accuracy']:.4f}")
    out = args.result or f"result-{name}.json"
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    if faults is not None:
        faults.leave()
    if status:
        if faults is not None and rank == 0:
            faults.linger()     # this process serves the store the others read the fault in
        # Gloo's teardown can wait on the peer that is gone: leave now, the result is out.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
