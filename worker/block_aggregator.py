"""Host aggregator of sparse jobs: OmniReduce's own design, the block protocol on one host.

It speaks docs/PROTOCOL.md "Sparse jobs" exactly as the switch does (PRIME uses, the use's
block and the running minimum of the workers' next blocks per (slot, version), EMPTY
contributions counting as zero, bitmaps, stored results answering retransmissions, the
BAD_BLOCK checks), over kernel UDP with bare datagrams (AGG + BLOCK + payload) like the
host parameter server (worker/baseline.py): port 20034 by default, a worker's identity
its source address, the first `workers` distinct senders of a job session its members.
FIXED32 and CNAT8 contributions are added into int32 as the switch adds them; results are
FIXED32, or re-compressed to CNAT8 (--result-encoding cnat8). The same sparse client runs
against the switch or this server (worker/allreduce/sparse.py).

    python worker/block_aggregator.py --listen 10.0.0.5:20034 --workers 4
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from worker import codec, wire  # noqa: E402
from worker.baseline import HostServer, newer, server_main  # noqa: E402
from worker.frames import SPARSE_HEADER  # noqa: E402

log = logging.getLogger("natswitch.blockagg")
NO_BLOCK = wire.NO_BLOCK
UNSET = -1


@dataclass
class _Job:
    session: int
    slots: int
    members: dict = field(default_factory=dict)           # sender -> bit
    bitmap: np.ndarray = None
    count: np.ndarray = None
    use: np.ndarray = None            # per (slot, version): the chunk number of its use
    prime: np.ndarray = None          # the use is a PRIME
    blk: np.ndarray = None            # the use's block (the bound for a prime)
    bound: np.ndarray = None          # the tensor's block count, from the slot's prime
    rmin: np.ndarray = None           # running minimum of the contributions' next
    rexp: np.ndarray = None           # the max exp of the contributions whose next is rmin
    enc: np.ndarray = None
    acc: dict = field(default_factory=dict)                # (slot, version) -> int32 sums
    results: dict = field(default_factory=dict)            # (slot, version) -> datagram

    def __post_init__(self) -> None:
        shape = (self.slots, 2)
        self.bitmap = np.zeros(shape, np.uint64)
        self.count = np.zeros(shape, np.int64)
        self.use = np.zeros(shape, np.int64)
        self.prime = np.zeros(shape, bool)
        self.blk = np.full(shape, UNSET, np.int64)
        self.bound = np.full(shape, UNSET, np.int64)
        self.rmin = np.full(shape, NO_BLOCK, np.int64)
        self.rexp = np.zeros(shape, np.int64)
        self.enc = np.zeros(shape, np.int64)


class BlockAggregator(HostServer):
    """The sparse slot algorithm on a host. handle() is the whole logic."""

    def handle(self, data: bytes, sender) -> list[tuple[object, bytes]]:
        """One datagram from `sender` -> the datagrams to send, as (destination, bytes)."""
        parsed = self.framer.parse_sparse(data)
        if parsed is None:
            return self.stats.drop("bad_length_or_type")
        hdr, payload = parsed
        if hdr.msg_type != wire.MSG_SPARSE_CONTRIB:
            return self.stats.drop("not_contribution")
        if hdr.encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8):
            return self.stats.drop("bad_encoding")
        if hdr.version > 1:
            return self.stats.drop("bad_version")
        if hdr.slot >= self.slots:
            return self.stats.drop("bad_slot")
        job = self.jobs.get(hdr.job_id)
        if job is None or newer(hdr.session, job.session, 16):
            job = self.jobs[hdr.job_id] = _Job(hdr.session, self.slots)
        elif hdr.session != job.session:
            return self.stats.drop("stale")
        bit = job.members.get(sender)
        if bit is None:
            if len(job.members) >= self.n:
                log.warning("job %d: sender %s beyond the %d workers: dropped", hdr.job_id,
                            sender, self.n)
                return self.stats.drop("foreign_sender")
            bit = job.members[sender] = len(job.members)
        s, v = hdr.slot, hdr.version
        fresh = not job.bitmap[s, v] or newer(hdr.chunk, int(job.use[s, v]), 32)
        if not fresh and hdr.chunk != job.use[s, v]:
            return self.stats.drop("stale")     # a replay of an older use
        mask = np.uint64(1 << bit)
        if not fresh and job.bitmap[s, v] & mask:
            if job.count[s, v] == 0 and (s, v) in job.results:
                self.stats.answered += 1
                return [(sender, job.results[s, v])]
            self.stats.duplicates += 1
            return []
        prime = bool(hdr.flags & wire.FLAG_PRIME)
        empty = payload is None
        padded = empty and len(data) > SPARSE_HEADER.size     # bare datagrams: exact lengths
        # The use's kind, block and bound: its own once started, else what it would be.
        if fresh:
            blk = hdr.block if prime else int(job.rmin[s, 1 - v])
            bound = hdr.block if prime else int(job.bound[s, 1 - v])
        else:
            if prime != job.prime[s, v]:
                return self.stats.drop("bad_block")
            blk, bound = int(job.blk[s, v]), int(job.bound[s, v])
        if prime:
            if not empty or padded or hdr.block != bound:     # as the switch: no room either
                return self.stats.drop("bad_block")
        elif bound == UNSET or hdr.block != blk or blk >= bound or \
                (hdr.next != NO_BLOCK and hdr.next <= blk):
            return self.stats.drop("bad_block")
        if hdr.next != NO_BLOCK and hdr.next >= bound:
            return self.stats.drop("bad_block")
        if not fresh and not empty and job.enc[s, v] not in (-1, hdr.encoding):
            return self.stats.drop("mixed_encodings")
        self.stats.contributions += 1
        if fresh:
            job.bitmap[s, v] = job.count[s, v] = 0
            job.use[s, v] = hdr.chunk
            job.prime[s, v], job.blk[s, v], job.bound[s, v] = prime, blk, bound
            job.rmin[s, v], job.rexp[s, v] = NO_BLOCK, 0
            job.enc[s, v] = -1
            job.results.pop((s, v), None)
            job.acc[s, v] = np.zeros(self.elems, np.int32)
        job.bitmap[s, v] |= mask
        if not empty:
            values = (codec.switch_decode_cnat8(payload) if hdr.encoding == wire.ENC_CNAT8
                      else payload.astype(np.int32))
            np.add(job.acc[s, v], values, out=job.acc[s, v])     # int32 wraps, as the switch
            job.enc[s, v] = hdr.encoding
        if hdr.next < job.rmin[s, v]:
            job.rmin[s, v], job.rexp[s, v] = hdr.next, hdr.exp
        elif hdr.next == job.rmin[s, v]:
            job.rexp[s, v] = max(job.rexp[s, v], hdr.exp)
        job.count[s, v] = (job.count[s, v] + 1) % self.n
        if job.count[s, v]:
            return []
        self.stats.completed += 1
        sums = job.acc.pop((s, v))
        if prime:
            out, enc, flags = None, self.result_encoding, wire.FLAG_PRIME
        elif self.result_encoding == wire.ENC_CNAT8:
            out, enc, flags = self.recompress(sums, hdr.job_id, v, hdr.chunk), wire.ENC_CNAT8, 0
        else:
            out, enc, flags = sums, wire.ENC_FIXED32, 0
        result = self.framer.build_sparse(
            wire.MSG_SPARSE_RESULT, enc, hdr.job_id, hdr.session, s, v, int(job.rexp[s, v]),
            self.n & 0xFF, hdr.chunk, blk, int(job.rmin[s, v]), out, flags)
        job.results[s, v] = result
        return [(m, result) for m in job.members]


def main(argv: list[str] | None = None) -> int:
    return server_main(argv, __doc__, "blockagg", BlockAggregator, log)


if __name__ == "__main__":
    sys.exit(main())
