"""TableEntry writes and reads through the gRPC server: match kinds, defaults, errors."""

import grpc
import pytest
from p4.v1 import p4runtime_pb2
from p4rt_client import batch_errors

Update = p4runtime_pb2.Update
MAC = 0x0000000000AB


def _code(excinfo) -> grpc.StatusCode:
    return excinfo.value.code()


def _entries(dev, table=None):
    te = p4runtime_pb2.Entity()
    te.table_entry.table_id = dev.names.table_id(table) if table else 0
    return [e.table_entry for e in dev.client.read(te)]


def test_insert_then_read_back_canonical(device):
    dev = device
    # Non-canonical (zero-padded) bytes are accepted and read back canonical.
    entity = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": b"\x00\x00\x00\x00\x00\xab"},
                                   "I.fwd", port=b"\x00\x03")
    dev.client.insert(entity)
    [got] = _entries(dev, "I.l2")
    assert got.match[0].exact.value == b"\xab"
    assert got.action.action.params[0].value == b"\x03"
    assert got.priority == 0 and not got.is_const
    [engine_entry] = dev.switch.tables["I.l2"].entries()
    assert engine_entry.key == (MAC,) and engine_entry.params == [3]


def test_all_match_kinds_and_priority(device):
    dev = device
    entity = dev.names.table_entry(
        "I.acl", {"hdr.ethernet.src": (0x0A0000000000, 0xFF0000000000),
                  "hdr.probe.vlan": (10, 20), "hdr.probe.op": 7, "hdr.ethernet.etype": 0x88B5},
        "I.mark", priority=5, flags=3, value=0xDEADBEEF)
    dev.client.insert(entity)
    [e] = dev.switch.tables["I.acl"].entries()
    assert e.key == ((0x0A0000000000, 0xFF0000000000), (10, 20), (7, 0xFF), 0x88B5)
    assert e.priority == 5 and e.params == [3, 0xDEADBEEF]
    [got] = _entries(dev, "I.acl")
    assert got.priority == 5
    assert got == entity.table_entry


def test_omitted_fields_are_dont_care_and_stay_omitted(device):
    dev = device
    entity = dev.names.table_entry("I.acl", {"hdr.ethernet.etype": 0x800}, "I.drop", priority=1)
    dev.client.insert(entity)
    [e] = dev.switch.tables["I.acl"].entries()
    assert e.key == ((0, 0), (0, 4095), (0, 0), 0x800)  # optional: a ternary in BMv2 JSON
    [got] = _entries(dev, "I.acl")
    assert [m.field_id for m in got.match] == [dev.names.field_id("I.acl", "hdr.ethernet.etype")]


def test_lpm_entry(device):
    dev = device
    dev.client.insert(dev.names.table_entry("I.tags", {"hdr.probe.value": (0x0A000000, 8)},
                                            "I.set_tag", tag=7))
    [e] = dev.switch.tables["I.tags"].entries()
    assert e.key == ((0x0A000000, 8),)
    [got] = _entries(dev, "I.tags")
    assert got.match[0].lpm.prefix_len == 8 and got.match[0].lpm.value == b"\x0a\x00\x00\x00"


@pytest.mark.parametrize("table,match,action,params,priority,why", [
    ("I.l2", {"hdr.ethernet.dst": 1 << 48}, "I.fwd", {"port": 1}, 0, "key too wide"),
    ("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", {"port": 512}, 0, "param too wide"),
    ("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", {}, 0, "missing param"),
    ("I.l2", {}, "I.fwd", {"port": 1}, 0, "missing exact field"),
    ("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", {"port": 1}, 3, "priority on exact table"),
    ("I.l2", {"hdr.ethernet.dst": 1}, "I.set_tag", {"tag": 1}, 0, "action not in table"),
    ("I.acl", {"hdr.ethernet.etype": 1}, "I.drop", {}, 0, "zero priority on ternary table"),
    ("I.acl", {"hdr.ethernet.etype": 1, "hdr.ethernet.src": (1, 0)}, "I.drop", {}, 1,
     "zero ternary mask"),
    ("I.acl", {"hdr.ethernet.etype": 1, "hdr.ethernet.src": (3, 1)}, "I.drop", {}, 1,
     "ternary value outside mask"),
    ("I.acl", {"hdr.ethernet.etype": 1, "hdr.probe.vlan": (9, 3)}, "I.drop", {}, 1,
     "range low > high"),
    ("I.acl", {"hdr.ethernet.etype": 1, "hdr.probe.vlan": (0, 4095)}, "I.drop", {}, 1,
     "full range instead of omitted"),
    ("I.tags", {"hdr.probe.value": (0x0A000001, 8)}, "I.set_tag", {"tag": 1}, 0,
     "lpm bits beyond prefix"),
    ("I.tags", {"hdr.probe.value": (0, 0)}, "I.set_tag", {"tag": 1}, 0, "lpm prefix 0"),
    ("I.tags", {"hdr.probe.value": (0, 33)}, "I.set_tag", {"tag": 1}, 0, "lpm prefix > width"),
])
def test_bad_entries_are_invalid_argument_and_change_nothing(device, table, match, action,
                                                             params, priority, why):
    dev = device
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.insert(dev.names.table_entry(table, match, action, priority, **params))
    assert _code(excinfo) == grpc.StatusCode.UNKNOWN, why  # batch: details carry the code
    [error] = batch_errors(excinfo.value)
    assert error.canonical_code == grpc.StatusCode.INVALID_ARGUMENT.value[0], why
    assert dev.switch.tables[table].entries() == [], why


def test_scope_violations_are_permission_denied(device):
    dev = device
    table_only = dev.names.table_entry("I.tags", default=True, action="NoAction")
    default_only = dev.names.table_entry("I.tags", {"hdr.probe.value": (0x0A000000, 8)},
                                         "I.miss_tag")
    for entity in (table_only, default_only):
        with pytest.raises(grpc.RpcError) as excinfo:
            dev.client.write((Update.MODIFY if entity.table_entry.is_default_action
                              else Update.INSERT, entity))
        [error] = batch_errors(excinfo.value)
        assert error.canonical_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert dev.switch.tables["I.tags"].default == ("I.miss_tag", [])
    assert dev.switch.tables["I.tags"].entries() == []


def test_unknown_table_id(device):
    dev = device
    entity = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    entity.table_entry.table_id = 0x02FFFFFF
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.insert(entity)
    assert batch_errors(excinfo.value)[0].canonical_code == \
        grpc.StatusCode.INVALID_ARGUMENT.value[0]
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.read(entity)
    assert _code(excinfo) == grpc.StatusCode.INVALID_ARGUMENT


def test_duplicate_insert_modify_missing_delete_missing(device):
    dev = device
    first = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 5}, "I.fwd", port=1)
    dev.client.insert(first)
    again = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 5}, "I.fwd", port=2)
    other = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 6}, "I.fwd", port=2)
    for kind, entity, code in ((Update.INSERT, again, grpc.StatusCode.ALREADY_EXISTS),
                               (Update.MODIFY, other, grpc.StatusCode.NOT_FOUND),
                               (Update.DELETE, other, grpc.StatusCode.NOT_FOUND)):
        with pytest.raises(grpc.RpcError) as excinfo:
            dev.client.write((kind, entity))
        assert batch_errors(excinfo.value)[0].canonical_code == code.value[0]
    [e] = dev.switch.tables["I.l2"].entries()
    assert e.params == [1]  # the failed INSERT left the entry as it was


def test_modify_and_delete(device):
    dev = device
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 5}, "I.fwd", port=1))
    dev.client.modify(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 5}, "I.flood", grp=9))
    [e] = dev.switch.tables["I.l2"].entries()
    assert (e.action, e.params) == ("I.flood", [9])
    dev.client.delete(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 5}))
    assert dev.switch.tables["I.l2"].entries() == []


def test_batch_is_per_update_with_one_error_per_update(device):
    dev = device
    ok1 = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    bad = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 2}, "I.fwd", port=999)
    ok2 = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 3}, "I.fwd", port=3)
    dup = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=4)
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.write(*((Update.INSERT, e) for e in (ok1, bad, ok2, dup)))
    assert _code(excinfo) == grpc.StatusCode.UNKNOWN
    codes = [e.canonical_code for e in batch_errors(excinfo.value)]
    assert codes == [0, grpc.StatusCode.INVALID_ARGUMENT.value[0], 0,
                     grpc.StatusCode.ALREADY_EXISTS.value[0]]
    keys = sorted(e.key for e in dev.switch.tables["I.l2"].entries())
    assert keys == [(1,), (3,)]
    assert {e.key: e.params for e in dev.switch.tables["I.l2"].entries()}[(1,)] == [1]


def test_default_entry_modify_read_reset(device):
    dev = device
    default = dev.names.table_entry("I.l2", default=True, action="I.fwd", port=7)
    default.table_entry.controller_metadata = 42
    dev.client.modify(default)
    assert dev.switch.tables["I.l2"].default == ("I.fwd", [7])
    query = dev.names.table_entry("I.l2", default=True)
    [got] = [e.table_entry for e in dev.client.read(query)]
    assert got.is_default_action and got.action.action.params[0].value == b"\x07"
    assert got.controller_metadata == 42
    dev.client.modify(dev.names.table_entry("I.l2", default=True))  # no action: reset
    assert dev.switch.tables["I.l2"].default == ("I.fwd_drop", [])
    for kind in (Update.INSERT, Update.DELETE):
        with pytest.raises(grpc.RpcError) as excinfo:
            dev.client.write((kind, default))
        assert batch_errors(excinfo.value)[0].canonical_code == \
            grpc.StatusCode.INVALID_ARGUMENT.value[0]


def test_const_table(device):
    dev = device
    entries = _entries(dev, "I.fixed")
    assert len(entries) == 2 and all(e.is_const for e in entries)
    flags_one = [e for e in entries if e.match[0].exact.value == b"\x01"][0]
    assert flags_one.action.action.action_id == dev.names.action_id("I.mark")
    for kind, entity in (
            (Update.INSERT, dev.names.table_entry("I.fixed", {"hdr.probe.flags": 3}, "NoAction")),
            (Update.MODIFY, dev.names.table_entry("I.fixed", {"hdr.probe.flags": 2}, "NoAction")),
            (Update.DELETE, dev.names.table_entry("I.fixed", {"hdr.probe.flags": 2})),
            (Update.MODIFY, dev.names.table_entry("I.fixed", default=True, action="I.mark",
                                                  flags=1, value=1))):
        with pytest.raises(grpc.RpcError) as excinfo:
            dev.client.write((kind, entity))
        assert batch_errors(excinfo.value)[0].canonical_code == \
            grpc.StatusCode.PERMISSION_DENIED.value[0], (kind, entity)
    assert len(_entries(dev, "I.fixed")) == 2


def test_wildcard_reads(device):
    dev = device
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1))
    dev.client.insert(dev.names.table_entry("I.acl", {"hdr.ethernet.etype": 1}, "I.drop",
                                            priority=3))
    dev.client.insert(dev.names.table_entry("I.acl", {"hdr.ethernet.etype": 2}, "I.drop",
                                            priority=4))
    everything = _entries(dev)
    by_table = {}
    for e in everything:
        by_table.setdefault(e.table_id, []).append(e)
    assert len(by_table[dev.names.table_id("I.l2")]) == 1
    assert len(by_table[dev.names.table_id("I.acl")]) == 2
    assert len(by_table[dev.names.table_id("I.fixed")]) == 2  # const entries included
    # Filters: priority, and one exact key.
    query = dev.names.table_entry("I.acl", priority=4)
    assert [e.table_entry.priority for e in dev.client.read(query)] == [4]
    one = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1})
    assert len(dev.client.read(one)) == 1
    none = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 2})
    assert dev.client.read(none) == []


def test_direct_counter_through_table_entry_and_direct_counter_entry(device):
    dev = device
    entity = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    entity.table_entry.counter_data.packet_count = 5
    entity.table_entry.counter_data.byte_count = 500
    dev.client.insert(entity)
    [e] = dev.switch.tables["I.l2"].entries()
    assert (e.packets, e.bytes) == (5, 500)
    e.packets, e.bytes = 7, 700  # as if the data plane had counted
    query = dev.names.table_entry("I.l2")
    query.table_entry.counter_data.SetInParent()
    [got] = dev.client.read(query)
    assert (got.table_entry.counter_data.packet_count,
            got.table_entry.counter_data.byte_count) == (7, 700)
    # Without counter_data in the query the counter is not reported.
    [plain] = dev.client.read(dev.names.table_entry("I.l2"))
    assert not plain.table_entry.HasField("counter_data")
    # DirectCounterEntry: modify, then read one and read all.
    dce = p4runtime_pb2.Entity()
    dce.direct_counter_entry.table_entry.CopyFrom(
        dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}).table_entry)
    dce.direct_counter_entry.data.packet_count = 11
    dce.direct_counter_entry.data.byte_count = 1100
    dev.client.modify(dce)
    [one] = dev.client.read(dce)
    assert one.direct_counter_entry.data.packet_count == 11
    every = p4runtime_pb2.Entity()
    every.direct_counter_entry.table_entry.table_id = dev.names.table_id("I.l2")
    [all_] = dev.client.read(every)
    assert all_.direct_counter_entry.data.byte_count == 1100
    # Modify without counter_data keeps the counter.
    dev.client.modify(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=2))
    [e] = dev.switch.tables["I.l2"].entries()
    assert (e.packets, e.bytes, e.params) == (11, 1100, [2])
    # A table without a direct counter.
    no_counter = p4runtime_pb2.Entity()
    no_counter.direct_counter_entry.table_entry.table_id = dev.names.table_id("I.tags")
    with pytest.raises(grpc.RpcError) as excinfo:
        dev.client.read(no_counter)
    assert _code(excinfo) == grpc.StatusCode.INVALID_ARGUMENT


def test_metadata_is_read_back(device):
    dev = device
    entity = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    entity.table_entry.controller_metadata = 0xC0FFEE
    entity.table_entry.metadata = b"note"
    dev.client.insert(entity)
    [got] = _entries(dev, "I.l2")
    assert (got.controller_metadata, got.metadata) == (0xC0FFEE, b"note")


def test_modify_with_counter_data_sets_the_counter(device):
    dev = device
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1))
    entity = dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=2)
    entity.table_entry.counter_data.packet_count = 3
    entity.table_entry.counter_data.byte_count = 4
    dev.client.modify(entity)
    [e] = dev.switch.tables["I.l2"].entries()
    assert (e.params, e.packets, e.bytes) == ([2], 3, 4)
