"""Random bits keyed by what they round (DESIGN.md contract 10).

A worker's encoders draw every random bit from the identity of the chunk it rounds, not from
a generator shared by the chunks: a chunk's codes are then the same whatever was encoded
before it and in whatever order results released the chunks, so a rerun of a seed repeats
bit for bit, loss and retransmissions included.

Keys: a call's key is a SeedSequence of (seed, rank, job, session, call) (`call_key`; the
clients pass the session's place in the run, not its number, worker/allreduce/coding.py;
the host servers key a use by its chunk number and version, worker/baseline.py); row r
of a call has key K_r = mix(call key + (id_r + 1) * GAMMA), id_r the chunk's (or block's)
number in the call (`row_keys`). Bits: word j of purpose p of a row is
mix(K_r + (p * 2^32 + j + 1) * GAMMA): SplitMix64's output at a counter, i.e. a
counter-based generator like Philox, at three multiplications a word. A row's purposes
are disjoint streams (BYTES for the one byte per element every encoder draws, TIES for the
16 bits a tied element draws, ..., BERN + k for round k of a power-of-two Bernoulli draw),
each indexed by the element, so the bits an element gets never depend on how many other
elements drew.

The words come from codec_kernels' compiled loops where numba is installed, else from
numpy passes that give the same bits.
"""

from __future__ import annotations

import numpy as np

try:
    from worker import codec_kernels as _kernels
except ImportError:  # no numba
    _kernels = None

GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ONE = np.uint64(1)

# Purposes (a row's disjoint streams)
BYTES = 0       # one byte per element: word i // 8, byte i % 8 (little-endian)
TIES = 1        # a tie's 16 bits (the low half-word of word i)
SUBUNIT = 2     # FIXED32 below half a unit: 24 bits (the top of word i)
UNIFORM = 3     # uniform quantization: a double from the top 53 bits of word i
RESULT = 4      # a host server's CNAT8 re-compression: 32 bits (the low half of word i)
BERN = 16       # + k: round k of a power-of-two Bernoulli draw (64 bits of word i)


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Stafford's mix 13) of a uint64 array, in place (array
    arithmetic wraps silently)."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def call_key(seed: int, rank: int, job: int, session: int, call: int) -> np.uint64:
    """The key of one call of one worker: every draw of its chunks derives from it."""
    words = [int(x) % (1 << 64) for x in (seed, rank, job, session, call)]
    return np.random.SeedSequence(words).generate_state(1, np.uint64)[0]


def row_keys(key, ids) -> np.ndarray:
    """One key per row from the call's key and the rows' numbers in the call (uint64)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    out = np.empty(ids.size, np.uint64)
    if _kernels is not None:    # a call of a few chunks: numpy's dozen passes cost more
        _kernels.keyed_rows(np.uint64(key), ids, out)
        return out
    np.add(ids.view(np.uint64), _ONE, out=out)
    out *= GAMMA
    out += np.uint64(key)
    return mix64(out)


def _counter(purpose: int, j) -> np.ndarray:
    return (np.uint64(purpose) << np.uint64(32)) + np.asarray(j, np.uint64) + _ONE


class RowBits:
    """The random bits of a call's rows (one key each) of `elems` elements."""

    def __init__(self, keys, elems: int):
        self.keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        self.elems = int(elems)

    @classmethod
    def of(cls, rng, rows: int, elems: int) -> RowBits:
        """`rng` as RowBits: itself (checked), or keys for the rows drawn from a
        np.random.Generator (one 64-bit word a row, in row order)."""
        if isinstance(rng, RowBits):
            if rng.keys.size != rows or rng.elems != elems:
                raise ValueError(f"random keys for {rng.keys.size} rows of {rng.elems}, "
                                 f"the chunks are {rows} rows of {elems}")
            return rng
        return cls(rng.bit_generator.random_raw(rows), elems)

    @property
    def rows(self) -> int:
        return self.keys.size

    def sub(self, r0: int, r1: int) -> RowBits:
        return RowBits(self.keys[r0:r1], self.elems)

    def words(self, purpose: int, per: int) -> np.ndarray:
        """(rows, per) uint64: words 0..per-1 of the purpose in every row."""
        out = np.empty((self.rows, per), np.uint64)
        if _kernels is not None:
            _kernels.keyed_words(self.keys, np.uint64(purpose), out)
            return out
        np.multiply(_counter(purpose, np.arange(per))[None, :], GAMMA, out=out)
        out += self.keys[:, None]
        return mix64(out)

    def bytes(self, purpose: int = BYTES, shift: int = 0) -> np.ndarray:
        """One uniform byte per element, flat (rows * elems) uint8, shifted right by
        `shift` (7 bits: 1)."""
        if _kernels is not None and self.elems % 8:
            out = np.empty(self.rows * self.elems, np.uint8)
            _kernels.keyed_bytes(self.keys, self.elems, np.uint64(purpose), np.uint8(shift), out)
            return out
        b = self._bytes(purpose)    # whole words: the words' loop vectorises, bytes' does not
        if shift:
            np.right_shift(b, shift, out=b)
        return b

    def _bytes(self, purpose: int) -> np.ndarray:
        per = (self.elems + 7) // 8
        w = self.words(purpose, per).astype("<u8", copy=False)
        b = w.view(np.uint8).reshape(self.rows, per * 8)
        if per * 8 == self.elems:
            return b.reshape(-1)
        return np.ascontiguousarray(b[:, :self.elems]).reshape(-1)

    def u16(self, purpose: int, idx) -> np.ndarray:
        """The low 16 bits of at(purpose, idx), uint16."""
        if _kernels is not None:
            idx = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
            out = np.empty(idx.size, np.uint16)
            _kernels.keyed_u16(self.keys, self.elems, np.uint64(purpose), idx, out)
            return out
        return (self.at(purpose, idx) & np.uint64(0xFFFF)).astype(np.uint16)

    def at(self, purpose: int, idx) -> np.ndarray:
        """uint64 word of the purpose for flat element indices idx (row idx // elems,
        element idx % elems)."""
        idx = np.ascontiguousarray(idx, dtype=np.int64).reshape(-1)
        out = np.empty(idx.size, np.uint64)
        if _kernels is not None:
            _kernels.keyed_at(self.keys, self.elems, np.uint64(purpose), idx, out)
            return out
        rows, el = np.divmod(idx, self.elems)
        np.multiply(_counter(purpose, el), GAMMA, out=out)
        out += self.keys[rows]
        return mix64(out)


def bernoulli_pow2(bits: RowBits, idx, d) -> np.ndarray:
    """1 with probability exactly 2^-d (d >= 1, integers) for the elements idx, else 0
    (uint8): round k takes the top min(rem, 64) bits of word idx of purpose BERN + k."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    ok = np.ones(idx.shape, bool)
    rem = np.asarray(d, dtype=np.int64).reshape(-1).copy()
    k = 0
    while True:
        act = np.flatnonzero(ok & (rem > 0))
        if act.size == 0:
            return ok.astype(np.uint8)
        step = np.minimum(rem[act], 64).astype(np.uint64)
        r = bits.at(BERN + k, idx[act])
        # the top `step` bits all zero: probability 2^-step
        ok[act] = (r >> (np.uint64(64) - step)) == 0
        rem[act] -= step.astype(np.int64)
        k += 1
