"""Workers that follow the sessions file across a switch restart (worker/allreduce/restart.py),
through the compiled program on softswitch in process. A restart is the switch's registers
reset while nothing gets through, then the job moved to its next session as the controller
does it (controller/job_sessions.py): on the switch first, then in the sessions file."""

import threading
import time

import numpy as np
import pytest

from controller.job_sessions import SessionsFile
from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError
from worker.allreduce.restart import RestartFollower, SessionsView, WatchedPort
from worker.transport import Port

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")

N = 4
HOSTS = [f"h{i + 1}" for i in range(N)]


class Fabric:
    """The star, its sessions file, and a switch that can be restarted."""

    def __init__(self, tmp_path):
        topo = star(N).with_jobs([JobSpec(1, tuple(HOSTS), slots=4, encoding="fixed32")])
        self.net = SwitchNetwork(topo, session=7)
        self.sessions = SessionsFile(str(tmp_path / "sessions.json"), topo, first=7)
        self.sessions.write()
        self.lock = threading.Lock()
        self.down = False
        inject = self.net.inject

        def guarded(switch, port, frame):
            with self.lock:
                if not self.down:
                    inject(switch, port, frame)
        self.net.inject = guarded

    def go_down(self) -> None:
        with self.lock:
            self.down = True
            self.sessions.mark_down("s1", time.time())
            for reg in self.net.switches["s1"].registers.values():
                reg.reset()                     # what a restarted switch has lost

    def come_back(self) -> None:
        now = time.time()
        moved = self.sessions.move("s1")
        self.net.set_session(1, moved[1][1])
        with self.lock:
            self.down = False
        self.sessions.restarted("s1", now, now, moved)

    def follower(self, rank, port: Port | None = None, logs=None):
        view = SessionsView(self.sessions.path, 1)
        inner = port or self.net.ports[HOSTS[rank]]
        client = AllReduceClient(WatchedPort(inner, view), self.net.framer(HOSTS[rank]),
                                 self.net.job_params(1, wire.ENC_FIXED32),
                                 seed=rank, timeout=10, rto=0.2, rto_max=0.5)
        log = None if logs is None else logs[rank].append
        return RestartFollower(client, view, rank, wait=20, log=log)


class HeldPort(Port):
    """Passes frames through; once armed, from its next chunk of data on (a priming round
    is all zeros), holds back everything it receives (results the switch sent but that had
    not arrived when it died)."""

    def __init__(self, inner, framer):
        super().__init__()
        self.inner, self.framer = inner, framer
        self.armed, self.holding = False, threading.Event()

    def send(self, frame):
        self.inner.send(frame)
        parsed = self.framer.parse(frame)
        if self.armed and parsed and parsed[1].any():      # data, not a priming round
            self.holding.set()

    def recv(self, timeout):
        if self.holding.is_set():
            time.sleep(min(timeout or 0.05, 0.05))
            return None
        return self.inner.recv(timeout)

    def lose_held(self):
        while self.inner.recv(0.0) is not None:
            pass
        self.armed = False
        self.holding.clear()


def tensors(calls, size):
    rng = np.random.default_rng(3)
    return [[rng.standard_normal(size).astype(np.float32) for _ in range(calls)]
            for _ in range(N)]


def run(followers, xs, before_call=None):
    """Each rank's calls in a thread; before_call(rank, k) may block. Outputs and errors."""
    calls = len(xs[0])
    out = [[None] * calls for _ in range(N)]
    errors = [None] * N

    def work(rank):
        try:
            for k in range(calls):
                if before_call:
                    before_call(rank, k)
                out[rank][k] = followers[rank].allreduce(xs[rank][k])
        except BaseException as e:      # reported to the test thread
            errors[rank] = e

    threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in range(N)]
    for t in threads:
        t.start()
    return threads, out, errors


def join(threads, timeout=90):
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a worker hangs"


def assert_same_everywhere_and_right(out, xs):
    for k in range(len(xs[0])):
        for rank in range(1, N):
            assert np.array_equal(out[rank][k], out[0][k]), f"call {k}: rank {rank} differs"
        mean = np.mean([xs[r][k] for r in range(N)], axis=0)
        np.testing.assert_allclose(out[0][k], mean, rtol=0, atol=1e-4)


def test_restart_inside_a_call_is_called_again_in_the_next_session(tmp_path):
    fab = Fabric(tmp_path)
    logs = [[] for _ in range(N)]
    followers = [fab.follower(r, logs=logs) for r in range(N)]
    xs = tensors(4, 12 * wire.ELEMS)
    gate = threading.Barrier(N + 1)

    def before_call(rank, k):
        if k == 2:
            gate.wait(30)

    threads, out, errors = run(followers, xs, before_call)
    gate.wait(30)                       # all finished call 2 of 4; the test restarts in 3
    fab.go_down()                       # whatever call 3 sent so far is lost
    time.sleep(0.5)
    fab.come_back()
    join(threads)
    assert errors == [None] * N
    assert_same_everywhere_and_right(out, xs)
    assert all(f.client.job.session == 8 and f.sessions == 2 for f in followers)
    assert not any("came from rank" in line for lines in logs for line in lines)


def test_workers_ahead_hand_their_result_to_those_behind(tmp_path):
    fab = Fabric(tmp_path)
    held = {r: HeldPort(fab.net.ports[HOSTS[r]], fab.net.framer(HOSTS[r])) for r in (2, 3)}
    logs = [[] for _ in range(N)]
    followers = [fab.follower(r, held.get(r), logs) for r in range(N)]
    xs = tensors(4, wire.ELEMS - 5)     # one chunk per call

    def arm():                          # call 3's chunk goes out, its result is held back
        for p in held.values():
            p.armed = True
    gate = threading.Barrier(N + 1, action=arm)

    def before_call(rank, k):
        if k == 2:
            gate.wait(30)

    threads, out, errors = run(followers, xs, before_call)
    gate.wait(30)
    deadline = time.monotonic() + 30
    while min(followers[0].completed, followers[1].completed) < 3:
        assert time.monotonic() < deadline, "ranks 0 and 1 did not complete call 3"
        time.sleep(0.01)
    assert followers[2].completed == followers[3].completed == 2
    fab.go_down()                       # ranks 2 and 3 never get call 3's result
    for p in held.values():
        p.lose_held()
    fab.come_back()
    join(threads)
    assert errors == [None] * N
    assert_same_everywhere_and_right(out, xs)
    for rank in (2, 3):
        assert any("came from rank 0" in line for line in logs[rank]), logs[rank]


def test_a_switch_that_stays_down_is_named(tmp_path):
    fab = Fabric(tmp_path)
    followers = [fab.follower(r) for r in range(N)]
    for f in followers:
        f.client.timeout, f.wait = 1.0, 1.0
    xs = tensors(1, 2 * wire.ELEMS)
    fab.go_down()
    threads, out, errors = run(followers, xs)
    join(threads, 60)
    for e in errors:
        assert isinstance(e, AllReduceError)
        assert "switch s1 of job 1 went away" in str(e) and "likely missing" not in str(e)
