"""One chunk at a time through worker/codec.py: what the client puts in and takes out of a packet.

Integer encodings (FIXED32, CNAT8) need the negotiated exponent of each chunk, hence
the priming round; FLOAT32 (the host-based baseline) carries the values themselves.
"""

from __future__ import annotations

import numpy as np

from worker import codec, wire
from worker.frames import DTYPES


class ChunkCoder:
    def __init__(self, encoding: int, workers: int, rng: np.random.Generator,
                 elems: int = wire.ELEMS):
        if encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8, wire.ENC_FLOAT32):
            raise ValueError(f"unknown encoding {encoding}")
        self.encoding, self.workers, self.rng = encoding, workers, rng
        self.primed = encoding != wire.ENC_FLOAT32
        self.zeros = bytes(DTYPES[encoding].itemsize * elems)
        self._results = ({wire.ENC_FLOAT32} if not self.primed
                         else {wire.ENC_FIXED32, wire.ENC_CNAT8})

    def exponents(self, chunks: np.ndarray) -> np.ndarray:
        """Per chunk, the exponent the protocol negotiates (docs/PROTOCOL.md)."""
        return codec.chunk_exponents(chunks)

    def accepts(self, result_encoding: int) -> bool:
        return result_encoding in self._results

    def encode(self, chunk: np.ndarray, exp: int) -> np.ndarray:
        """The payload values of one chunk at the negotiated exponent `exp`."""
        if self.encoding == wire.ENC_CNAT8:
            return codec.encode_cnat8(chunk[None], exp, self.workers, self.rng)[0]
        if self.encoding == wire.ENC_FIXED32:
            return codec.encode_fixed32(chunk[None], exp, self.workers, self.rng)[0]
        return chunk

    def decode_mean(self, encoding: int, payload: np.ndarray, exp: int) -> np.ndarray:
        """The mean over the workers of one chunk from the result's payload."""
        if encoding == wire.ENC_FIXED32:
            return codec.decode_fixed32(payload[None], exp, self.workers, mean=True)[0]
        if encoding == wire.ENC_CNAT8:
            return codec.decode_cnat8(payload[None], exp, self.workers, mean=True)[0]
        return payload.astype(np.float32) / np.float32(self.workers)
