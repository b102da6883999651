"""Watch mode: keep the switches of a topology programmed while they come and go.

One thread per switch holds a P4Runtime session (arbitration on the stream channel). When
the stream ends, the switch went away: it is marked down in the sessions file, and the
thread reconnects until the switch answers again. It is then brought to the desired state
like a one-shot run (read, write the difference). A switch that came back without the
program (it had to be pushed) lost its registers: every job whose tree holds it moves to a
new session, so the workers start its slots afresh (docs/CONTROLLER.md, "Watch mode").

The sessions file is what workers read: per job its session and `epoch` (the number of
moves), and which switches are down. It is replaced atomically, never written in place.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.jobs import plan_trees
from controller.p4info import Pipeline
from controller.program import SyncResult, canonical_state, desired_state, sync
from controller.session import ControllerError, Session
from controller.topology import Switch, Topology

SESSIONS_VERSION = 1
RECONNECT_TIMEOUT = 1.0     # seconds per connection attempt; attempts repeat without end
RETRY_PAUSE = 0.2           # after a failed attempt to program a switch that answers


def next_session(session: int) -> int:
    """The session after `session` in 1..65535: newer in 16-bit serial-number arithmetic
    (65535 is followed by 1; 0 is never used, a fresh switch's registers hold it)."""
    return session % 0xFFFF + 1


def clock_session() -> int:
    """A first session from the clock, so a new run does not reuse the last run's."""
    return time.time_ns() // 1_000_000 % 0xFFFF + 1


@dataclass
class Restart:
    """A switch that went away and came back without its program."""

    switch: str
    down_at: float            # time.time() when its stream ended
    back_at: float            # when it answered again
    programmed_at: float      # when its pipeline and entries were back
    written: int
    sessions: dict[int, tuple[int, int]] = field(default_factory=dict)  # job -> (old, new)


class SessionsFile:
    """The jobs' sessions and the switches that are down, as JSON in one file."""

    def __init__(self, path: str, topo: Topology, first: int | None = None):
        self.path = path
        self.lock = threading.Lock()
        old = self._read_jobs(path)
        self.trees = {t.job.id: set(t.nodes) for t in plan_trees(topo)}
        self.jobs: dict[int, dict] = {}
        for job_id, nodes in sorted(self.trees.items()):
            # A job already in the file moves on: the switches may hold its slots' state.
            prev = old.get(job_id)
            session = (next_session(prev["session"]) if prev else
                       first if first is not None else clock_session())
            self.jobs[job_id] = {"session": session, "epoch": 0, "switches": sorted(nodes),
                                 "restarts": []}
        self.down: dict[str, float] = {}
        self.write()

    @staticmethod
    def _read_jobs(path: str) -> dict[int, dict]:
        try:
            with open(path) as f:
                data = json.load(f)
            return {int(k): v for k, v in data["jobs"].items() if 1 <= v["session"] <= 0xFFFF}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

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

    def restarted(self, r: Restart) -> None:
        """Moves every job whose tree holds r.switch to its next session; marks it up."""
        with self.lock:
            for job_id, nodes in self.trees.items():
                if r.switch not in nodes:
                    continue
                job = self.jobs[job_id]
                old, job["session"] = job["session"], next_session(job["session"])
                job["epoch"] += 1
                job["restarts"].append({"switch": r.switch, "down": r.down_at,
                                        "programmed": r.programmed_at,
                                        "session": job["session"]})
                r.sessions[job_id] = (old, job["session"])
            self.down.pop(r.switch, None)
            self.write()


class Watcher:
    """Programs every switch, then keeps each one programmed. start(), then stop()."""

    def __init__(self, topo: Topology, pipeline: Pipeline, sessions_path: str,
                 election_id: tuple[int, int] = (0, 1), first_session: int | None = None,
                 log: Callable[[str], None] = print):
        self.topo, self.pipeline, self.election_id, self.log = topo, pipeline, election_id, log
        self.state = canonical_state(desired_state(topo), pipeline.p4info)
        self.sessions = SessionsFile(sessions_path, topo, first_session)
        self.restarts: list[Restart] = []
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, connect_timeout: float = 10.0) -> list[tuple[Switch, object]]:
        """Programs every switch (SyncResult or ControllerError each, in topology order) and
        starts watching them all; a switch that failed is retried until it answers."""
        results: dict[str, object] = {}

        def first(switch: Switch) -> None:
            session = Session(switch, self.election_id, connect_timeout)
            try:
                session.connect()
                results[switch.name] = sync(session, self.state[switch.name], self.pipeline)
            except Exception as e:      # noqa: BLE001  (any failure: retried by _watch)
                session.close()
                results[switch.name] = (e if isinstance(e, ControllerError)
                                        else ControllerError(f"{switch.name}: {e}"))
                session = None
            self._watch(switch, session)

        for s in self.topo.switches:
            t = threading.Thread(target=first, args=(s,), name=f"watch-{s.name}", daemon=True)
            t.start()
            self._threads.append(t)
        while len(results) < len(self.topo.switches) and not self._stop.is_set():
            time.sleep(0.05)
        return [(s, results.get(s.name)) for s in self.topo.switches]

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=RECONNECT_TIMEOUT + 5)

    def wait_restarts(self, count: int, timeout: float) -> bool:
        """True once `count` restarts have been handled, False after `timeout` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.restarts) >= count, timeout)

    def _watch(self, switch: Switch, session: Session | None) -> None:
        down_at = time.time()
        if session is None:
            self.sessions.mark_down(switch.name, down_at)
        while not self._stop.is_set():
            if session is not None:
                while not session.stream_ended.wait(0.2):
                    if self._stop.is_set():
                        session.close()
                        return
                session.close()
                down_at = time.time()
                self.sessions.mark_down(switch.name, down_at)
                self.log(f"{switch.name}: gone (P4Runtime stream ended); waiting for it")
            session = self._reconnect(switch, down_at)
        if session is not None:
            session.close()

    def _reconnect(self, switch: Switch, down_at: float) -> Session | None:
        """A session with the switch brought to its desired state; None when stopped."""
        while not self._stop.is_set():
            session = Session(switch, self.election_id, RECONNECT_TIMEOUT)
            try:
                session.connect()
                back_at = time.time()
                result: SyncResult = sync(session, self.state[switch.name], self.pipeline)
            except Exception as e:      # noqa: BLE001  (the thread must outlive any failure)
                session.close()
                if "unreachable" not in str(e):
                    self.log(f"{switch.name}: {e}; retrying")
                    self._stop.wait(RETRY_PAUSE)
                continue
            programmed_at = time.time()
            if result.pushed:
                r = Restart(switch.name, down_at, back_at, programmed_at, result.written)
                self.sessions.restarted(r)
                moved = ", ".join(f"job {j} session {a} -> {b}" for j, (a, b) in
                                  sorted(r.sessions.items())) or "no job on it"
                self.log(f"{switch.name}: back without its program; pipeline pushed and "
                         f"{result.written} entries written {programmed_at - back_at:.1f} s "
                         f"after it answered; {moved}")
                with self.changed:
                    self.restarts.append(r)
                    self.changed.notify_all()
            else:
                self.sessions.mark_up(switch.name)
                self.log(f"{switch.name}: back with its program; {result.written} entries "
                         f"written")
            return session
        return None
