"""One fixed sequence of P4Runtime requests, good and bad, with every outcome recorded.

Run against simple_switch_grpc and against softswitch, the two outcome lists
must agree (tests/softswitch/test_p4rt_bmv2.py): same status per request, same
per-update codes in a failed batch, same entities read back.
"""

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2
from p4rt_build import clone_session, mc_group
from p4rt_client import Client, batch_errors

Update = p4runtime_pb2.Update
Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
MAC1, MAC2 = 0x020000000001, 0x020000000002


def _code_name(code: int) -> str:
    return code_pb2.Code.Name(code)


def outcome(call) -> tuple:
    """("OK", result) or (status name,) or ("UNKNOWN", per-update codes) for a batch."""
    try:
        result = call()
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNKNOWN:
            try:
                return ("UNKNOWN", tuple(_code_name(e.canonical_code)
                                         for e in batch_errors(exc)))
            except AssertionError:
                return ("UNKNOWN",)
        return (exc.code().name,)
    return ("OK", result)


def canonical(entities) -> tuple:
    """Entities as sorted serialized bytes (order of a wildcard read is not specified)."""
    return tuple(sorted(e.SerializeToString(deterministic=True) for e in entities))


def run(address: str, program) -> list[tuple[str, tuple]]:
    n = program.names
    results: list[tuple[str, tuple]] = []
    primary = Client(address, device_id=1)
    backup = Client(address, device_id=1)
    try:
        def step(name, call):
            results.append((name, outcome(call)))

        def arbitration_status(reply):
            return (reply.arbitration.status.code, reply.arbitration.election_id.low)

        step("arbitrate primary", lambda: arbitration_status(primary.arbitrate((0, 10))))
        step("arbitrate backup", lambda: arbitration_status(backup.arbitrate((0, 5))))
        l2 = lambda mac, **kw: n.table_entry("I.l2", {"hdr.ethernet.dst": mac}, **kw)  # noqa: E731
        step("write before pipeline", lambda: primary.insert(l2(MAC2, action="I.fwd", port=2)))
        step("read before pipeline", lambda: primary.read(l2(MAC2)))
        step("backup sets pipeline", lambda: backup.set_pipeline(program.p4info, program.config))
        step("set pipeline", lambda: primary.set_pipeline(program.p4info, program.config,
                                                          cookie=5) and None)
        step("get pipeline cookie", lambda: primary.get_pipeline(Get.COOKIE_ONLY).cookie.cookie)
        step("insert l2", lambda: primary.insert(l2(MAC2, action="I.fwd", port=2)))
        step("backup insert", lambda: backup.insert(l2(MAC1, action="I.fwd", port=1)))
        step("duplicate l2", lambda: primary.insert(l2(MAC2, action="I.fwd", port=3)))
        step("modify missing", lambda: primary.modify(l2(MAC1, action="I.fwd", port=3)))
        step("delete missing", lambda: primary.delete(l2(MAC1)))
        step("param too wide", lambda: primary.insert(l2(MAC1, action="I.fwd", port=512)))
        step("key too wide", lambda: primary.insert(l2(1 << 48, action="I.fwd", port=1)))
        step("missing param", lambda: primary.insert(l2(MAC1, action="I.fwd")))
        step("action not in table",
             lambda: primary.insert(l2(MAC1, action="I.set_tag", tag=1)))
        step("priority on exact", lambda: primary.insert(
            n.table_entry("I.l2", {"hdr.ethernet.dst": 5}, "I.fwd", priority=2, port=1)))
        step("missing exact field", lambda: primary.insert(
            n.table_entry("I.acl", {}, "I.drop", priority=1)))
        acl = lambda match, prio, **kw: n.table_entry(  # noqa: E731
            "I.acl", {"hdr.ethernet.etype": 0x88B5, **match}, priority=prio, **kw)
        step("zero priority ternary", lambda: primary.insert(acl({}, 0, action="I.drop")))
        step("ternary zero mask", lambda: primary.insert(
            acl({"hdr.ethernet.src": (0, 0)}, 1, action="I.drop")))
        step("ternary value outside mask", lambda: primary.insert(
            acl({"hdr.ethernet.src": (3, 1)}, 1, action="I.drop")))
        step("range low above high", lambda: primary.insert(
            acl({"hdr.probe.vlan": (9, 3)}, 1, action="I.drop")))
        step("insert acl", lambda: primary.insert(
            acl({"hdr.ethernet.src": (MAC1, 0xFFFFFFFFFFFF), "hdr.probe.vlan": (1, 9),
                 "hdr.probe.op": 7}, 10, action="I.mark", flags=2, value=0x22)))
        step("insert acl low", lambda: primary.insert(acl({}, 1, action="I.mark", flags=1,
                                                          value=0x11)))
        tags = lambda value, plen, **kw: n.table_entry(  # noqa: E731
            "I.tags", {"hdr.probe.value": (value, plen)}, **kw)
        step("lpm bits beyond prefix", lambda: primary.insert(
            tags(0x0A000001, 8, action="I.set_tag", tag=1)))
        step("lpm zero prefix", lambda: primary.insert(tags(0, 0, action="I.set_tag", tag=1)))
        step("insert lpm", lambda: primary.insert(tags(0x0A000000, 8, action="I.set_tag", tag=1)))
        step("default-only in entry", lambda: primary.insert(
            tags(0x0B000000, 8, action="I.miss_tag")))
        step("table-only as default", lambda: primary.modify(
            n.table_entry("I.tags", default=True, action="NoAction")))
        step("const default", lambda: primary.modify(
            n.table_entry("I.fixed", default=True, action="I.mark", flags=1, value=1)))
        step("insert default", lambda: primary.insert(
            n.table_entry("I.l2", default=True, action="I.fwd", port=1)))
        step("modify default", lambda: primary.modify(
            n.table_entry("I.l2", default=True, action="I.fwd", port=4)))
        step("read default", lambda: canonical(primary.read(n.table_entry("I.l2", default=True))))
        step("unknown table", lambda: primary.insert(_retable(l2(MAC1, action="I.fwd", port=1))))
        step("batch", lambda: primary.write(
            (Update.INSERT, l2(7, action="I.fwd", port=1)),
            (Update.INSERT, l2(8, action="I.fwd", port=999)),
            (Update.DELETE, l2(9)),
            (Update.INSERT, l2(10, action="I.fwd", port=3))))
        step("read all tables", lambda: canonical(primary.read(_all_tables())))
        step("read one entry", lambda: canonical(primary.read(l2(MAC2))))
        step("read absent entry", lambda: canonical(primary.read(l2(0x0203))))
        with_counters = l2(MAC2)
        with_counters.table_entry.counter_data.SetInParent()
        step("read with counter data", lambda: canonical(primary.read(with_counters)))
        step("read const table", lambda: canonical(primary.read(n.table_entry("I.fixed"))))
        step("const table insert", lambda: primary.insert(
            n.table_entry("I.fixed", {"hdr.probe.flags": 3}, "NoAction")))
        step("const table delete", lambda: primary.delete(
            n.table_entry("I.fixed", {"hdr.probe.flags": 2})))
        step("const table modify", lambda: primary.modify(
            n.table_entry("I.fixed", {"hdr.probe.flags": 2}, "NoAction")))
        step("read const default", lambda: canonical(primary.read(
            n.table_entry("I.fixed", default=True))))
        is_const = l2(0x0204, action="I.fwd", port=1)
        is_const.table_entry.is_const = True
        step("write is_const", lambda: primary.insert(is_const))
        step("delete is_const", lambda: primary.delete(l2(0x0204)))
        dce = p4runtime_pb2.Entity()
        dce.direct_counter_entry.table_entry.CopyFrom(l2(MAC2).table_entry)
        dce.direct_counter_entry.data.packet_count = 3
        dce.direct_counter_entry.data.byte_count = 300
        step("direct counter modify", lambda: primary.modify(dce))
        step("direct counter read", lambda: canonical(primary.read(dce)))
        all_dce = p4runtime_pb2.Entity()
        all_dce.direct_counter_entry.table_entry.table_id = n.table_id("I.l2")
        step("direct counter read table", lambda: canonical(primary.read(all_dce)))
        no_dce = p4runtime_pb2.Entity()
        no_dce.direct_counter_entry.table_entry.table_id = n.table_id("I.tags")
        step("direct counter absent", lambda: primary.read(no_dce))
        missing_dce = p4runtime_pb2.Entity()
        missing_dce.direct_counter_entry.table_entry.CopyFrom(l2(0x0999).table_entry)
        step("direct counter missing entry", lambda: primary.read(missing_dce))
        step("counter read out of range", lambda: primary.read(n.counter_entry("I.port_rx", 99)))
        step("counter write out of range", lambda: primary.modify(
            n.counter_entry("I.port_rx", 99, 1, 1)))
        step("counter read every counter", lambda: len(primary.read(n.counter_entry(""))))
        meters = p4runtime_pb2.Entity()
        meters.meter_entry.SetInParent()
        step("meter wildcard read", lambda: canonical(primary.read(meters)))
        step("unset entity", lambda: primary.write((Update.INSERT, p4runtime_pb2.Entity())))
        other_device = Client(address, device_id=9)
        step("other device read", lambda: other_device.read(l2(MAC2)))
        other_device.close()
        step("counter modify", lambda: primary.modify(
            n.counter_entry("I.port_rx", 3, packets=5, nbytes=50)))
        step("counter read", lambda: canonical(primary.read(n.counter_entry("I.port_rx", 3))))
        step("counter read all", lambda: len(primary.read(n.counter_entry("I.port_rx"))))
        step("counter insert", lambda: primary.insert(n.counter_entry("I.port_rx", 3, 1, 1)))
        step("counter no index write", lambda: primary.modify(
            n.counter_entry("I.port_rx", None, 1, 1)))
        step("counter negative index", lambda: primary.modify(
            n.counter_entry("I.port_rx", -1, 1, 1)))
        step("mc insert", lambda: primary.insert(mc_group(3, [(1, 0), (2, 0), (2, 1)])))
        step("mc duplicate", lambda: primary.insert(mc_group(3, [(1, 0)])))
        step("mc modify missing", lambda: primary.modify(mc_group(4, [(1, 0)])))
        step("mc delete missing", lambda: primary.delete(mc_group(4, [])))
        step("mc id zero", lambda: primary.insert(mc_group(0, [(1, 0)])))
        step("mc id too high", lambda: primary.insert(mc_group(1 << 15, [(1, 0)])))
        step("mc duplicate replica", lambda: primary.insert(mc_group(5, [(1, 0), (1, 0)])))
        step("mc read", lambda: canonical(primary.read(mc_group(0, []))))
        step("mc read missing", lambda: primary.read(mc_group(9, [])))
        step("clone insert", lambda: primary.insert(clone_session(5, [(3, 1)])))
        step("clone truncating", lambda: primary.insert(clone_session(9, [(3, 1)], length=64)))
        step("clone duplicate", lambda: primary.insert(clone_session(5, [(3, 1)])))
        step("clone modify missing", lambda: primary.modify(clone_session(6, [(3, 1)])))
        step("clone id zero", lambda: primary.insert(clone_session(0, [(3, 1)])))
        step("clone cos", lambda: primary.insert(clone_session(7, [(3, 1)], cos=1)))
        step("clone read", lambda: canonical(primary.read(clone_session(0, []))))
        step("clone read missing", lambda: primary.read(clone_session(8, [])))
        step("mc delete", lambda: primary.delete(mc_group(3, [])))
        ids = {f: n.metadata_id("packet_out", f) for f in ("egress_port", "tag")}
        frame = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + bytes(46)

        def cpu_loop():
            # A packet-out to the CPU port comes straight back as a packet-in whose first
            # four bytes are read as the packet_in header.
            primary.packet_out(frame, {ids["egress_port"]: b"\x00\xff", ids["tag"]: b"\x07"})
            msg = primary.next_message("packet", timeout=10)
            return None if msg is None else msg.SerializeToString(deterministic=True)

        step("packet-out to cpu", cpu_loop)
        step("packet-out unknown metadata", lambda: _stream_error(primary, frame))
        dup = Client(address, device_id=1)
        step("duplicate election id", lambda: (dup.arbitrate((0, 5), timeout=5),
                                               dup.stream_error.code().name))
        dup.close()
        step("verify", lambda: primary.set_pipeline(
            program.p4info, program.config, action=Set.VERIFY) and None)
        step("verify and save", lambda: primary.set_pipeline(
            program.p4info, program.config, action=Set.VERIFY_AND_SAVE) and None)
        step("read after save", lambda: len(primary.read(l2(MAC2))))
        step("commit", lambda: primary.set_pipeline(program.p4info, b"",
                                                     action=Set.COMMIT) and None)
        step("read after commit", lambda: canonical(primary.read(_all_tables())))
        step("primary leaves", lambda: primary.close())
        step("backup promoted", lambda: arbitration_status(backup.next_message("arbitration")))
        step("promoted writes", lambda: backup.insert(l2(MAC1, action="I.fwd", port=1)))
    finally:
        primary.close()
        backup.close()
    return results


def _stream_error(client, frame):
    client.packet_out(frame, {99: b"\x01"})
    msg = client.next_message("error", timeout=1)
    return None if msg is None else (_code_name(msg.error.canonical_code),
                                     msg.error.packet_out.packet_out.payload == frame)


def _retable(entity):
    entity.table_entry.table_id = 0x02FFFFFF
    return entity


def _all_tables():
    entity = p4runtime_pb2.Entity()
    entity.table_entry.SetInParent()
    return entity
