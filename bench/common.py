"""What the benches share: paths, quick mode, progress lines, tables, targets, the machine.

Each bench writes its figures to results/bench/<name>.json (--json); bench/report.py
turns those into docs/results.md.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
OUT = REPO / "results" / "bench"
_T0 = time.monotonic()


def quick() -> bool:
    """BENCH_QUICK=1: a smoke run (small sizes, one repetition)."""
    return os.environ.get("BENCH_QUICK", "") not in ("", "0")


def say(text: str) -> None:
    """A progress line with the seconds since the bench started."""
    print(f"[{time.monotonic() - _T0:6.0f} s] {text}", flush=True)


def median(values) -> float:
    return float(statistics.median(values))


def save(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"
    return str(value)


def table(header: list[str], rows: list[list]) -> str:
    """A plain-text table, first column left-aligned."""
    cells = [header] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in cells)


def markdown(header: list[str], rows: list[list]) -> str:
    """A markdown table; columns of numbers right-aligned, others left."""
    numeric = [all(isinstance(r[i], int | float) or r[i] is None for r in rows)
               for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    lines += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


@dataclass
class Target:
    """A target of the issue, checked against a figure measured in the same run."""

    name: str
    value: float | None
    limit: float
    kind: str               # "max": value <= limit is met; "min": value >= limit is met
    unit: str = "x"
    why: str = ""           # the reason when it is missed (filled in by the bench)

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.limit if self.kind == "max" else self.value >= self.limit

    def text(self) -> str:
        sign = "<=" if self.kind == "max" else ">="
        head = f"{self.name}: {fmt(self.value)}{self.unit} (target {sign} {self.limit}{self.unit})"
        if self.met is None:
            return f"{head}: not measured"
        if self.met:
            return f"{head}: met"
        miss = self.value / self.limit if self.kind == "max" else self.limit / self.value
        return f"{head}: NOT met, off by {miss:.2f}x" + (f"; {self.why}" if self.why else "")

    def as_dict(self) -> dict:
        return {**asdict(self), "met": self.met, "text": self.text()}


def _version(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return " ".join(t.strip() for t in text[:2]) if text else None


def machine() -> dict:
    """Cores, memory, kernel, CPU model and the versions that shape the figures."""
    import numpy

    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        mem = round(int(m.group(1)) / 2**20, 1) if m else None
    except OSError:
        pass
    cpu = None
    try:
        m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = m.group(1).strip() if m else None
    except OSError:
        pass
    debian = None
    try:
        debian = Path("/etc/debian_version").read_text().strip()
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": mem,
        "kernel": platform.release(),
        "os": f"Debian {debian}" if debian else platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "bmv2": _version(["simple_switch_grpc", "--version"]),
        "p4c": _version(["p4c-bm2-ss", "--version"]),
        "mininet": _version(["mn", "--version"]),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


@dataclass(frozen=True)
class Load:
    """What crossed one direction of one link between two counter readings."""

    src: str
    dst: str
    packets: int
    bytes: int


def link_loads(topo, before: dict, after: dict) -> list[Load]:
    """Every link direction's packets and bytes: a switch's tx counts what it sends, its rx
    what it receives; on a switch-to-switch link both ends saw it, the larger is taken."""
    delta = {k: tuple(a - b for a, b in zip(after[k], before[k], strict=True)) for k in after}
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for (sw, port), (rxp, rxb, txp, txb) in delta.items():
        peer = topo.port(sw, port).peer
        for key, val in (((peer, sw), (rxp, rxb)), ((sw, peer), (txp, txb))):
            seen[key] = max(seen.get(key, (0, 0)), val)
    return [Load(a, b, p, n) for (a, b), (p, n) in sorted(seen.items())]
