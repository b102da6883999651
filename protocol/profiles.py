"""The compiled profiles of p4src/ (controller/profiles.py says what each is for) and the
Tofino variants behind the Tofino ones (p4src/tna/build_tofino.py compiles them).

p4src/gen_elements.py's PROFILES and build_tofino.py's VARIANTS are tested against these.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.encodings import BY_NAME, Encoding
from protocol.sizes import MAX_GROWTH, POOL_SIZE


@dataclass(frozen=True)
class Family:
    """Tofino variants compiled alike for both targets (NAME-t1, NAME-t2): what a worker
    sends and gets back."""

    name: str
    contribution: str
    result: str

    def payload_bytes(self) -> tuple[float, float]:
        """Payload bytes per element (contribution, result)."""
        return tuple(BY_NAME[e].bytes_per_element for e in (self.contribution, self.result))


@dataclass(frozen=True)
class ProfileFacts:
    name: str
    elems: int                  # elements per packet
    build: str                  # its compiled program, under p4src/build/
    twin: bool = False          # the Tofino profile's v1model twin (p4src/twin/)
    passes: int = 1             # passes a packet takes (elems / passes a pass)
    slots: int = POOL_SIZE      # register slots per switch
    families: tuple[str, ...] = ()   # the Tofino variants it stands for

    @property
    def cnat8_only(self) -> bool:
        """A CNAT8 contribution cannot grow into FIXED32 sums (3 bytes per element)."""
        return 3 * self.elems > MAX_GROWTH

    def carries(self, enc: Encoding) -> bool:
        """Whether the program sums 4-bit contributions of `enc`: where such a packet may
        grow into a byte per element, or, on the twin, in its lanes with one pass."""
        if not enc.four_bit:
            return True
        if self.twin:
            return enc.tofino and self.passes == 1
        return self.elems // 2 <= MAX_GROWTH


FAMILIES = {f.name: f for f in (
    Family("fixed32", "fixed32", "fixed32"),
    Family("cnat8-in", "cnat8", "fixed32"),     # CNAT8 decoded by table, FIXED32 results
    Family("cnat8", "cnat8", "cnat8"),          # results re-compressed in the egress
    Family("uq4", "uq4", "sum8"),               # 16-bit lanes (LANES_ONLY)
    Family("cnat8-mp", "cnat8", "cnat8"),       # packets of several segments, one a pass
)}
TARGETS = ("t1", "t2")          # Tofino 1 and 2

PROFILES = {p.name: p for p in (
    ProfileFacts("default", 168, "."),
    ProfileFacts("wide", 1456, "wide"),
    ProfileFacts("wide4", 1024, "wide4"),
    ProfileFacts("tofino", 16, "twin", twin=True,
                 families=("fixed32", "cnat8-in", "cnat8", "uq4")),
    ProfileFacts("tofino-mp", 64, "twin-mp", twin=True, passes=4, families=("cnat8-mp",)),
)}


def variants() -> tuple[str, ...]:
    """Every Tofino variant: FAMILY-TARGET."""
    return tuple(f"{f}-{t}" for f in FAMILIES for t in TARGETS)
