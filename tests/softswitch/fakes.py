"""A stand-in for the softswitch engine: the engine's API of docs/SOFTSWITCH.md, no packets.

Tables, registers, counters and the replication engine are built from a BMv2
JSON like the real engine's; `process` runs a test-supplied function. Server
tests use it to inject engine failures the real engine would not produce.
"""

import json
import threading
from dataclasses import dataclass

CODES = {"INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_RANGE",
         "FAILED_PRECONDITION", "UNIMPLEMENTED", "RESOURCE_EXHAUSTED"}
BMV2_MAX_PRIORITY = (1 << 31) - 1  # BMv2 reports const entry priority p as MAX - p


class FakeSwitchError(Exception):
    def __init__(self, code: str, message: str):
        assert code in CODES, code
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass
class FakeEntry:
    key: tuple
    action: str
    params: list
    priority: int = 0
    packets: int = 0
    bytes: int = 0


class FakeTable:
    def __init__(self, desc: dict, fields: list, actions: dict, ids: dict, direct_counter):
        self.name = desc["name"]
        self.size = desc.get("max_size", 1024)
        self.match_fields = fields
        self.action_names = list(desc["actions"])
        self.direct_counter = direct_counter
        self._actions = actions
        self._entries: dict = {}
        default = desc.get("default_entry", {})
        self._initial = (ids[default["action_id"]],
                         [int(v, 16) for v in default.get("action_data", [])])
        self.default = self._initial
        self.has_const_default = bool(default.get("action_const"))
        self.has_const_entries = bool(desc.get("entries")) and not desc.get("_mutable", False)
        for e in desc.get("entries", []):
            key = tuple(_const_key(m, f) for m, f in zip(e["match_key"], fields, strict=True))
            action = ids[e["action_entry"]["action_id"]]
            params = [int(v, 16) for v in e["action_entry"]["action_data"]]
            prio = BMV2_MAX_PRIORITY - e["priority"] if e.get("priority", -1) >= 0 else 0
            self._entries[(key, prio)] = FakeEntry(key, action, params, prio)

    def _check(self, e):
        if e.action not in self.action_names:
            raise FakeSwitchError("INVALID_ARGUMENT", f"{e.action} not in {self.name}")
        widths = [w for _, w in self._actions[e.action]]
        if len(widths) != len(e.params) or any(
                v >> w for v, w in zip(e.params, widths, strict=True)):
            raise FakeSwitchError("INVALID_ARGUMENT", "bad params")

    def insert(self, e):
        if self.has_const_entries:
            raise FakeSwitchError("FAILED_PRECONDITION", "const table")
        self._check(e)
        if (e.key, e.priority) in self._entries:
            raise FakeSwitchError("ALREADY_EXISTS", "exists")
        if len(self._entries) >= self.size:
            raise FakeSwitchError("RESOURCE_EXHAUSTED", "full")
        self._entries[(e.key, e.priority)] = FakeEntry(e.key, e.action, list(e.params),
                                                       e.priority, e.packets, e.bytes)

    def modify(self, e):
        if (e.key, e.priority) not in self._entries:
            raise FakeSwitchError("NOT_FOUND", "absent")
        self._check(e)
        old = self._entries[(e.key, e.priority)]
        old.action, old.params = e.action, list(e.params)  # counters stay, as in the engine

    def delete(self, key, priority=0):
        if self._entries.pop((key, priority), None) is None:
            raise FakeSwitchError("NOT_FOUND", "absent")

    def get(self, key, priority=0):
        return self._entries.get((key, priority))

    def entries(self):
        return list(self._entries.values())

    def clear(self):
        self._entries.clear()

    def set_default(self, action, params):
        if self.has_const_default and action != self._initial[0]:
            raise FakeSwitchError("FAILED_PRECONDITION", "const default")
        self._check(FakeEntry((), action, params))
        self.default = (action, list(params))

    def reset_default(self):
        self.default = self._initial


class FakeRegister:
    def __init__(self, size, bitwidth):
        self.size, self.bitwidth, self.values = size, bitwidth, [0] * size

    def read(self, i):
        if not 0 <= i < self.size:
            raise FakeSwitchError("OUT_OF_RANGE", str(i))
        return self.values[i]

    def write(self, i, v):
        if not 0 <= i < self.size:
            raise FakeSwitchError("OUT_OF_RANGE", str(i))
        if v >> self.bitwidth:
            raise FakeSwitchError("INVALID_ARGUMENT", str(v))
        self.values[i] = v


class FakeCounter:
    def __init__(self, size):
        self.size, self.kind, self.cells = size, "packets_and_bytes", [(0, 0)] * size

    def read(self, i):
        if not 0 <= i < self.size:
            raise FakeSwitchError("OUT_OF_RANGE", str(i))
        return self.cells[i]

    def write(self, i, packets, nbytes):
        if not 0 <= i < self.size:
            raise FakeSwitchError("OUT_OF_RANGE", str(i))
        self.cells[i] = (packets, nbytes)


class FakePRE:
    def __init__(self):
        self.groups = {}

    def create(self, gid, replicas):
        if gid in self.groups:
            raise FakeSwitchError("ALREADY_EXISTS", str(gid))
        self.groups[gid] = list(replicas)

    def modify(self, gid, replicas):
        if gid not in self.groups:
            raise FakeSwitchError("NOT_FOUND", str(gid))
        self.groups[gid] = list(replicas)

    def delete(self, gid):
        if self.groups.pop(gid, None) is None:
            raise FakeSwitchError("NOT_FOUND", str(gid))


class FakeClones:
    def __init__(self):
        self.sessions = {}

    def set(self, sid, replicas, class_of_service=0, packet_length_bytes=0):
        self.sessions[sid] = {"replicas": list(replicas), "class_of_service": class_of_service,
                              "packet_length_bytes": packet_length_bytes}

    def delete(self, sid):
        if self.sessions.pop(sid, None) is None:
            raise FakeSwitchError("NOT_FOUND", str(sid))

    def get(self, sid):
        return self.sessions.get(sid)


class FakeSwitch:
    """`behaviour(port, data) -> [(port, bytes)]` stands in for the pipeline."""

    def __init__(self, device_id=0, cpu_port=None, drop_port=511, log=None):
        self.device_id, self.cpu_port, self.drop_port = device_id, cpu_port, drop_port
        self.behaviour = lambda port, data: []
        self.processed: list[tuple[int, bytes]] = []
        self.loads = 0
        self._lock = threading.Lock()
        self.program_json = None
        self._clear()

    def _clear(self):
        self.tables, self.registers, self.counters, self._actions = {}, {}, {}, {}
        self.pre, self.clones = FakePRE(), FakeClones()

    @property
    def loaded(self):
        return self.program_json is not None

    def load(self, config):
        try:
            program = json.loads(config) if isinstance(config, str | bytes) else config
            actions = {a["name"]: [(p["name"], p["bitwidth"]) for p in a["runtime_data"]]
                       for a in program["actions"]}
            ids = {a["id"]: a["name"] for a in program["actions"]}
            widths = _field_widths(program)
            direct = {c["binding"]: c["name"] for c in program.get("counter_arrays", [])
                      if c.get("is_direct")}
            tables = {}
            for pipe in program["pipelines"]:
                for t in pipe["tables"]:
                    fields = [(k["name"], k["match_type"], _key_width(k, widths))
                              for k in t["key"]]
                    tables[t["name"]] = FakeTable(t, fields, actions, ids,
                                                  direct.get(t["name"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise FakeSwitchError("INVALID_ARGUMENT", f"bad JSON: {exc}") from exc
        self._clear()
        self._actions = actions
        self.tables = tables
        self.registers = {r["name"]: FakeRegister(r["size"], r["bitwidth"])
                          for r in program.get("register_arrays", [])}
        self.counters = {c["name"]: FakeCounter(c["size"])
                         for c in program.get("counter_arrays", []) if not c.get("is_direct")}
        self.program_json = program
        self.loads += 1

    def action_params(self, action_name, table=None):
        return list(self._actions[action_name])

    def process(self, port, data):
        with self._lock:
            self.processed.append((port, bytes(data)))
            return list(self.behaviour(port, bytes(data)))

    @property
    def stats(self):
        return {"packets_in": len(self.processed)}


def _field_widths(program) -> dict:
    types = {t["name"]: {f[0]: f[1] for f in t["fields"]} for t in program["header_types"]}
    return {h["name"]: types[h["header_type"]] for h in program["headers"]}


def _key_width(key, widths) -> int:
    if key["match_type"] == "valid":
        return 1
    header, field = key["target"]
    return widths[header][field]


def _const_key(m, field):
    kind = field[1]
    if kind == "exact":
        return int(m["key"], 16)
    if kind == "lpm":
        return (int(m["key"], 16), m["prefix_length"])
    if kind == "ternary":
        return (int(m["key"], 16), int(m["mask"], 16))
    if kind == "range":
        return (int(m["start"], 16), int(m["end"], 16))
    if kind == "optional":
        return None if int(m.get("mask", "0x1"), 16) == 0 else int(m["key"], 16)
    return bool(int(m["key"], 16))
