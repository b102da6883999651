"""The in-process switch the DDP tests train through: the only place they import the
softswitch harness from, so a move of that harness changes this file alone."""

from __future__ import annotations

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from worker import wire
from worker.allreduce import AllReduceClient

__all__ = ["sparse_switch_clients", "switch_clients", "softswitch_missing"]


def switch_clients(workers: int, encoding: str, window: int = 64, session: int = 1,
                   timeout: float = 30.0, topo=None, traces=None, max_exp: int | None = None):
    """A star of `workers` hosts (or `topo`, whose job 1 is used as it is) on in-process
    softswitch with one job for contributions in `encoding` (its results those
    allreduce/job.py gives the encoding: nat4 -> cnat8, uq4 -> sum8), and make(rank) -> that
    rank's AllReduceClient (call it in the rank's thread), tracing into traces[rank] if
    given."""
    from worker.allreduce.job import JOB_ENCODINGS

    if topo is None:
        topo = star(hosts=workers)
        result, partials = JOB_ENCODINGS[encoding]
        bound = {} if max_exp is None else {"max_exp": max_exp}
        topo = topo.with_jobs([JobSpec(1, tuple(h.name for h in topo.hosts), window,
                                       result, partials, **bound)])
    hosts = list(topo.job(1).workers)
    net = SwitchNetwork(topo, session=session)
    job = net.job_params(1, wire.ENCODING_BY_NAME[encoding])

    def make(rank: int) -> AllReduceClient:
        framer = net.framer(hosts[rank])
        return AllReduceClient(net.ports[hosts[rank]], framer, job, seed=rank, timeout=timeout,
                               trace=None if traces is None else traces[rank])

    return net, make


def sparse_switch_clients(workers: int, encoding: str = "cnat8", slots: int = 16,
                          traces=None, timeout: float = 30.0):
    """A star with one sparse job (block-sparse aggregation) in `encoding`, and make(rank) ->
    that rank's SparseAllReduceClient (tracing into traces[rank] if given)."""
    from worker.allreduce.sparse import SparseAllReduceClient, pads_empty

    topo = star(hosts=workers)
    hosts = [h.name for h in topo.hosts]
    topo = topo.with_jobs([JobSpec(1, tuple(hosts), slots, encoding, mode="sparse")])
    net = SwitchNetwork(topo)
    enc = wire.ENCODING_BY_NAME[encoding]
    job = net.job_params(1, enc)

    def make(rank: int) -> SparseAllReduceClient:
        return SparseAllReduceClient(net.ports[hosts[rank]], net.framer(hosts[rank]), job,
                                     seed=rank, timeout=timeout,
                                     pad_empty=pads_empty(enc, net.elems),
                                     trace=None if traces is None else traces[rank])

    return net, make
