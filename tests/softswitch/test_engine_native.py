"""The native tier (softswitch/native/) against the Python tier, its reference.

Every program here runs on both tiers from the same JSON and the same frames; outputs,
registers and counters must be equal, bit for bit (the aggregation program's rounding bits
are a hash of the packet, not draws). The other engine tests run on both tiers too
(conftest.py); these add the programs and paths only the native tier has: lane loops,
interleaved register banks, table buffers, the whole-packet call and its multicast mirror.
"""

import json
import logging
import random

import pytest

from bench.softswitch_vector import elems_of, stream
from softswitch import Switch, SwitchError
from softswitch.native import engine as native_engine
from softswitch.tables import Entry
from tests.p4 import conformance, kit
from tests.p4.kit import assign, expr, extract, field, hexstr, prim
from tests.softswitch import test_engine_bmv2_exprs as bmv2_exprs
from tests.softswitch import test_engine_tables as tables
from tests.softswitch import test_engine_vector as vector
from worker import wire

AGG = "p4src/build/agg.json"
WIDE = "p4src/build/wide/agg.json"
NATIVE = {"deadtable", "exprs", "externs", "hashsel", "parse", "samename", "tables", "p4rt_basic"}
PYTHON = {"replication": "log_msg", "stacks": "header stacks", "varcopy": "varbit",
          "varlen": "header stacks", "vlbits": "varbit", "vlstack": "header stacks",
          "hashwide": "72 bits"}


def both(j: dict, seed: int = 1) -> tuple[Switch, Switch]:
    nat, py = Switch(seed=seed, native=True), Switch(seed=seed, native=False, vectorize=False)
    nat.load(j)
    py.load(j)
    assert nat.tier == "native" and py.tier == "python"
    return nat, py


def same_state(a: Switch, b: Switch) -> None:
    """Registers, counters, direct counters and statistics equal."""
    for name, r in a.registers.items():
        assert [r.read(i) for i in range(r.size)] == \
            [b.registers[name].read(i) for i in range(r.size)], name
    for name, c in a.counters.items():
        assert [c.read(i) for i in range(c.size)] == \
            [b.counters[name].read(i) for i in range(c.size)], name
    for name, t in a.tables.items():
        assert sorted((repr(e.key), e.packets, e.bytes) for e in t.entries()) == \
            sorted((repr(e.key), e.packets, e.bytes) for e in b.tables[name].entries()), name
    assert a.stats == b.stats


# -- which programs the tier takes ----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(NATIVE | set(PYTHON)))
def test_conformance_programs_run_where_the_native_tier_compiles_them(name, caplog):
    j = json.loads((conformance.BUILD / f"{name}.json").read_text())
    sw = Switch(native=True)
    with caplog.at_level(logging.INFO, logger="softswitch"):
        sw.load(j)
    if name in NATIVE:
        assert sw.tier == "native"
    else:
        assert sw.tier == "python"
        assert PYTHON[name] in caplog.text  # the reason is logged


def test_turned_off_the_python_tier_runs(monkeypatch):
    j = json.loads((conformance.BUILD / "tables.json").read_text())
    monkeypatch.setenv("NATSWITCH_NATIVE", "0")
    sw = Switch()
    sw.load(j)
    assert sw.tier == "python"


def test_a_value_no_256_bit_integer_holds_keeps_the_program_on_the_python_tier(caplog):
    p = kit.Program()
    p.header("h", [("a", 64), ("b", 64)])
    p.state("start", [extract("h")])
    big = expr("*", expr("*", expr("*", field("h", "a"), field("h", "b")),
                         expr("*", field("h", "a"), field("h", "b"))),
               expr("*", field("h", "a"), field("h", "b")))  # up to 2^384: compared, so exact
    p.action("cmp", [assign(field("h", "a"), expr("b2d", None,
                                                  expr(">", big, hexstr(1 << 300)))),
                     assign(field("standard_metadata", "egress_spec"), hexstr(1))])
    p.call("ingress", "c", "cmp")
    sw = Switch(native=True)
    with caplog.at_level(logging.INFO, logger="softswitch"):
        sw.load(p.json())
    assert sw.tier == "python" and "256 bits" in caplog.text
    assert sw.process(0, b"\xff" * 16)[0][1][:8] == (1).to_bytes(8, "big")


# -- expressions and lane loops ----------------------------------------------------------------

def test_random_expressions_equal_the_python_tier():
    native = 0
    for seed in range(40):
        j, packets = bmv2_exprs.build(bmv2_exprs.SEED + seed)
        nat, py = Switch(native=True), Switch(native=False, vectorize=False)
        nat.load(j)
        py.load(j)
        native += nat.tier == "native"
        for pkt in packets:
            assert nat.process(0, pkt) == py.process(0, pkt), f"seed {seed}"
        assert nat.stats == py.stats
    assert native >= 36  # a few may hold values beyond 256 bits


def test_random_lane_templates_equal_the_python_tier():
    for seed in range(60):
        rng = random.Random(seed)
        j, nbytes = vector.random_program(seed)
        nat, py = both(j)
        for _ in range(20):
            pkt = bytes(rng.getrandbits(8) for _ in range(nbytes))
            assert nat.process(0, pkt) == py.process(0, pkt), f"seed {seed}"
        same_state(nat, py)


@pytest.mark.parametrize("loop_carried", [False, True])
def test_lane_loops_over_register_banks_equal_the_python_tier(loop_carried):
    nat, py = both(vector.program(reg_size=8, loop_carried=loop_carried))
    # indices past the 8 cells: a read gives 0, a write does nothing, in every lane
    for pkt in vector.frames(2, 300, idx_max=12):
        assert nat.process(0, pkt) == py.process(0, pkt)
    same_state(nat, py)
    # the control plane reads and writes the banked cells
    nat.registers["acc3"].write(5, 0xDEADBEEF)
    py.registers["acc3"].write(5, 0xDEADBEEF)
    for pkt in vector.frames(3, 20, idx_max=7):
        assert nat.process(0, pkt) == py.process(0, pkt)
    same_state(nat, py)


def test_a_lane_that_reads_the_next_lanes_field_sees_it_unchanged():
    """Lane i reads o.v(i+1) before lane i+1 writes it: the loop keeps the order."""
    n = 16
    p = kit.Program()
    p.header("h", [(f"a{i}", 32) for i in range(n + 1)])
    p.header("o", [(f"v{i}", 32) for i in range(n + 1)])
    p.state("start", [extract("h")])
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    prims += [assign(field("o", f"v{i}"), field("h", f"a{i}")) for i in range(n + 1)]
    for i in range(n):
        prims.append(assign(field("o", f"v{i}"),
                            expr("&", expr("+", field("o", f"v{i + 1}"), hexstr(i)),
                                 hexstr(0xFFFFFFFF))))
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("chain", prims)
    p.call("ingress", "c", "chain")
    nat, py = both(p.json())
    assert "lanebody" in nat._prog.native.ir  # the chain runs as a loop
    rng = random.Random(4)
    for _ in range(20):
        pkt = bytes(rng.getrandbits(8) for _ in range(4 * (n + 1)))
        out = nat.process(0, pkt)
        assert out == py.process(0, pkt)
        got = out[0][1][4 * (n + 1):]
        a = [int.from_bytes(pkt[4 * i:4 * i + 4], "big") for i in range(n + 1)]
        assert int.from_bytes(got[:4], "big") == (a[1] + 0) & 0xFFFFFFFF


# -- the aggregation program ---------------------------------------------------------------------

def job_entry(enc: int, workers: int, session: int) -> Entry:
    return Entry((1,), "NatIngress.agg.job_root", [0, 64, workers, 1, enc, 255, session, 0x5EED])


def agg_switch(j: dict, native: bool, enc: int, workers: int = 4) -> Switch:
    """One job in session 1."""
    sw = Switch(seed=1, native=native, vectorize=False)
    sw.load(j)
    assert sw.tier == ("native" if native else "python")
    sw.tables["NatIngress.agg.jobs"].insert(job_entry(enc, workers, 1))
    for w in range(workers):
        sw.tables["NatIngress.agg.children"].insert(Entry(
            (1, w + 1), "NatIngress.agg.set_child", [w, 1, 1 << 30]))
    sw.pre.create(1, [(w + 1, 0) for w in range(workers)])
    return sw


@pytest.mark.parametrize("enc", [wire.ENC_FIXED32, wire.ENC_CNAT8])
def test_the_aggregation_program_equals_the_python_tier(enc):
    j = json.loads(open(AGG).read())
    nat, py = agg_switch(j, True, enc), agg_switch(j, False, enc)
    elems = elems_of(j)
    first, second = stream(4, 64, 600, elems, 1, 7), stream(4, 64, 200, elems, 2, 8)
    rng = random.Random(3)
    # replays: of the old session (WRONG_SESSION) and of the new one (STALE), by both
    pkts = first + second + [(p, f) for p, f in rng.sample(first + second, 100)]
    results = 0
    for k, (port, frame) in enumerate(pkts):
        if k == len(first):     # the control plane moves the job to session 2
            for sw in (nat, py):
                sw.tables["NatIngress.agg.jobs"].modify(job_entry(enc, 4, 2))
        a, b = nat.process(port, frame), py.process(port, frame)
        assert [p for p, _ in a] == [p for p, _ in b]
        for (_, fa), (_, fb) in zip(a, b, strict=True):
            results += 1
            assert fa == fb     # rounding bits are a hash of the packet: byte for byte
    assert results >= 800
    same_state(nat, py)


def test_the_wide_program_runs_natively_and_equals_the_python_tier():
    j = json.loads(open(WIDE).read())
    nat, py = agg_switch(j, True, wire.ENC_CNAT8), agg_switch(j, False, wire.ENC_CNAT8)
    for port, frame in stream(4, 64, 96, elems_of(j), 1, 7):
        a, b = nat.process(port, frame), py.process(port, frame)
        assert [p for p, _ in a] == [p for p, _ in b]
        assert all(x == y for (_, x), (_, y) in zip(a, b, strict=True))
    same_state(nat, py)


def test_the_whole_packet_call_equals_the_step_by_step_path():
    """ns_process against Switch._run driving ns_ingress / ns_egress (a multicast group
    and a unicast route), the same frames, the same state after."""
    j = json.loads(open(AGG).read())
    fast, steps = agg_switch(j, True, wire.ENC_FIXED32), agg_switch(j, True, wire.ENC_FIXED32)
    steps._prog.native.fast = False
    elems = elems_of(j)
    for port, frame in stream(4, 64, 400, elems, 1, 7):
        assert fast.process(port, frame) == steps.process(port, frame)
    same_state(fast, steps)


def test_group_changes_reach_the_mirror_and_large_groups_take_the_python_path():
    j = json.loads(open(AGG).read())
    nat, py = agg_switch(j, True, wire.ENC_FIXED32), agg_switch(j, False, wire.ENC_FIXED32)
    elems = elems_of(j)
    pkts = stream(4, 64, 4 * 64 * 3, elems, 1, 7)
    third = len(pkts) // 3
    for k, (port, frame) in enumerate(pkts):
        if k == third:  # results now to three ports and a large group of 100 replicas
            for sw in (nat, py):
                sw.pre.modify(1, [(1, 0), (2, 0), (3, 0)] + [(100 + i, i) for i in range(97)])
        if k == 2 * third:  # the group gone: results are dropped
            for sw in (nat, py):
                sw.pre.delete(1)
        assert nat.process(port, frame) == py.process(port, frame), k
    same_state(nat, py)


def random_key(rng: random.Random, kind: str, w: int):
    full = (1 << w) - 1
    v = rng.getrandbits(w)
    if kind == "exact":
        return v
    if kind == "lpm":
        plen = rng.randint(0, w)
        return (v & (full ^ ((1 << (w - plen)) - 1)), plen)
    if kind == "ternary":
        m = rng.getrandbits(w)
        return (v & m, m)
    if kind == "range":
        lo, hi = sorted((v, rng.getrandbits(w)))
        return (lo, hi)
    return None if rng.random() < 0.3 else v  # optional


@pytest.mark.parametrize("kinds", [
    {"a": "exact", "b": "exact", "c": "exact"},
    {"a": "exact", "c": "lpm"},
    {"a": "ternary", "b": "ternary", "c": "exact"},
    {"a": "range", "b": "exact", "c": "ternary"},
    {"a": "optional", "b": "range", "c": "lpm"},
])
def test_tables_of_every_match_kind_and_their_changes_equal_the_python_tier(kinds):
    rng = random.Random(len(kinds) * 7 + sum(map(len, kinds.values())))
    nat, py = both(tables.program(kinds, size=4096))
    widths = dict(tables.FIELDS)
    prio = any(k in ("ternary", "range", "optional") for k in kinds.values())
    n = 3000 if set(kinds.values()) == {"exact"} else 300  # exact: the hash index collides
    keys = set()
    while len(keys) < n:
        keys.add(tuple(random_key(rng, k, widths[f]) for f, k in kinds.items()))
    for i, key in enumerate(sorted(keys, key=repr)):
        e = Entry(key, "set", [i & 0xFF], priority=rng.randint(1, 50) if prio else 0)
        try:
            nat.tables["t"].insert(e)
        except SwitchError:  # a duplicate (key, priority) once masked: both refuse it
            continue
        py.tables["t"].insert(e)
    known = [e.key for e in nat.tables["t"].entries()]
    for step in range(4):
        for _ in range(300):
            vals = {f: rng.getrandbits(widths[f]) for f in widths}
            if rng.random() < 0.5:  # aim at an entry: its exact values, its range's low end
                k = rng.choice(known)
                for (f, kind), kk in zip(kinds.items(), k, strict=True):
                    if kind in ("exact", "optional") and kk is not None:
                        vals[f] = kk
                    elif kind in ("lpm", "ternary", "range"):
                        vals[f] = kk[0]
            assert tables.run(nat, **vals) == tables.run(py, **vals), step
        for e in rng.sample(nat.tables["t"].entries(), 20):  # delete some, modify others
            if rng.random() < 0.5:
                nat.tables["t"].delete(e.key, e.priority)
                py.tables["t"].delete(e.key, e.priority)
            else:
                m = Entry(e.key, "set", [rng.getrandbits(8)], e.priority)
                nat.tables["t"].modify(m)
                py.tables["t"].modify(m)
        if step == 2:  # and a default action with parameters
            for sw in (nat, py):
                sw.tables["t"].set_default("set", [0x5A])
    same_state(nat, py)  # direct counters included


def test_native_code_is_compiled_once_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("NATSWITCH_CACHE", str(tmp_path))
    j = json.loads((conformance.BUILD / "parse.json").read_text())
    before = dict(native_engine.stats)
    Switch(native=True).load(j)
    assert native_engine.stats["compiled"] == before["compiled"] + 1
    assert len(list((tmp_path / "native").glob("*.o"))) == 1
    Switch(native=True).load(j)  # another switch, as another process would: the cache
    assert native_engine.stats["compiled"] == before["compiled"] + 1
    assert native_engine.stats["cached"] == before["cached"] + 1


def test_without_a_writable_cache_the_program_still_compiles(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.write_text("a file where the cache's folder would be")
    monkeypatch.setenv("NATSWITCH_CACHE", str(ro))
    j = json.loads((conformance.BUILD / "parse.json").read_text())
    sw = Switch(native=True)
    sw.load(j)
    assert sw.tier == "native"


@pytest.mark.parametrize("cached", [False, True])
def test_machine_code_calling_what_this_process_lacks_is_refused_not_run(cached, tmp_path,
                                                                        monkeypatch):
    """MCJIT leaves such a call, and the object's other external calls (memcpy) with it,
    jumping to address 0: the module must be refused (its program then runs on the Python
    tier), from a fresh compile and from the cache alike."""
    import ctypes

    from softswitch.native.ir import Unsupported

    monkeypatch.setenv("NATSWITCH_CACHE", str(tmp_path))
    ir = """declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare i64 @natswitch_not_a_symbol(i64)
define i64 @f(ptr %a, ptr %b, i64 %x) {
  call void @llvm.memcpy.p0.p0.i64(ptr %a, ptr %b, i64 528, i1 false)
  %r = call i64 @natswitch_not_a_symbol(i64 %x)
  ret i64 %r
}
"""
    exports = {"f": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64])}
    for _ in range(2 if cached else 1):
        with pytest.raises(Unsupported, match="natswitch_not_a_symbol"):
            native_engine.compile_module(ir, exports)
    assert native_engine.undefined_symbols(
        next((tmp_path / "native").glob("*.o")).read_bytes()) == \
        ["memcpy", "natswitch_not_a_symbol"]


DIV_FIELDS = [("u64", 64, False), ("s64", 64, True), ("u32", 32, False), ("s16", 16, True),
              ("u8", 8, False)]


def test_division_by_values_known_at_run_time_equals_the_python_tier():
    """An i128 division compiles to a call to __udivti3 and kin, which the JIT cannot
    resolve here (the program would be refused, or before that crash the process): every
    division and modulo of 64-bit and narrower fields by each other runs natively."""
    p = kit.Program()
    p.header("i", DIV_FIELDS)
    outs = [(f"{a}_{'div' if op == '/' else 'mod'}_{b}", 64, (k % 2) == 1)
            for k, (a, b, op) in enumerate((a[0], b[0], op) for a in DIV_FIELDS
                                           for b in DIV_FIELDS for op in "/%")]
    p.header("o", outs)
    p.state("start", [extract("i")])
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    for name, _, _ in outs:
        a, op, b = name.split("_")
        prims.append(assign(field("o", name), expr("/" if op == "div" else "%", field("i", a),
                                                   field("i", b))))
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("divide", prims)
    p.call("ingress", "call_divide", "divide")
    nat, py = both(p.json())
    rng = random.Random(5)
    packets = [bytes(rng.getrandbits(8) for _ in range(23)) for _ in range(20)]
    packets += [b"\xff" * 23, b"\x80" * 23, b"\x7f" * 23, bytes(23), b"\x01" * 23]
    for pkt in packets:
        assert nat.process(0, pkt) == py.process(0, pkt), pkt.hex()
    assert nat.stats == py.stats and nat.stats["errors"] == 0


def test_random_with_a_bound_known_at_run_time_runs_natively():
    p = kit.Program()
    p.header("i", [("lo", 8, False), ("hi", 64, False)])
    p.header("o", [("r", 64, False)])
    p.state("start", [extract("i")])
    p.action("draw", [prim("add_header", {"type": "header", "value": "o"}),
                      prim("modify_field_rng_uniform", field("o", "r"), field("i", "lo"),
                           field("i", "hi")),
                      assign(field("standard_metadata", "egress_spec"), hexstr(1))])
    p.call("ingress", "call_draw", "draw")
    nat, _ = both(p.json())
    for lo, hi in ((0, 0), (3, 9), (0, 1000), (7, (1 << 64) - 1), (0, (1 << 64) - 1),
                   (200, 100)):
        for _ in range(20):
            [(_, out)] = nat.process(0, bytes([lo]) + hi.to_bytes(8, "big"))
            r = int.from_bytes(out[9:], "big")
            assert r == 0 if lo > hi else lo <= r <= hi, (lo, hi, r)


def test_a_frame_too_long_for_the_native_tier_is_an_error_not_a_crash():
    j = json.loads((conformance.BUILD / "parse.json").read_text())
    sw = Switch(native=True)
    sw.load(j)
    assert sw.process(0, bytes(70000)) == []
    assert sw.stats["errors"] == 1 and sw.stats["dropped"] == 1
    sw.process(0, bytes(64))  # and the switch goes on
    assert sw.stats["errors"] == 1


def test_control_plane_reads_give_ints_and_64_bit_cells_round_trip():
    p = kit.Program()
    p.header("h", [("x", 8)])
    p.state("start", [extract("h")])
    p.registers.append({"name": "r64", "id": 0, "size": 4, "bitwidth": 64})
    p.counters.append({"name": "c", "id": 0, "size": 4, "is_direct": False})
    p.action("a", [prim("count", {"type": "counter_array", "value": "c"}, hexstr(1)),
                   prim("register_write", {"type": "register_array", "value": "r64"},
                        hexstr(2), expr("+", prim_read := hexstr((1 << 64) - 2), hexstr(0))),
                   assign(field("standard_metadata", "egress_spec"), hexstr(1))])
    del prim_read
    p.call("ingress", "t", "a")
    nat, py = both(p.json())
    for sw in (nat, py):
        sw.registers["r64"].write(1, (1 << 64) - 1)
        sw.counters["c"].write(3, (1 << 64) - 5, 7)
        sw.process(0, b"\x01")
        assert sw.registers["r64"].read(1) == (1 << 64) - 1
        assert sw.registers["r64"].read(2) == (1 << 64) - 2
        pk, by = sw.counters["c"].read(1)
        assert type(pk) is int and type(by) is int and (pk, by) == (1, 1)
        assert sw.counters["c"].read(3) == ((1 << 64) - 5, 7)
    same_state(nat, py)
