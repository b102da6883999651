"""Entries of NatIngress.agg and the multicast groups: the jobs' aggregation trees.

On every switch of a job's tree: the job entry (job_root at the root, with the result encoding;
job_sparse_root instead for a sparse job, whose tree is that one switch; job_child elsewhere,
with the port towards the parent; all with the job's exponent bound and its session, which
only the control plane moves: docs/PROTOCOL.md "Sessions"), one children entry per
child ((job, ingress port) -> bit and weight), and the job's multicast group (id = job id)
replicating to the child ports. Regions come from controller.jobs.allocate_regions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from controller.entities import Entity, MulticastGroupEntry, TableEntry
from controller.jobs import Region, allocate_regions
from controller.topology import Topology, TopologyError
from controller.tree import JobTree
from protocol.encodings import BY_NAME, RESULTS

JOBS = "NatIngress.agg.jobs"
JOB_ROOT = "NatIngress.agg.job_root"
JOB_CHILD = "NatIngress.agg.job_child"
JOB_SPARSE_ROOT = "NatIngress.agg.job_sparse_root"
CHILDREN = "NatIngress.agg.children"
SET_CHILD = "NatIngress.agg.set_child"
JOB_ID = "hdr.agg.job_id"
INGRESS_PORT = "sm.ingress_port"
TABLES = (JOBS, CHILDREN)
# the wire number of each result and partial-sum encoding the job table installs
RESULT_ENCODING = {name: BY_NAME[name].code for name in RESULTS}


def group_id(job_id: int) -> int:
    return job_id


def round_key(seed: int, job_id: int, device_id: int) -> int:
    """A switch's 32-bit key for the rounding bits of a job's re-compressed sums: a function
    of the run's seed, the job and the switch, so a rerun of the seed rounds alike and two
    switches of one tree round independently (DESIGN contract 10)."""
    text = f"natswitch-round:{seed}:{job_id}:{device_id}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=4).digest(), "big")


def switch_entries(tree: JobTree, switch: str, region: Region, session: int,
                   device_id: int) -> list[Entity]:
    node = tree.nodes[switch]
    job = tree.job
    params = {"base": region.base, "num_slots": region.num_slots,
              "num_children": len(node.children), "mcast_grp": group_id(job.id)}
    # (in the actions' order: the dry run prints them so)
    last = {"max_exp": job.max_exp, "session": session,
            "round_key": round_key(job.seed, job.id, device_id)}
    if node.parent is None:
        action = JOB_SPARSE_ROOT if job.mode == "sparse" else JOB_ROOT
        job_entry = TableEntry.make(JOBS, {JOB_ID: job.id}, action,
                                    {**params, "result_enc": RESULT_ENCODING[job.encoding],
                                     **last})
    else:
        assert job.mode == "dense", "build_tree refuses sparse jobs over several switches"
        job_entry = TableEntry.make(JOBS, {JOB_ID: job.id}, JOB_CHILD,
                                    {**params, "parent_port": node.parent_port,
                                     "partial_enc": RESULT_ENCODING[job.partials],
                                     **last})
    rows: list[Entity] = [MulticastGroupEntry.make(group_id(job.id),
                                                   [c.port for c in node.children])]
    rows.append(job_entry)
    # A child's weight: 1 for a worker, the worker count of a child switch's subtree.
    rows.extend(TableEntry.make(CHILDREN, {JOB_ID: job.id, INGRESS_PORT: c.port}, SET_CHILD,
                                {"index": c.bit, "weight": tree.nodes[c.node].workers
                                 if c.node in tree.nodes else 1,
                                 "max_mag": tree.max_magnitude(c)})
                for c in node.children)
    return rows


def entries(topo: Topology, trees: list[JobTree], sessions: Mapping[int, int],
            make=None) -> dict[str, list[Entity]]:
    """Every switch's aggregation entries; `sessions` maps each job id to its session.
    `make`: the program's switch_entries() (the Tofino profile's twin has its own)."""
    make = make or switch_entries
    regions = allocate_regions(trees)
    out: dict[str, list[Entity]] = {s.name: [] for s in topo.switches}
    for tree in trees:
        session = job_session(sessions, tree.job.id)
        for switch in tree.nodes:
            out[switch].extend(make(tree, switch, regions[switch, tree.job.id], session,
                                    topo.switch(switch).device_id))
    return out


def job_session(sessions: Mapping[int, int], job_id: int) -> int:
    """The job's session, checked: 1..65535 (0 is what a slot no session touched holds)."""
    try:
        session = sessions[job_id]
    except KeyError:
        raise TopologyError(f"job {job_id} has no session") from None
    if not isinstance(session, int) or not 1 <= session <= 0xFFFF:
        raise TopologyError(f"job {job_id}: session must be within 1..65535, got {session!r}")
    return session
