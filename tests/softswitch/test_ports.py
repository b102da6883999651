"""Port specs, UDP-tunnel ports, pcap capture, and the runtime's packet loops."""

import logging
import socket
import struct
import time

import pytest
from fakes import FakeSwitch

from softswitch.ports import PortSpec, UdpPort, open_port, parse_port_spec
from softswitch.runtime import Runtime

LOG = logging.getLogger("test.ports")
FRAME = bytes.fromhex("ffffffffffff0000000000010800") + bytes(range(46))


def free_udp_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def peer_socket(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", port))
    s.settimeout(5)
    return s


def read_pcap(path) -> list[bytes]:
    data = path.read_bytes()
    magic, major, minor, _, _, snaplen, linktype = struct.unpack("<IHHiIII", data[:24])
    assert (magic, major, minor, linktype) == (0xA1B2C3D4, 2, 4, 1)
    frames, pos = [], 24
    while pos < len(data):
        _, _, incl, orig = struct.unpack("<IIII", data[pos:pos + 16])
        assert incl == orig
        frames.append(data[pos + 16:pos + 16 + incl])
        pos += 16 + incl
    return frames


@pytest.mark.parametrize("text,expected", [
    ("1@s1-eth1", PortSpec(1, "s1-eth1")),
    ("0@veth0", PortSpec(0, "veth0")),
    ("3@udp:127.0.0.1:40001>127.0.0.1:41001",
     PortSpec(3, "udp3", ("127.0.0.1", 40001), ("127.0.0.1", 41001))),
])
def test_parse_port_spec(text, expected):
    assert parse_port_spec(text) == expected


@pytest.mark.parametrize("text", ["s1-eth1", "x@s1-eth1", "-1@eth0", "1@", "1@udp:127.0.0.1:1",
                                  "1@udp:127.0.0.1:1>127.0.0.1:70000", "1@a-name-far-too-long",
                                  "1@udp:127.0.0.1:x>127.0.0.1:2"])
def test_bad_port_spec_is_a_clear_error(text):
    with pytest.raises(ValueError, match="port spec"):
        parse_port_spec(text)


def test_udp_port_round_trip_and_pcap(tmp_path):
    local, peer = free_udp_ports(2)
    port = open_port(parse_port_spec(f"2@udp:127.0.0.1:{local}>127.0.0.1:{peer}"),
                     str(tmp_path), LOG)
    other = peer_socket(peer)
    try:
        assert isinstance(port, UdpPort)
        assert port.recv(0.05) is None  # nothing yet: a timeout, not an error
        other.sendto(FRAME, ("127.0.0.1", local))
        assert port.recv(5) == FRAME
        assert port.send(FRAME[::-1])
        assert other.recvfrom(70000)[0] == FRAME[::-1]
    finally:
        port.close()
        other.close()
    assert read_pcap(tmp_path / "udp2_in.pcap") == [FRAME]
    assert read_pcap(tmp_path / "udp2_out.pcap") == [FRAME[::-1]]


def test_udp_port_accepts_only_its_peer():
    local, peer, stranger_port = free_udp_ports(3)
    port = open_port(parse_port_spec(f"1@udp:127.0.0.1:{local}>127.0.0.1:{peer}"), None, LOG)
    other, stranger = peer_socket(peer), peer_socket(stranger_port)
    try:
        for i in range(3):   # another local process speaking as a host: dropped, counted
            stranger.sendto(bytes([i]) + FRAME[1:], ("127.0.0.1", local))
        other.sendto(FRAME, ("127.0.0.1", local))
        assert port.recv(5) == FRAME      # the peer's frame, the strangers' never
        assert port.recv(0.05) is None
        assert (port.rx, port.foreign) == (1, 3)
    finally:
        port.close()
        other.close()
        stranger.close()


def test_udp_port_peer_by_name():
    local, peer = free_udp_ports(2)
    port = open_port(parse_port_spec(f"1@udp:127.0.0.1:{local}>localhost:{peer}"), None, LOG)
    other = peer_socket(peer)
    try:
        other.sendto(FRAME, ("127.0.0.1", local))
        assert port.recv(5) == FRAME
        assert port.foreign == 0
    finally:
        port.close()
        other.close()


def test_send_to_an_absent_peer_does_not_raise():
    local, peer = free_udp_ports(2)
    port = open_port(parse_port_spec(f"1@udp:127.0.0.1:{local}>127.0.0.1:{peer}"), None, LOG)
    try:
        for _ in range(3):
            port.send(FRAME)  # ICMP port unreachable comes back as ECONNREFUSED later
            assert port.recv(0.05) is None
    finally:
        port.close()


def test_runtime_loops_forward_and_survive_engine_errors():
    udp = free_udp_ports(4)
    specs = [parse_port_spec(f"1@udp:127.0.0.1:{udp[0]}>127.0.0.1:{udp[1]}"),
             parse_port_spec(f"2@udp:127.0.0.1:{udp[2]}>127.0.0.1:{udp[3]}")]
    switch = FakeSwitch(device_id=1, cpu_port=255)

    def behaviour(port, data):
        if data[0] == 0xEE:
            raise RuntimeError("engine bug")
        return [(2 if port == 1 else 1, data), (9, data)]  # port 9 has no interface

    switch.behaviour = behaviour
    runtime = Runtime(switch, [open_port(s, None, LOG) for s in specs], device_id=1,
                      grpc_addr="127.0.0.1:0", log=LOG)
    runtime.start()
    peer1, peer2 = peer_socket(udp[1]), peer_socket(udp[3])
    try:
        peer1.sendto(b"\xee" + FRAME[1:], ("127.0.0.1", udp[0]))  # the engine raises
        peer1.sendto(FRAME, ("127.0.0.1", udp[0]))
        assert peer2.recvfrom(70000)[0] == FRAME
        peer2.sendto(FRAME[::-1], ("127.0.0.1", udp[2]))
        assert peer1.recvfrom(70000)[0] == FRAME[::-1]
        assert runtime.stats["engine_errors"] == 1
        deadline = time.monotonic() + 2
        while runtime.stats["no_port"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runtime.stats["no_port"] == 2
    finally:
        runtime.stop()
        peer1.close()
        peer2.close()
    assert all(p.sock.fileno() == -1 for p in runtime.ports.values())  # sockets closed


def test_cpu_port_cannot_be_a_data_port():
    udp = free_udp_ports(2)
    spec = parse_port_spec(f"255@udp:127.0.0.1:{udp[0]}>127.0.0.1:{udp[1]}")
    port = open_port(spec, None, LOG)
    try:
        with pytest.raises(ValueError, match="CPU port"):
            Runtime(FakeSwitch(cpu_port=255), [port], device_id=1, grpc_addr="127.0.0.1:0")
    finally:
        port.close()


def test_restore_vlan_puts_the_auxdata_tag_back_as_libpcap_does():
    import struct

    from softswitch.ports import AUXDATA, PACKET_AUXDATA, SOL_PACKET, restore_vlan

    frame = bytes(range(12)) + b"\x08\x00payload"

    def aux(status, tci, tpid):
        return [(SOL_PACKET, PACKET_AUXDATA, AUXDATA.pack(status, 0, 0, 0, 0, tci, tpid))]

    assert restore_vlan(frame, []) == frame
    assert restore_vlan(frame, aux(0, 0, 0)) == frame  # no tag
    # 802.1ad outer tag with its TPID; TCI 0 counts when the kernel says it is valid
    assert restore_vlan(frame, aux(0x10 | 0x40, 0, 0x88A8)) == \
        frame[:12] + struct.pack("!HH", 0x88A8, 0) + frame[12:]
    # an older kernel gives no TPID: 802.1Q
    assert restore_vlan(frame, aux(0x10, 0x2064, 0)) == \
        frame[:12] + b"\x81\x00\x20\x64" + frame[12:]
