"""MulticastGroupEntry and CloneSessionEntry (the packet replication engine).

Validation follows BMv2's PreMcMgr / PreCloneMgr: group and session ids in
1..32767, every replica names a port, no replica twice, class of service 0.
"""

from p4.v1 import p4runtime_pb2

from .device import Device
from .readsink import ReadSink
from .status import P4RTError, engine_call, invalid

Update = p4runtime_pb2.Update
FIRST_RESERVED_ID = 1 << 15  # BMv2 keeps ids from 2^15 up for clone sessions


def write(device: Device, kind: int, pre: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
    which = pre.WhichOneof("type")
    if which == "multicast_group_entry":
        _write_group(device, kind, pre.multicast_group_entry)
    elif which == "clone_session_entry":
        _write_session(device, kind, pre.clone_session_entry)
    else:
        raise invalid("invalid packet replication engine entry")


def read(device: Device, pre: p4runtime_pb2.PacketReplicationEngineEntry, out: ReadSink) -> None:
    which = pre.WhichOneof("type")
    if which == "multicast_group_entry":
        _read_groups(device, pre.multicast_group_entry, out)
    elif which == "clone_session_entry":
        _read_sessions(device, pre.clone_session_entry, out)
    else:
        raise invalid("invalid packet replication engine entry")


def _replicas(replicas) -> tuple[list[tuple[int, int]], dict]:
    """[(egress port, instance)] and, per replica given as `port` bytes, their length."""
    out, nbytes, seen = [], {}, set()
    for r in replicas:
        kind = r.WhichOneof("port_kind")
        if kind == "egress_port":
            port = r.egress_port
        elif kind == "port":
            if not r.port:
                raise invalid("replica port must not be the empty string")
            if len(r.port) > 4:
                raise P4RTError("UNIMPLEMENTED", f"replica port of {len(r.port)} bytes, only 4 "
                                f"bytes are supported")
            port = int.from_bytes(r.port, "big")
        else:
            raise invalid("missing port in replica")
        item = (port, r.instance)
        if item in seen:
            raise invalid(f"duplicate replica (port {port}, instance {r.instance})")
        seen.add(item)
        out.append(item)
        if kind == "port":
            nbytes[item] = len(r.port)
    return out, nbytes


def _fill_replicas(replicas, nbytes: dict, msg) -> None:
    for port, rid in replicas:
        r = msg.replicas.add(instance=rid)
        n = nbytes.get((port, rid))
        if n:
            r.port = port.to_bytes(n, "big")
        else:
            r.egress_port = port


def _write_group(device, kind, entry: p4runtime_pb2.MulticastGroupEntry) -> None:
    gid = entry.multicast_group_id
    if gid == 0:
        raise invalid("0 is not a valid multicast group id")
    if gid >= FIRST_RESERVED_ID:
        raise P4RTError("OUT_OF_RANGE", f"multicast group id {gid} is too high "
                        f"(max {FIRST_RESERVED_ID - 1})")
    pre = device.switch.pre
    exists = gid in pre.groups
    if kind == Update.INSERT:
        replicas, nbytes = _replicas(entry.replicas)
        if exists:
            raise P4RTError("ALREADY_EXISTS", f"multicast group {gid} already exists")
        engine_call(pre.create, gid, replicas)
    elif kind == Update.MODIFY:
        replicas, nbytes = _replicas(entry.replicas)
        if not exists:
            raise P4RTError("NOT_FOUND", f"multicast group {gid} does not exist")
        engine_call(pre.modify, gid, replicas)
    elif kind == Update.DELETE:
        if not exists:
            raise P4RTError("NOT_FOUND", f"multicast group {gid} does not exist")
        engine_call(pre.delete, gid)
        device.replica_bytes.pop(("mc", gid), None)
        device.mc_metadata.pop(gid, None)
        return
    else:
        raise invalid("update type is not set" if kind == Update.UNSPECIFIED
                      else "invalid update type")
    device.replica_bytes[("mc", gid)] = nbytes
    device.mc_metadata[gid] = entry.metadata


def _read_groups(device, entry, out) -> None:
    gid = entry.multicast_group_id
    if gid >= FIRST_RESERVED_ID:
        raise P4RTError("OUT_OF_RANGE", f"multicast group id {gid} is too high")
    groups = device.switch.pre.groups
    if gid == 0:
        ids = sorted(g for g in groups if g < FIRST_RESERVED_ID)
    elif gid in groups:
        ids = [gid]
    else:
        raise P4RTError("NOT_FOUND", f"multicast group {gid} does not exist")
    for g in ids:
        group = out.add("packet_replication_engine_entry").multicast_group_entry
        group.multicast_group_id = g
        _fill_replicas(groups[g], device.replica_bytes.get(("mc", g), {}), group)
        group.metadata = device.mc_metadata.get(g, b"")


def _write_session(device, kind, entry: p4runtime_pb2.CloneSessionEntry) -> None:
    sid = entry.session_id
    if sid == 0:
        raise invalid("0 is not a valid clone session id")
    if sid >= FIRST_RESERVED_ID:
        raise invalid(f"clone session id {sid} out of range (1..{FIRST_RESERVED_ID - 1})")
    clones = device.switch.clones
    exists = clones.get(sid) is not None
    if kind in (Update.INSERT, Update.MODIFY):
        replicas, nbytes = _replicas(entry.replicas)
        if entry.packet_length_bytes < 0:
            raise invalid("packet_length_bytes must not be negative")
        if entry.packet_length_bytes > 0:
            raise P4RTError("UNIMPLEMENTED", "truncating clone sessions (packet_length_bytes) "
                            "are not supported, as in simple_switch_grpc")
        if entry.class_of_service != 0:
            raise P4RTError("UNIMPLEMENTED", "class of service for clone sessions is not "
                            "supported")
        if kind == Update.INSERT and exists:
            raise P4RTError("ALREADY_EXISTS", f"clone session {sid} already exists")
        if kind == Update.MODIFY and not exists:
            raise P4RTError("NOT_FOUND", f"clone session {sid} does not exist")
        engine_call(clones.set, sid, replicas, entry.class_of_service, entry.packet_length_bytes)
        device.replica_bytes[("clone", sid)] = nbytes
    elif kind == Update.DELETE:
        if not exists:
            raise P4RTError("NOT_FOUND", f"clone session {sid} does not exist")
        engine_call(clones.delete, sid)
        device.replica_bytes.pop(("clone", sid), None)
    else:
        raise invalid("update type is not set" if kind == Update.UNSPECIFIED
                      else "invalid update type")


def _read_sessions(device, entry, out) -> None:
    sid = entry.session_id
    sessions = device.switch.clones.sessions
    if sid == 0:
        ids = sorted(sessions)
    elif sid in sessions:
        ids = [sid]
    else:
        raise P4RTError("NOT_FOUND", f"clone session {sid} does not exist")
    for s in ids:
        config = sessions[s]
        session = out.add("packet_replication_engine_entry").clone_session_entry
        session.session_id = s
        session.class_of_service = config.get("class_of_service", 0)
        session.packet_length_bytes = config.get("packet_length_bytes", 0)
        _fill_replicas(config["replicas"], device.replica_bytes.get(("clone", s), {}), session)
