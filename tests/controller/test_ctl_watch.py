"""`controller/main.py --watch` against a softswitch process that is killed and started again:
the switch is re-programmed and its job moves to the next session in the sessions file."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
from test_ctl_switches import BMV2_JSON, P4INFO, REPO, _softswitch_missing, free_ports

from controller import topology as T
from controller.p4info import Pipeline
from controller.program import canonical_state, desired_state, read_state
from controller.session import Session
from controller.topology import Topology
from controller.watch import next_session

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
    grpc_port, thrift_port = free_ports(2)
    data = T.star(2).with_jobs([T.JobSpec(1, ("h1", "h2"), 16)]).to_dict()
    data["switches"][0]["grpc_addr"] = f"127.0.0.1:{grpc_port}"
    data["switches"][0]["thrift_port"] = thrift_port
    topo = Topology.from_dict(data)
    path = tmp_path / "topo.json"
    topo.save(str(path))
    (s1,) = topo.switches
    switch = start_switch(s1, tmp_path / "s1.log")
    watch = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "controller", "main.py"), "--topology", str(path),
         "--p4info", P4INFO, "--bmv2-json", BMV2_JSON, "--timeout", "60", "--watch"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        q = lines_of(watch)
        expect(q, "watching 1 switches", 90, seen)
        sessions = json.loads((tmp_path / "sessions.json").read_text())
        first = sessions["jobs"]["1"]["session"]
        assert sessions["jobs"]["1"]["epoch"] == 0 and sessions["down"] == {}

        switch.send_signal(signal.SIGKILL)
        switch.wait()
        expect(q, "s1: gone", 30, seen)
        assert "s1" in json.loads((tmp_path / "sessions.json").read_text())["down"]
        switch = start_switch(s1, tmp_path / "s1.log")
        line = expect(q, "s1: back without its program", 90, seen)
        assert f"job 1 session {first} -> {next_session(first)}" in line

        job = json.loads((tmp_path / "sessions.json").read_text())["jobs"]["1"]
        assert (job["session"], job["epoch"]) == (next_session(first), 1)
        assert job["restarts"][0]["switch"] == "s1"
        want = canonical_state(desired_state(topo), Pipeline.load(P4INFO, BMV2_JSON).p4info)
        with Session(s1, election_id=(0, 2), connect_timeout=30) as session:
            assert session.use_running_pipeline()
            assert set(read_state(session)) == set(want["s1"])

        watch.send_signal(signal.SIGTERM)
        assert watch.wait(timeout=30) == 0
        expect(q, "1 switch restart(s) handled", 5, seen)
    finally:
        for p in (watch, switch):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("session, after", [(1, 2), (65534, 65535), (65535, 1)])
def test_next_session_is_newer_and_never_0(session, after):
    assert next_session(session) == after
    assert 0 < (after - session) % 65536 < 32768     # newer in serial-number arithmetic
