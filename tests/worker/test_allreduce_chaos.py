"""The chaos schedule of tests/dataplane/test_dp_chaos.py on an unbalanced three-level tree:
a k = 4 fat-tree, three workers in pod 1 (two under one edge switch, one under the other)
and one in pod 2, aggregated edge -> aggregation -> core, on softswitch in process (the
data-plane fabric has two levels)."""

import numpy as np
import pytest

from controller.topology import JobSpec, fat_tree
from harness.network import SwitchNetwork, softswitch_missing
from tests.dataplane.chaos import Chaos
from tests.dataplane.test_dp_chaos import CALLS, CHUNKS, LONG, LONG_SEEDS, SEEDS, run_chaos
from worker import wire

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
WORKERS = ("h1", "h2", "h3", "h5")


@pytest.mark.parametrize("seed", LONG_SEEDS if LONG else SEEDS)
def test_exact_sums_under_chaos_on_a_three_level_tree(seed):
    rng = np.random.default_rng(seed)
    result = "cnat8" if seed % 2 else "fixed32"
    slots = 32 if LONG else 4
    topo = fat_tree(4).with_jobs([JobSpec(1, WORKERS, slots=slots, encoding=result)])
    net = SwitchNetwork(topo, session=1000 + seed)
    tree_switches = {topo.attachment(w).node for w in WORKERS}
    assert len(tree_switches) == 3
    contrib = wire.ENC_CNAT8 if seed % 3 else wire.ENC_FIXED32
    elements, ports = run_chaos(lambda h: net.ports[h], topo, 1, 1000 + seed, seed,
                                Chaos(loss=float(rng.uniform(0.1, 0.3))), CALLS, CHUNKS,
                                contrib)
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    assert all(done.values()), done
    print(f"fat-tree seed {seed}: {elements} elements in {CALLS} calls exact; chaos {done}")


def test_exact_sums_under_chaos_at_the_largest_job_the_controller_allows():
    """255 workers (the header's count is 8 bits), on a leaf-spine of nine leaves under one
    spine (a switch has 32 children at most), each call with a chunk at the job's largest
    exponent and the same sign everywhere: the root sums 255 top codes without overflow,
    under loss, duplication, replays and stale frames."""
    from controller.topology import leaf_spine

    topo = leaf_spine(leaves=9, spines=1, hosts=29)
    workers = tuple(h.name for h in topo.hosts[:255])
    topo = topo.with_jobs([JobSpec(1, workers, slots=4, encoding="cnat8")])
    net = SwitchNetwork(topo, session=2000)
    elements, ports = run_chaos(lambda h: net.ports[h], topo, 1, 2000, 7,
                                Chaos(loss=0.05, dup=0.05, delay=0.05, replay=0.02,
                                      old_session=0.02, corrupt=0.01, stale_result=0.02),
                                2, 3, wire.ENC_CNAT8)
    assert elements and topo.headroom(1) >= 8


@pytest.mark.parametrize("contrib, result, partials", [
    (wire.ENC_UQ4, "sum8", "sum8"),       # exact SUM8 partial sums edge -> aggregation -> core
    (wire.ENC_NAT4, "cnat8", "cnat8"),    # one switch: h1 and h2 under one edge switch
])
def test_four_bit_exact_under_chaos_on_a_three_level_tree(contrib, result, partials):
    """UQ4 up the unbalanced three-level tree with SUM8 partial sums, and NAT4 on a single
    switch (its CNAT8 partial sums are roundings, checked elsewhere): every result bit for
    bit the integer sum of what was sent, under the chaos schedule."""
    seed = 3
    workers = WORKERS if contrib == wire.ENC_UQ4 else WORKERS[:2]
    topo = fat_tree(4).with_jobs([JobSpec(1, workers, slots=4, encoding=result,
                                          partials=partials)])
    net = SwitchNetwork(topo, session=1500 + contrib)
    elements, ports = run_chaos(lambda h: net.ports[h], topo, 1, 1500 + contrib, seed,
                                Chaos(loss=0.1, dup=0.05, replay=0.02, old_session=0.02,
                                      corrupt=0.01, stale_result=0.02), CALLS, CHUNKS, contrib)
    assert elements
