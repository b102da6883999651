"""Aggregation trees, job regions and the aggregation entries, checked by simulating a job's
contributions and results through the computed entries."""

import random

import pytest

from controller import aggregation as A
from controller import topology as T
from controller.entities import MulticastGroupEntry
from controller.jobs import JobError, allocate_regions, make_jobs, parse_job_spec
from controller.topology import JobSpec
from controller.tree import TreeError, build_tree

TOPOS = {
    "star": lambda: T.star(6),
    "leaf-spine": lambda: T.leaf_spine(leaves=4, spines=2, hosts=3),
    "fat-tree-4": lambda: T.fat_tree(4),
    "fat-tree-6": lambda: T.fat_tree(6),
}


def random_jobs(topo, count, seed):
    rng = random.Random(seed)
    names = [h.name for h in topo.hosts]
    return [JobSpec(i + 1, tuple(rng.sample(names, rng.randint(1, len(names)))),
                    rng.choice([8, 16, 64]), rng.choice(["fixed32", "cnat8"]),
                    rng.choice(["fixed32", "cnat8"]))
            for i in range(count)]


def check_tree(topo, tree):
    roots = [n for n in tree.nodes.values() if n.parent is None]
    assert [r.switch for r in roots] == [tree.root]
    seen_workers = []
    for node in tree.nodes.values():
        assert [c.bit for c in node.children] == list(range(len(node.children)))
        for c in node.children:
            assert topo.port(node.switch, c.port).peer == c.node
            if topo.is_host(c.node):
                seen_workers.append(c.node)
            else:
                child = tree.nodes[c.node]
                assert child.parent == node.switch
                assert topo.port(child.switch, child.parent_port).peer == node.switch
        if node.parent is not None:
            assert any(c.node == node.switch for c in tree.nodes[node.parent].children)
    assert sorted(seen_workers) == sorted(tree.job.workers)   # each worker exactly once
    assert tree.nodes[tree.root].workers == len(tree.job.workers)


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_trees_cover_each_worker_once_with_one_root(name):
    topo = TOPOS[name]()
    for job in random_jobs(topo, 20, seed=7):
        check_tree(topo, build_tree(topo, job))


def test_roots_are_the_top_tier():
    ft = T.fat_tree(4)
    spread = JobSpec(1, ("h1", "h3"))                 # two edges of pod 1
    tree = build_tree(ft, spread)
    assert ft.switch(tree.root).role == "core"
    assert sorted(ft.switch(n).role for n in tree.nodes) == ["aggregation", "core", "edge",
                                                            "edge"]
    assert ft.switch(build_tree(ft, JobSpec(2, ("h1", "h16"))).root).role == "core"
    one_edge = build_tree(ft, JobSpec(3, ("h1", "h2")))
    assert list(one_edge.nodes) == [one_edge.root] == [ft.attachment("h1").node]
    ls = T.leaf_spine()
    assert ls.switch(build_tree(ls, JobSpec(1, ("h1", "h8"))).root).role == "spine"
    # jobs spread over the equally good roots
    roots = {build_tree(ft, JobSpec(i, ("h1", "h16"))).root for i in range(1, 5)}
    assert len(roots) == 4


def test_too_many_children_is_a_clear_error():
    topo = T.star(33)
    with pytest.raises(TreeError, match="33 children, at most 32"):
        build_tree(topo, JobSpec(1, tuple(h.name for h in topo.hosts)))
    build_tree(topo, JobSpec(1, tuple(h.name for h in topo.hosts[:32])))


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_regions_never_overlap(name):
    topo = TOPOS[name]()
    for seed in range(5):
        trees = [build_tree(topo, j) for j in random_jobs(topo, 8, seed)]
        regions = allocate_regions(trees)
        per_switch = {}
        for (switch, _job), r in regions.items():
            assert 0 <= r.base and r.end <= T.POOL_SIZE
            per_switch.setdefault(switch, []).append(r)
        for tree in trees:
            for switch in tree.nodes:
                assert regions[switch, tree.job.id].num_slots == tree.job.slots
        for rs in per_switch.values():
            rs.sort(key=lambda r: r.base)
            for a, b in zip(rs, rs[1:], strict=False):
                assert a.end <= b.base


def test_regions_fill_the_pool_then_fail():
    topo = T.star(4)
    jobs = [JobSpec(i, ("h1", "h2"), 128) for i in range(1, 5)]
    trees = [build_tree(topo, j) for j in jobs]
    bases = sorted(r.base for r in allocate_regions(trees).values())
    assert bases == [0, 128, 256, 384]
    with pytest.raises(JobError, match="no room for job 5"):
        allocate_regions(trees + [build_tree(topo, JobSpec(5, ("h3",), 1))])


def test_job_specs():
    topo = T.fat_tree(4)
    f = parse_job_spec("h1-h3,h7:slots=32:enc=cnat8:id=9", topo)
    assert f == {"id": 9, "workers": ["h1", "h2", "h3", "h7"], "slots": 32,
                 "encoding": "cnat8"}
    jobs = make_jobs(["all", "h1-h4:id=1", "h5,h6"], topo)
    assert [j.id for j in jobs] == [2, 1, 3]
    assert len(jobs[0].workers) == 16
    for bad, msg in [("h1-h99", "not a host"), ("h1:slots=x", "integer"),
                     ("h1:color=red", "unknown key"), ("h1:enc=fp8", "enc must be"),
                     ("h1:partials=int8", "partials must be"),
                     ("h1:slots=1000", "slots"), ("h2,h2", "listed twice")]:
        with pytest.raises(JobError, match=msg):
            make_jobs([bad], topo)
    with pytest.raises(JobError, match="given twice"):
        make_jobs(["h1:id=2", "h2:id=2"], topo)


def tables_of(entries):
    """switch -> (jobs, children, groups) as plain dicts, from the computed entries."""
    out = {}
    for switch, rows in entries.items():
        jobs, children, groups = {}, {}, {}
        for e in rows:
            if isinstance(e, MulticastGroupEntry):
                groups[e.group_id] = [p for p, _ in e.replicas]
            elif e.table == A.JOBS:
                jobs[dict(e.match)[A.JOB_ID].value] = (e.action, dict(e.params))
            elif e.table == A.CHILDREN:
                m = dict(e.match)
                children[m[A.JOB_ID].value, m[A.INGRESS_PORT].value] = dict(e.params)["index"]
        out[switch] = (jobs, children, groups)
    return out


def simulate(topo, tables, job):
    """Contributions climb the tree, results come down: worker -> results received."""
    seen, received, completed = {}, {}, []

    def contribution(switch, port, count):
        jobs, children, _ = tables[switch]
        action, params = jobs[job.id]
        bit = children[job.id, port]                     # the port must be a child
        bits = seen.setdefault(switch, {})
        assert bit not in bits, f"{switch}: bit {bit} contributed twice"
        bits[bit] = count
        if len(bits) < params["num_children"]:
            return
        assert sorted(bits) == list(range(params["num_children"]))
        total = sum(bits.values())
        completed.append(switch)
        if action == A.JOB_ROOT:
            assert params["result_enc"] == A.RESULT_ENCODING[job.encoding]
            assert total == len(job.workers)
            result(switch, params["mcast_grp"])
        else:
            assert params["partial_enc"] == A.RESULT_ENCODING[job.partials]
            up = topo.port(switch, params["parent_port"])
            contribution(up.peer, up.peer_port, total)

    def result(switch, group):
        for port in tables[switch][2][group]:
            peer = topo.port(switch, port)
            if topo.is_host(peer.peer):
                received[peer.peer] = received.get(peer.peer, 0) + 1
            else:
                action, params = tables[peer.peer][0][job.id]
                assert action == A.JOB_CHILD and params["parent_port"] == peer.peer_port
                result(peer.peer, params["mcast_grp"])

    for w in job.workers:
        att = topo.attachment(w)
        contribution(att.node, att.port, 1)
    return received, completed


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_entries_aggregate_every_worker_and_return_one_result_each(name):
    topo = TOPOS[name]()
    jobs = random_jobs(topo, 6, seed=3)
    trees = [build_tree(topo, j) for j in jobs]
    tables = tables_of(A.entries(topo, trees, {j.id: 5 for j in jobs}))
    for job, tree in zip(jobs, trees, strict=True):
        received, completed = simulate(topo, tables, job)
        assert received == {w: 1 for w in job.workers}
        assert sorted(completed) == sorted(tree.nodes)      # every tree switch, once
    # no switch outside a job's tree has entries for it
    for switch, (jobs_table, _, groups) in tables.items():
        for tree in trees:
            inside = switch in tree.nodes
            assert (tree.job.id in jobs_table) == inside == (tree.job.id in groups)
