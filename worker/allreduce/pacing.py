"""When to resend, how much to keep in flight and when to let results gather: RFC 6298's
retransmission timer, an AIMD window of slots, and two ways to handle results in bursts.

A round trip here is not the network's alone: a slot completes when the slowest worker's
contribution has arrived and a (software) switch has worked through everything queued
before it. So the timer starts conservative, learns from answered uses only (Karn), and
never goes below `minimum`; the window starts small and grows while no timer expires, so
a slow switch is not handed a burst it cannot answer within the timer.
"""

from __future__ import annotations


class RetransmitTimer:
    """RFC 6298: `initial` until the first sample, then srtt + 4 rttvar within the bounds."""

    def __init__(self, initial: float, minimum: float, maximum: float):
        if not 0 < minimum <= maximum or not 0 < initial <= maximum:
            raise ValueError("need 0 < rto_min <= rto_max and 0 < rto <= rto_max")
        self.initial, self.minimum, self.maximum = initial, minimum, maximum
        self.srtt: float | None = None
        self.rttvar = 0.0

    def sample(self, r: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = r, r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r

    def rto(self) -> float:
        if self.srtt is None:
            return self.initial
        return min(max(self.srtt + 4 * self.rttvar, self.minimum), self.maximum)


# New uses one pass of the loop sends beyond the uses its results completed. A switch takes
# frames in through a receive queue that a burst can overflow: BMv2 in the Mininet star
# reads each port through libpcap's ring of 32 frames (2 MB of 64 KB frames, sized for the
# veths' offloads) with a thread that shares two cores with its pipeline and the workers,
# and what a client sent back to back beyond it was lost: a sparse call's 64 primes in
# nearly every call (100 steps: 12,794 retransmissions, 0.81 steps/s), a dense call's 63
# chunks released at once by its priming result, or a window grown past 32. Results come
# back one by one, so the slots they release go out at once and the rest follow a few per
# result.
BURST = 8

# Uses a sparse call keeps in flight at most, whatever its job's window: below that ring of
# 32 frames, so that however BMv2's receive thread is scheduled its ring cannot overflow.
# Measured on BMv2 (embedding job, 100 steps): with 64 in flight 1,666 resends at 0.68
# steps/s, with 24 none at 0.64 (softswitch: 21-22 and 20 steps/s, no resends either way).
SPARSE_IN_FLIGHT = 24


class Window:
    """Slots in flight: slow start from `initial` up to `ssthresh`, then one more per window
    of results; halved when a timer expires, at most once per window of sends (a burst of
    timeouts is one congestion event). A fixed window is `initial == maximum`, adaptive off.
    """

    def __init__(self, initial: int, maximum: int, adaptive: bool = True):
        if not 1 <= initial:
            raise ValueError(f"initial window must be >= 1, got {initial}")
        self.maximum = maximum
        self.adaptive = adaptive
        self.size = float(min(initial, maximum))
        self.ssthresh = float(maximum)
        self.recover = -1           # sends up to this sequence number belong to the last cut
        self.cuts = 0

    def limit(self) -> int:
        return int(self.size)

    def on_result(self) -> None:
        if not self.adaptive or self.size >= self.maximum:
            return
        self.size += 1.0 if self.size < self.ssthresh else 1.0 / self.size
        self.size = min(self.size, float(self.maximum))

    def on_timeout(self, seq: int, last_seq: int) -> None:
        """A timer expired on the use sent as `seq`; `last_seq` is the latest send."""
        if not self.adaptive or seq <= self.recover:
            return
        self.ssthresh = max(self.size / 2, 1.0)
        self.size = self.ssthresh
        self.recover = last_seq
        self.cuts += 1


class Coalescer:
    """How long to let results gather before the receive loop handles them.

    When a software switch is the bottleneck, results trickle in one by one, and a worker
    that wakes for each pays its whole loop (and a codec call) per result: on shared cores
    that CPU is taken from the switch. Woken while at least `floor` uses are in flight, the
    worker sleeps until about `share` of them should have completed (at the result rate
    seen so far), at most `cap` seconds and never past a retransmission deadline. The
    uses still in flight keep the switch busy meanwhile. share 0: never sleep.
    """

    def __init__(self, share: float = 0.5, floor: int = 16, cap: float = 0.02):
        if not 0 <= share <= 1 or floor < 1 or cap < 0:
            raise ValueError("need 0 <= share <= 1, floor >= 1, cap >= 0")
        self.share, self.floor, self.cap = share, floor, cap
        self.gap: float | None = None      # seconds per completed use (moving average)
        self._at, self._done = 0.0, 0
        self.slept = 0.0

    def start(self, now: float) -> None:
        """A call begins: its completed-use count starts from 0."""
        self._at, self._done = now, 0

    def pause(self, now: float, done: int, in_flight: int, deadline: float) -> float:
        """Seconds to sleep now; `done` uses of this call completed, `in_flight` pending."""
        if done > self._done:
            g = (now - self._at) / (done - self._done)
            self.gap = g if self.gap is None else 0.75 * self.gap + 0.25 * g
            self._at, self._done = now, done
        if not self.share or self.gap is None or in_flight < self.floor:
            return 0.0
        p = min(self.share * in_flight * self.gap, self.cap, deadline - now)
        if p > 0:
            self.slept += p
        return max(p, 0.0)


class UplinkPacer:
    """How long to let results gather while this worker's own uplink is still busy.

    Where the worker's link is the bottleneck, results trickle in at the link's rate and a
    worker woken by each pays its whole loop per result: on shared cores that CPU is taken
    from the other workers and the switch. While frames it sent still queue on its uplink
    (Port.backlog), a chunk sent now would only wait behind them, so the worker sleeps
    until about `share` of that backlog has left, at the drain rate it measures between
    its passes (no frame is sent in between), at most `cap` seconds and never past a
    retransmission deadline. Without a backlog -- a switch or the other workers hold the
    job back, or the port cannot tell -- it never sleeps. share 0: never sleep.
    """

    def __init__(self, share: float = 0.5, minimum: float = 0.0003, cap: float = 0.02):
        if not 0 <= share <= 1 or minimum < 0 or cap < 0:
            raise ValueError("need 0 <= share <= 1, minimum >= 0, cap >= 0")
        self.share, self.minimum, self.cap = share, minimum, cap
        self.rate: float | None = None    # backlog units drained per second (moving average)
        self._at: float | None = None     # when the last pass ended, and its backlog
        self._left = 0
        self.slept = 0.0

    def passed(self, now: float, backlog: int | None) -> None:
        """A pass of the receive loop ended (its frames sent): the backlog it leaves."""
        self._at, self._left = (now, backlog) if backlog else (None, 0)

    def pause(self, now: float, backlog: int | None, deadline: float) -> float:
        """Seconds to sleep, woken by a result at `now` with `backlog` still queued."""
        if not self.share or not backlog:
            self._at = None
            return 0.0
        if self._at is not None and now > self._at and self._left > backlog:
            r = (self._left - backlog) / (now - self._at)
            self.rate = r if self.rate is None else 0.75 * self.rate + 0.25 * r
        self._at = None
        if self.rate is None:
            return 0.0
        p = min(self.share * backlog / self.rate, self.cap, deadline - now)
        if p < self.minimum:
            return 0.0
        self.slept += p
        return p
