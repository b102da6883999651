"""The jobs' sessions: chosen by the control plane, installed on the switches, published to
the workers in one file.

A switch aggregates a job's packets of the job's current session only (the `session` of its
`jobs` entry; docs/PROTOCOL.md "Sessions"), so the session a job runs in is the control
plane's to choose and to move: when a job is first programmed, when a switch of its tree
restarted without its registers (watch mode), or when the user starts the job afresh
(`controller/main.py program --new-session`). The sessions file is how the workers learn
it: per job its session and `epoch` (the number of moves; a worker that follows the file
leaves a call when the epoch grows), and which switches are down. It is replaced
atomically, never written in place.

    {"version": 1, "jobs": {"1": {"session": 4712, "epoch": 1, "switches": ["s1"],
     "restarts": [{"switch": "s1", "down": T, "programmed": T, "session": 4712}]}},
     "down": {"s5": T}}
"""

from __future__ import annotations

import json
import os
import threading
import time

from controller.jobs import plan_trees
from controller.topology import Topology

SESSIONS_VERSION = 1


def next_session(session: int) -> int:
    """The session after `session` in 1..65535 (65535 is followed by 1; 0 is never used,
    a fresh switch's registers hold it)."""
    return session % 0xFFFF + 1


def clock_session() -> int:
    """A first session from the clock, so a new run does not reuse the last run's."""
    return time.time_ns() // 1_000_000 % 0xFFFF + 1


def read_jobs(path: str) -> dict[int, dict]:
    """The jobs of a sessions file (empty when it is missing or unreadable)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return {int(k): v for k, v in data["jobs"].items()
                if isinstance(v["session"], int) and 1 <= v["session"] <= 0xFFFF}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


class SessionsFile:
    """The jobs' sessions and the switches that are down, kept in one JSON file.

    A job the file already holds keeps its session (re-programming switches that run it
    changes nothing), or moves on to the next one with `renew` (a new run of the job: the
    switches may hold the old run's uses of its session); a new job starts at `first`, else
    from the clock. Nothing is written until write()."""

    def __init__(self, path: str, topo: Topology, first: int | None = None,
                 renew: bool = False):
        self.path = path
        self.lock = threading.Lock()
        old = read_jobs(path)
        self.trees = {t.job.id: set(t.nodes) for t in plan_trees(topo)}
        self.jobs: dict[int, dict] = {}
        for job_id, nodes in sorted(self.trees.items()):
            prev = old.get(job_id)
            if prev is None:
                entry = {"session": first if first is not None else clock_session(),
                         "epoch": 0, "restarts": []}
            elif renew:
                entry = {"session": next_session(prev["session"]),
                         "epoch": int(prev.get("epoch", 0)) + 1, "restarts": []}
            else:
                entry = {"session": prev["session"], "epoch": int(prev.get("epoch", 0)),
                         "restarts": list(prev.get("restarts", []))}
            self.jobs[job_id] = {**entry, "switches": sorted(nodes)}
        self.down: dict[str, float] = {}
        # Moves the switches take before the file tells the workers (move, restarted).
        self.pending: dict[int, int] = {}

    def sessions(self) -> dict[int, int]:
        """job id -> session, as the switches are to hold them (moves not yet published
        included)."""
        with self.lock:
            return {job_id: self.pending.get(job_id, job["session"])
                    for job_id, job in self.jobs.items()}

    def session(self, job_id: int) -> int:
        with self.lock:
            return self.jobs[job_id]["session"]

    def write(self) -> None:
        data = {"version": SESSIONS_VERSION, "updated": time.time(),
                "jobs": {str(k): v for k, v in self.jobs.items()}, "down": self.down}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self.path)

    def mark_down(self, switch: str, at: float) -> None:
        with self.lock:
            self.down[switch] = at
            self.write()

    def mark_up(self, switch: str) -> None:
        with self.lock:
            self.down.pop(switch, None)
            self.write()

    def move(self, switch: str) -> dict[int, tuple[int, int]]:
        """Moves every job whose tree holds `switch` to its next session, for the switches
        only until restarted() publishes it; job -> (old, new)."""
        moved = {}
        with self.lock:
            for job_id, nodes in self.trees.items():
                if switch in nodes:
                    old = self.pending.get(job_id, self.jobs[job_id]["session"])
                    self.pending[job_id] = next_session(old)
                    moved[job_id] = (old, self.pending[job_id])
        return moved

    def switches_of(self, jobs) -> set[str]:
        """The switches of these jobs' trees."""
        return set().union(*(self.trees[j] for j in jobs)) if jobs else set()

    def restarted(self, switch: str, down_at: float, programmed_at: float,
                  moved: dict[int, tuple[int, int]]) -> None:
        """Publishes the moves of a restart: each moved job's epoch grows (the workers
        follow), the switch is up again."""
        with self.lock:
            for job_id, (_, new) in moved.items():
                job = self.jobs[job_id]
                job["session"] = self.pending.pop(job_id, new)
                job["epoch"] += 1
                job["restarts"].append({"switch": switch, "down": down_at,
                                        "programmed": programmed_at, "session": new})
            self.down.pop(switch, None)
            self.write()
