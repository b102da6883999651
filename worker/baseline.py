"""Host-based baseline: a parameter server that sums the workers' chunks over kernel UDP.

It speaks the switch's protocol (AGG header, slots with two versions, a bitmap of the
workers seen, answers to retransmissions from the stored result; docs/PROTOCOL.md) on
another UDP port (default 20034, so switches route it like any traffic), with bare
datagrams: AGG header + payload. A worker's identity is its source address, the first
`workers` distinct senders of a job session being its members.

Sums: FLOAT32 in float32 (the uncompressed baseline), each element's contributions added
in increasing order, so the sum does not depend on the order they arrived in; FIXED32 and
CNAT8 as the switch adds them, into int32, answered as FIXED32 (or re-compressed to CNAT8
with --result-encoding cnat8, its random bits keyed by the use it answers). So the same
client runs against the switch or this server, and a rerun of a seed gets the same results
(DESIGN.md contract 10).

    python worker/baseline.py --listen 10.0.0.1:20034 --workers 4
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from worker import codec, keyed, wire  # noqa: E402
from worker.frames import Framer  # noqa: E402

PS_PORT = 20034
log = logging.getLogger("natswitch.ps")


@dataclass
class _Job:
    session: int
    slots: int
    elems: int
    members: dict = field(default_factory=dict)           # sender -> bit
    bitmap: np.ndarray = None
    count: np.ndarray = None
    exp: np.ndarray = None
    workers: np.ndarray = None
    kind: np.ndarray = None           # per (slot, version): 0 empty, 1 float, 2 integer
    use: np.ndarray = None            # per (slot, version): the chunk number of its use
    acc: dict = field(default_factory=dict)     # (slot, version) -> sums (FLOAT32: the rows)
    results: dict = field(default_factory=dict)            # (slot, version) -> datagram

    def __post_init__(self) -> None:
        shape = (self.slots, 2)
        self.bitmap = np.zeros(shape, np.uint64)
        self.count = np.zeros(shape, np.int64)
        self.exp = np.zeros(shape, np.int64)
        self.workers = np.zeros(shape, np.int64)
        self.kind = np.zeros(shape, np.int8)
        self.use = np.zeros(shape, np.int64)


def newer(a: int, b: int, bits: int) -> bool:
    """a is newer than b in serial-number order (docs/PROTOCOL.md "Ordering")."""
    d = (a - b) % (1 << bits)
    return 0 < d < 1 << (bits - 1)


@dataclass
class PsStats:
    contributions: int = 0
    duplicates: int = 0
    answered: int = 0
    completed: int = 0
    dropped: dict = field(default_factory=dict)    # reason -> packets

    def drop(self, reason: str) -> list:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        return []


class HostServer:
    """What the host servers share (this parameter server and worker/block_aggregator.py):
    the job's sizes, framing, CNAT8 re-compression's generator, per-job state, counters and
    the datagram loop. A subclass's handle() is its whole logic."""

    def __init__(self, workers: int, slots: int = 512, elems: int = wire.ELEMS,
                 result_encoding: int = wire.ENC_FIXED32, seed: int = 0):
        if not 1 <= workers <= 64:
            raise ValueError(f"workers must be within 1..64 (the bitmap), got {workers}")
        if result_encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8):
            raise ValueError("integer results are FIXED32 or CNAT8")
        self.n, self.slots, self.elems = workers, slots, elems
        self.result_encoding = result_encoding
        self.framer = Framer(elems=elems)
        self.seed = int(seed)
        self.jobs: dict = {}
        self.stats = PsStats()

    def handle(self, data: bytes, sender) -> list[tuple[object, bytes]]:
        raise NotImplementedError

    def recompress(self, sums: np.ndarray, job_id: int, version: int, chunk: int) -> np.ndarray:
        """The CNAT8 re-compression of one use's sums, its random words keyed by the seed
        and the use (job, chunk number, version), not drawn in the order uses complete.
        Not the session's number, which differs between reruns (the workers take it from
        the clock or the topology file's time)."""
        key = keyed.call_key(self.seed, 0, job_id, 0, 0)
        bits = keyed.RowBits(keyed.row_keys(key, [2 * int(chunk) + int(version)]), sums.size)
        r = (bits.words(keyed.RESULT, sums.size)[0] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return codec.recompress_with(sums, r)

    def serve(self, sock: socket.socket, stop: threading.Event | None = None) -> None:
        """Answers datagrams on `sock` until `stop` is set (checked every 0.2 s)."""
        sock.settimeout(0.2)
        while stop is None or not stop.is_set():
            try:
                data, sender = sock.recvfrom(65535)
            except TimeoutError:
                continue
            for dest, out in self.handle(data, sender):
                try:
                    sock.sendto(out, dest)
                except OSError as e:
                    log.warning("send to %s failed: %s", dest, e)


class ParameterServer(HostServer):
    """The slot algorithm of docs/PROTOCOL.md on a host. handle() is the whole logic."""

    def handle(self, data: bytes, sender) -> list[tuple[object, bytes]]:
        """One datagram from `sender` -> the datagrams to send, as (destination, bytes)."""
        parsed = self.framer.parse(data)
        if parsed is None:
            return self.stats.drop("bad_length_or_encoding")
        hdr, payload = parsed
        if hdr.msg_type != wire.MSG_CONTRIB:
            return self.stats.drop("not_contribution")
        if hdr.version > 1:
            return self.stats.drop("bad_version")
        if hdr.slot >= self.slots:
            return self.stats.drop("bad_slot")
        job = self.jobs.get(hdr.job_id)
        if job is None or newer(hdr.session, job.session, 16):
            # A newer session of the job is a new run: clean slots, members found anew.
            job = self.jobs[hdr.job_id] = _Job(hdr.session, self.slots, self.elems)
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
        if not job.bitmap[s, v] or newer(hdr.chunk, int(job.use[s, v]), 32):
            # the version's next use (its older use is complete everywhere)
            job.bitmap[s, v] = job.count[s, v] = 0
            job.use[s, v] = hdr.chunk
        elif hdr.chunk != job.use[s, v]:
            return self.stats.drop("stale")     # a replay of an older use
        mask = np.uint64(1 << bit)
        seen = bool(job.bitmap[s, v] & mask)
        if seen:
            if job.count[s, v] == 0 and (s, v) in job.results:
                self.stats.answered += 1
                return [(sender, job.results[s, v])]
            self.stats.duplicates += 1
            return []
        kind = 1 if hdr.encoding == wire.ENC_FLOAT32 else 2
        first = job.count[s, v] == 0
        if not first and job.kind[s, v] != kind:
            return self.stats.drop("mixed_encodings")
        self.stats.contributions += 1
        job.bitmap[s, v] |= mask
        values = (payload.astype(np.float32) if kind == 1 else
                  codec.switch_decode_cnat8(payload) if hdr.encoding == wire.ENC_CNAT8 else
                  payload.astype(np.int32))
        if first:
            job.results.pop((s, v), None)
            # FLOAT32 rows are kept apart and summed in one order at the end
            job.acc[s, v] = [values] if kind == 1 else values.copy()
            # every member is one worker, whatever count it claims
            job.exp[s, v], job.workers[s, v], job.kind[s, v] = hdr.exp, 1, kind
        else:
            if kind == 1:
                job.acc[s, v].append(values)
            else:
                np.add(job.acc[s, v], values, out=job.acc[s, v])   # int32 wraps, as the switch
            job.exp[s, v] = max(job.exp[s, v], hdr.exp)
            job.workers[s, v] += 1
        job.count[s, v] = (job.count[s, v] + 1) % self.n
        if job.count[s, v]:
            return []
        self.stats.completed += 1
        sums = job.acc.pop((s, v))
        if kind == 1:
            # float32 addition is not associative: each element's values in increasing
            # order, whatever order they came in
            rows = np.sort(np.stack(sums), axis=0)
            sums = rows[0].copy()
            for row in rows[1:]:
                sums += row
            enc, out = wire.ENC_FLOAT32, sums
        elif self.result_encoding == wire.ENC_CNAT8:
            enc, out = wire.ENC_CNAT8, self.recompress(sums, hdr.job_id, v, hdr.chunk)
        else:
            enc, out = wire.ENC_FIXED32, sums
        result = self.framer.build(wire.MSG_RESULT, enc, hdr.job_id, hdr.session, s, v,
                                   int(job.exp[s, v]), int(job.workers[s, v]) & 0xFF,
                                   hdr.chunk, out)
        job.results[s, v] = result
        return [(m, result) for m in job.members]


def parse_addr(text: str, default_port: int = PS_PORT) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, default_port
    if not port.isdigit():
        raise ValueError(f"not HOST[:PORT]: {text!r}")
    return host, int(port)


def server_main(argv: list[str] | None, doc: str, tag: str, make, logger) -> int:
    """The command line of a host server: `make(workers, slots, result_encoding=, seed=)`
    builds it; it serves on one UDP socket until SIGTERM/SIGINT."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--listen", default=f"0.0.0.0:{PS_PORT}",
                    help="HOST[:PORT] to receive contributions on (default %(default)s)")
    ap.add_argument("--workers", type=int, required=True, help="workers per job")
    ap.add_argument("--slots", type=int, default=512, help="slots per job (default 512)")
    ap.add_argument("--result-encoding", choices=["fixed32", "cnat8"], default="fixed32",
                    help="result encoding of the sums of FIXED32/CNAT8 contributions "
                         "(default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the CNAT8 re-compression")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {tag} %(message)s")
    try:
        server = make(args.workers, args.slots,
                      result_encoding=wire.ENCODING_BY_NAME[args.result_encoding],
                      seed=args.seed)
    except ValueError as e:
        ap.error(str(e))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    try:
        sock.bind(parse_addr(args.listen))
    except (OSError, ValueError) as e:
        print(f"{tag}: cannot listen on {args.listen}: {e}", file=sys.stderr)
        return 2
    logger.info("listening on %s:%d for %d workers", *sock.getsockname(), args.workers)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server.serve(sock, stop)
    finally:
        logger.info("stats: %s", server.stats)
        sock.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return server_main(argv, __doc__, "ps", ParameterServer, log)


if __name__ == "__main__":
    sys.exit(main())
