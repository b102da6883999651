"""The client takes only the result of the use it awaits: not a result of an earlier call that
has the same slot, version and chunk index within its call (chunk numbers run across calls),
not a result whose UDP checksum does not add up (docs/WORKER.md "Matching")."""

import numpy as np
import pytest

from controller.topology import JobSpec, star
from harness.network import PsNetwork, SwitchNetwork
from harness.workers import Trace, check_exact, run_workers
from worker import wire
from worker.allreduce import AllReduceClient, JobParams
from worker.frames import Framer
from worker.transport import QueuePort

ELEMS = wire.ELEMS


class Meddler(QueuePort):
    """A worker's port that keeps the results it receives and can tamper with them:
    `before_send(frame)` and `on_result(frame) -> frame` hooks, set by the test."""

    def __init__(self, inner, framer):
        super().__init__()
        self.inner, self.framer = inner, framer
        self.results: list[bytes] = []
        self.before_send = self.on_result = None

    def send(self, frame):
        if self.before_send is not None:
            self.before_send(frame)
        self.inner.send(frame)

    def recv(self, timeout):
        frame = self.inner.recv(timeout)
        if frame is not None:
            self.results.append(frame)
            if self.on_result is not None:
                frame = self.on_result(frame)
        return frame


def tensors(n, calls, chunks, seed):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(chunks * ELEMS).astype(np.float32) for _ in range(calls)]
            for _ in range(n)]


def test_a_result_of_an_earlier_call_is_not_taken_for_this_calls():
    """Window 2, four chunks a call: slot 1 has two uses per call, so call 2's chunk 1 has
    the slot, version and in-call index of call 1's chunk 1. Call 1's result for it, put in
    rank 0's inbox just before rank 0 sends call 2's chunk 1, must be ignored."""
    n, window = 2, 2
    net = PsNetwork(n, slots=window)
    job = JobParams(1, 5, n, window, wire.ENC_FIXED32)
    traces = [Trace() for _ in range(n)]
    ports = {}

    def make(rank):
        ports[rank] = Meddler(net.ports[rank], Framer())
        return AllReduceClient(ports[rank], Framer(), job, seed=rank, trace=traces[rank],
                               timeout=5)
    data = tensors(n, 2, 4, seed=11)
    clients = [make(r) for r in range(n)]
    out1, _, errors = run_workers(lambda r: clients[r], [[t[0]] for t in data])
    assert errors == [None] * n
    frames = [(Framer().parse(f)[0], f) for f in ports[0].results]
    stale = next(f for h, f in frames if h.msg_type == wire.MSG_RESULT and h.slot == 1)
    done = []

    def inject(frame):
        hdr = Framer().parse(frame)[0]
        if hdr.slot == 1 and not done:
            done.append(hdr)
            ports[0].inner.put(stale)
    ports[0].before_send = inject
    out2, _, errors = run_workers(lambda r: clients[r], [[t[1]] for t in data])
    assert errors == [None] * n and done, "the stale result was not injected"
    outputs = [[out1[r][0], out2[r][0]] for r in range(n)]
    assert np.array_equal(out2[0][0], out2[1][0]), "rank 0 took call 1's result"
    assert check_exact(traces, data, outputs, n) == 8
    assert clients[0].stats.duplicates_ignored >= 1


@pytest.mark.parametrize("encoding", ["fixed32", "cnat8"])
def test_a_result_whose_checksum_does_not_add_up_is_ignored(encoding):
    """Through the compiled program on softswitch: one bit of each of rank 0's first three
    results flipped on the way. Rank 0 ignores them (counted), retransmits, and is answered
    from the switch's stored result: every worker ends with the same exact means."""
    n = 3
    hosts = [f"h{i + 1}" for i in range(n)]
    net = SwitchNetwork(star(n).with_jobs([JobSpec(1, tuple(hosts), slots=4,
                                                   encoding=encoding)]))
    job = net.job_params(1, wire.ENC_CNAT8)
    traces = [Trace() for _ in range(n)]
    ports = {}

    def flip(frame):
        if len([f for f in ports[0].results]) <= 3:
            frame = bytearray(frame)
            frame[-3] ^= 0x10
            return bytes(frame)
        return frame

    def make(rank):
        ports[rank] = Meddler(net.ports[hosts[rank]], net.framer(hosts[rank]))
        if rank == 0:
            ports[rank].on_result = flip
        return AllReduceClient(ports[rank], net.framer(hosts[rank]), job, seed=rank,
                               trace=traces[rank], timeout=5, rto=0.05, rto_min=0.02)
    data = tensors(n, 1, 10, seed=12)
    outputs, clients, errors = run_workers(make, data)
    assert errors == [None] * n
    assert all(np.array_equal(outputs[0][0], outputs[r][0]) for r in range(n))
    assert check_exact(traces, data, outputs, n) == 10
    assert clients[0].stats.corrupt_ignored == 3 and clients[0].stats.retransmissions >= 1
