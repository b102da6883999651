"""Composition: a sparsifier picks the elements, a second operator compresses their values.

C_nat after top-k, for example, sends k * (9 + 32) bits (plus the count): each
kept value as sign and exponent, and its index. The second operator sees only
the kept values.
"""

from __future__ import annotations

from dataclasses import replace

from worker.compression.base import Compressed, Compressor
from worker.compression.sparsify import Sparsifier


class Compose(Compressor):
    """then(first(x)) on the kept values; `first` must be a sparsifier."""

    def __init__(self, first: Compressor, then: Compressor):
        if not isinstance(first, Sparsifier):
            raise ValueError(f"{first.spec} has no kept values to compress further: "
                             "compose a sparsifier (topk, blocktopk, randk, threshold, adaptive) "
                             "first")
        super().__init__(first.rng)
        self.first, self.then = first, then
        self.unbiased = first.unbiased and then.unbiased
        self.spec = f"{first.spec}+{then.spec}"

    def compress(self, x) -> Compressed:
        c = self.first.compress(x)
        values = c.payload["values"]
        where = replace(c, payload={k: v for k, v in c.payload.items() if k != "values"},
                        extra={"count": values.size})
        return Compressed({"where": where, "values": self.then.compress(values)}, c.shape)

    def decompress(self, c):
        where = c.payload["where"]
        values = self.then.decompress(c.payload["values"])
        return self.first.decompress(replace(where, payload={**where.payload, "values": values}))

    def bits(self, c):
        return self.first.position_bits(c.payload["where"]) + self.then.bits(c.payload["values"])

    def reset(self):
        self.first.reset()
        self.then.reset()
