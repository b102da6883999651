"""The allreduce client through the compiled program (p4src/build/agg.json) on softswitch,
in process: exact integer sums for 2 to 8 workers, under loss, duplication and reordering,
over a two-level tree, and the clear error when a worker is missing."""

import threading

import numpy as np
import pytest

from controller.topology import JobSpec, leaf_spine, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import Trace, check_exact, run_workers
from worker import wire
from worker.allreduce import AllReduceClient, AllReduceError
from worker.impair import ImpairedPort
from worker.train import TrainConfig, train

ELEMS = wire.ELEMS
EVENTS = "NatIngress.agg.events"
DROPS = "NatIngress.drops"

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")


def tensors_for(n, sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [[(rng.standard_normal(size) * (1 + r)).astype(np.float32) for size in sizes]
            for r in range(n)]


def network(topo, job_hosts, slots, encoding="fixed32"):
    topo = topo.with_jobs([JobSpec(1, tuple(job_hosts), slots=slots, encoding=encoding)])
    return SwitchNetwork(topo)


def clients(net, job_hosts, job, traces=None, wrap=None, **kw):
    def make(rank):
        host = job_hosts[rank]
        port = net.ports[host] if wrap is None else wrap(rank, net.ports[host])
        return AllReduceClient(port, net.framer(host), job, seed=rank,
                               trace=None if traces is None else traces[rank], **kw)
    return make


@pytest.mark.parametrize("n, contrib, result", [
    (2, wire.ENC_CNAT8, "cnat8"),
    (3, wire.ENC_FIXED32, "fixed32"),
    (4, wire.ENC_FIXED32, "cnat8"),
    (8, wire.ENC_CNAT8, "cnat8"),
    (2, wire.ENC_CNAT8, "fixed32"),     # the packet grows by 3 bytes per element
])
def test_exact_sums_through_the_compiled_program(n, contrib, result):
    hosts = [f"h{i + 1}" for i in range(n)]
    net = network(star(n), hosts, slots=4, encoding=result)
    job = net.job_params(1, contrib)
    traces = [Trace() for _ in range(n)]
    # Two calls: fewer chunks than slots, then more (a slot is reused within the call).
    tensors = tensors_for(n, [2 * ELEMS - 3, 6 * ELEMS + 1], seed=n)
    outputs, cl, errors = run_workers(clients(net, hosts, job, traces, timeout=3), tensors,
                                      calls=2)
    assert errors == [None] * n
    assert check_exact(traces, tensors, outputs, n) == 2 + 7
    assert net.counter("s1", DROPS, 2) == 0            # nothing from a foreign port
    assert net.counter("s1", EVENTS, 2) == 2 + 7 + 2      # COMPLETE: chunks + one priming a call


def test_exact_under_loss_duplication_and_reordering():
    n = 4
    hosts = [f"h{i + 1}" for i in range(n)]
    net = network(star(n), hosts, slots=4, encoding="cnat8")
    job = net.job_params(1, wire.ENC_CNAT8)
    traces = [Trace() for _ in range(n)]
    impaired = []

    def wrap(rank, port):
        impaired.append(ImpairedPort(port, loss=0.2, dup=0.1, reorder=0.2, seed=50 + rank))
        return impaired[-1]

    tensors = tensors_for(n, [8 * ELEMS], seed=1)
    outputs, cl, errors = run_workers(
        clients(net, hosts, job, traces, wrap, rto=0.05, rto_min=0.02, rto_max=0.4),
        tensors)
    assert errors == [None] * n
    assert check_exact(traces, tensors, outputs, n) == 8
    assert sum(c.stats.retransmissions for c in cl) > 0
    # Every frame of this call is full, so each resend adds one frame's bytes.
    for c in cl:
        frame = c.stats.bytes_sent // c.stats.packets_sent
        assert c.stats.bytes_resent == c.stats.retransmissions * frame, c.stats
    assert sum(i.stats.sent_dropped + i.stats.recv_dropped for i in impaired) > 0
    # The switch saw duplicates of open slots and answered retransmissions of closed ones.
    assert net.counter("s1", EVENTS, 1) > 0
    assert net.counter("s1", EVENTS, 4) > 0


@pytest.mark.parametrize("contrib", [wire.ENC_FIXED32, wire.ENC_CNAT8])
def test_two_level_tree_sums_exactly(contrib):
    # Two leaves with two hosts each under one spine: the leaves send FIXED32 partial sums up.
    topo = leaf_spine(leaves=2, spines=1, hosts=2)
    hosts = ["h1", "h2", "h3", "h4"]
    net = network(topo, hosts, slots=4)
    job = net.job_params(1, contrib)
    traces = [Trace() for _ in range(4)]
    tensors = tensors_for(4, [5 * ELEMS], seed=2)
    outputs, _, errors = run_workers(clients(net, hosts, job, traces, timeout=3), tensors)
    assert errors == [None] * 4
    assert check_exact(traces, tensors, outputs, 4) == 5
    assert net.counter("s1", EVENTS, 5) > 0 and net.counter("s2", EVENTS, 5) > 0  # PARTIAL_UP
    assert net.counter("s3", EVENTS, 3) > 0                                       # root


def test_dead_worker_gives_a_clear_error():
    hosts = ["h1", "h2", "h3"]
    net = network(star(3), hosts, slots=4, encoding="cnat8")
    job = net.job_params(1, wire.ENC_CNAT8)
    tensors = tensors_for(2, [3 * ELEMS])          # h3 never runs
    _, _, errors = run_workers(clients(net, hosts, job, timeout=1.0, rto=0.05, rto_max=0.2),
                               tensors, join_timeout=60)
    for e in errors:
        assert isinstance(e, AllReduceError)
        assert "3 of 3 chunks never completed" in str(e)
        assert "slot 0 priming the call" in str(e)
        assert "2 slots wait for the priming result" in str(e)


def test_training_steps_through_the_switch():
    n = 2
    hosts = ["h1", "h2"]
    net = network(star(n), hosts, slots=16, encoding="cnat8")
    job = net.job_params(1, wire.ENC_CNAT8)
    cfg = TrainConfig(steps=3, hidden=(16,), eval_every=3)
    results = [None] * n

    def run(rank):
        results[rank] = train(clients(net, hosts, job)(rank).allreduce, rank, n, cfg)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None for r in results)
    assert results[0]["params_sha256"] == results[1]["params_sha256"]
    assert len(results[0]["steps"]) == 3
