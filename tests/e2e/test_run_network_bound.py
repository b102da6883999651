"""mininet/run.py --network-bound: from a rate where the CPU binds, it finds one where the
link does, runs the job there and says which and why."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def netbound_probe() -> int:
    sys.path.insert(0, str(REPO / "mininet"))
    import netbound

    return netbound.PROBE_STEPS["numpy"]


def test_network_bound_picks_a_slower_rate_at_which_the_link_binds(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, str(REPO / "mininet" / "run.py"), "--switch", "soft",
                        "--network-bound", "--bw", "1000", "--steps", "10", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"network-bound: probe of {netbound_probe()} steps at 1000 Mbit/s" in r.stdout
    picked = re.search(r"network-bound: picked ([\d.]+) Mbit/s \((.+)\); the run was bound by "
                       r"(.+); report (\S+)", r.stdout)
    assert picked, r.stdout[-3000:]
    rate = float(picked.group(1))
    assert rate < 1000                        # the probe's own rate was the CPU's
    assert "on the busiest link" in picked.group(2) or "was not" in picked.group(2)
    report = json.loads(Path(picked.group(4)).read_text())
    assert report["bw_mbit"] == rate
    (job,) = report["jobs"]
    assert job["ok"] and job["steps"] == 10
    bound = job["bound"]
    assert bound["busiest_link"]["utilisation"] > max(bound["switch_cores"].values())
    assert (out / "probe" / "report.json").exists()
