"""CounterEntry, RegisterEntry, MulticastGroupEntry, CloneSessionEntry."""

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from p4rt_build import clone_session, mc_group
from p4rt_client import batch_errors

Update = p4runtime_pb2.Update
INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]


def _fails(client, kind, entity, code: grpc.StatusCode) -> None:
    with pytest.raises(grpc.RpcError) as excinfo:
        client.write((kind, entity))
    assert [e.canonical_code for e in batch_errors(excinfo.value)] == [code.value[0]]


def test_counter_read_one_all_and_write(device):
    dev = device
    dev.switch.counters["I.port_rx"].write(3, 10, 1000)
    [one] = dev.client.read(dev.names.counter_entry("I.port_rx", 3))
    assert (one.counter_entry.data.packet_count, one.counter_entry.data.byte_count) == (10, 1000)
    cells = dev.client.read(dev.names.counter_entry("I.port_rx"))
    assert [c.counter_entry.index.index for c in cells] == list(range(16))
    everything = dev.client.read(dev.names.counter_entry(""))
    assert len(everything) == 16 + 8
    dev.client.modify(dev.names.counter_entry("I.port_rx", 5, packets=2, nbytes=3))
    assert dev.switch.counters["I.port_rx"].read(5) == (2, 3)
    dev.client.delete(dev.names.counter_entry("I.port_rx", 5))  # BMv2: DELETE resets
    assert dev.switch.counters["I.port_rx"].read(5) == (0, 0)


def test_packets_only_counter_reports_packets_only(device):
    dev = device
    dev.client.modify(dev.names.counter_entry("I.probe_ops", 1, packets=4, nbytes=99))
    assert dev.switch.counters["I.probe_ops"].read(1) == (4, 0)
    [got] = dev.client.read(dev.names.counter_entry("I.probe_ops", 1))
    assert got.counter_entry.data.packet_count == 4
    assert got.counter_entry.data.byte_count == 0


def test_counter_errors(device):
    dev = device
    _fails(dev.client, Update.INSERT, dev.names.counter_entry("I.port_rx", 1, 1, 1),
           grpc.StatusCode.INVALID_ARGUMENT)
    _fails(dev.client, Update.MODIFY, dev.names.counter_entry("I.port_rx", None, 1, 1),
           grpc.StatusCode.UNIMPLEMENTED)
    _fails(dev.client, Update.MODIFY, dev.names.counter_entry("I.port_rx", 16, 1, 1),
           grpc.StatusCode.OUT_OF_RANGE)
    _fails(dev.client, Update.MODIFY, dev.names.counter_entry("I.port_rx", -1, 1, 1),
           grpc.StatusCode.INVALID_ARGUMENT)
    bad_id = dev.names.counter_entry("I.port_rx", 0)
    bad_id.counter_entry.counter_id = dev.names.table_id("I.l2")
    _fails(dev.client, Update.MODIFY, bad_id, grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.read(dev.names.counter_entry("I.port_rx", 99))
    assert excinfo.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert all(dev.switch.counters["I.port_rx"].read(i) == (0, 0) for i in range(16))


def test_register_read_write(device):
    dev = device
    dev.client.modify(dev.names.register_entry("I.store", 2, 0xCAFE))
    assert dev.switch.registers["I.store"].values[2] == 0xCAFE
    [got] = dev.client.read(dev.names.register_entry("I.store", 2))
    assert got.register_entry.data.bitstring == b"\xca\xfe"
    cells = dev.client.read(dev.names.register_entry("I.store"))
    assert [c.register_entry.data.bitstring for c in cells][:3] == [b"\x00", b"\x00", b"\xca\xfe"]
    assert len(dev.client.read(dev.names.register_entry(""))) == 16
    dev.client.modify(dev.names.register_entry("I.store", None, 7))  # every cell
    assert list(dev.switch.registers["I.store"].values) == [7] * 16


def test_register_errors_leave_cells_unchanged(device):
    dev = device
    _fails(dev.client, Update.MODIFY, dev.names.register_entry("I.store", 1, 1 << 32),
           grpc.StatusCode.INVALID_ARGUMENT)
    _fails(dev.client, Update.MODIFY, dev.names.register_entry("I.store", 16, 1),
           grpc.StatusCode.OUT_OF_RANGE)
    _fails(dev.client, Update.INSERT, dev.names.register_entry("I.store", 1, 1),
           grpc.StatusCode.INVALID_ARGUMENT)
    _fails(dev.client, Update.MODIFY, dev.names.register_entry("I.store", 1),
           grpc.StatusCode.INVALID_ARGUMENT)  # no data
    assert list(dev.switch.registers["I.store"].values) == [0] * 16


def test_multicast_groups(device):
    dev = device
    dev.client.insert(mc_group(3, [(1, 0), (2, 0), (2, 1)], metadata=b"m"))
    assert dev.switch.pre.groups[3] == [(1, 0), (2, 0), (2, 1)]
    [got] = dev.client.read(mc_group(3, []))
    entry = got.packet_replication_engine_entry.multicast_group_entry
    assert [(r.egress_port, r.instance) for r in entry.replicas] == [(1, 0), (2, 0), (2, 1)]
    assert entry.metadata == b"m"
    dev.client.insert(mc_group(4, [(5, 0)]))
    assert len(dev.client.read(mc_group(0, []))) == 2
    dev.client.modify(mc_group(3, [(4, 2)]))
    assert dev.switch.pre.groups[3] == [(4, 2)]
    dev.client.delete(mc_group(3, []))
    assert 3 not in dev.switch.pre.groups
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.read(mc_group(3, []))
    assert excinfo.value.code() == grpc.StatusCode.NOT_FOUND


def test_multicast_group_errors(device):
    dev = device
    dev.client.insert(mc_group(3, [(1, 0)]))
    _fails(dev.client, Update.INSERT, mc_group(3, [(2, 0)]), grpc.StatusCode.ALREADY_EXISTS)
    _fails(dev.client, Update.MODIFY, mc_group(9, [(2, 0)]), grpc.StatusCode.NOT_FOUND)
    _fails(dev.client, Update.DELETE, mc_group(9, []), grpc.StatusCode.NOT_FOUND)
    _fails(dev.client, Update.INSERT, mc_group(0, [(2, 0)]), grpc.StatusCode.INVALID_ARGUMENT)
    _fails(dev.client, Update.INSERT, mc_group(1 << 15, []), grpc.StatusCode.OUT_OF_RANGE)
    _fails(dev.client, Update.INSERT, mc_group(5, [(2, 0), (2, 0)]),
           grpc.StatusCode.INVALID_ARGUMENT)
    assert dev.switch.pre.groups == {3: [(1, 0)]}


def test_replica_port_bytes_read_back_as_bytes(device):
    dev = device
    entity = mc_group(6, [])
    entity.packet_replication_engine_entry.multicast_group_entry.replicas.add(
        port=b"\x00\x07", instance=1)
    dev.client.insert(entity)
    assert dev.switch.pre.groups[6] == [(7, 1)]
    [got] = dev.client.read(mc_group(6, []))
    [replica] = got.packet_replication_engine_entry.multicast_group_entry.replicas
    assert replica.port == b"\x00\x07" and replica.instance == 1


def test_clone_sessions(device):
    dev = device
    dev.client.insert(clone_session(5, [(3, 1)]))
    assert dev.switch.clones.get(5)["replicas"] == [(3, 1)]
    [got] = dev.client.read(clone_session(0, []))
    session = got.packet_replication_engine_entry.clone_session_entry
    assert session.session_id == 5
    assert [(r.egress_port, r.instance) for r in session.replicas] == [(3, 1)]
    # simple_switch_grpc cannot truncate clones; neither do we, so both targets agree.
    _fails(dev.client, Update.INSERT, clone_session(6, [(3, 1)], length=64),
           grpc.StatusCode.UNIMPLEMENTED)
    _fails(dev.client, Update.INSERT, clone_session(5, [(4, 0)]), grpc.StatusCode.ALREADY_EXISTS)
    _fails(dev.client, Update.MODIFY, clone_session(6, [(4, 0)]), grpc.StatusCode.NOT_FOUND)
    _fails(dev.client, Update.INSERT, clone_session(0, [(4, 0)]),
           grpc.StatusCode.INVALID_ARGUMENT)
    _fails(dev.client, Update.INSERT, clone_session(7, [(4, 0)], cos=1),
           grpc.StatusCode.UNIMPLEMENTED)
    dev.client.modify(clone_session(5, [(4, 0), (5, 0)]))
    assert dev.switch.clones.get(5)["replicas"] == [(4, 0), (5, 0)]
    dev.client.delete(clone_session(5, []))
    assert dev.switch.clones.get(5) is None
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.read(clone_session(5, []))
    assert excinfo.value.code() == grpc.StatusCode.NOT_FOUND


def test_entities_the_target_lacks(device):
    dev = device
    meter = p4runtime_pb2.Entity()
    meter.meter_entry.meter_id = 0x14000001
    _fails(dev.client, Update.MODIFY, meter, grpc.StatusCode.INVALID_ARGUMENT)  # no such meter
    every_meter = p4runtime_pb2.Entity()
    every_meter.meter_entry.SetInParent()
    assert dev.client.read(every_meter) == []  # the program has none
    empty = p4runtime_pb2.Entity()
    _fails(dev.client, Update.MODIFY, empty, grpc.StatusCode.INVALID_ARGUMENT)
