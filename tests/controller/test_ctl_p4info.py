"""Name-based entities to P4Runtime protos and back, under a small P4Info written here."""

import pytest
from p4.config.v1 import p4info_pb2

from controller.entities import Exact, Lpm, MulticastGroupEntry, TableEntry, Ternary, ipv4, mac
from controller.p4info import P4Info, P4InfoError, Pipeline, decode, encode

P4INFO_TEXT = """
tables {
  preamble { id: 1 name: "Ing.fwd.routes" }
  match_fields { id: 1 name: "hdr.ipv4.dst_addr" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 }
  action_refs { id: 11 annotations: "@defaultonly" scope: DEFAULT_ONLY }
}
tables {
  preamble { id: 2 name: "Ing.agg.children" }
  match_fields { id: 1 name: "hdr.agg.job_id" bitwidth: 16 match_type: EXACT }
  match_fields { id: 2 name: "sm.ingress_port" bitwidth: 9 match_type: EXACT }
  action_refs { id: 12 }
}
tables {
  preamble { id: 3 name: "Ing.acl" }
  match_fields { id: 1 name: "hdr.ipv4.ttl" bitwidth: 8 match_type: TERNARY }
  action_refs { id: 11 }
}
actions {
  preamble { id: 10 name: "Ing.fwd.route" }
  params { id: 1 name: "smac" bitwidth: 48 }
  params { id: 2 name: "dmac" bitwidth: 48 }
  params { id: 3 name: "port" bitwidth: 9 }
}
actions { preamble { id: 11 name: "Ing.fwd.no_route" } }
actions {
  preamble { id: 12 name: "Ing.agg.set_child" }
  params { id: 1 name: "index" bitwidth: 5 }
}
counters { preamble { id: 20 name: "Ing.drops" } spec { unit: BOTH } size: 16 }
"""


@pytest.fixture
def info():
    return P4Info.from_text(P4INFO_TEXT)


def route(ip="10.0.1.1", plen=32, port=3, **extra):
    return TableEntry.make("Ing.fwd.routes", {"hdr.ipv4.dst_addr": Lpm(ipv4(ip), plen)},
                           "Ing.fwd.route", {"smac": mac("02:53:00:00:00:01"),
                                             "dmac": mac("02:00:0a:00:01:01"), "port": port,
                                             **extra})


def test_canonical_bytes():
    assert encode(0, 9, "x") == b"\x00"
    assert encode(3, 9, "x") == b"\x03"
    assert encode(256, 9, "x") == b"\x01\x00"
    assert encode(mac("02:00:00:00:00:01"), 48, "x") == bytes([2, 0, 0, 0, 0, 1])
    assert decode(b"\x00\x00\x05") == 5
    with pytest.raises(P4InfoError, match="does not fit bit<9>"):
        encode(512, 9, "port")
    with pytest.raises(P4InfoError):
        encode(-1, 9, "port")


def test_table_entry_round_trip(info):
    e = route()
    msg = info.table_entry_proto(e)
    assert msg.table_id == 1
    assert msg.match[0].lpm.value == bytes([10, 0, 1, 1]) and msg.match[0].lpm.prefix_len == 32
    assert [p.value for p in msg.action.action.params] == [
        bytes([2, 0x53, 0, 0, 0, 1]), bytes([2, 0, 10, 0, 1, 1]), b"\x03"]
    back = info.table_entry(msg)
    assert back == e and back.key == e.key
    assert "10.0.1.1/32" in repr(back) and "dmac=02:00:0a:00:01:01" in repr(back)


def test_non_canonical_values_read_back_equal(info):
    msg = info.table_entry_proto(route())
    msg.action.action.params[2].value = b"\x00\x03"       # a server may pad to bytes
    assert info.table_entry(msg) == route()


def test_equality_ignores_order_but_not_values(info):
    a = TableEntry.make("t", {"x": 1, "y": 2}, "a", {"p": 1, "q": 2})
    b = TableEntry.make("t", {"y": 2, "x": 1}, "a", {"q": 2, "p": 1})
    assert a == b and hash(a) == hash(b) and a.key == b.key
    assert a != TableEntry.make("t", {"x": 1, "y": 2}, "a", {"p": 1, "q": 3})
    assert route(port=3).key == route(port=4).key and route(port=3) != route(port=4)


def test_standard_metadata_names_resolve_to_the_programs_name(info):
    e = TableEntry.make("Ing.agg.children", {"hdr.agg.job_id": 1,
                                             "standard_metadata.ingress_port": 5},
                        "Ing.agg.set_child", {"index": 4})
    canon = info.canonical(e)
    assert dict(canon.match) == {"hdr.agg.job_id": Exact(1), "sm.ingress_port": Exact(5)}
    with pytest.raises(P4InfoError, match="no match field 'hdr.agg.port'"):
        info.table_entry_proto(TableEntry.make("Ing.agg.children", {"hdr.agg.job_id": 1,
                                                                    "hdr.agg.port": 5},
                                               "Ing.agg.set_child", {"index": 4}))


@pytest.mark.parametrize("entry,message", [
    (route(plen=24), "bits set beyond the /24 prefix"),
    (route(port=600), "does not fit bit<9>"),
    (TableEntry.make("Ing.nope", {}, "Ing.fwd.route"), "no table 'Ing.nope'"),
    (TableEntry.make("Ing.fwd.routes", {"hdr.ipv4.dst_addr": Lpm(1, 32)}, "Ing.fwd.oops"),
     "no action 'Ing.fwd.oops'"),
    (TableEntry.make("Ing.fwd.routes", {"hdr.ipv4.dst_addr": Lpm(1, 32)}, "Ing.agg.set_child",
                     {"index": 1}), "not an action of table"),
    (TableEntry.make("Ing.fwd.routes", {"hdr.ipv4.dst_addr": Lpm(1, 32)}, "Ing.fwd.route",
                     {"smac": 1, "dmac": 2}), "parameter 'port' not given"),
    (route(color=1), "no parameter 'color'"),
    (TableEntry.make("Ing.agg.children", {"hdr.agg.job_id": 1}, "Ing.agg.set_child",
                     {"index": 1}), "exact field(s) sm.ingress_port not given"),
    (TableEntry.make("Ing.fwd.routes", {"hdr.ipv4.dst_addr": Exact(1)}, "Ing.fwd.route",
                     {"smac": 1, "dmac": 2, "port": 1}), "Exact match for a LPM field"),
])
def test_bad_entries_are_named(info, entry, message):
    with pytest.raises(P4InfoError) as err:
        info.table_entry_proto(entry)
    assert message in str(err.value)


def test_wildcards_are_omitted(info):
    e = TableEntry.make("Ing.acl", {"hdr.ipv4.ttl": Ternary(0, 0)}, "Ing.fwd.no_route",
                        priority=10)
    assert e.match == ()
    assert len(info.table_entry_proto(e).match) == 0
    t = TableEntry.make("Ing.acl", {"hdr.ipv4.ttl": Ternary(0x40, 0xF0)}, "Ing.fwd.no_route",
                        priority=10)
    assert info.table_entry(info.table_entry_proto(t)) == t
    with pytest.raises(P4InfoError, match="outside the mask"):
        info.table_entry_proto(TableEntry.make("Ing.acl", {"hdr.ipv4.ttl": Ternary(0x41, 0xF0)},
                                               "Ing.fwd.no_route", priority=1))


def test_multicast_round_trip(info):
    g = MulticastGroupEntry.make(7, [3, 1, 2])
    assert g.replicas == ((1, 0), (2, 0), (3, 0))
    msg = info.multicast_proto(g)
    assert msg.multicast_group_entry.multicast_group_id == 7
    assert info.multicast_entry(msg.multicast_group_entry) == g
    # A server that answers with the newer bytes `port` field reads back the same.
    msg.multicast_group_entry.replicas[0].port = b"\x01"
    assert info.multicast_entry(msg.multicast_group_entry) == g


def test_pipeline_cookie(tmp_path, info):
    p4info = tmp_path / "x.p4info.txt"
    p4info.write_text(P4INFO_TEXT)
    js = tmp_path / "x.json"
    js.write_text("{}")
    a = Pipeline.load(str(p4info), str(js))
    assert a.cookie == Pipeline.load(str(p4info), str(js)).cookie
    assert a.is_running(a.p4info, a.cookie)
    assert a.is_running(P4Info.from_text(P4INFO_TEXT), 0)      # no cookie kept: by P4Info
    assert not a.is_running(None, 0)
    js.write_text('{"changed": 1}')
    b = Pipeline.load(str(p4info), str(js))
    assert b.cookie != a.cookie and not b.is_running(a.p4info, a.cookie)
    with pytest.raises(P4InfoError, match="make p4"):
        Pipeline.load(str(tmp_path / "missing.txt"), str(js))
    other = p4info_pb2.P4Info()
    assert not a.is_running(P4Info(other), 0)
