"""Topology builders, the addressing plan and the JSON form with its validation."""

import copy
import json

import pytest

from controller import topology as T
from controller.jobs import plan_trees
from controller.topology import Topology, TopologyError
from controller.tree import build_tree


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts_and_roles(k):
    topo = T.fat_tree(k)
    half = k // 2
    assert len(topo.hosts) == k ** 3 // 4
    assert len(topo.switches) == 5 * k * k // 4
    # host links + edge-aggregation + aggregation-core links
    assert len(topo.links) == k ** 3 // 4 + 2 * k * half * half
    roles = [s.role for s in topo.switches]
    assert roles.count("core") == half * half
    assert roles.count("aggregation") == roles.count("edge") == k * half
    for s in topo.switches:
        assert len(topo.ports(s.name)) == k      # every switch of a fat-tree has k ports


def test_fat_tree_port_numbering():
    k, half = 4, 2
    topo = T.fat_tree(k)
    for s in topo.switches:
        ports = topo.ports(s.name)
        assert [p.port for p in ports] == list(range(1, k + 1))
        peers = [topo.switch(p.peer) if topo.is_switch(p.peer) else None for p in ports]
        if s.role == "edge":
            assert all(p is None for p in peers[:half])                     # hosts first
            assert all(p.role == "aggregation" and p.pod == s.pod for p in peers[half:])
        elif s.role == "aggregation":
            assert all(p.role == "edge" and p.pod == s.pod for p in peers[:half])
            assert all(p.role == "core" for p in peers[half:])
        else:
            assert [p.pod for p in peers] == list(range(1, k + 1))          # port p -> pod p
    # each core reaches one aggregation switch per pod, the same index in every pod
    for core in [s for s in topo.switches if s.role == "core"]:
        aggs = [topo.switch(p.peer) for p in topo.ports(core.name)]
        index = {[a.name for a in topo.switches if a.pod == agg.pod
                  and a.role == "aggregation"].index(agg.name) for agg in aggs}
        assert len(index) == 1


def test_leaf_spine_counts_and_ports():
    topo = T.leaf_spine(leaves=3, spines=2, hosts=4)
    assert len(topo.hosts) == 12 and len(topo.switches) == 5 and len(topo.links) == 12 + 6
    leaves = [s for s in topo.switches if s.role == "leaf"]
    spines = [s for s in topo.switches if s.role == "spine"]
    for leaf in leaves:
        peers = [p.peer for p in topo.ports(leaf.name)]
        assert [p.port for p in topo.ports(leaf.name)] == list(range(1, 7))
        assert all(topo.is_host(n) for n in peers[:4])
        assert peers[4:] == [s.name for s in spines]
    for spine in spines:
        assert [p.peer for p in topo.ports(spine.name)] == [leaf.name for leaf in leaves]


def test_star():
    topo = T.star(5)
    (s,) = topo.switches
    assert [(p.port, p.peer) for p in topo.ports(s.name)] == [(i, f"h{i}") for i in range(1, 6)]
    assert topo.attachment("h3").port == 3 and topo.attachment("h3").node == s.name


def test_addressing_plan_is_unique_and_deterministic():
    a, b = T.fat_tree(8), T.fat_tree(8)
    assert a.to_json() == b.to_json()
    for items, attr in ((a.hosts, "ip"), (a.hosts, "mac"), (a.switches, "mac"),
                        (a.switches, "grpc_addr"), (a.switches, "device_id"),
                        (a.switches, "thrift_port")):
        values = [getattr(x, attr) for x in items]
        assert len(set(values)) == len(values), attr
    assert a.switches[0].grpc_addr == "127.0.0.1:50051"
    assert a.switches[-1].grpc_addr == f"127.0.0.1:{50050 + len(a.switches)}"
    assert [h.name for h in a.hosts] == [f"h{i}" for i in range(1, 129)]
    assert a.service_ip not in {h.ip for h in a.hosts}
    for link in a.links:
        for node, port in link.ends():
            assert len(T.ifname(node, port)) <= 15


def test_builder_link_parameters():
    topo = T.star(2, bw_mbit=10, delay_ms=2.5, loss=0.01, grpc_base_port=60000)
    assert {(k.bw_mbit, k.delay_ms, k.loss) for k in topo.links} == {(10.0, 2.5, 0.01)}
    assert topo.switches[0].grpc_addr == "127.0.0.1:60000"
    assert {k.loss for k in topo.with_loss(0.5).links} == {0.5}


@pytest.mark.parametrize("build", [lambda: T.fat_tree(3), lambda: T.fat_tree(0),
                                   lambda: T.star(0), lambda: T.leaf_spine(leaves=0),
                                   lambda: T.star(2, bw_mbit=0), lambda: T.star(2, loss=1.5)])
def test_bad_builder_arguments(build):
    with pytest.raises(TopologyError):
        build()


def test_json_round_trip(tmp_path):
    topo = T.leaf_spine(leaves=2, spines=2, hosts=2, loss=0.1).with_jobs(
        [T.JobSpec(3, ("h1", "h4"), 32, "cnat8")])
    path = tmp_path / "topo.json"
    topo.save(str(path))
    back = Topology.load(str(path))
    assert back.to_dict() == topo.to_dict()
    assert back.job(3).workers == ("h1", "h4") and back.job(3).encoding == "cnat8"
    assert json.loads(path.read_text())["version"] == T.FORMAT_VERSION


def _mutate(fn):
    data = copy.deepcopy(T.star(3).with_jobs([T.JobSpec(1, ("h1", "h2"))]).to_dict())
    fn(data)
    return data


def _set(path, value):
    def fn(d):
        obj = d
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return fn


def _rename(d, old, new):
    for item in d["switches"] + d["hosts"]:
        if item["name"] == old:
            item["name"] = new
    for link in d["links"]:
        for end in ("node1", "node2"):
            if link[end] == old:
                link[end] = new


BAD = [
    (_set(["version"], 99), "version 99"),
    (lambda d: d.pop("service"), "missing field 'service'"),
    (lambda d: d["switches"][0].pop("grpc_addr"), "missing field 'grpc_addr'"),
    (_set(["switches", 0, "grpc_addr"], "nowhere"), "HOST:PORT"),
    (_set(["hosts", 1, "ip"], "10.0.1.1"), "share ip"),
    (_set(["hosts", 1, "ip"], "10.0.1.300"), "not an IPv4 address"),
    (_set(["hosts", 0, "mac"], "zz:00:00:00:00:00"), "not a MAC address"),
    (_set(["hosts", 0, "name"], "s1"), "used by a switch and a host"),
    (_set(["links", 0, "node2"], "s9"), "unknown node 's9'"),
    (_set(["links", 1, "port2"], 1), "already used"),
    (_set(["links", 1, "port2"], 600), "outside 1..510"),
    (_set(["links", 0, "loss"], 2), "loss: must be within [0, 1]"),
    (_set(["links", 0, "bw_mbit"], "fast"), "expected int or float"),
    (lambda d: d["links"].pop(2), "host 'h3' must have exactly one link"),
    (lambda d: d["switches"].append({**d["switches"][0], "name": "s2", "device_id": 2,
                                     "grpc_addr": "127.0.0.1:1", "mac": "02:53:00:00:00:02"}),
     "not connected: s2"),
    (lambda d: _rename(d, "s1", "switch_number1"), "'switch_number1-eth1' is longer than 15"),
    (_set(["jobs", 0, "workers"], ["h1", "h9"]), "worker 'h9' is not a host"),
    (_set(["jobs", 0, "slots"], 513), "slots: must be 1..512"),
    (_set(["jobs", 0, "encoding"], "fp16"), "encoding"),
    (_set(["jobs", 0, "partials"], "int8"), "job 1.partials: must be one of"),
    (lambda d: d["jobs"].append(dict(d["jobs"][0])), "job id 1 is used twice"),
    (_set(["service", "ip"], "10.0.1.2"), "service.ip 10.0.1.2 is also the address of 'h2'"),
]


@pytest.mark.parametrize("mutation,message", BAD)
def test_bad_topology_is_rejected_with_a_clear_error(mutation, message):
    data = _mutate(mutation)
    with pytest.raises(TopologyError) as err:
        Topology.from_dict(data)
    assert message in str(err.value)


def test_bad_files(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("{not json")
    with pytest.raises(TopologyError, match=r"t\.json: not JSON"):
        Topology.load(str(path))
    with pytest.raises(TopologyError, match="cannot read"):
        Topology.load(str(tmp_path / "missing.json"))
    path.write_text("[1, 2]")
    with pytest.raises(TopologyError, match="expected a JSON object"):
        Topology.load(str(path))


def test_a_valid_mutation_still_loads():
    # The mutations above fail for the stated reason, not because the base is broken.
    topo = Topology.from_dict(_mutate(lambda d: None))
    assert len(topo.hosts) == 3


def test_a_job_of_more_workers_than_the_count_field_holds_is_refused():
    topo = T.fat_tree(k=12)
    data = topo.to_dict()
    data["jobs"] = [{"id": 1, "workers": [h.name for h in topo.hosts[:256]], "slots": 8,
                     "encoding": "fixed32"}]
    with pytest.raises(TopologyError, match="at most 255"):
        Topology.from_dict(data)


def test_the_model_refuses_a_job_whose_worker_count_would_wrap():
    """Built in memory, not parsed: a 256-worker job would have its count wrap to 0 on the
    switch and in the header; the largest, 255, plans."""
    topo = T.fat_tree(k=12)
    names = [h.name for h in topo.hosts]
    tree = build_tree(topo, T.JobSpec(1, tuple(names[:255]), 8))
    assert tree.nodes[tree.root].workers == 255
    with pytest.raises(TopologyError, match="256 workers, at most 255"):
        plan_trees(topo.with_jobs([T.JobSpec(1, tuple(names[:256]), 8)]))
