"""Runs of fields held as the vector that wrote them (softswitch/program/lazy.py): random
chains of vector groups, scalar writes, header removal and re-adding, multicast copies that
each change their own fields, and a checksum over the header, give byte for byte what the
scalar code gives and what the same vector code with the fields always written back gives."""

import random

import softswitch.program as program_mod
from softswitch import Switch
from tests.p4 import kit
from tests.p4.kit import assign, expr, extract, field, hexstr, prim
from tests.softswitch.test_engine_vector import bind_lanes, random_expr

M32 = 0xFFFFFFFF
N = 24  # lanes
PORTS = (1, 2, 3)


def vec(name: str, rng: random.Random, t: dict, out: str = "o") -> list:
    """A two-statement lane template t = e1; out.v_i = e2 over h.a_i, out.v_i and t."""
    leaves = [field("LANE", n) for n in ("a", "v", "t")]
    e1 = random_expr(rng, leaves[:2], rng.randint(1, 3))  # t is written before it is read
    e2 = random_expr(rng, leaves, 2)
    prims = []
    for i in range(N):
        names = {"a": field("h", f"a{i}"), "v": field(out, f"v{i}"), "t": t}
        prims += [assign(t, expr("&", bind_lanes(e1, names), hexstr(M32))),
                  assign(names["v"], expr("&", bind_lanes(e2, names), hexstr(M32)))]
    return prims


def random_chain(seed: int) -> dict:
    """o.v of 32-bit fields for an even seed, of 8-bit fields (held as bytes are) for an odd."""
    rng = random.Random(seed)
    p = kit.Program()
    p.header("s", [("ck", 16), ("sel", 8)])
    p.header("h", [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 8 if seed % 2 else 32) for i in range(N)])
    p.header("g", [(f"v{i}", 8 if seed % 2 else 32) for i in range(N)])  # o's copies
    p.state("start", [extract("s"), extract("h")])
    t = p.scalar("t", 32)
    o = {"type": "header", "value": "o"}
    g = {"type": "header", "value": "g"}
    p.calculations.append({"name": "o_csum", "id": 0, "algo": "csum16",
                           "input": [{"type": "header", "value": "o"}]})
    p.checksums.append({"name": "ck", "id": 0, "target": ["s", "ck"], "type": "generic",
                        "calculation": "o_csum", "verify": False, "update": True})
    steps = [[prim("add_header", o)] + vec("v0", rng, t)]
    for _ in range(rng.randint(2, 5)):
        kind = rng.choice(["vec", "vec", "poke", "readd", "drop_valid", "save", "restore",
                           "take_h"])
        if kind == "vec":
            steps.append(vec("v", rng, t))
        elif kind == "poke":  # one lane changed by scalar code
            k = rng.randrange(N)
            v = field("o", f"v{k}")
            steps.append([assign(v, expr("&", expr("+", v, field("h", "a0")), hexstr(M32)))])
        elif kind == "readd":  # invalid, then valid again: the fields read as zero
            steps.append([prim("remove_header", o), prim("add_header", o)])
        elif kind == "drop_valid":  # invalid, then a vector writes fields of the invalid header
            steps.append([prim("remove_header", o)] + vec("v", rng, t))
        elif kind == "save":  # g = o (emitted too); o changes on
            steps.append([prim("assign_header", g, o)] + vec("v", rng, t))
        elif kind == "restore":  # o = g (g invalid unless saved: o becomes invalid)
            steps.append([prim("assign_header", o, g)])
        elif seed % 2 == 0:  # g = h, the parsed header, when the widths agree
            steps.append([prim("assign_header", g, {"type": "header", "value": "h"})])
    steps[-1].append(assign(field("standard_metadata", "mcast_grp"), hexstr(1)))
    names = [p.action(f"step{i}", prims) for i, prims in enumerate(steps)]
    for i, name in enumerate(names):
        p.call("ingress", f"{name}_t", name, next_node=f"{names[i + 1]}_t"
               if i + 1 < len(names) else None)
    # egress: each copy writes its own lanes (port-dependent), one lane by scalar code;
    # copies on port 3 also drop the header when s.sel is odd
    port = field("standard_metadata", "egress_port")
    eg = vec("e", rng, t)
    k = rng.randrange(N)
    eg.append(assign(field("o", f"v{k}"), expr("&", expr("+", field("o", f"v{k}"), port),
                                               hexstr(M32))))
    p.action("mark", eg)
    p.action("cut", [prim("remove_header", o)])
    p.call("egress", "mark_t", "mark", next_node="c0")
    odd3 = expr("and", expr("==", port, hexstr(3)),
                expr("==", expr("&", field("s", "sel"), hexstr(1)), hexstr(1)))
    p.conditional("egress", "c0", odd3, "cut_t", None)
    p.call("egress", "cut_t", "cut")
    return p.json()


def engines(j: dict, monkeypatch) -> tuple[Switch, Switch, Switch]:
    lazy, scalar = Switch(vectorize=True, native=False), Switch(vectorize=False, native=False)
    lazy.load(j)
    scalar.load(j)
    with monkeypatch.context() as m:  # the same vector code, fields always written back
        m.setattr(program_mod, "lazify", lambda lines, L, excluded: (lines, {}))
        eager = Switch(vectorize=True, native=False)
        eager.load(j)
    for sw in (lazy, scalar, eager):
        sw.pre.create(1, [(p, 0) for p in PORTS])
    return lazy, scalar, eager


def test_random_chains_give_what_the_scalar_code_and_eager_stores_give(monkeypatch):
    held = 0
    for seed in range(24):
        lazy, scalar, eager = engines(random_chain(seed), monkeypatch)
        held += ("_vlazy8(" if seed % 2 else "_vlazy(") in lazy.program_source
        assert "_vlazy" not in eager.program_source
        assert "_vfrom" in lazy.program_source and "_vfrom" not in scalar.program_source
        rng = random.Random(seed)
        edge = [0, 1, 0x7FFFFFFF, 0x80000000, M32]
        for _ in range(12):
            vals = [rng.choice(edge) if rng.random() < 0.3 else rng.getrandbits(32)
                    for _ in range(N)]
            pkt = bytes([0, 0, rng.getrandbits(8)]) + \
                b"".join(v.to_bytes(4, "big") for v in vals)
            want = scalar.process(0, pkt)
            assert [p for p, _ in want] == list(PORTS)
            assert lazy.process(0, pkt) == want, f"seed {seed}"
            assert eager.process(0, pkt) == want, f"seed {seed}"
        assert lazy.stats["errors"] == scalar.stats["errors"] == eager.stats["errors"] == 0
    assert held >= 16  # most chains hold some run as a vector


def copies_program() -> dict:
    """Ingress writes o.v by a vector (held lazily) and multicasts; egress adds the port to
    every lane by a vector (held too) and then the port to lane 2 by scalar code (another
action, which writes the vector back first); the checksum covers
    o. Each copy must carry only its own port's changes."""
    p = kit.Program()
    p.header("s", [("ck", 16), ("sel", 8)])
    p.header("h", [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 32) for i in range(N)])
    p.state("start", [extract("s"), extract("h")])
    t = p.scalar("t", 32)
    p.calculations.append({"name": "o_csum", "id": 0, "algo": "csum16",
                           "input": [{"type": "header", "value": "o"}]})
    p.checksums.append({"name": "ck", "id": 0, "target": ["s", "ck"], "type": "generic",
                        "calculation": "o_csum", "verify": False, "update": True})
    port = field("standard_metadata", "egress_port")
    ing = [prim("add_header", {"type": "header", "value": "o"})]
    eg = []
    for i in range(N):
        a, v = field("h", f"a{i}"), field("o", f"v{i}")
        ing += [assign(t, expr("&", expr("*", a, hexstr(3)), hexstr(M32))),
                assign(v, expr("&", expr("+", t, hexstr(7)), hexstr(M32)))]
        eg += [assign(t, expr("&", expr("+", v, port), hexstr(M32))),
               assign(v, expr("&", expr("^", t, hexstr(0x100)), hexstr(M32)))]
    ing.append(assign(field("standard_metadata", "mcast_grp"), hexstr(1)))
    v2 = field("o", "v2")
    p.action("ing", ing)
    p.action("eg", eg)
    p.action("poke", [assign(v2, expr("&", expr("+", v2, port), hexstr(M32)))])
    p.call("ingress", "ing_t", "ing")
    p.call("egress", "eg_t", "eg", next_node="poke_t")
    p.call("egress", "poke_t", "poke")
    return p.json()


def test_each_multicast_copy_changes_only_its_own_lanes(monkeypatch):
    from softswitch.hashes import csum16

    lazy, scalar, eager = engines(copies_program(), monkeypatch)
    assert lazy.program_source.count("_vlazy") == 2  # the ingress and the egress vector
    rng = random.Random(5)
    for _ in range(20):
        vals = [rng.getrandbits(32) for _ in range(N)]
        pkt = bytes(3) + b"".join(v.to_bytes(4, "big") for v in vals)
        out = lazy.process(0, pkt)
        assert out == scalar.process(0, pkt) == eager.process(0, pkt)
        for port, frame in out:
            o = [(((a * 3 + 7) & M32) + port & M32) ^ 0x100 for a in vals]
            o[2] = (o[2] + port) & M32
            ob = b"".join(v.to_bytes(4, "big") for v in o)
            assert frame == csum16(ob).to_bytes(2, "big") + pkt[2:] + ob


def fallback_program() -> dict:
    """A vector writes o.v (held); the next action reads and writes o.v lane by lane with a
    register per lane indexed by h.idx: its vector code runs for an index in range and its
    scalar code, which must see o.v written back first, for one out of range."""
    p = kit.Program()
    p.header("h", [("idx", 8)] + [(f"a{i}", 32) for i in range(N)])
    p.header("o", [(f"v{i}", 32) for i in range(N)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    idx = field("h", "idx")
    one = [prim("add_header", {"type": "header", "value": "o"})]
    acc = []
    for i in range(N):
        a, v = field("h", f"a{i}"), field("o", f"v{i}")
        reg = {"type": "register_array", "value": f"r{i}"}
        p.registers.append({"name": f"r{i}", "id": i, "size": 4, "bitwidth": 32})
        one += [assign(t, expr("&", expr("*", a, hexstr(3)), hexstr(M32))),
                assign(v, expr("&", expr("+", t, hexstr(7)), hexstr(M32)))]
        acc += [prim("register_read", t, reg, idx),
                assign(v, expr("&", expr("+", t, v), hexstr(M32))),
                prim("register_write", reg, idx, v)]
    acc.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("one", one)
    p.action("acc", acc)
    p.call("ingress", "one_t", "one", next_node="acc_t")
    p.call("ingress", "acc_t", "acc")
    return p.json()


def test_the_scalar_fallback_of_a_vector_group_sees_the_held_fields(monkeypatch):
    lazy, scalar, eager = engines(fallback_program(), monkeypatch)
    assert "else:  # vector fallback" in lazy.program_source
    assert lazy.program_source.count("_vlazy") == 2
    rng = random.Random(8)
    for k in range(30):
        vals = [rng.getrandbits(32) for _ in range(N)]
        pkt = bytes([k % 7]) + b"".join(v.to_bytes(4, "big") for v in vals)  # 4..6: fallback
        want = scalar.process(0, pkt)
        assert lazy.process(0, pkt) == want and eager.process(0, pkt) == want
    for i in range(N):
        assert [lazy.registers[f"r{i}"].read(j) for j in range(4)] == \
            [scalar.registers[f"r{i}"].read(j) for j in range(4)]


def test_packed_bytes_are_reused_only_for_the_very_array_and_type():
    import numpy as np

    from softswitch.program import lazy
    D = bytes(range(40)) * 4
    v = lazy._from(D, 8, ">u4", 16)                 # extracted: its bytes are the packet's
    assert lazy._bytes(v, ">u4") == D[8:72]
    assert lazy._bytes(v, "|u1") == v.astype("u1").tobytes()   # another type: packed anew
    w = lazy._lazy(np.array(v), 16)                 # equal lanes, another array
    assert lazy._bytes(w, ">u2") == w.astype(">u2").tobytes()
    assert lazy._bytes(v, ">u4") == v.astype(">u4").tobytes()
    u = lazy._from(D, 1, "|u1", 16)
    assert lazy._bytes(u, "|u1") == D[1:17] and lazy._bytes(v, "|u1") != D[1:17]
