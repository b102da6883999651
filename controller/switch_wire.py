"""Bytes per element on a worker's link for the switch a projection assumes: the v1model
profile at line rate (168 elements per packet), or the Tofino profile at the elements per
pass its compiler reported (p4src/build/tofino/, written by p4src/tna/build_tofino.py).

A packet carries one pass's elements: more would take recirculations per packet, which a
switch at line rate cannot spend. A frame is counted as bench/wire.py counts it: Ethernet
header (no FCS), IPv4, UDP, AGG, payload. Up and down differ where contributions and
results have different encodings; a worker's link is full duplex, so its busier direction
is what a step waits for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from controller.profiles import IP_UDP_AGG, PROFILES

SUMMARIES = Path(__file__).resolve().parents[1] / "p4src" / "build" / "tofino"
TNA_SIZES = SUMMARIES.parents[1] / "tna" / "sizes_tna.p4"
FRAME_OVERHEAD = 14 + IP_UDP_AGG
# payload bytes per element (contribution, result) of each Tofino variant's encodings
PAYLOAD_BYTES = {"fixed32": (4, 4), "cnat8-in": (1, 4), "cnat8": (1, 1), "uq4": (0.5, 1)}
# the projection's methods and the variants that can carry them
METHOD_VARIANTS = {"cnat": ("cnat8", "cnat8-in"), "int32": ("fixed32",)}
SWITCHES = {"line-rate": None, "tofino1": "tofino", "tofino2": "tofino2"}


@dataclass(frozen=True)
class Wire:
    """One method's packets on one switch."""

    switch: str
    method: str
    variant: str            # the compiled variant (Tofino) or profile (v1model)
    elems: int              # elements per packet
    up: float               # bytes per element, worker to switch
    down: float             # switch to worker
    recirculations: int     # extra passes a result takes (Tofino 1: 1)
    pool: int | None        # slots the compiled program has for a job's window (None: as
                            # many as fill the link's rate x round trip)

    @property
    def busiest(self) -> float:
        return max(self.up, self.down)

    @property
    def packet_bytes(self) -> float:
        return self.busiest * self.elems


def tna_pool_size() -> int:
    """The slots every Tofino summary was compiled with (POOL_SIZE; the shadow copies
    double the registers): the most packets a job can have in flight there."""
    m = re.search(r"^#define POOL_SIZE (\d+)", TNA_SIZES.read_text(), re.M)
    if not m:
        raise ValueError(f"{TNA_SIZES}: no POOL_SIZE")
    return int(m.group(1))


def per_element(elems: int, payload_bytes: float) -> float:
    return (FRAME_OVERHEAD + payload_bytes * elems) / elems


def summaries(target: str) -> list[dict]:
    """The compiler's summaries of `target` (tofino, tofino2), probes excluded."""
    rows = [json.loads(p.read_text()) for p in sorted(SUMMARIES.glob("*.json"))
            if not p.stem.endswith(".next")]
    return [r for r in rows if r["target"] == target]


def encoding(variant: str) -> str:
    """cnat8-in-t1 -> cnat8-in."""
    return variant.rsplit("-", 1)[0]


def wires(switch: str, method: str) -> list[Wire]:
    """The packets `method` (cnat, int32) can send on `switch` (SWITCHES): one per compiled
    variant that carries it (the v1model profile: one)."""
    if switch not in SWITCHES:
        raise ValueError(f"unknown switch {switch!r}: one of {', '.join(SWITCHES)}")
    if method not in METHOD_VARIANTS:
        raise ValueError(f"method {method!r} has no packets on the {switch} switch: one of "
                         f"{', '.join(METHOD_VARIANTS)}")
    target = SWITCHES[switch]
    if target is None:
        n = PROFILES["default"].elems
        b = 1 if method == "cnat" else 4
        return [Wire(switch, method, "default", n, per_element(n, b), per_element(n, b), 0,
                     None)]
    rows = [r for r in summaries(target) if encoding(r["variant"]) in METHOD_VARIANTS[method]]
    if not rows:
        raise ValueError(f"no compiled summary of {method} for {switch} in {SUMMARIES} "
                         "(make p4-tofino writes them)")
    out, pool = [], tna_pool_size()
    for r in rows:
        n, (bu, bd) = r["elements_per_pass"], PAYLOAD_BYTES[encoding(r["variant"])]
        out.append(Wire(switch, method, r["variant"], n, per_element(n, bu),
                          per_element(n, bd), r["recirculations_per_result"], pool))
    return out


def wire(switch: str, method: str) -> Wire:
    """Of wires(), the one whose busier direction carries the fewest bytes per element."""
    return min(wires(switch, method), key=lambda w: (w.busiest, w.variant))
