"""controller/switch_wire.py and the projections that stand on it: the Tofino profile's
packets follow the compiler's committed summaries, the window never exceeds the compiled
slot pool, and the line-rate projection is what it was."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from controller import switch_wire as sw

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "mininet"))
import steptime  # noqa: E402  (mininet/ is a script folder)

SUMMARIES = {json.loads(p.read_text())["variant"]: json.loads(p.read_text())
             for p in (REPO / "p4src" / "build" / "tofino").glob("*.json")
             if not p.stem.endswith(".next")}


@pytest.mark.parametrize("switch, target", [("tofino1", "tofino"), ("tofino2", "tofino2")])
@pytest.mark.parametrize("method", ["cnat", "int32", "uq4"])
def test_a_tofino_packet_carries_the_compiled_summarys_elements(switch, target, method):
    ws = sw.wires(switch, method)
    compiled = {v: s for v, s in SUMMARIES.items() if s["target"] == target
                and sw.encoding(v) in sw.METHOD_VARIANTS[method]}
    assert {w.variant for w in ws} == set(compiled) and ws
    for w in ws:
        s = compiled[w.variant]
        passes = s.get("passes_per_packet", 1)
        n = s.get("elements_per_packet", s["elements_per_pass"])
        assert n == s["elements_per_pass"] * passes
        assert w.elems == n and w.passes == passes and w.elements_per_pass == s["elements_per_pass"]
        assert w.harvest == s["harvest_passes"]
        assert w.extra_passes == s["recirculations_per_result"]
        up, down = sw.PAYLOAD_BYTES[sw.encoding(w.variant)]
        # a frame: Ethernet 14, IPv4 20, UDP 8, AGG 16, then the payload
        assert w.up * n == pytest.approx(58 + up * n)
        assert w.down * n == pytest.approx(58 + down * n)
        assert w.pool == s["pool_size"]
    assert sw.wire(switch, method).busiest == min(w.busiest for w in ws)


def test_the_pool_is_the_one_the_tofino_program_is_compiled_with():
    """A summary's pool is the variant's -DPOOL_SIZE, or the program's default, which
    build_tofino.py and sizes_tna.p4 must agree on (shadow copies: two registers a slot)."""
    sys.path.insert(0, str(REPO / "p4src" / "tna"))
    try:
        import build_tofino
    finally:
        sys.path.pop(0)
    text = (REPO / "p4src" / "tna" / "sizes_tna.p4").read_text()
    assert f"#define POOL_SIZE {build_tofino.POOL_SIZE}\n" in text
    assert "#define SLOT_REGS (2 * POOL_SIZE)\n" in text
    for name in build_tofino.VARIANTS:
        assert SUMMARIES[name]["pool_size"] == build_tofino.flag(name, "POOL_SIZE",
                                                                 build_tofino.POOL_SIZE)


def test_unknown_switches_and_methods_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown switch 'tofino3'"):
        sw.wires("tofino3", "cnat")
    with pytest.raises(ValueError, match="'ring' has no packets"):
        sw.wires("tofino1", "ring")
    # methods the v1model profile carries but no compiled Tofino variant does, with why
    with pytest.raises(ValueError, match="'nat4' has no packets on the tofino2 switch: no "
                                         "Tofino variant decodes NAT4"):
        sw.wires("tofino2", "nat4")
    with pytest.raises(ValueError, match="'cnat-wide' has no packets on the tofino1 switch: "
                                         "the wide profile is a v1model build"):
        sw.wires("tofino1", "cnat-wide")


@pytest.mark.parametrize("method", ["nat4", "uq4"])
def test_a_4_bit_codec_at_line_rate_goes_up_in_half_a_byte_and_down_in_one(method):
    (w,) = sw.wires("line-rate", method)
    assert w.elems == 168
    assert w.up * 168 == pytest.approx(58 + 84) and w.down * 168 == pytest.approx(58 + 168)
    # the step-time model's measured figures for it (priming rounds included) agree to 1 %
    up, down = steptime.BYTES[method]
    assert up == pytest.approx(w.up, rel=0.01) and down == pytest.approx(w.down, rel=0.01)


def test_the_window_of_a_tofino_projection_is_capped_by_its_pool():
    # 16-element packets at 100 Gbit/s would need ~1,690 slots to fill a 10 us round trip
    (w16,) = [w for w in sw.wires("tofino1", "cnat") if w.variant == "cnat8-t1"]
    need = math.ceil(100e9 * 10e-6 / 8 / w16.packet_bytes)
    assert need > w16.pool
    p = steptime.project(25.6e6, 0.0, 100, 8, "cnat", switch="tofino1")
    for w in sw.wires("tofino1", "cnat"):
        packets = math.ceil(25.6e6 / w.elems)
        # a slot's round trip: the link's and every extra pass of its result
        rtt = 10e-6 + (w.passes - 1 + w.harvest) * steptime.PASS_S
        window = min(math.ceil(100e9 * rtt / 8 / w.packet_bytes), w.pool)
        link = 25.6e6 * w.busiest * 8 / 100e9
        # the projection takes the fastest variant, each no faster than its link, window,
        # pipes or loopback ports
        slowest = max(link, packets / window * rtt, *steptime.pass_terms(w, 8, 25.6e6))
        assert p.comm_s <= slowest + rtt + 1e-12
    assert p.comm_s >= min(25.6e6 * w.busiest * 8 / 100e9 for w in sw.wires("tofino1", "cnat"))
    # 10 Gbit/s: 169 slots fill the round trip, the link binds, the fewest bytes win
    slow = steptime.project(25.6e6, 0.0, 10, 8, "cnat", switch="tofino1")
    assert slow.bound == "link" and slow.variant == sw.wire("tofino1", "cnat").variant


def test_line_rate_projection_is_unchanged_and_compiled_packets_cost_more():
    for m in ("cnat", "int32", "ring"):
        assert steptime.project(1e8, 0.1, 10, 8, m) == \
            steptime.project(1e8, 0.1, 10, 8, m, switch="line-rate")
    line = steptime.project(1e8, 0.1, 10, 8, "cnat")
    for switch in ("tofino1", "tofino2"):
        t = steptime.project(1e8, 0.1, 10, 8, "cnat", switch=switch)
        assert t.step_s > line.step_s and t.variant
        assert t.elements_per_packet < line.elements_per_packet


def test_project_cli_names_the_compiled_variants_and_refuses_a_bad_switch():
    cmd = [sys.executable, str(REPO / "mininet" / "steptime.py"), "project", "--params",
           "25.6e6", "--compute-ms", "100", "--gbit", "100"]
    r = subprocess.run([*cmd, "--switch", "tofino1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "tofino1 at its compiled elements per pass" in r.stdout
    for v in ("cnat8-t1", "cnat8-in-t1", "fixed32-t1"):
        assert v in r.stdout
    r = subprocess.run([*cmd, "--switch", "tofino9"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = subprocess.run([*cmd, "--switch", "tofino2", "--methods", "cnat-wide"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "'cnat-wide' has no packets on the tofino2 switch" in r.stderr
    # among others, a method without packets is left out by name and the rest projected
    r = subprocess.run([*cmd, "--switch", "tofino2", "--methods", "nat4", "uq4", "ring"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "(left out) method 'nat4' has no packets on the tofino2 switch" in r.stdout
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("    100")]
    assert [row[1] for row in rows] == ["uq4", "ring"] and rows[0][-3] == "uq4-t2"


# ------------------------------------------------- several passes a packet (issue 48)


def multi_pass(tmp_path, monkeypatch, target="tofino", **keys) -> Path:
    """The committed summaries plus a cnat8-mp one made from cnat8-t1's (`keys` override its
    packet), in a folder switch_wire reads instead of p4src/build/tofino/."""
    tmp_path.mkdir(exist_ok=True)
    for f in (REPO / "p4src" / "build" / "tofino").glob("*.json"):
        if "-mp-" not in f.name:
            (tmp_path / f.name).write_text(f.read_text())
    t = "t1" if target == "tofino" else "t2"
    s = dict(SUMMARIES["cnat8-t1"], variant=f"cnat8-mp-{t}", target=target,
             elements_per_pass=16, passes_per_packet=8, elements_per_packet=128,
             harvest_passes=7, pipes=4, pool_size=2048)
    s.update(keys)
    (tmp_path / f"cnat8-mp-{t}.json").write_text(json.dumps(s))
    monkeypatch.setattr(sw, "SUMMARIES", tmp_path)
    return tmp_path


def mp_wire(switch="tofino1") -> sw.Wire:
    (w,) = [w for w in sw.wires(switch, "cnat") if "-mp-" in w.variant]
    return w


def test_a_multi_pass_packet_carries_elements_per_packet(tmp_path, monkeypatch):
    multi_pass(tmp_path, monkeypatch)
    w = mp_wire()
    assert (w.elems, w.elements_per_pass, w.passes, w.harvest, w.pipes, w.pool) == \
        (128, 16, 8, 7, 4, 2048)
    # one frame's headers over 128 one-byte codes each way
    assert w.up == w.down == pytest.approx((58 + 128) / 128)
    assert w.packet_bytes == pytest.approx(58 + 128)
    # the fewest bytes per element of the C_nat variants
    assert sw.wire("tofino1", "cnat").variant == "cnat8-mp-t1"


@pytest.mark.parametrize("passes", [1, 2, 3, 4, 5, 8, 13])
@pytest.mark.parametrize("pipes", [1, 2, 4])
@pytest.mark.parametrize("workers", [2, 8])
def test_the_walk_keeps_pipe_0_for_first_passes_and_spreads_the_rest(passes, pipes, workers):
    # no harvest (Tofino 2's single pass), or every segment but the last read back once
    for harvest in {0, passes - 1}:
        w = sw.Wire("tofino1", "cnat", "x", 16 * passes, 1.0, 1.0, harvest, 512, passes, pipes,
                    16, "tofino")
        ingress, loop = w.walk(workers)
        # every contribution's passes and the harvest, each once; all but each first pass
        # come back through a loopback port
        assert sum(ingress) == workers * passes + harvest
        assert sum(loop) == workers * (passes - 1) + harvest
        segs = [w.pipe_of(k) for k in range(passes)]
        assert segs[0] == 0 and all(0 <= s < pipes for s in segs)
        if pipes > 1:
            # pipe 0's ports are the workers': it sums segment 0 only, and the other pipes
            # take the rest round and round, none more than one segment ahead
            assert 0 not in segs[1:]
            counts = [segs[1:].count(q) for q in range(1, pipes)]
            assert max(counts) - min(counts) <= 1
        # harvest pass i reads segment passes-1-i, in the pipe that summed it
        read = [segs[(passes - 1 - i) % passes] for i in range(1, harvest + 1)]
        for q in range(pipes):
            assert ingress[q] == workers * segs.count(q) + read.count(q)
            assert loop[q] == workers * (segs.count(q) - (q == 0)) + read.count(q)


def test_a_single_pass_walk_is_the_tofino_1_harvest_recirculation():
    (t1,) = [w for w in sw.wires("tofino1", "cnat") if w.variant == "cnat8-t1"]
    assert t1.walk(8) == ([9], [1])         # 8 contributions, then one pass for the lanes
    (t2,) = [w for w in sw.wires("tofino2", "cnat") if w.variant == "cnat8-t2"]
    assert t2.walk(8) == ([8], [0])


def test_the_pipe_binds_where_passes_outrun_its_packet_rate(tmp_path, monkeypatch):
    # 4 passes of 16 over 4 pipes, the harvest read back in 3: pipe 0 takes each worker's
    # first pass and one harvest pass a use
    multi_pass(tmp_path, monkeypatch, passes_per_packet=4, elements_per_packet=64,
               harvest_passes=3)
    spec, w, params = sw.PIPES["tofino"], mp_wire(), 25.6e6
    uses = math.ceil(params / 64)
    p = steptime.project(params, 0.0, 100, 16, "cnat", switch="tofino1")
    assert p.variant == "cnat8-mp-t1" and p.bound == "pipe"
    assert (p.elements_per_packet, p.passes_per_packet, p.harvest_passes, p.pipes) == \
        (64, 4, 3, 4)
    # the last result's round trip: the link's and its 6 extra passes
    assert p.comm_s == pytest.approx(uses * (16 + 1) / spec.pps + 10e-6 + 6 * steptime.PASS_S)
    # 16 workers' links at 100 Gbit/s bring more packets than pipe 0 takes
    link = params * w.busiest * 8 / 100e9
    assert uses * 17 / spec.pps > link
    # with 4 workers the same passes fit in a pipe and the link binds again
    q = steptime.project(params, 0.0, 100, 4, "cnat", switch="tofino1")
    assert q.bound == "link" and q.comm_s == pytest.approx(link + 10e-6 + 6 * steptime.PASS_S)


def test_passes_beyond_the_pipes_go_round_pipes_1_and_up_not_the_workers_pipe(
        tmp_path, monkeypatch):
    # 8 passes over 4 pipes: segments 1..7 go round pipes 1-3 (1, 4, 7 in pipe 1); pipe 0
    # takes each worker's first pass and the harvest's last (segment 0), which alone comes
    # back through its recirculation port
    multi_pass(tmp_path, monkeypatch)
    w, params = mp_wire(), 25.6e6
    ingress, loop = w.walk(8)
    assert ingress == [8 + 1, 3 * 8 + 2, 2 * 8 + 2, 2 * 8 + 2]
    assert loop == [1, 3 * 8 + 2, 2 * 8 + 2, 2 * 8 + 2]
    p = steptime.project(params, 0.0, 100, 8, "cnat", switch="tofino1")
    spec, uses = sw.PIPES["tofino"], math.ceil(params / 128)
    terms = {"pipe": uses * max(ingress) / spec.pps,
             "loopback": max(params / 128 * n * w.packet_bytes * 8
                             / (spec.loopback_gbit(q) * 1e9) for q, n in enumerate(loop)),
             "link": params * w.busiest * 8 / 100e9}
    assert p.bound == max(terms, key=terms.get)
    assert p.comm_s >= max(terms.values()) + 10e-6 - 1e-12


def test_the_passes_leave_single_pass_projections_as_they_were(tmp_path, monkeypatch):
    """The committed single-pass variants project as before the pipes were modelled: the
    slower of link and window per variant, the fastest variant, whether or not a
    multi-pass variant sits beside them."""
    def before(switch, method, gbit, workers, params=25.6e6, rtt=10e-6):
        best = None
        for w in sw.wires(switch, method):
            if w.passes > 1:
                continue
            slots = math.ceil(gbit * 1e9 * rtt / 8 / w.packet_bytes)
            window = math.ceil(params / w.elems) / min(slots, w.pool) * rtt
            comm = max(params * w.busiest * 8 / (gbit * 1e9), window) + rtt
            best = comm if best is None else min(best, comm)
        return best

    single = tmp_path / "single"
    single.mkdir()
    for v, summary in SUMMARIES.items():
        if summary["passes_per_packet"] == 1:
            (single / f"{v}.json").write_text(json.dumps(summary))
    monkeypatch.setattr(sw, "SUMMARIES", single)
    for method in ("cnat", "int32"):
        for switch in ("tofino1", "tofino2"):
            for gbit in (10, 25, 100):
                for workers in (2, 8, 16):
                    p = steptime.project(25.6e6, 0.0, gbit, workers, method,
                                         switch=switch, pass_s=0.0)
                    assert p.comm_s == before(switch, method, gbit, workers)
    # a multi-pass C_nat variant beside them leaves int32's alone
    multi_pass(tmp_path / "mp", monkeypatch)
    for switch in ("tofino1", "tofino2"):
        p = steptime.project(25.6e6, 0.0, 100, 8, "int32", switch=switch, pass_s=0.0)
        assert p.comm_s == before(switch, "int32", 100, 8)


def test_every_extra_pass_lengthens_a_slots_round_trip(tmp_path, monkeypatch):
    """A result that takes 6 passes beyond its first comes back 6 pass latencies later: the
    window fills with more slots, and where the pool caps it the window term grows by the
    round trip's ratio; a single pass on Tofino 2 costs nothing."""
    folder = multi_pass(tmp_path, monkeypatch, passes_per_packet=4, elements_per_packet=64,
                        harvest_passes=3, pool_size=512)
    for f in folder.glob("cnat8-*.json"):     # the walk alone carries C_nat here
        if "-mp-" not in f.name:
            f.unlink()
    w, params = mp_wire(), 25.6e6
    args = (params, 0.0, 100, 8, "cnat")
    fast = steptime.project(*args, switch="tofino1", pass_s=0.0)
    slow = steptime.project(*args, switch="tofino1", pass_s=2e-6)
    assert (fast.variant, slow.variant) == ("cnat8-mp-t1", "cnat8-mp-t1")
    assert slow.slots_to_fill == math.ceil(100e9 * 22e-6 / 8 / w.packet_bytes) > w.pool
    assert slow.bound == "window"
    assert slow.comm_s == pytest.approx(math.ceil(params / 64) / 512 * 22e-6 + 22e-6)
    assert steptime.project(*args[:4], "int32", switch="tofino2", pass_s=5e-6) == \
        steptime.project(*args[:4], "int32", switch="tofino2", pass_s=0.0)
    r = subprocess.run([sys.executable, str(REPO / "mininet" / "steptime.py"), "project",
                        "--params", "1e6", "--compute-ms", "1", "--switch", "tofino1",
                        "--pass-us", "-1"], capture_output=True, text=True)
    assert r.returncode == 2 and "--pass-us -1" in r.stderr
