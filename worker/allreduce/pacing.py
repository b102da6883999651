"""When to resend and how much to keep in flight: RFC 6298's retransmission timer and an
AIMD window of slots.

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
