"""What a DDP rank agrees on with the switches: its JobParams come from the one construction
every entry point calls (worker/allreduce/job.py), so a three-level tree whose switches
re-compress their partial sums (partials: cnat8) sums gradients at the largest magnitudes
the job allows without a sign flip, and a gradient beyond the job's exponent bound comes
back non-finite on every rank."""

from __future__ import annotations

import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from controller.job_sessions import SessionsFile  # noqa: E402
from controller.topology import JobSpec, fat_tree  # noqa: E402
from controller.tree import build_tree  # noqa: E402
from harness.workers import Trace, assert_tree_sum  # noqa: E402
from tests.worker.ddp_switch import softswitch_missing, switch_clients  # noqa: E402
from tests.worker.test_ddp_hook import Probe  # noqa: E402
from worker import codec, wire  # noqa: E402
from worker import main as worker_main  # noqa: E402
from worker.allreduce import job_params  # noqa: E402
from worker.ddp import main as ddp_main  # noqa: E402
from worker.ddp.hook import HookState, comm_hook  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402

needs_switch = pytest.mark.skipif(softswitch_missing() is not None,
                                  reason=softswitch_missing() or "")
# k = 4 fat-tree: h1, h2 under one edge switch, h3 under the other of pod 1, h5 in pod 2; the
# tree goes edge -> aggregation -> core. With cnat8 partials the edge of h1, h2 may pass on
# 2, the aggregation switch round 2 + 1 up to 4, the core see 4 + 1: headroom 3, where
# ceil(log2 4) = 2 lets a sum reach 2^31, which int32 reads as negative.
WORKERS = ("h1", "h2", "h3", "h5")
SIZES = (900, 400)


def tree_topology():
    return fat_tree(4).with_jobs([JobSpec(1, WORKERS, slots=8, encoding="cnat8",
                                          partials="cnat8")])


def test_a_ddp_rank_builds_the_job_the_switches_hold(tmp_path, monkeypatch):
    """worker/ddp/main.py gets the tree's headroom, the exponent bound and the slots from the
    topology, as worker/main.py and the harness do (it once built them by hand)."""
    topo = tree_topology()
    assert topo.headroom(1) == 3 == build_tree(topo, topo.job(1)).headroom()
    path = tmp_path / "topo.json"
    topo.save(str(path))
    SessionsFile(str(tmp_path / "sessions.json"), topo, first=41).write()
    built = []

    class Stop(Exception):
        pass

    def capture(port, framer, job, **kw):
        built.append(job)
        raise Stop

    monkeypatch.setattr(worker_main, "AllReduceClient", capture)   # what make_client builds
    # a UDP tunnel port on loopback stands in for the host's interface
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = ["--topology", str(path), "--host", "h2", "--port",
            f"udp:127.0.0.1:{port}>127.0.0.1:9", "--quiet"]
    with pytest.raises(Stop):
        ddp_main.main(argv)
    want = job_params(topo, 1, 41, wire.ENC_CNAT8)
    assert built == [want]
    assert (want.headroom, want.max_exp, want.slots, want.workers) == (3, 158, 8, 4)


@needs_switch
@pytest.mark.slow
def test_cnat8_partials_on_a_three_level_tree_sum_the_largest_gradients_without_a_flip():
    topo = tree_topology()
    tree = build_tree(topo, topo.job(1))
    assert tree.depth() == 2         # edge -> aggregation -> core: three levels
    # the largest finite exponent, max_exp - 1 (max_exp marks a non-finite chunk)
    top = np.float32(2.0 ** (topo.job(1).max_exp - 128)) * np.float32(1.999)
    rng = np.random.default_rng(5)
    signs = [np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32) for n in SIZES]

    def inputs(rank):
        # the first parameter: every rank the same sign at the largest magnitude (the worst
        # case); the second: random magnitudes and signs up to it
        g = np.random.default_rng([9, rank])
        return [top * signs[0], (g.uniform(-1, 1, SIZES[1]) * top).astype(np.float32)]

    traces = [Trace() for _ in WORKERS]
    _, make_client = switch_clients(len(WORKERS), "cnat8", topo=topo, traces=traces)

    def body(rank, group):
        client = make_client(rank)
        assert client.job.headroom == 3
        model = Probe(SIZES)
        ddp = DDP(model, process_group=group)
        state = HookState(model, group, allreduce=client.allreduce, mode="layer")
        ddp.register_comm_hook(state, comm_hook)
        ddp([torch.from_numpy(x) for x in inputs(rank)]).backward()
        return [p.grad.numpy().copy() for p in model.parameters()]

    out = run_ranks(len(WORKERS), body)
    assert not [o for o in out if isinstance(o, BaseException)], out
    for grads in out[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(out[0], grads, strict=True))
    # the worst case keeps its sign and its size (a mean of values near `top`)
    worst = out[0][0]
    assert np.all(np.sign(worst) == signs[0])
    assert np.all((np.abs(worst) >= top / 4) & (np.abs(worst) <= 4 * top))
    # every chunk against the tree's integer reference
    rows = [t.by_chunk() for t in traces]
    assert all(set(r) == set(rows[0]) for r in rows)
    for key in sorted(rows[0]):
        mine = [r[key] for r in rows]
        assert all(m["result"] == mine[0]["result"] for m in mine)
        sent = {h: codec.aggregate([m["sent"]], wire.ENC_CNAT8)
                for h, m in zip(WORKERS, mine, strict=True)}
        assert_tree_sum(mine[0]["payload"], mine[0]["result"].encoding, sent, tree,
                        f"chunk {key}")
    assert len(rows[0]) >= -(-sum(SIZES) // wire.ELEMS)      # one bucket, or one per tensor


@needs_switch
def test_a_gradient_beyond_the_exponent_bound_comes_back_non_finite_on_every_rank():
    """3e38 is above max_exp 158's range (values below 2^31): like an overflow, its chunk
    comes back NaN on both ranks, as Gloo would carry an inf, and nothing fails."""
    _, make_client = switch_clients(2, "cnat8")

    def body(rank, group):
        client = make_client(rank)
        model = Probe(SIZES)
        ddp = DDP(model, process_group=group)
        state = HookState(model, group, allreduce=client.allreduce, mode="layer")
        ddp.register_comm_hook(state, comm_hook)
        xs = [np.ones(n, np.float32) for n in SIZES]
        if rank == 0:
            xs[1][17] = 3e38
        ddp([torch.from_numpy(x) for x in xs]).backward()
        return state.error, [p.grad.numpy().copy() for p in model.parameters()]

    out = run_ranks(2, body)
    for o in out:
        assert not isinstance(o, BaseException), o
    for err, grads in out:
        assert err is None
        # the bucket's chunks are all first chunks of their slots, primed together: all NaN
        assert np.isnan(grads[1][17]) and all(np.isnan(g).all() for g in grads)
