"""A BMv2 JSON and P4Info pair built in Python, shaped like tests/p4/p4rt_basic.p4.

It carries only what the fake engine reads (tables, actions, counters, registers,
header types; an optional match is written as ternary, as p4c does for BMv2) and
the P4Info the server maps; the server tests that need no
packet pipeline run against it with the fake engine.
"""

import json

from p4.config.v1 import p4info_pb2

P = p4info_pb2.P4Ids
MT = p4info_pb2.MatchField
SCOPE = p4info_pb2.ActionRef

ACTIONS = [  # name, [(param, width)]
    ("NoAction", []),
    ("I.drop", []),
    ("I.fwd", [("port", 9)]),
    ("I.flood", [("grp", 16)]),
    ("I.fwd_drop", []),
    ("I.set_tag", [("tag", 16)]),
    ("I.miss_tag", []),
    ("I.mark", [("flags", 4), ("value", 32)]),
]
HEADERS = {
    "ethernet": [("dst", 48), ("src", 48), ("etype", 16)],
    "probe": [("op", 8), ("idx", 8), ("value", 32), ("vlan", 12), ("flags", 4)],
}
TABLES = [  # name, [(field, kind, width)], [(action, scope)], default, const default, extra
    ("I.l2", [("hdr.ethernet.dst", "exact", 48)],
     [("I.fwd", 0), ("I.flood", 0), ("I.fwd_drop", 0)], "I.fwd_drop", False, {"counter": True}),
    ("I.tags", [("hdr.probe.value", "lpm", 32)],
     [("I.set_tag", 0), ("NoAction", 1), ("I.miss_tag", 2)], "I.miss_tag", False, {}),
    ("I.acl", [("hdr.ethernet.src", "ternary", 48), ("hdr.probe.vlan", "range", 12),
               ("hdr.probe.op", "optional", 8), ("hdr.ethernet.etype", "exact", 16)],
     [("I.mark", 0), ("I.drop", 0), ("NoAction", 0)], "NoAction", False, {}),
    ("I.fixed", [("hdr.probe.flags", "exact", 4)],
     [("I.mark", 0), ("NoAction", 0)], "NoAction", True, {"const_entries": True}),
]
COUNTERS = [("I.port_rx", 16, 3), ("I.probe_ops", 8, 2)]  # units: 3 both, 2 packets
REGISTERS = [("I.store", 16, 32)]
PACKET_OUT = [("egress_port", 9), ("flags", 3), ("_pad", 4), ("tag", 16)]
PACKET_IN = [("ingress_port", 9), ("_pad", 7), ("tag", 16)]
KINDS = {"exact": MT.EXACT, "lpm": MT.LPM, "ternary": MT.TERNARY, "range": MT.RANGE,
         "optional": MT.OPTIONAL}


def _id(prefix: int, n: int) -> int:
    return (prefix << 24) | (0x1000 + n)


def build() -> tuple[p4info_pb2.P4Info, bytes]:
    info = p4info_pb2.P4Info()
    action_ids = {}
    for n, (name, params) in enumerate(ACTIONS):
        a = info.actions.add()
        a.preamble.id = action_ids[name] = _id(P.ACTION, n)
        a.preamble.name = name
        for i, (pname, width) in enumerate(params, 1):
            a.params.add(id=i, name=pname, bitwidth=width)
    for n, (name, fields, refs, default, const_default, extra) in enumerate(TABLES):
        t = info.tables.add()
        t.preamble.id = _id(P.TABLE, n)
        t.preamble.name = name
        for i, (fname, kind, width) in enumerate(fields, 1):
            t.match_fields.add(id=i, name=fname, bitwidth=width, match_type=KINDS[kind])
        for aname, scope in refs:
            t.action_refs.add(id=action_ids[aname], scope=scope)
        if const_default:
            t.const_default_action_id = action_ids[default]
        t.is_const_table = bool(extra.get("const_entries"))
        if extra.get("counter"):
            dc = info.direct_counters.add()
            dc.preamble.id = _id(P.DIRECT_COUNTER, n)
            dc.preamble.name = "I.fwd_hits"
            dc.spec.unit = 3
            dc.direct_table_id = t.preamble.id
            t.direct_resource_ids.append(dc.preamble.id)
        t.size = 64
    for n, (name, size, unit) in enumerate(COUNTERS):
        c = info.counters.add()
        c.preamble.id, c.preamble.name, c.size, c.spec.unit = _id(P.COUNTER, n), name, size, unit
    for n, (name, size, width) in enumerate(REGISTERS):
        r = info.registers.add()
        r.preamble.id, r.preamble.name, r.size = _id(P.REGISTER, n), name, size
        r.type_spec.bitstring.bit.bitwidth = width
    for n, (name, fields) in enumerate((("packet_out", PACKET_OUT), ("packet_in", PACKET_IN))):
        h = info.controller_packet_metadata.add()
        h.preamble.id, h.preamble.name = _id(P.CONTROLLER_HEADER, n), name
        for i, (fname, width) in enumerate(fields, 1):
            h.metadata.add(id=i, name=fname, bitwidth=width)
    return info, json.dumps(_bmv2_json(action_ids)).encode()


def _bmv2_json(action_ids) -> dict:
    json_ids = {name: n for n, (name, _) in enumerate(ACTIONS)}
    tables = []
    for name, fields, refs, default, const_default, extra in TABLES:
        t = {
            "name": name, "max_size": 64,
            "key": [{"match_type": "ternary" if kind == "optional" else kind, "name": fname,
                     "target": fname.split(".")[1:]}
                    for fname, kind, _ in fields],
            "actions": [a for a, _ in refs],
            "default_entry": {"action_id": json_ids[default], "action_const": const_default,
                              "action_data": []},
        }
        if extra.get("const_entries"):
            t["entries"] = [
                {"match_key": [{"match_type": "exact", "key": "0x01"}],
                 "action_entry": {"action_id": json_ids["I.mark"],
                                  "action_data": ["0x09", "0x99"]}, "priority": 1},
                {"match_key": [{"match_type": "exact", "key": "0x02"}],
                 "action_entry": {"action_id": json_ids["NoAction"], "action_data": []},
                 "priority": 2},
            ]
        tables.append(t)
    return {
        "header_types": [{"name": f"{h}_t", "id": i, "fields": [[f, w, False] for f, w in fs]}
                         for i, (h, fs) in enumerate(HEADERS.items())],
        "headers": [{"name": h, "id": i, "header_type": f"{h}_t"}
                    for i, h in enumerate(HEADERS)],
        "actions": [{"name": name, "id": n,
                     "runtime_data": [{"name": p, "bitwidth": w} for p, w in params]}
                    for n, (name, params) in enumerate(ACTIONS)],
        "pipelines": [{"name": "ingress", "tables": tables}],
        "counter_arrays": [{"name": "I.fwd_hits", "id": 0, "is_direct": True,
                            "binding": "I.l2"}] +
                          [{"name": name, "id": i + 1, "is_direct": False, "size": size}
                           for i, (name, size, _) in enumerate(COUNTERS)],
        "register_arrays": [{"name": name, "id": i, "size": size, "bitwidth": width}
                            for i, (name, size, width) in enumerate(REGISTERS)],
    }
