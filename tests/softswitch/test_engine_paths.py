"""simple_switch packet paths on the engine, and the same run on BMv2 when available.

Unicast, multicast with egress_rid, ingress and egress clones through
sessions, resubmit and recirculate preserving field lists, truncate, exit,
mark_to_drop in both pipelines, egress_spec 511, priority, and
packet_length after setValid/setInvalid. The egress pipeline writes what it
sees (instance_type, egress_rid, ports, packet_length, preserved metadata)
into an `info` header at the front of every packet that leaves.
"""

import json

import pytest

from softswitch import Switch
from tests.p4 import bmv2, kit
from tests.p4.kit import assign, field, hexstr, prim

SM = "standard_metadata"
CMD = [("op", 8), ("arg", 8), ("grp", 16)]
INFO = [("itype", 32), ("rid", 16), ("eport", 16), ("plen", 32), ("iport", 16),
        ("passes", 8), ("fl", 8)]
GROUPS = {1: [(1, 10), (2, 20), (3, 30)], 2: [(4, 5)]}
SESSIONS = {5: [(6, 7)], 6: [(2, 0), (3, 1)]}


def sm(f):
    return field(SM, f)


def hdr(name):
    return {"type": "header", "value": name}


def entry(p, keys, action, data=(), priority=None):
    e = {"match_key": keys,
         "action_entry": {"action_id": p.action_id(action), "action_data": [hex(d) for d in data]}}
    if priority is not None:
        e["priority"] = priority
    return e


def hx(v, w):
    """A hexstr of the field's byte width, as BMv2 requires for entries."""
    return "0x" + v.to_bytes((w + 7) // 8, "big").hex()


def ex(v, w):
    return {"match_type": "exact", "key": hx(v, w)}


def tern(v, m, w):
    return {"match_type": "ternary", "key": hx(v, w), "mask": hx(m, w)}


def program() -> dict:
    p = kit.Program()
    p.header("info", INFO)
    p.header("cmd", CMD)
    p.header("extra", [("x", 32)])
    passes = p.scalar("passes", 8)
    fl = p.scalar("fl", 8)
    p.field_lists = [{"id": 1, "name": "fl1", "elements": [passes]},
                     {"id": 2, "name": "fl2", "elements": [fl]},
                     {"id": 3, "name": "fl3", "elements": [passes, fl]},
                     {"id": 4, "name": "empty", "elements": []}]
    p.state("start", [kit.extract("cmd")])
    es = sm("egress_spec")
    p.action("uni", [assign(es, hexstr(1))])
    p.action("mcast", [assign(es, hexstr(1)), assign(sm("mcast_grp"), field("cmd", "grp"))])
    p.action("clone_i2e", [assign(es, hexstr(1)), assign(passes, hexstr(3)),
                           prim("clone_ingress_pkt_to_egress", field("cmd", "arg"), hexstr(3))])
    p.action("resub_first", [assign(passes, hexstr(1)), prim("resubmit", hexstr(1))])
    p.action("resub_again", [assign(passes, kit.expr("&", kit.expr("+", passes, hexstr(1)),
                                                        hexstr(0xFF))),
                             assign(es, hexstr(2))])
    p.action("recirc_back", [assign(es, hexstr(3))])
    p.action("trunc", [assign(es, hexstr(1)), prim("truncate", field("cmd", "arg"))])
    p.action("do_exit", [assign(es, hexstr(1)), prim("exit")])
    p.action("late", [assign(es, hexstr(2))])
    p.action("drop_in", [assign(es, hexstr(1)), prim("mark_to_drop", hdr(SM))])
    p.action("mcast_drop", [assign(sm("mcast_grp"), field("cmd", "grp")),
                            prim("mark_to_drop", hdr(SM))])
    p.action("to_511", [assign(es, hexstr(511))])
    p.action("add_extra", [assign(es, hexstr(1)), prim("add_header", hdr("extra")),
                           assign(field("extra", "x"), hexstr(0x01020304))])
    p.action("rm_cmd", [assign(es, hexstr(1)), prim("remove_header", hdr("cmd"))])
    p.action("prio", [assign(es, hexstr(1)), assign(sm("priority"), hexstr(1))])
    # egress
    info = [prim("add_header", hdr("info")),
            assign(field("info", "itype"), sm("instance_type")),
            assign(field("info", "rid"), sm("egress_rid")),
            assign(field("info", "eport"), sm("egress_port")),
            assign(field("info", "plen"), sm("packet_length")),
            assign(field("info", "iport"), sm("ingress_port")),
            assign(field("info", "passes"), passes),
            assign(field("info", "fl"), fl)]
    p.action("report", info)
    p.action("recirc_out", [assign(fl, hexstr(0x5A)), prim("recirculate", hexstr(2))])
    p.action("drop_out", [prim("mark_to_drop", hdr(SM))] + info)
    p.action("clone_e2e", [prim("clone_egress_pkt_to_egress", field("cmd", "arg"), hexstr(4))]
             + info)

    key = [{"match_type": "exact", "target": ["cmd", "op"], "mask": None},
           {"match_type": "ternary", "target": [SM, "instance_type"], "mask": None}]
    acts = ["uni", "mcast", "clone_i2e", "resub_first", "resub_again", "recirc_back", "trunc",
            "do_exit", "drop_in", "mcast_drop", "to_511", "add_extra", "rm_cmd", "prio"]
    rows = [(1, "uni"), (2, "mcast"), (3, "clone_i2e"), (6, "trunc"), (7, "do_exit"),
            (10, "drop_in"), (12, "mcast_drop"), (13, "to_511"), (14, "add_extra"),
            (15, "rm_cmd"), (16, "prio"), (5, "uni"), (8, "uni"), (9, "uni")]
    full = 0xFFFFFFFF
    entries = [entry(p, [ex(4, 8), tern(0, full, 32)], "resub_first", priority=1),
               entry(p, [ex(4, 8), tern(6, full, 32)], "resub_again", priority=2),
               entry(p, [ex(5, 8), tern(4, full, 32)], "recirc_back", priority=3)]
    entries += [entry(p, [ex(op, 8), tern(0, 0, 32)], a, priority=10 + i)
                for i, (op, a) in enumerate(rows)]
    p.table("ingress", "dispatch", key, acts, default="uni", entries=entries,
            next_node="late_if")
    p.conditional("ingress", "late_if",
                  kit.expr("==", field("cmd", "op"), hexstr(7)), "late_t", None)
    p.call("ingress", "late_t", "late")
    p.tables["ingress"][-1]["next_tables"] = {"late": None}

    # egress: recirculate once (fl is 0 before), clone E2E once (clones are type 2)
    ekey = [{"match_type": "exact", "target": ["cmd", "$valid$"], "mask": None},
            {"match_type": "ternary", "target": ["cmd", "op"], "mask": None},
            {"match_type": "ternary", "target": ["scalars", "fl"], "mask": None},
            {"match_type": "ternary", "target": [SM, "instance_type"], "mask": None}]
    any32 = tern(0, 0, 32)
    eentries = [
        entry(p, [ex(1, 1), tern(5, 0xFF, 8), tern(0, 0xFF, 8), any32], "recirc_out", priority=1),
        entry(p, [ex(1, 1), tern(8, 0xFF, 8), tern(0, 0, 8), any32], "drop_out", priority=2),
        entry(p, [ex(1, 1), tern(9, 0xFF, 8), tern(0, 0, 8), tern(0, full, 32)], "clone_e2e",
              priority=3),
    ]
    p.table("egress", "eg", ekey, ["report", "recirc_out", "drop_out", "clone_e2e"],
            default="report", entries=eentries)
    return p.json()


def cmd(op, arg=0, grp=0, payload=b"PAYLOAD!"):
    return bytes([op, arg]) + grp.to_bytes(2, "big") + payload


def info(itype, rid, eport, plen, iport, passes=0, fl=0):
    return (itype.to_bytes(4, "big") + rid.to_bytes(2, "big") + eport.to_bytes(2, "big")
            + plen.to_bytes(4, "big") + iport.to_bytes(2, "big") + bytes([passes, fl]))


IN = 9  # ingress port of every case
L = len(cmd(1))  # 12 bytes

# (input, {port: [expected packets]})
CASES = [
    (cmd(1), {1: [info(0, 0, 1, L, IN) + cmd(1)]}),
    (cmd(2, grp=1), {1: [info(5, 10, 1, L, IN) + cmd(2, grp=1)],
                     2: [info(5, 20, 2, L, IN) + cmd(2, grp=1)],
                     3: [info(5, 30, 3, L, IN) + cmd(2, grp=1)]}),
    (cmd(2, grp=7), {}),
    # the clone is re-parsed from the original bytes; metadata is reset except
    # the preserved field list (passes=3), so ingress_port reads 0
    (cmd(3, arg=5), {1: [info(0, 0, 1, L, IN, passes=3) + cmd(3, arg=5)],
                     6: [info(1, 7, 6, L, 0, passes=3) + cmd(3, arg=5)]}),
    (cmd(3, arg=9), {1: [info(0, 0, 1, L, IN, passes=3) + cmd(3, arg=9)]}),
    # resubmitted: metadata reset but the field list, so ingress_port reads 0;
    # unicast sets instance_type back to NORMAL before egress
    (cmd(4), {2: [info(0, 0, 2, L, 0, passes=2) + cmd(4)]}),
    (cmd(5), {3: [info(0, 0, 3, L, 0, fl=0x5A) + cmd(5)]}),
    (cmd(6, arg=10), {1: [(info(0, 0, 1, L, IN) + cmd(6, arg=10))[:10]]}),
    (cmd(7), {1: [info(0, 0, 1, L, IN) + cmd(7)]}),
    (cmd(8), {}),
    # an egress clone copies the headers as egress left them (info is valid, so
    # packet_length counts it) and resets metadata (ingress_port 0)
    (cmd(9, arg=6), {1: [info(0, 0, 1, L, IN) + cmd(9, arg=6)],
                     2: [info(2, 0, 2, L + 16, 0) + cmd(9, arg=6)],
                     3: [info(2, 1, 3, L + 16, 0) + cmd(9, arg=6)]}),
    (cmd(10), {}),
    (cmd(12, grp=1), {}),
    (cmd(13), {}),
    (cmd(14), {1: [info(0, 0, 1, L + 4, IN) + cmd(14, payload=b"") + bytes.fromhex("01020304")
                   + b"PAYLOAD!"]}),
    (cmd(15), {1: [info(0, 0, 1, L - 4, IN) + b"PAYLOAD!"]}),
    (cmd(16), {}),
    (cmd(1, payload=b""), {1: [info(0, 0, 1, 4, IN) + cmd(1, payload=b"")]}),
]


def setup_engine() -> Switch:
    sw = Switch()
    sw.load(program())
    for g, reps in GROUPS.items():
        sw.pre.create(g, reps)
    for s, reps in SESSIONS.items():
        sw.clones.set(s, reps)
    return sw


def cli_setup() -> list[str]:
    cmds, node = [], 0
    groups = dict(GROUPS)
    for s, reps in SESSIONS.items():
        groups[1000 + s] = reps
    for g, reps in groups.items():
        cmds.append(f"mc_mgrp_create {g}")
        for port, rid in reps:
            cmds += [f"mc_node_create {rid} {port}", f"mc_node_associate {g} {node}"]
            node += 1
    for s in SESSIONS:
        cmds.append(f"mirroring_add_mc {s} {1000 + s}")
    return cmds


@pytest.mark.parametrize("k", range(len(CASES)))
def test_engine_packet_paths(k):
    sw = setup_engine()
    data, want = CASES[k]
    got: dict = {}
    for port, out in sw.process(IN, data):
        got.setdefault(port, []).append(out)
    assert {p: [o.hex() for o in v] for p, v in got.items()} == \
        {p: [o.hex() for o in v] for p, v in want.items()}
    assert sw.stats["errors"] == 0


def test_endless_recirculation_is_bounded():
    j = program()
    # make every egress pass recirculate: the engine must stop, BMv2 would loop
    eg = j["pipelines"][1]["tables"][0]
    eg["default_entry"]["action_id"] = next(a["id"] for a in j["actions"]
                                            if a["name"] == "recirc_out")
    sw = Switch()
    sw.load(j)
    assert sw.process(IN, cmd(1)) == []
    assert sw.stats["errors"] == 0 and sw.stats["dropped"] >= 1


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "packet paths checked on the engine only")
def test_packet_paths_match_bmv2(tmp_path):
    path = tmp_path / "paths.json"
    path.write_text(json.dumps(program()))
    ports = {IN, 1, 2, 3, 4, 6}
    with bmv2.SimpleSwitch(path, ports, [(IN, d) for d, _ in CASES], wait=2) as ss:
        ss.cli(cli_setup())
        expected = sum(len(v) for _, w in CASES for v in w.values())
        got = ss.settle(expected=expected, idle=1.5)
    want: dict = {p: [] for p in ports}
    for _, w in CASES:
        for p, pkts in w.items():
            want[p] += pkts
    # BMv2 interleaves recirculated packets with later inputs: compare as multisets
    assert {p: sorted(o.hex() for o in v) for p, v in got.items()} == \
        {p: sorted(o.hex() for o in v) for p, v in want.items()}
