"""bench/report.py's sentences about the allreduce table follow its figures."""

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
# Under its own name: mininet/report.py is the `report` other tests import.
_spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_report)
observations = _report.observations


def row(part, variant, median_s, switch="soft"):
    return {"part": part, "variant": variant, "regime": "switch", "switch": switch,
            "bw_mbit": 1000.0, "workers": 4, "median_s": median_s, "bound_s": 0.01,
            "x_bound": median_s / 0.01, "lost_before_switch": 0}


def switch_bound_sentence(rows) -> str:
    (line,) = [x for x in observations(rows, 2) if x.startswith("- **Switch-bound**")]
    return line


def test_a_faster_cnat_row_is_not_explained_as_the_slower():
    line = switch_bound_sentence([row("star-switch", "C_nat INA", 0.3),
                                  row("star-switch", "int32 INA", 0.4),
                                  row("star-switch", "parameter server", 0.6),
                                  row("star-switch", "Gloo ring", 0.45)])
    assert "C_nat INA took 0.75x the time of int32 INA, 0.50x the parameter server's and " \
           "0.67x Gloo ring's" in line
    assert "turns" not in line and "per-packet" not in line


def test_a_slower_cnat_row_on_any_target_is_explained():
    line = switch_bound_sentence([row("star-switch", "C_nat INA", 0.3),
                                  row("star-switch", "int32 INA", 0.4),
                                  row("star-switch", "parameter server", 0.6),
                                  row("star-switch-bmv2", "C_nat INA", 37, "bmv2"),
                                  row("star-switch-bmv2", "int32 INA", 18, "bmv2"),
                                  row("star-switch-bmv2", "parameter server", 4.5, "bmv2")])
    assert "on bmv2 (star-switch-bmv2) C_nat INA took 2.06x the time of int32 INA" in line
    assert "per-packet work decides" in line


def test_the_overlap_section_states_both_parts_of_a_step_and_the_gain(tmp_path):
    import json

    import torch_overlap

    # A run's worker file without overlap: step 1 builds DDP's buckets and is left out.
    w = tmp_path / "workers"
    w.mkdir()
    steps = [{"step": 1, "comm_seconds": 9.0, "step_seconds": 10.0}] + [
        {"step": i, "comm_seconds": 0.05 + 0.001 * i, "step_seconds": 0.1 + 0.001 * i}
        for i in range(2, 7)]
    (w / "h1.json").write_text(json.dumps({"steps": steps}))
    compute, comm = torch_overlap.parts(tmp_path)
    assert abs(comm - 0.054) < 1e-9 and abs(compute - 0.05) < 1e-9
    text = "\n".join(_report.overlap_section({
        "switch": "soft", "profile": "wide", "bw": 25.0, "batch": 1000, "steps": 12, "reps": 3,
        "compute": 0.05, "comm": 0.06, "gain": 1.3, "table": "| t |"}))
    assert "0.050 s of computation and 0.060 s of communication" in text
    assert "overlap gained 1.30x over no overlap (at most 1.83x" in text and "| t |" in text
    assert "| measured | 0.050 | 0.060 | 1.83x |" in text      # the figures, in a table
    assert "Not run" in "\n".join(_report.overlap_section(None))


def test_the_targets_table_gives_a_gap_its_interval():
    t = {"name": "C_nat INA (switch): uncompressed - C_nat", "value": 0.2, "limit": 0.5,
         "kind": "max", "unit": " pp", "met": True, "why": "",
         "ci": "+0.20 pp [-0.40, +0.80], n=5"}
    (line,) = _report.targets_section([("convergence", t)])[2:]
    assert "| 0.2 pp (+0.20 pp [-0.40, +0.80], n=5) | met |" in line
    # a target without seeds keeps its plain figure
    (line,) = _report.targets_section([("wire", {**t, "ci": None})])[2:]
    assert "| 0.2 pp | met |" in line


def test_the_fourbit_table_compares_through_the_paired_helper():
    import fourbit_report

    base = [0.90, 0.92, 0.91]
    conv = {"steps": 600, "batch": 32, "lr": 0.1, "seeds": 3,
            "finals": {"uncompressed (Gloo)": base,
                       "C_nat INA (switch)": [0.91, 0.93, 0.92],
                       "natural dithering INA (switch)": [0.80, 0.83, 0.81],
                       "uniform (THC) INA (switch)": [0.905, 0.91, 0.92]}}
    md = "\n".join(fourbit_report.section(conv, conv, None, None, None))
    # +1 pp on every seed: a zero-width interval, better
    assert "| 0.920 | +1.00 [+1.00, +1.00], n=3 | better |" in md
    # -10, -9, -10 pp: sd sqrt(1/3), half-width 4.3027 sqrt(1/3) / sqrt(3) = 1.434
    assert "| -9.67 [-11.10, -8.23], n=3 | worse |" in md
    # +0.5, -1, +1 pp: sd 1.041, half-width 4.3027 x 1.041 / sqrt(3) = 2.586
    assert "| 0.912 | +0.17 [-2.42, +2.75], n=3 | cannot tell |" in md
    assert "± std err" not in md and "95 % confidence interval" in md


def test_the_fourbit_table_stands_without_a_convergence_run():
    import fourbit_report

    speed = {"soft/cnat8": {"up": 1.35, "down": 1.35, "steps_per_s": 9.0,
                            "elements_per_s": 1.2e6}}
    md = "\n".join(fourbit_report.section(None, None, speed, None, None))
    assert "*Accuracy*: not run." in md and "| 1.35 | 1.35 | - | - | - |" in md


def test_the_tofino_projection_prose_follows_the_summaries(tmp_path, monkeypatch):
    """docs/results.md "Projections from what fits": its sentences are the projections'
    figures, for the committed summaries and for a multi-pass variant beside them."""
    import tofino_report as t

    from tests.test_switch_wire import multi_pass

    committed = t.sw.SUMMARIES
    for folder in (committed, tmp_path):
        if folder == tmp_path:
            multi_pass(tmp_path, monkeypatch)
        rows, res = t.load(), t.project_all()
        (text,) = t.projection_after(res, rows)
        tof = [r for r in res if r["switch"] != "line-rate"]
        vs = [r["int32"].step_s / r["cnat"].step_s for r in tof]
        assert f"int32 INA takes {min(vs):.2f}-{max(vs):.2f}x the time of C_nat INA's" in text
        bounds = [r["cnat"].bound for r in tof]
        for b in set(bounds):
            assert f"the {b} in {bounds.count(b)}" in text
        for r in tof:
            c = r["cnat"]
            assert f"{c.variant} ({c.elements_per_packet} elements per packet" in text
        table = "\n".join(t.wire(rows))
        if folder == tmp_path:
            assert any(r["cnat"].variant == "cnat8-mp-t1" for r in tof)
            assert "8 passes" in text and "(pool 2048)" in text
            assert "| Tofino 1 | CNAT8 / CNAT8, several passes a packet | 16 | 8 | 128 | 1.45 |" \
                in table


def test_the_four_bit_side_by_side_shows_the_wide4_bytes_when_it_has_them():
    from fourbit_report import section

    speed = {f"soft/{e}": {"up": 1.5, "down": 1.5, "steps_per_s": 3.0, "elements_per_s": 1e6}
             for e in ("fixed32", "cnat8", "nat4", "uq4")}
    wide4 = {"soft/nat4": {"up": 0.599, "down": 1.136}, "soft/uq4": {"up": 0.598, "down": 1.13}}
    with_wide4 = "\n".join(section(None, None, speed, None, None, wide4=wide4))
    assert "| up, wide4 | down, wide4 |" in with_wide4
    row = next(ln for ln in with_wide4.splitlines() if ln.startswith("| uniform THC INA"))
    assert "| 0.598 | 1.13 |" in row
    assert "up, wide4" not in "\n".join(section(None, None, speed, None, None))
