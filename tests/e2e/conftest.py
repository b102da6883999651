"""End-to-end fixtures: a Mininet emulation of a topology, programmed by the controller.

These tests need root and network namespaces (CI runs as root). The switch target
follows NATSWITCH_SWITCH (auto, bmv2 or soft) when it is set. Unset, a test runs on
softswitch, which tests/dataplane holds equal to BMv2 frame by frame, counter by counter,
and which forwards about 30 times faster; the tests that stand for the real target (the
main job, a restart, the Tofino twin on both targets, and the fat-tree, whose 20 switches
BMv2 loads faster than softswitch compiles them) ask for BMv2 with
e2e_switch(bmv2=True) and get it where simple_switch_grpc is on PATH.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "mininet"))

pytestmark = pytest.mark.root


def e2e_switch(bmv2: bool = False) -> str:
    """The --switch of an end-to-end run: NATSWITCH_SWITCH if set, else "auto" (BMv2 where
    present) for the tests that stand for BMv2 and "soft" for the others."""
    return os.environ.get("NATSWITCH_SWITCH") or ("auto" if bmv2 else "soft")


def why_not_runnable() -> str | None:
    if os.geteuid() != 0:
        return "end-to-end Mininet tests need root (CI runs them as root)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Debian's mininet package is not installed (make test installs it)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = why_not_runnable()
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.root)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@contextlib.contextmanager
def running(topo, workdir: Path, bmv2: bool = False):
    """The topology emulated and programmed; yields (emulation, topology file)."""
    from emulation import Emulation
    from p4switch import resolve_kind

    from controller.p4info import Pipeline

    kind = resolve_kind(e2e_switch(bmv2))
    topo_path = workdir / "topology.json"
    topo.save(str(topo_path))
    pipeline = Pipeline.load(str(REPO / "p4src/build/agg.p4info.txt"),
                             str(REPO / "p4src/build/agg.json"))
    with Emulation(topo, kind, workdir / "logs") as emu:
        emu.pipeline = pipeline
        emu.sessions = {j.id: next(_sessions) for j in topo.jobs}
        reprogram(emu, topo)
        yield emu, topo_path


def reprogram(emu, topo) -> None:
    """Programs the switches with `topo` (its loss, say), the jobs in their sessions."""
    from controller.program import program

    errors = [f"{s.name}: {r}" for s, r in program(topo, emu.pipeline, emu.sessions)
              if isinstance(r, Exception)]
    assert not errors, "programming failed: " + "; ".join(errors)
    emu.programmed = topo


# Each run of probes is a new run of its job: the controller moves the job to a new session
# first (the switches hold the last run's uses of the old one, and drop every other session).
_sessions = itertools.count(1)


def start_probes(emu, topo_path: Path, job, workdir: Path, *extra: str) -> list:
    """One probe per worker of the job, in a session moved to for them; returns [(host,
    Popen, result path)]."""
    emu.sessions[job.id] = next(_sessions)
    reprogram(emu, emu.programmed)
    session = str(emu.sessions[job.id])
    procs = []
    for host in job.workers:
        out = workdir / f"probe-j{job.id}-{host}.pkl"
        out.unlink(missing_ok=True)
        log = open(workdir / f"probe-j{job.id}-{host}.log", "wb")
        cmd = [sys.executable, str(REPO / "tests/e2e/probe.py"), "--topology", str(topo_path),
               "--host", host, "--job", str(job.id), "--out", str(out), "--session", session,
               *extra]
        proc = emu.host(host).popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO),
                                    env=dict(os.environ, PYTHONPATH=str(REPO)))
        log.close()
        procs.append((host, proc, out))
    return procs


def finish_probes(procs, timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    records = []
    for host, proc, out in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for _, p, _ in procs:
                p.kill()
            pytest.fail(f"probe on {host} still running after {timeout:.0f} s")
        assert out.exists(), f"probe on {host} wrote no result (exit {proc.returncode})"
        records.append(pickle.loads(out.read_bytes()))
    return sorted(records, key=lambda r: r["rank"])


def assert_exact(records: list[dict]) -> int:
    from harness.workers import Trace, check_exact

    errors = [f"rank {r['rank']}: {r['error']}" for r in records if r["error"]]
    assert not errors, "; ".join(errors)
    traces = []
    for r in records:
        t = Trace()
        t.rows = r["rows"]
        traces.append(t)
    return check_exact(traces, [r["tensors"] for r in records],
                       [r["outputs"] for r in records], len(records))
