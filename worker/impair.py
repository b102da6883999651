"""Seeded loss, duplication and reordering around any port, for tests and experiments.

Sending: each frame is dropped with probability `loss`, else sent twice with probability
`dup`, and with probability `reorder` held back and overtaken by the frames sent after
it; held frames go out, shuffled, when the sender next waits for input (recv). So a
frame is never overtaken by a frame its sender could only send after a reply -- the
bound on reordering that SwitchML's shadow copies rely on (docs/WORKER.md).

Receiving: the same three impairments on frames coming in; a reordered frame is
overtaken by the next frame already waiting.

The same seed gives the same decisions for the same sequence of calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worker.transport import Port


@dataclass
class ImpairStats:
    sent_dropped: int = 0
    sent_duplicated: int = 0
    sent_reordered: int = 0
    recv_dropped: int = 0
    recv_duplicated: int = 0
    recv_reordered: int = 0


class ImpairedPort(Port):
    def __init__(self, inner: Port, loss: float = 0.0, dup: float = 0.0, reorder: float = 0.0,
                 seed: int = 0, recv_loss: float | None = None, recv_dup: float | None = None,
                 recv_reorder: float | None = None):
        super().__init__()
        for name, p in (("loss", loss), ("dup", dup), ("reorder", reorder),
                        ("recv_loss", recv_loss), ("recv_dup", recv_dup),
                        ("recv_reorder", recv_reorder)):
            if p is not None and not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        if loss >= 1.0 or (recv_loss if recv_loss is not None else loss) >= 1.0:
            raise ValueError("loss 1.0 would cut the port off; use a probability below 1")
        self.inner = inner
        self.send_p = (loss, dup, reorder)
        self.recv_p = (loss if recv_loss is None else recv_loss,
                       dup if recv_dup is None else recv_dup,
                       reorder if recv_reorder is None else recv_reorder)
        self.rng = np.random.default_rng(seed)
        self.held: list[bytes] = []
        self.pending: list[bytes] = []     # received frames to hand out before reading more
        self.stats = ImpairStats()

    def send(self, frame: bytes) -> None:
        loss, dup, reorder = self.send_p
        u = self.rng.random(3)
        if u[0] < loss:
            self.stats.sent_dropped += 1
            return
        copies = 2 if u[1] < dup else 1
        self.stats.sent_duplicated += copies - 1
        if u[2] < reorder:
            self.stats.sent_reordered += 1
            self.held.extend([frame] * copies)
            return
        for _ in range(copies):
            self.inner.send(frame)

    def flush(self) -> None:
        """Sends the held frames (shuffled)."""
        held, self.held = self.held, []
        for i in self.rng.permutation(len(held)):
            self.inner.send(held[i])

    def recv(self, timeout: float | None) -> bytes | None:
        if self.held:
            self.flush()
        loss, dup, reorder = self.recv_p
        while True:
            if self.pending:
                return self.pending.pop()
            frame = self.inner.recv(timeout)
            if frame is None:
                return None
            u = self.rng.random(3)
            if u[0] < loss:
                self.stats.recv_dropped += 1
                # Only what is already queued; the caller calls again with its own deadline.
                timeout = 0.0 if timeout is not None else None
                continue
            if u[1] < dup:
                self.stats.recv_duplicated += 1
                self.pending.append(frame)
            if u[2] < reorder:
                later = self.inner.recv(0.0)
                if later is not None:
                    self.stats.recv_reordered += 1
                    self.pending.insert(0, frame)
                    return later
            return frame

    def close(self) -> None:
        if not self.closed:
            self.inner.close()
        super().close()
