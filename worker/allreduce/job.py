"""What every worker of a job must agree on, built in one place (DESIGN contract 8).

Every entry point (worker/main.py, a DDP rank, the benches, the test harness) gets its
JobParams here, from the topology the controller programs the switches from and the
session the controller installed: the tree's headroom (cnat8 partial sums need more than
ceil(log2 n)), the job's exponent bound and its slot count (the stride of the chunk
numbers) are the switches' own, so a hand-built copy cannot drift from them.
"""

from __future__ import annotations

from controller.topology import DEFAULT_MAX_EXP, JobSpec, Topology, TopologyError
from controller.tree import build_tree
from protocol.combos import sums_problem
from protocol.encodings import ALL
from worker import wire
from worker.allreduce.client import JobParams

# The results and partial sums each contribution encoding can be aggregated into, and what
# `mininet/run.py` and the DDP rank give a job by default for each (its results and partial
# sums, topology JobSpec fields): protocol/encodings.py declares them.
JOB_ENCODINGS = {e.name: e.job for e in ALL if e.job}


def encoding_problem(spec: JobSpec, encoding: int, tree_switches: int = 1) -> str | None:
    """Why workers contributing `encoding` cannot run job `spec`, or None."""
    return sums_problem(spec.id, encoding, spec.encoding, spec.partials, tree_switches)


def job_params(topo: Topology, job_id: int, session: int, encoding: int,
               elems: int = wire.ELEMS, *, window: int | None = None,
               workers: int | None = None, host_aggregator: bool = False) -> JobParams:
    """The client's view of job `job_id` of `topo` in `session`, contributing `encoding`
    with `elems` elements per packet. `window`: slots in flight (default: the job's slots).
    A job the topology does not hold (its switches programmed from elsewhere) needs
    `workers` and `window`; it gets the single-switch headroom and the controller's default
    exponent bound. A host aggregator (worker/baseline.py, block_aggregator.py) sums on one
    host: headroom ceil(log2 n), no bound of its own."""
    try:
        spec = topo.job(job_id)
    except TopologyError:
        spec = None
    if spec is None:
        if workers is None or window is None:
            raise ValueError(f"job {job_id} is not in the topology: give its workers and "
                             f"window")
        limits = {} if host_aggregator else {"max_exp": DEFAULT_MAX_EXP}
        return JobParams(job_id, session, workers, window, encoding, elems, **limits)
    if workers is not None and workers != len(spec.workers):
        raise ValueError(f"{workers} workers, but job {job_id} in the topology has "
                         f"{len(spec.workers)} ({', '.join(spec.workers)})")
    limits = {}
    if not host_aggregator:
        tree = build_tree(topo, spec)
        why = encoding_problem(spec, encoding, len(tree.nodes))
        if why:
            raise ValueError(why)
        # Topology.headroom is this tree's headroom: the tree is built once here
        limits = {"headroom": tree.headroom(), "max_exp": spec.max_exp, "slots": spec.slots}
        if len(tree.nodes) == 1:
            limits["children"] = tuple((c.node, c.port)
                                       for c in tree.nodes[tree.root].children)
    return JobParams(job_id, session, len(spec.workers),
                     spec.slots if window is None else window, encoding, elems, **limits)
