"""Worker processes on the emulated hosts: start, watch, collect.

Each worker is `worker/main.py` in its host's namespace; its stdout goes to a
log file, its result to a JSON file. A worker that dies makes the others end
with their allreduce timeout error; nothing here waits without a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEP_RE = re.compile(r"step (\d+)/(\d+) loss ([0-9.naif]+)(?: test accuracy ([0-9.]+))?")
# One BLAS/OpenMP thread per host process. A spare OpenBLAS thread spins after each call
# while its worker waits for results: a quarter of a core per numpy worker at 1 Mbit/s,
# taken from the switch and the other workers on the cores they share, and growing with
# the wait, so a slow link looked CPU-bound. Compute here is single-threaded anyway (the
# DDP workers set one intra-op thread).
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def host_env() -> dict[str, str]:
    """The environment of a process on an emulated host (worker, parameter server)."""
    return dict(os.environ, PYTHONPATH=str(REPO), **ONE_THREAD)


@dataclass
class WorkerProc:
    host: str
    job: int
    rank: int
    log: Path
    result: Path
    proc: subprocess.Popen

    def last_line(self) -> str | None:
        """The log's last non-empty line: where a worker that failed says why."""
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log) - 4096))
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return None
        return next((line.strip() for line in reversed(lines) if line.strip()), None)

    def last_step(self) -> tuple[int, int, float, float | None] | None:
        """(step, steps, loss, accuracy) from the newest step line of the log."""
        try:
            with open(self.log, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log) - 4096))
                tail = f.read().decode(errors="replace")
        except OSError:
            return None
        found = STEP_RE.findall(tail)
        if not found:
            return None
        step, steps, loss, acc = found[-1]
        return int(step), int(steps), float(loss), float(acc) if acc else None


@dataclass
class WorkerGroup:
    procs: list[WorkerProc] = field(default_factory=list)

    def start(self, node, host: str, job: int, rank: int, out: Path, args: list[str]) -> None:
        log = out / "logs" / f"{host}.log"
        result = out / "workers" / f"{host}.json"
        log.parent.mkdir(parents=True, exist_ok=True)
        result.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(REPO / "worker" / "main.py"), "--host", host,
               "--job", str(job), "--rank", str(rank), "--result", str(result), *args]
        with open(log, "wb") as f:
            proc = node.popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=str(REPO),
                              env=host_env())
        self.procs.append(WorkerProc(host, job, rank, log, result, proc))

    def running(self) -> list[WorkerProc]:
        return [w for w in self.procs if w.proc.poll() is None]

    def wait(self, deadline: float, on_tick=None, tick: float = 0.5) -> bool:
        """True when all exited before the monotonic deadline; on_tick() between polls."""
        while self.running():
            if time.monotonic() > deadline:
                return False
            if on_tick is not None:
                on_tick()
            time.sleep(tick)
        return True

    def stop(self, grace: float = 3.0) -> None:
        for w in self.running():
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + grace
        for w in self.procs:
            try:
                w.proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.kill()
                w.proc.wait()

    def results(self) -> list[dict]:
        """Every worker's result JSON, or a record of why there is none."""
        out = []
        for w in self.procs:
            try:
                data = json.loads(w.result.read_text())
            except (OSError, ValueError):
                why = w.last_line()
                data = {"host": w.host, "job": w.job, "rank": w.rank,
                        "error": f"no result (exit code {w.proc.returncode})"
                                 + (f": {why}" if why else "") + f"; see {w.log}"}
            data.setdefault("exit_code", w.proc.returncode)
            out.append(data)
        return out

