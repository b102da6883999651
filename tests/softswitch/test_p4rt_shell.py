"""p4runtime-shell 0.0.6 drives the server: pipeline push, entries, counters, PRE, packets."""

import pytest
from conftest import CPU_PORT
from fakes import FakeEntry, FakeSwitch
from google.protobuf import text_format

sh = pytest.importorskip("p4runtime_sh.shell")
from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: E402


@pytest.fixture
def shell(serve, synthetic, tmp_path):
    switch = FakeSwitch(device_id=1, cpu_port=CPU_PORT)
    address, service = serve(switch, entry_type=FakeEntry)
    p4info_path = tmp_path / "p.p4info.txt"
    p4info_path.write_text(text_format.MessageToString(synthetic.p4info))
    json_path = tmp_path / "p.json"
    json_path.write_bytes(synthetic.config)
    sh.setup(device_id=1, grpc_addr=address, election_id=(0, 1),
             config=sh.FwdPipeConfig(str(p4info_path), str(json_path)), verbose=False)
    try:
        yield switch, service
    finally:
        sh.teardown()


def test_shell_inserts_reads_modifies_deletes_table_entries(shell):
    switch, _ = shell
    assert switch.loads == 1
    te = sh.TableEntry("I.l2")(action="I.fwd")
    te.match["hdr.ethernet.dst"] = "00:00:00:00:00:ab"
    te.action["port"] = "3"
    te.insert()
    acl = sh.TableEntry("I.acl")(action="I.mark")
    acl.match["hdr.ethernet.src"] = "0a:00:00:00:00:00&&&ff:00:00:00:00:00"
    acl.match["hdr.probe.vlan"] = "10..20"
    acl.match["hdr.probe.op"] = "7"
    acl.match["hdr.ethernet.etype"] = "0x88b5"
    acl.action["flags"] = "3"
    acl.action["value"] = "0xdeadbeef"
    acl.priority = 9
    acl.insert()
    [e] = switch.tables["I.acl"].entries()
    assert e.key == ((0x0A0000000000, 0xFF0000000000), (10, 20), (7, 0xFF), 0x88B5)
    assert e.priority == 9
    [read] = list(sh.TableEntry("I.l2").read())
    assert read.match["hdr.ethernet.dst"].exact.value == b"\xab"
    assert read.action.msg().params[0].value == b"\x03"
    [read_acl] = list(sh.TableEntry("I.acl").read())
    assert read_acl.priority == 9
    te.action["port"] = "4"
    te.modify()
    assert switch.tables["I.l2"].entries()[0].params == [4]
    sh.TableEntry("I.l2").read(function=lambda x: x.delete())
    assert switch.tables["I.l2"].entries() == []


def test_shell_default_entry_and_errors(shell):
    switch, _ = shell
    default = sh.TableEntry("I.l2")(action="I.fwd", is_default=True)
    default.action["port"] = "5"
    default.modify()
    assert switch.tables["I.l2"].default == ("I.fwd", [5])
    dup = sh.TableEntry("I.l2")(action="I.fwd")
    dup.match["hdr.ethernet.dst"] = "00:00:00:00:00:01"
    dup.action["port"] = "1"
    dup.insert()
    with pytest.raises(P4RuntimeWriteException) as excinfo:
        dup.insert()
    assert "ALREADY_EXISTS" in str(excinfo.value)


def test_shell_counters_and_multicast(shell):
    switch, _ = shell
    switch.counters["I.port_rx"].write(2, 5, 500)
    counter = sh.CounterEntry("I.port_rx")
    counter.index = 2
    [got] = list(counter.read())
    assert (got.packet_count, got.byte_count) == (5, 500)
    sh.MulticastGroupEntry(7).add(1, 0).add(2, 0).insert()
    assert switch.pre.groups[7] == [(1, 0), (2, 0)]
    [group] = list(sh.MulticastGroupEntry(7).read())
    assert ([(r.egress_port, r.instance) for r in group.msg().multicast_group_entry.replicas]
            == [(1, 0), (2, 0)])
    sh.CloneSessionEntry(5).add(3).insert()
    assert switch.clones.get(5)["replicas"] == [(3, 0)]


def test_shell_packet_out_and_in(shell):
    switch, _ = shell
    header_in = ((4 << 23) | 0x1234).to_bytes(4, "big")
    switch.behaviour = lambda port, data: [(CPU_PORT, header_in + data[4:])]
    sniffer = sh.PacketIn()
    sh.PacketOut(b"\x01" * 20, egress_port="2", tag="0xbeef").send()
    [msg] = list(sniffer.sniff(timeout=2))
    assert msg.packet.payload == b"\x01" * 20
    assert switch.processed[0][1][:4] == ((2 << 23) | 0xBEEF).to_bytes(4, "big")


def test_shell_programs_the_real_engine(serve, basic_program):
    from softswitch import Switch

    switch = Switch(device_id=1, cpu_port=CPU_PORT)
    address, _ = serve(switch)
    sh.setup(device_id=1, grpc_addr=address, election_id=(0, 1),
             config=sh.FwdPipeConfig(str(basic_program.p4info_path),
                                     str(basic_program.json_path)), verbose=False)
    try:
        te = sh.TableEntry("I.l2")(action="I.fwd")
        te.match["hdr.ethernet.dst"] = "02:00:00:00:00:02"
        te.action["port"] = "4"
        te.insert()
        frame = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(46)
        assert switch.process(1, frame) == [(4, frame)]
        [read] = list(sh.TableEntry("I.l2").read())
        assert read.action.msg().params[0].value == b"\x04"
        counter = sh.CounterEntry("I.port_rx")
        counter.index = 1
        [got] = list(counter.read())
        assert (got.packet_count, got.byte_count) == (1, len(frame))
    finally:
        sh.teardown()
