"""The compressor interface: one operator, what it sends, and how to undo it.

A Compressor maps a float32 tensor to a Compressed payload (the arrays and
scalars that would travel) and back. bits(c) is what the payload costs on the
wire under the layout each operator states in its docstring. Randomised
operators draw from a numpy Generator the caller seeds, so every run repeats.
State that outlives one call (error feedback) lives in feedback.py, and the
choice between per-layer and whole-model application in modes.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FLOAT_BITS = 32
INDEX_BITS = 32


@dataclass
class Compressed:
    """What one compress() call sends: named arrays/scalars plus the input's shape."""

    payload: dict[str, Any]
    shape: tuple[int, ...]
    extra: dict[str, Any] = field(default_factory=dict)  # local only, never counted

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class Compressor(ABC):
    """compress/decompress/bits; subclasses state their wire layout in the docstring."""

    #: E[decompress(compress(x))] == x for every x
    unbiased = False
    #: draws random numbers (then a Generator must be given)
    randomized = False

    def __init__(self, rng: np.random.Generator | None = None):
        if self.randomized and not isinstance(rng, np.random.Generator):
            raise ValueError(f"{type(self).__name__} is randomised: pass a seeded "
                             "numpy Generator (np.random.default_rng(seed))")
        self.rng = rng
        self.spec = type(self).__name__

    @abstractmethod
    def compress(self, x: np.ndarray) -> Compressed: ...

    @abstractmethod
    def decompress(self, c: Compressed) -> np.ndarray: ...

    @abstractmethod
    def bits(self, c: Compressed) -> int: ...

    def roundtrip(self, x: np.ndarray) -> np.ndarray:
        """decompress(compress(x)): the value the receiver sees."""
        return self.decompress(self.compress(x))

    def reset(self) -> None:  # noqa: B027 - optional hook, stateless by default
        """Forget state kept between calls (none by default)."""

    def __repr__(self) -> str:
        return f"<{self.spec}>"


def as_float32(x) -> np.ndarray:
    """The operators act on float32 (what travels); other inputs are cast first."""
    return np.ascontiguousarray(x, dtype=np.float32)


class Identity(Compressor):
    """No compression. Wire: 32 bits per element."""

    unbiased = True

    def compress(self, x):
        x = as_float32(x)
        return Compressed({"values": x.reshape(-1).copy()}, x.shape)

    def decompress(self, c):
        return c.payload["values"].reshape(c.shape).copy()

    def bits(self, c):
        return FLOAT_BITS * c.size
