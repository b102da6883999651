"""natswitch controller: program the switches of a topology over P4Runtime.

Run from the repository root: python controller/main.py --help
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: import `controller` as a package from the repository root, and keep
    # this folder off the path so its modules cannot shadow others by their short names.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

from controller import shell as shell_cmd  # noqa: E402
from controller.job_sessions import SessionsFile  # noqa: E402
from controller.jobs import make_jobs  # noqa: E402
from controller.p4info import P4InfoError, Pipeline  # noqa: E402
from controller.profiles import PROFILES, check_jobs, elems_of, profile  # noqa: E402
from controller.program import SyncResult, desired_state, for_each_switch, program  # noqa: E402
from controller.session import ControllerError, Session, listening  # noqa: E402
from controller.stats import format_stats, read_stats  # noqa: E402
from controller.topology import (  # noqa: E402
    BUILDERS,
    DEFAULT_BW_MBIT,
    DEFAULT_GRPC_BASE_PORT,
    DEFAULT_THRIFT_BASE_PORT,
    Topology,
    TopologyError,
)
from controller.tree import build_tree  # noqa: E402
from controller.watch import Watcher  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("program", "topology", "stats", "shell")

DESCRIPTION = """\
Program the switches of a topology over P4Runtime: routes for every host, the aggregation
trees of the jobs (job, children and multicast entries), host addressing and per-port loss.
Switches are read first and only differences are written; a second run writes nothing.
Each job runs in a session the controller chooses and installs; it writes them to a
sessions file (sessions.json beside the topology file, or --sessions) for the workers. A job
keeps its session until --new-session (a new run of the job) or, in --watch mode, a restart
of a switch of its tree moves it.

commands:
  program    (the default) push p4src/build to every switch and install the entries
  topology   write the topology JSON (the addressing plan mininet/run.py and the workers read)
  stats      show the counters of every switch as a table per switch
  shell      open p4runtime-shell on one switch

A topology is either built (--topo with its sizes; the same arguments always give the same
addresses) or read from a JSON file written by the `topology` command (--topology FILE).

examples:
  python controller/main.py --topo fat-tree --k 4
  python controller/main.py topology --topo leaf-spine --leaves 4 --spines 2 -o topo.json
  python controller/main.py --topology topo.json --jobs h1-h8:slots=128 h9-h16:enc=cnat8
  python controller/main.py stats --topology topo.json --switches s1 s2
  python controller/main.py --topology topo.json --new-session
  python controller/main.py --topology topo.json --reset
"""

JOBS_HELP = """job specs HOSTS[:id=N][:slots=N][:enc=fixed32|cnat8][:mode=dense|sparse]; HOSTS
is `all` or names and ranges like h1-h8,h10 (default: the topology file's jobs, or else one job
of all hosts with 64 slots, fixed32 results; `none` for no job); mode=sparse: block-sparse
aggregation, on one switch only"""


def _topology_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("topology")
    g.add_argument("--topology", metavar="FILE", help="read the topology JSON from FILE")
    g.add_argument("--topo", choices=sorted(BUILDERS), help="build this kind of topology")
    g.add_argument("--k", type=int, help="fat-tree: k (even; k^3/4 hosts; default 4)")
    g.add_argument("--hosts", type=int, metavar="N",
                   help="star: hosts (default 4); leaf-spine: hosts per leaf (default 2)")
    g.add_argument("--leaves", type=int, metavar="L", help="leaf-spine: leaves (default 4)")
    g.add_argument("--spines", type=int, metavar="S", help="leaf-spine: spines (default 2)")
    g.add_argument("--bw", type=float, default=DEFAULT_BW_MBIT, metavar="MBIT",
                   help=f"built topology: link bandwidth in Mbit/s (default {DEFAULT_BW_MBIT:g})")
    g.add_argument("--delay", type=float, default=0.0, metavar="MS",
                   help="built topology: link delay in ms, recorded for the emulation")
    g.add_argument("--grpc-port", type=int, default=DEFAULT_GRPC_BASE_PORT, metavar="PORT",
                   help=f"built topology: P4Runtime port of s1, s2 gets the next "
                   f"(default {DEFAULT_GRPC_BASE_PORT})")
    g.add_argument("--thrift-port", type=int, default=DEFAULT_THRIFT_BASE_PORT, metavar="PORT",
                   help=f"built topology: Thrift port of s1 (default {DEFAULT_THRIFT_BASE_PORT})")
    g.add_argument("--grpc-host", metavar="ADDR",
                   help="built topology: the address the switches' P4Runtime servers listen "
                   "at, e.g. a BMv2 server's (default 127.0.0.1)")
    g.add_argument("--host-addr", nargs="+", metavar="NAME=MAC,IP/LEN",
                   help="give hosts the addresses of the NICs that stand for them, e.g. "
                   "h1=0c:42:a1:00:00:01,192.168.10.1/24 (real machines)")
    g.add_argument("--jobs", nargs="+", metavar="SPEC", help=JOBS_HELP)
    g.add_argument("--loss", type=float, metavar="P",
                   help="drop probability of every link (applied by the switches' egress "
                   "impairment table)")
    return p


def _p4runtime_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=10.0, metavar="SEC",
                   help="give up on an unreachable switch after SEC seconds (default 10)")
    p.add_argument("--election-id", default="0,1", metavar="HI,LO",
                   help="P4Runtime election id (default 0,1)")


def _pipeline_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", choices=sorted(PROFILES), default="default",
                   help="profile, the build of p4src/ to push: default (168 elements per "
                   "packet, p4src/build/), wide (1456, CNAT8 both ways only), wide4 (1024), "
                   "tofino (the Tofino designs' v1model twin, 16) or tofino-mp (64 in 4 "
                   "passes); workers then need --elems to match")
    p.add_argument("--p4info", help="P4Info (text) of the program to push (default: the "
                   "profile's)")
    p.add_argument("--bmv2-json", help="BMv2 JSON of the program to push (default: the "
                   "profile's)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python controller/main.py", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    topo = _topology_options()

    p = sub.add_parser("program", parents=[topo], help="program the switches (the default)",
                       description="Push the program and install the entries on every switch.")
    _pipeline_options(p)
    _p4runtime_options(p)
    p.add_argument("--reset", action="store_true",
                   help="delete every entry of the controller's tables and every multicast "
                   "group instead")
    p.add_argument("--switches", nargs="+", metavar="NAME", help="only these switches")
    p.add_argument("--dry-run", action="store_true",
                   help="print the job trees and the entries per switch; connect to nothing")
    p.add_argument("--watch", action="store_true",
                   help="keep running: hold a P4Runtime stream to every switch, re-program a "
                   "switch that went away and came back, and move the jobs on it to a new "
                   "session (written to --sessions for the workers); stops on Ctrl-C")
    p.add_argument("--sessions", metavar="FILE",
                   help="the jobs' sessions file, written for the workers (default: "
                   "sessions.json beside the --topology file, else in the current folder); a "
                   "job it holds keeps its session")
    p.add_argument("--new-session", action="store_true",
                   help="move every job to its next session (a new run of the jobs: the "
                   "switches may hold the last run's uses of the old one)")

    p = sub.add_parser("topology", parents=[topo], help="write the topology JSON",
                       description="Write the topology (with its jobs) as JSON.")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")

    p = sub.add_parser("stats", parents=[topo], help="show the counters per switch",
                       description="Read the counters of every switch and show a table each.")
    _p4runtime_options(p)
    p.add_argument("--switches", nargs="+", metavar="NAME", help="only these switches")

    p = sub.add_parser("shell", parents=[topo], help="p4runtime-shell on one switch",
                       description="Open p4runtime-shell on SWITCH; pushes the program only "
                       "if the switch does not run it already (a push clears its tables).")
    p.add_argument("switch", metavar="SWITCH", help="switch name, e.g. s1")
    _pipeline_options(p)
    _p4runtime_options(p)
    return parser


def _builder_args(args) -> dict:
    allowed = {"star": {"hosts"}, "leaf-spine": {"leaves", "spines", "hosts"},
               "fat-tree": {"k"}}[args.topo]
    given = {name: getattr(args, name) for name in ("k", "hosts", "leaves", "spines")
             if getattr(args, name) is not None}
    extra = set(given) - allowed
    if extra:
        raise ControllerError(f"--{sorted(extra)[0]} does not apply to --topo {args.topo}")
    grpc_host = {} if args.grpc_host is None else {"grpc_host": args.grpc_host}
    return {**given, "bw_mbit": args.bw, "delay_ms": args.delay,
            "grpc_base_port": args.grpc_port, "thrift_base_port": args.thrift_port,
            **grpc_host}


def with_host_addrs(topo: Topology, specs: list[str]) -> Topology:
    """`topo` with the hosts' MACs and IPv4 addresses of --host-addr NAME=MAC,IP/LEN (a
    length left out keeps the host's); checked as a topology file is."""
    data = topo.to_dict()
    hosts = {h["name"]: h for h in data["hosts"]}
    for spec in specs:
        name, eq, rest = spec.partition("=")
        mac, comma, addr = rest.partition(",")
        if not (eq and comma and mac and addr):
            raise ControllerError(f"--host-addr {spec!r}: expected NAME=MAC,IP/LEN, e.g. "
                                  f"h1=0c:42:a1:00:00:01,192.168.10.1/24")
        topo.host(name)             # names the topology's hosts when it is not one
        try:
            iface = ipaddress.IPv4Interface(addr)
        except ValueError:
            raise ControllerError(f"--host-addr {spec!r}: {addr!r} is not IPv4 ADDRESS/LEN") \
                from None
        hosts[name].update(mac=mac.lower(), ip=str(iface.ip))
        if "/" in addr:
            hosts[name]["prefix_len"] = iface.network.prefixlen
    return Topology.from_dict(data)


def load_topology(args) -> Topology:
    if args.topology and args.topo:
        raise ControllerError("give either --topo or --topology, not both")
    if args.topology:
        if args.grpc_host is not None:
            raise ControllerError("--grpc-host applies to a built topology (--topo); in a "
                                  "file, edit switches[].grpc_addr")
        topo = Topology.load(args.topology)
    elif args.topo:
        topo = BUILDERS[args.topo](**_builder_args(args))
    else:
        raise ControllerError("no topology: give --topo star|leaf-spine|fat-tree or "
                              "--topology FILE")
    if args.host_addr:
        topo = with_host_addrs(topo, args.host_addr)
    if args.loss is not None:
        topo = topo.with_loss(args.loss)
    if args.jobs == ["none"]:
        topo = topo.with_jobs([])
    elif args.jobs:
        topo = topo.with_jobs(make_jobs(args.jobs, topo))
    elif not args.topology:
        topo = topo.with_jobs(make_jobs(["all"], topo))
    for job in topo.jobs:
        try:
            build_tree(topo, job)   # a job that does not fit fails here, before any switch
        except TopologyError as e:
            raise ControllerError(f"{e} (choose the workers with --jobs, or --jobs none)") \
                from None
    return topo


def _election_id(text: str) -> tuple[int, int]:
    try:
        hi, lo = (int(x) for x in text.split(","))
    except ValueError:
        raise ControllerError(f"--election-id: expected HI,LO, got {text!r}") from None
    return hi, lo


def _print_plan(topo: Topology, sessions: dict[int, int], p4info=None) -> None:
    for job in topo.jobs:
        tree = build_tree(topo, job)
        print(f"job {job.id}: {len(job.workers)} workers, {job.slots} slots, {job.encoding} "
              f"results, {job.mode}, session {sessions[job.id]}, root {tree.root}")
        for name in sorted(tree.nodes, key=lambda n: topo.switch(n).device_id):
            node = tree.nodes[name]
            up = f"parent {node.parent} via port {node.parent_port}" if node.parent else "root"
            kids = ", ".join(f"{c.bit}:{c.node}@{c.port}" for c in node.children)
            print(f"  {name}: {up}; children {kids}")
    for switch, rows in desired_state(topo, sessions, p4info).items():
        print(f"{switch}: {len(rows)} entries")
        for e in rows:
            print(f"  {e!r}")


# How long the controller looks for a first switch before it says none is running.
FIRST_SWITCH_WAIT = 3.0


def _require_a_switch(topo: Topology, names: list[str] | None, timeout: float) -> None:
    """One short error, soon, when no switch of the topology is running at all."""
    switches = [topo.switch(n) for n in names] if names else list(topo.switches)
    if listening(switches, min(timeout, FIRST_SWITCH_WAIT)):
        return
    where = switches[0].grpc_addr + (f" .. {switches[-1].grpc_addr}" if len(switches) > 1
                                     else "")
    flags = {"star": {"hosts": "--hosts"}, "fat-tree": {"k": "--k"},
             "leaf-spine": {"leaves": "--leaves", "spines": "--spines",
                            "hosts": "--hosts-per-leaf"}}.get(topo.kind, {})
    sizes = "".join(f" {flag} {topo.params[key]}" for key, flag in flags.items()
                    if key in topo.params)
    raise ControllerError(
        f"no switch answers: nothing listens at {where} ({len(switches)} switch"
        f"{'es' if len(switches) != 1 else ''}). Start "
        f"them first, e.g. as root: .venv/bin/python mininet/run.py --topo {topo.kind}{sizes} "
        f"--switches-only")


def cmd_program(args) -> int:
    topo = load_topology(args)
    for name in args.switches or []:
        topo.switch(name)
    if args.reset and args.new_session:
        raise ControllerError("--reset removes the jobs: it takes no --new-session")
    sessions = SessionsFile(sessions_path(args), topo, renew=args.new_session)
    if args.dry_run:
        _print_plan(topo, sessions.sessions(), _load_pipeline(args, topo).p4info)
        return 0
    if args.watch:
        return cmd_watch(args, topo)
    pipeline = None if args.reset else _load_pipeline(args, topo)
    _require_a_switch(topo, args.switches, args.timeout)
    results = program(topo, pipeline, sessions.sessions(), args.switches, args.timeout,
                      _election_id(args.election_id))
    if not args.reset:
        sessions.write()
    total, failed = SyncResult(switch=None), []
    width = max(len(s.name) for s, _ in results)
    for switch, r in results:
        if isinstance(r, ControllerError):
            failed.append(r)
            print(f"{switch.name:<{width}}  {switch.grpc_addr}  FAILED", flush=True)
            continue
        total.pushed += r.pushed
        for f in ("inserted", "modified", "deleted", "kept"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        how = "pipeline pushed" if r.pushed else "pipeline kept"
        note = f"; {r.note}" if r.note else ""
        print(f"{switch.name:<{width}}  {switch.grpc_addr}  {how}: {r.written} written "
              f"({r.inserted} inserted, {r.modified} modified, {r.deleted} deleted), "
              f"{r.kept} unchanged{note}", flush=True)
    verb = "reset" if args.reset else "programmed"
    print(f"{len(results) - len(failed)} of {len(results)} switches {verb}: {total.written} "
          f"written ({total.inserted} inserted, {total.modified} modified, {total.deleted} "
          f"deleted), {total.kept} unchanged, {int(total.pushed)} pipelines pushed")
    for e in failed:
        print(f"error: {e}", file=sys.stderr)
    return 1 if failed else 0


def sessions_path(args) -> str:
    if args.sessions:
        return args.sessions
    folder = os.path.dirname(os.path.abspath(args.topology)) if args.topology else os.getcwd()
    return os.path.join(folder, "sessions.json")


def cmd_watch(args, topo: Topology) -> int:
    if args.reset or args.switches:
        raise ControllerError("--watch keeps every switch programmed: it takes neither "
                              "--reset nor --switches")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def log(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    path = sessions_path(args)
    watcher = Watcher(topo, _load_pipeline(args, topo), path, _election_id(args.election_id),
                      log=log, renew=args.new_session)
    for switch, r in watcher.start(args.timeout):
        if isinstance(r, ControllerError):
            log(f"{switch.name}: not programmed yet ({r}); retrying until it answers")
        else:
            log(f"{switch.name}: {'pipeline pushed' if r.pushed else 'pipeline kept'}, "
                f"{r.written} written, {r.kept} unchanged")
    jobs = ", ".join(f"job {j} session {watcher.sessions.session(j)}"
                     for j in sorted(watcher.sessions.jobs)) or "no jobs"
    log(f"watching {len(topo.switches)} switches; {jobs}; sessions in {path}; Ctrl-C stops")
    while not stop.wait(0.5):
        pass
    watcher.stop()
    log(f"stopped; {len(watcher.restarts)} switch restart(s) handled")
    return 0


def _load_pipeline(args, topo: Topology | None = None) -> Pipeline:
    """The program to push; a job its elements per packet cannot aggregate is refused."""
    prof = profile(args.profile)
    p4info = args.p4info or str(prof.p4info)
    bmv2_json = args.bmv2_json or str(prof.bmv2_json)
    try:
        pipeline = Pipeline.load(p4info, bmv2_json)
        elems = elems_of(bmv2_json)
    except P4InfoError as e:
        raise ControllerError(str(e)) from None
    except (OSError, ValueError) as e:
        raise ControllerError(f"{bmv2_json}: {e}") from None
    if topo is not None and elems is not None:
        loaded = replace(prof, elems=elems, build=Path(bmv2_json).parent)
        try:
            check_jobs(loaded, topo)
        except ValueError as e:
            raise ControllerError(str(e)) from None
    return pipeline


def cmd_topology(args) -> int:
    topo = load_topology(args)
    if args.output:
        topo.save(args.output)
        print(f"wrote {args.output}: {topo.kind}, {len(topo.switches)} switches, "
              f"{len(topo.hosts)} hosts, {len(topo.links)} links, {len(topo.jobs)} jobs",
              file=sys.stderr)
    else:
        sys.stdout.write(topo.to_json())
    return 0


def cmd_stats(args) -> int:
    topo = load_topology(args)
    election = _election_id(args.election_id)
    _require_a_switch(topo, args.switches, args.timeout)

    def work(switch):
        with Session(switch, election, args.timeout) as p4rt:
            return read_stats(p4rt)

    failed = 0
    for _, r in for_each_switch(topo, args.switches, work):
        if isinstance(r, ControllerError):
            failed += 1
            print(f"error: {r}", file=sys.stderr)
        else:
            print(format_stats(r, topo))
    return 1 if failed else 0


def cmd_shell(args) -> int:
    topo = load_topology(args)
    argv = shell_cmd.shell_argv(topo.switch(args.switch), _load_pipeline(args), args.timeout,
                                _election_id(args.election_id))
    print(" ".join(argv), file=sys.stderr, flush=True)
    os.execv(argv[0], argv)
    return 1  # not reached


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        build_parser().print_help(sys.stderr)
        return 2
    if argv[0] not in COMMANDS + ("-h", "--help"):
        argv = ["program"] + argv
    args = build_parser().parse_args(argv)
    handler = {"program": cmd_program, "topology": cmd_topology, "stats": cmd_stats,
               "shell": cmd_shell}[args.command]
    try:
        return handler(args)
    except (ControllerError, TopologyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0


if __name__ == "__main__":
    sys.exit(main())
