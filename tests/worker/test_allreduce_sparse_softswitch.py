"""The block-sparse client through the compiled program on softswitch in process (a sparse
job on one switch): exact sums for random, disjoint and all-zero sparsity patterns in both
encodings, the chaos schedule (loss, duplication, delays, replays, old sessions, corrupted
frames, stale results), and the client's bytes against the dense client's on the same
tensor."""

import threading

import numpy as np
import pytest
import torch.distributed as dist

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import Trace, check_sparse, run_workers
from tests.dataplane.chaos import Chaos, ChaosPort
from tests.worker.test_allreduce_sparse import patterns, sparse_tensor
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError
from worker.allreduce.sparse import SparseAllReduceClient
from worker.ddp.faults import FaultBoard, Posting

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
ELEMS = wire.ELEMS
HOSTS = ("h1", "h2", "h3", "h4")


def network(result: str, slots: int = 8, mode: str = "sparse"):
    topo = star(5).with_jobs([JobSpec(1, HOSTS, slots=slots, encoding=result, mode=mode)])
    return topo, SwitchNetwork(topo)


def run_sparse(topo, net, enc, tensors, session, wrap=None, **kw):
    spec = topo.job(1)
    net.set_session(1, session)         # the controller's part
    job = net.job_params(1, enc)
    traces = [Trace() for _ in HOSTS]

    def make(rank):
        port = net.ports[HOSTS[rank]]
        port = port if wrap is None else wrap(rank, port)
        return SparseAllReduceClient(port, net.framer(HOSTS[rank]), job, seed=rank,
                                     trace=traces[rank],
                                     pad_empty=spec.encoding == "fixed32", **kw)
    outputs, clients, errors = run_workers(make, tensors, calls=len(tensors[0]),
                                           join_timeout=600)
    assert errors == [None] * len(HOSTS), errors
    return outputs, clients, check_sparse(traces, tensors, outputs, len(HOSTS))


@pytest.mark.parametrize("enc,result", [(wire.ENC_FIXED32, "fixed32"),
                                        (wire.ENC_CNAT8, "cnat8"),
                                        (wire.ENC_CNAT8, "fixed32")])
def test_exact_sums_on_the_switch(enc, result):
    rng = np.random.default_rng([enc, len(result)])
    topo, net = network(result)
    tensors = [[] for _ in HOSTS]
    for kind, size in (("random", 30 * ELEMS + 11), ("disjoint", 20 * ELEMS),
                       ("some-zero", 25 * ELEMS), ("all-zero", 9 * ELEMS), ("dense", 5)):
        for r, held in enumerate(patterns(rng, len(HOSTS), size, kind)):
            tensors[r].append(sparse_tensor(rng, size, held))
    outputs, clients, checked = run_sparse(topo, net, enc, tensors, 1 + enc)
    assert checked > 0
    drops = {i: net.counter("s1", "NatIngress.drops", i) for i in range(32)}
    assert not any(drops.values()), f"the switch dropped packets: {drops}"


def test_worst_case_magnitudes_sum_without_overflow():
    """Every worker holds every block at the job's largest exponent with the same sign: the
    headroom rule of dense jobs holds for sparse ones (every worker sends every use)."""
    topo, net = network("fixed32", slots=4)
    top = np.float32(2.0 ** (topo.job(1).max_exp - 127)) * np.float32(1.999)
    tensors = [[np.full(6 * ELEMS, top, np.float32)] for _ in HOSTS]
    outputs, _, checked = run_sparse(topo, net, wire.ENC_FIXED32, tensors, 9)
    assert checked == 6
    assert np.allclose(outputs[0][0], top, rtol=2.0**-20)


@pytest.mark.parametrize("seed", range(2))
def test_exact_sums_under_chaos(seed):
    rng = np.random.default_rng(50 + seed)
    topo, net = network("cnat8" if seed else "fixed32", slots=4)
    tensors = [[] for _ in HOSTS]
    for size in (24 * ELEMS + 7, 16 * ELEMS):
        for r, held in enumerate(patterns(rng, len(HOSTS), size, "random")):
            tensors[r].append(sparse_tensor(rng, size, held))
    session = 100 + seed
    ports = {}

    def wrap(rank, port):
        ports[rank] = ChaosPort(port, Chaos(loss=0.15), seed * 100 + rank, session)
        return ports[rank]
    _, clients, checked = run_sparse(topo, net, wire.ENC_CNAT8 if seed else wire.ENC_FIXED32,
                                     tensors, session, wrap=wrap, rto=0.2, rto_min=0.05,
                                     timeout=30)
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    assert done["lost"] and done["dup"] and done["delayed"] and done["corrupted"], done
    assert sum(c.stats.retransmissions for c in clients) > 0
    # Every corrupted result a worker was handed was ignored: as corrupt (its checksum), or
    # as foreign where the flipped bit made it no sparse result of the job before any
    # checksum was read. (How many reach the workers, rather than the switch, varies.)
    handed = done["corrupted"] - done["corrupted_out"]
    ignored = sum(c.stats.corrupt_ignored + c.stats.foreign_ignored for c in clients)
    assert ignored >= handed, (ignored, done)


def test_sparse_bytes_follow_the_union_of_blocks():
    """Clustered 10% of blocks on every worker: the sparse job receives about a tenth of the
    dense job's bytes on each worker's link (the same tensor, CNAT8 both ways)."""
    nb = 100
    rng = np.random.default_rng(3)
    held = np.arange(40, 50)
    tensors = [[sparse_tensor(rng, nb * ELEMS, held)] for _ in HOSTS]
    topo, net = network("cnat8", slots=16)
    _, sparse_clients, checked = run_sparse(topo, net, wire.ENC_CNAT8, tensors, 21)
    assert checked == 10
    topo_d, net_d = network("cnat8", slots=16, mode="dense")
    spec = topo_d.job(1)
    job = net_d.job_params(1, wire.ENC_CNAT8)
    _, dense_clients, errors = run_workers(
        lambda r: AllReduceClient(net_d.ports[HOSTS[r]], net_d.framer(HOSTS[r]), job, seed=r),
        tensors)
    assert errors == [None] * 4 and spec.mode == "dense"
    # 16 EMPTY prime results (66 B) and 10 blocks of 42 + 24 + 168 B, against 101 dense
    # frames (a priming round and 100 chunks) of 42 + 16 + 168 B
    st, dst = sparse_clients[0].stats, dense_clients[0].stats
    assert st.packets_received - st.duplicates_ignored == 16 + 10
    assert dst.packets_received - dst.duplicates_ignored == 101
    if not st.duplicates_ignored and not dst.duplicates_ignored:   # no timer fired
        assert st.bytes_received == 16 * 66 + 10 * 234
        assert dst.bytes_received == 101 * 226


class ForgingPort:
    """A worker's port that sends, once, a forged PRIME of slot 0 before the worker's own
    first frame (its slot 0 PRIME), after `after` is set (another worker's PRIME is in)."""

    def __init__(self, port, forged: bytes, after: threading.Event):
        self.port, self.forged, self.after, self.sent = port, forged, after, False

    def send(self, frame: bytes) -> None:
        if not self.sent:
            assert self.after.wait(30)
            self.port.send(self.forged)
            self.sent = True
        self.port.send(frame)

    def __getattr__(self, name):
        return getattr(self.port, name)


class FirstSent:
    """A port that sets `event` once its first frame is sent (the switch, in process, has
    taken it by then)."""

    def __init__(self, port, event: threading.Event):
        self.port, self.event = port, event

    def send(self, frame: bytes) -> None:
        self.port.send(frame)
        self.event.set()

    def __getattr__(self, name):
        return getattr(self.port, name)


def forged_prime(topo, net, session: int, enc: int, blocks: int) -> bytes:
    spec = topo.job(1)
    return net.framer(HOSTS[1]).build_sparse(
        wire.MSG_SPARSE_CONTRIB, enc, 1, session, 0, 0, 0, 1,
        wire.use_chunk(0, 0, spec.slots), blocks, 0, None, wire.FLAG_PRIME)


def trial_tensors(seed):
    rng = np.random.default_rng(seed)
    size = 12 * ELEMS
    return [[sparse_tensor(rng, size, held)]
            for held in patterns(rng, len(HOSTS), size, "random")]


@pytest.mark.parametrize("trial", range(10))
def test_a_forged_prime_after_an_honest_one_is_ignored(trial):
    """h2's port sends slot 0's PRIME claiming B + 1 blocks once h1's honest PRIME is in:
    the switch, holding B, refuses it to h2's port, and h2, whose own count is the one
    held, ignores the refusal (counted): the job completes exact."""
    tensors = trial_tensors(600 + trial)
    topo, net = network("cnat8", slots=4)
    session = 40 + trial
    forged = forged_prime(topo, net, session, wire.ENC_CNAT8, 13)
    first = threading.Event()

    def wrap(rank, port):
        if rank == 0:
            return FirstSent(port, first)
        return ForgingPort(port, forged, first) if rank == 1 else port

    _, clients, checked = run_sparse(topo, net, wire.ENC_CNAT8, tensors, session, wrap=wrap)
    assert checked > 0
    assert [c.stats.refusals_ignored for c in clients] == [0, 1, 0, 0]
    assert net.counter("s1", "NatIngress.drops", wire.DROP_BAD_BLOCK) == 1


@pytest.mark.parametrize("trial", range(10))
def test_a_forged_first_prime_fails_every_worker_naming_both_counts(trial):
    """The forged PRIME (B + 1) from h2's port reaches the switch before any honest one:
    h1, h3 and h4's PRIMEs are refused, and each fails at once naming the count held and
    its own. h2's own PRIME meets the bit the forged one set (a duplicate, no refusal): it
    hears the others' fault on the job's fault board (worker/ddp/faults.py) at its next
    retransmission timer."""
    tensors = trial_tensors(700 + trial)
    topo, net = network("cnat8", slots=4)
    session = 60 + trial
    net.set_session(1, session)
    net.ports[HOSTS[1]].send(forged_prime(topo, net, session, wire.ENC_CNAT8, 13))
    job = net.job_params(1, wire.ENC_CNAT8)
    store = dist.HashStore()

    def make(rank):
        client = SparseAllReduceClient(net.ports[HOSTS[rank]], net.framer(HOSTS[rank]), job,
                                       seed=rank, timeout=60)
        return Posting(client, FaultBoard(store, rank, HOSTS))

    _, _, errors = run_workers(make, tensors, join_timeout=120)
    named = (f"the switch holds B=13 from the first PRIME it took, sent by h2 on port "
             f"{topo.attachment('h2').port}; this worker sent B=12")
    for rank, e in enumerate(errors):
        assert isinstance(e, AllReduceError), e
        assert named in str(e), e
        if rank != 1:
            assert str(e).startswith("slot 0 prime"), e
        else:
            assert "stopped: rank " in str(e), e
