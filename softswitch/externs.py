"""Stateful externs: register arrays, counter arrays, meter arrays.

Their cells live in plain lists that the generated code indexes directly,
so a reset clears them in place rather than replacing them.
"""

from __future__ import annotations

import threading
import time

from .errors import SwitchError

M64 = (1 << 64) - 1


def _cell(v: int) -> int:
    """A value for a cell of 64 bits: numpy int64 cells (the native tier's) hold the bits."""
    return v - (1 << 64) if v >> 63 else v


def _index(name: str, size: int, i) -> int:
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < size:
        raise SwitchError("OUT_OF_RANGE", f"{name}: index {i!r} outside [0, {size})")
    return i


class Register:
    def __init__(self, name: str, size: int, bitwidth: int, lock: threading.RLock):
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        # a list, or a column of a 2-D numpy bank when vector code runs over the array
        self.values: list[int] = [0] * size
        self._lock = lock

    def read(self, i: int) -> int:
        with self._lock:
            return int(self.values[_index(self.name, self.size, i)]) & M64

    def write(self, i: int, v: int) -> None:
        with self._lock:
            i = _index(self.name, self.size, i)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < (1 << self.bitwidth):
                raise SwitchError("INVALID_ARGUMENT",
                                  f"{self.name}: value {v!r} does not fit {self.bitwidth} bits")
            self.values[i] = v if isinstance(self.values, list) else _cell(v)

    def reset(self) -> None:
        with self._lock:
            self.values[:] = [0] * self.size


class Counter:
    """BMv2 counts packets and bytes for every counter; `kind` is the P4 declaration's."""

    def __init__(self, name: str, size: int, lock: threading.RLock,
                 kind: str = "packets_and_bytes"):
        self.name = name
        self.size = size
        self.kind = kind
        self.packets: list[int] = [0] * size
        self.bytes: list[int] = [0] * size
        self._lock = lock

    def read(self, i: int) -> tuple[int, int]:
        with self._lock:
            i = _index(self.name, self.size, i)
            return int(self.packets[i]) & M64, int(self.bytes[i]) & M64

    def write(self, i: int, packets: int, nbytes: int) -> None:
        with self._lock:
            i = _index(self.name, self.size, i)
            for v in (packets, nbytes):
                if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < (1 << 64):
                    raise SwitchError("INVALID_ARGUMENT", f"{self.name}: bad counter value {v!r}")
            cell = (lambda v: v) if isinstance(self.packets, list) else _cell
            self.packets[i] = cell(packets)
            self.bytes[i] = cell(nbytes)

    def reset(self) -> None:
        with self._lock:
            self.packets[:] = [0] * self.size
            self.bytes[:] = [0] * self.size


GREEN, YELLOW, RED = 0, 1, 2


class Meter:
    """One two-rate three-colour meter (RFC 2698), as BMv2's Meter.

    Unconfigured meters colour every packet green, as BMv2's do.
    """

    __slots__ = ("rates", "tokens", "last")

    def __init__(self):
        self.rates: list[tuple[float, int]] | None = None  # [(CIR units/us, CBS), (PIR, PBS)]
        self.tokens: list[float] = []
        self.last = 0.0

    def execute(self, units: int) -> int:
        if not self.rates:
            return GREEN
        now = time.monotonic() * 1e6
        dt = now - self.last
        self.last = now
        for k, (rate, burst) in enumerate(self.rates):
            self.tokens[k] = min(burst, self.tokens[k] + rate * dt)
        # rates[-1] is the peak rate: exceed it -> red; exceed the committed -> yellow.
        if self.tokens[-1] < units:
            return RED
        if len(self.rates) > 1 and self.tokens[0] < units:
            self.tokens[-1] -= units
            return YELLOW
        for k in range(len(self.tokens)):
            self.tokens[k] -= units
        return GREEN


class MeterArray:
    def __init__(self, name: str, size: int, kind: str, rate_count: int, lock: threading.RLock):
        self.name = name
        self.size = size
        self.kind = kind  # "packets" or "bytes"
        self.rate_count = rate_count
        self.meters = [Meter() for _ in range(size)]
        self._lock = lock

    def set_rates(self, i: int, rates: list[tuple[float, int]]) -> None:
        """rates: [(rate per microsecond, burst size)] committed first, as BMv2's Thrift API."""
        with self._lock:
            m = self.meters[_index(self.name, self.size, i)]
            if len(rates) != self.rate_count:
                raise SwitchError("INVALID_ARGUMENT",
                                  f"{self.name}: {self.rate_count} rates needed")
            m.rates = [(float(r), int(b)) for r, b in rates]
            m.tokens = [float(b) for _, b in rates]
            m.last = time.monotonic() * 1e6

    def execute(self, i: int, nbytes: int) -> int:
        if not 0 <= i < self.size:
            return GREEN
        return self.meters[i].execute(nbytes if self.kind == "bytes" else 1)

    def reset(self) -> None:
        with self._lock:
            self.meters = [Meter() for _ in range(self.size)]
