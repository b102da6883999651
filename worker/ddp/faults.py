"""What the ranks of a DDP job tell each other when one cannot go on, through the job's
torch.distributed store (the TCP store rank 0 serves for the rendezvous).

Why the store and not the switch: every rank already reaches it, it carries text (the rank,
its host, its cause) where a switch slot could carry a flag at most, and it still answers
when the rank that stopped is gone. The switch path goes on carrying gradients only.

    board = FaultBoard(store, rank, names)
    board.start()                       # the heartbeat
    client.abort = board.check          # polled when a retransmission timer fires
    ...
    board.post("the tensor holds ...")  # this rank cannot go on

- A rank that fails posts its cause; the first post wins (compare_set), so every rank names
  the same one. A rank stopped by SIGTERM or SIGINT posts that (worker/ddp/main.py).
- A rank killed outright (SIGKILL) or frozen posts nothing: each rank adds 1 to its own
  heartbeat counter every `beat` seconds, and a peer whose counter has not moved for
  `dead_after` seconds on the observer's clock is reported as stopped.
- check() is what the allreduce client polls: the posted fault, else a stopped peer, else
  None. The client raises with it, so the rank ends naming the peer instead of blaming the
  switch at its timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

PREFIX = "natswitch/"
FAULT = PREFIX + "fault"
LEFT = PREFIX + "left"
BEAT = 0.5
DEAD_AFTER = 3.0


def beat_key(rank: int) -> str:
    return f"{PREFIX}beat/{rank}"


class FaultBoard:
    def __init__(self, store, rank: int, names: Sequence[str], *, beat: float = BEAT,
                 dead_after: float = DEAD_AFTER, clock: Callable[[], float] = time.monotonic):
        if not 0 < beat < dead_after:
            raise ValueError(f"need 0 < beat < dead_after, got {beat} and {dead_after}")
        if not 0 <= rank < len(names):
            raise ValueError(f"rank {rank} is not one of the job's {len(names)} ranks")
        self.store, self.rank, self.names = store, rank, list(names)
        self.beat, self.dead_after, self.clock = beat, dead_after, clock
        self.seen: dict[int, tuple[int, float]] = {}     # peer -> (counter, since when)
        self.checks = 0
        self.left = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def who(self, rank: int) -> str:
        return f"rank {rank} ({self.names[rank]})"

    # ------------------------------------------------------------------ this rank
    def post(self, cause: str) -> str:
        """Says that this rank cannot go on, and why; returns the fault the job holds (the
        first one posted, this or another rank's)."""
        text = f"{self.who(self.rank)}: {cause}"
        return self.store.compare_set(FAULT, "", text).decode()

    def start(self) -> None:
        """The heartbeat: one store add every `beat` seconds, on a thread of its own."""
        if self._thread is not None:
            return
        self.store.add(beat_key(self.rank), 1)
        self._thread = threading.Thread(target=self._beat, name="natswitch-heartbeat",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self.beat)
            self._thread = None

    def _beat(self) -> None:
        while not self._stop.wait(self.beat):
            try:
                self.store.add(beat_key(self.rank), 1)
            except Exception:   # noqa: BLE001  (the store is gone: the job is ending)
                return

    # ------------------------------------------------------------------ the others
    def fault(self) -> str | None:
        """The fault posted by any rank, or None."""
        if not self.store.check([FAULT]):
            return None
        return self.store.get(FAULT).decode()

    def _stale(self) -> list[tuple[int, float]]:
        """(peer, seconds) for each peer whose heartbeat has not moved for dead_after s."""
        now, out = self.clock(), []
        for r in range(len(self.names)):
            if r == self.rank:
                continue
            n = self.store.add(beat_key(r), 0)
            last = self.seen.get(r)
            if last is None or last[0] != n:
                self.seen[r] = (n, now)
            elif now - last[1] >= self.dead_after:
                out.append((r, now - last[1]))
        return out

    def stopped(self) -> str | None:
        """A peer whose heartbeat has not moved for dead_after seconds, or None."""
        for r, idle in self._stale():
            return (f"{self.who(r)} stopped: its heartbeat in the job's store has not "
                    f"moved for {idle:.1f} s (killed, or frozen)")
        return None

    def check(self) -> str | None:
        """What stops the job, if anything: the posted fault, else a stopped peer."""
        self.checks += 1
        try:
            return self.fault() or self.stopped()
        except Exception as e:  # noqa: BLE001  (the store's server is gone)
            return (f"the job's store is unreachable ({type(e).__name__}): "
                    f"{self.who(0)}, which serves it, has stopped")

    # ------------------------------------------------------------------ the end
    def leave(self) -> None:
        """This rank is done with the store (after its result is out)."""
        try:
            self.store.add(LEFT, 1)
            self.left = True
        except Exception:   # noqa: BLE001  (gone already: nothing to wait for)
            pass

    def linger(self, most: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> None:
        """Rank 0, whose process serves the store, waits (at most `most` seconds) until
        every other rank has left or stopped beating, so that none loses the fault to a
        store that went away before it read it. Its own leave() is not one of them."""
        deadline = self.clock() + most
        peers = len(self.names) - 1
        while self.clock() < deadline:
            others_left = self.store.add(LEFT, 0) - int(self.left)
            if others_left + len(self._stale()) >= peers:
                return
            sleep(0.1)


def describe(e: BaseException) -> str:
    """A rank's error as a fault's cause: its first line, with its type when that says
    more than the text."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    name = type(e).__name__
    if not text:
        return name
    return text if name in ("AllReduceError", "AboveBound") else f"{name}: {text}"


class Posting:
    """A client used on its own (not through worker/ddp/train.py), joined to the board: it
    hears the others' faults, and its own AllReduceError is posted."""

    def __init__(self, client, board: FaultBoard):
        self.client, self.board = client, board
        client.abort = board.check

    def allreduce(self, tensor):
        from worker.allreduce import AllReduceError

        try:
            return self.client.allreduce(tensor)
        except AllReduceError as e:
            self.board.post(str(e))
            raise

    def __getattr__(self, name):
        return getattr(self.client, name)
