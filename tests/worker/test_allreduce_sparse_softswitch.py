"""The block-sparse client through the compiled program on softswitch in process (a sparse
job on one switch): exact sums for random, disjoint and all-zero sparsity patterns in both
encodings, the chaos schedule (loss, duplication, delays, replays, old sessions, corrupted
frames, stale results), and the client's bytes against the dense client's on the same
tensor."""

import numpy as np
import pytest

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import Trace, check_sparse, run_workers
from tests.dataplane.chaos import Chaos, ChaosPort
from tests.worker.test_allreduce_sparse import patterns, sparse_tensor
from worker import wire
from worker.allreduce import AllReduceClient
from worker.allreduce.sparse import SparseAllReduceClient

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
