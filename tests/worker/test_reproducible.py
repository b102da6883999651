"""Reproducible from a seed (DESIGN.md contract 10) on in-process softswitch: each run on
fresh switches in the same session, with other frames lost (so other retransmissions and
another order of results), must end with the same model on every worker, bit for bit. The
dense client under PyTorch DDP's hook, the sparse client, and CNAT8 results (the switch's
rounding of the sums; tests/dataplane/test_dp_reproducible.py runs the dense numpy job on
both targets)."""

from __future__ import annotations

import pytest

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import in_threads as run_threads
from worker import wire
from worker.allreduce import AllReduceClient
from worker.allreduce.sparse import SparseAllReduceClient, pads_empty
from worker.impair import ImpairedPort
from worker.train import TrainConfig, train

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
SEED = 5
LOSS = 0.05
SESSION = 3


def make_clients(topo, impair_seed: int, sparse: bool = False):
    """Fresh switches for job 1 of `topo` (session SESSION) and make(rank) -> (client, its
    impaired port)."""
    net = SwitchNetwork(topo, session=SESSION)
    spec = topo.job(1)
    hosts = list(spec.workers)
    job = net.job_params(1, wire.ENC_CNAT8)

    def make(rank: int):
        port = ImpairedPort(net.ports[hosts[rank]], loss=LOSS, seed=impair_seed * 100 + rank)
        common = dict(seed=SEED, rank=rank, timeout=30, rto=0.1, rto_min=0.02, rto_max=0.3)
        if sparse:
            return SparseAllReduceClient(
                port, net.framer(hosts[rank]), job,
                pad_empty=pads_empty(wire.ENCODING_BY_NAME[spec.encoding], net.elems),
                **common), port
        return AllReduceClient(port, net.framer(hosts[rank]), job, **common), port

    return make


def in_threads(n: int, body) -> list:
    out = run_threads(n, body)
    errors = [o for o in out if isinstance(o, BaseException)]
    assert not errors, errors
    return out


def numpy_run(topo, impair_seed: int, cfg: TrainConfig, sparse: bool = False):
    """Per rank (params_sha256, retransmissions, frames lost) of one run of worker/train.py."""
    make = make_clients(topo, impair_seed, sparse)

    def body(rank: int):
        client, port = make(rank)
        res = train(client.allreduce, rank, len(topo.job(1).workers), cfg)
        return (res["params_sha256"], client.stats.retransmissions,
                port.stats.sent_dropped + port.stats.recv_dropped)

    return in_threads(len(topo.job(1).workers), body)


def assert_same_models(first, second) -> None:
    for run in (first, second):
        assert len({digest for digest, _, _ in run}) == 1, f"ranks differ within a run: {run}"
        assert sum(lost for _, _, lost in run) > 0 and sum(r for _, r, _ in run) > 0, run
    assert [lost for _, _, lost in first] != [lost for _, _, lost in second]
    assert [d for d, _, _ in first] == [d for d, _, _ in second], (first, second)


def job_topo(n: int, result: str, mode: str = "dense", slots: int = 4):
    topo = star(hosts=n)
    return topo.with_jobs([JobSpec(1, tuple(h.name for h in topo.hosts), slots, result,
                                   mode=mode)])


def test_sparse_job_reruns_to_the_same_models():
    """The block-sparse client on the embedding model (only the rows a batch touched travel),
    FIXED32 results."""
    topo = job_topo(3, "fixed32", mode="sparse", slots=8)
    cfg = TrainConfig(steps=3, seed=SEED, eval_every=3, model="embedding")
    assert_same_models(numpy_run(topo, 1, cfg, sparse=True),
                       numpy_run(topo, 2, cfg, sparse=True))


def test_cnat8_results_rerun_to_the_same_models():
    """The job's results re-compressed to CNAT8 on the switch: its rounding draws too must be
    a function of the packet's identity, not of the order packets reach it."""
    topo = job_topo(3, "cnat8")
    cfg = TrainConfig(steps=4, hidden=(16,), seed=SEED, eval_every=4)
    assert_same_models(numpy_run(topo, 1, cfg), numpy_run(topo, 2, cfg))


def test_ddp_hook_reruns_to_the_same_models():
    """PyTorch DDP through the hook (worker/ddp): the MNIST-1D CNN, its buckets reduced on
    the communication thread, FIXED32 results."""
    pytest.importorskip("torch")
    from worker.ddp.inproc import run_ranks
    from worker.ddp.train import DDPConfig
    from worker.ddp.train import train as ddp_train
    from worker.ddp.workload import load_mnist1d

    data = load_mnist1d()
    n = 3
    topo = job_topo(n, "fixed32", slots=64)
    cfg = DDPConfig(steps=3, seed=SEED, eval_every=3)

    def run(impair_seed: int):
        make = make_clients(topo, impair_seed)

        def body(rank, group):
            client, port = make(rank)
            res = ddp_train(group, cfg, allreduce=client.allreduce, data=data)
            return (res["params_sha256"], client.stats.retransmissions,
                    port.stats.sent_dropped + port.stats.recv_dropped)

        out = run_ranks(n, body)
        assert not [o for o in out if isinstance(o, BaseException)], out
        return out

    assert_same_models(run(1), run(2))
