"""The aggregation wire format as Scapy layers: the one Python definition (docs/PROTOCOL.md).

Every field is declared once, here. The fast path in worker/frames.py derives its
struct format and numpy dtypes from these declarations instead of repeating them, and
tests/worker/test_wire.py checks them against p4src/include/headers.p4.

    >>> from scapy.all import Ether, IP, UDP
    >>> pkt = Ether() / IP() / UDP(sport=AGG_PORT, dport=AGG_PORT) / Agg(slot=3) / Cnat8()
"""

from __future__ import annotations

from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FieldListField,
    IEEEFloatField,
    IntField,
    ShortField,
    SignedIntField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers

from protocol import encodings as _enc
from protocol.sizes import AGG_PORT, ELEMS  # noqa: F401  (the port, elements per packet)

MAX_ITEMS = 9000          # dissection limit: no frame holds more elements than a jumbo frame bytes

MSG_CONTRIB = 1
MSG_RESULT = 2
# Block-sparse jobs (OmniReduce's streaming aggregation; docs/PROTOCOL.md "Sparse jobs").
MSG_SPARSE_CONTRIB = 3
MSG_SPARSE_RESULT = 4
# A contribution the switch will not take, sent back to its sender without payload, the
# drop reason in `count` (docs/PROTOCOL.md "Refusals"); the sparse one keeps its block
# header, which then holds the switch's view of the use.
MSG_REFUSED = 5
MSG_SPARSE_REFUSED = 6
MSG_TYPES = {MSG_CONTRIB: "CONTRIB", MSG_RESULT: "RESULT",
             MSG_SPARSE_CONTRIB: "SPARSE_CONTRIB", MSG_SPARSE_RESULT: "SPARSE_RESULT",
             MSG_REFUSED: "REFUSED", MSG_SPARSE_REFUSED: "SPARSE_REFUSED"}
SPARSE_TYPES = (MSG_SPARSE_CONTRIB, MSG_SPARSE_RESULT, MSG_SPARSE_REFUSED)
REFUSED_TYPES = (MSG_REFUSED, MSG_SPARSE_REFUSED)
# The drop reasons a refusal names (p4src/include/constants.p4).
DROP_BAD_BLOCK = 17
DROP_OUT_OF_RANGE = 23
REFUSALS = {DROP_BAD_BLOCK: "BAD_BLOCK", DROP_OUT_OF_RANGE: "OUT_OF_RANGE"}

# Agg.flags bits of sparse packets.
FLAG_PRIME = 0x01   # the first use of a slot in a call: announces the sender's first block
FLAG_EMPTY = 0x02   # no payload: a worker without the use's block (counts as zero)
NO_BLOCK = 0xFFFFFFFF  # "none": no further non-zero block

CHUNK_MASK = 0xFFFFFFFF


def use_chunk(use, slot, slots):
    """The chunk field of use `use` (counted from 0 in the session) of `slot`, in a job of
    `slots` slots: use * slots + slot, modulo 2^32 (docs/PROTOCOL.md "Uses"). The switch takes
    a slot's next use only with exactly this number, so no stray packet can move it ahead.
    Works on numpy arrays too."""
    return (use * slots + slot) & CHUNK_MASK


# The encodings' numbers, names and rules are declared in protocol/encodings.py; these
# are the names the wire format and its users have always used for them.
ENC_FIXED32 = _enc.BY_NAME["fixed32"].code
ENC_CNAT8 = _enc.BY_NAME["cnat8"].code
ENC_FLOAT32 = _enc.BY_NAME["float32"].code     # host to host only: a switch drops it
ENC_NAT4 = _enc.BY_NAME["nat4"].code
ENC_UQ4 = _enc.BY_NAME["uq4"].code
ENC_SUM8 = _enc.BY_NAME["sum8"].code
ENCODINGS = {e.code: e.label for e in _enc.ALL}
ENCODING_BY_NAME = {e.name: e.code for e in _enc.ALL}
FOUR_BIT = tuple(e.code for e in _enc.ALL if e.four_bit)   # half a byte per element
NAT4_BAD = 0x8                          # "negative zero": no encoder sends it
UQ4_LEVELS = _enc.BY_NAME["uq4"].top + 1
# What a switch answers each contribution encoding with by default (controller/aggregation.py
# installs the job's result encoding).
RESULT_OF = {e.code: _enc.BY_NAME[e.job[0]].code for e in _enc.ALL if e.job}


def payload_bytes(encoding: int, elems: int) -> int:
    """Bytes of a payload of `elems` elements in `encoding` (4-bit encodings need an even
    count)."""
    enc = _enc.BY_CODE.get(encoding)
    return enc.payload_bytes(elems) if enc else elems

# One element of each payload encoding; frames.py takes its numpy dtype from `fmt`.
FIXED32_ELEMENT = SignedIntField("v", 0)     # big-endian two's complement int32
CNAT8_ELEMENT = ByteField("c", 0)            # bit 7 sign, bits 0-6 the code m
FLOAT32_ELEMENT = IEEEFloatField("f", 0.0)  # big-endian IEEE 754 (baseline only)
NIBBLE_ELEMENT = BitField("n", 0, 4)         # NAT4 code or UQ4 integer, high nibble first
SUM8_ELEMENT = ByteField("s", 0)             # unsigned sum 0..255


class Agg(Packet):
    """The 16-byte aggregation header."""

    name = "AGG"
    fields_desc = [
        ByteEnumField("msg_type", MSG_CONTRIB, MSG_TYPES),
        ByteEnumField("encoding", ENC_FIXED32, ENCODINGS),
        ShortField("job_id", 0),
        ShortField("session", 0),
        ShortField("slot", 0),
        ByteField("version", 0),
        ByteField("exp", 0),
        ByteField("count", 1),
        ByteField("flags", 0),
        IntField("chunk", 0),
    ]

    def guess_payload_class(self, payload: bytes):
        if self.msg_type in SPARSE_TYPES:
            return Block
        if self.msg_type == MSG_REFUSED:
            return Raw      # no payload: anything after the header is not ours
        return super().guess_payload_class(payload)

    def mysummary(self) -> str:
        return self.sprintf("AGG %msg_type% %encoding% job=%job_id% session=%session% "
                            "slot=%slot% v%version% chunk=%chunk% exp=%exp% count=%count%")


class Block(Packet):
    """The 8-byte block header after AGG in sparse packets (docs/PROTOCOL.md)."""

    name = "BLOCK"
    fields_desc = [
        # the use's block; in a PRIME, the tensor's block count; a BAD_BLOCK refusal: the
        # count the switch holds
        IntField("block", 0),
        # CONTRIB: the sender's next non-zero block; RESULT: the block of the slot's next use;
        # a BAD_BLOCK refusal: the bitmap of the children the held count came from
        IntField("next", NO_BLOCK),
    ]

    def guess_payload_class(self, payload: bytes):
        # The payload's encoding is the AGG header's; an EMPTY packet has none.
        agg = self.underlayer
        if agg is None or agg.flags & FLAG_EMPTY or agg.msg_type == MSG_SPARSE_REFUSED:
            return super().guess_payload_class(payload)
        return PAYLOADS.get(agg.encoding, super().guess_payload_class(payload))

    def mysummary(self) -> str:
        return self.sprintf("BLOCK %block% next=%next%")


class Fixed32(Packet):
    """FIXED32 payload: ELEMS int32 values (as many as the packet holds when dissecting)."""

    name = "FIXED32"
    fields_desc = [FieldListField("values", [], FIXED32_ELEMENT, max_count=MAX_ITEMS)]


class Cnat8(Packet):
    """CNAT8 payload: ELEMS one-byte codes."""

    name = "CNAT8"
    fields_desc = [FieldListField("codes", [], CNAT8_ELEMENT, max_count=MAX_ITEMS)]


class Nat4(Packet):
    """NAT4 payload: ELEMS 4-bit codes, two per byte (bit 3 sign, bits 0-2 the level)."""

    name = "NAT4"
    fields_desc = [FieldListField("codes", [], NIBBLE_ELEMENT, max_count=2 * MAX_ITEMS)]


class Uq4(Packet):
    """UQ4 payload: ELEMS unsigned 4-bit integers, two per byte."""

    name = "UQ4"
    fields_desc = [FieldListField("values", [], NIBBLE_ELEMENT, max_count=2 * MAX_ITEMS)]


class Sum8(Packet):
    """SUM8 payload: ELEMS unsigned one-byte sums."""

    name = "SUM8"
    fields_desc = [FieldListField("values", [], SUM8_ELEMENT, max_count=MAX_ITEMS)]


class Float32(Packet):
    """FLOAT32 payload of the host-based baseline (never aggregated by a switch)."""

    name = "FLOAT32"
    fields_desc = [FieldListField("values", [], FLOAT32_ELEMENT, max_count=MAX_ITEMS)]


bind_layers(UDP, Agg, dport=AGG_PORT)
bind_layers(UDP, Agg, sport=AGG_PORT)
PAYLOADS = {ENC_FIXED32: Fixed32, ENC_CNAT8: Cnat8, ENC_FLOAT32: Float32, ENC_NAT4: Nat4,
            ENC_UQ4: Uq4, ENC_SUM8: Sum8}
for _msg in SPARSE_TYPES:  # Agg.guess_payload_class puts Block first for these
    bind_layers(Agg, Block, msg_type=_msg)
bind_layers(Agg, Fixed32, encoding=ENC_FIXED32)
bind_layers(Agg, Cnat8, encoding=ENC_CNAT8)
bind_layers(Agg, Float32, encoding=ENC_FLOAT32)
bind_layers(Agg, Nat4, encoding=ENC_NAT4)
bind_layers(Agg, Uq4, encoding=ENC_UQ4)
bind_layers(Agg, Sum8, encoding=ENC_SUM8)

