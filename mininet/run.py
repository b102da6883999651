#!/usr/bin/env python3
"""Train across emulated hosts whose gradients are summed inside P4 switches.

Builds the topology (controller.topology), starts it in Mininet with one P4
switch process per switch (BMv2 where simple_switch_grpc is installed, else
the embedded target), programs the switches over P4Runtime, runs a worker per
host, and writes results/<run>/report.json with a plot. Needs root.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO)]

from controller import topology as topology_mod  # noqa: E402
from controller.p4info import Pipeline  # noqa: E402
from controller.program import program  # noqa: E402
from controller.session import ControllerError  # noqa: E402
from controller.topology import JobSpec, TopologyError  # noqa: E402

P4INFO = REPO / "p4src" / "build" / "agg.p4info.txt"
BMV2_JSON = REPO / "p4src" / "build" / "agg.json"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mininet/run.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python mininet/run.py                           # star, 4 workers, C_nat\n"
               "  python mininet/run.py --topo fat-tree           # k=4, 16 workers\n"
               "  python mininet/run.py --jobs 2 --loss 0.05      # two jobs, 5% loss\n"
               "  python mininet/run.py --aggregation ps          # host parameter server\n"
               "  python mininet/run.py --framework torch         # PyTorch DDP, switch hook\n"
               "  python mininet/run.py --framework torch --aggregation gloo  # Gloo allreduce\n")
    t = ap.add_argument_group("topology")
    t.add_argument("--topo", choices=("star", "leaf-spine", "fat-tree"), default="star")
    t.add_argument("--hosts", type=int, default=4, help="star: hosts (default 4)")
    t.add_argument("--k", type=int, default=4, help="fat-tree: k (default 4, 16 hosts)")
    t.add_argument("--leaves", type=int, default=2, help="leaf-spine: leaves (default 2)")
    t.add_argument("--spines", type=int, default=2, help="leaf-spine: spines (default 2)")
    t.add_argument("--hosts-per-leaf", type=int, default=2, help="leaf-spine (default 2)")
    t.add_argument("--bw", type=float, default=100.0, help="link bandwidth, Mbit/s (default 100)")
    t.add_argument("--loss", type=float, default=0.0,
                   help="drop probability on every link, applied by the switches (default 0)")
    t.add_argument("--switch", choices=("auto", "bmv2", "soft"), default="auto",
                   help="auto: BMv2 where simple_switch_grpc is on PATH, else softswitch")
    j = ap.add_argument_group("job")
    j.add_argument("--workers", type=int, default=None,
                   help="workers (default: every host, one fewer with --aggregation ps)")
    j.add_argument("--jobs", type=int, default=1, help="split the workers into N jobs (default 1)")
    j.add_argument("--aggregation", choices=("switch", "ps", "gloo"), default="switch",
                   help="switch: in-network (default); ps: host parameter server on the last "
                        "host; gloo (--framework torch): Gloo's TCP allreduce, routed by the "
                        "switches as plain IPv4")
    j.add_argument("--framework", choices=("numpy", "torch"), default="numpy",
                   help="numpy: the digits MLP (worker/main.py, default); torch: PyTorch DDP "
                        "on MNIST-1D (worker/ddp/main.py, docs/TORCH.md)")
    j.add_argument("--mode", choices=("layer", "model"), default="layer",
                   help="--framework torch: the compressor and reduction per layer (per DDP "
                        "bucket) or once per step on the entire model (default layer)")
    j.add_argument("--eval-every", type=int, default=5,
                   help="--framework torch: steps between test evaluations (default 5)")
    j.add_argument("--encoding", choices=("cnat8", "fixed32"), default="cnat8",
                   help="contributions: cnat8 = C_nat, 1 byte/element (default); fixed32")
    j.add_argument("--result-encoding", choices=("cnat8", "fixed32"), default=None,
                   help="results from the root switch (default: the contributions' encoding)")
    j.add_argument("--partials", choices=("fixed32", "cnat8"), default="fixed32",
                   help="what switches below the root send up: fixed32 (exact, default) or "
                        "cnat8 (re-compressed, one byte per element on every link)")
    j.add_argument("--window", type=int, default=64, help="slots per job (default 64)")
    j.add_argument("--compressor", default="none", help="worker-side operator before encoding")
    j.add_argument("--steps", type=int, default=None,
                   help="SGD steps (default 100; 30 with --framework torch)")
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--rto", type=float, default=0.5,
                   help="workers' first retransmission timeout, s (default 0.5)")
    j.add_argument("--timeout", type=float, default=20.0,
                   help="seconds without progress before a worker gives up (default 20)")
    o = ap.add_argument_group("output")
    o.add_argument("--out", type=Path, default=None,
                   help="output folder (default results/<time>-<topo>)")
    o.add_argument("--pcap", action="store_true", help="capture every switch port to out/pcap")
    o.add_argument("--cli", action="store_true",
                   help="open the Mininet CLI after the job (with --steps 0: instead of it)")
    return ap


def make_topology(args) -> topology_mod.Topology:
    opts = {"bw_mbit": args.bw, "loss": args.loss}
    if args.topo == "star":
        return topology_mod.star(hosts=args.hosts, **opts)
    if args.topo == "leaf-spine":
        return topology_mod.leaf_spine(leaves=args.leaves, spines=args.spines,
                                       hosts=args.hosts_per_leaf, **opts)
    return topology_mod.fat_tree(k=args.k, **opts)


def plan_jobs(args, topo) -> tuple[list[JobSpec], str | None]:
    """The jobs' worker lists, and the parameter server's host for --aggregation ps."""
    hosts = [h.name for h in topo.hosts]
    ps_host = hosts.pop() if args.aggregation == "ps" else None
    n = args.workers if args.workers is not None else len(hosts)
    if not 1 <= n <= len(hosts):
        raise TopologyError(f"--workers {n}: the topology has {len(hosts)} hosts for workers")
    if not 1 <= args.jobs <= n:
        raise TopologyError(f"--jobs {args.jobs}: needs 1..{n} (one worker at least per job)")
    chosen, per = hosts[:n], n // args.jobs
    result = args.result_encoding or args.encoding
    jobs = []
    for i in range(args.jobs):
        members = chosen[i * per:(i + 1) * per] if i < args.jobs - 1 else chosen[i * per:]
        jobs.append(JobSpec(i + 1, tuple(members), slots=args.window, encoding=result,
                            partials=args.partials))
    return jobs, ps_host


def worker_args(args, topo_path: Path, ps_host: str | None, topo) -> list[str]:
    common = ["--topology", str(topo_path), "--steps", str(args.steps), "--seed",
              str(args.seed), "--timeout", str(args.timeout), "--compressor", args.compressor,
              "--rto", str(args.rto)]
    if ps_host:
        return [*common, "--baseline-ps", topo.host(ps_host).ip, "--ps-encoding", "float32"]
    return [*common, "--encoding", args.encoding]


class Progress:
    """One line per job, rewritten in place on a terminal, every 10% otherwise."""

    def __init__(self, group, jobs):
        self.group, self.jobs = group, jobs
        self.tty = sys.stdout.isatty()
        self.shown: dict[int, int] = {}

    def __call__(self) -> None:
        parts = []
        for job in self.jobs:
            lead = min((w for w in self.group.procs if w.job == job.id), key=lambda w: w.rank)
            last = lead.last_step()
            if last is None:
                parts.append(f"job {job.id}: starting")
                continue
            step, steps, loss, acc = last
            acc_text = f" acc {acc:.3f}" if acc is not None else ""
            parts.append(f"job {job.id}: step {step}/{steps} loss {loss:.3f}{acc_text}")
            decile = 10 * step // max(1, steps)
            if not self.tty and self.shown.get(job.id) != decile:
                self.shown[job.id] = decile
                print("  " + parts[-1], flush=True)
        if self.tty:
            print("\r  " + " | ".join(parts) + "\033[K", end="", flush=True)

    def done(self) -> None:
        if self.tty:
            print()


def read_counters(topo) -> dict:
    from controller.session import Session
    from controller.stats import read_stats

    out = {}
    for s in topo.switches:
        try:
            with Session(s, (0, 2), 5.0) as session:
                st = read_stats(session)
            out[s.name] = {name: {str(i): v for i, v in c.items() if v[0]}
                           for name, c in st.counters.items()}
        except ControllerError as e:
            out[s.name] = {"error": str(e)}
    return out


def run(args) -> int:
    import emulation
    import report
    from mininet.cli import CLI
    from mininet.log import setLogLevel
    from p4switch import resolve_kind
    from workers import WorkerGroup

    setLogLevel("critical")   # tc warns that HTB quantum is big; harmless
    torch = args.framework == "torch"
    if args.steps is None:
        args.steps = 30 if torch else 100
    if args.aggregation == "gloo" and not torch:
        raise RuntimeError("--aggregation gloo needs --framework torch")
    kind = resolve_kind(args.switch)
    if args.aggregation == "ps" and args.topo == "star" and args.workers is None:
        args.hosts += 1   # the parameter server gets a host of its own
    topo = make_topology(args)
    jobs, ps_host = plan_jobs(args, topo)
    topo = topo.with_jobs(jobs if args.aggregation != "ps" else [])
    out = args.out or REPO / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.topo}"
    out.mkdir(parents=True, exist_ok=True)
    topo_path = out / "topology.json"
    topo.save(str(topo_path))
    pipeline = Pipeline.load(str(P4INFO), str(BMV2_JSON))
    print(f"natswitch: {args.topo}, {len(topo.switches)} switches ({kind}), "
          f"{sum(len(j.workers) for j in jobs)} workers in {len(jobs)} job(s), "
          f"{args.aggregation} aggregation, {args.encoding} up; output {out}", flush=True)

    group, ps_proc = WorkerGroup(), None
    if torch:
        import torch_workers
        group = torch_workers.TorchWorkerGroup()
    pcap = out / "pcap" if args.pcap else None
    with emulation.Emulation(topo, kind, out / "logs", pcap_dir=pcap) as emu:
        t0 = time.monotonic()
        failed = [(s.name, r) for s, r in program(topo, pipeline)
                  if isinstance(r, ControllerError)]
        if failed:
            for name, err in failed:
                print(f"error: programming {name}: {err}", file=sys.stderr)
            return 1
        print(f"switches programmed in {time.monotonic() - t0:.1f} s", flush=True)
        try:
            if ps_host:
                with open(out / "logs" / f"{ps_host}-ps.log", "wb") as log:
                    ps_proc = emu.host(ps_host).popen(
                        [sys.executable, str(REPO / "worker" / "baseline.py"),
                         "--workers", str(len(jobs[0].workers))],
                        stdout=log, stderr=log, cwd=str(REPO),
                        env=dict(os.environ, PYTHONPATH=str(REPO)))
            if args.steps > 0:
                wargs = worker_args(args, topo_path, ps_host, topo)
                for job in jobs:
                    if torch:
                        wargs = torch_workers.worker_args(args, topo_path, topo, job)
                    for rank, host in enumerate(job.workers):
                        group.start(emu.host(host), host, job.id, rank, out, wargs)
                progress = Progress(group, jobs)
                budget = 60 + args.steps * (2 + args.timeout / 10)
                if torch:
                    budget = torch_workers.budget(args)
                finished = group.wait(time.monotonic() + budget, on_tick=progress)
                progress.done()
                if not finished:
                    print(f"error: workers still running after {budget:.0f} s; stopping them",
                          file=sys.stderr)
            if args.cli:
                # Inside the CLI, Ctrl-C interrupts the command typed, as in Mininet.
                previous = signal.signal(signal.SIGINT, signal.default_int_handler)
                try:
                    CLI(emu.net)
                finally:
                    signal.signal(signal.SIGINT, previous)
            counters = read_counters(topo) if args.aggregation != "ps" else None
        finally:
            group.stop()
            if ps_proc is not None:
                ps_proc.terminate()
                ps_proc.wait()
    if args.steps <= 0:
        return 0
    results = group.results()
    summaries = [report.job_summary(j.id, [r for r in results if r.get("job") == j.id])
                 for j in jobs]
    print(report.table(summaries))
    for s in summaries:
        for e in s["errors"]:
            print(f"job {s['job']}: {e}", file=sys.stderr)
    run_info = {"topo": args.topo, "switch": kind, "aggregation": args.aggregation,
                "encoding": args.encoding, "bw_mbit": args.bw, "loss": args.loss,
                "steps": args.steps, "compressor": args.compressor,
                "framework": args.framework, "mode": args.mode if torch else None}
    path = report.write(out, run_info, summaries, counters)
    if report.plot(summaries, out / "accuracy.png", f"{args.topo}, {kind} switches"):
        print(f"plot: {out / 'accuracy.png'}")
    if report.plot_time(summaries, out / "accuracy_time.png", f"{args.topo}, {kind} switches"):
        print(f"plot: {out / 'accuracy_time.png'}")
    print(f"report: {path}")
    return 0 if all(s["ok"] for s in summaries) else 1


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM: unwinds through every teardown; the exit code says which."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def on_signal(signum, frame):
    # One signal starts the teardown; a second must not cut it short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped(signum)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if os.geteuid() != 0:
        print("mininet/run.py needs root (Mininet creates network namespaces)", file=sys.stderr)
        return 2
    # A shell without job control starts background commands with SIGINT
    # ignored; Ctrl-C and kill must still tear the emulation down.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        return run(args)
    except (TopologyError, ControllerError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print("\ninterrupted; the emulation was torn down", file=sys.stderr)
        return 128 + (e.signum if isinstance(e, Stopped) else signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
