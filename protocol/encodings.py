"""The payload encodings (docs/PROTOCOL.md "Payload"): each declared once, with what it
combines with. worker/wire.py (the Scapy layers), worker/codec.py (the arithmetic), the
controller, the command lines and the checks read their names, numbers and rules here;
p4src/gen_elements.py and p4src/tna/gen_tna.py write the P4 programs' ENC_* numbers and
everything they do with a lane encoding (`lanes`) from them, and the dissector's table is
tested against them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Encoding:
    name: str                   # how command lines and topology files spell it
    code: int                   # the AGG header's encoding field
    bits: int                   # bits per element on the wire
    # What a switch may sum a contribution of it into: results and partial sums (by name);
    # empty: no switch aggregates it.
    sums: tuple[str, ...] = ()
    # A job of such contributions by default: (results, partials).
    job: tuple[str, str] | None = None
    result: bool = False        # a switch sends it as a result or partial sum
    worker: bool = True         # a worker may contribute it (--encoding)
    tofino: bool = False        # the Tofino profile's twin sums it (its lanes)
    rotated: bool = False       # the tensor is rotated (worker/hadamard.py) before encoding
    exact_ones: bool = True     # carries 0 and 1.0 exactly (the workers' agreement check)
    top: int | None = None      # the largest integer an element holds (unsigned encodings)
    # A lane encoding: the switch adds its elements as unsigned integers in 16-bit lanes,
    # four to a 64-bit register (two to a 32-bit word on Tofino), never decoding them; the
    # generators give the P4 programs its headers, parser states and lane actions.
    lanes: bool = False
    help: str = ""              # the command lines' one-line description

    @property
    def label(self) -> str:
        """The name docs, messages and the dissector show."""
        return self.name.upper()

    @property
    def four_bit(self) -> bool:
        return self.bits == 4

    @property
    def bytes_per_element(self) -> float:
        """Payload bytes per element: an int where whole, 0.5 for a 4-bit encoding."""
        return self.bits // 8 if self.bits % 8 == 0 else self.bits / 8

    def payload_bytes(self, elems: int) -> int:
        """Bytes of `elems` elements (a 4-bit payload needs an even count)."""
        if (self.bits * elems) % 8:
            raise ValueError(f"a 4-bit payload holds an even number of elements, not {elems}")
        return self.bits * elems // 8


ALL = (
    Encoding("fixed32", 0, 32, sums=("fixed32", "cnat8"), job=("fixed32", "fixed32"),
             result=True, tofino=True, help="fixed32 = int32 values, 4 bytes/element"),
    Encoding("cnat8", 1, 8, sums=("fixed32", "cnat8"), job=("cnat8", "fixed32"),
             result=True, tofino=True, help="cnat8 = C_nat, 1 byte/element"),
    # Host to host only (worker/baseline.py's parameter server); a switch drops it.
    Encoding("float32", 2, 32, worker=False, exact_ones=False),
    # Natural dithering: bit 3 the sign, bits 0-2 a level; summed as CNAT8 codes.
    Encoding("nat4", 3, 4, sums=("cnat8",), job=("cnat8", "cnat8"),
             help="nat4 = natural dithering, 4 bits/element"),
    # THC-style uniform quantization after a random rotation: unsigned integers 0..15 the
    # switch adds as they are, into SUM8 bytes.
    Encoding("uq4", 4, 4, sums=("sum8",), job=("sum8", "sum8"), tofino=True, rotated=True,
             exact_ones=False, top=15, lanes=True,
             help="uq4 = THC-style uniform quantization after a random rotation, "
                  "4 bits/element"),
    # Unsigned byte sums of the uniform 4-bit contributions (results, partial sums).
    Encoding("sum8", 5, 8, result=True, worker=False, tofino=True, top=255, lanes=True),
)

BY_NAME = {e.name: e for e in ALL}
BY_CODE = {e.code: e for e in ALL}
# What workers may contribute to a switch, and what switches send back or up.
CONTRIBUTIONS = tuple(e.name for e in ALL if e.worker)
RESULTS = tuple(e.name for e in ALL if e.result)
# What the switch sums in lanes, in wire-number order (the P4 programs' order of their
# headers, parser states and actions).
LANES = tuple(e for e in ALL if e.lanes)
# The wire numbers the P4 programs know (ENC_*): every encoding a switch sums or sends.
SWITCHED = tuple(e for e in ALL if e.sums or e.result)


def encoding(which: str | int) -> Encoding:
    """The encoding of a name or a wire number."""
    found = (BY_CODE if isinstance(which, int) else BY_NAME).get(which)
    if found is None:
        raise ValueError(f"unknown encoding {which!r} (one of {', '.join(BY_NAME)})")
    return found


def summed_into(result: str) -> tuple[Encoding, ...]:
    """The contribution encodings a switch may sum into `result`."""
    return tuple(e for e in ALL if result in e.sums)


def max_workers(enc: Encoding) -> int | None:
    """The most workers whose sums of `enc` always fit the only result it has, where that
    bounds them (an unsigned 4-bit contribution summed into bytes: 255 // 15 = 17)."""
    if enc.top is None or len(enc.sums) != 1:
        return None
    into = BY_NAME[enc.sums[0]]
    return None if into.top is None else into.top // enc.top


def describe(enc: Encoding) -> str:
    """The command lines' description: its help, and the results it needs where those are
    not its own encoding (and the workers they bound)."""
    if not enc.job or enc.job[0] == enc.name:
        return enc.help
    most = max_workers(enc)
    return f"{enc.help} (results {enc.job[0]}" + (f": at most {most} workers)" if most else ")")
