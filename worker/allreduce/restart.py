"""Following a job's session across switch restarts.

A restarted switch has lost its registers: the slots' partial sums and the results that
workers still missing them would have been answered with. The controller in watch mode
(controller/watch.py) re-programs it and then moves every job on it to a new, newer session
in its sessions file:

    {"version": 1, "jobs": {"1": {"session": 4712, "epoch": 1, "switches": ["s1"],
     "restarts": [{"switch": "s1", "down": T, "programmed": T, "session": 4712}]}},
     "down": {"s5": T}}

The rule every worker follows (RestartFollower):

- A call (and a wait for a result) looks at the file at most every POLL seconds; when the
  job's epoch is newer than the one it works in, it leaves the call and adopts the file's
  session (AllReduceClient.start_session: slots and calls start over).
- Every session begins with one agreement call: each worker puts the number of calls it
  has completed, modulo 4, in its own two elements (0 or 1 each, exact through either
  result encoding). The restart may have caught the workers between calls: a worker can be
  at most one call ahead, since a call completes only with everyone's contributions.
- All in the same call: it is called again in the new session, by everyone.
- Some one call ahead: they got the result of the others' interrupted call before the
  switch died, and used it. The lowest such rank sends that result, bit by bit, as the
  next call (the others send zeros), so the workers behind get it exactly and their
  interrupted call returns it; the workers ahead then call their own call again.

A call that fails while a switch of the job is down waits up to `wait` seconds for the
controller to bring it back; every error after a restart names the restart.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np

from worker.allreduce.client import AllReduceClient, AllReduceError
from worker.transport import Port

POLL = 0.2                  # seconds between looks at the sessions file during a call
RESTART_WAIT = 60.0         # seconds a failed call waits for a switch that is down


class SessionMoved(Exception):
    """The job moved to a newer session while a call was under way."""


class SessionsView:
    """One job's entry in the controller's sessions file, re-read when the file changes."""

    def __init__(self, path: str, job_id: int):
        self.path, self.job_id = path, job_id
        self._stamp = None
        self.entry: dict = {}
        self.down: dict[str, float] = {}
        self.adopted: int | None = None    # the epoch the worker works in
        self._next_look = 0.0
        self.refresh()
        if not self.entry:
            raise ValueError(f"job {job_id} is not in the sessions file {path}")

    def refresh(self) -> None:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp == self._stamp:
                return
            with open(self.path) as f:
                data = json.load(f)
            entry = data["jobs"][str(self.job_id)]
            down = {k: float(v) for k, v in data.get("down", {}).items()}
            int(entry["session"]), int(entry["epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            return      # missing, or being replaced: keep what was read last
        self._stamp, self.entry, self.down = stamp, entry, down

    @property
    def session(self) -> int:
        return int(self.entry["session"])

    @property
    def epoch(self) -> int:
        return int(self.entry["epoch"])

    def moved(self, now: float | None = None) -> bool:
        """True when the file names a newer epoch than the adopted one (looks at most
        every POLL seconds when `now` is given)."""
        if now is not None:
            if now < self._next_look:
                return self.adopted is None or self.epoch > self.adopted
            self._next_look = now + POLL
        self.refresh()
        return self.adopted is None or self.epoch > self.adopted

    def down_switches(self) -> list[str]:
        return sorted(set(self.down) & set(self.entry.get("switches", ())))

    def restarts(self) -> list[dict]:
        return list(self.entry.get("restarts", ()))


class WatchedPort(Port):
    """A port whose receive leaves a call (SessionMoved) once the job's session moved on."""

    def __init__(self, inner: Port, view: SessionsView,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.inner, self.view, self.clock = inner, view, clock

    def send(self, frame: bytes) -> None:
        self.inner.send(frame)

    def recv(self, timeout: float | None) -> bytes | None:
        end = None if timeout is None else self.clock() + timeout
        while True:
            now = self.clock()
            if self.view.moved(now):
                raise SessionMoved()
            wait = POLL if end is None else min(POLL, max(0.0, end - now))
            frame = self.inner.recv(wait)
            if frame is not None or (end is not None and self.clock() >= end):
                return frame

    def close(self) -> None:
        super().close()
        self.inner.close()


class RestartFollower:
    """Wraps a client's allreduce so that the job survives switch restarts (see above)."""

    def __init__(self, client: AllReduceClient, view: SessionsView, rank: int,
                 wait: float = RESTART_WAIT, log: Callable[[str], None] | None = None):
        self.client, self.view, self.rank, self.wait = client, view, rank, wait
        self.workers = client.job.workers
        self.log = log or (lambda text: None)
        self.completed = 0                       # calls returned to the caller
        self.last: np.ndarray | None = None      # the result of the last one
        self.sessions = 0                        # sessions worked in (1 + restarts followed)

    def allreduce(self, tensor) -> np.ndarray:
        x = np.asarray(tensor, dtype=np.float32)
        while True:
            try:
                out = self._recover(x) if self.view.moved() else None
                if out is None:
                    out = self.client.allreduce(x)
                break
            except SessionMoved:
                continue
            except AllReduceError as e:
                self._after_failure(e)
        self.completed += 1
        self.last = out.copy()
        return out

    # ------------------------------------------------------------------ a new session
    def _recover(self, x: np.ndarray) -> np.ndarray | None:
        """Adopts the file's session and agrees with the other workers where the calls
        stand; returns this call's result if another worker supplied it, else None (the
        call is to be made again)."""
        view = self.view
        view.adopted = view.epoch
        self.client.start_session(view.session)
        self.sessions += 1
        if self.sessions > 1:
            self.log(f"switch restart: following job {self.client.job.job_id} to session "
                     f"{view.session} ({self._restart_text()}); agreeing where the calls "
                     f"stand")
        w, r = self.workers, self.rank
        flags = np.zeros(2 * w, np.float32)
        c = self.completed & 3
        flags[2 * r], flags[2 * r + 1] = c & 1, c >> 1
        got = np.rint(self.client.allreduce(flags) * w).astype(np.int64)
        if not np.isin(got, (0, 1)).all():
            raise AllReduceError(f"the agreement call after a switch restart "
                                 f"({self._restart_text()}) returned {got.tolist()}, not bits")
        where = got[0::2] + 2 * got[1::2]          # every rank's completed calls, mod 4
        behind = self._behind(where)
        ahead = [i for i in range(w) if where[i] != behind]
        if not ahead:
            return None
        me_ahead = where[r] != behind
        sender = min(ahead)
        size = self.last.size if me_ahead else x.size
        bits = np.zeros(32 * size, np.float32)
        if r == sender:
            bits[:] = np.unpackbits(self.last.reshape(-1).astype(np.float32).view(np.uint8))
        got = np.rint(self.client.allreduce(bits) * w).astype(np.uint8)
        if not np.isin(got, (0, 1)).all():
            raise AllReduceError(f"the result handed over after a switch restart "
                                 f"({self._restart_text()}) came back damaged")
        if me_ahead:
            return None
        self.log(f"switch restart: the result of call {self.completed + 1} came from rank "
                 f"{sender}, which had it before the switch went away")
        return np.packbits(got).view(np.float32).reshape(x.shape).copy()

    def _behind(self, where: np.ndarray) -> int:
        values = sorted({int(v) for v in where})
        if len(values) == 1:
            return values[0]
        if len(values) == 2:
            a, b = values
            if (b - a) % 4 == 1:
                return a
            if (a - b) % 4 == 1:
                return b
        raise AllReduceError(f"after a switch restart ({self._restart_text()}) the workers "
                             f"stand at calls {where.tolist()} (mod 4), more than one apart")

    # ------------------------------------------------------------------ failures
    def _after_failure(self, e: AllReduceError) -> None:
        """Returns when the session moved (the call is then made again); raises otherwise,
        naming a switch that is down or the restarts that happened."""
        deadline = time.monotonic() + self.wait
        while not self.view.moved():
            down = self.view.down_switches()
            if not down:
                raise AllReduceError(f"{e}{self._after_restarts()}") from None
            if time.monotonic() >= deadline:
                since = time.time() - min(self.view.down[s] for s in down)
                raise AllReduceError(
                    f"switch {', '.join(down)} of job {self.client.job.job_id} went away "
                    f"{since:.0f} s ago and is not back (the controller in watch mode waits "
                    f"for it); the call could not complete: {e}") from None
            time.sleep(POLL)

    def _restart_text(self) -> str:
        rs = self.view.restarts()
        if not rs:
            return "no restart recorded"
        last = rs[-1]
        return (f"switch {last['switch']} restarted at "
                f"{time.strftime('%H:%M:%S', time.localtime(last['down']))}, now session "
                f"{last['session']}")

    def _after_restarts(self) -> str:
        if self.sessions <= 1:
            return ""
        return f" (after a switch restart: {self._restart_text()})"
