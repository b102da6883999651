"""Counters of one allreduce client, cumulative over its calls."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class Stats:
    calls: int = 0
    elements: int = 0
    chunks: int = 0
    packets_sent: int = 0
    bytes_sent: int = 0            # whole frames (datagrams for the baseline)
    packets_received: int = 0
    bytes_received: int = 0
    retransmissions: int = 0
    bytes_resent: int = 0          # of bytes_sent, the retransmitted frames
    duplicates_ignored: int = 0    # results for a slot that were not the awaited one
    foreign_ignored: int = 0       # frames not for this job and session, or not results
    corrupt_ignored: int = 0       # frames whose UDP checksum does not add up
    rtt_samples: int = 0           # round trips measured (uses answered without a resend)
    rtt_seconds: float = 0.0       # their sum
    seconds: float = 0.0           # inside allreduce calls
    nonfinite_chunks: int = 0      # chunks that came back NaN: a worker marked them
    refusals_ignored: int = 0      # refused PRIMEs that were not this worker's (sparse)
    verified: int = 0              # calls whose result digests went through the switch

    def as_dict(self) -> dict:
        return asdict(self)

    def since(self, before: Stats) -> Stats:
        """The counts accumulated after the snapshot `before`."""
        now, then = asdict(self), asdict(before)
        return Stats(**{k: now[k] - then[k] for k in now})

    def copy(self) -> Stats:
        return Stats(**asdict(self))

    def summary(self) -> str:
        rate = self.packets_sent / self.seconds if self.seconds > 0 else 0.0
        return (f"{self.calls} allreduce, {self.elements} elements in {self.chunks} chunks, "
                f"{self.seconds:.3f} s; sent {self.packets_sent} pkt / {self.bytes_sent} B "
                f"({rate:.0f} pkt/s), received {self.packets_received} pkt / "
                f"{self.bytes_received} B; {self.retransmissions} retransmissions, "
                f"{self.duplicates_ignored} duplicates ignored; mean round trip "
                f"{1e3 * self.rtt_seconds / max(1, self.rtt_samples):.1f} ms")
