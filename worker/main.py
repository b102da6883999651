"""One worker of a job: train the digits MLP data-parallel, gradients summed by the switch.

    python worker/main.py --topology topo.json --host h1 --rank 0 --workers 4 --job 1

The host's MAC and IP, the service address and the job (its workers, window and
result encoding) come from the topology JSON that controller.topology writes. The
worker sends its contributions through a raw socket on the host's interface
(<host>-eth0, root) or through a softswitch UDP tunnel (--port udp:LOCAL>PEER), or,
with --baseline-ps, to the host-based parameter server over kernel UDP instead.
The job's session is the controller's: it installs it on the switches, which drop every
other, and writes it to a sessions file (sessions.json beside the topology file, or
--sessions), which the worker reads and follows across switch restarts; --session N
overrides it (it must be the one the switches hold). Workers of the host parameter server
agree on one from the topology file's modification time. Writes a JSON result (--result).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.topology import Topology, TopologyError, ifname  # noqa: E402
from protocol import encodings  # noqa: E402
from protocol.combos import sparse_problem  # noqa: E402
from protocol.sizes import BLOCK_HDR as SPARSE_HDR  # noqa: E402
from protocol.sizes import IP_UDP_AGG, MTU  # noqa: E402
from worker import wire  # noqa: E402
from worker.allreduce import (  # noqa: E402
    AllReduceClient,
    AllReduceError,
    JobParams,
    agree,  # noqa: E402
    job_params,
)
from worker.allreduce.client import (  # noqa: E402
    COALESCE,
    INITIAL_WINDOW,
    RTO_INITIAL,
    RTO_MAX,
    RTO_MIN,
    UPLINK_SHARE,
)
from worker.allreduce.restart import RestartFollower, SessionsView, WatchedPort  # noqa: E402
from worker.allreduce.sparse import SparseAllReduceClient, pads_empty  # noqa: E402
from worker.baseline import PS_PORT, parse_addr  # noqa: E402
from worker.compression.modes import MODES  # noqa: E402
from worker.compression.registry import describe  # noqa: E402
from worker.frames import Framer  # noqa: E402
from worker.impair import ImpairedPort  # noqa: E402
from worker.train import MODELS, TrainConfig, train  # noqa: E402
from worker.transport import DatagramPort, PortError, open_port  # noqa: E402

BMV2_HEADROOM = 512        # bytes BMv2 lets a program add to a packet
MAX_ELEMS = MTU - IP_UDP_AGG


class UsageError(Exception):
    """A command line or topology that does not describe a runnable worker."""


def session_from_file(path: str) -> int:
    """1..65535 from the file's modification time: equal for all workers of one run (the
    host parameter server's jobs, which no controller installs)."""
    return int(os.stat(path).st_mtime_ns // 1_000_000) % 65535 + 1


def worker_job(args, r: dict, encoding: int, framer) -> JobParams:
    """The client's view of the job (allreduce/job.py, the one construction every entry
    point uses)."""
    return job_params(r["topo"], args.job, r["session"], encoding, framer.elems,
                      window=r["window"], workers=r["workers"],
                      host_aggregator=bool(args.baseline_ps))


def growth_problem(topo: Topology, job, elems: int | None = None) -> str | None:
    """Why CNAT8 contributions cannot work for the job, or None.

    A switch that turns CNAT8 into FIXED32 (the results of a fixed32 job; the partial sums
    a leaf sends up a multi-switch tree) adds 3 bytes per element; BMv2 can add at most
    512 bytes to a packet (simple_switch aborts, softswitch drops and logs it)."""
    growth = 3 * (wire.ELEMS if elems is None else elems)
    if growth <= BMV2_HEADROOM:
        return None
    switches = {topo.attachment(w).node for w in job.workers}
    if job.encoding != "fixed32" and (len(switches) == 1 or job.partials == "cnat8"):
        return None
    where = ("its results are fixed32" if job.encoding == "fixed32" else
             f"its workers hang off {len(switches)} switches (partial sums are FIXED32)")
    return (f"{where}, and turning CNAT8 into FIXED32 grows a packet by {growth} bytes, more "
            f"than the {BMV2_HEADROOM} a BMv2 switch allows")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="compressors (--compressor):\n"
        + describe(), formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("job")
    g.add_argument("--topology", required=True, help="topology JSON (controller.topology)")
    g.add_argument("--host", required=True, help="this worker's host in the topology, e.g. h1")
    g.add_argument("--job", type=int, default=1, help="job id (default %(default)s)")
    g.add_argument("--rank", type=int, help="0..workers-1 (default: the host's position in "
                   "the job's worker list)")
    g.add_argument("--workers", type=int, help="workers in the job (default: the job's list "
                   "in the topology; must match the switch's job)")
    g.add_argument("--session", type=int, help="session id 1..65535: the one the controller "
                   "installed for the job (default: the sessions file's; with --baseline-ps, "
                   "from the topology file's modification time)")
    g.add_argument("--window", type=int, help="slots in flight (default: the job's slots)")
    g.add_argument("--sessions", metavar="FILE",
                   help="the controller's sessions file: the job's session, followed when the "
                   "controller moves it (a switch restart in watch mode) (default: "
                   "sessions.json beside the topology file, unless --session is given)")
    g = ap.add_argument_group("network")
    g.add_argument("--port", help="raw:IFNAME (default raw:<host>-eth0, needs root) or "
                   "udp:LHOST:LPORT>RHOST:RPORT, the far end of a softswitch tunnel port")
    g.add_argument("--encoding", choices=["auto", *sorted(encodings.CONTRIBUTIONS)],
                   default="auto",
                   help="contribution encoding, what this worker sends: " + "; ".join(
                       encodings.describe(e) for e in encodings.ALL if e.worker)
                   + "; results come in the job's result encoding. auto (default): the "
                   "encoding a sum8 job sums, else cnat8 where the switches can answer it, "
                   "else fixed32")
    g.add_argument("--elems", type=int, default=wire.ELEMS,
                   help="elements per packet: the switches' compiled profile's (default "
                   "%(default)s; 1456 for the wide profile, controller/profiles.py)")
    g.add_argument("--zero-checksum", action="store_true",
                   help="take a UDP checksum of 0 as none (RFC 768): the Tofino profile's "
                   "switches send results so (controller/profiles.py); otherwise every "
                   "result's checksum must add up")
    g.add_argument("--baseline-ps", metavar="HOST[:PORT]",
                   help=f"aggregate on the host parameter server (worker/baseline.py, port "
                   f"{PS_PORT} by default) over kernel UDP instead of the switch")
    g.add_argument("--ps-encoding", choices=["float32", "fixed32", "cnat8"], default=None,
                   help="with --baseline-ps: what to send (default float32: uncompressed; "
                   "cnat8 with --sparse)")
    g.add_argument("--sparse", action="store_true",
                   help="block-sparse allreduce (docs/PROTOCOL.md \"Sparse jobs\"): only the "
                   "blocks of the gradient holding a non-zero element travel; the job must be "
                   "sparse on the switch (topology job mode \"sparse\"), or --baseline-ps names "
                   "a host block aggregator (worker/block_aggregator.py)")
    g.add_argument("--timeout", type=float, default=10.0,
                   help="seconds without any result before the allreduce fails (default "
                   "%(default)s)")
    g.add_argument("--verify", choices=agree.MODES, default="auto",
                   help="after a call, the workers' digests of its result through the switch: "
                   "a worker whose result differs fails naming the call (2 round trips a "
                   "call; auto: calls of 200 round trips or more, where that is <= 1%%; "
                   "default %(default)s)")
    g.add_argument("--rto", type=float, default=RTO_INITIAL,
                   help="retransmission timeout in seconds until the first round trip is "
                   "measured; then it follows the measurements (RFC 6298) and doubles per "
                   "retransmission (default %(default)s)")
    g.add_argument("--rto-min", type=float, default=RTO_MIN,
                   help="floor of the retransmission timeout, s (default %(default)s)")
    g.add_argument("--initial-window", type=int, default=INITIAL_WINDOW,
                   help="slots in flight at first; grows while no timer expires, halves "
                   "when one does, up to --window (default %(default)s)")
    g.add_argument("--coalesce", type=float, default=None,
                   help="woken by a result with many slots in flight, wait until about this "
                   "share of them should have completed, so one pass handles them all (saves "
                   "CPU a software switch on the same cores needs); 0 handles each at once "
                   f"(default {COALESCE}; dense jobs)")
    g.add_argument("--uplink-share", type=float, default=None,
                   help="woken by a result while frames it sent still queue on its own link, "
                   "wait until about this share of them has left, so one pass handles the "
                   "results that arrive meanwhile (a link-bound worker then leaves the CPU to "
                   "the others); 0 handles each at once (default "
                   f"{UPLINK_SHARE}; dense jobs)")
    g.add_argument("--fixed-window", action="store_true",
                   help="keep all --window slots in flight from the start, no adaptation")
    g.add_argument("--impair-loss", type=float, default=0.0,
                   help="probability this worker drops a frame it sends or receives")
    g.add_argument("--impair-dup", type=float, default=0.0,
                   help="probability a frame is duplicated (both directions)")
    g.add_argument("--impair-reorder", type=float, default=0.0,
                   help="probability a frame is overtaken by later ones (both directions)")
    g.add_argument("--impair-seed", type=int, default=0, help="seed of the impairments")
    g = ap.add_argument_group("training")
    g.add_argument("--steps", type=int, default=100, help="SGD steps (default %(default)s)")
    g.add_argument("--batch", type=int, default=32,
                   help="examples per worker and step (default %(default)s)")
    g.add_argument("--lr", type=float, default=0.1, help="learning rate (default %(default)s)")
    g.add_argument("--model", choices=MODELS, default="mlp",
                   help="mlp (default), or embedding: a bag of (pixel, level) tokens whose "
                   "gradient is non-zero only in the embedding rows a batch touched")
    g.add_argument("--hidden", default="64",
                   help="hidden layer sizes, comma-separated (default %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="seed of data split, init and batches")
    g.add_argument("--compressor", default="none",
                   help="operator applied to the gradient before the contribution encoding, e.g. "
                   "topk:0.1 or ef:topk:0.01 (list below; default none)")
    g.add_argument("--mode", choices=MODES, default="layer",
                   help="apply the compressor per layer or to the entire model")
    g.add_argument("--eval-every", type=int, default=1,
                   help="steps between test-set evaluations (default %(default)s)")
    g = ap.add_argument_group("output")
    g.add_argument("--result", help="JSON result file (default result-<host>.json)")
    g.add_argument("--quiet", action="store_true", help="no per-step lines")
    return ap


def resolve(args, aggregating: bool = True) -> dict:
    """Everything the run needs from the command line and the topology, checked; a worker
    that does not aggregate through the switch or a host aggregator (a DDP rank on Gloo)
    needs no session."""
    topo = Topology.load(args.topology)
    host = topo.host(args.host)
    try:
        job = topo.job(args.job)
    except TopologyError:
        job = None
    if job is None and (args.workers is None or args.rank is None or args.window is None):
        raise UsageError(f"job {args.job} is not in {args.topology}: give --rank, --workers "
                         f"and --window")
    workers = args.workers if args.workers is not None else len(job.workers)
    if job is not None and workers != len(job.workers):
        raise UsageError(f"--workers {workers}, but job {args.job} in the topology has "
                         f"{len(job.workers)} workers ({', '.join(job.workers)})")
    if args.rank is not None:
        rank = args.rank
    elif args.host in job.workers:
        rank = job.workers.index(args.host)
    else:
        raise UsageError(f"{args.host} is not a worker of job {args.job} "
                         f"({', '.join(job.workers)}); give --rank")
    if not 0 <= rank < workers:
        raise UsageError(f"rank {rank} outside 0..{workers - 1}")
    if not (args.rto > 0 and args.rto_min > 0 and args.initial_window >= 1):
        raise UsageError("--rto and --rto-min must be > 0 s and --initial-window >= 1")
    pacing = {"--coalesce": args.coalesce, "--uplink-share": args.uplink_share}
    for option, value in pacing.items():
        if value is not None and not 0 <= value <= 1:
            raise UsageError(f"{option} must be within 0..1, got {value}")
    if not 1 <= args.elems <= MAX_ELEMS:
        raise UsageError(f"--elems must be within 1..{MAX_ELEMS} (a CNAT8 packet in a "
                         f"1500-byte MTU), got {args.elems}")
    encoding = args.encoding
    grows = job is not None and growth_problem(topo, job, args.elems)
    fixed_fits = IP_UDP_AGG + 4 * args.elems <= MTU
    if encoding == "auto" and job is not None and job.encoding == "sum8":
        encoding = encodings.summed_into("sum8")[0].name
    if encoding == "auto":
        encoding = "cnat8" if not grows or not fixed_fits else "fixed32"
    if args.sparse and (why := sparse_problem(encodings.BY_NAME[encoding])):
        raise UsageError(f"--encoding {encoding}: {why}")
    if encoding == "cnat8" and grows:
        raise UsageError(f"--encoding cnat8 cannot work for job {job.id}: {grows}; use "
                         + ("--encoding fixed32, or " if fixed_fits else "")
                         + "a single-switch job with enc=cnat8")
    if encoding == "fixed32" and not fixed_fits and not args.baseline_ps:
        raise UsageError(f"--encoding fixed32: {args.elems} int32 values per packet do not "
                         f"fit a {MTU}-byte MTU (at most {(MTU - IP_UDP_AGG) // 4})")
    window = args.window if args.window is not None else job.slots
    if getattr(job, "mode", "dense") == "sparse":
        args.sparse = True          # the switch holds the job in sparse mode
    given = [option for option, value in pacing.items() if value is not None]
    if args.sparse and given:
        raise UsageError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to "
                         "dense jobs: a sparse job's client handles each result as it comes")
    args.coalesce = COALESCE if args.coalesce is None else args.coalesce
    args.uplink_share = UPLINK_SHARE if args.uplink_share is None else args.uplink_share
    sparse_bytes = IP_UDP_AGG + SPARSE_HDR + (4 if encoding == "fixed32" else 1) * args.elems
    if args.sparse and not args.baseline_ps and sparse_bytes > MTU:
        raise UsageError(f"--sparse with --elems {args.elems}: a sparse {encoding} packet is "
                         f"{sparse_bytes} bytes of IPv4 (its block header adds {SPARSE_HDR}), "
                         f"beyond a {MTU}-byte MTU; sparse jobs take the default profile")
    view = sessions_view(args) if aggregating else None
    if not aggregating:
        session = None
    elif view is not None:
        session = view.session
    elif args.session is not None:
        session = args.session
    elif args.baseline_ps:
        session = session_from_file(args.topology)
    else:
        raise UsageError(f"no session for job {args.job}: the controller writes the jobs' "
                         f"sessions to sessions.json beside the topology file when it programs "
                         f"the switches (controller/main.py program --topology "
                         f"{args.topology}); give --sessions FILE or --session N")
    if session is not None and not 1 <= session <= 0xFFFF:
        raise UsageError(f"--session must be within 1..65535, got {session}")
    return {"topo": topo, "host": host, "job": job, "rank": rank, "workers": workers,
            "window": window, "session": session, "encoding": encoding, "sessions": view}


def sessions_view(args) -> SessionsView | None:
    """The controller's sessions file the worker follows, if any (see --sessions)."""
    path = args.sessions
    if path is None and args.session is None and not args.baseline_ps:
        beside = os.path.join(os.path.dirname(os.path.abspath(args.topology)), "sessions.json")
        path = beside if os.path.exists(beside) else None
    if path is None:
        return None
    if not os.path.exists(path):
        raise UsageError(f"no sessions file {path}: the controller writes it when it programs "
                         f"the switches")
    try:
        return SessionsView(path, args.job)
    except ValueError as e:
        raise UsageError(str(e)) from None


def open_transport(args, r: dict):
    """(port, framer, encoding, what) for the switch or the parameter server."""
    topo, host = r["topo"], r["host"]
    if args.baseline_ps:
        ps = parse_addr(args.baseline_ps)
        bind = "127.0.0.1" if ps[0].startswith("127.") else host.ip
        enc = args.ps_encoding or ("cnat8" if args.sparse else "float32")
        what = "block aggregator" if args.sparse else "parameter server"
        return (DatagramPort((bind, 0), ps), Framer(), wire.ENCODING_BY_NAME[enc],
                f"{what} {ps[0]}:{ps[1]}")
    spec = args.port or f"raw:{ifname(host.name, 0)}"
    port = open_port(spec, quiet_ip=host.ip)
    framer = Framer((host.mac, host.ip), (topo.service_mac, topo.service_ip), elems=args.elems,
                    zero_checksum=args.zero_checksum)
    return port, framer, wire.ENCODING_BY_NAME[r["encoding"]], f"switch via {spec}"


def pad_empty(args, r: dict) -> bool:
    """A sparse job on a switch whose result would grow an EMPTY packet more than BMv2
    allows (FIXED32 results; any on the wide profile): its EMPTY data packets bring padding
    to hold the sum (docs/PROTOCOL.md "Sparse jobs")."""
    return bool(args.sparse and not args.baseline_ps and r["job"] is not None
                and pads_empty(wire.ENCODING_BY_NAME[r["job"].encoding], args.elems))


def make_client(args, r: dict, port, framer, job: JobParams, say=None):
    """The dense or the block-sparse (--sparse) client, with the pacing options given."""
    common = dict(seed=args.seed, rank=r["rank"], rto=args.rto, rto_min=args.rto_min,
                  rto_max=max(args.rto, args.rto_min, RTO_MAX),
                  initial_window=r["window"] if args.fixed_window else args.initial_window,
                  adaptive_window=not args.fixed_window, timeout=args.timeout)
    if args.sparse:
        return SparseAllReduceClient(port, framer, job, pad_empty=pad_empty(args, r), **common)
    progress = None if say is None else \
        lambda done, total: say(f"allreduce {done}/{total} chunks")
    return AllReduceClient(port, framer, job, **common, coalesce=args.coalesce,
                           uplink_share=args.uplink_share, progress=progress,
                           verify=args.verify)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        r = resolve(args)
        cfg = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr,
                          hidden=tuple(int(h) for h in args.hidden.split(",") if h.strip()),
                          seed=args.seed, compressor=args.compressor, mode=args.mode,
                          eval_every=args.eval_every, model=args.model)
        if args.sparse and args.ps_encoding == "float32":
            raise UsageError("--sparse sums integers (fixed32 or cnat8), not float32")
        port, framer, encoding, what = open_transport(args, r)
    except (TopologyError, UsageError, PortError, ValueError) as e:
        print(f"worker: {e}", file=sys.stderr)
        return 2
    name = args.host
    say = (lambda text: None) if args.quiet else (
        lambda text: print(f"[{name} rank {r['rank']}] {text}", flush=True))
    view = r["sessions"]
    if view is not None:
        port = WatchedPort(port, view)
    if args.impair_loss or args.impair_dup or args.impair_reorder:
        port = ImpairedPort(port, args.impair_loss, args.impair_dup, args.impair_reorder,
                            seed=args.impair_seed * 1000 + r["rank"])
    job = worker_job(args, r, encoding, framer)
    client = make_client(args, r, port, framer, job, say)
    allreduce, follower = client.allreduce, None
    if view is not None:
        follower = RestartFollower(client, view, r["rank"], log=say)
        allreduce = follower.allreduce
    say(f"job {args.job} session {r['session']}: {r['workers']} workers, window "
        f"{r['window']}, {wire.ENCODINGS[encoding]} to the {what}"
        + (f"; following {view.path}" if view is not None else ""))
    result = {"host": name, "job": args.job, "session": r["session"], "rank": r["rank"],
              "aggregation": "ps" if args.baseline_ps else "switch",
              "sparse": args.sparse,
              "encoding": wire.ENCODINGS[encoding],
              "result_encoding": (r["job"].encoding.upper() if r["job"] and not args.baseline_ps
                                  else None),
              "window": r["window"], "started": time.time()}
    status = 0
    try:
        result.update(train(allreduce, r["rank"], r["workers"], cfg, say,
                            comm_stats=lambda: client.last.as_dict()))
    except AllReduceError as e:
        print(f"worker {name}: {e}", file=sys.stderr)
        result["error"] = str(e)
        status = 1
    finally:
        port.close()
    if result["result_encoding"] is None and getattr(client, "result_encoding", None) is not None:
        result["result_encoding"] = wire.ENCODINGS[client.result_encoding]   # what came back
    result["comm"] = client.stats.as_dict()
    if follower is not None:
        result["restarts_followed"] = follower.sessions - 1
        result["session_final"] = client.job.session
    result["pacing"] = client.pacing()
    if isinstance(port, ImpairedPort):
        result["impairment"] = vars(port.stats)
    say(client.stats.summary())
    if status == 0:
        say(f"final test accuracy {result['final_test_accuracy']:.4f}")
    out = args.result or f"result-{name}.json"
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
