"""What the benches share: paths, quick mode, progress lines, tables, targets, the machine.

Each bench writes its figures to results/bench/<name>.json (--json); bench/report.py
turns those into docs/results.md.
"""

from __future__ import annotations

import importlib.util
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


def mininet_module(name: str, alias: str | None = None):
    """mininet/<name>.py, loaded once by its path. That folder holds the emulation's scripts,
    not a package (Debian's Mininet owns the name `mininet`), so the module is registered
    under the name its siblings import it by, or under `alias` where bench/ has that name."""
    key = alias or name
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, REPO / "mininet" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module       # its dataclasses look their module up as it runs
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


def step_model():
    """The step-time model, mininet/steptime.py, under a name of its own: bench/steptime.py
    is `steptime` to the benches, and either may hold that bare name in a process."""
    return mininet_module("steptime", "steptime_model")


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


# ---------------------------------------------------------------- CPU time

# A difference of two readings of a clock is good to one step of it either way: a figure
# is given only from this many steps on (then at most 10% off), below that only a bound.
MIN_STEPS = 10


@dataclass(frozen=True)
class Reading:
    """An amount read off a clock (CPU seconds, or a figure made of them by dividing by a
    count or a time): `value`, good to `step` (the clock's resolution, scaled as the value
    was). Under MIN_STEPS steps it is no figure, only a bound (below value + step): a switch
    process's CPU time over a short run, read in clock ticks, is often 0 and is not 0.
    Divide by one only through `ratio()`, which says why when it cannot."""

    value: float
    step: float

    @property
    def known(self) -> bool:
        return self.value == self.value and self.step == self.step    # not NaN: it was read

    @property
    def measured(self) -> bool:
        return self.known and self.value > 0 and self.value >= MIN_STEPS * self.step

    def __add__(self, other: Reading) -> Reading:
        return Reading(self.value + other.value, self.step + other.step)

    def __sub__(self, other: Reading) -> Reading:
        """The amount between an earlier reading `other` and this one, of the same clock."""
        return Reading(self.value - other.value, max(self.step, other.step))

    def __truediv__(self, n: float) -> Reading:
        """Per unit of a count or a time measured far finer than the clock's steps."""
        return Reading(self.value / n, self.step / n)

    def text(self, spec: str = ".3g", unit: str = "", scale: float = 1.0) -> str:
        """The figure, or "< bound" when it is below what the clock can measure."""
        if not self.known:
            return "not read"
        if self.measured:
            return f"{self.value * scale:{spec}}{unit}"
        return f"< {(self.value + self.step) * scale:{spec}}{unit}"


UNREAD = Reading(float("nan"), float("nan"))     # nothing to read: the process is gone


def ratio(num: Reading, den: Reading, names: tuple[str, str] = ("numerator", "denominator"),
          spec: str = ".2f") -> str:
    """num / den as "1.23x", or, where either is not a figure, why the ratio is left out."""
    bad = [n for n, r in zip(names, (num, den), strict=True) if not r.measured]
    if bad:
        return (f"not given: {' and '.join(bad)} below what "
                f"{'its clock' if len(bad) == 1 else 'their clocks'} can measure")
    return f"{num.value / den.value:{spec}}x"


def cpu_self() -> Reading:
    """CPU seconds this process (all its threads) has used so far."""
    return Reading(time.process_time(), time.get_clock_info("process_time").resolution)


_libc = None


def _cpu_clock(pid: int) -> int | None:
    """The kernel's CPU-time clock of process `pid` (clock_getcpuclockid(3)), or None."""
    global _libc
    try:
        import ctypes
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        clock = ctypes.c_int()
        return clock.value if _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) == 0 \
            else None
    except (OSError, AttributeError):
        return None


def cpu_of(pid: int) -> tuple[Reading, Reading]:
    """(CPU seconds process `pid` has used so far, all its threads, user and system; of them
    system), NaN when it is gone. The total comes from the process's CPU-time clock
    (nanoseconds, what the scheduler counts); the system part only from /proc/PID/stat in
    clock ticks (10 ms), as the total where that clock cannot be read."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        user, system = int(f[11]) * tick, int(f[12]) * tick
    except (OSError, ValueError, IndexError):
        return UNREAD, UNREAD
    # utime and stime are each cut down to a whole tick: their sum is short by up to two
    total = Reading(user + system, 2 * tick)
    clock = _cpu_clock(pid)
    if clock is not None:
        try:
            total = Reading(time.clock_gettime(clock), time.clock_getres(clock))
        except OSError:
            pass
    return total, Reading(system, tick)


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
        **_torch(),
    }


def _torch() -> dict:
    """PyTorch's version and the vector instructions its CPU kernels dispatch to, where a
    bench has imported it: the same seed rounds differently, and trains differently, under
    another dispatch (docs/results.md, time to accuracy)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    return {"torch": torch.__version__,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


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
