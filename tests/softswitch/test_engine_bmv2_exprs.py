"""Differential test of expression semantics: random expressions, engine vs BMv2.

A seeded generator builds JSON expressions over signed and unsigned fields of
odd widths (wrap-around, two's complement casts, saturation, shifts by large
amounts, comparisons of negative values, ternaries) and assigns them to
fields of other widths. The same program and packets run on the engine and,
when simple_switch is on PATH, on BMv2; outputs must be identical. Without
BMv2 the engine still runs every expression (no exception, stable output).
Operations BMv2 asserts on (division by zero, negative shift amounts) are
not generated.
"""

import json
import random

import pytest

from softswitch import Switch
from tests.p4 import bmv2, kit
from tests.p4.kit import field, hexstr, prim

SEED = 20240601
N_OUT = 48
N_PACKETS = 12

IN_FIELDS = [("u8", 8, False), ("u16", 16, False), ("u32", 32, False), ("u64", 64, False),
             ("s8", 8, True), ("s16", 16, True), ("u3", 3, False), ("u5", 5, False),
             ("s32", 32, True), ("u48", 48, False)]
OUT_WIDTHS = [(1, False), (3, False), (7, False), (8, False), (8, True), (16, False),
              (16, True), (31, False), (32, False), (32, True), (48, False), (64, False),
              (64, True), (13, True)]


def e(op, left, right, **kw):
    return kit.expr(op, left, right, **kw)


class Gen:
    def __init__(self, rng: random.Random):
        self.r = rng

    def const(self):
        r = self.r
        v = r.choice([0, 1, 2, 3, 7, 8, 31, 32, 63, 64, 127, 128, 255, 256, 0xFFFF, 0x10000,
                      0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, r.getrandbits(16), r.getrandbits(40)])
        return hexstr(-v if r.random() < 0.2 else v)

    def leaf(self):
        if self.r.random() < 0.75:
            name = self.r.choice(IN_FIELDS)[0]
            return field("i", name)
        return self.const()

    def nonneg(self, depth):
        """A data expression known to be >= 0 (for / and %)."""
        return e("&", self.data(depth), hexstr(self.r.choice([0xFF, 0xFFFF, 0xFFFFFFFF])))

    def data(self, depth=3):
        r = self.r
        if depth <= 0 or r.random() < 0.25:
            return self.leaf()
        k = r.random()
        d = depth - 1
        if k < 0.45:
            op = r.choice(["+", "-", "*", "&", "|", "^"])
            return e(op, self.data(d), self.data(d))
        if k < 0.60:
            op = r.choice(["<<", ">>"])
            amount = hexstr(r.randrange(0, 70)) if r.random() < 0.5 else \
                e("&", self.data(d), hexstr(0x3F))
            return e(op, self.data(d), amount)
        if k < 0.68:
            op = r.choice(["/", "%"])
            return e(op, self.nonneg(d), hexstr(r.choice([1, 3, 7, 8, 1000])))
        if k < 0.78:
            op = r.choice(["two_comp_mod", "sat_cast", "usat_cast"])
            return e(op, self.data(d), hexstr(r.choice([1, 2, 5, 8, 16, 31, 32, 33, 64])))
        if k < 0.84:
            return e(r.choice(["~", "-"]), None, self.data(d))
        if k < 0.92:
            return e("?", self.data(d), self.data(d), cond=self.boolean(d))
        return e("b2d", None, self.boolean(d))

    def boolean(self, depth=2):
        r = self.r
        k = r.random()
        d = max(depth - 1, 0)
        if depth <= 0 or k < 0.6:
            op = r.choice(["==", "!=", "<", ">", "<=", ">="])
            return e(op, self.data(d), self.data(d))
        if k < 0.8:
            return e(r.choice(["and", "or"]), self.boolean(d), self.boolean(d))
        if k < 0.9:
            return e("not", None, self.boolean(d))
        return e("d2b", None, self.data(d))


def build(seed: int):
    rng = random.Random(seed)
    g = Gen(rng)
    p = kit.Program()
    p.header("i", [(n, w, s) for n, w, s in IN_FIELDS])
    outs = [(f"o{k}", *OUT_WIDTHS[k % len(OUT_WIDTHS)]) for k in range(N_OUT)]
    width = sum(w for _, w, _ in outs)
    outs.append(("pad", (-width) % 8, False))
    if outs[-1][1] == 0:
        outs.pop()
    p.header("o", outs)
    p.state("start", [kit.extract("i")])
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    for name, _, _ in outs:
        if name != "pad":
            prims.append(kit.assign(field("o", name), g.data(4)))
    prims.append(kit.assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("compute", prims)
    p.call("ingress", "call_compute", "compute")
    in_bytes = sum(w for _, w, _ in IN_FIELDS) // 8
    packets = [bytes(rng.getrandbits(8) for _ in range(in_bytes)) for _ in range(N_PACKETS)]
    packets += [b"\xff" * in_bytes, b"\x80" * in_bytes, bytes(in_bytes)]
    return p.json(), packets


def engine_outputs(program, packets):
    sw = Switch()
    sw.load(program)
    res = []
    for pkt in packets:
        res += [o for port, o in sw.process(0, pkt)]
    assert sw.stats["errors"] == 0
    return res


@pytest.mark.parametrize("seed", [SEED, SEED + 1, SEED + 2])
def test_engine_runs_random_expressions_deterministically(seed):
    program, packets = build(seed)
    a = engine_outputs(program, packets)
    assert len(a) == len(packets)
    assert a == engine_outputs(program, packets)


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "expressions checked on the engine only")
def test_random_expressions_match_bmv2(tmp_path):
    for seed in (SEED, SEED + 1, SEED + 2):
        program, packets = build(seed)
        path = tmp_path / f"exprs_{seed}.json"
        path.write_text(json.dumps(program))
        with bmv2.SimpleSwitch(path, {0, 1}, [(0, p) for p in packets], wait=1) as ss:
            got = ss.settle(expected=len(packets))[1]
        want = engine_outputs(program, packets)
        assert len(got) == len(want), f"seed {seed}: BMv2 sent {len(got)} packets"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.hex() == w.hex(), f"seed {seed}, packet {k}"
