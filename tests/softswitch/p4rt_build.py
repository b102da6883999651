"""Build P4Runtime entities by P4Info names (tests only; ints are encoded canonically)."""

from p4.v1 import p4runtime_pb2


def enc(value) -> bytes:
    if isinstance(value, bytes):
        return value
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


class Names:
    def __init__(self, p4info):
        self.info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}
        self.registers = {r.preamble.name: r for r in p4info.registers}
        self.headers = {h.preamble.name: h for h in p4info.controller_packet_metadata}

    def table_id(self, name: str) -> int:
        return self.tables[name].preamble.id

    def action_id(self, name: str) -> int:
        return self.actions[name].preamble.id

    def field_id(self, table: str, field: str) -> int:
        return next(f.id for f in self.tables[table].match_fields if f.name == field)

    def action(self, name: str, **params) -> p4runtime_pb2.Action:
        a = self.actions[name]
        msg = p4runtime_pb2.Action(action_id=a.preamble.id)
        for p in a.params:
            if p.name in params:
                msg.params.add(param_id=p.id, value=enc(params[p.name]))
        return msg

    def table_entry(self, table: str, match: dict | None = None, action: str | None = None,
                    priority: int = 0, default: bool = False, **params) -> p4runtime_pb2.Entity:
        t = self.tables[table]
        entity = p4runtime_pb2.Entity()
        te = entity.table_entry
        te.table_id = t.preamble.id
        te.priority = priority
        te.is_default_action = default
        kinds = {f.name: f for f in t.match_fields}
        for name, value in (match or {}).items():
            f = kinds[name]
            fm = te.match.add(field_id=f.id)
            kind = p4runtime_pb2_kind(f.match_type)
            if kind == "exact":
                fm.exact.value = enc(value)
            elif kind == "lpm":
                fm.lpm.value, fm.lpm.prefix_len = enc(value[0]), value[1]
            elif kind == "ternary":
                fm.ternary.value, fm.ternary.mask = enc(value[0]), enc(value[1])
            elif kind == "range":
                fm.range.low, fm.range.high = enc(value[0]), enc(value[1])
            else:
                fm.optional.value = enc(value)
        if action is not None:
            te.action.action.CopyFrom(self.action(action, **params))
        return entity

    def counter_entry(self, name: str, index: int | None = None, packets=None, nbytes=None):
        entity = p4runtime_pb2.Entity()
        ce = entity.counter_entry
        ce.counter_id = self.counters[name].preamble.id if name else 0
        if index is not None:
            ce.index.index = index
        if packets is not None or nbytes is not None:
            ce.data.packet_count = packets or 0
            ce.data.byte_count = nbytes or 0
        return entity

    def register_entry(self, name: str, index: int | None = None, value=None):
        entity = p4runtime_pb2.Entity()
        re = entity.register_entry
        re.register_id = self.registers[name].preamble.id if name else 0
        if index is not None:
            re.index.index = index
        if value is not None:
            re.data.bitstring = enc(value)
        return entity

    def metadata_id(self, header: str, field: str) -> int:
        return next(m.id for m in self.headers[header].metadata if m.name == field)


def p4runtime_pb2_kind(match_type: int) -> str:
    return {2: "exact", 3: "lpm", 4: "ternary", 5: "range", 6: "optional"}[match_type]


def mc_group(gid: int, replicas: list[tuple[int, int]], metadata: bytes = b""):
    entity = p4runtime_pb2.Entity()
    g = entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = gid
    g.metadata = metadata
    for port, rid in replicas:
        g.replicas.add(egress_port=port, instance=rid)
    return entity


def clone_session(sid: int, replicas: list[tuple[int, int]], length: int = 0, cos: int = 0):
    entity = p4runtime_pb2.Entity()
    s = entity.packet_replication_engine_entry.clone_session_entry
    s.session_id, s.packet_length_bytes, s.class_of_service = sid, length, cos
    for port, rid in replicas:
        s.replicas.add(egress_port=port, instance=rid)
    return entity
