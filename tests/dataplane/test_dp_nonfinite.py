"""Non-finite values through the compiled program on both targets (docs/PROTOCOL.md
"Non-finite values"): real allreduce clients, one worker with NaN in one chunk, another with
inf and a value beyond the job's range in two more; every worker gets those chunks back NaN
and the rest summed, on one switch and up a two-level tree, and the next call is whole."""

from __future__ import annotations

import numpy as np
import pytest

from controller.topology import JobSpec
from harness.fabric import FabricPort
from harness.workers import run_workers
from tests.dataplane.test_dp_chaos import TREES, topo_framer
from worker import wire
from worker.allreduce import AllReduceClient, job_params

ELEMS = wire.ELEMS
SLOTS = 4
CHUNKS = 2 * SLOTS + 1
BAD = {1: (5, np.nan), 2: (7, -np.inf)}        # rank: (chunk, value)
RANGE = (0, 8, np.float32(2.0 ** 31))            # rank 0, chunk 8: at max_exp 158's mark


@pytest.mark.uncompared
@pytest.mark.parametrize("result", ["fixed32", "cnat8"])
@pytest.mark.parametrize("tree", list(TREES))
def test_nonfinite_chunks_come_back_nan_on_every_worker(fabric, tree, result):
    job_id = 160 + 2 * list(TREES).index(tree) + (result == "cnat8")
    workers = TREES[tree]
    topo = fabric.program([JobSpec(job_id, workers, slots=SLOTS, encoding=result)])
    # Real clients in threads poll for results, each target at its own moments.
    fabric.uncompared()
    session = fabric.session()
    contrib = wire.ENC_CNAT8 if result == "cnat8" else wire.ENC_FIXED32
    job = job_params(topo, job_id, session, contrib)
    rng = np.random.default_rng(job_id)
    n = len(workers)
    clean = [[rng.uniform(-1, 1, CHUNKS * ELEMS).astype(np.float32) for _ in range(2)]
             for _ in range(n)]
    tensors = [[t.copy() for t in calls] for calls in clean]
    for rank, (chunk, value) in BAD.items():
        tensors[rank][0][chunk * ELEMS + 3] = value
    rank, chunk, value = RANGE
    tensors[rank][0][chunk * ELEMS] = value

    def make(rank):
        return AllReduceClient(FabricPort(fabric, workers[rank]),
                               topo_framer(topo, workers[rank]), job, seed=rank, timeout=20)

    outputs, clients, errors = run_workers(make, tensors, calls=2)
    fabric.quiet(workers)
    assert errors == [None] * n, errors
    mean = [np.mean([c[k] for c in clean], axis=0) for k in range(2)]
    for r in range(n):
        first = outputs[r][0].reshape(CHUNKS, ELEMS)
        nan = np.isnan(first)
        assert set(np.flatnonzero(nan.all(axis=1))) == {5, 7, 8}
        assert np.array_equal(nan.all(axis=1), nan.any(axis=1))
        assert np.array_equal(outputs[r][0], outputs[0][0], equal_nan=True)
        assert np.array_equal(outputs[r][1], outputs[0][1])
        assert not np.isnan(outputs[r][1]).any()
        # summed as usual: FIXED32 to within a few units; C_nat's rounding is unbiased,
        # its mean error over a chunk far below the values' spread
        err = [first[~nan] - mean[0].reshape(CHUNKS, ELEMS)[~nan], outputs[r][1] - mean[1]]
        if result == "fixed32":
            assert max(np.abs(e).max() for e in err) < 1e-4
        else:
            assert max(np.abs(e).mean() for e in err) < 0.15
        assert clients[r].stats.nonfinite_chunks == 3
