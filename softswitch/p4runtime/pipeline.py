"""The P4Info of the running pipeline, indexed by id, and tied to engine names.

P4Info preamble names equal the BMv2 JSON names (p4c emits both), so tables,
actions, counters and registers are found in the engine by name. Match fields
and action parameters are matched by name, falling back to declaration order
(both files list them in the same order). Anything that does not line up is a
config error, reported when the pipeline is set, never later per request.
"""

from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2

from .status import P4RTError, from_switch_error, invalid

Prefix = p4info_pb2.P4Ids.Prefix
MatchType = p4info_pb2.MatchField.MatchType
Scope = p4info_pb2.ActionRef.Scope
Unit = p4info_pb2.CounterSpec.Unit

_MATCH_KINDS = {
    MatchType.EXACT: "exact",
    MatchType.LPM: "lpm",
    MatchType.TERNARY: "ternary",
    MatchType.RANGE: "range",
    MatchType.OPTIONAL: "optional",
}
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})
# (engine kind, P4Info kind) pairs that can carry each other's keys
_COMPATIBLE = frozenset({(k, k) for k in _MATCH_KINDS.values()} | {("ternary", "optional")})


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    kind: str         # P4Info match kind; "valid" when the engine field is a P4_14 valid match
    bitwidth: int
    position: int     # index in the engine's key tuple
    engine_kind: str  # the JSON's kind: p4c writes an optional match as ternary for BMv2


@dataclass(frozen=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int
    position: int    # index in the engine's params list


@dataclass
class ActionInfo:
    id: int
    name: str
    params: list[ParamInfo]
    by_param_id: dict[int, ParamInfo] = field(default_factory=dict)


@dataclass
class TableInfo:
    id: int
    name: str
    fields: list[MatchFieldInfo]                 # P4Info order
    by_field_id: dict[int, MatchFieldInfo]
    engine_kinds: list[tuple[str, int]]          # (kind, bitwidth) in engine key order
    actions: dict[int, int]                      # action id -> ActionRef scope
    const_default_action_id: int
    is_const: bool
    direct_counter_id: int
    indirect: bool
    idle_timeout: bool
    size: int

    @property
    def needs_priority(self) -> bool:
        return any(f.kind in PRIORITY_KINDS for f in self.fields)


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    size: int
    unit: int


@dataclass(frozen=True)
class DirectCounterInfo:
    id: int
    name: str
    table_id: int
    unit: int


@dataclass(frozen=True)
class RegisterInfo:
    id: int
    name: str
    size: int
    bitwidth: int
    signed: bool


@dataclass(frozen=True)
class MetadataInfo:
    id: int
    name: str
    bitwidth: int


def id_prefix(p4_id: int) -> int:
    return p4_id >> 24


class Pipeline:
    """Lookup tables for one P4Info, checked against a loaded engine."""

    def __init__(self, p4info: p4info_pb2.P4Info, switch):
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        self.action_ids: dict[str, int] = {}
        self.tables: dict[int, TableInfo] = {}
        # P4Info tables the device config lacks (p4c keeps a table it compiled away, never
        # applied, in the P4Info): the config loads, as on BMv2; they have no entries
        self.absent_tables: dict[int, str] = {}
        self.counters: dict[int, CounterInfo] = {}
        self.direct_counters: dict[int, DirectCounterInfo] = {}
        self.registers: dict[int, RegisterInfo] = {}
        self.meters = {m.preamble.id for m in p4info.meters}
        self.direct_meters = {m.preamble.id for m in p4info.direct_meters}
        self.action_profiles = {a.preamble.id for a in p4info.action_profiles}
        self.value_sets = {v.preamble.id for v in p4info.value_sets}
        self.digests = {d.preamble.id for d in p4info.digests}
        self.packet_in: list[MetadataInfo] | None = None
        self.packet_out: list[MetadataInfo] | None = None
        self._check_unique_ids()
        self._index_actions(switch)
        self._index_counters(switch)
        self._index_registers(switch)
        self._index_tables(switch)
        self._index_packet_metadata()

    # ---- lookups used per request -------------------------------------------------------------

    def table(self, table_id: int) -> TableInfo:
        info = self.tables.get(table_id)
        if info is None:
            name = self.absent_tables.get(table_id)
            if name is not None:
                raise P4RTError("UNIMPLEMENTED", f"table {name} is not in the device config "
                                f"(compiled away: the program never applies it); it takes no "
                                f"entries")
            raise invalid(f"Invalid P4 id {table_id:#x}: not a table")
        return info

    def action(self, action_id: int) -> ActionInfo:
        info = self.actions.get(action_id)
        if info is None:
            raise invalid(f"Invalid P4 id {action_id:#x}: not an action")
        return info

    def counter(self, counter_id: int) -> CounterInfo:
        info = self.counters.get(counter_id)
        if info is None:
            raise invalid(f"Invalid P4 id {counter_id:#x}: not an indirect counter")
        return info

    def register(self, register_id: int) -> RegisterInfo:
        info = self.registers.get(register_id)
        if info is None:
            raise invalid(f"Invalid P4 id {register_id:#x}: not a register")
        return info

    # ---- construction -------------------------------------------------------------------------

    def _check_unique_ids(self) -> None:
        seen: dict[int, str] = {}
        groups = ("tables", "actions", "action_profiles", "counters", "direct_counters", "meters",
                  "direct_meters", "controller_packet_metadata", "value_sets", "registers",
                  "digests")
        for group in groups:
            for obj in getattr(self.p4info, group):
                pid, name = obj.preamble.id, obj.preamble.name
                if pid == 0 or not name:
                    raise _mismatch(f"{group} entry without id or name")
                if pid in seen:
                    raise _mismatch(f"id {pid:#x} used by both {seen[pid]} and {name}")
                seen[pid] = name

    def _index_actions(self, switch) -> None:
        # p4c may emit several JSON actions of one P4Info name: the one that counts for
        # the control plane is the copy a table of the P4Info offers
        table_of: dict[int, str] = {}
        for t in self.p4info.tables:
            for ref in t.action_refs:
                table_of.setdefault(ref.id, t.preamble.name)
        for action in self.p4info.actions:
            name = action.preamble.name
            try:
                engine_params = list(switch.action_params(name, table_of.get(action.preamble.id)))
            except Exception:  # KeyError or SwitchError: the JSON has no such action
                # BMv2 accepts such a P4Info (p4c lists actions it then compiles away);
                # an entry that names the action is refused when it is written
                engine_params = [(p.name, p.bitwidth) for p in action.params]
            positions = _align([p.name for p in action.params], [p[0] for p in engine_params],
                               f"parameters of action {name}")
            params = []
            for p, pos in zip(action.params, positions, strict=True):
                if p.bitwidth != engine_params[pos][1]:
                    raise _mismatch(f"action {name} parameter {p.name}: P4Info says {p.bitwidth} "
                                    f"bits, device config {engine_params[pos][1]}")
                params.append(ParamInfo(p.id, p.name, p.bitwidth, pos))
            info = ActionInfo(action.preamble.id, name, params, {p.id: p for p in params})
            if len(info.by_param_id) != len(params):
                raise _mismatch(f"action {name} has duplicate parameter ids")
            self.actions[info.id] = info
            self.action_ids[name] = info.id

    def _index_counters(self, switch) -> None:
        for c in self.p4info.counters:
            name = c.preamble.name
            engine = switch.counters.get(name)
            if engine is None:
                raise _mismatch(f"counter {name} is not in the device config")
            if engine.size != c.size:
                raise _mismatch(f"counter {name}: P4Info size {c.size}, device config "
                                f"{engine.size}")
            self.counters[c.preamble.id] = CounterInfo(c.preamble.id, name, c.size, c.spec.unit)
        for c in self.p4info.direct_counters:
            self.direct_counters[c.preamble.id] = DirectCounterInfo(
                c.preamble.id, c.preamble.name, c.direct_table_id, c.spec.unit)

    def _index_registers(self, switch) -> None:
        for r in self.p4info.registers:
            name = r.preamble.name
            engine = switch.registers.get(name)
            if engine is None:
                raise _mismatch(f"register {name} is not in the device config")
            spec = r.type_spec
            if spec.WhichOneof("type_spec") != "bitstring":
                raise _mismatch(f"register {name}: only bit<W> and int<W> cells are supported")
            kind = spec.bitstring.WhichOneof("type_spec")
            if kind not in ("bit", "int"):
                raise _mismatch(f"register {name}: varbit cells are not supported")
            width = getattr(spec.bitstring, kind).bitwidth
            if width != engine.bitwidth or r.size != engine.size:
                raise _mismatch(f"register {name}: P4Info {r.size} x {width} bits, device "
                                f"config {engine.size} x {engine.bitwidth} bits")
            self.registers[r.preamble.id] = RegisterInfo(r.preamble.id, name, r.size, width,
                                                         kind == "int")

    def _index_tables(self, switch) -> None:
        for t in self.p4info.tables:
            name = t.preamble.name
            engine = switch.tables.get(name)
            if engine is None:  # as BMv2: the config loads; requests naming it fail
                self.absent_tables[t.preamble.id] = name
                continue
            engine_fields = list(engine.match_fields)
            positions = _align([f.name for f in t.match_fields], [f[0] for f in engine_fields],
                               f"match fields of table {name}")
            fields = []
            for f, pos in zip(t.match_fields, positions, strict=True):
                kind = _MATCH_KINDS.get(f.match_type)
                if kind is None:
                    raise _mismatch(f"table {name} field {f.name}: unsupported match type "
                                    f"{f.other_match_type or f.match_type}")
                _, engine_kind, engine_width = engine_fields[pos]
                # a key of a type without a width in the P4Info (error, an enum without
                # an underlying type) has the JSON's width, as BMv2 takes it
                width = f.bitwidth or engine_width
                if engine_kind == "valid" and kind == "exact":
                    kind = "valid"
                elif (engine_kind, kind) not in _COMPATIBLE or engine_width != width:
                    raise _mismatch(f"table {name} field {f.name}: P4Info {kind} "
                                    f"{f.bitwidth} bits, device config {engine_kind} "
                                    f"{engine_width} bits")
                fields.append(MatchFieldInfo(f.id, f.name, kind, width, pos, engine_kind))
            direct_counter = 0
            for rid in t.direct_resource_ids:
                if id_prefix(rid) == Prefix.DIRECT_COUNTER:
                    if rid not in self.direct_counters:
                        raise _mismatch(f"table {name} refers to unknown direct counter {rid:#x}")
                    direct_counter = rid
            if bool(direct_counter) != bool(engine.direct_counter):
                raise _mismatch(f"table {name}: direct counter in P4Info and device config "
                                f"disagree")
            actions = {}
            for ref in t.action_refs:
                if ref.id not in self.actions:
                    raise _mismatch(f"table {name} refers to unknown action {ref.id:#x}")
                if self.actions[ref.id].name not in engine.action_names:
                    continue  # as BMv2: the config loads; entries naming it are refused
                actions[ref.id] = ref.scope
            info = TableInfo(
                id=t.preamble.id, name=name, fields=fields, by_field_id={f.id: f for f in fields},
                engine_kinds=[(k, w) for _, k, w in engine_fields], actions=actions,
                const_default_action_id=t.const_default_action_id, is_const=t.is_const_table,
                direct_counter_id=direct_counter, indirect=t.implementation_id != 0,
                idle_timeout=t.idle_timeout_behavior != p4info_pb2.Table.NO_TIMEOUT,
                size=t.size)
            if len(info.by_field_id) != len(fields):
                raise _mismatch(f"table {name} has duplicate match field ids")
            self.tables[info.id] = info

    def _index_packet_metadata(self) -> None:
        for header in self.p4info.controller_packet_metadata:
            fields = [MetadataInfo(m.id, m.name, m.bitwidth) for m in header.metadata]
            if any(m.bitwidth <= 0 for m in fields):
                raise _mismatch(f"controller header {header.preamble.name}: only fixed-width "
                                f"bit<W> metadata is supported")
            if header.preamble.name == "packet_in":
                self.packet_in = fields
            elif header.preamble.name == "packet_out":
                self.packet_out = fields


def build(p4info: p4info_pb2.P4Info, switch) -> Pipeline:
    try:
        return Pipeline(p4info, switch)
    except P4RTError:
        raise
    except Exception as exc:
        mapped = from_switch_error(exc)
        raise mapped if mapped else _mismatch(f"{type(exc).__name__}: {exc}") from exc


def _align(p4info_names: list[str], engine_names: list[str], what: str) -> list[int]:
    """Engine position of each P4Info name: by name, else by order."""
    if len(p4info_names) != len(engine_names):
        raise _mismatch(f"{what}: P4Info has {len(p4info_names)}, device config "
                        f"{len(engine_names)}")
    index = {n: i for i, n in enumerate(engine_names)}
    if len(index) == len(engine_names) and all(n in index for n in p4info_names):
        return [index[n] for n in p4info_names]
    return list(range(len(p4info_names)))


def _mismatch(message: str) -> P4RTError:
    return invalid(f"P4Info does not match the device config: {message}")
