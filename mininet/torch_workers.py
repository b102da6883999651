"""PyTorch DDP workers on the emulated hosts (`mininet/run.py --framework torch`).

Each worker is worker/ddp/main.py in its host's namespace. torch.distributed's TCP store
runs in the first worker of each job (its IP, port 29500 + job), and Gloo binds the host's
interface, so the rendezvous, the model broadcast and, with --aggregation gloo, every
gradient travel as ordinary IPv4/TCP through the same P4 switches; with --aggregation switch
the gradients go through the switches' aggregation as the numpy workers' do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workers import WorkerGroup, WorkerProc, host_env

from controller.profiles import profile
from controller.topology import ifname

REPO = Path(__file__).resolve().parent.parent
MAIN = REPO / "worker" / "ddp" / "main.py"
MASTER_PORT = 29500


def worker_args(args, encoding: str, topo_path: Path, topo, job) -> list[str]:
    """The options every rank of `job` shares."""
    master = f"{topo.host(job.workers[0]).ip}:{MASTER_PORT + job.id}"
    common = ["--topology", str(topo_path), "--steps", str(args.steps), "--seed",
              str(args.seed), "--timeout", str(args.timeout), "--compressor", args.compressor,
              "--rto", str(args.rto), "--mode", args.mode, "--eval-every",
              str(args.eval_every), "--master", master, "--gloo-timeout",
              f"{gloo_timeout(args.bw):.0f}"]
    if args.model in ("embedding", "charlm"):
        common += ["--workload", args.model]
    if args.batch is not None:
        common += ["--batch", str(args.batch)]
    if args.bucket_mb is not None:
        common += ["--bucket-mb", str(args.bucket_mb)]
    if args.aggregation == "gloo":
        return [*common, "--aggregation", "gloo"]
    prof = profile(args.profile or "default")
    sparse = ["--sparse"] if args.sparse else []
    overlap = ["--no-overlap"] if args.no_overlap else []
    checksum = ["--zero-checksum"] if prof.zero_checksum else []
    return [*common, "--aggregation", "switch", "--encoding", encoding, "--elems",
            str(prof.elems), *sparse, *overlap, *checksum]


class TorchWorkerGroup(WorkerGroup):
    """WorkerGroup whose workers are worker/ddp/main.py, each on its host's interface."""

    def start(self, node, host: str, job: int, rank: int, out: Path, args: list[str]) -> None:
        log = out / "logs" / f"{host}.log"
        result = out / "workers" / f"{host}.json"
        log.parent.mkdir(parents=True, exist_ok=True)
        result.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(MAIN), "--host", host, "--job", str(job), "--rank",
               str(rank), "--result", str(result), "--ifname", ifname(host, 0), *args]
        with open(log, "wb") as f:
            proc = node.popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO),
                              env=host_env())
        self.procs.append(WorkerProc(host, job, rank, log, result, proc))


def gloo_timeout(bw_mbit: float) -> float:
    """Seconds a Gloo operation may wait: the model broadcast and a ring allreduce move a
    few times the model's 4.3 Mbit over one link, slow on a slow link."""
    return 60 + 20 * 4.3 / bw_mbit


def budget(args) -> float:
    """Seconds the job may take: start-up (torch, data, rendezvous) and a software switch
    working through about 800 chunks per worker and step."""
    return 180 + gloo_timeout(args.bw) + args.steps * (15 + args.timeout / 10
                                                       + 8 * 4.3 / args.bw)
