"""PacketOut -> engine on the CPU port, engine CPU-port output -> PacketIn (fake engine).

The synthetic P4Info's headers are not byte aligned: packet_out is
egress_port:9 flags:3 _pad:4 tag:16, packet_in is ingress_port:9 _pad:7 tag:16.
"""

import time

import pytest
from conftest import CPU_PORT

PERMISSION_DENIED, INVALID_ARGUMENT = 7, 3
PAYLOAD = bytes(range(60))


def _out_ids(dev):
    return {f: dev.names.metadata_id("packet_out", f) for f in ("egress_port", "flags", "tag")}


def _wait_processed(switch, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while len(switch.processed) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return switch.processed


def test_packet_out_metadata_is_packed_msb_first(fake_device):
    dev = fake_device
    ids = _out_ids(dev)
    dev.client.packet_out(PAYLOAD, {ids["egress_port"]: b"\x01\x03", ids["flags"]: b"\x05",
                                    ids["tag"]: b"\xbe\xef"})
    [(port, data)] = _wait_processed(dev.switch, 1)
    header = (0x103 << 23) | (5 << 20) | 0xBEEF
    assert port == CPU_PORT
    assert data == header.to_bytes(4, "big") + PAYLOAD


def test_missing_packet_out_field_is_zero(fake_device):
    dev = fake_device
    ids = _out_ids(dev)
    dev.client.packet_out(PAYLOAD, {ids["egress_port"]: b"\x02"})
    [(_, data)] = _wait_processed(dev.switch, 1)
    assert data[:4] == (2 << 23).to_bytes(4, "big")


@pytest.mark.parametrize("metadata,why", [
    ({99: b"\x01"}, "unknown metadata id"),
    ({1: b"\x02\x00"}, "egress_port value wider than 9 bits"),
])
def test_bad_packet_out_gets_a_stream_error_and_is_dropped(fake_device, metadata, why):
    dev = fake_device
    dev.client.packet_out(PAYLOAD, metadata)
    error = dev.client.next_message("error")
    assert error is not None, why
    assert error.error.canonical_code == INVALID_ARGUMENT, why
    assert error.error.packet_out.packet_out.payload == PAYLOAD, why
    assert dev.switch.processed == [], why


def test_backup_packet_out_is_refused(fake_device, connect):
    dev = fake_device
    backup = connect(dev.address)
    backup.arbitrate((0, 0))
    backup.packet_out(PAYLOAD, {})
    error = backup.next_message("error")
    assert error.error.canonical_code == PERMISSION_DENIED
    assert dev.switch.processed == []


def test_cpu_port_output_becomes_packet_in_for_the_primary_only(fake_device, connect):
    dev = fake_device
    backup = connect(dev.address)
    backup.arbitrate((0, 0))
    header = ((2 << 23) | 0xBEEF).to_bytes(4, "big")
    dev.switch.behaviour = lambda port, data: [(CPU_PORT, header + data[4:]), (7, data)]
    dev.client.packet_out(PAYLOAD, {})
    msg = dev.client.next_message("packet")
    assert msg.packet.payload == PAYLOAD
    metadata = {m.metadata_id: m.value for m in msg.packet.metadata}
    assert metadata == {dev.names.metadata_id("packet_in", "ingress_port"): b"\x02",
                        dev.names.metadata_id("packet_in", "_pad"): b"\x00",
                        dev.names.metadata_id("packet_in", "tag"): b"\xbe\xef"}
    assert backup.next_message("packet", timeout=0.3) is None


def test_packet_in_shorter_than_its_header_is_dropped(fake_device):
    dev = fake_device
    dev.service.packet_in(b"\x01\x02")
    assert dev.client.next_message("packet", timeout=0.3) is None
    assert dev.service.stats["packet_in_dropped"] == 1
    dev.service.packet_in(b"\x00\x00\x00\x00")  # exactly the header: empty payload
    assert dev.client.next_message("packet").packet.payload == b""
