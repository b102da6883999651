"""A forged PRIME of a sparse job through the compiled program on both targets (docs/PROTOCOL.md
"Refusals"), with real clients joined by a fault board as a DDP job's ranks are
(worker/ddp/faults.py): when the forged PRIME (B + 1 blocks, from h2's port) reaches the switch
first, every worker fails naming the count the switch holds and its own; when it races the
honest ones, each run either completes exact or fails so on every worker."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch.distributed as dist

from controller.topology import JobSpec
from harness.fabric import FabricPort
from harness.workers import Trace, check_sparse, run_workers
from tests.dataplane.test_dp_chaos import topo_framer
from tests.worker.test_allreduce_sparse import patterns, sparse_tensor
from tests.worker.test_allreduce_sparse_softswitch import FirstSent, ForgingPort
from worker import wire
from worker.allreduce import AllReduceError, job_params
from worker.allreduce.sparse import SparseAllReduceClient
from worker.ddp.faults import FaultBoard, Posting

HOSTS = ("h1", "h2", "h3", "h4")
ELEMS = wire.ELEMS
NB = 12


def named(topo) -> str:
    """What every failed worker's message says: both counts and the port of the held one."""
    return (f"the switch holds B={NB + 1} from the first PRIME it took, sent by h2 on port "
            f"{topo.attachment('h2').port}; this worker sent B={NB}")


def forged(topo, job_id: int, session: int) -> bytes:
    return topo_framer(topo, "h2").build_sparse(
        wire.MSG_SPARSE_CONTRIB, wire.ENC_CNAT8, job_id, session, 0, 0, 0, 1,
        wire.use_chunk(0, 0, topo.job(job_id).slots), NB + 1, 0, None, wire.FLAG_PRIME)


def run(fabric, job_id: int, seed: int, first: bool):
    topo = fabric.program([JobSpec(job_id, HOSTS, slots=4, encoding="cnat8", mode="sparse")])
    fabric.uncompared()     # clients in threads: each target answers at its own moments
    session = fabric.session()
    job = job_params(topo, job_id, session, wire.ENC_CNAT8)
    rng = np.random.default_rng(seed)
    tensors = [[sparse_tensor(rng, NB * ELEMS, held)]
               for held in patterns(rng, len(HOSTS), NB * ELEMS, "random")]
    frame, store = forged(topo, job_id, session), dist.HashStore()
    traces = [Trace() for _ in HOSTS]
    in_first = threading.Event()
    if first:
        fabric.send("h2", frame)

    def make(rank):
        port = FabricPort(fabric, HOSTS[rank])
        if not first and rank == 0:
            port = FirstSent(port, in_first)
        elif not first and rank == 1:
            port = ForgingPort(port, frame, in_first)
        client = SparseAllReduceClient(port, topo_framer(topo, HOSTS[rank]), job, seed=rank,
                                       timeout=30, trace=traces[rank])
        return Posting(client, FaultBoard(store, rank, HOSTS))

    outputs, clients, errors = run_workers(make, tensors, join_timeout=120)
    fabric.quiet(HOSTS)
    return topo, tensors, outputs, clients, errors, traces


def check_failed(topo, errors):
    for e in errors:
        assert isinstance(e, AllReduceError), e
        assert named(topo) in str(e), e


@pytest.mark.uncompared
@pytest.mark.parametrize("trial", range(10))
def test_a_forged_first_prime_fails_every_worker_naming_both_counts(fabric, trial):
    topo, _, _, _, errors, _ = run(fabric, 330 + trial, 900 + trial, first=True)
    check_failed(topo, errors)


@pytest.mark.uncompared
@pytest.mark.parametrize("trial", range(3))
def test_a_racing_forged_prime_ends_exact_or_named_on_every_worker(fabric, trial):
    topo, tensors, outputs, clients, errors, traces = run(fabric, 340 + trial, 950 + trial,
                                                    first=False)
    exact = errors == [None] * len(HOSTS)
    print(f"{fabric.name} trial {trial}: {'exact' if exact else 'failed, named'}")
    if exact:
        assert check_sparse(traces, tensors, outputs, len(HOSTS)) > 0
        assert clients[1].stats.refusals_ignored == 1
    else:
        check_failed(topo, errors)
