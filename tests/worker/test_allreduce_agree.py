"""Workers learn that they disagree (worker/allreduce/agree.py), through the compiled program
on softswitch in process: frames corrupted with their UDP checksum recomputed (3 % of the
frames each worker sends and receives) leave no silent difference between the workers'
results when calls are verified: every call either ends equal on every worker or fails on
every worker, naming the call. The same probe without verification does leave differences
(the test can fail), and verification changes no figure of a clean run."""

import numpy as np
import pytest
import torch.distributed as dist

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import run_workers
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError, agree
from worker.ddp.faults import FaultBoard, Posting
from worker.frames import with_udp_checksum

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
ELEMS = wire.ELEMS
N = 4
HOSTS = [f"h{i + 1}" for i in range(N)]
HEADERS = 14 + 20 + 8 + 16          # Ethernet, IPv4, UDP, AGG: the payload follows
CALLS, CHUNKS = 8, 12


class FlippingPort:
    """Flips one payload bit of a share of the frames sent and received, and recomputes the
    UDP checksum, so the frame still adds up."""

    def __init__(self, port, share: float, seed: int):
        self.port, self.share = port, share
        self.rng = np.random.default_rng(seed)
        self.flipped = 0

    def _flip(self, frame: bytes) -> bytes:
        if frame is None or len(frame) <= HEADERS or self.rng.random() >= self.share:
            return frame
        b = bytearray(frame)
        i = int(self.rng.integers(HEADERS, len(b)))
        b[i] ^= 1 << int(self.rng.integers(8))
        self.flipped += 1
        return with_udp_checksum(bytes(b))

    def send(self, frame):
        self.port.send(self._flip(frame))

    def send_many(self, frames):
        self.port.send_many([self._flip(f) for f in frames])

    def recv(self, timeout):
        return self._flip(self.port.recv(timeout))

    def __getattr__(self, name):
        return getattr(self.port, name)


def probe(result: str, verify: str, share: float, seed: int):
    topo = star(N).with_jobs([JobSpec(1, tuple(HOSTS), slots=4, encoding=result)])
    net = SwitchNetwork(topo)
    enc = wire.ENC_CNAT8 if result == "cnat8" else wire.ENC_FIXED32
    job = net.job_params(1, enc)
    ports = {}
    store = dist.HashStore()

    def make(rank):
        ports[rank] = FlippingPort(net.ports[HOSTS[rank]], share, seed * 10 + rank)
        client = AllReduceClient(ports[rank], net.framer(HOSTS[rank]), job, seed=rank,
                                 timeout=10, rto=0.1, rto_min=0.05, rto_max=0.2,
                                 verify=verify)
        # as in a DDP job: a worker that fails tells the others (worker/ddp/faults.py)
        return Posting(client, FaultBoard(store, rank, HOSTS))

    rng = np.random.default_rng(seed)
    tensors = [[rng.standard_normal(CHUNKS * ELEMS).astype(np.float32) for _ in range(CALLS)]
               for _ in range(N)]
    outputs, clients, errors = run_workers(make, tensors, calls=CALLS)
    done = [sum(o is not None for o in outputs[r]) for r in range(N)]
    silent = sum(1 for k in range(min(done))
                 if not all(np.array_equal(outputs[0][k], outputs[r][k], equal_nan=True)
                            for r in range(N)))
    return silent, errors, done, clients, sum(p.flipped for p in ports.values())


@pytest.mark.parametrize("result", ["fixed32", "cnat8"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_verified_calls_leave_no_silent_difference(result, seed):
    silent, errors, done, clients, flipped = probe(result, "on", 0.03, seed)
    assert flipped > 0
    assert silent == 0
    # a call either completed on every worker, or failed on every worker at the same call
    # with a named cause: the results differ (a flipped result), a contribution refused
    # (a flipped code above the port's bound), or another worker's fault
    assert len(set(done)) == 1, (done, errors)
    if errors[0] is not None:
        for e in errors:
            assert isinstance(e, AllReduceError), e
            assert any(why in str(e) for why in (
                f"call {done[0] + 1}): the workers' results differ",
                "the switch refused this worker's contribution", "stopped: rank ")), e
    assert all(c.stats.verified >= done[0] for c in clients)


def test_without_verification_the_probe_finds_silent_differences():
    found = 0
    for seed in (1, 2, 3):
        silent, errors, *_ = probe("fixed32", "off", 0.03, seed)
        found += silent
    assert found > 0


def test_verification_costs_one_small_call_and_changes_no_result():
    """Clean frames: the same outputs, and the same counts but the packets of one call of
    one chunk (a priming round and the chunk) per verified call."""
    silent_on, errors_on, done_on, on, _ = probe("cnat8", "on", 0.0, 5)
    silent_off, errors_off, done_off, off, _ = probe("cnat8", "off", 0.0, 5)
    assert errors_on == errors_off == [None] * N and done_on == done_off == [CALLS] * N
    for a, b in zip(on, off, strict=True):
        assert (a.stats.calls, a.stats.elements, a.stats.chunks) == \
            (b.stats.calls, b.stats.elements, b.stats.chunks)
        assert a.stats.verified == CALLS and b.stats.verified == 0
        sent = lambda s: s.packets_sent - s.retransmissions      # noqa: E731
        assert sent(a.stats) - sent(b.stats) == 2 * CALLS


def test_auto_verifies_calls_of_200_round_trips_and_not_uq4():
    assert agree.rounds(199 * 64, 64) == 200
    assert agree.verifies("auto", wire.ENC_CNAT8, 199 * 64, 64)
    assert not agree.verifies("auto", wire.ENC_CNAT8, 198 * 64, 64)
    assert agree.verifies("on", wire.ENC_FIXED32, 1, 64)
    assert not agree.verifies("on", wire.ENC_UQ4, 10**6, 64)
    with pytest.raises(ValueError, match="verify must be one of"):
        agree.verifies("always", wire.ENC_CNAT8, 1, 64)
