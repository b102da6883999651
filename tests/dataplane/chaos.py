"""A seeded chaos schedule around real allreduce clients: what the network may do to them.

ChaosPort wraps a worker's port. Every decision comes from the worker's own seeded generator,
in the order of the port's operations, so a failing seed names its schedule (the threads'
interleaving still varies from run to run). On the way out it loses, duplicates and delays
contributions (released several rounds later), replays frames sent long before, sends
copies of earlier frames under an older session, or a newer one (the switch takes only the
one the control plane installed), copies of the frame it sends numbered two or more uses
ahead (a use no correct worker can have sent yet: the switch must drop it, not move the
slot on), and copies with a flipped bit (their checksum no longer adds up). The copies of
another session or use carry a valid UDP checksum. On the way in it does the same to
results, and hands the client results of its earlier calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from worker import frames
from worker.transport import Port

AGG = frames.L2_LEN          # where the AGG header starts in a frame
SESSION = AGG + 4            # the session field
VERSION = AGG + 8            # the version field
CHUNK = AGG + 12             # the chunk field


@dataclass(frozen=True)
class Chaos:
    loss: float = 0.2            # each direction
    dup: float = 0.1
    delay: float = 0.2           # held back and released 1..max_delay operations later
    max_delay: int = 24
    replay: float = 0.05         # also send a frame sent long before
    old_session: float = 0.05    # also send an earlier frame under an older session
    corrupt: float = 0.03        # also send (or hand the client) a copy with a flipped bit
    stale_result: float = 0.05   # hand the client a result of one of its earlier calls
    # Off unless asked for (schedules that leave them out draw as they did before them):
    new_session: float = 0.0     # also send an earlier frame under a newer session
    early: float = 0.0           # also send the frame numbered 2 or more uses ahead


def refresh_checksum(frame: bytes) -> bytes:
    """`frame` with its UDP checksum recomputed (after a field was rewritten)."""
    return frames.with_udp_checksum(frame)


def flip_bit(frame: bytes, rng: np.random.Generator) -> bytes:
    """A copy with one bit of the AGG header or payload flipped."""
    out = bytearray(frame)
    i = int(rng.integers(AGG, len(frame)))
    out[i] ^= 1 << int(rng.integers(8))
    return bytes(out)


def with_session(frame: bytes, session: int) -> bytes:
    """`frame` under another session, its UDP checksum recomputed."""
    return refresh_checksum(frame[:SESSION] + session.to_bytes(2, "big")
                            + frame[SESSION + 2:])


def ahead(frame: bytes, uses: int, slots: int) -> bytes:
    """`frame` numbered `uses` uses of its slot later (chunk + uses * slots modulo 2^32, the
    version flipped for an odd `uses`), its UDP checksum recomputed."""
    chunk = int.from_bytes(frame[CHUNK:CHUNK + 4], "big")
    out = bytearray(frame)
    out[CHUNK:CHUNK + 4] = ((chunk + uses * slots) & 0xFFFFFFFF).to_bytes(4, "big")
    out[VERSION] ^= uses & 1
    return refresh_checksum(bytes(out))


class ChaosPort(Port):
    def __init__(self, inner: Port, chaos: Chaos, seed: int, session: int,
                 slots: int | None = None):
        """session: the job's; slots: the job's slot count (the stride of its chunk
        numbers), needed for copies numbered ahead."""
        super().__init__()
        self.inner, self.chaos = inner, chaos
        self.rng = np.random.default_rng(seed)
        self.slots = slots
        self.older = [(session - d - 1) % 0x10000 or 0xFFFF for d in range(3)]
        self.newer = [(session + d) % 0x10000 or 1 for d in (1, 2, 0x7FFF)]
        self.ops = 0
        self.held_out: list[tuple[int, bytes]] = []      # (release at op, frame)
        self.held_in: list[tuple[int, bytes]] = []
        self.sent: list[bytes] = []                      # every frame the client sent
        self.results: list[bytes] = []                   # every result it was handed
        self.call_start = 0                              # index into results of this call
        self.counts = dict.fromkeys(("lost", "dup", "delayed", "replayed", "old_session",
                                     "corrupted", "corrupted_out", "stale_results"), 0)
        if chaos.new_session:
            self.counts["new_session"] = 0
        if chaos.early:
            assert slots, "copies numbered ahead need the job's slot count"
            self.counts["early"] = 0

    def new_call(self) -> None:
        """Marks where the results of earlier calls end."""
        self.call_start = len(self.results)

    def _due(self, held: list) -> list[bytes]:
        due = [f for at, f in held if at <= self.ops]
        held[:] = [(at, f) for at, f in held if at > self.ops]
        return due

    def _hold(self, held: list, frame: bytes) -> None:
        held.append((self.ops + int(self.rng.integers(1, self.chaos.max_delay + 1)), frame))
        self.counts["delayed"] += 1

    def send(self, frame: bytes) -> None:
        c, r = self.chaos, self.rng
        self.ops += 1
        self.sent.append(frame)
        out = self._due(self.held_out)
        if r.random() < c.loss:
            self.counts["lost"] += 1
        elif r.random() < c.delay:
            self._hold(self.held_out, frame)
        else:
            out.append(frame)
        if r.random() < c.dup:
            self.counts["dup"] += 1
            self._hold(self.held_out, frame)
        if len(self.sent) > 8 and r.random() < c.replay:
            self.counts["replayed"] += 1
            out.append(self.sent[int(r.integers(0, len(self.sent) - 8))])
        if r.random() < c.old_session:
            self.counts["old_session"] += 1
            old = self.sent[int(r.integers(0, len(self.sent)))]
            session = self.older[int(r.integers(0, len(self.older)))]
            out.append(with_session(old, session))
        if c.new_session and r.random() < c.new_session:
            self.counts["new_session"] += 1
            old = self.sent[int(r.integers(0, len(self.sent)))]
            out.append(with_session(old, self.newer[int(r.integers(0, len(self.newer)))]))
        if c.early and r.random() < c.early:
            # The client sends (or resends) its slot's newest use, and the switch's newest
            # use of the slot is at most that one: two or more ahead no worker sent yet.
            self.counts["early"] += 1
            out.append(ahead(frame, int(r.integers(2, 1000)), self.slots))
        if r.random() < c.corrupt:
            # counted apart too: only these reach the switch (its BAD_UDP_CHECKSUM drops)
            self.counts["corrupted"] += 1
            self.counts["corrupted_out"] += 1
            out.append(flip_bit(frame, r))
        for f in out:
            self.inner.send(f)

    def recv(self, timeout: float | None) -> bytes | None:
        c, r = self.chaos, self.rng
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.ops += 1
            due = self._due(self.held_in)
            if due:
                self.held_in.extend((self.ops, f) for f in due[1:])
                return due[0]
            if self.call_start and r.random() < c.stale_result:
                self.counts["stale_results"] += 1
                return self.results[int(r.integers(0, self.call_start))]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            frame = self.inner.recv(0.005 if left is None else min(left, 0.005))
            if frame is None:
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            self.results.append(frame)
            if r.random() < c.loss:
                self.counts["lost"] += 1
                continue
            if r.random() < c.dup:
                self.counts["dup"] += 1
                self._hold(self.held_in, frame)
            if r.random() < c.corrupt:
                self.counts["corrupted"] += 1
                return flip_bit(frame, r)
            if r.random() < c.delay:
                self._hold(self.held_in, frame)
                continue
            return frame
