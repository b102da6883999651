"""P4Runtime reads after data-plane traffic: softswitch answers as simple_switch_grpc does.

The same frames go through both targets (BMv2 through pcap-file ports), then the
same reads are made on both and compared.
"""

from pathlib import Path

import grpc
import pytest
from bmv2_grpc import GrpcSwitch, available
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from p4rt_build import Names
from p4rt_client import batch_errors
from test_p4rt_engine import MAC2, probe

from softswitch import Switch
from softswitch.native import enabled as native_enabled

BUILD = Path(__file__).resolve().parents[1] / "p4" / "build"
bmv2_only = pytest.mark.skipif(not available(), reason="simple_switch_grpc is not on PATH")


def _program(name: str):
    info = text_format.Parse((BUILD / f"{name}.p4info.txt").read_text(), p4info_pb2.P4Info())
    return info, (BUILD / f"{name}.json").read_bytes(), Names(info)


def _counts(client, names, counter, index):
    [got] = client.read(names.counter_entry(counter, index))
    return got.counter_entry.data.packet_count, got.counter_entry.data.byte_count


@pytest.mark.bmv2
@bmv2_only
def test_counter_reads_after_traffic_equal_bmv2(real_device, basic_program):
    frames = [probe(op=4), probe(op=4), probe(op=6) + b"extra"]
    reads = [("I.probe_ops", 4), ("I.probe_ops", 6), ("I.probe_ops", 7), ("I.port_rx", 1)]

    def configure(client, names):
        client.insert(names.table_entry("I.l2", {"hdr.ethernet.dst": MAC2}, "I.fwd", port=2))
        # a write of a packets-only counter keeps the packets only
        client.modify(names.counter_entry("I.probe_ops", 7, packets=5, nbytes=50))

    dev = real_device
    configure(dev.client, dev.names)
    for f in frames:
        dev.switch.process(1, f)
    ours = [_counts(dev.client, dev.names, c, i) for c, i in reads]
    with GrpcSwitch({1, 2}, [(1, f) for f in frames]) as bm:
        bm.client.set_pipeline(basic_program.p4info, basic_program.config)
        configure(bm.client, basic_program.names)
        assert len(bm.settle(expected=len(frames))[2]) == len(frames)
        theirs = [_counts(bm.client, basic_program.names, c, i) for c, i in reads]
    assert ours == theirs
    assert ours[0] == (2, 2 * len(frames[0]))  # bytes counted for a packets-only counter


# samename.p4: p4c emits I.set_b, I.out_and_exit, I.set_c and NoAction several times each
SAMENAME_FRAMES = [bytes([op, a, 0x33, 0x44]) + b"tail" for op, a in
                   ((8, 0x12), (9, 0x12), (0, 0x03), (6, 0x40), (7, 0x21))]


def _softswitch(serve, connect, info, config, native: bool | None = None):
    """An in-process softswitch behind its P4Runtime server, with the program pushed."""
    switch = Switch(device_id=1, cpu_port=255, native=native)
    address, _ = serve(switch)
    client = connect(address)
    client.arbitrate((0, 1))
    client.set_pipeline(info, config)
    return switch, client


def _samename_entries(client, names):
    by_op = lambda op, action, **kw: names.table_entry(  # noqa: E731
        "I.by_op", {"hdr.ctl.op": op}, action, **kw)
    client.insert(by_op(8, "I.set_b", v=0x42))
    client.insert(by_op(9, "I.out_and_exit", port=5))
    client.insert(by_op(6, "NoAction"))
    client.modify(names.table_entry("I.by_op", default=True, action="I.out_and_exit", port=6))


def test_p4runtime_action_ids_reach_the_table_copy(serve, connect):
    info, config, names = _program("samename")
    switch, client = _softswitch(serve, connect, info, config)
    _samename_entries(client, names)
    outs = [switch.process(1, f) for f in SAMENAME_FRAMES]
    assert switch.stats["errors"] == 0
    assert outs[0] == [(2, bytes([8, 0xAA, 0x42, 0x1F]) + b"tail")]  # set_b(0x42), by_a 0x1X
    assert outs[1] == [(5, SAMENAME_FRAMES[1])]  # out_and_exit(5): by_a never runs
    assert outs[2] == [(6, SAMENAME_FRAMES[2])]  # the default, out_and_exit(6)


@pytest.mark.bmv2
@bmv2_only
def test_same_named_actions_over_p4runtime_equal_bmv2(serve, connect):
    info, config, names = _program("samename")
    switch, client = _softswitch(serve, connect, info, config)
    _samename_entries(client, names)
    ours: dict[int, list[bytes]] = {}
    for f in SAMENAME_FRAMES:
        for port, out in switch.process(1, f):
            ours.setdefault(port, []).append(out)
    with GrpcSwitch({1, 2, 3, 4, 5, 6}, [(1, f) for f in SAMENAME_FRAMES]) as bm:
        bm.client.set_pipeline(info, config)
        _samename_entries(bm.client, names)
        theirs = {p: v for p, v in bm.settle(expected=len(SAMENAME_FRAMES)).items() if v}
    assert ours == theirs


# keys.p4: an error-typed key (0 bits in the P4Info, 32 in the JSON) and keys masked by
# an expression (the field's width in the P4Info, a mask in the JSON)
def _keys_frame(addr: int, flags: int) -> bytes:
    return b"\x01" + addr.to_bytes(6, "big") + bytes([flags, 0])


KEYS_FRAMES = [_keys_frame(0x020000000005, 0x30), _keys_frame(0x000000000005, 0x3F),
               _keys_frame(0x010000000005, 0x20), _keys_frame(0x000000000005, 0x2A)]


def _keys_pipeline():
    info, config, names = _program("keys")
    # an action in the P4Info that the JSON lacks: BMv2 loads such a pipeline
    extra = info.actions.add()
    extra.preamble.id = 0x01FFFFF0
    extra.preamble.name = "I.compiled_away"
    return info, config, names


def _keys_entries(client, names):
    masked = lambda addr, flags, prio, v: names.table_entry(  # noqa: E731
        "I.by_masked", {"addr_low": addr, "flags_high": flags}, "I.mark", priority=prio, v=v)
    client.insert(masked(0x020000000005, (0x30, 0xFF), 1, 4))  # bit 41 is outside the mask
    client.insert(masked(0x000000000005, (0x20, 0xF0), 2, 8))


def test_p4info_wider_than_the_json_loads_and_masks_keys(serve, connect):
    info, config, names = _keys_pipeline()
    switch, client = _softswitch(serve, connect, info, config)
    _keys_entries(client, names)
    res = [switch.process(1, f)[0][1][-1] for f in KEYS_FRAMES]
    # the first entry matches the masked address 5; flags & 0xf0 == 0x30 for it
    assert res == [4, 4, 0, 8]


@pytest.mark.bmv2
@bmv2_only
def test_p4info_wider_than_the_json_equal_bmv2(serve, connect):
    info, config, names = _keys_pipeline()
    switch, client = _softswitch(serve, connect, info, config)
    _keys_entries(client, names)
    ours = [out for f in KEYS_FRAMES for _, out in switch.process(1, f)]
    with GrpcSwitch({1, 2}, [(1, f) for f in KEYS_FRAMES]) as bm:
        bm.client.set_pipeline(info, config)
        _keys_entries(bm.client, names)
        theirs = bm.settle(expected=len(KEYS_FRAMES))[2]
    assert ours == theirs


# deadtable.p4: I.never is in the P4Info but not in the JSON (p4c compiled it away: the
# program never applies it)
DEAD_FRAMES = [bytes([op, 0, 0x12, 0x34]) + b"tail" for op in (1, 2, 3)]


def _deadtable_entries(client, names):
    client.insert(names.table_entry("I.live", {"h.ctl.op": 2}, "I.set_out", v=0x42))


@pytest.mark.parametrize("native", [True, False])
def test_a_table_compiled_away_loads_and_takes_no_entries(serve, connect, native):
    if native and not native_enabled():
        pytest.skip("the native tier is off or llvmlite is missing")
    info, config, names = _program("deadtable")
    switch, client = _softswitch(serve, connect, info, config, native=native)
    assert switch.tier == ("native" if native else "python")
    _deadtable_entries(client, names)
    assert client.read(names.table_entry("I.never")) == []
    wildcard = p4runtime_pb2.Entity()
    wildcard.table_entry.SetInParent()
    assert [e.table_entry.table_id for e in client.read(wildcard)] == [names.table_id("I.live")]
    with pytest.raises(grpc.RpcError) as excinfo:
        client.insert(names.table_entry("I.never", {"h.ctl.op": 1}, "I.set_out", v=1))
    [error] = batch_errors(excinfo.value)
    assert error.canonical_code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    outs = [switch.process(1, f) for f in DEAD_FRAMES]
    assert outs == [[(1, f[:1] + bytes([0x42 if f[0] == 2 else 0]) + f[2:])]
                    for f in DEAD_FRAMES]


@pytest.mark.bmv2
@bmv2_only
@pytest.mark.parametrize("native", [True, False])
def test_a_table_compiled_away_equal_bmv2(serve, connect, native):
    if native and not native_enabled():
        pytest.skip("the native tier is off or llvmlite is missing")
    info, config, names = _program("deadtable")
    switch, client = _softswitch(serve, connect, info, config, native=native)
    _deadtable_entries(client, names)
    ours = [out for f in DEAD_FRAMES for _, out in switch.process(1, f)]
    with GrpcSwitch({1}, [(1, f) for f in DEAD_FRAMES]) as bm:
        bm.client.set_pipeline(info, config)  # BMv2 loads it too
        _deadtable_entries(bm.client, names)
        theirs = bm.settle(expected=len(DEAD_FRAMES))[1]
    assert ours == theirs
