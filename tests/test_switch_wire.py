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
@pytest.mark.parametrize("method", ["cnat", "int32"])
def test_a_tofino_packet_carries_one_pass_of_the_compiled_summary(switch, target, method):
    ws = sw.wires(switch, method)
    compiled = {v: s for v, s in SUMMARIES.items() if s["target"] == target
                and sw.encoding(v) in sw.METHOD_VARIANTS[method]}
    assert {w.variant for w in ws} == set(compiled) and ws
    for w in ws:
        s = compiled[w.variant]
        n = s["elements_per_pass"]
        assert w.elems == n and w.recirculations == s["recirculations_per_result"]
        up, down = sw.PAYLOAD_BYTES[sw.encoding(w.variant)]
        # a frame: Ethernet 14, IPv4 20, UDP 8, AGG 16, then the payload
        assert w.up * n == pytest.approx(58 + up * n)
        assert w.down * n == pytest.approx(58 + down * n)
        assert w.pool == sw.tna_pool_size()
    assert sw.wire(switch, method).busiest == min(w.busiest for w in ws)


def test_the_pool_is_the_one_the_tofino_program_is_compiled_with():
    text = (REPO / "p4src" / "tna" / "sizes_tna.p4").read_text()
    assert f"#define POOL_SIZE {sw.tna_pool_size()}\n" in text
    assert f"#define SLOT_REGS {2 * sw.tna_pool_size()}\n" in text    # shadow copies


def test_unknown_switches_and_methods_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown switch 'tofino3'"):
        sw.wires("tofino3", "cnat")
    with pytest.raises(ValueError, match="'ring' has no packets"):
        sw.wires("tofino1", "ring")


def test_the_window_of_a_tofino_projection_is_capped_by_its_pool():
    # 16-element packets at 100 Gbit/s would need ~1,690 slots to fill a 10 us round trip
    (w16,) = [w for w in sw.wires("tofino1", "cnat") if w.variant == "cnat8-t1"]
    need = math.ceil(100e9 * 10e-6 / 8 / w16.packet_bytes)
    assert need > w16.pool
    p = steptime.project(25.6e6, 0.0, 100, 8, "cnat", switch="tofino1")
    for w in sw.wires("tofino1", "cnat"):
        packets = math.ceil(25.6e6 / w.elems)
        window = min(math.ceil(100e9 * 10e-6 / 8 / w.packet_bytes), w.pool)
        link = 25.6e6 * w.busiest * 8 / 100e9
        # the projection takes the fastest variant, each no faster than its link or window
        assert p.comm_s <= max(link, packets / window * 10e-6) + 10e-6 + 1e-12
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
        assert t.step_s > line.step_s and t.variant and t.elems < line.elems


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
