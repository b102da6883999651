"""TableEntry and DirectCounterEntry: validation and translation to the engine.

Checks and their order follow BMv2's DeviceMgr (table_insert, table_modify,
table_delete, validate_action); where BMv2 only reports a target failure
(UNKNOWN) the P4Runtime 1.4 spec's code is used instead.
"""

from p4.v1 import p4runtime_pb2

from . import bytestrings
from .device import Device, EntryMeta
from .matchkeys import build_key, fill_match
from .pipeline import Prefix, Scope, TableInfo, Unit, id_prefix
from .readsink import ReadSink
from .status import P4RTError, engine_call, invalid

Update = p4runtime_pb2.Update


def write(device: Device, kind: int, te: p4runtime_pb2.TableEntry) -> None:
    table = device.pipeline.table(te.table_id)
    if te.HasField("time_since_last_hit"):
        raise invalid("time_since_last_hit must not be set in a WriteRequest")
    if te.is_const:
        raise invalid("is_const must not be set in a WriteRequest")
    if kind == Update.INSERT:
        _insert(device, table, te)
    elif kind == Update.MODIFY:
        _modify(device, table, te)
    elif kind == Update.DELETE:
        _delete(device, table, te)
    else:
        raise invalid("update type is not set" if kind == Update.UNSPECIFIED
                      else "invalid update type")


def _insert(device, table, te):
    if te.is_default_action:
        raise invalid("cannot use INSERT for a default entry")
    if not te.HasField("action"):
        raise invalid("'action' field must be set")
    if table.is_const:
        raise P4RTError("PERMISSION_DENIED", f"table {table.name} is const: its entries cannot "
                        f"be inserted")
    if not table.fields:
        raise invalid(f"table {table.name} has no match key: set its default entry instead")
    key, priority = build_key(table, te)
    action, params = _action(device, table, te)
    packets, nbytes = _initial_counter(device, table, te)
    _check_ttl(table, te)
    engine = device.switch.tables[table.name]
    if engine.get(key, priority) is not None:
        raise P4RTError("ALREADY_EXISTS", "match entry exists, use MODIFY if you wish to change "
                        "the action")
    entry = device.entry_type(key=key, action=action, params=params, priority=priority)
    entry.packets, entry.bytes = packets, nbytes
    engine_call(engine.insert, entry)
    device.entry_meta[(table.id, key, priority)] = EntryMeta(
        te.controller_metadata, te.metadata, te.idle_timeout_ns)


def _modify(device, table, te):
    engine = device.switch.tables[table.name]
    if te.is_default_action:
        _modify_default(device, table, engine, te)
        return
    key, priority = build_key(table, te)
    if table.is_const and te.HasField("action"):
        raise P4RTError("PERMISSION_DENIED", f"table {table.name} is const: the action of an "
                        f"entry cannot change")
    if te.HasField("action"):
        action, params = _action(device, table, te)
    elif table.is_const:
        action, params = None, None  # only the direct counter may change
    else:
        raise invalid("'action' field must be set for non-default entries")
    counters = _counter_data(device, table, te) if te.HasField("counter_data") else None
    _check_ttl(table, te)
    old = engine.get(key, priority)
    if old is None:
        raise P4RTError("NOT_FOUND", "cannot find match entry")
    if table.is_const:
        if counters is not None:
            set_direct_counter(device, table, engine, old, counters)
        return
    entry = device.entry_type(key=key, action=action, params=params, priority=priority)
    engine_call(engine.modify, entry)  # the engine keeps the entry's direct counter
    if counters is not None:
        set_direct_counter(device, table, engine, engine.get(key, priority), counters)
    device.entry_meta[(table.id, key, priority)] = EntryMeta(
        te.controller_metadata, te.metadata, te.idle_timeout_ns)


def _modify_default(device, table, engine, te):
    if te.match:
        raise invalid("non-empty key for a default entry")
    if te.priority != 0:
        raise invalid("non-zero priority for a default entry")
    if te.HasField("action"):
        action, params = _action(device, table, te)
    else:
        _check_default_mutable(table)
    if te.HasField("counter_data"):
        raise P4RTError("UNIMPLEMENTED", "direct counters of default entries are not supported")
    _check_ttl(table, te)
    if te.idle_timeout_ns:
        raise invalid("default entries do not support idle timeout")
    if te.HasField("action"):
        engine_call(engine.set_default, action, params)
        device.default_meta[table.id] = EntryMeta(te.controller_metadata, te.metadata)
    else:
        engine_call(engine.reset_default)
        device.default_meta.pop(table.id, None)


def _delete(device, table, te):
    if te.is_default_action:
        raise invalid("cannot use DELETE for a default entry")
    if table.is_const:
        raise P4RTError("PERMISSION_DENIED", f"table {table.name} is const: its entries cannot "
                        f"be deleted")
    key, priority = build_key(table, te)
    engine = device.switch.tables[table.name]
    if engine.get(key, priority) is None:
        raise P4RTError("NOT_FOUND", "cannot find match entry")
    engine_call(engine.delete, key, priority)
    device.entry_meta.pop((table.id, key, priority), None)


def _check_default_mutable(table: TableInfo) -> None:
    if table.indirect:
        raise invalid(f"cannot set / reset the default action of indirect table {table.name}")
    if table.const_default_action_id:
        raise P4RTError("PERMISSION_DENIED", f"cannot set / reset the default action of table "
                        f"{table.name}, which has a const default action")


def _action(device, table: TableInfo, te) -> tuple[str, list[int]]:
    """BMv2's validate_action + construct_action_data; returns (engine action, params)."""
    if te.is_default_action:
        _check_default_mutable(table)
    which = te.action.WhichOneof("type")
    if table.indirect:
        raise P4RTError("UNIMPLEMENTED", f"table {table.name} uses an action profile, which "
                        f"this target does not support")
    if which != "action":
        raise invalid(f"cannot provide an indirect action for direct table {table.name}"
                      if which else "invalid table action type")
    action_id = te.action.action.action_id
    if id_prefix(action_id) != Prefix.ACTION or action_id not in device.pipeline.actions:
        raise invalid(f"Invalid P4 id {action_id:#x}: not an action")
    scope = table.actions.get(action_id)
    if scope is None:
        raise invalid(f"invalid action {device.pipeline.actions[action_id].name} for table "
                      f"{table.name}")
    if scope == Scope.TABLE_ONLY and te.is_default_action:
        raise P4RTError("PERMISSION_DENIED", "cannot use a TABLE_ONLY action as default action")
    if scope == Scope.DEFAULT_ONLY and not te.is_default_action:
        raise P4RTError("PERMISSION_DENIED", "cannot use a DEFAULT_ONLY action in a table entry")
    return action_args(device.pipeline.actions[action_id], te.action.action)


def action_args(info, action: p4runtime_pb2.Action) -> tuple[str, list[int]]:
    if len(action.params) != len(info.params):
        raise invalid(f"action {info.name}: unexpected number of action parameters "
                      f"({len(action.params)}, expected {len(info.params)})")
    values: list = [None] * len(info.params)
    for p in action.params:
        param = info.by_param_id.get(p.param_id)
        if param is None:
            raise invalid(f"action {info.name}: unknown action parameter id {p.param_id}")
        if values[param.position] is not None:
            raise invalid(f"action {info.name}: parameter {param.name} given twice")
        values[param.position] = bytestrings.decode(
            p.value, param.bitwidth, f"action {info.name} parameter {param.name}")
    return info.name, values


def _initial_counter(device, table, te) -> tuple[int, int]:
    if te.HasField("meter_config") or te.HasField("meter_counter_data"):
        raise invalid(f"table {table.name} has no direct meters")
    if not te.HasField("counter_data"):
        return 0, 0
    return _counter_data(device, table, te)


def _counter_data(device, table, te) -> tuple[int, int]:
    if not table.direct_counter_id:
        raise invalid(f"table {table.name} has no direct counters")
    unit = device.pipeline.direct_counters[table.direct_counter_id].unit
    return counter_values(unit, te.counter_data)


def counter_values(unit: int, data: p4runtime_pb2.CounterData) -> tuple[int, int]:
    if data.packet_count < 0 or data.byte_count < 0:
        raise invalid("negative counter value")
    packets = data.packet_count if unit in (Unit.PACKETS, Unit.BOTH) else 0
    nbytes = data.byte_count if unit in (Unit.BYTES, Unit.BOTH) else 0
    return packets, nbytes


def fill_counter_data(packets: int, nbytes: int, data) -> None:
    """Both counts whatever the declared unit, as BMv2 reads them: its counters count
    both; a write keeps only the declared unit's (counter_values)."""
    data.packet_count = packets
    data.byte_count = nbytes


def _check_ttl(table, te) -> None:
    if te.idle_timeout_ns < 0:
        raise invalid("idle_timeout_ns must not be negative")
    if te.idle_timeout_ns > 0 and not table.idle_timeout:
        raise invalid(f"idle_timeout_ns must be 0 for table {table.name}, which does not "
                      f"support idle timeout")


def set_direct_counter(device, table, engine, entry, counters) -> None:
    """Replace an entry's direct counter (the engine keeps it on the Entry)."""
    packets, nbytes = counters
    setter = getattr(engine, "set_counter", None)
    if setter is not None:
        engine_call(setter, entry.key, entry.priority, packets, nbytes)
    else:
        entry.packets, entry.bytes = packets, nbytes


# ---- reads ------------------------------------------------------------------------------------

def read(device: Device, te: p4runtime_pb2.TableEntry, out: ReadSink) -> None:
    pipeline = device.pipeline
    if te.table_id == 0:
        for table in pipeline.tables.values():
            _read_table(device, table, te, out)
    elif te.table_id in pipeline.absent_tables:
        return  # compiled away: no entries (BMv2 fails the read, a wildcard read too)
    else:
        _read_table(device, pipeline.table(te.table_id), te, out)


def _read_table(device, table: TableInfo, te, out) -> None:
    engine = device.switch.tables[table.name]
    if te.is_default_action:
        if te.HasField("time_since_last_hit"):
            raise invalid("default entries do not support entry ageing, do not set "
                          "'time_since_last_hit' in a ReadRequest")
        _default_entry(device, table, engine, out.add("table_entry"))
        return
    if te.HasField("time_since_last_hit") and not table.idle_timeout:
        raise invalid("do not set time_since_last_hit in a ReadRequest for a table that does not "
                      "support idle timeout")
    if te.match:
        key, priority = build_key(table, te)
        found = engine.get(key, priority)
        entries = [found] if found is not None else []
    else:
        entries = list(engine.entries())
    action_filter = te.action.action.action_id if te.action.HasField("action") else 0
    for entry in entries:
        if te.priority and not te.match and entry.priority != te.priority:
            continue
        if action_filter and device.pipeline.action_ids.get(entry.action) != action_filter:
            continue
        meta = device.entry_meta.get((table.id, entry.key, entry.priority), EntryMeta())
        if te.controller_metadata and meta.controller_metadata != te.controller_metadata:
            continue
        if te.metadata and meta.metadata != te.metadata:
            continue
        msg = out.add("table_entry")
        fill_entry(device, table, entry, msg)
        msg.controller_metadata = meta.controller_metadata
        msg.metadata = meta.metadata
        msg.idle_timeout_ns = meta.idle_timeout_ns
        if te.HasField("counter_data") and table.direct_counter_id:
            fill_counter_data(entry.packets, entry.bytes, msg.counter_data)
        if te.HasField("time_since_last_hit"):
            msg.time_since_last_hit.elapsed_ns = 0


def fill_entry(device, table: TableInfo, entry, msg: p4runtime_pb2.TableEntry) -> None:
    msg.table_id = table.id
    fill_match(table, entry.key, msg)
    if table.needs_priority:
        msg.priority = entry.priority
    fill_action(device, entry.action, entry.params, msg.action.action)
    msg.is_const = table.is_const


def fill_action(device, action_name: str, params: list[int], msg: p4runtime_pb2.Action) -> None:
    action_id = device.pipeline.action_ids.get(action_name)
    if action_id is None:
        raise P4RTError("INTERNAL", f"engine action {action_name} is not in the P4Info")
    info = device.pipeline.actions[action_id]
    msg.action_id = action_id
    for p in info.params:
        msg.params.add(param_id=p.id, value=bytestrings.encode(params[p.position]))


def _default_entry(device, table, engine, msg: p4runtime_pb2.TableEntry) -> None:
    msg.table_id = table.id
    msg.is_default_action = True
    action, params = engine.default
    if action in device.pipeline.action_ids:
        fill_action(device, action, params, msg.action.action)
    meta = device.default_meta.get(table.id, EntryMeta())
    msg.controller_metadata = meta.controller_metadata
    msg.metadata = meta.metadata


# ---- direct counters --------------------------------------------------------------------------

def _direct_target(device, dce: p4runtime_pb2.DirectCounterEntry):
    if not dce.HasField("table_entry"):
        raise invalid("missing table_entry field in DirectCounterEntry")
    te = dce.table_entry
    table = device.pipeline.table(te.table_id)
    if not table.direct_counter_id:
        raise invalid(f"table {table.name} has no direct counters")
    return table, te


def write_direct_counter(device: Device, kind: int, dce) -> None:
    table, te = _direct_target(device, dce)
    engine = device.switch.tables[table.name]
    entry = _find_one(device, table, engine, te)
    unit = device.pipeline.direct_counters[table.direct_counter_id].unit
    if kind == Update.MODIFY:
        if dce.HasField("data"):
            set_direct_counter(device, table, engine, entry, counter_values(unit, dce.data))
    elif kind == Update.DELETE:
        set_direct_counter(device, table, engine, entry, (0, 0))
    elif kind == Update.INSERT:
        raise invalid("INSERT update type not supported for counters")
    else:
        raise invalid("update type is not set" if kind == Update.UNSPECIFIED
                      else "invalid update type")


def read_direct_counter(device: Device, dce, out: ReadSink) -> None:
    if dce.HasField("table_entry") and dce.table_entry.table_id == 0:
        raise P4RTError("UNIMPLEMENTED", "reading all direct counters for ALL tables is not "
                        "supported")
    table, te = _direct_target(device, dce)
    engine = device.switch.tables[table.name]
    if te.match or te.is_default_action:
        entries = [_find_one(device, table, engine, te)]
    else:
        entries = list(engine.entries())
    for entry in entries:
        msg = out.add("direct_counter_entry")
        if te.match or te.is_default_action:
            msg.table_entry.CopyFrom(te)
        else:
            msg.table_entry.table_id = table.id
            fill_match(table, entry.key, msg.table_entry)
            if table.needs_priority:
                msg.table_entry.priority = entry.priority
        fill_counter_data(entry.packets, entry.bytes, msg.data)


def _find_one(device, table, engine, te):
    if te.is_default_action:
        raise P4RTError("UNIMPLEMENTED", "direct counters of default entries are not supported")
    key, priority = build_key(table, te)
    entry = engine.get(key, priority)
    if entry is None:
        raise invalid("cannot map table entry to a handle: no such entry")
    return entry

