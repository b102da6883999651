"""Benches in Mininet: an emulation that waits its turn, probes in the hosts, port counters.

Only one emulation runs on a machine at a time (mininet/emulation.py refuses to start over
another); `started` polls until the other one is gone. What crossed each link direction is
read twice around the timed calls: from the switches' own port counters
(NatIngress.port_rx / NatEgress.port_tx over P4Runtime, controller/stats.py) and from the
kernel's counters of the switches' interfaces (/sys/class/net/<switch>-eth<port>). The
bytes are the kernel's: a v1model counter counts a packet's length as it entered the
switch, so port_tx misstates packets the switch made larger or smaller (FIXED32 results
of CNAT8 contributions, partial sums); the packet counts of both must agree.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, UNREAD, Reading, cpu_of, link_loads, mininet_module, say

PROBE = REPO / "bench" / "host_probe.py"


def why_not_runnable() -> str | None:
    if os.geteuid() != 0:
        return "Mininet needs root"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Debian's mininet package is not installed (make setup installs it)"
    return None


@contextlib.contextmanager
def started(topo, kind: str, workdir: Path, shape: bool = True, poll: float = 30.0,
            patience: float = 3600.0, profile: str = "default"):
    """The topology emulated and programmed by the controller with the compiled profile's
    program (controller/profiles.py); yields the Emulation."""
    from mininet.log import setLogLevel

    mininet_module("p4switch")      # emulation.py imports it by that name
    Emulation = mininet_module("emulation").Emulation

    from controller.p4info import Pipeline

    setLogLevel("critical")     # tc warns that the HTB quantum is big at high rates; harmless
    try:
        from controller.profiles import PROFILES, check_jobs
    except ImportError:         # a checkout from before the profiles (a baseline): one program
        if profile != "default":
            raise
        build = REPO / "p4src" / "build"
        pipeline = Pipeline.load(str(build / "agg.p4info.txt"), str(build / "agg.json"))
    else:
        prof = PROFILES[profile]
        check_jobs(prof, topo)
        pipeline = Pipeline.load(str(prof.p4info), str(prof.bmv2_json))
    deadline = time.monotonic() + patience
    while True:
        emu = Emulation(topo, kind, workdir / "logs", shape=shape)
        busy = emu.conflicts()
        if not busy:
            try:
                emu.start()
                break
            except RuntimeError as e:
                emu.stop()
                if "another emulation" not in str(e):
                    raise
                busy = [str(e)]
        if time.monotonic() > deadline:
            raise RuntimeError("gave up waiting for the other emulation: " + "; ".join(busy))
        say(f"waiting {poll:.0f} s: {'; '.join(busy)}")
        time.sleep(poll)
    try:
        emu.natswitch_pipeline = pipeline
        install(emu, topo, 1)
        yield emu
    finally:
        emu.stop()


def install(emu, topo, session: int) -> None:
    """Programs the switches with every job of `topo` in `session` (the controller chooses a
    job's session and the switches drop every other; a checkout from before that, which
    bench/speed_targets.py also runs, takes none)."""
    import inspect

    from controller.program import program

    pipeline = emu.natswitch_pipeline
    if "sessions" in inspect.signature(program).parameters:
        results = program(topo, pipeline, {j.id: session for j in topo.jobs})
    else:
        results = program(topo, pipeline)
    failed = [f"{s.name}: {r}" for s, r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError("programming failed: " + "; ".join(failed))


# ---------------------------------------------------------------- counters


def read_ports(topo) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """(switch, port) -> (rx packets, rx bytes, tx packets, tx bytes) from the switches."""
    from controller.session import Session
    from controller.stats import PORT_RX, PORT_TX, read_stats

    out = {}
    for s in topo.switches:
        with Session(s, (0, 3), 10.0) as session:
            st = read_stats(session)
        for p in topo.ports(s.name):
            rx, tx = st.counters.get(PORT_RX, {}), st.counters.get(PORT_TX, {})
            out[s.name, p.port] = (*rx.get(p.port, (0, 0)), *tx.get(p.port, (0, 0)))
    return out


def read_kernel(topo) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """The same from the kernel: frames the switch's interfaces received and sent."""
    out = {}
    for s in topo.switches:
        for p in topo.ports(s.name):
            d = Path("/sys/class/net", f"{s.name}-eth{p.port}", "statistics")
            out[s.name, p.port] = tuple(int((d / f).read_text()) for f in (
                "rx_packets", "rx_bytes", "tx_packets", "tx_bytes"))
    return out


def switch_cpu(emu, topo) -> dict[str, tuple[Reading, Reading]]:
    """(CPU seconds, of them system) each switch process has used so far (common.cpu_of: NaN
    where there is no process)."""
    out = {}
    for s in topo.switches:
        proc = getattr(emu.net.get(s.name), "proc", None)
        out[s.name] = cpu_of(proc.pid) if proc is not None else (UNREAD, UNREAD)
    return out


# ---------------------------------------------------------------- probes


def run_probes(emu, topo_path: Path, hosts: list[str], workdir: Path, *, job: int,
               session: int, encoding: str, elements: int, reps: int, topo,
               ps: tuple[str, str] | None = None, gloo: str | None = None,
               timeout: float = 60.0, budget: float = 1800.0, extra: tuple[str, ...] = (),
               ps_cmd: tuple[str, ...] = ("baseline.py",)) -> tuple[list[dict], list, list]:
    """Probes on `hosts` (ranks in that order); the counters are read once all have warmed
    up and again when all are done. ps: (host, ip) of the parameter server, started here
    as worker/<ps_cmd[0]> with the arguments ps_cmd[1:]; gloo: ip:port of the rendezvous,
    for Gloo's allreduce among the hosts instead; extra: more arguments for every probe.
    Returns (records by rank, link loads of the timed calls from the kernel's counters,
    the same from the switches' counters)."""
    if ps is None and gloo is None:
        install(emu, topo, session)
    sync = workdir / f"sync-{job}-{session}"
    shutil.rmtree(sync, ignore_errors=True)
    sync.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs, server = [], None
    try:
        if ps is not None:
            log = open(workdir / f"ps-{session}.log", "wb")
            server = emu.host(ps[0]).popen(
                [sys.executable, str(REPO / "worker" / ps_cmd[0]), *ps_cmd[1:], "--workers",
                 str(len(hosts)), "--slots", "64"], stdout=log, stderr=subprocess.STDOUT,
                cwd=str(REPO), env=env)
            log.close()
        for rank, host in enumerate(hosts):
            out = sync / f"{host}.json"
            cmd = [sys.executable, str(PROBE), "--topology", str(topo_path), "--host", host,
                   "--job", str(job), "--session", str(session), "--encoding", encoding,
                   "--elements", str(elements), "--reps", str(reps), "--timeout", str(timeout),
                   "--sync", str(sync), "--out", str(out), *extra]
            if ps is not None:
                cmd += ["--ps", ps[1], "--rank", str(rank), "--workers", str(len(hosts))]
            elif gloo is not None:
                cmd += ["--gloo", gloo, "--rank", str(rank), "--workers", str(len(hosts))]
            log = open(sync / f"{host}.log", "wb")
            procs.append((host, out, emu.host(host).popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env=env)))
            log.close()
        deadline = time.monotonic() + budget
        ready = [sync / f"ready-{h}" for h in hosts]
        while not all(r.exists() for r in ready):
            dead = [h for h, _, p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"probes did not warm up ({', '.join(dead) or 'timeout'}); "
                                   f"see {sync}/*.log")
            time.sleep(0.05)
        sw_before = read_ports(topo)
        k_before = read_kernel(topo)        # the kernel's innermost: it is read fastest
        cpu_before = switch_cpu(emu, topo)
        (sync / "go").touch()
        for host, _, p in procs:
            try:
                p.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"probe on {host} still running after {budget:.0f} s") \
                    from None
        cpu_after = switch_cpu(emu, topo)
        k_after = read_kernel(topo)
        sw_after = read_ports(topo)
    finally:
        for _, _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if server is not None:
            server.terminate()
            server.wait()
    records = []
    for host, out, p in procs:
        if not out.exists():
            raise RuntimeError(f"probe on {host} wrote no result (exit {p.returncode}); "
                               f"see {sync}/{host}.log")
        records.append(json.loads(out.read_text()))
    errors = [f"{r['host']}: {r['error']}" for r in records if r["error"]]
    if errors:
        raise RuntimeError("allreduce failed: " + "; ".join(errors))
    for r in records:          # the switches' CPU seconds over the timed calls, all reps,
        # and the steps of the clocks they were read with (speed_targets.cpu_note)
        spans = {k: [cpu_after[k][i] - v[i] for i in (0, 1)] for k, v in cpu_before.items()}
        r["switch_cpu_s"] = {k: [x.value for x in v] for k, v in spans.items()}
        r["switch_cpu_step_s"] = {k: [x.step for x in v] for k, v in spans.items()}
    return (records, link_loads(topo, k_before, k_after),
            link_loads(topo, sw_before, sw_after))
