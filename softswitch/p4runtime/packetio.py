"""PacketOut -> bytes the program sees on the CPU port; CPU-port bytes -> PacketIn.

The controller headers are the P4Info ControllerPacketMetadata "packet_out"
and "packet_in": fields packed MSB first in declaration order, the header
rounded up to whole bytes (as BMv2's PacketIOMgr does). A PacketOut field the
client leaves out is sent as 0, as BMv2 does.
"""

from p4.v1 import p4runtime_pb2

from . import bytestrings
from .pipeline import MetadataInfo, Pipeline
from .status import invalid


def header_bytes(fields: list[MetadataInfo]) -> int:
    return (sum(f.bitwidth for f in fields) + 7) // 8


def packet_out_bytes(pipeline: Pipeline, packet: p4runtime_pb2.PacketOut) -> bytes:
    fields = pipeline.packet_out
    if fields is None:
        if packet.metadata:
            raise invalid("unexpected metadata in PacketOut: the P4Info has no packet_out header")
        return packet.payload
    by_id = {f.id: f for f in fields}
    values: dict[int, int] = {}
    for m in packet.metadata:
        info = by_id.get(m.metadata_id)
        if info is None:
            raise invalid(f"unknown metadata id {m.metadata_id} in PacketOut")
        values[m.metadata_id] = bytestrings.decode(
            m.value, info.bitwidth, f"PacketOut metadata {info.name}")
    header, nbits = 0, 0
    for f in fields:
        header = (header << f.bitwidth) | values.get(f.id, 0)
        nbits += f.bitwidth
    nbytes = (nbits + 7) // 8
    header <<= nbytes * 8 - nbits
    return header.to_bytes(nbytes, "big") + packet.payload


def packet_in(pipeline: Pipeline, data: bytes) -> p4runtime_pb2.PacketIn | None:
    """The PacketIn for bytes emitted on the CPU port; None if too short for the header."""
    fields = pipeline.packet_in
    if fields is None:
        return p4runtime_pb2.PacketIn(payload=data)
    nbytes = header_bytes(fields)
    if len(data) < nbytes:
        return None
    header = int.from_bytes(data[:nbytes], "big")
    shift = nbytes * 8
    msg = p4runtime_pb2.PacketIn(payload=data[nbytes:])
    for f in fields:
        shift -= f.bitwidth
        value = (header >> shift) & ((1 << f.bitwidth) - 1)
        msg.metadata.add(metadata_id=f.id, value=bytestrings.encode(value))
    return msg
