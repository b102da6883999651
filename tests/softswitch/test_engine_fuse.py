"""Fused vector runs (softswitch/program/fuse.py): the kernel computes what the numpy lines
and the scalar code do, on random lane templates and on our wide program; lines it cannot
run, and runs too short to pay, stay numpy; turned off, nothing changes."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from softswitch import Switch
from softswitch.program import fuse as fz
from tests.softswitch.test_engine_vector import random_program

pytestmark = pytest.mark.skipif(not fz.enabled(), reason="numba is not installed")

WIDE = Path(__file__).resolve().parents[2] / "p4src" / "build" / "wide" / "agg.json"
KINDS = {f"V{i}": (True, "data") for i in range(1, 40)}


def test_a_run_becomes_one_call_with_a_draw_moved_above_it():
    lines = ["V1 = (F[7] if F[7] is not None else _vread8(F[9:73], 64))",
             "V2 = (V1 >> 3)", "V3 = ((V2 ^ 5) + V1)", "V4 = (V3 | (V3 >> 1))",
             "V5 = nprng_0.uniform(0, 255, 64)",          # random: feeds the run only
             "V6 = np.where((V5 < V4), (V4 & 255), F[3])", "V7 = (V6 * p0)",
             "V8 = B_1[V7, 0:64].copy()",                 # a register read: ends the run
             "V9 = (V8 + V3)"]
    bound = {}
    out = fz.fuse(lines, KINDS, 64, lambda o, h: bound.setdefault(h, o) and h,
                  "F[100] = _vlast(V7)")
    assert out[0] == lines[0] and out[1] == "V5 = nprng_0.uniform(0, 255, 64)"
    # V3 and V7 are read after the run, V2, V4, V6 only inside it
    assert out[2] == "V3, V7, = fk(V1, V5, F[3], p0)"
    assert out[3:] == lines[7:]
    # the kernel computes the numpy lines' values
    rng = np.random.default_rng(3)
    v1 = rng.integers(0, 1 << 32, 64)
    v5 = rng.integers(0, 256, 64)
    f3, p0 = 77, 12345
    v2 = v1 >> 3
    v3 = (v2 ^ 5) + v1
    v4 = v3 | (v3 >> 1)
    v6 = np.where(v5 < v4, v4 & 255, f3)
    o3, o7 = bound["fk"](v1, v5, f3, p0)
    assert np.array_equal(o3, v3) and np.array_equal(o7, v6 * p0)
    assert o3.dtype == np.int64


def test_short_runs_and_lines_it_cannot_run_stay_numpy():
    short = ["V2 = (V1 + 1)", "V3 = (V2 * 3)"]               # 2 operations: not worth it
    assert fz.fuse(short, KINDS, 64, None, "V3") == short
    odd = ["V2 = vtab_1.take(V1)", "V3 = (V2 >> V1)", "V4 = (V2 // V1)", "V4 = (V2 << 64)",
           "V5 = (V2 + 18446744073709551615)", "V6 = (V2 >> np.minimum(V1, 64))",
           "V7 = F[1:3]", "V8 = (V2 if V1 is None else V2)"]   # calls, unbounded operands
    assert [x for x in odd if fz._parse(x.split(" = ", 1)[1]) is not None] == []
    assert fz._parse("(V2 >> np.minimum(V1, 63))") is not None
    # a lane-invariant value stays numpy and comes in as one scalar
    lanes = ["V2 = ((F[5] + 1) * 3)", "V3 = ((V2 - 1) & V1)", "V4 = ((V3 + V2) | V1)",
             "V5 = ((V4 ^ V3) + (V2 << 2))", "V6 = ((V5 * 3) - (V4 + 1))"]
    bound = {}
    out = fz.fuse(lanes, {**KINDS, "V2": (False, "data")}, 16,
                  lambda o, h: bound.setdefault(h, o) and h, "V6")
    assert out == [lanes[0], "V6, = fk(V2, V1)"]
    v1, v2 = np.arange(16) * 977, 30
    v3 = (v2 - 1) & v1
    v4 = (v3 + v2) | v1
    assert np.array_equal(bound["fk"](v2, v1)[0], ((v4 ^ v3) + (v2 << 2)) * 3 - (v4 + 1))


def test_bool_vectors_and_lane_invariant_inputs_keep_their_types():
    kinds = {**KINDS, "V1": (True, "bool"), "V2": (False, "data"), "V4": (True, "bool")}
    lines = ["V3 = np.where(np.logical_and(V1, (V9 > V2)), (V9 + V2), (V9 - 1))",
             "V4 = np.logical_not((V3 >= 5))", "V5 = (_vb2d(V4) + np.clip(V3, 0, 9))",
             "V6 = (np.minimum(V5, 63) + ((V5 % 7) // 2))"]
    bound = {}
    out = fz.fuse(lines, kinds, 32, lambda o, h: bound.setdefault(h, o) and h, "V4 V6")
    assert out == ["V4, V6, = fk(V1, V9, V2)"]
    rng = np.random.default_rng(5)
    v1, v9, v2 = rng.random(32) < 0.5, rng.integers(-20, 20, 32), 3
    v3 = np.where(np.logical_and(v1, v9 > v2), v9 + v2, v9 - 1)
    v4 = np.logical_not(v3 >= 5)
    v5 = (v4 * 1) + np.clip(v3, 0, 9)
    o4, o6 = bound["fk"](v1, v9, v2)
    assert o4.dtype == np.bool_ and np.array_equal(o4, v4)
    assert np.array_equal(o6, np.minimum(v5, 63) + ((v5 % 7) // 2))


def test_turned_off_nothing_is_fused(monkeypatch):
    monkeypatch.setenv("NATSWITCH_FUSE", "0")
    lines = ["V2 = ((V1 + 1) * 3)", "V3 = ((V2 - 1) & 7)", "V4 = ((V3 + V2) | V1)",
             "V5 = ((V4 ^ V3) + (V2 << 2))"]
    assert fz.fuse(lines, KINDS, 64, None, "V5") == lines


def test_random_templates_fused_compute_what_numpy_and_scalar_code_do(monkeypatch):
    fused = 0
    for seed in range(200, 215):
        rng = random.Random(seed)
        j, nbytes = random_program(seed, stmts=(4, 6))
        fast = Switch(vectorize=True, native=False)
        fast.load(j)
        monkeypatch.setenv("NATSWITCH_FUSE", "0")
        plain, slow = Switch(vectorize=True, native=False), Switch(vectorize=False, native=False)
        plain.load(j)
        slow.load(j)
        monkeypatch.delenv("NATSWITCH_FUSE")
        fused += "fk_" in fast.program_source
        for _ in range(20):
            pkt = bytes(rng.getrandbits(8) for _ in range(nbytes))
            want = slow.process(0, pkt)
            assert fast.process(0, pkt) == want == plain.process(0, pkt), f"seed {seed}"
        assert fast.stats["errors"] == plain.stats["errors"] == slow.stats["errors"] == 0
    assert fused >= 5


def test_the_wide_program_fused_forwards_what_it_does_unfused(monkeypatch):
    from bench.softswitch_vector import elems_of, engine, stream
    j = json.loads(WIDE.read_text())
    fast = engine(j, True, 4, 8, native=False, session=5)
    assert "fk_" in fast.program_source        # its re-compression is one kernel
    monkeypatch.setenv("NATSWITCH_FUSE", "0")
    plain = engine(j, True, 4, 8, native=False, session=5)
    assert "fk_" not in plain.program_source
    kernels = [v for k, v in fast._prog.ingress.__globals__.items() if k.startswith("fk_")]
    compiled = [len(k.signatures) for k in kernels]
    outs = 0
    for port, frame in stream(4, 8, 96, elems_of(j), 5, 11):
        got = fast.process(port, frame)
        assert got == plain.process(port, frame)
        outs += len(got)
    assert outs == 96 and fast.stats["errors"] == 0
    # every kernel was compiled for what packets hand it at load: none waited for numba
    assert [len(k.signatures) for k in kernels] == compiled


def test_kernels_are_cached_on_disk_or_compiled_in_memory(monkeypatch, tmp_path):
    src = fz.kernel_source([("V2", fz._parse("(V1 * 3)")[0])], ["V1"], ["V2"], KINDS, 8)
    monkeypatch.setenv("NATSWITCH_CACHE", str(tmp_path / "c"))
    k = fz.load_kernel(src)
    assert list(k(np.arange(8))[0]) == [3 * i for i in range(8)]
    assert len(list((tmp_path / "c" / "kernels").glob("k_*.py"))) == 1
    blocked = tmp_path / "file"
    blocked.write_text("")                      # the cache directory cannot be made
    monkeypatch.setenv("NATSWITCH_CACHE", str(blocked))
    src2 = src.replace("* 3", "* 5")
    assert list(fz.load_kernel(src2)(np.arange(8))[0]) == [5 * i for i in range(8)]


def test_a_new_process_takes_the_kernel_from_the_disk_cache(tmp_path):
    # numba finds a cached kernel's module by name: a kernel loaded from the cache in a
    # fresh process must run from there, not fall back to compiling (or to numpy)
    import subprocess
    import sys
    code = ("import numpy as np\nfrom softswitch.program import fuse as fz\n"
            "src = fz.kernel_source([('V2', fz._parse('((V1 * 7) ^ 3)')[0])], ['V1'], ['V2'], "
            "{'V1': (True, 'data'), 'V2': (True, 'data')}, 8)\n"
            "k = fz.load_kernel(src)\n"
            "assert list(k(np.arange(8))[0]) == [(i * 7) ^ 3 for i in range(8)]\n"
            "print(sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values()))\n")
    env = {**__import__("os").environ, "NATSWITCH_CACHE": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=str(WIDE.parents[3]), timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr[-2000:]
    assert runs[0].stdout.split() == ["0", "1"]     # compiled, then written to the cache
    assert runs[1].stdout.split() == ["1", "0"]     # read back, not compiled
