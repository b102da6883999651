"""P4Runtime reads after data-plane traffic: softswitch answers as simple_switch_grpc does.

The same frames go through both targets (BMv2 through pcap-file ports), then the
same reads are made on both and compared.
"""

import pytest
from bmv2_grpc import GrpcSwitch, available
from test_p4rt_engine import MAC2, probe

pytestmark = [pytest.mark.bmv2,
              pytest.mark.skipif(not available(), reason="simple_switch_grpc is not on PATH")]


def _counts(client, names, counter, index):
    [got] = client.read(names.counter_entry(counter, index))
    return got.counter_entry.data.packet_count, got.counter_entry.data.byte_count


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
