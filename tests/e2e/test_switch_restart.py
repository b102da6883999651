"""A switch killed and restarted mid-training: the controller in watch mode re-programs it and
moves the job to a new session, and the workers resume with identical models on every rank.

Each run builds a fresh star of 4 hosts, trains, kills the switch process (SIGKILL) well into
the training and starts it again on the same interfaces. NATSWITCH_RESTART_RUNS sets how many
runs (default 2; the acceptance figure is 10 of 10 per target). One more run on a leaf-spine
restarts a leaf below the job's root. Each run prints the time from starting the new switch
process to the controller having it programmed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "mininet"))

from conftest import e2e_switch  # noqa: E402

from controller import topology  # noqa: E402
from controller.p4info import Pipeline  # noqa: E402
from controller.session import ControllerError  # noqa: E402
from controller.topology import JobSpec  # noqa: E402
from controller.watch import Watcher  # noqa: E402

RUNS = int(os.environ.get("NATSWITCH_RESTART_RUNS", "2"))
STEPS = 40              # the workers stall while the switch is down: no run ends early
KILL_AT_STEP = 15


def lead_step(group) -> int:
    last = min(group.procs, key=lambda w: w.rank).last_step()
    return -1 if last is None else last[0]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:.0f} s")
        time.sleep(0.1)


def kill_and_restart(switch) -> float:
    """SIGKILL the switch process (no clean shutdown), start it again; time.time() of the
    new start."""
    proc = switch.proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    switch.proc = None
    started = time.time()
    switch.start([])
    return started


@pytest.mark.parametrize("run", range(RUNS))
def test_switch_restart_mid_training_resumes_with_identical_models(tmp_path, run):
    # the first run restarts BMv2 where it is present, the others softswitch
    restart_mid_training(tmp_path, topology.star(hosts=4), "s1", run, bmv2=run == 0)


def test_a_restarted_leaf_below_the_root_is_followed_too(tmp_path):
    # s1 is a leaf of h1 and h2; the job's root is the spine s3, which keeps its registers:
    # the new session resets the job's slots there.
    restart_mid_training(tmp_path, topology.leaf_spine(leaves=2, spines=1, hosts=2), "s1", 0)


def restart_mid_training(tmp_path, base, victim: str, run: int, bmv2: bool = False) -> None:
    from emulation import Emulation
    from p4switch import resolve_kind
    from workers import WorkerGroup

    kind = resolve_kind(e2e_switch(bmv2))
    hosts = ("h1", "h2", "h3", "h4")
    topo = base.with_jobs([JobSpec(1, hosts, slots=32, encoding="cnat8")])
    topo_path = tmp_path / "topology.json"
    topo.save(str(topo_path))
    pipeline = Pipeline.load(str(REPO / "p4src/build/agg.p4info.txt"),
                             str(REPO / "p4src/build/agg.json"))
    log: list[str] = []
    group = WorkerGroup()
    with Emulation(topo, kind, tmp_path / "logs") as emu:
        watcher = Watcher(topo, pipeline, str(tmp_path / "sessions.json"), log=log.append)
        try:
            errors = [f"{s.name}: {r}" for s, r in watcher.start(60)
                      if isinstance(r, ControllerError)]
            assert not errors, errors
            first_session = watcher.sessions.session(1)
            wargs = ["--topology", str(topo_path), "--steps", str(STEPS), "--timeout", "20",
                     "--seed", str(run)]
            for rank, host in enumerate(hosts):
                group.start(emu.host(host), host, 1, rank, tmp_path, wargs)
            wait_for(lambda: lead_step(group) >= KILL_AT_STEP or not group.running(), 180,
                     f"step {KILL_AT_STEP}")
            assert len(group.running()) == len(hosts), "a worker ended before the restart"
            started = kill_and_restart(emu.net.get(victim))
            assert watcher.wait_restarts(1, 120), f"the controller did not re-program " \
                f"{victim}:\n" + "\n".join(log)
            restart = watcher.restarts[0]
            assert restart.switch == victim
            print(f"\n{kind} {topo.kind} run {run}: restart-to-programmed "
                  f"{restart.programmed_at - started:.2f} s (answered after "
                  f"{restart.back_at - started:.2f} s), killed at step {lead_step(group)}",
                  flush=True)
            assert restart.sessions == {1: (first_session, watcher.sessions.session(1))}
            assert group.wait(time.monotonic() + 300), "workers still running after 300 s"
        finally:
            watcher.stop()
            group.stop()
    results = group.results()
    failed = [f"{r['host']}: {r.get('error')}" for r in results if r.get("exit_code") != 0]
    assert not failed, failed
    assert all(r["restarts_followed"] >= 1 for r in results), \
        [r.get("restarts_followed") for r in results]   # the restart came before the end
    assert len({r["params_sha256"] for r in results}) == 1, "models differ between ranks"
    assert all(len(r["steps"]) == STEPS for r in results)
