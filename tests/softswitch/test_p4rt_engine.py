"""The server driving the real engine with tests/p4/p4rt_basic.p4: state written over
P4Runtime changes what packets do, and what packets do shows up in P4Runtime reads."""

import queue
import struct

from conftest import CPU_PORT
from p4.v1 import p4runtime_pb2
from p4rt_build import clone_session, mc_group

MAC1, MAC2 = 0x020000000001, 0x020000000002
ETYPE_PROBE, ETYPE_TO_CPU = 0x88B5, 0x88B6


def eth(dst: int, src: int, etype: int) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + etype.to_bytes(2, "big")


def probe(op: int, idx: int = 0, value: int = 0, vlan: int = 0, flags: int = 0,
          dst: int = MAC2, src: int = MAC1) -> bytes:
    return eth(dst, src, ETYPE_PROBE) + struct.pack("!BBIH", op, idx, value,
                                                    (vlan << 4) | flags) + bytes(20)


def parse_probe(frame: bytes) -> dict:
    op, idx, value, vf = struct.unpack("!BBIH", frame[14:22])
    return {"op": op, "idx": idx, "value": value, "vlan": vf >> 4, "flags": vf & 0xF}


def fwd(dev, mac=MAC2, port=2):
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": mac}, "I.fwd",
                                            port=port))


def test_forwarding_follows_entries_and_counts_hits(real_device):
    dev = real_device
    frame = eth(MAC2, MAC1, 0x0800) + bytes(46)
    assert dev.switch.process(1, frame) == []  # miss: the default action drops
    fwd(dev)
    assert dev.switch.process(1, frame) == [(2, frame)]
    assert dev.switch.process(1, frame) == [(2, frame)]
    query = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": MAC2})
    query.table_entry.counter_data.SetInParent()
    [got] = dev.client.read(query)
    assert (got.table_entry.counter_data.packet_count,
            got.table_entry.counter_data.byte_count) == (2, 2 * len(frame))
    dev.client.modify(dev.names.table_entry("I.l2", default=True, action="I.fwd", port=3))
    other = eth(0x02AAAAAAAAAA, MAC1, 0x0800) + bytes(46)
    assert dev.switch.process(1, other) == [(3, other)]


def test_indirect_counter_counts_per_ingress_port(real_device):
    dev = real_device
    frame = eth(MAC2, MAC1, 0x0800) + bytes(46)
    for _ in range(3):
        dev.switch.process(4, frame)
    [got] = dev.client.read(dev.names.counter_entry("I.port_rx", 4))
    assert (got.counter_entry.data.packet_count, got.counter_entry.data.byte_count) == \
        (3, 3 * len(frame))
    dev.client.modify(dev.names.counter_entry("I.port_rx", 4, packets=0, nbytes=0))
    [got] = dev.client.read(dev.names.counter_entry("I.port_rx", 4))
    assert got.counter_entry.data.packet_count == 0


def test_registers_between_data_plane_and_p4runtime(real_device):
    dev = real_device
    fwd(dev)
    dev.switch.process(1, probe(op=1, idx=3, value=0x12345678))
    [got] = dev.client.read(dev.names.register_entry("I.store", 3))
    assert got.register_entry.data.bitstring == bytes.fromhex("12345678")
    dev.client.modify(dev.names.register_entry("I.store", 4, 0xCAFEBABE))
    [(port, out)] = dev.switch.process(1, probe(op=2, idx=4))
    assert port == 2 and parse_probe(out)["value"] == 0xCAFEBABE


def test_multicast_group_and_clone_session(real_device):
    dev = real_device
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": MAC2}, "I.flood",
                                            grp=3))
    frame = eth(MAC2, MAC1, 0x0800) + bytes(46)
    assert dev.switch.process(1, frame) == []  # no such group yet
    dev.client.insert(mc_group(3, [(2, 0), (3, 1)]))
    assert sorted(p for p, _ in dev.switch.process(1, frame)) == [2, 3]
    fwd(dev, mac=MAC1, port=6)
    dev.client.insert(clone_session(5, [(7, 0)]))
    outs = dev.switch.process(1, probe(op=3, dst=MAC1))
    assert sorted(p for p, _ in outs) == [6, 7]


def test_ternary_priorities_and_const_entries(real_device):
    dev = real_device
    fwd(dev)
    broad = dev.names.table_entry("I.acl", {"hdr.ethernet.etype": ETYPE_PROBE}, "I.mark",
                                  priority=1, flags=1, value=0x11)
    narrow = dev.names.table_entry(
        "I.acl", {"hdr.ethernet.src": (MAC1, 0xFFFFFFFFFFFF), "hdr.probe.vlan": (0, 100),
                  "hdr.probe.op": 7, "hdr.ethernet.etype": ETYPE_PROBE},
        "I.mark", priority=10, flags=2, value=0x22)
    dev.client.insert(broad)
    dev.client.insert(narrow)
    [(_, out)] = dev.switch.process(1, probe(op=7, vlan=5))
    assert (parse_probe(out)["flags"], parse_probe(out)["value"]) == (2, 0x22)
    dev.client.delete(narrow)
    [(_, out)] = dev.switch.process(1, probe(op=7, vlan=5))
    # acl marks flags 1, then the const entry for flags 1 marks (9, 0x99)
    assert (parse_probe(out)["flags"], parse_probe(out)["value"]) == (9, 0x99)
    fixed = p4runtime_pb2.Entity()
    fixed.table_entry.table_id = dev.names.table_id("I.fixed")
    entries = [e.table_entry for e in dev.client.read(fixed)]
    assert len(entries) == 2 and all(e.is_const for e in entries)


def test_lpm_rewrites_through_metadata(real_device):
    dev = real_device
    fwd(dev)
    dev.client.insert(dev.names.table_entry("I.tags", {"hdr.probe.value": (0x0A000000, 8)},
                                            "I.set_tag", tag=0x123))
    dev.client.insert(dev.names.table_entry("I.tags", {"hdr.probe.value": (0x0A0B0000, 16)},
                                            "I.set_tag", tag=0x456))
    [(_, out)] = dev.switch.process(1, probe(op=9, value=0x0A0B0C0D))
    assert parse_probe(out)["vlan"] == 0x456  # the longest prefix wins
    [(_, out)] = dev.switch.process(1, probe(op=9, value=0x0A0C0C0D))
    assert parse_probe(out)["vlan"] == 0x123
    [(_, out)] = dev.switch.process(1, probe(op=9, value=0x0B000000, vlan=0x777))
    assert parse_probe(out)["vlan"] == 0x777  # miss: miss_tag leaves vlan alone


def test_packet_out_and_packet_in_round_trip(real_device):
    dev = real_device
    sent = queue.Queue()
    dev.service.emit = lambda outputs: [sent.put(o) for o in outputs]
    ids = {f: dev.names.metadata_id("packet_out", f) for f in ("egress_port", "tag")}
    payload = eth(MAC2, MAC1, 0x0800) + bytes(46)
    dev.client.packet_out(payload, {ids["egress_port"]: b"\x05", ids["tag"]: b"\x01"})
    assert sent.get(timeout=5) == (5, payload)  # the packet_out header is gone
    to_cpu = eth(MAC2, MAC1, ETYPE_TO_CPU) + bytes(46)
    [(port, data)] = dev.switch.process(3, to_cpu)
    assert port == CPU_PORT
    dev.service.packet_in(data)
    msg = dev.client.next_message("packet")
    assert msg.packet.payload == to_cpu
    metadata = {m.metadata_id: m.value for m in msg.packet.metadata}
    assert metadata[dev.names.metadata_id("packet_in", "ingress_port")] == b"\x03"
    assert metadata[dev.names.metadata_id("packet_in", "tag")] == b"\xbe\xef"


def test_packets_only_counter_reads_bytes_counted_by_traffic(real_device):
    # BMv2 counts bytes in every counter and a P4Runtime read returns them whatever the
    # declared unit (checked against simple_switch_grpc in test_p4rt_bmv2_traffic.py)
    dev = real_device
    fwd(dev)
    frame = probe(op=4)
    for _ in range(3):
        assert dev.switch.process(1, frame) == [(2, frame)]
    [got] = dev.client.read(dev.names.counter_entry("I.probe_ops", 4))
    assert (got.counter_entry.data.packet_count, got.counter_entry.data.byte_count) == \
        (3, 3 * len(frame))


def test_a_committed_pipeline_is_compiled_once_and_runs_on_the_live_engine(real_device,
                                                                          monkeypatch):
    """VERIFY_AND_COMMIT compiles in a scratch engine to check the config; the live engine
    takes that program instead of compiling it again (a wide program takes seconds)."""
    import softswitch.switch as engine

    dev, compiled = real_device, []
    real = engine.compile_program
    monkeypatch.setattr(engine, "compile_program",
                        lambda *a, **k: compiled.append(1) or real(*a, **k))
    old = dev.switch._prog
    dev.client.set_pipeline(dev.p4info, dev.config)
    assert len(compiled) == 1 and dev.switch._prog is not old
    # the adopted program serves the live engine: entries written now steer its packets,
    # and it takes the live engine's lock, which the data plane and P4Runtime share
    frame = eth(MAC2, MAC1, 0x0800) + bytes(46)
    assert dev.switch.process(1, frame) == []
    fwd(dev)
    assert dev.switch.process(1, frame) == [(2, frame)]
    [got] = dev.client.read(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": MAC2}))
    assert got.table_entry.action.action.params[0].value == b"\x02"  # the port written


def test_adopt_takes_only_a_fresh_scratch_of_the_same_engine(basic_program):
    import pytest

    from softswitch import Switch

    a, b = Switch(), Switch()
    s = a.scratch()
    with pytest.raises(ValueError, match="scratch"):
        a.adopt(s)  # nothing loaded yet
    s.load(basic_program.config)
    with pytest.raises(ValueError, match="scratch"):
        b.adopt(s)  # another engine's lock and random sources
    a.adopt(s)
    assert a.loaded
    with pytest.raises(ValueError, match="scratch"):
        a.adopt(s)  # once only: the program now is a's
