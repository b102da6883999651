"""`mininet/run.py --network-bound`: the link rate at which the links, not the switches nor
this machine's CPU, set a job's pace, found by measuring.

1. A probe: the job for a few steps at the starting rate (--bw). Its figures
   (mininet/steptime.py) give the time per step that is not the link's: the switches' CPU,
   a worker's CPU for communication, and all the job's CPU over the cores free for it.
2. The rate at which the link's time per step is HEADROOM times that, rounded down to
   1-2-5 steps, so the rest keeps well clear of the link.
3. The job at that rate; its own figures (mininet/bounds.py) are the check: the link busier
   than any switch's core and than compute, no switch above SWITCH_MAX of a core, and the
   job's CPU (workers, switches, the kernel's packet work) below JOB_MAX of the cores other
   work left free (a machine shared with other work is often all busy: its verdict is then
   "machine" whatever the job does, so the job's own share decides). Otherwise the rate is
   halved and the job runs again, at most ATTEMPTS times.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import steptime

HEADROOM = 2.0       # link time over the rest of the communication at the rate picked
SWITCH_MAX = 0.5     # of a core, for a software switch
JOB_MAX = 0.8        # the job's CPU (workers, switches, kernel) over the cores free for it
ATTEMPTS = 4
# A numpy step takes a few ms at a fast link: enough of them that the probe's window spans
# several of mininet/bounds.py's CPU samples (every 0.1 s).
PROBE_STEPS = {"numpy": 100, "torch": 4}


def nice_below(rate: float) -> float:
    """The largest of 1, 2, 5 x 10^k not above rate."""
    k = math.floor(math.log10(rate))
    for m in (5, 2, 1):
        if m * 10 ** k <= rate * (1 + 1e-9):
            return float(m * 10 ** k)
    return float(10 ** k)


def floor_seconds(f: steptime.Figures) -> tuple[float, str]:
    """The communication's time per step that is not the link's, and what sets it."""
    p = steptime.predict(f, f.bw_mbit, free_cores=max(1.0, f.cores - f.other_cores))
    t = p.terms
    cands = {"switch": t["switch"], "host": t["host"], "window": t["window"],
             "machine": t["machine"] - t["compute"]}
    what = max(cands, key=cands.get)
    return cands[what], what


def pick_rate(f: steptime.Figures) -> tuple[float, str]:
    """The rate to try next from a run's figures, and why."""
    floor, what = floor_seconds(f)
    exact = f.busiest_bytes * 8 / (HEADROOM * max(floor, 1e-6)) / 1e6
    rate = nice_below(min(exact, f.bw_mbit))
    return rate, (f"at {f.bw_mbit:g} Mbit/s a step moved {f.busiest_bytes / 1e3:.1f} kB on "
                  f"the busiest link and spent {1e3 * floor:.1f} ms on the rest ({what}); "
                  f"the link takes {HEADROOM:g}x that at {exact:.3g} Mbit/s")


def check(bound: dict) -> list[str]:
    """Why a run's verdict is not network-bound (empty: it is)."""
    why = []
    link = bound["busiest_link"]["utilisation"] if bound.get("busiest_link") else 0.0
    rest = max([*bound["switch_cores"].values(), bound.get("compute_share") or 0.0])
    # "machine" with other work on it: the job's own share decides, below
    if bound["bound"] != "link" and not (bound["bound"] == "machine" and link > rest):
        why.append(f"bound by {bound['text'].split(' -- ')[0]}")
    for sw, c in sorted(bound["switch_cores"].items()):
        if c > SWITCH_MAX:
            why.append(f"switch {sw} at {100 * c:.0f} % of a core (limit "
                       f"{100 * SWITCH_MAX:.0f} %)")
    job = (sum(bound["switch_cores"].values()) + sum(bound.get("host_cores", {}).values())
           + bound.get("kernel_cores", 0.0))
    free = max(1.0, bound["cores"] - (bound.get("other_cores") or 0.0))
    if job / free > JOB_MAX:
        why.append(f"the job's CPU at {job:.2f} of the {free:.2f} cores free for it (limit "
                   f"{100 * JOB_MAX:.0f} %)")
    return why


def probe(argv: list[str], rate: float, steps: int, out: Path) -> tuple[int, Path]:
    """mininet/run.py with argv at `rate` for `steps` steps into `out`; its exit code."""
    cmd = [sys.executable, str(Path(__file__).with_name("run.py")), *argv, "--bw", str(rate),
           "--steps", str(steps), "--out", str(out)]
    code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True).returncode
    return code, out
