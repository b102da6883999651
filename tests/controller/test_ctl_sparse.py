"""Sparse (block) jobs on the control plane: the job's mode in the topology file and the CLI,
its job entry (job_sparse_root, which the compiled program has), the refusal of a sparse job
whose tree spans several switches, and the mode where the CLI lists jobs."""

import json
import os

import pytest

from controller import aggregation as A
from controller import topology as T
from controller.jobs import JobError, make_jobs
from controller.main import main
from controller.p4info import P4Info
from controller.program import canonical_state, desired_state
from controller.topology import JobSpec, TopologyError
from controller.tree import TreeError, build_tree

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(REPO, "p4src", "build", "agg.p4info.txt")


def job_entries(topo, switch):
    return [e for e in desired_state(topo, {j.id: 40 + j.id for j in topo.jobs})[switch]
            if getattr(e, "table", None) == A.JOBS]


def test_sparse_job_gets_the_sparse_root_action_with_job_roots_parameters():
    topo = T.leaf_spine(leaves=2, spines=1, hosts=4)
    topo = topo.with_jobs([JobSpec(3, ("h1", "h2", "h3"), 16, "cnat8", mode="sparse"),
                           JobSpec(4, ("h1", "h2"), 8)])
    rows = {dict(e.match)["hdr.agg.job_id"].value: e for e in job_entries(topo, "s1")}
    sparse, dense = rows[3], rows[4]
    assert sparse.action == A.JOB_SPARSE_ROOT and dense.action == A.JOB_ROOT
    assert dict(sparse.params) == {"base": 0, "num_slots": 16, "num_children": 3,
                                   "mcast_grp": 3, "result_enc": 1, "max_exp": 158,
                                   "session": 43,
                                   "round_key": A.round_key(0, 3, topo.switch("s1").device_id)}
    assert [k for k, _ in sparse.params] == [k for k, _ in dense.params]
    # the compiled program has the action with these parameters
    state = canonical_state(desired_state(topo, {3: 1, 4: 2}), P4Info.load(REAL))
    assert any(getattr(e, "action", None) == A.JOB_SPARSE_ROOT for e in state["s1"])


def test_sparse_job_over_several_switches_is_refused_clearly():
    topo = T.leaf_spine(leaves=2, spines=1, hosts=2)
    job = JobSpec(7, ("h1", "h3"), mode="sparse")       # h1 on s1, h3 on s2
    with pytest.raises(TreeError, match="job 7: a sparse job runs on one switch"):
        build_tree(topo, job)
    with pytest.raises(TreeError, match="one switch"):
        desired_state(topo.with_jobs([job]), {7: 1})
    # the same workers as a dense job are fine, and so is a sparse job on one leaf
    assert len(build_tree(topo, JobSpec(7, ("h1", "h3"))).nodes) == 3
    assert build_tree(topo, JobSpec(8, ("h1", "h2"), mode="sparse")).root == "s1"


def test_mode_in_the_topology_file():
    topo = T.star(3).with_jobs([JobSpec(1, ("h1", "h2"), mode="sparse"),
                                JobSpec(2, ("h2", "h3"))])
    data = topo.to_dict()
    assert data["jobs"][0]["mode"] == "sparse"
    assert "mode" not in data["jobs"][1]             # dense is the default, files unchanged
    back = T.Topology.from_dict(json.loads(json.dumps(data)))
    assert [j.mode for j in back.jobs] == ["sparse", "dense"]
    data["jobs"][1]["mode"] = "blocky"
    with pytest.raises(TopologyError, match=r"job 2\.mode: must be one of \('dense', 'sparse'\)"):
        T.Topology.from_dict(data)


def test_mode_in_cli_job_specs():
    topo = T.star(4)
    jobs = make_jobs(["h1,h2:mode=sparse:enc=cnat8", "h3,h4"], topo)
    assert [(j.mode, j.encoding) for j in jobs] == [("sparse", "cnat8"), ("dense", "fixed32")]
    with pytest.raises(JobError, match="mode must be one of"):
        make_jobs(["h1,h2:mode=omni"], topo)


def test_cli_lists_the_mode_and_refuses_a_spanning_sparse_job(capsys, tmp_path):
    assert main(["--topo", "star", "--hosts", "3", "--dry-run", "--jobs",
                 "h1-h3:id=5:mode=sparse", "--sessions", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "job 5: 3 workers, 64 slots, fixed32 results, sparse, session " in out
    assert "NatIngress.agg.job_sparse_root(base=0, num_slots=64, num_children=3" in out
    assert main(["--topo", "leaf-spine", "--leaves", "2", "--spines", "1", "--hosts", "2",
                 "--dry-run", "--jobs", "h1,h3:mode=sparse", "--sessions",
                 str(tmp_path / "s.json")]) != 0
    assert "a sparse job runs on one switch" in capsys.readouterr().err
