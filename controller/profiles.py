"""The compiled profiles of p4src/: one program, compiled for different elements per packet.

`make p4` compiles the same sources three times (p4src/gen_elements.py PROFILES):
- default, 168 elements (p4src/build/): every encoding; a CNAT8 contribution may leave as
  a FIXED32 result or partial sum, growing by 3 bytes per element (504 of the 512 bytes
  BMv2 lets a program add);
- wide, 1456 elements (p4src/build/wide/): the largest CNAT8 packet in a 1500-byte MTU.
  It cannot grow a packet by 3 bytes per element, so it aggregates CNAT8 both ways only:
  the program drops anything else (DROP_TOO_WIDE) and job_problem() refuses such jobs
  before a switch is programmed. Its FIXED32 packets would not fit the MTU either.
- wide4, 1024 elements (p4src/build/wide4/): the widest packet whose 4-bit contribution
  (512 bytes) may grow into a one-byte-per-element result or partial sum (by 512 bytes):
  the 4-bit encodings at their fewest bytes per element (0.56 up, 1.06 down with headers). Like
  the wide profile it takes no FIXED32 results or partial sums.
Sparse jobs (mode sparse) on the wide profile too take CNAT8 results only: the padding an
EMPTY packet brings to hold the sum (ELEMS bytes, docs/PROTOCOL.md "Sparse jobs") leaves a
FIXED32 sum 3 bytes per element to grow, and in the wide profile every EMPTY data packet
needs it (a CNAT8 sum of 1456 bytes exceeds the 512 as well). With their block header a wide
profile's sparse packets are 1508 bytes of IPv4: they need links with a larger MTU than the
1500 bytes of veths and Mininet (the worker and mininet/run.py refuse them there).
Workers of a wide job must be given `--elems 1456` (mininet/run.py --profile does it), of a
wide4 job `--elems 1024`.

`tofino` is another program: the v1model twin of the Tofino profile (p4src/twin/, built into
p4src/build/twin/), 16 elements per packet as the Tofino 1 and 2 programs compiled with
CNAT8 both ways sum in one pass (p4src/tna/build_tofino.py). It takes FIXED32 and CNAT8
contributions with FIXED32 or CNAT8 results, and the unsigned 4-bit ones with SUM8 results
(in the lanes of the Tofino programs compiled with them), on dense jobs, and sends results
with UDP checksum 0 (its workers take that as none). `tofino-mp` is the same twin compiled
with the walk of the cnat8-mp variants (p4src/build/twin-mp/): packets of 64 CNAT8 codes, 4
segments of 16 summed one a pass, CNAT8 contributions with CNAT8 results and partial sums only.

Their elements per packet, builds and Tofino variants are declared in protocol/profiles.py,
which encodings each carries in protocol/encodings.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from controller.topology import JobSpec, Topology
from protocol import combos
from protocol import profiles as declared
from protocol.encodings import ALL
from protocol.sizes import BLOCK_HDR as SPARSE_HDR
from protocol.sizes import IP_UDP_AGG, MTU

BUILD = Path(__file__).resolve().parents[1] / "p4src" / "build"


@dataclass(frozen=True)
class Profile:
    name: str
    elems: int
    build: Path
    twin: bool = False      # the Tofino profile's twin (p4src/twin/), not p4src/agg.p4
    passes: int = 1         # passes a packet takes (elems of them a segment each)

    @property
    def p4info(self) -> Path:
        return self.build / "agg.p4info.txt"

    @property
    def bmv2_json(self) -> Path:
        return self.build / "agg.json"

    @property
    def facts(self) -> declared.ProfileFacts:
        """Its declaration (protocol/profiles.py): the object itself, not a copy."""
        return declared.PROFILES[self.name]

    @property
    def cnat8_only(self) -> bool:
        """CNAT8 cannot turn into FIXED32 here: the packet would grow too much."""
        return self.facts.cnat8_only

    @property
    def four_bit(self) -> tuple[str, ...]:
        """The 4-bit encodings here (ProfileFacts.carries): where a 4-bit packet may grow
        into a byte per element (FOUR_BIT), or those the Tofino profile sums in lanes."""
        return tuple(e.name for e in ALL if e.four_bit and self.facts.carries(e))

    @property
    def zero_checksum(self) -> bool:
        """Its switches send results with UDP checksum 0 (none)."""
        return self.twin

    def packet_bytes(self, bytes_per_element: int, sparse: bool = False) -> int:
        """IPv4 bytes of a full packet of the profile."""
        return IP_UDP_AGG + (SPARSE_HDR if sparse else 0) + bytes_per_element * self.elems

    def fits_mtu(self, bytes_per_element: int, sparse: bool = False) -> bool:
        return self.packet_bytes(bytes_per_element, sparse) <= MTU


PROFILES = {p.name: Profile(p.name, p.elems, (BUILD / p.build).resolve(), p.twin, p.passes)
            for p in declared.PROFILES.values()}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r} (one of {', '.join(PROFILES)})") from None


def elems_of(bmv2_json: str | Path) -> int | None:
    """Elements per packet of a compiled program: the fields of its CNAT8 payload header
    (None for a program without one)."""
    return elems_in(json.loads(Path(bmv2_json).read_text()))


def elems_in(prog: dict) -> int | None:
    """elems_of() of a loaded BMv2 JSON: a pass's CNAT8 codes times the passes, the
    entries of the walk's `loops` table (one per segment) where there is one."""
    cnat = [h for h in prog.get("header_types", []) if h.get("name") == "cnat_h"]
    if len(cnat) != 1:
        return None
    loops = [t["max_size"] for pipe in prog.get("pipelines", []) for t in pipe.get("tables", [])
             if t.get("name") == "NatIngress.walk.loops"]
    return len(cnat[0]["fields"]) * (loops[0] if loops else 1)


def _tree(topo: Topology, job: JobSpec):
    from controller.tree import build_tree  # tree.py builds on topology.py
    return build_tree(topo, job)


def job_problem(prof: Profile, topo: Topology, job: JobSpec) -> str | None:
    """Why the profile's program cannot aggregate `job`, or None (protocol/combos.py)."""
    return combos.job_problem(prof.facts, job.id, job.encoding, job.partials, job.mode,
                              lambda: len(_tree(topo, job).nodes) > 1)


def check_jobs(prof: Profile, topo: Topology) -> None:
    """Raises ValueError naming every job of the topology the profile cannot aggregate."""
    problems = [p for job in topo.jobs if (p := job_problem(prof, topo, job))]
    if problems:
        raise ValueError("; ".join(problems))
