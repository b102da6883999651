#!/usr/bin/env python3
"""Train across emulated hosts whose gradients are summed inside P4 switches.

Builds the topology (controller.topology), starts it in Mininet with one P4
switch process per switch (BMv2 where simple_switch_grpc is installed, else
the embedded target), programs the switches over P4Runtime, runs a worker per
host, and writes results/<run>/report.json with a plot. Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _repo

from controller import topology as topology_mod
from controller.p4info import P4InfoError, Pipeline
from controller.profiles import PROFILES, check_jobs, profile
from controller.program import canonical_state, desired_state
from controller.session import ControllerError
from controller.topology import POOL_SIZE, JobSpec, TopologyError
from controller.watch import Watcher
from protocol.combos import problem
from protocol.encodings import ALL, CONTRIBUTIONS, RESULTS, describe

REPO = _repo.ROOT
# PyTorch runs: the test accuracy a default run should reach, and the steps that reach it
# (MNIST-1D CNN, 4 workers: about 85 % at step 350 in bench/torch_convergence.py).
TARGET = 0.8
TORCH_STEPS = 400
TORCH_STEPS_BMV2 = 30


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mininet/run.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (as root, from the repository root):\n"
               "  .venv/bin/python mininet/run.py                        # star, 4 workers\n"
               "  .venv/bin/python mininet/run.py --topo fat-tree        # k=4, 16 workers\n"
               "  .venv/bin/python mininet/run.py --jobs 2 --loss 0.05   # two jobs, 5% loss\n"
               "  .venv/bin/python mininet/run.py --aggregation ps       # parameter server\n"
               "  .venv/bin/python mininet/run.py --sparse --model embedding  # sparse job\n"
               "  .venv/bin/python mininet/run.py --topo fat-tree --switches-only\n"
               "  .venv/bin/python mininet/run.py --framework torch      # PyTorch DDP\n"
               "  .venv/bin/python mininet/run.py --framework torch --aggregation gloo\n"
               "  .venv/bin/python mininet/run.py --network-bound --bw 1000  # links bind\n")
    t = ap.add_argument_group("topology")
    t.add_argument("--topo", choices=("star", "leaf-spine", "fat-tree"), default="star")
    t.add_argument("--hosts", type=int, help="star: hosts (default 4)")
    t.add_argument("--k", type=int, help="fat-tree: k (default 4, 16 hosts)")
    t.add_argument("--leaves", type=int, help="leaf-spine: leaves (default 2)")
    t.add_argument("--spines", type=int, help="leaf-spine: spines (default 2)")
    t.add_argument("--hosts-per-leaf", type=int, help="leaf-spine (default 2)")
    t.add_argument("--bw", type=float, default=100.0,
                   help="link bandwidth, Mbit/s (default 100; with --network-bound the rate "
                        "its probe starts at)")
    t.add_argument("--network-bound", action="store_true",
                   help="pick the link rate at which the links, not the switches nor this "
                        "machine's CPU, bind the job: a short probe at --bw, the rate from its "
                        "figures, then the job, whose own verdict must say link (else the rate "
                        "is halved and the job runs again); says which rate and why "
                        "(mininet/netbound.py)")
    t.add_argument("--loss", type=float, default=0.0,
                   help="drop probability on every link, applied by the switches (default 0)")
    t.add_argument("--switch", choices=("auto", "bmv2", "soft"), default="auto",
                   help="auto: BMv2 where simple_switch_grpc is on PATH, else softswitch")
    t.add_argument("--switches-only", action="store_true",
                   help="start the switches (not programmed), hosts and links, write "
                        "topology.json, and wait until Ctrl-C: for controller/main.py and "
                        "worker/main.py run by hand (with --cli: the Mininet CLI instead)")
    j = ap.add_argument_group("job")
    j.add_argument("--workers", type=int, default=None,
                   help="workers (default: every host, one fewer with --aggregation ps)")
    j.add_argument("--jobs", type=int, default=1, help="split the workers into N jobs (default 1)")
    j.add_argument("--aggregation", choices=("switch", "ps", "gloo"), default="switch",
                   help="switch: in-network (default); ps: host parameter server on the last "
                        "host, float32 both ways; gloo (--framework torch): Gloo's TCP "
                        "allreduce, routed by the switches as plain IPv4")
    j.add_argument("--framework", choices=("numpy", "torch"), default="numpy",
                   help="numpy: the digits MLP (worker/main.py, default); torch: PyTorch DDP "
                        "on MNIST-1D (worker/ddp/main.py, docs/TORCH.md)")
    j.add_argument("--mode", choices=("layer", "model"),
                   help="--framework torch: the compressor and reduction per layer (per DDP "
                        "bucket) or once per step on the entire model (default layer)")
    j.add_argument("--eval-every", type=int,
                   help="--framework torch: steps between test evaluations (default: a "
                        "twentieth of the steps, at least 5)")
    j.add_argument("--batch", type=int,
                   help="--framework torch: examples per worker and step (default 32); a "
                        "larger batch makes a step's computation longer against its "
                        "communication")
    j.add_argument("--bucket-mb", type=float,
                   help="--framework torch: DDP's bucket size in MB (default: "
                        "worker/ddp/train.py's)")
    j.add_argument("--no-overlap", dest="no_overlap", action="store_const", const=True,
                   default=None,
                   help="--framework torch --aggregation switch: reduce each bucket on the "
                        "autograd thread instead of the rank's communication thread (the "
                        "same sums, no overlap with the backward pass)")
    j.add_argument("--encoding", choices=sorted(CONTRIBUTIONS),
                   help="contribution encoding (default cnat8): " + "; ".join(
                       describe(e) for e in ALL if e.worker))
    j.add_argument("--result-encoding", choices=sorted(RESULTS),
                   help="result encoding, what the root switch sends the workers (default: "
                        "the contribution encoding; "
                        + ", ".join(f"for {e.name} {e.job[0]}" for e in ALL
                                    if e.job and e.job[0] != e.name) + ")")
    j.add_argument("--partials", choices=RESULTS,
                   help="partial encoding, what switches below the root send up: fixed32 "
                        "(exact, default), cnat8 (re-compressed, one byte per element on every "
                        "link) or sum8 (a job whose results are sum8)")
    j.add_argument("--sparse", action="store_const", const=True, default=None,
                   help="a block-sparse job (docs/PROTOCOL.md \"Sparse jobs\"): only the "
                        "gradient's blocks holding a non-zero element travel; one switch "
                        "(--topo star); with --aggregation ps, the host block aggregator "
                        "(worker/block_aggregator.py) instead of the parameter server")
    j.add_argument("--model", choices=("mlp", "cnn", "embedding", "charlm"),
                   help="--framework numpy: mlp (default) or embedding; --framework torch: "
                        "cnn (MNIST-1D, default), embedding (digits as row and column "
                        "patterns) or charlm (a character-level transformer language model on "
                        "the Python standard library's sources, judged by validation loss); "
                        "an embedding's gradient is non-zero only in the rows a batch touched "
                        "(natural sparsity, what --sparse leaves out)")
    j.add_argument("--window", type=int, default=64, help="slots per job (default 64)")
    j.add_argument("--profile", choices=sorted(PROFILES),
                   help="profile, the build of p4src/ the switches run: default (168 elements "
                        "per packet), wide (1456, a full 1500-byte MTU; C_nat both ways only: "
                        "--encoding cnat8, results cnat8, --partials cnat8 below the root), "
                        "wide4 (1024: the fewest bytes per element for the 4-bit --encoding), "
                        "tofino "
                        "(the Tofino profile's twin, 16) or tofino-mp (its walk: 64 CNAT8 "
                        "codes in 4 passes of 16; --encoding cnat8, --partials cnat8 below "
                        "the root)")
    j.add_argument("--compressor", default="none",
                   help="worker-side operator applied before the contribution encoding")
    j.add_argument("--steps", type=int,
                   help=f"SGD steps (default 100; with --framework torch {TORCH_STEPS}, which "
                        f"reach 80 %% or more, but {TORCH_STEPS_BMV2} on BMv2 with switch "
                        f"aggregation, whose per-packet work makes a step take seconds here)")
    j.add_argument("--seed", type=int, default=0,
                   help="the run's seed: workers' data, models and encoders, and the "
                        "switches' rounding bits (default 0)")
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


class UsageError(Exception):
    """Options that describe no runnable run: refused before anything is built."""


# Every option with a range, one row each: (option, valid when, what it must be). None means
# not given (its default comes later). A new option with a range joins here.
RANGES = (
    ("hosts", lambda v: v >= 1, "at least 1"),
    ("k", lambda v: v >= 2 and v % 2 == 0, "an even number, at least 2"),
    ("leaves", lambda v: v >= 1, "at least 1"),
    ("spines", lambda v: v >= 1, "at least 1"),
    ("hosts_per_leaf", lambda v: v >= 1, "at least 1"),
    ("bw", lambda v: v > 0, "above 0 Mbit/s"),
    ("loss", lambda v: 0 <= v < 1, "within [0, 1)"),
    ("workers", lambda v: v >= 1, "at least 1"),
    ("jobs", lambda v: v >= 1, "at least 1"),
    ("window", lambda v: 1 <= v <= POOL_SIZE, f"within 1..{POOL_SIZE} (a switch's slots)"),
    ("steps", lambda v: v >= 0, "at least 0"),
    ("seed", lambda v: 0 <= v < 1 << 63, "within 0..2^63-1"),
    ("rto", lambda v: v > 0, "above 0 s"),
    ("timeout", lambda v: v > 0, "above 0 s"),
    ("eval_every", lambda v: v >= 1, "at least 1"),
    ("batch", lambda v: v >= 1, "at least 1"),
    ("bucket_mb", lambda v: v > 0, "above 0 MB"),
)

# Options that mean something in some runs only: (option, applies when, to what).
APPLIES = (
    ("hosts", lambda a: a.topo == "star", "--topo star"),
    ("k", lambda a: a.topo == "fat-tree", "--topo fat-tree"),
    ("leaves", lambda a: a.topo == "leaf-spine", "--topo leaf-spine"),
    ("spines", lambda a: a.topo == "leaf-spine", "--topo leaf-spine"),
    ("hosts_per_leaf", lambda a: a.topo == "leaf-spine", "--topo leaf-spine"),
    ("encoding", lambda a: a.aggregation == "switch", "--aggregation switch"),
    ("result_encoding", lambda a: a.aggregation == "switch", "--aggregation switch"),
    ("partials", lambda a: a.aggregation == "switch", "--aggregation switch"),
    ("profile", lambda a: a.aggregation == "switch", "--aggregation switch"),
    ("mode", lambda a: a.framework == "torch", "--framework torch"),
    ("eval_every", lambda a: a.framework == "torch", "--framework torch"),
    ("batch", lambda a: a.framework == "torch", "--framework torch"),
    ("bucket_mb", lambda a: a.framework == "torch", "--framework torch"),
    ("no_overlap", lambda a: a.framework == "torch" and a.aggregation == "switch",
     "--framework torch --aggregation switch"),
    ("sparse", lambda a: a.framework == "numpy" or a.aggregation == "switch",
     "--framework numpy, or --framework torch --aggregation switch"),
    ("partials", lambda a: not a.sparse, "dense jobs (a sparse job has no partial sums)"),
)

# Which aggregations each framework runs, and its models (the first is the default).
AGGREGATIONS = {"numpy": ("switch", "ps"), "torch": ("switch", "gloo")}
MODELS = {"numpy": ("mlp", "embedding"), "torch": ("cnn", "embedding", "charlm")}


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_options(args) -> None:
    """Each option on its own (RANGES, APPLIES) and what only a string can say."""
    for name, valid, what in RANGES:
        value = getattr(args, name)
        if value is not None and not valid(value):
            raise UsageError(f"{option(name)} {value}: must be {what}")
    for name, applies, where in APPLIES:
        if getattr(args, name) is not None and not applies(args):
            raise UsageError(f"{option(name)} applies to {where} only")
    if args.aggregation not in AGGREGATIONS[args.framework]:
        raise UsageError(f"--aggregation {args.aggregation} needs --framework "
                         + " or ".join(f for f, a in AGGREGATIONS.items()
                                       if args.aggregation in a))
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out}: exists and is not a folder")
    if args.network_bound and (args.steps == 0 or args.switches_only or args.cli):
        raise UsageError("--network-bound runs a job: not with --steps 0, --switches-only "
                         "or --cli")
    if args.network_bound and args.jobs > 1:
        raise UsageError("--network-bound picks one rate for one job: not with --jobs")
    models = MODELS[args.framework]
    if args.model is not None and args.model not in models:
        raise UsageError(f"--model {args.model}: --framework {args.framework} trains "
                         f"{' or '.join(models)}")
    from worker.compression.registry import parse
    try:
        parse(args.compressor)
    except ValueError as e:
        raise UsageError(f"--compressor {args.compressor}: {e}") from None


@dataclass
class Plan:
    """What a run builds, checked in full before anything is."""

    kind: str                  # bmv2 or soft
    topo: topology_mod.Topology  # with the jobs the switches aggregate (none for ps)
    jobs: list[JobSpec]
    ps_host: str | None
    pipeline: Pipeline
    encoding: str              # the workers' contributions
    result_encoding: str


def make_topology(args) -> topology_mod.Topology:
    opts = {"bw_mbit": args.bw, "loss": args.loss}
    if args.topo == "star":
        hosts = args.hosts or 4
        if args.aggregation == "ps" and args.hosts is None and args.workers is None:
            hosts += 1     # the parameter server gets a host of its own
        return topology_mod.star(hosts=hosts, **opts)
    if args.topo == "leaf-spine":
        return topology_mod.leaf_spine(leaves=args.leaves or 2, spines=args.spines or 2,
                                       hosts=args.hosts_per_leaf or 2, **opts)
    return topology_mod.fat_tree(k=args.k or 4, **opts)


def plan_jobs(args, topo) -> tuple[list[JobSpec], str | None]:
    """The jobs' worker lists, and the parameter server's host for --aggregation ps."""
    hosts = [h.name for h in topo.hosts]
    ps_host = hosts.pop() if args.aggregation == "ps" else None
    n = args.workers if args.workers is not None else len(hosts)
    if not 1 <= n <= len(hosts):
        raise UsageError(f"--workers {n}: the topology has {len(hosts)} hosts for workers")
    if not 1 <= args.jobs <= n:
        raise UsageError(f"--jobs {args.jobs}: needs 1..{n} (one worker at least per job)")
    if ps_host and n % args.jobs:
        raise UsageError(f"--aggregation ps takes one worker count for every job: {n} "
                         f"workers do not split evenly into {args.jobs} jobs")
    chosen, per = hosts[:n], n // args.jobs
    from worker.allreduce.job import JOB_ENCODINGS

    result, partials = JOB_ENCODINGS[args.encoding or "cnat8"]
    result = args.result_encoding or result
    mode = "sparse" if args.sparse and not ps_host else "dense"
    jobs = []
    for i in range(args.jobs):
        members = chosen[i * per:(i + 1) * per] if i < args.jobs - 1 else chosen[i * per:]
        jobs.append(JobSpec(i + 1, tuple(members), slots=args.window, encoding=result,
                            partials=args.partials or partials, mode=mode, seed=args.seed))
    return jobs, ps_host


def torch_steps(kind: str, aggregation: str) -> int:
    """A torch run's default steps: enough to reach 80 % where a step takes a fraction of a
    second; BMv2's per-packet work makes a switch-aggregated step take seconds on this
    machine, so there the run is short and its summary says what the target would take."""
    return TORCH_STEPS_BMV2 if kind == "bmv2" and aggregation == "switch" else TORCH_STEPS


def short_of_target(summary: dict, args, kind: str) -> str | None:
    """For a torch job that ended below 80 %: why, and what would get there (None else)."""
    acc, sps = summary.get("final_test_accuracy"), summary.get("steps_per_second")
    if (args.framework != "torch" or acc is None or acc >= TARGET or args.steps >= TORCH_STEPS
            or args.model == "charlm"):     # judged by loss: no accuracy target
        return None
    text = (f"job {summary['job']}: test accuracy {100 * acc:.0f} % after {args.steps} steps, "
            f"short of {100 * TARGET:.0f} %: the {args.model or 'cnn'} model takes about "
            f"{TORCH_STEPS} steps to get there (docs/results.md, bench/torch_convergence.py)")
    if sps:
        minutes = TORCH_STEPS / sps / 60
        text += f"; at this run's {sps:.2f} steps/s that is about {minutes:.0f} min here"
    bound = summary.get("bound")
    if bound:
        text += f", bound by {bound['text'].split(' -- ')[0]}"
    if kind == "bmv2":
        text += ("; --switch soft runs the same compiled program tens of times faster on "
                 "this machine")
    return text + f". Give --steps {TORCH_STEPS} to train to {100 * TARGET:.0f} %."


def make_plan(args) -> Plan:
    """Every option checked, and everything derived from them; raises UsageError."""
    from p4switch import resolve_kind

    check_options(args)
    torch = args.framework == "torch"
    try:
        kind = resolve_kind(args.switch)
    except RuntimeError as e:
        raise UsageError(str(e)) from None
    if args.steps is None:
        args.steps = torch_steps(kind, args.aggregation) if torch else 100
    if torch:
        args.mode = args.mode or "layer"
        args.eval_every = args.eval_every or max(5, args.steps // 20)
    try:
        topo = make_topology(args)
        jobs, ps_host = plan_jobs(args, topo)
        topo = topo.with_jobs([] if ps_host else jobs)
        prof = profile(args.profile or "default")
        if prof.passes > 1 and (args.encoding or "cnat8") != "cnat8":
            raise UsageError(f"--encoding {args.encoding}: profile {prof.name} walks CNAT8 "
                             f"packets of {prof.passes} segments only; use --encoding cnat8 "
                             f"or the tofino profile")
        pipeline = Pipeline.load(str(prof.p4info), str(prof.bmv2_json))
        check_jobs(prof, topo)
        # The switches' entries, computed as the controller will: a job that does not fit
        # the tree or the switches' slots is refused here.
        canonical_state(desired_state(topo, {j.id: 1 for j in topo.jobs}, pipeline.p4info),
                        pipeline.p4info)
    except (TopologyError, ControllerError, P4InfoError, ValueError) as e:
        raise UsageError(str(e)) from None
    if ps_host and args.sparse:       # the block aggregator sums integers
        return Plan(kind, topo, jobs, ps_host, pipeline, "cnat8", "cnat8")
    if ps_host or args.aggregation == "gloo":
        return Plan(kind, topo, jobs, ps_host, pipeline, "float32", "float32")
    encoding = args.encoding or "cnat8"
    for job in jobs:            # the one check of a job's combination, for every encoding
        switches = len({topo.attachment(w).node for w in job.workers})
        if why := problem(encoding, job.encoding, job.partials, job_id=job.id,
                          prof=prof.facts, tree_switches=2 if switches > 1 else 1,
                          workers=len(job.workers), sparse=bool(args.sparse)):
            raise UsageError(f"--encoding {encoding}: {why}")
    if encoding == "fixed32" and not prof.fits_mtu(4):
        raise UsageError(f"--encoding fixed32: a FIXED32 packet of profile {prof.name} "
                         f"({prof.elems} elements) does not fit a 1500-byte MTU")
    per_elem = 4 if encoding == "fixed32" else 1
    if args.sparse and not prof.fits_mtu(per_elem, sparse=True):
        raise UsageError(f"--sparse: a sparse {encoding} packet of profile {prof.name} "
                         f"({prof.elems} elements) is {prof.packet_bytes(per_elem, True)} bytes "
                         f"of IPv4, beyond the links' 1500-byte MTU; use the default profile")
    if encoding == "cnat8":
        from worker.main import growth_problem
        for job in jobs:
            if why := growth_problem(topo, job, prof.elems):
                raise UsageError(f"--encoding cnat8 cannot work for job {job.id}: {why}")
    return Plan(kind, topo, jobs, None, pipeline, encoding, jobs[0].encoding)


def header(args, plan: Plan, out: Path) -> str:
    from report import count

    workers = sum(len(j.workers) for j in plan.jobs)
    how = (f"host block aggregator on {plan.ps_host}" if plan.ps_host and args.sparse else
           f"host parameter server on {plan.ps_host}" if plan.ps_host else
           "Gloo allreduce over TCP (the switches route it)" if args.aggregation == "gloo" else
           "switch aggregation")
    if args.framework == "torch":
        how = f"PyTorch DDP ({args.mode}-wise), {how}"
    if args.sparse:
        how = f"sparse job, {how}"
    return (f"natswitch: {args.topo}, {count(len(plan.topo.switches), 'switch', 'es')} "
            f"({plan.kind}), {count(workers, 'worker')} in {count(len(plan.jobs), 'job')}, "
            f"{how}, {plan.encoding} up, {plan.result_encoding} down; output {out}")


def worker_args(args, plan: Plan, topo_path: Path, job: JobSpec) -> list[str]:
    common = ["--topology", str(topo_path), "--steps", str(args.steps), "--seed",
              str(args.seed), "--timeout", str(args.timeout), "--compressor", args.compressor,
              "--rto", str(args.rto)]
    if args.model:
        common += ["--model", args.model]
    if args.sparse:
        common.append("--sparse")
    if plan.ps_host:
        # The switches hold no job: the worker is told what the topology file cannot say.
        return [*common, "--baseline-ps", plan.topo.host(plan.ps_host).ip,
                "--ps-encoding", plan.encoding, "--workers", str(len(job.workers)),
                "--window", str(job.slots)]
    prof = profile(args.profile or "default")
    return [*common, "--encoding", plan.encoding, "--elems", str(prof.elems),
            *(["--zero-checksum"] if prof.zero_checksum else [])]


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
            with Session(s, (0, 2), 5.0) as p4rt:
                st = read_stats(p4rt)
            out[s.name] = {name: {str(i): v for i, v in c.items() if v[0]}
                           for name, c in st.counters.items()}
        except ControllerError as e:
            out[s.name] = {"error": str(e)}
    return out


def relative(path: Path) -> str:
    """A path as a user types it from here."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def how_to_use(plan: Plan, emu, topo_path: Path) -> str:
    """What --switches-only prints: where the switches are and how to drive them by hand."""
    from workers import ONE_THREAD

    py, topo = relative(Path(sys.executable)), relative(topo_path)
    one_thread = " ".join(f"{k}={v}" for k, v in ONE_THREAD.items())
    switches = plan.topo.switches
    pids = ", ".join(f"{h.name} {emu.host(h.name).pid}" for h in plan.topo.hosts)
    first = plan.jobs[0].workers[0]
    return "\n".join([
        f"switches up, not programmed: {switches[0].name} at {switches[0].grpc_addr}"
        + (f" .. {switches[-1].name} at {switches[-1].grpc_addr}" if len(switches) > 1 else ""),
        f"program them:  {py} controller/main.py --topology {topo}",
        f"a worker:      mnexec -a <host pid> env {one_thread} {py} worker/main.py "
        f"--topology {topo} --host {first}",
        f"host pids:     {pids}",
        "Ctrl-C stops the switches and removes every interface and namespace.",
    ])


def cli(net) -> None:
    """The Mininet CLI; inside it, Ctrl-C interrupts the command typed, as in Mininet."""
    from mininet.cli import CLI
    from mininet.log import setLogLevel

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    setLogLevel("output")     # what the CLI's commands print goes through Mininet's log
    try:
        CLI(net)
    finally:
        setLogLevel("critical")
        signal.signal(signal.SIGINT, previous)


def run(args, plan: Plan) -> int:
    import bounds
    import emulation
    import report
    from mininet.log import setLogLevel
    from workers import WorkerGroup, host_env

    setLogLevel("critical")   # tc warns that HTB quantum is big; harmless
    topo, jobs, ps_host = plan.topo, plan.jobs, plan.ps_host
    out = args.out or REPO / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.topo}"
    out.mkdir(parents=True, exist_ok=True)
    topo_path = out / "topology.json"
    topo.save(str(topo_path))
    print(header(args, plan, out), flush=True)

    group, ps_proc, samples = WorkerGroup(), None, None
    torch = args.framework == "torch"
    if torch:
        import torch_workers
        group = torch_workers.TorchWorkerGroup()
    pcap = out / "pcap" if args.pcap else None
    with emulation.Emulation(topo, plan.kind, out / "logs", pcap_dir=pcap) as emu:
        if args.switches_only:
            print(how_to_use(plan, emu, topo_path), flush=True)
            if args.cli:
                cli(emu.net)
                return 0
            while True:
                signal.pause()
        t0 = time.monotonic()
        # The controller in watch mode: it programs the switches and keeps them programmed,
        # moving the jobs of a switch that restarts to a new session in out/sessions.json,
        # which the workers follow (docs/CONTROLLER.md).
        watcher = Watcher(topo, plan.pipeline, str(out / "sessions.json"),
                          log=lambda text: print(f"controller: {text}", flush=True))
        try:
            started = watcher.start()
        except BaseException:       # Ctrl-C while programming: no thread left behind
            watcher.stop()
            raise
        failed = [(s.name, r) for s, r in started if isinstance(r, ControllerError)]
        if failed:
            watcher.stop()
            for name, err in failed:
                print(f"error: programming {name}: {err}", file=sys.stderr)
            return 1
        print(f"switches programmed in {time.monotonic() - t0:.1f} s", flush=True)
        try:
            if ps_host:
                server = (["block_aggregator.py", "--result-encoding", plan.result_encoding]
                          if args.sparse else ["baseline.py"])
                with open(out / "logs" / f"{ps_host}-ps.log", "wb") as log:
                    ps_proc = emu.host(ps_host).popen(
                        [sys.executable, str(REPO / "worker" / server[0]), *server[1:],
                         "--workers", str(len(jobs[0].workers)), "--slots", str(args.window),
                         "--seed", str(args.seed)],
                        stdout=log, stderr=log, cwd=str(REPO),
                        env=host_env())
            sampler = None
            if args.steps > 0:
                sampler = bounds.Sampler(
                    [p.ifname for p in bounds.port_links(topo)],
                    {s.name: emu.net.get(s.name).proc.pid for s in topo.switches}).start()
                if ps_proc is not None:
                    sampler.watch(ps_host, ps_proc.pid)
                for job in jobs:
                    wargs = (torch_workers.worker_args(args, plan.encoding, topo_path, topo,
                                                       job) if torch else
                             worker_args(args, plan, topo_path, job))
                    for rank, host in enumerate(job.workers):
                        group.start(emu.host(host), host, job.id, rank, out, wargs)
                        sampler.watch(host, group.procs[-1].proc.pid)
                progress = Progress(group, jobs)
                budget = (torch_workers.budget(args) if torch else
                          60 + args.steps * (2 + args.timeout / 10))
                finished = group.wait(time.monotonic() + budget, on_tick=progress)
                progress.done()
                samples = sampler.stop()
                if not finished:
                    print(f"error: workers still running after {budget:.0f} s; stopping them",
                          file=sys.stderr)
            if ps_proc is not None and ps_proc.poll() is not None:
                print(f"error: the parameter server on {ps_host} exited with code "
                      f"{ps_proc.returncode}: see {out / 'logs' / f'{ps_host}-ps.log'}",
                      file=sys.stderr)
            if args.cli:
                cli(emu.net)
            counters = read_counters(topo) if not ps_host else None
        finally:
            watcher.stop()
            group.stop()
            if ps_proc is not None:
                ps_proc.terminate()
                ps_proc.wait()
    if args.steps <= 0:
        return 0
    results = group.results()
    summaries = [report.job_summary(j.id, [r for r in results if r.get("job") == j.id])
                 for j in jobs]
    links = bounds.port_links(topo)
    for s in summaries:
        s["bound"] = samples and bounds.analyse(
            samples, links, [r for r in results if r.get("job") == s["job"]], plan.kind)
    print(report.table(summaries))
    for s in summaries:
        if s["bound"]:
            print(f"job {s['job']} bound by {s['bound']['text']}")
    for s in summaries:
        if note := short_of_target(s, args, plan.kind):
            print(note)
    for s in summaries:
        for e in s["errors"]:
            print(f"job {s['job']}: {e}", file=sys.stderr)
    for line in report.drops_on_failure(summaries, counters):
        print(line, file=sys.stderr)
    run_info = {"topo": args.topo, "switch": plan.kind, "aggregation": args.aggregation,
                "encoding": plan.encoding, "result_encoding": plan.result_encoding,
                "bw_mbit": args.bw, "loss": args.loss, "jobs": len(jobs),
                "steps": args.steps, "compressor": args.compressor,
                "framework": args.framework, "mode": args.mode if torch else None,
                "sparse": bool(args.sparse), "model": args.model, "seed": args.seed,
                "profile": args.profile or "default"}
    path = report.write(out, run_info, summaries, counters)
    title = report.title(run_info, len(topo.switches))
    if report.plot(summaries, out / "accuracy.png", title):
        print(f"plot: {out / 'accuracy.png'}")
    if report.plot_time(summaries, out / "accuracy_time.png", title):
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


def argv_of(parser: argparse.ArgumentParser, args, leave_out: set[str]) -> list[str]:
    """The command line that gives `args` again (every option not at its default), less the
    options named in leave_out."""
    out = []
    for act in parser._actions:
        if not act.option_strings or act.dest in leave_out or act.dest == "help":
            continue
        value = getattr(args, act.dest)
        if value == act.default or value is None:
            continue
        flag = act.option_strings[0]
        if act.nargs == 0:
            out.append(flag)
        else:
            out += [flag, str(value)]
    return out


def network_bound(parser, args, raw) -> int:
    """--network-bound: probe, pick a rate, run the job; again, slower, until the run's own
    verdict says the links bound it (mininet/netbound.py)."""
    import netbound
    import steptime

    out = args.out or REPO / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.topo}"
    job_argv = argv_of(parser, raw, {"network_bound", "bw", "out", "steps"})
    rate = args.bw
    steps = netbound.PROBE_STEPS[args.framework]
    print(f"network-bound: probe of {steps} steps at {rate:g} Mbit/s", flush=True)
    code, where = netbound.probe(job_argv, rate, steps, out / "probe")
    try:
        f = steptime.figures(where)
    except (OSError, ValueError, KeyError, StopIteration) as e:
        print(f"error: the probe at {rate:g} Mbit/s gave no figures (exit {code}): {e}; "
              f"see {where / 'logs'}", file=sys.stderr)
        return 1
    rate, why = netbound.pick_rate(f)
    print(f"network-bound: {why}: trying {rate:g} Mbit/s", flush=True)
    for attempt in range(1, netbound.ATTEMPTS + 1):
        args.bw = rate
        plan = make_plan(args)
        args.out = out / f"{rate:g}mbit"
        code = run(args, plan)
        report = json.loads((args.out / "report.json").read_text())
        bound = report["jobs"][0].get("bound")
        problems = netbound.check(bound) if bound else ["no bound figures"]
        if not problems:
            print(f"network-bound: picked {rate:g} Mbit/s ({why}); the run was bound by "
                  f"{bound['text']}; report {args.out / 'report.json'}")
            return code
        print(f"network-bound: {rate:g} Mbit/s is not network-bound: {'; '.join(problems)}",
              flush=True)
        why = f"{rate:g} Mbit/s was not ({problems[0]})"
        rate = netbound.nice_below(rate / 2)
        if attempt < netbound.ATTEMPTS:
            print(f"network-bound: trying {rate:g} Mbit/s", flush=True)
    print(f"error: no network-bound rate found in {netbound.ATTEMPTS} runs down to "
          f"{2 * rate:g} Mbit/s; see {out}", file=sys.stderr)
    return 1


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    raw = argparse.Namespace(**vars(args))       # as given, before make_plan fills defaults
    try:
        plan = make_plan(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("mininet/run.py needs root (Mininet creates network namespaces)", file=sys.stderr)
        return 2
    # A shell without job control starts background commands with SIGINT
    # ignored; Ctrl-C and kill must still tear the emulation down.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        if args.network_bound:
            return network_bound(parser, args, raw)
        return run(args, plan)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (TopologyError, ControllerError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        if args.switches_only:
            print("\nstopped; the emulation was torn down", file=sys.stderr)
            return 0
        print("\ninterrupted; the emulation was torn down", file=sys.stderr)
        return 128 + (e.signum if isinstance(e, Stopped) else signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
