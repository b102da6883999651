"""Entries of NatEgress.impair: the drop probability of each switch port.

A link's loss applies to the packets a switch sends onto it (so a host link loses only in the
switch-to-host direction; a switch-to-switch link in both). The switch drops when a 16-bit
uniform random number is below the threshold: probability threshold / 65536.
"""

from __future__ import annotations

from controller.entities import TableEntry
from controller.topology import Topology

LOSS = "NatEgress.impair.loss"
DROP_WITH = "NatEgress.impair.drop_with"
PORT = "sm.egress_port"
TABLES = (LOSS,)
SCALE = 1 << 16


def threshold(loss: float) -> int:
    return round(loss * SCALE)


def entries(topo: Topology) -> dict[str, list[TableEntry]]:
    out: dict[str, list[TableEntry]] = {}
    for s in topo.switches:
        rows = []
        for p in topo.ports(s.name):
            t = threshold(p.link.loss)
            if t > 0:
                rows.append(TableEntry.make(LOSS, {PORT: p.port}, DROP_WITH, {"threshold": t}))
        out[s.name] = rows
    return out
