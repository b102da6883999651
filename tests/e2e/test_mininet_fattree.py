"""The k=4 fat-tree in Mininet: 16 workers, exact through the edge-aggregation-core tree."""

from __future__ import annotations

from conftest import assert_exact, finish_probes, running, start_probes

from controller import topology
from controller.topology import JobSpec


def test_fat_tree_16_workers_exact_through_the_tree(tmp_path):
    topo = topology.fat_tree(k=4)
    hosts = tuple(h.name for h in topo.hosts)
    assert len(hosts) == 16
    topo = topo.with_jobs([JobSpec(1, hosts, slots=32, encoding="fixed32")])
    # BMv2 loads 20 switches' program faster than softswitch compiles it 20 times
    with running(topo, tmp_path, bmv2=True) as (emu, path):
        records = finish_probes(
            start_probes(emu, path, topo.job(1), tmp_path, "--calls", "1", "--size", "1000",
                         "--timeout", "30"), 600)
    assert assert_exact(records) == 6
    assert {r["workers"] for r in records} == {16}
