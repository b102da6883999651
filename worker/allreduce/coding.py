"""Chunks through worker/codec.py, many rows per call: what goes into packets and comes out.

Integer encodings (FIXED32, CNAT8, and the 4-bit ones) need the negotiated exponent of each
chunk, hence the priming round; FLOAT32 (the host-based baseline) carries the values
themselves. 4-bit payload rows are their packed bytes (codec.pack4). An encoding declared
`rotated` (protocol/encodings.py) works on the tensor rotated by worker/hadamard.py
(`rotates`): the client rotates before chunking and rotates the mean back.

Random bits (DESIGN.md contract 10): a chunk's rounding draws from its identity only, the run's
seed, the worker's rank, the job, the session's place in the run, the call and the chunk's
number in it (worker/keyed.py), so its codes are the same whatever was encoded before and in
whatever order results released the chunks: a rerun of a seed repeats, loss and
retransmissions included. The session enters by its place (0 for the first, then one more per
session the client moves to), not its number: the controller draws a job's first session from
the clock, so a rerun gets another number.
"""

from __future__ import annotations

import numpy as np

from protocol.encodings import BY_CODE, BY_NAME
from worker import codec, keyed, wire


class ChunkCoder:
    def __init__(self, encoding: int, workers: int, seed: int = 0,
                 elems: int = wire.ELEMS, headroom: int | None = None, *, job: int = 0,
                 rank: int = 0):
        enc = BY_CODE.get(encoding)
        if enc is None or not (enc.worker or encoding == wire.ENC_FLOAT32):
            raise ValueError(f"unknown encoding {encoding}")
        self.encoding, self.workers, self.elems = encoding, workers, elems
        self.seed, self.job, self.rank = int(seed), int(job), int(rank)
        self.begin(0, 0)
        # The codec scales for n workers with headroom ceil(log2 n); a job whose tree needs
        # more (re-compressed partial sums, docs/PROTOCOL.md "Scaling") scales as for 2^h
        # workers, whose headroom is h. The mean still divides by the real worker count.
        h = codec.headroom(workers) if headroom is None else headroom
        self.scale_n = workers if h == codec.headroom(workers) else 1 << h
        self.primed = encoding != wire.ENC_FLOAT32
        self.rotates = enc.rotated
        self.zeros = bytes(wire.payload_bytes(encoding, elems))
        self._results = ({wire.ENC_FLOAT32} if not self.primed
                         else {wire.ENC_FIXED32, *(BY_NAME[r].code for r in enc.sums)})

    def begin(self, session: int, call: int) -> None:
        """Keys the draws of a call: `session`, the session's place in the run; `call`, the
        call's number in the session."""
        self.key = keyed.call_key(self.seed, self.rank, self.job, session, call)

    def bits(self, ids) -> keyed.RowBits:
        """The random bits of the rows numbered `ids` in the call."""
        return keyed.RowBits(keyed.row_keys(self.key, ids), self.elems)

    def exponents(self, chunks: np.ndarray) -> np.ndarray:
        """Per chunk, the exponent the protocol negotiates (docs/PROTOCOL.md)."""
        return codec.chunk_exponents(chunks)

    @staticmethod
    def marked_exponents(chunks: np.ndarray, mark: int) -> tuple[np.ndarray, np.ndarray]:
        """(exponents, over): per chunk its exponent, `mark` (the job's NONFINITE exponent,
        JobParams.nonfinite_exp) where the chunk holds NaN, inf or a value at or above
        2^(mark - 127), which `over` flags (docs/PROTOCOL.md "Non-finite values")."""
        exps = codec.chunk_exponents(chunks, raw=True)
        over = exps >= mark
        if over.any():
            exps[over] = mark
        return exps, over

    def accepts(self, result_encoding: int) -> bool:
        return result_encoding in self._results

    def encode(self, chunks: np.ndarray, exps: np.ndarray, ids) -> np.ndarray:
        """Payload rows for chunk rows at their negotiated exponents (one codec call); ids:
        the rows' chunk (or block) numbers in the call, whose draws they get."""
        if self.encoding == wire.ENC_FLOAT32:
            return chunks
        bits = self.bits(ids)
        if self.encoding == wire.ENC_CNAT8:
            return codec.encode_cnat8(chunks, exps, self.scale_n, bits)
        if self.encoding in wire.FOUR_BIT:
            return codec.encode4(self.encoding, chunks, exps, bits)
        return codec.encode_fixed32(chunks, exps, self.scale_n, bits)

    def valid(self, encoding: int, payload: np.ndarray) -> bool:
        """True if a result's payload can be decoded: every CNAT8 code is one a switch
        sends (codec.cnat8_valid); one that is not was corrupted on the way, like a frame
        whose checksum does not add up (the client ignores it, the use is retransmitted)."""
        return encoding != wire.ENC_CNAT8 or codec.cnat8_valid(payload)

    def result_dtype(self, encoding: int) -> np.dtype:
        """How result payloads of `encoding` are kept until decoded."""
        return {wire.ENC_FIXED32: np.dtype(np.int32), wire.ENC_CNAT8: np.dtype(np.uint8),
                wire.ENC_FLOAT32: np.dtype(np.float32), wire.ENC_SUM8: np.dtype(np.uint8)}[encoding]

    def decode_mean(self, encoding: int, payloads: np.ndarray, exps: np.ndarray) -> np.ndarray:
        """The mean over the workers of result rows (one codec call)."""
        if self.encoding in wire.FOUR_BIT:
            return codec.decode_mean4(self.encoding, encoding, payloads, exps, self.workers)
        n = self.scale_n
        if n == self.workers:
            if encoding == wire.ENC_FIXED32:
                return codec.decode_fixed32(payloads, exps, n, mean=True)
            if encoding == wire.ENC_CNAT8:
                return codec.decode_cnat8(payloads, exps, n, mean=True)
            return payloads / np.float32(n)
        if encoding == wire.ENC_FIXED32:
            total = codec.decode_fixed32(payloads, exps, n)
        else:
            total = codec.decode_cnat8(payloads, exps, n)
        return total / np.float32(self.workers)
