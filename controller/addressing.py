"""Entries of NatEgress.addr: aggregation packets leaving towards a host are addressed to it.

Every switch port that faces a host gets the host's MAC and IPv4 as destination and the
service address (docs/PROTOCOL.md) as source; ports towards switches get no entry.
"""

from __future__ import annotations

from controller.entities import TableEntry, ipv4, mac
from controller.topology import Topology

HOSTS = "NatEgress.addr.hosts"
TO_HOST = "NatEgress.addr.to_host"
PORT = "sm.egress_port"
TABLES = (HOSTS,)


def entries(topo: Topology) -> dict[str, list[TableEntry]]:
    out: dict[str, list[TableEntry]] = {}
    for s in topo.switches:
        rows = []
        for p in topo.hosts_on(s.name):
            host = topo.host(p.peer)
            rows.append(TableEntry.make(
                HOSTS, {PORT: p.port}, TO_HOST,
                {"smac": mac(topo.service_mac), "dmac": mac(host.mac),
                 "sip": ipv4(topo.service_ip), "dip": ipv4(host.ip)}))
        out[s.name] = rows
    return out
