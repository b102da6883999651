"""The vector fast path (softswitch/program/vector.py) computes what the scalar code does:
groups found, wrap and width semantics exact, loop-carried values and shared locations
left to the scalar code, out-of-range register indices falling back."""

import random

import pytest

from softswitch import Switch
from softswitch.program.actions import WIDE_LANES, zero_runs
from softswitch.program.module import Module
from softswitch.program.vector import HELPERS, MIN_LANES, find_groups, reader
from tests.p4 import kit
from tests.p4.kit import assign, expr, extract, field, hexstr, prim

M32 = 0xFFFFFFFF
N = 24  # lanes: enough to be vectorised (MIN_LANES)


def test_find_groups_finds_the_template_and_its_lanes():
    t = field("scalars", "t")
    head = [assign(t, hexstr(0))]
    lanes = []
    for i in range(10):
        lanes += [prim("register_read", t, {"type": "register_array", "value": f"r{i}"},
                       field("h", "idx")),
                  assign(field("o", f"v{i}"), expr("+", field("o", f"v{i}"), t)),
                  prim("register_write", {"type": "register_array", "value": f"r{i}"},
                       field("h", "idx"), field("o", f"v{i}"))]
    tail = [assign(field("o", "v0"), hexstr(1))]
    assert find_groups(head + lanes + tail) == [(1, 3, 10)]
    # fewer lanes than MIN_LANES: no group
    assert find_groups(lanes[:3 * (MIN_LANES - 1)]) == []
    # a lane that differs in shape ends the run
    odd = lanes[:3 * 9] + [assign(field("o", "v9"), expr("-", field("o", "v9"), t))]
    assert find_groups(odd) == [(0, 3, 9)]


def wrap_ops(x, t):
    """A lane's arithmetic: subtraction that wraps, shifts, a ternary, a signed cast."""
    d = expr("&", expr("-", x, t), hexstr(M32))  # may go below 0: wraps
    sh = expr("&", expr("<<", d, hexstr(5)), hexstr(M32))
    big = expr(">", d, hexstr(0x80000000))
    sel = expr("?", sh, expr(">>", d, hexstr(3)), cond=big)
    neg = expr("*", expr("two_comp_mod", expr("-", hexstr(0), sel), hexstr(16)), hexstr(3))
    return expr("&", expr("^", neg, expr("*", sel, hexstr(0x01010101))), hexstr(M32))


def tcm(x: int, w: int) -> int:
    h = 1 << (w - 1)
    return ((x + h) & ((1 << w) - 1)) - h


def reference(pkt: bytes, regs: list[list[int]]) -> bytes:
    """What the lanes compute, in plain Python (regs: per lane, per index; updated)."""
    idx = pkt[0]
    vs, ss, bs = [], [], []
    for i in range(N):
        a = int.from_bytes(pkt[1 + 4 * i:5 + 4 * i], "big")
        t = regs[i][idx]
        u = (a + t) & M32
        regs[i][idx] = u
        d = (u - t) & M32
        sel = (d << 5) & M32 if d > 0x80000000 else d >> 3
        vs.append((tcm(-sel, 16) * 3 ^ sel * 0x01010101) & M32)
        ss.append(tcm(t - a, 16))
        bs.append(((a >> 3) + t) & 0xFF)
    return pkt + b"".join(v.to_bytes(4, "big") for v in vs) + \
        b"".join((x & 0xFFFF).to_bytes(2, "big") for x in ss) + bytes(bs)


def program(reg_size: int = 16, loop_carried: bool = False) -> dict:
    p = kit.Program()
    p.header("h", [("idx", 8)] + [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 32) for i in range(N)] + [(f"s{i}", 16, True) for i in range(N)]
             + [(f"b{i}", 8) for i in range(N)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    u = p.scalar("u", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    for i in range(N):
        r = {"type": "register_array", "value": f"acc{i}"}
        p.registers.append({"name": f"acc{i}", "id": i, "size": reg_size, "bitwidth": 32})
        a, v = field("h", f"a{i}"), field("o", f"v{i}")
        if loop_carried:  # u carries each lane's value into the next: must stay scalar
            prims += [assign(u, expr("&", expr("+", u, a), hexstr(M32))), assign(v, u)]
            continue
        prims += [prim("register_read", t, r, field("h", "idx")),
                  assign(u, expr("&", expr("+", a, t), hexstr(M32))),
                  prim("register_write", r, field("h", "idx"), u),
                  assign(v, wrap_ops(u, t)),
                  assign(field("o", f"s{i}"), expr("-", t, a)),  # into a signed 16-bit field
                  assign(field("o", f"b{i}"), expr("+", expr(">>", a, hexstr(3)), t))]  # 8 bits
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("lanes", prims)
    p.call("ingress", "lanes_t", "lanes")
    return p.json()


def pair(j: dict) -> tuple[Switch, Switch]:
    fast, slow = Switch(vectorize=True, native=False), Switch(vectorize=False, native=False)
    fast.load(j)
    slow.load(j)
    return fast, slow


def frames(seed: int, n: int, idx_max: int = 15):
    rng = random.Random(seed)
    edge = [0, 1, 0x7FFFFFFF, 0x80000000, 0x80000001, M32 - 1, M32]
    for _ in range(n):
        vals = [rng.choice(edge) if rng.random() < 0.3 else rng.getrandbits(32)
                for _ in range(N)]
        yield bytes([rng.randint(0, idx_max)]) + b"".join(v.to_bytes(4, "big") for v in vals)


def test_vector_code_equals_scalar_code_frames_and_registers():
    fast, slow = pair(program())
    assert "_vread" in fast.program_source and "B_" in fast.program_source
    assert "np." not in slow.program_source
    regs = [[0] * 16 for _ in range(N)]
    for pkt in frames(1, 300):
        out = fast.process(0, pkt)
        assert out == [(1, reference(pkt, regs))]
        assert slow.process(0, pkt) == out
    for i in range(N):
        assert [fast.registers[f"acc{i}"].read(k) for k in range(16)] == \
            [slow.registers[f"acc{i}"].read(k) for k in range(16)]
        assert isinstance(fast.registers[f"acc{i}"].read(3), int)
    assert fast.stats["errors"] == slow.stats["errors"] == 0


def test_out_of_range_register_index_runs_the_scalar_code():
    fast, slow = pair(program(reg_size=8))
    for pkt in frames(2, 200, idx_max=40):  # most indices outside the 8 cells
        assert fast.process(0, pkt) == slow.process(0, pkt)
    for i in range(N):
        assert [fast.registers[f"acc{i}"].read(k) for k in range(8)] == \
            [slow.registers[f"acc{i}"].read(k) for k in range(8)]


def test_register_writes_over_p4runtime_reach_the_vector_bank():
    fast, slow = pair(program())
    for sw in (fast, slow):
        for i in range(N):
            sw.registers[f"acc{i}"].write(5, (0x9E3779B9 * (i + 1)) & M32)
    for pkt in frames(3, 50):
        pkt = b"\x05" + pkt[1:]
        assert fast.process(0, pkt) == slow.process(0, pkt)
    fast.registers["acc0"].reset()
    assert fast.registers["acc0"].read(5) == 0


def test_loop_carried_value_is_not_vectorised():
    fast, slow = pair(program(loop_carried=True))
    assert "np." not in fast.program_source
    for pkt in frames(4, 20):
        assert fast.process(0, pkt) == slow.process(0, pkt)


@pytest.mark.parametrize("lo,hi", [(0, M32), (0, 255), (3, 10)])
def test_random_in_vectors_stays_in_bounds_and_varies(lo, hi):
    p = kit.Program()
    p.header("h", [("x", 8)])
    p.header("o", [(f"v{i}", 32) for i in range(N)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    for i in range(N):
        prims += [prim("modify_field_rng_uniform", t, hexstr(lo), hexstr(hi)),
                  assign(field("o", f"v{i}"), expr("&", expr("+", t, hexstr(0)), hexstr(M32)))]
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("draw", prims)
    p.call("ingress", "draw_t", "draw")
    sw = Switch(seed=5, native=False)
    sw.load(p.json())
    assert "uniform" in sw.program_source
    seen = []
    for _ in range(200):
        [(_, out)] = sw.process(0, b"\x00")
        seen += [int.from_bytes(out[1 + 4 * i:5 + 4 * i], "big") for i in range(N)]
    assert lo <= min(seen) and max(seen) <= hi
    # 4800 draws: every value of a small range appears, a large one covers both halves
    if hi - lo < 300:
        assert set(seen) == set(range(lo, hi + 1))
    else:
        assert min(seen) < (lo + hi) // 4 and max(seen) > 3 * (lo + hi) // 4


# -- random lane templates: the vector code against the scalar code -------------------------

BINOPS = ["+", "-", "*", "&", "|", "^", "<<", ">>", "==", "<", ">=", "%", "/"]


def bind_lanes(e, names: dict):
    """A lane template's expression with each field("LANE", n) replaced by names[n]."""
    if isinstance(e, dict) and e.get("type") == "field" and e["value"][0] == "LANE":
        return names[e["value"][1]]
    if isinstance(e, dict):
        return {k: bind_lanes(v, names) for k, v in e.items()}
    return e


def random_expr(rng: random.Random, leaves: list, depth: int) -> dict:
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            return hexstr(rng.choice([0, 1, 3, 7, 0xFF, 0xFFFF, M32, rng.getrandbits(33)]))
        return rng.choice(leaves)
    op = rng.choice(BINOPS + ["?", "tcm", "~"])
    a = random_expr(rng, leaves, depth - 1)
    if op == "?":
        c = expr(rng.choice([">", "==", "!="]), a, random_expr(rng, leaves, depth - 1))
        return expr("?", random_expr(rng, leaves, depth - 1), a, cond=c)
    if op == "tcm":
        return expr("two_comp_mod", a, hexstr(rng.choice([8, 16, 32])))
    if op == "~":
        return expr("&", expr("~", None, a), hexstr(M32))
    if op in ("<<", ">>"):
        return expr(op, a, hexstr(rng.randint(0, 40)))
    if op in ("%", "/"):
        return expr(op, a, hexstr(rng.randint(1, 1000)))
    e = expr(op, a, random_expr(rng, leaves, depth - 1))
    return expr("b2d", None, e) if op in ("==", "<", ">=") else e


def random_program(seed: int, lanes: int = 16, stmts: tuple[int, int] = (2, 4)) -> dict:
    rng = random.Random(seed)
    widths = [(8, False), (16, False), (32, False), (16, True), (31, False)]
    src = [rng.choice(widths) for _ in range(2)]
    dst = [rng.choice(widths) for _ in range(2)]
    p = kit.Program()
    p.header("h", [(f"a{k}_{i}", w, s) for i in range(lanes) for k, (w, s) in enumerate(src)])
    p.header("o", [(f"d{k}_{i}", w, s) for i in range(lanes) for k, (w, s) in enumerate(dst)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    template = []
    for _ in range(rng.randint(*stmts)):  # one statement per lane stays scalar but wide
        target = rng.choice(["t", "d0", "d1"])
        leaves = [field("LANE", n) for n in ("a0", "a1", "t", "d0")]
        template.append((target, random_expr(rng, leaves, rng.randint(1, 4))))
    for i in range(lanes):
        names = {"a0": field("h", f"a0_{i}"), "a1": field("h", f"a1_{i}"), "t": t,
                 "d0": field("o", f"d0_{i}"), "d1": field("o", f"d1_{i}")}
        for target, e in template:
            prims.append(assign(names[target], bind_lanes(e, names)))
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("lanes", prims)
    p.call("ingress", "lanes_t", "lanes")
    j = p.json()
    return j, sum(w for w, _ in src) * lanes // 8


def test_random_lane_templates_compute_what_the_scalar_code_does():
    vectorised = 0
    for seed in range(60):
        rng = random.Random(seed)
        j, nbytes = random_program(seed)
        fast, slow = pair(j)
        vectorised += any(v in fast.program_source for v in ("np.", "_vread", "_vtolist"))
        for _ in range(20):
            pkt = bytes(rng.getrandbits(8) for _ in range(nbytes))
            assert fast.process(0, pkt) == slow.process(0, pkt), f"seed {seed}"
        assert fast.stats["errors"] == slow.stats["errors"] == 0
    assert vectorised >= 30  # most templates take the fast path


def test_wide_one_statement_templates_compute_what_the_scalar_code_does():
    """At WIDE_LANES lanes a template of one statement runs as numpy code too."""
    vectorised = 0
    for seed in range(8):
        rng = random.Random(100 + seed)
        j, nbytes = random_program(100 + seed, lanes=WIDE_LANES, stmts=(1, 1))
        fast, slow = pair(j)
        vectorised += "_vread" in fast.program_source
        for _ in range(5):
            pkt = bytes(rng.getrandbits(8) for _ in range(nbytes))
            assert fast.process(0, pkt) == slow.process(0, pkt), f"seed {seed}"
        assert fast.stats["errors"] == slow.stats["errors"] == 0
    assert vectorised >= 5


def wide_program(carried: bool) -> dict:
    """A decode of narrow codes into a header made valid (a table lookup per lane), then a
    register write per lane: two adjacent one-statement groups, run as one. carried: the
    first group goes through one temporary the second reads, so the second group must see
    the last lane's value in every lane (no fusion)."""
    n = WIDE_LANES
    p = kit.Program()
    p.header("h", [("idx", 8)] + [(f"c{i}", 8) for i in range(n)])
    p.header("o", [(f"v{i}", 32) for i in range(n)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    for i in range(n):  # 2 ** (c & 0x1f) + (c >> 5): four operators, one 8-bit input
        c = field("h", f"c{i}")
        dec = expr("&", expr("+", expr("<<", hexstr(1), expr("&", c, hexstr(0x1F))),
                             expr(">>", c, hexstr(5))), hexstr(M32))
        prims.append(assign(t if carried else field("o", f"v{i}"), dec))
    for i in range(n):
        p.registers.append({"name": f"acc{i}", "id": i, "size": 4, "bitwidth": 32})
        src = expr("&", expr("+", t, field("o", f"v{i}")), hexstr(M32)) if carried \
            else field("o", f"v{i}")
        prims.append(prim("register_write", {"type": "register_array", "value": f"acc{i}"},
                          field("h", "idx"), src))
    prims.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("wide", prims)
    p.call("ingress", "wide_t", "wide")
    return p.json()


@pytest.mark.parametrize("carried", [False, True])
def test_adjacent_wide_groups_run_as_one_only_when_exact(carried):
    fast, slow = pair(wide_program(carried))
    if not carried:
        assert "_vread8" in fast.program_source  # the fused group reads the codes once
    rng = random.Random(9)
    for _ in range(10):
        pkt = bytes([rng.randint(0, 5)]) + bytes(rng.getrandbits(8) for _ in range(WIDE_LANES))
        assert fast.process(0, pkt) == slow.process(0, pkt)
    for i in range(0, WIDE_LANES, 37):
        assert [fast.registers[f"acc{i}"].read(k) for k in range(4)] == \
            [slow.registers[f"acc{i}"].read(k) for k in range(4)]
    assert fast.stats["errors"] == slow.stats["errors"] == 0


@pytest.mark.parametrize("width,signed", [(8, False), (12, False), (32, False), (16, True),
                                          (62, False)])
def test_vector_reader_packs_values_and_takes_any_int64(width, signed):
    from softswitch.program.layout import FieldInfo

    m = 40
    mod = Module()
    code = reader(mod, FieldInfo("f", width, signed), m, "F[2:42]")
    ns = dict(mod.globals, **HELPERS)
    rng = random.Random(width)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    F = [0, 0] + [rng.choice([lo, hi, rng.randint(lo, hi)]) for _ in range(m)]
    assert eval(code, ns, {"F": F}).tolist() == F[2:42]  # noqa: S307
    F[7] = hi + 1  # outside the width (never stored by the program): still read exactly
    assert eval(code, ns, {"F": F}).tolist() == F[2:42]  # noqa: S307


def test_zero_runs_become_one_slice_store():
    mod = Module()
    body = ["if not F[9]:"] + [f"    F[{i}] = 0" for i in range(10, 30)] + \
        ["F[40] = 0", "F[41] = 0", "x = 1"]
    out = zero_runs(mod, body)
    assert out[0] == "if not F[9]:" and out[2:] == ["F[40] = 0", "F[41] = 0", "x = 1"]
    F = list(range(50))
    F[9] = 0  # header invalid: its fields are zeroed
    exec("\n".join(out), dict(mod.globals), {"F": F, "x": 0})  # noqa: S102
    assert F[10:30] == [0] * 20 and F[8] == 8 and F[30:40] == list(range(30, 40))
    assert F[40:42] == [0, 0]


def chained_program() -> dict:
    """Three actions: a vector group writes o.v (32-bit lanes), scalar code changes one
    lane (o.v5 += h.a0) or none (h.a0 == 0), a second vector group reads o.v again. The
    second read may reuse the first group's vector only while o.v holds what it wrote."""
    p = kit.Program()
    p.header("h", [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 32) for i in range(N)] + [(f"w{i}", 32) for i in range(N)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    one = [prim("add_header", {"type": "header", "value": "o"})]
    two = []
    for i in range(N):
        a, v, w = field("h", f"a{i}"), field("o", f"v{i}"), field("o", f"w{i}")
        one += [assign(t, expr("&", expr("*", a, hexstr(3)), hexstr(M32))),
                assign(v, expr("&", expr("+", t, hexstr(7)), hexstr(M32)))]
        two += [assign(t, expr("&", expr("^", v, hexstr(0x5A5A5A5A)), hexstr(M32))),
                assign(w, expr("&", expr("+", t, v), hexstr(M32)))]
    two.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    bump = [assign(field("o", "v5"), expr("&", expr("+", field("o", "v5"), field("h", "a0")),
                                          hexstr(M32)))]
    p.action("one", one)
    p.action("bump", bump)
    p.action("two", two)
    p.call("ingress", "one_t", "one", next_node="bump_t")
    p.call("ingress", "bump_t", "bump", next_node="two_t")
    p.call("ingress", "two_t", "two")
    return p.json()


def test_a_vector_kept_for_a_run_of_fields_is_used_only_while_they_hold_it():
    fast, slow = pair(chained_program())
    assert "_vread_kept" in fast.program_source and "_vlazy" in fast.program_source
    rng = random.Random(11)
    for k in range(40):
        vals = [rng.getrandbits(32) for _ in range(N)]
        vals[0] = 0 if k % 2 else vals[0] | 1  # every other packet leaves o.v unchanged
        pkt = b"".join(v.to_bytes(4, "big") for v in vals)
        out = fast.process(0, pkt)
        assert out == slow.process(0, pkt)
        [(_, frame)] = out
        v5 = int.from_bytes(frame[4 * N + 20:4 * N + 24], "big")
        assert v5 == (vals[5] * 3 + 7 + vals[0]) & M32


def flag_program(read_again: bool = False) -> dict:
    """Per lane: a flag every lane may raise (`f = f | (a > 2^31)`), a seed stepped by a
    constant (`k = (k + G) & M32`) and mixed with the lane's field; the flag and the last
    seed go out after the lanes. read_again: the flag is also read inside a lane (so it is
    loop-carried: the group must stay scalar)."""
    p = kit.Program()
    p.header("h", [("idx", 8)] + [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 32) for i in range(N)] + [("flag", 32), ("k", 32)])
    p.state("start", [extract("h")])
    f, k = p.scalar("f", 32), p.scalar("k", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"}), assign(f, hexstr(0)),
             assign(k, expr("*", field("h", "idx"), hexstr(77)))]
    for i in range(N):
        a, v = field("h", f"a{i}"), field("o", f"v{i}")
        raised = {"type": "expression", "value": {"op": "b2d", "left": None,
                                                  "right": expr(">", a, hexstr(1 << 31))}}
        prims += [assign(f, expr("|", f, raised)),
                  assign(k, expr("&", expr("+", k, hexstr(0x9E3779B9)), hexstr(M32))),
                  assign(v, expr("&", expr("*", expr("^", k, a), hexstr(3)), hexstr(M32)))]
        if read_again:
            prims.append(assign(field("o", f"v{i}"), expr("+", v, f)))
    prims += [assign(field("o", "flag"), f), assign(field("o", "k"), k),
              assign(field("standard_metadata", "egress_spec"), hexstr(1))]
    p.action("lanes", prims)
    p.call("ingress", "lanes_t", "lanes")
    return p.json()


def flag_reference(pkt: bytes) -> bytes:
    k, flag, vs = pkt[0] * 77, 0, []
    for i in range(N):
        a = int.from_bytes(pkt[1 + 4 * i:5 + 4 * i], "big")
        flag |= int(a > 1 << 31)
        k = (k + 0x9E3779B9) & M32
        vs.append(((k ^ a) * 3) & M32)
    return pkt + b"".join(x.to_bytes(4, "big") for x in vs + [flag, k])


def test_a_flag_lanes_raise_and_a_seed_stepped_by_a_constant_are_vectorised():
    """The re-compression's shape (rc_ovf, rc_k in p4src/gen_elements.py): an OR-reduction
    and an induction, which need not keep the group scalar."""
    fast, slow = pair(flag_program())
    assert "np.bitwise_or.reduce" in fast.program_source and "vsteps" in fast.program_source
    for pkt in frames(6, 200):
        out = fast.process(0, pkt)
        assert out == [(1, flag_reference(pkt))]
        assert slow.process(0, pkt) == out


def test_a_flag_read_again_in_a_lane_stays_scalar():
    fast, slow = pair(flag_program(read_again=True))
    assert "np." not in fast.program_source
    for pkt in frames(7, 30):
        assert fast.process(0, pkt) == slow.process(0, pkt)
