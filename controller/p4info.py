"""P4Info lookups and the conversion of name-based entities to P4Runtime protos and back.

Values travel as canonical binary strings (P4Runtime 1.4: big-endian, no leading zero bytes,
at least one byte); reads are decoded to integers, so any valid encoding compares equal.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.entities import Exact, Lpm, MulticastGroupEntry, TableEntry, Ternary


class P4InfoError(ValueError):
    """A name the P4Info does not have, or a value that does not fit its field."""


def encode(value: int, bitwidth: int, what: str) -> bytes:
    if not isinstance(value, int) or value < 0 or value >= 1 << bitwidth:
        raise P4InfoError(f"{what}: value {value!r} does not fit bit<{bitwidth}>")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


@dataclass(frozen=True)
class _Field:
    id: int
    name: str
    bitwidth: int
    match_type: int = 0


class P4Info:
    """Name <-> id maps of one P4Info message."""

    def __init__(self, msg: p4info_pb2.P4Info):
        self.msg = msg
        self.tables = {t.preamble.name: t for t in msg.tables}
        self.tables_by_id = {t.preamble.id: t for t in msg.tables}
        self.actions = {a.preamble.name: a for a in msg.actions}
        self.actions_by_id = {a.preamble.id: a for a in msg.actions}
        self.counters = {c.preamble.name: c for c in msg.counters}
        self.counters_by_id = {c.preamble.id: c for c in msg.counters}
        self._canonical: dict = {}      # entity -> its canonical form (a sync recomputes many)

    @classmethod
    def from_text(cls, text: str) -> P4Info:
        msg = p4info_pb2.P4Info()
        try:
            text_format.Merge(text, msg)
        except text_format.ParseError as e:
            raise P4InfoError(f"not a P4Info in text format: {e}") from None
        return cls(msg)

    @classmethod
    def load(cls, path: str) -> P4Info:
        with open(path) as f:
            try:
                return cls.from_text(f.read())
            except P4InfoError as e:
                raise P4InfoError(f"{path}: {e}") from None

    def table(self, name: str):
        try:
            return self.tables[name]
        except KeyError:
            raise P4InfoError(f"the P4Info has no table {name!r} (tables: "
                              f"{', '.join(sorted(self.tables))})") from None

    def action(self, name: str):
        try:
            return self.actions[name]
        except KeyError:
            raise P4InfoError(f"the P4Info has no action {name!r}") from None

    def counter(self, name: str):
        try:
            return self.counters[name]
        except KeyError:
            raise P4InfoError(f"the P4Info has no counter {name!r} (counters: "
                              f"{', '.join(sorted(self.counters))})") from None

    def has_table(self, name: str) -> bool:
        return name in self.tables

    def _match_field(self, table, name: str) -> _Field:
        for mf in table.match_fields:
            if mf.name == name:
                return _Field(mf.id, mf.name, mf.bitwidth, mf.match_type)
        # The name of standard_metadata inside a control is the program's choice
        # ("standard_metadata.egress_port" may be "sm.egress_port"): accept a field whose
        # last component is the same, when it is the only one.
        last = name.rsplit(".", 1)[-1]
        same = [mf for mf in table.match_fields if mf.name.rsplit(".", 1)[-1] == last]
        if len(same) == 1 and name.startswith("standard_metadata."):
            mf = same[0]
            return _Field(mf.id, mf.name, mf.bitwidth, mf.match_type)
        raise P4InfoError(f"table {table.preamble.name} has no match field {name!r} (fields: "
                          f"{', '.join(mf.name for mf in table.match_fields)})")

    def _param(self, action, name: str) -> _Field:
        for p in action.params:
            if p.name == name:
                return _Field(p.id, p.name, p.bitwidth)
        raise P4InfoError(f"action {action.preamble.name} has no parameter {name!r} "
                          f"(parameters: {', '.join(p.name for p in action.params)})")

    # ---- table entries ----
    def table_entry_proto(self, e: TableEntry) -> p4runtime_pb2.TableEntry:
        table = self.table(e.table)
        action = self.action(e.action)
        if action.preamble.id not in {ref.id for ref in table.action_refs}:
            raise P4InfoError(f"action {e.action} is not an action of table {e.table}")
        msg = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=e.priority)
        for name, m in e.match:
            f = self._match_field(table, name)
            what = f"{e.table} field {name}"
            fm = msg.match.add(field_id=f.id)
            mt = p4info_pb2.MatchField
            if isinstance(m, Exact) and f.match_type == mt.EXACT:
                fm.exact.value = encode(m.value, f.bitwidth, what)
            elif isinstance(m, Lpm) and f.match_type == mt.LPM:
                if not 0 < m.prefix_len <= f.bitwidth:
                    raise P4InfoError(f"{what}: prefix length {m.prefix_len} outside "
                                      f"1..{f.bitwidth}")
                host_bits = (1 << (f.bitwidth - m.prefix_len)) - 1
                if m.value & host_bits:
                    raise P4InfoError(f"{what}: bits set beyond the /{m.prefix_len} prefix")
                fm.lpm.value = encode(m.value, f.bitwidth, what)
                fm.lpm.prefix_len = m.prefix_len
            elif isinstance(m, Ternary) and f.match_type == mt.TERNARY:
                if m.value & ~m.mask:
                    raise P4InfoError(f"{what}: value has bits outside the mask")
                fm.ternary.value = encode(m.value, f.bitwidth, what)
                fm.ternary.mask = encode(m.mask, f.bitwidth, what)
            else:
                kind = mt.MatchType.Name(f.match_type)
                raise P4InfoError(f"{what}: a {type(m).__name__} match for a {kind} field")
        matched = {self._match_field(table, name).id for name, _ in e.match}
        missing = [mf.name for mf in table.match_fields
                   if mf.match_type == p4info_pb2.MatchField.EXACT and mf.id not in matched]
        if missing:
            raise P4InfoError(f"{e.table}: exact field(s) {', '.join(missing)} not given")
        msg.action.action.action_id = action.preamble.id
        given = dict(e.params)
        for p in action.params:
            if p.name not in given:
                raise P4InfoError(f"action {e.action}: parameter {p.name!r} not given")
        for name, value in e.params:
            f = self._param(action, name)
            msg.action.action.params.add(
                param_id=f.id, value=encode(value, f.bitwidth, f"{e.action} parameter {name}"))
        return msg

    def table_entry(self, msg: p4runtime_pb2.TableEntry) -> TableEntry:
        table = self.tables_by_id.get(msg.table_id)
        if table is None:
            raise P4InfoError(f"read a table entry of unknown table id {msg.table_id}")
        fields = {mf.id: mf.name for mf in table.match_fields}
        match = {}
        for fm in msg.match:
            name = fields.get(fm.field_id, f"field#{fm.field_id}")
            kind = fm.WhichOneof("field_match_type")
            if kind == "exact":
                match[name] = Exact(decode(fm.exact.value))
            elif kind == "lpm":
                match[name] = Lpm(decode(fm.lpm.value), fm.lpm.prefix_len)
            elif kind == "ternary":
                match[name] = Ternary(decode(fm.ternary.value), decode(fm.ternary.mask))
            else:
                raise P4InfoError(f"{table.preamble.name}: {kind} matches are not supported")
        action_name, params = "", {}
        if msg.action.WhichOneof("type") == "action":
            action = self.actions_by_id.get(msg.action.action.action_id)
            if action is None:
                raise P4InfoError(f"read an entry with unknown action id "
                                  f"{msg.action.action.action_id}")
            action_name = action.preamble.name
            names = {p.id: p.name for p in action.params}
            params = {names.get(p.param_id, f"param#{p.param_id}"): decode(p.value)
                      for p in msg.action.action.params}
        return TableEntry.make(table.preamble.name, match, action_name, params, msg.priority)

    # ---- multicast groups ----
    @staticmethod
    def multicast_proto(e: MulticastGroupEntry) -> p4runtime_pb2.PacketReplicationEngineEntry:
        msg = p4runtime_pb2.PacketReplicationEngineEntry()
        msg.multicast_group_entry.multicast_group_id = e.group_id
        for port, instance in e.replicas:
            msg.multicast_group_entry.replicas.add(egress_port=port, instance=instance)
        return msg

    @staticmethod
    def multicast_entry(msg: p4runtime_pb2.MulticastGroupEntry) -> MulticastGroupEntry:
        reps = []
        for r in msg.replicas:
            port = decode(r.port) if r.WhichOneof("port_kind") == "port" else r.egress_port
            reps.append((port, r.instance))
        return MulticastGroupEntry(msg.multicast_group_id, tuple(sorted(reps)))

    def canonical(self, e):
        """The entity as the switch will report it (P4Info names, omitted wildcards)."""
        if isinstance(e, TableEntry):
            done = self._canonical.get(e)
            if done is None:
                done = self._canonical[e] = self.table_entry(self.table_entry_proto(e))
            return done
        return e

    def entity_proto(self, e) -> p4runtime_pb2.Entity:
        if isinstance(e, TableEntry):
            return p4runtime_pb2.Entity(table_entry=self.table_entry_proto(e))
        if isinstance(e, MulticastGroupEntry):
            return p4runtime_pb2.Entity(packet_replication_engine_entry=self.multicast_proto(e))
        raise TypeError(f"not an entity: {e!r}")


@dataclass(frozen=True)
class Pipeline:
    """A compiled program to push: P4Info, BMv2 JSON and the cookie that names the pair."""

    p4info: P4Info
    device_config: bytes
    cookie: int
    p4info_path: str = ""
    json_path: str = ""

    def is_running(self, running: P4Info | None, cookie: int) -> bool:
        """Whether a switch reporting this P4Info and cookie runs this pipeline.

        The cookie names the exact program; a switch that keeps no cookie (0) is judged by
        its P4Info alone.
        """
        if running is None:
            return False
        return cookie == self.cookie or cookie == 0 and running.msg == self.p4info.msg

    @classmethod
    def load(cls, p4info_path: str, json_path: str) -> Pipeline:
        for path in (p4info_path, json_path):
            try:
                open(path).close()
            except OSError as e:
                raise P4InfoError(f"{path}: {e.strerror} (compile p4src/ first: make p4)") \
                    from None
        p4info = P4Info.load(p4info_path)
        with open(json_path, "rb") as f:
            config = f.read()
        digest = hashlib.sha256(p4info.msg.SerializeToString(deterministic=True) + config)
        return cls(p4info, config, int.from_bytes(digest.digest()[:8], "big") or 1,
                   p4info_path, json_path)
