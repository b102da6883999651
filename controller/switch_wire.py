"""Bytes per element on a worker's link for the switch a projection assumes: the v1model
profile at line rate (168 elements per packet), or the Tofino profile as its compiler
reported it (p4src/build/tofino/, written by p4src/tna/build_tofino.py), and what its passes
ask of a Tofino's pipes.

A Tofino packet carries `elements_per_packet` = `elements_per_pass` x `passes_per_packet`
elements: the switch sums one segment a pass, the passes walking its pipes through ports in
loopback (PIPES says what a pipe and its loopback ports take). A frame is counted as
bench/wire.py counts it: Ethernet header (no FCS), IPv4, UDP, AGG, payload. Up and down
differ where contributions and results have different encodings; a worker's link is full
duplex, so its busier direction is what a step waits for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from controller.profiles import IP_UDP_AGG, PROFILES
from protocol.encodings import ALL, BY_NAME
from protocol.profiles import FAMILIES
from protocol.sizes import ETH_HDR

SUMMARIES = Path(__file__).resolve().parents[1] / "p4src" / "build" / "tofino"
FRAME_OVERHEAD = ETH_HDR + IP_UDP_AGG
# payload bytes per element (contribution, result) of each Tofino variant's encodings
PAYLOAD_BYTES = {name: f.payload_bytes() for name, f in FAMILIES.items()}
# the projection's methods and the encoding each sends (the 4-bit ones by their own name)
METHOD_ENCODING = {"cnat": "cnat8", "int32": "fixed32",
                   **{e.name: e.name for e in ALL if e.four_bit}}
# payload bytes per element (contribution, result) of the v1model profile's methods: what a
# job of each sends back (the 4-bit encodings go up in half a byte, come back as a byte)
LINE_RATE_PAYLOAD = {m: (BY_NAME[e].bytes_per_element,
                         BY_NAME[BY_NAME[e].job[0]].bytes_per_element)
                     for m, e in METHOD_ENCODING.items()}
# the projection's methods and the variants that can carry them; a method missing here has
# no Tofino packets, and NO_VARIANT says why
METHOD_VARIANTS = {m: v for m, e in METHOD_ENCODING.items()
                   if (v := tuple(f.name for f in FAMILIES.values() if f.contribution == e))}
_LANES = "/".join(e.label for e in ALL if e.four_bit and e.tofino)
NO_VARIANT = {
    **{m: f"no Tofino variant decodes {BY_NAME[e].label} (the lanes sum {_LANES}'s integers "
          f"only)" for m, e in METHOD_ENCODING.items() if m not in METHOD_VARIANTS},
    "cnat-wide": "the wide profile is a v1model build; a Tofino's C_nat packets are its "
                 "compiled cnat8 variants', which method cnat projects",
}
SWITCHES = {"line-rate": None, "tofino1": "tofino", "tofino2": "tofino2"}


@dataclass(frozen=True)
class Pipes:
    """What a target's pipes take (docs/STEPTIME.md "Pipes and passes" names each source)."""

    name: str
    count: int                  # pipes (the port id's two pipe bits: tofino*_specs.p4)
    pps: float                  # passes a pipe's ingress takes per second
    ports: dict                 # front-panel ports per pipe by speed, Gbit/s
    recirc_gbit: float          # a pipe's dedicated recirculation port

    @property
    def port_gbit(self) -> float:
        return max(self.ports)

    def ports_at(self, gbit: float) -> int:
        """Ports of one pipe a link of `gbit` can take (0: none runs that fast)."""
        return max((n for s, n in self.ports.items() if s >= gbit), default=0)

    def loopback_gbit(self, pipe: int) -> float:
        """SwitchML's layout: pipe 0's front-panel ports are the workers', so a pass comes
        back into pipe 0 through its recirculation port alone; pipes 1.. have all their
        front-panel ports at top speed in loopback beside theirs."""
        front = 0.0 if pipe == 0 else self.ports[self.port_gbit] * self.port_gbit
        return front + self.recirc_gbit


# Tofino 1: one packet a clock per pipe, 1.22e9/s at 1.22 GHz (V. Gurevich, Intel,
# p4lang/open-p4studio#64); 260 x 25G SerDes over 4 pipes (Barefoot, SIGCOMM 2018 P4
# tutorial slides), 16 x 100G front-panel ports a pipe (p4lang/p4app-switchML
# controller/switchml.py). Tofino 2: 6e9 packets/s over 4 pipes (Hot Chips 32, AnandTech's
# live blog); 32 x 400, 128 x 100 or 256 x 10/25/50 GbE (Packet Pushers BiB 065). The
# recirculation port's rate was not found: assumed 100 Gbit/s on both.
PIPES = {
    "tofino": Pipes("Tofino 1", 4, 1.22e9, {100: 16, 50: 32, 25: 64, 10: 64}, 100.0),
    "tofino2": Pipes("Tofino 2", 4, 6e9 / 4, {400: 8, 100: 32, 50: 64, 25: 64, 10: 64}, 100.0),
}


@dataclass(frozen=True)
class Wire:
    """One method's packets on one switch."""

    switch: str
    method: str
    variant: str            # the compiled variant (Tofino) or profile (v1model)
    elems: int              # elements per packet
    up: float               # bytes per element, worker to switch
    down: float             # switch to worker
    harvest: int            # extra passes of the packet that completes a use
    pool: int | None        # slots the compiled program has for a job's window (None: as
                            # many as fill the link's rate x round trip)
    passes: int = 1         # passes every contribution takes
    pipes: int = 1          # pipes the passes spread over
    elements_per_pass: int | None = None
    target: str | None = None   # PIPES key (None: a line-rate switch, no pipes modelled)

    @property
    def busiest(self) -> float:
        return max(self.up, self.down)

    @property
    def packet_bytes(self) -> float:
        return self.busiest * self.elems

    @property
    def extra_passes(self) -> int:
        """Passes the packet that completes a use takes beyond its first: each one adds a
        trip through a pipe and a loopback port to the slot's round trip."""
        return self.passes - 1 + self.harvest

    def pipe_of(self, seg: int) -> int:
        """The pipe that sums segment `seg`: the first in the workers' pipe 0, the others
        round pipes 1.. (SwitchML's layout: their front-panel ports are in loopback). Each
        segment has cells of its own (passes_tna.p4), so any pipe may take any segment."""
        if seg == 0 or self.pipes == 1:
            return 0
        return 1 + (seg - 1) % (self.pipes - 1)

    def walk(self, workers: int) -> tuple[list[int], list[int]]:
        """Per pipe, the passes its ingress takes per use (one slot's packets: each worker's
        contribution, then the harvest) and how many of them came in through its loopback
        ports. Pass k of a contribution sums segment k in pipe_of(k); the first comes from
        the worker's port in pipe 0. The packet that completes the use then reads the
        segments back from the last, each in the pipe holding its sums (the last segment is
        read by the pass that summed it)."""
        ingress, loop = [0] * self.pipes, [0] * self.pipes
        for k in range(self.passes):
            ingress[self.pipe_of(k)] += workers
            loop[self.pipe_of(k)] += workers if k else 0
        for i in range(1, self.harvest + 1):
            pipe = self.pipe_of((self.passes - 1 - i) % self.passes)
            ingress[pipe] += 1
            loop[pipe] += 1
        return ingress, loop


def per_element(elems: int, payload_bytes: float) -> float:
    return (FRAME_OVERHEAD + payload_bytes * elems) / elems


def summaries(target: str | None = None) -> list[dict]:
    """The compiler's summaries of `target` (tofino, tofino2; None: all), probes excluded."""
    rows = [json.loads(p.read_text()) for p in sorted(SUMMARIES.glob("*.json"))
            if not p.stem.endswith(".next")]
    return [r for r in rows if target is None or r["target"] == target]


def encoding(variant: str) -> str:
    """cnat8-in-t1 -> cnat8-in."""
    return variant.rsplit("-", 1)[0]


def no_packets(switch: str, method: str) -> str | None:
    """Why `method` has no packets on `switch` (None: it has), from the tables alone: no
    summary is read."""
    if switch not in SWITCHES:
        raise ValueError(f"unknown switch {switch!r}: one of {', '.join(SWITCHES)}")
    if SWITCHES[switch] is not None and method in NO_VARIANT:
        return NO_VARIANT[method]
    known = LINE_RATE_PAYLOAD if SWITCHES[switch] is None else METHOD_VARIANTS
    return None if method in known else f"one of {', '.join(known)}"


def wires(switch: str, method: str) -> list[Wire]:
    """The packets `method` (METHOD_ENCODING: cnat, int32 or a 4-bit encoding) can send on
    `switch` (SWITCHES): one per compiled variant that carries it (the v1model profile:
    one)."""
    why = no_packets(switch, method)
    if why:
        raise ValueError(f"method {method!r} has no packets on the {switch} switch: {why}")
    target = SWITCHES[switch]
    if target is None:
        n = PROFILES["default"].elems
        bu, bd = LINE_RATE_PAYLOAD[method]
        return [Wire(switch, method, "default", n, per_element(n, bu), per_element(n, bd), 0,
                     None, elements_per_pass=n)]
    rows = [r for r in summaries(target) if encoding(r["variant"]) in METHOD_VARIANTS[method]]
    if not rows:
        raise ValueError(f"no compiled summary of {method} for {switch} in {SUMMARIES} "
                         "(make p4-tofino writes them)")
    out = []
    for r in rows:
        bu, bd = PAYLOAD_BYTES[encoding(r["variant"])]
        n = r["elements_per_packet"]
        out.append(Wire(switch, method, r["variant"], n, per_element(n, bu), per_element(n, bd),
                        r["harvest_passes"], r["pool_size"], r["passes_per_packet"],
                        r["pipes"], r["elements_per_pass"], target))
    return out


def wire(switch: str, method: str) -> Wire:
    """Of wires(), the one whose busier direction carries the fewest bytes per element."""
    return min(wires(switch, method), key=lambda w: (w.busiest, w.variant))


def fit(switch: str, workers: int, gbit: float) -> None:
    """Refuses a job whose workers' links do not fit pipe 0 of `switch`: a job's slots are
    one pipe's registers, so its workers' ports are that pipe's (the others loop passes
    back)."""
    target = SWITCHES.get(switch)
    if target is None:
        return
    spec = PIPES[target]
    n = spec.ports_at(gbit)
    if not n:
        raise ValueError(f"no {spec.name} port runs at {gbit:g} Gbit/s "
                         f"(at most {spec.port_gbit:g})")
    if workers > n:
        raise ValueError(f"{workers} workers at {gbit:g} Gbit/s do not fit pipe 0 of a "
                         f"{spec.name}: it has {n} ports of that speed, and a job's workers "
                         "share the pipe whose registers hold its slots")
