"""Builds small BMv2 JSON programs in Python for engine unit tests.

The shapes follow what p4c-bm2-ss emits for v1model (standard_metadata
header, field aliases, scalars metadata, 'ingress'/'egress' pipelines), so a
unit test can pin one semantic detail without a compiler at hand.
"""

from __future__ import annotations

import copy

STANDARD_METADATA = [
    ["ingress_port", 9, False],
    ["egress_spec", 9, False],
    ["egress_port", 9, False],
    ["instance_type", 32, False],
    ["packet_length", 32, False],
    ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False],
    ["deq_timedelta", 32, False],
    ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False],
    ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False],
    ["egress_rid", 16, False],
    ["checksum_error", 1, False],
    ["parser_error", 32, False],
    ["priority", 3, False],
    ["_padding", 3, False],
]

ALIASES = [
    ["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]],
    ["queueing_metadata.enq_qdepth", ["standard_metadata", "enq_qdepth"]],
    ["queueing_metadata.deq_timedelta", ["standard_metadata", "deq_timedelta"]],
    ["queueing_metadata.deq_qdepth", ["standard_metadata", "deq_qdepth"]],
    ["intrinsic_metadata.ingress_global_timestamp",
     ["standard_metadata", "ingress_global_timestamp"]],
    ["intrinsic_metadata.egress_global_timestamp",
     ["standard_metadata", "egress_global_timestamp"]],
    ["intrinsic_metadata.mcast_grp", ["standard_metadata", "mcast_grp"]],
    ["intrinsic_metadata.egress_rid", ["standard_metadata", "egress_rid"]],
    ["intrinsic_metadata.priority", ["standard_metadata", "priority"]],
]

ERRORS = [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
          ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6]]


def field(h: str, f: str) -> dict:
    return {"type": "field", "value": [h, f]}


def hexstr(v: int) -> dict:
    return {"type": "hexstr", "value": hex(v) if v >= 0 else "-" + hex(-v)}


def rt(i: int) -> dict:
    return {"type": "runtime_data", "value": i}


def expr(op: str, left, right, **kw) -> dict:
    v = {"op": op, "left": left, "right": right, **kw}
    return {"type": "expression", "value": v}


def prim(op: str, *params) -> dict:
    return {"op": op, "parameters": list(params)}


def param(e: dict) -> dict:
    """A primitive parameter: p4c wraps an expression once more than inside expressions."""
    if e.get("type") == "expression":
        return {"type": "expression", "value": e}
    return e


def assign(dst: dict, src: dict) -> dict:
    return prim("assign", dst, param(src))


class Program:
    """Accumulates a program; `json()` returns the dict for Switch.load()."""

    def __init__(self):
        self.header_types = [
            {"name": "scalars_0", "id": 0, "fields": []},
            {"name": "standard_metadata", "id": 1, "fields": copy.deepcopy(STANDARD_METADATA)},
        ]
        self.headers = [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
             "metadata": True},
        ]
        self.header_stacks = []
        self.states = []
        self.deparse_order = []
        self.actions = [{"name": "NoAction", "id": 0, "runtime_data": [], "primitives": []}]
        self.tables = {"ingress": [], "egress": []}
        self.conditionals = {"ingress": [], "egress": []}
        self.init = {"ingress": None, "egress": None}
        self.registers = []
        self.counters = []
        self.calculations = []
        self.checksums = []
        self.field_lists = []
        self.errors = copy.deepcopy(ERRORS)

    # -- declarations ----------------------------------------------------------------

    def scalar(self, name: str, width: int, signed: bool = False) -> dict:
        self.header_types[0]["fields"].append([name, width, signed])
        return field("scalars", name)

    def header(self, name: str, fields: list, emit: bool = True) -> str:
        tid = len(self.header_types)
        self.header_types.append({"name": name + "_t", "id": tid,
                                  "fields": [list(f) if len(f) > 2 else [f[0], f[1], False]
                                             for f in fields]})
        self.headers.append({"name": name, "id": len(self.headers), "header_type": name + "_t",
                             "metadata": False})
        if emit:
            self.deparse_order.append(name)
        return name

    def stack(self, name: str, fields: list, size: int) -> str:
        tid = len(self.header_types)
        self.header_types.append({"name": name + "_t", "id": tid,
                                  "fields": [[f[0], f[1], False] for f in fields]})
        ids = []
        for i in range(size):
            hid = len(self.headers)
            self.headers.append({"name": f"{name}[{i}]", "id": hid, "header_type": name + "_t",
                                 "metadata": False})
            ids.append(hid)
            self.deparse_order.append(f"{name}[{i}]")
        self.header_stacks.append({"name": name, "id": len(self.header_stacks),
                                   "header_type": name + "_t", "header_ids": ids})
        return name

    def action(self, name: str, primitives: list, params: list | None = None) -> str:
        self.actions.append({"name": name, "id": len(self.actions),
                             "runtime_data": [{"name": n, "bitwidth": w} for n, w in params or []],
                             "primitives": primitives})
        return name

    def action_id(self, name: str) -> int:
        return next(a["id"] for a in self.actions if a["name"] == name)

    def state(self, name: str, ops: list, key: list | None = None,
              transitions: list | None = None) -> None:
        self.states.append({
            "name": name, "id": len(self.states), "parser_ops": ops,
            "transition_key": key or [],
            "transitions": transitions or [{"type": "default", "value": None, "mask": None,
                                            "next_state": None}],
        })

    def table(self, pipe: str, name: str, key: list, actions: list, default: str = "NoAction",
              default_data: list | None = None, next_node=None, const_default: bool = False,
              entries: list | None = None, size: int = 64, next_tables: dict | None = None,
              with_counters: bool = False) -> None:
        kinds = {k["match_type"] for k in key}
        mt = next((m for m in ("range", "ternary", "optional", "lpm") if m in kinds), "exact")
        t = {
            "name": name, "id": sum(len(v) for v in self.tables.values()),
            "key": key, "match_type": "ternary" if mt == "optional" else mt, "type": "simple",
            "max_size": size,
            "with_counters": with_counters, "support_timeout": False, "direct_meters": None,
            "action_ids": [self.action_id(a) for a in actions], "actions": actions,
            "base_default_next": next_node,
            "next_tables": next_tables or {a: next_node for a in actions},
            "default_entry": {"action_id": self.action_id(default), "action_const": const_default,
                              "action_data": [hex(v) for v in default_data or []],
                              "action_entry_const": const_default},
        }
        if entries is not None:
            t["entries"] = entries
        self.tables[pipe].append(t)
        if self.init[pipe] is None:
            self.init[pipe] = name

    def call(self, pipe: str, name: str, action: str, next_node=None) -> None:
        """A keyless table with a const default action: p4c's form of a direct call."""
        self.table(pipe, name, [], [action], default=action, const_default=True,
                   next_node=next_node)

    def conditional(self, pipe: str, name: str, expression: dict, true_next, false_next) -> None:
        self.conditionals[pipe].append({"name": name, "id": len(self.conditionals[pipe]),
                                        "expression": expression, "true_next": true_next,
                                        "false_next": false_next})

    def json(self) -> dict:
        def pipe(name):
            return {"name": name, "id": 0 if name == "ingress" else 1,
                    "init_table": self.init[name], "action_profiles": [],
                    "tables": self.tables[name], "action_calls": [],
                    "conditionals": self.conditionals[name]}

        return {
            "__meta__": {"version": [2, 23], "compiler": "tests/p4/kit.py"},
            "header_types": self.header_types,
            "headers": self.headers,
            "header_stacks": self.header_stacks,
            "header_union_types": [], "header_unions": [], "header_union_stacks": [],
            "field_lists": self.field_lists,
            "errors": self.errors,
            "enums": [],
            "parsers": [{"name": "parser", "id": 0,
                         "init_state": self.states[0]["name"] if self.states else None,
                         "parse_states": self.states}],
            "parse_vsets": [],
            "deparsers": [{"name": "deparser", "id": 0, "order": self.deparse_order,
                           "primitives": []}],
            "meter_arrays": [],
            "counter_arrays": self.counters,
            "register_arrays": self.registers,
            "calculations": self.calculations,
            "learn_lists": [],
            "actions": self.actions,
            "pipelines": [pipe("ingress"), pipe("egress")],
            "checksums": self.checksums,
            "force_arith": [],
            "extern_instances": [],
            "field_aliases": ALIASES,
        }


def extract(h: str) -> dict:
    return {"op": "extract", "parameters": [{"type": "regular", "value": h}]}


def goto(next_state, value=None, mask=None) -> dict:
    if value is None:
        return {"type": "default", "value": None, "mask": None, "next_state": next_state}
    return {"type": "hexstr", "value": value, "mask": mask, "next_state": next_state}
