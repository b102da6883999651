"""What a worker is told, through the compiled program on softswitch in process:
- a worker scaling with less headroom than its job's sends elements above its port's
  bound: the switch refuses them back (docs/PROTOCOL.md "Refusals") and the call fails at
  once naming the cause, never with a wrong sum;
- a forged first PRIME with another block count: every genuine worker's PRIME is refused
  with the count the switch holds, and its call fails at once naming both counts;
- a call that times out first names what the worker saw (results that failed its checks,
  and which), then its guess."""

from dataclasses import replace

import numpy as np
import pytest

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import run_workers
from worker import wire
from worker.allreduce import AllReduceClient
from worker.allreduce.client import AllReduceError, held_by
from worker.allreduce.job import job_params
from worker.allreduce.sparse import SparseAllReduceClient
from worker.frames import L2_LEN, with_udp_checksum
from worker.transport import Port

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
ELEMS = wire.ELEMS
HOSTS = ("h1", "h2", "h3", "h4")


def network(encoding: str, mode: str = "dense", slots: int = 8):
    topo = star(5).with_jobs([JobSpec(1, HOSTS, slots=slots, encoding=encoding, mode=mode)])
    return topo, SwitchNetwork(topo)


@pytest.mark.parametrize("enc", [wire.ENC_CNAT8, wire.ENC_FIXED32])
def test_workers_one_bit_short_of_the_headroom_are_refused_with_the_cause(enc):
    topo, net = network("cnat8" if enc == wire.ENC_CNAT8 else "fixed32")
    net.set_session(1, 3)
    job = net.job_params(1, enc)
    assert job.headroom == 2
    short = replace(job, headroom=job.headroom - 1)
    # values at the top of their exponent: scaled with h - 1 they reach 2^29 units, above
    # the 2^28 a worker of this job may send
    tensor = np.full(6 * ELEMS, 1.999, np.float32)
    tensor[::2] *= -1

    def make(rank):
        return AllReduceClient(net.ports[HOSTS[rank]], net.framer(HOSTS[rank]), short,
                               seed=0, rank=rank, timeout=20.0)
    outputs, _, errors = run_workers(make, [[tensor]] * len(HOSTS))
    assert outputs == [[None]] * len(HOSTS), "a sum came back"
    for e in errors:
        assert isinstance(e, AllReduceError), e
        text = str(e)
        assert "OUT_OF_RANGE" in text and "headroom h=1" in text and "got no result" not in text
    assert net.counter("s1", "NatIngress.agg.events", 0) < 4 * 6, "contributions were summed"


def test_a_forged_first_prime_fails_every_genuine_worker_at_once_naming_both_counts():
    """A PRIME with 17 blocks, sent from h1's port before the workers start (identity is the
    port: the switch cannot tell it from h1's own) on a tensor of 24 blocks."""
    topo, net = network("fixed32", mode="sparse", slots=4)
    net.set_session(1, 5)
    job = net.job_params(1, wire.ENC_FIXED32)
    forged = net.framer("h1").build_sparse(
        wire.MSG_SPARSE_CONTRIB, wire.ENC_FIXED32, 1, 5, 0, 0, 127, 1,
        int(wire.use_chunk(0, 0, job.slots)), 17, wire.NO_BLOCK, None, flags=wire.FLAG_PRIME)
    att = topo.attachment("h1")
    net.inject(att.node, att.port, forged)
    rng = np.random.default_rng(17)
    tensor = rng.standard_normal(24 * ELEMS).astype(np.float32)

    def make(rank):
        return SparseAllReduceClient(net.ports[HOSTS[rank]], net.framer(HOSTS[rank]), job,
                                     seed=0, rank=rank, timeout=4.0, pad_empty=True)
    _, _, errors = run_workers(make, [[tensor]] * len(HOSTS))
    for rank, e in enumerate(errors):
        assert isinstance(e, AllReduceError), (rank, e)
    held = f"the switch holds B=17 from the first PRIME it took, sent by h1 on port {att.port}"
    for e in errors[1:]:        # h1's own PRIME is a duplicate of the forged one: it waits
        text = str(e)
        assert "workers disagree" in text and held in text and "sent B=24" in text, text


def test_a_refusals_bitmap_names_the_job_s_children_by_bit():
    """The bitmap a BAD_BLOCK refusal carries in `next`, read with the job's children from
    the topology (bit i: the switch's i-th child port of the job, in port order)."""
    topo = star(5).with_jobs([JobSpec(1, ("h4", "h2", "h3"), slots=4, mode="sparse")])
    job = job_params(topo, 1, 1, wire.ENC_FIXED32)
    ports = {h: topo.attachment(h).port for h in ("h2", "h3", "h4")}
    assert job.children == tuple(sorted(ports.items(), key=lambda hp: hp[1]))
    (h0, p0), _, (h2, p2) = job.children
    assert held_by(job, 0b101) == f"{h0} on port {p0} and {h2} on port {p2}"
    assert held_by(job, 1 << 5) == "child bit 5"    # beyond the job's: named by its bit
    assert held_by(job, 0) == "no port"


class CorruptingPort(Port):
    """Hands the client every result of slot 7 (its only chunk of the call) with one
    payload bit flipped (`how`
    "checksum": the UDP checksum no longer adds up) or, checksum recomputed, a CNAT8 code
    above 32 ("codes": one no switch sends)."""

    def __init__(self, inner: Port, how: str):
        super().__init__()
        self.inner, self.how, self.corrupted = inner, how, 0

    def send(self, frame: bytes) -> None:
        self.inner.send(frame)

    def recv(self, timeout):
        frame = self.inner.recv(timeout)
        if (frame is None or frame[L2_LEN] != wire.MSG_RESULT
                or int.from_bytes(frame[L2_LEN + 6:L2_LEN + 8], "big") != 7):
            return frame
        b = bytearray(frame)
        if self.how == "checksum":
            b[-1] ^= 0x01
        else:
            b[L2_LEN + 16 + 3] = 0x80 | 40
            b = bytearray(with_udp_checksum(bytes(b)))
        self.corrupted += 1
        return bytes(b)


@pytest.mark.parametrize("how,check", [
    ("checksum", "failed the UDP checksum"),
    ("codes", "passed the checksum but held codes no switch sends")])
def test_a_timeout_first_names_the_results_that_failed_a_check(how, check):
    topo, net = network("cnat8")
    net.set_session(1, 7 if how == "checksum" else 8)
    job = net.job_params(1, wire.ENC_CNAT8)
    rng = np.random.default_rng(7)
    tensors = [[rng.standard_normal(12 * ELEMS).astype(np.float32)] for _ in HOSTS]
    wrapped = {}

    def make(rank):
        port = net.ports[HOSTS[rank]]
        if rank == 0:
            port = wrapped[0] = CorruptingPort(port, how)
        return AllReduceClient(port, net.framer(HOSTS[rank]), job, seed=0, rank=rank,
                               timeout=3.0 if rank == 0 else 30.0)
    outputs, _, errors = run_workers(make, tensors)
    assert errors[1:] == [None] * 3, errors
    text = str(errors[0])
    assert isinstance(errors[0], AllReduceError), errors[0]
    saw = text.index("this worker saw ")
    assert f"results that {check}" in text[saw:], text
    assert text.index("corrupted between the switch and this worker") > saw, text
    assert "missing or stopped" not in text, text
    assert wrapped[0].corrupted > 0
