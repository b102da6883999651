"""Routes: walking the installed entries hop by hop over the links reaches every host."""

import pytest

from controller import forwarding
from controller import topology as T
from controller.entities import Lpm, ipv4, mac
from controller.forwarding import distances

TOPOS = {
    "star": lambda: T.star(5),
    "leaf-spine": lambda: T.leaf_spine(leaves=4, spines=3, hosts=2),
    "fat-tree-4": lambda: T.fat_tree(4),
    "fat-tree-6": lambda: T.fat_tree(6),
}


def route_tables(topo):
    """switch -> destination IPv4 (int) -> (port, smac, dmac), from the computed entries."""
    tables = {}
    for switch, rows in forwarding.entries(topo).items():
        table = tables.setdefault(switch, {})
        for e in rows:
            assert e.table == forwarding.ROUTES and e.action == forwarding.ROUTE
            (field, m), = e.match
            assert field == forwarding.DST and isinstance(m, Lpm) and m.prefix_len == 32
            assert m.value not in table, f"{switch}: two routes for one host"
            p = dict(e.params)
            table[m.value] = (p["port"], p["smac"], p["dmac"])
    return tables


def walk(topo, tables, src, dst):
    """The switches a packet from src to dst visits, checking MAC rewrites on every hop."""
    node = topo.attachment(src).node
    path = []
    dst_ip = ipv4(topo.host(dst).ip)
    while topo.is_switch(node):
        assert len(path) <= len(topo.switches), f"loop: {path}"
        path.append(node)
        port, smac, dmac = tables[node][dst_ip]
        peer = topo.port(node, port).peer
        assert smac == mac(topo.switch(node).mac)
        peer_mac = topo.switch(peer).mac if topo.is_switch(peer) else topo.host(peer).mac
        assert dmac == mac(peer_mac), f"{node} rewrites to the wrong next-hop MAC"
        node = peer
    assert node == dst, f"{src} -> {dst} ended at {node} via {path}"
    return path


@pytest.mark.parametrize("name", sorted(TOPOS))
def test_every_host_pair_is_reachable_on_shortest_paths(name):
    topo = TOPOS[name]()
    tables = route_tables(topo)
    for switch in topo.switches:
        assert len(tables[switch.name]) == len(topo.hosts)   # a route for every host
    for src in topo.hosts:
        for dst in topo.hosts:
            if src is dst:
                continue
            path = walk(topo, tables, src.name, dst.name)
            first, last = topo.attachment(src.name).node, topo.attachment(dst.name).node
            assert len(path) == distances(topo, last)[first] + 1


@pytest.mark.parametrize("k", [4, 6])
def test_fat_tree_paths_go_up_then_down(k):
    topo = T.fat_tree(k)
    tables = route_tables(topo)
    for src in topo.hosts:
        for dst in topo.hosts:
            if src is dst:
                continue
            tiers = [topo.switch(s).tier for s in walk(topo, tables, src.name, dst.name)]
            top = tiers.index(max(tiers))
            assert tiers[:top + 1] == sorted(tiers[:top + 1]), tiers
            assert tiers[top:] == sorted(tiers[top:], reverse=True), tiers
            if topo.attachment(src.name).node != topo.attachment(dst.name).node:
                same_pod = (topo.switch(topo.attachment(src.name).node).pod
                            == topo.switch(topo.attachment(dst.name).node).pod)
                assert max(tiers) == (1 if same_pod else 2)


def test_fat_tree_destinations_spread_over_uplinks():
    topo = T.fat_tree(4)
    tables = route_tables(topo)
    for edge in [s for s in topo.switches if s.role == "edge"]:
        uplinks = {p.port for p in topo.ports(edge.name) if topo.is_switch(p.peer)}
        used = {port for port, _, _ in tables[edge.name].values()} & uplinks
        assert used == uplinks, f"{edge.name} uses only {used} of its uplinks"
