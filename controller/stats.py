"""Statistics of the switches from their counters, as a table per switch.

Only counters: BMv2's P4Runtime server gives no register access. Indices and meanings are those
of docs/PROTOCOL.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.session import Session
from controller.topology import Switch, Topology

EVENTS = "NatIngress.agg.events"
DROPS_IN = "NatIngress.drops"
DROPS_OUT = "NatEgress.drops"
PORT_RX = "NatIngress.port_rx"
PORT_TX = "NatEgress.port_tx"
COUNTERS = (EVENTS, DROPS_IN, DROPS_OUT, PORT_RX, PORT_TX)

EVENT_NAMES = ["CONTRIB", "DUPLICATE", "COMPLETE", "RESULT", "ANSWERED", "PARTIAL_UP",
               "RESULT_DOWN", "FORWARDED"]
DROP_NAMES = {1: "UNKNOWN_JOB", 2: "FOREIGN_PORT", 3: "BAD_SLOT", 4: "BAD_LENGTH",
              5: "BAD_ENCODING", 6: "BAD_VERSION", 7: "NO_ROUTE", 8: "TTL_EXPIRED",
              9: "IMPAIRMENT", 10: "NOT_IPV4", 11: "BAD_RESULT_PORT", 12: "BAD_TYPE",
              13: "BAD_CHECKSUM", 14: "STALE", 15: "BAD_UDP_CHECKSUM", 16: "BAD_EXP",
              17: "BAD_BLOCK", 18: "TOO_WIDE", 19: "WRONG_SESSION", 20: "EARLY",
              21: "BAD_CODE", 22: "SUM_OVERFLOW", 23: "OUT_OF_RANGE"}


@dataclass
class SwitchStats:
    """Counter name -> index -> (packets, bytes); a counter the program lacks is absent."""

    switch: Switch
    counters: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    def packets(self, counter: str, index: int) -> int:
        return self.counters.get(counter, {}).get(index, (0, 0))[0]

    def bytes(self, counter: str, index: int) -> int:
        return self.counters.get(counter, {}).get(index, (0, 0))[1]


def read_stats(p4rt: Session) -> SwitchStats:
    stats = SwitchStats(p4rt.switch)
    if not p4rt.use_running_pipeline():
        return stats
    for name in COUNTERS:
        if name in p4rt.p4info.counters:
            stats.counters[name] = p4rt.read_counter(name)
    return stats


def drops_text(counters: dict[str, dict]) -> str | None:
    """One switch's drops by reason from run.py's counters (name -> str(index) -> (packets,
    bytes)), e.g. "ingress STALE 12, EARLY 3; egress SUM_OVERFLOW 1"; None if it dropped
    nothing the program counts."""
    parts = []
    for where, name in (("ingress", DROPS_IN), ("egress", DROPS_OUT)):
        got = [f"{DROP_NAMES.get(int(i), f'reason {i}')} {v[0]}"
               for i, v in sorted(counters.get(name, {}).items(), key=lambda kv: int(kv[0]))
               if v[0]]
        if got:
            parts.append(f"{where} " + ", ".join(got))
    return "; ".join(parts) or None


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in cells]


def format_stats(stats: SwitchStats, topo: Topology) -> str:
    s = stats.switch
    lines = [f"{s.name} (device {s.device_id}, {s.grpc_addr}, {s.role})"]
    if not stats.counters:
        return "\n".join(lines + ["  runs no program (or has none of the counters)"])
    lines += _table(["event", "packets"],
                    [[name, stats.packets(EVENTS, i)] for i, name in enumerate(EVENT_NAMES)])
    drops = [[name, stats.packets(DROPS_IN, i), stats.packets(DROPS_OUT, i)]
             for i, name in DROP_NAMES.items()
             if stats.packets(DROPS_IN, i) or stats.packets(DROPS_OUT, i)]
    lines += _table(["drop", "ingress", "egress"], drops) if drops else ["  drops: none"]
    peers = {p.port: p.peer for p in topo.ports(s.name)}
    ports = sorted(set(peers) | {i for c in (PORT_RX, PORT_TX)
                                 for i, v in stats.counters.get(c, {}).items() if v[0]})
    lines += _table(["port", "peer", "rx pkts", "rx bytes", "tx pkts", "tx bytes*"],
                    [[p, peers.get(p, "-"), stats.packets(PORT_RX, p), stats.bytes(PORT_RX, p),
                      stats.packets(PORT_TX, p), stats.bytes(PORT_TX, p)] for p in ports])
    lines.append("  * v1model counters count the length a packet had when it entered the switch;"
                 " results and partial sums the switch re-encodes leave with another length")
    return "\n".join(lines)
