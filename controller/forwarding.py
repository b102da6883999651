"""Entries of NatIngress.fwd: a /32 route for every host on every switch.

Each switch sends a packet for host d to a neighbour one hop closer to d's switch (shortest
paths over the switch graph); where several neighbours are, the host's number picks one, so
destinations spread over the equal-cost uplinks. In a fat-tree every shortest path climbs then
descends (up/down routing), so the routes are loop-free and valley-free.
"""

from __future__ import annotations

from collections import deque

from controller.entities import Lpm, TableEntry, ipv4, mac
from controller.topology import Topology

ROUTES = "NatIngress.fwd.routes"
ROUTE = "NatIngress.fwd.route"
DST = "hdr.ipv4.dst_addr"
TABLES = (ROUTES,)


def distances(topo: Topology, target: str) -> dict[str, int]:
    """Switch hops from every switch to `target`."""
    dist = {target: 0}
    todo = deque([target])
    while todo:
        node = todo.popleft()
        for p in topo.ports(node):
            if topo.is_switch(p.peer) and p.peer not in dist:
                dist[p.peer] = dist[node] + 1
                todo.append(p.peer)
    return dist


def next_hops(topo: Topology) -> dict[str, dict[str, int]]:
    """switch -> host -> the switch's egress port towards the host."""
    hops: dict[str, dict[str, int]] = {s.name: {} for s in topo.switches}
    for number, host in enumerate(topo.hosts):
        att = topo.attachment(host.name)
        dist = distances(topo, att.node)
        for s in topo.switches:
            if s.name == att.node:
                hops[s.name][host.name] = att.port
                continue
            closer = [p.port for p in topo.ports(s.name)
                      if topo.is_switch(p.peer) and dist.get(p.peer, -1) == dist[s.name] - 1]
            hops[s.name][host.name] = closer[number % len(closer)]
    return hops


def entries(topo: Topology) -> dict[str, list[TableEntry]]:
    out: dict[str, list[TableEntry]] = {}
    for switch, routes in next_hops(topo).items():
        smac = mac(topo.switch(switch).mac)
        rows = []
        for host, port in routes.items():
            peer = topo.port(switch, port).peer
            dmac = topo.host(peer).mac if topo.is_host(peer) else topo.switch(peer).mac
            rows.append(TableEntry.make(
                ROUTES, {DST: Lpm(ipv4(topo.host(host).ip), 32)}, ROUTE,
                {"smac": smac, "dmac": mac(dmac), "port": port}))
        out[switch] = rows
    return out
