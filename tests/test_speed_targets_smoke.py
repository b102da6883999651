"""bench/speed_targets.py cannot rot: its no-root smoke run measures this code and a baseline
checked out from git side by side, prints every target with a verdict and writes the JSON; and
its verdicts follow the figures (a ratio above the threshold passes, below fails, a missing
figure has none)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import speed_targets  # noqa: E402

NAMES = 8   # targets: star x4, pps, link x2, fat-tree


@pytest.mark.slow
def test_quick_run_measures_both_codes_and_prints_every_target(tmp_path):
    # The real baseline: bench/ must keep running on the old code (no profiles, older
    # harness signatures), which HEAD as the baseline would not show.
    rev = speed_targets.BASELINE_REV
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = Path("/tmp") / f"natswitch-baseline-{sha[:12]}"
    existed = tree.exists()
    out = tmp_path / "speed.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "speed_targets.py"), "--quick", "--no-root",
         "--baseline", rev, "--wide", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=str(REPO),
        env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {(r["part"], r["variant"], r["code"]): r for r in data["rows"]}
    new, old = rows[("pps", "softswitch", "new")], rows[("pps", "softswitch", "baseline")]
    assert new["eps"] > 0 and old["eps"] > 0
    # the baseline ran in its own checkout, printed with its own prefix
    assert "[baseline]" in proc.stdout and "(baseline code)" in proc.stdout
    assert existed or not tree.exists()        # its worktree is gone unless kept
    ts = {t["name"]: t for t in data["targets"]}
    assert len(ts) == NAMES + 1               # --wide: the wide program's pps target
    pps = next(t for t in ts.values() if t["name"].startswith("pps:"))
    assert pps["value"] == pytest.approx(new["eps"] / old["eps"])
    assert pps["verdict"] in ("PASS", "FAIL")
    assert f"{pps['verdict']} " in proc.stdout
    wide = rows[("pps", "softswitch, wide profile", "new")]
    (wide_t,) = [t for t in ts.values() if "wide profile" in t["name"]]
    assert wide_t["value"] == pytest.approx(wide["eps"] / old["eps"])
    # without root the Mininet parts are not run, and say so
    assert set(data["skipped"]) == {"star", "link", "fat"}
    for t in ts.values():
        if t is not pps and t is not wide_t:
            assert t["value"] is None and t["verdict"] == "-", t
            assert "not measured" in proc.stdout
    assert data["outputs_ok"] is True
    assert out.with_suffix(".png").stat().st_size > 1000


def row(part, variant, eps, code="new", **extra):
    return {"part": part, "variant": variant, "code": code, "eps": eps, **extra}


def test_verdicts_follow_the_figures():
    args = speed_targets.argparse.Namespace(fast_bw=1000.0, link_bw=50.0, elements=1 << 20)
    rows = [row("star", "C_nat INA", 6e6), row("star", "parameter server", 2e6),
            row("star", "int32 INA", 7e6), row("fat", "C_nat INA", 6e6),
            row("fat", "C_nat INA", 1e6, "baseline"), row("pps", "softswitch", 9e6),
            row("pps", "softswitch", 1e6, "baseline"),
            row("link", "C_nat INA", 1e6, x_bound=1.31, median_s=0.3, bound_s=0.229)]
    got = speed_targets.targets(rows, args)
    verdicts = [speed_targets.verdict(t) for t in got]
    assert verdicts == ["PASS",     # 6e6 / 2e6 = 3 >= 2
                        "FAIL",     # 6e6 / 7e6 < 1
                        "-",        # no Gloo row
                        "PASS",     # 6 M/s >= 5
                        "FAIL",     # 9x < 10x
                        "FAIL",     # 1.31 > 1.3
                        "PASS",     # 0.3 s <= 1 s
                        "PASS"]     # 6x >= 5x
    star_abs = [t for t in got if t.unit == " M/s"][0]
    assert star_abs.value == pytest.approx(6.0)
    # --wide: the wide profile's C_nat rows get the same targets, against the same baselines
    wide = "C_nat INA, wide (1456/packet)"
    more = speed_targets.targets(rows + [
        row("star", wide, 3e6), row("link", wide, 1e6, x_bound=1.2, median_s=1.5)], args)
    assert [t.name for t in more[:len(got)]] == [t.name for t in got]
    extra = {t.name: (t.value, speed_targets.verdict(t)) for t in more[len(got):]}
    assert extra == {
        f"star: {wide} / host parameter server, elements/s": (pytest.approx(1.5), "FAIL"),
        f"star: {wide} / int32 INA, elements/s": (pytest.approx(3 / 7), "FAIL"),
        f"star: {wide} / Gloo ring allreduce, elements/s": (None, "-"),
        f"star: {wide} elements/s": (pytest.approx(3.0), "FAIL"),
        f"link 50 Mbit/s: {wide} time / bytes over bandwidth": (1.2, "PASS"),
        f"link 50 Mbit/s: {wide} seconds per step": (1.5, "FAIL")}
    # and the wide profile's pps row against the baseline's (168-element) one
    wide_pps = speed_targets.targets(rows + [row("pps", "softswitch, wide profile", 1.2e7)],
                                     args)
    (t,) = [t for t in wide_pps if "wide profile" in t.name]
    assert (t.value, speed_targets.verdict(t)) == (pytest.approx(12.0), "PASS")


@pytest.mark.root
@pytest.mark.slow
def test_quick_star_in_mininet_checks_every_variants_outputs(tmp_path):
    """The switch-bound star in Mininet (root, under the shared lock): every variant, Gloo's
    ring among them, gives each rank the same result, exact where the path is exact."""
    pytest.importorskip("torch")
    if os.geteuid() != 0:
        pytest.skip("Mininet needs root")
    pytest.importorskip("mininet.net")
    out = tmp_path / "speed.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "speed_targets.py"), "--quick", "--no-baseline",
         "--parts", "star", "--json", str(out)],
        capture_output=True, text=True, timeout=900, cwd=str(REPO),
        env=dict(os.environ, MPLBACKEND="Agg"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {r["variant"]: r for r in data["rows"]}
    assert list(rows) == ["C_nat INA", "int32 INA", "parameter server", "Gloo ring"]
    for name, r in rows.items():
        assert r["identical"] is True, name
        assert r["eps"] > 0 and r["load"], name
        if name != "C_nat INA":
            assert r["exact"] is True, (name, r["max_rel_err"])
    ts = [t for t in data["targets"] if t["name"].startswith("star")]
    assert len(ts) == 4 and all(t["value"] is not None for t in ts)
    assert data["outputs_ok"] is True
