"""Watch mode: keep the switches of a topology programmed while they come and go.

One thread per switch holds a P4Runtime session (arbitration on the stream channel). When
the stream ends, the switch went away: it is marked down in the sessions file, and the
thread reconnects until the switch answers again. It is then brought to the desired state
like a one-shot run (read, write the difference). A switch that came back without the
program (it had to be pushed) lost its registers: every job whose tree holds it moves to a
new session on every switch of its tree, and only then is the move published in the
sessions file (controller/job_sessions.py), so the workers start its slots afresh
(docs/CONTROLLER.md, "Watch mode").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.job_sessions import SessionsFile
from controller.p4info import Pipeline
from controller.program import SyncResult, canonical_state, desired_state, sync
from controller.session import ControllerError, Session
from controller.topology import Switch, Topology

RECONNECT_TIMEOUT = 1.0     # seconds per connection attempt; attempts repeat without end
RETRY_PAUSE = 0.2           # after a failed attempt to program a switch that answers
MOVE_WAIT = 30.0            # seconds a session move waits for the other switches of a job


@dataclass
class Restart:
    """A switch that went away and came back without its program."""

    switch: str
    down_at: float            # time.time() when its stream ended
    back_at: float            # when it answered again
    programmed_at: float      # when its pipeline and entries were back
    written: int
    sessions: dict[int, tuple[int, int]] = field(default_factory=dict)  # job -> (old, new)


class Watcher:
    """Programs every switch, then keeps each one programmed. start(), then stop()."""

    def __init__(self, topo: Topology, pipeline: Pipeline, sessions_path: str,
                 election_id: tuple[int, int] = (0, 1), first_session: int | None = None,
                 log: Callable[[str], None] = print, renew: bool = False):
        self.topo, self.pipeline, self.election_id, self.log = topo, pipeline, election_id, log
        self.sessions = SessionsFile(sessions_path, topo, first_session, renew)
        self.lock = threading.Lock()
        self.generation = 0                 # of the desired state; grows with each move
        self.synced = {s.name: -1 for s in topo.switches}  # the generation each one holds
        self.resync = {s.name: threading.Event() for s in topo.switches}
        self._desire()
        self.restarts: list[Restart] = []
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _desire(self) -> None:
        """The desired state of every switch for the jobs' current sessions."""
        with self.lock:
            self.state = canonical_state(desired_state(self.topo, self.sessions.sessions(),
                                                       self.pipeline.p4info),
                                         self.pipeline.p4info)
            self.generation += 1

    def _sync(self, p4rt: Session) -> SyncResult:
        """Brings a switch to the current desired state and records which one it holds."""
        name = p4rt.switch.name
        with self.lock:
            state, generation = self.state[name], self.generation
        result = sync(p4rt, state, self.pipeline)
        with self.changed:
            self.synced[name] = generation
            self.changed.notify_all()
        return result

    def start(self, connect_timeout: float = 10.0) -> list[tuple[Switch, object]]:
        """Programs every switch (SyncResult or ControllerError each, in topology order) and
        starts watching them all; a switch that failed is retried until it answers. The
        sessions file is written once every switch was tried."""
        results: dict[str, object] = {}

        def first(switch: Switch) -> None:
            p4rt = Session(switch, self.election_id, connect_timeout)
            try:
                p4rt.connect()
                results[switch.name] = self._sync(p4rt)
            except Exception as e:      # noqa: BLE001  (any failure: retried by _watch)
                p4rt.close()
                results[switch.name] = (e if isinstance(e, ControllerError)
                                        else ControllerError(f"{switch.name}: {e}"))
                p4rt = None
            self._watch(switch, p4rt)

        for s in self.topo.switches:
            t = threading.Thread(target=first, args=(s,), name=f"watch-{s.name}", daemon=True)
            t.start()
            self._threads.append(t)
        while len(results) < len(self.topo.switches) and not self._stop.is_set():
            time.sleep(0.05)
        self.sessions.write()
        return [(s, results.get(s.name)) for s in self.topo.switches]

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=RECONNECT_TIMEOUT + 5)

    def wait_restarts(self, count: int, timeout: float) -> bool:
        """True once `count` restarts have been handled, False after `timeout` seconds."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.restarts) >= count, timeout)

    def _watch(self, switch: Switch, p4rt: Session | None) -> None:
        down_at = time.time()
        if p4rt is None:
            self.sessions.mark_down(switch.name, down_at)
        while not self._stop.is_set():
            if p4rt is not None:
                while not p4rt.stream_ended.wait(0.2):
                    if self._stop.is_set():
                        p4rt.close()
                        return
                    if self.resync[switch.name].is_set():
                        self.resync[switch.name].clear()
                        try:
                            self._sync(p4rt)
                        except Exception as e:      # noqa: BLE001  (retried on reconnect)
                            self.log(f"{switch.name}: taking the jobs' new sessions failed "
                                     f"({e}); retrying when it reconnects")
                p4rt.close()
                down_at = time.time()
                self.sessions.mark_down(switch.name, down_at)
                self.log(f"{switch.name}: gone (P4Runtime stream ended); waiting for it")
            p4rt = self._reconnect(switch, down_at)
        if p4rt is not None:
            p4rt.close()

    def _reconnect(self, switch: Switch, down_at: float) -> Session | None:
        """A P4Runtime session with the switch brought to its desired state; None when
        stopped."""
        while not self._stop.is_set():
            p4rt = Session(switch, self.election_id, RECONNECT_TIMEOUT)
            try:
                p4rt.connect()
                back_at = time.time()
                result: SyncResult = self._sync(p4rt)
            except Exception as e:      # noqa: BLE001  (the thread must outlive any failure)
                p4rt.close()
                if "unreachable" not in str(e):
                    self.log(f"{switch.name}: {e}; retrying")
                    self._stop.wait(RETRY_PAUSE)
                continue
            programmed_at = time.time()
            if result.pushed:
                r = Restart(switch.name, down_at, back_at, programmed_at, result.written)
                try:
                    self._move_sessions(r, p4rt)
                except Exception as e:      # noqa: BLE001  (the thread must outlive it)
                    p4rt.close()
                    self.log(f"{switch.name}: moving its jobs to new sessions failed ({e}); "
                             f"retrying")
                    self._stop.wait(RETRY_PAUSE)
                    continue
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
            return p4rt
        return None

    def _move_sessions(self, r: Restart, p4rt: Session) -> None:
        """The restarted switch lost its slots: every job on it moves to its next session on
        every switch of its tree (this one first, the others through their own threads),
        then the sessions file tells the workers. A switch of the tree that is down takes
        the new sessions when it comes back."""
        r.sessions = self.sessions.move(r.switch)
        if r.sessions:
            self._desire()
            self._sync(p4rt)
            with self.lock:
                generation = self.generation
            others = self.sessions.switches_of(r.sessions) - {r.switch}
            for name in others:
                self.resync[name].set()
            with self.changed:
                self.changed.wait_for(
                    lambda: self._stop.is_set() or all(
                        self.synced[n] >= generation or n in self.sessions.down
                        for n in others), MOVE_WAIT)
        self.sessions.restarted(r.switch, r.down_at, time.time(), r.sessions)
