"""`controller/main.py --watch` against softswitch processes, one killed and started again: the
switch is re-programmed, and its job moves to the next session on every switch of its tree
before the sessions file tells the workers."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_ctl_switches import (
    BMV2_JSON,
    P4INFO,
    REPO,
    _softswitch_missing,
    free_ports,
    job_sessions_on,
    with_addresses,
)

from controller import topology as T
from controller.job_sessions import next_session
from controller.p4info import Pipeline
from controller.program import canonical_state, desired_state, read_state
from controller.session import Session

pytestmark = pytest.mark.skipif(_softswitch_missing() is not None,
                                reason=str(_softswitch_missing()))


def start_switch(switch, log_path):
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "softswitch", "--device-id",
                                 str(switch.device_id), "--grpc-server-addr", switch.grpc_addr,
                                 "--no-p4"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def lines_of(proc):
    q = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line.rstrip("\n"))
        q.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return q


def expect(q, text, timeout, seen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if text in line:
            return line
    pytest.fail(f"no line with {text!r} within {timeout} s:\n" + "\n".join(seen))


def test_watch_reprograms_a_restarted_switch_and_moves_its_job(tmp_path):
    # h1 on leaf s1, h3 on leaf s2, the root on the spine: the job spans all three
    base = T.leaf_spine(leaves=2, spines=1, hosts=2)
    ports = free_ports(6)
    topo = with_addresses(base, ports[:3], ports[3:]).with_jobs(
        [T.JobSpec(1, ("h1", "h3"), 16), T.JobSpec(2, ("h2", "h4"), 8)])
    path = tmp_path / "topo.json"
    topo.save(str(path))
    s1 = topo.switch("s1")
    procs = {s.name: start_switch(s, tmp_path / f"{s.name}.log") for s in topo.switches}
    watch = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "controller", "main.py"), "--topology", str(path),
         "--p4info", P4INFO, "--bmv2-json", BMV2_JSON, "--timeout", "60", "--watch"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        q = lines_of(watch)
        expect(q, "watching 3 switches", 90, seen)
        sessions = json.loads((tmp_path / "sessions.json").read_text())
        first = {j: sessions["jobs"][str(j)]["session"] for j in (1, 2)}
        assert sessions["jobs"]["1"]["epoch"] == 0 and sessions["down"] == {}
        assert job_sessions_on(topo, (0, 2)) == {"s1": {1: first[1], 2: first[2]},
                                         "s2": {1: first[1], 2: first[2]},
                                         "s3": {1: first[1], 2: first[2]}}

        procs["s1"].send_signal(signal.SIGKILL)
        procs["s1"].wait()
        expect(q, "s1: gone", 30, seen)
        assert "s1" in json.loads((tmp_path / "sessions.json").read_text())["down"]
        procs["s1"] = start_switch(s1, tmp_path / "s1.log")
        line = expect(q, "s1: back without its program", 90, seen)
        moved = {j: next_session(first[j]) for j in (1, 2)}
        assert f"job 1 session {first[1]} -> {moved[1]}" in line
        assert f"job 2 session {first[2]} -> {moved[2]}" in line

        # by the time the file says so, every switch of the trees holds the new sessions
        jobs = json.loads((tmp_path / "sessions.json").read_text())["jobs"]
        for j in (1, 2):
            assert (jobs[str(j)]["session"], jobs[str(j)]["epoch"]) == (moved[j], 1)
            assert jobs[str(j)]["restarts"][0]["switch"] == "s1"
        assert job_sessions_on(topo, (0, 2)) == {s: moved for s in ("s1", "s2", "s3")}
        want = canonical_state(desired_state(topo, moved),
                               Pipeline.load(P4INFO, BMV2_JSON).p4info)
        for s in topo.switches:
            with Session(s, election_id=(0, 2), connect_timeout=30) as session:
                assert session.use_running_pipeline()
                assert set(read_state(session)) == set(want[s.name])

        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=30) == 0
        expect(q, "1 switch restart(s) handled", 5, seen)
    finally:
        for p in (watch, *procs.values()):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("session, after", [(1, 2), (65534, 65535), (65535, 1)])
def test_next_session_is_newer_and_never_0(session, after):
    assert next_session(session) == after
    assert 0 < (after - session) % 65536 < 32768     # newer in serial-number arithmetic
