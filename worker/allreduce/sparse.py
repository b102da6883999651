"""The block-sparse allreduce client: only the blocks holding a non-zero element travel.

docs/PROTOCOL.md "Sparse jobs" (OmniReduce's streaming aggregation on our slots). The
tensor is cut into B blocks of ELEMS elements; a call uses S = min(window, B) slots, slot s
carrying the blocks b with b % S == s in increasing order (its stream). Each slot's uses:

- use 0, the PRIME: every worker sends an EMPTY packet with block = B and next = its first
  non-zero block of the stream (NO_BLOCK if none), exp = that block's exponent;
- every result names the block the slot's next use aggregates (the minimum of the
  workers' `next`) and its exponent (the max over the workers holding it); NO_BLOCK ends
  the slot;
- a data use of block b: a worker holding b sends it scaled with that exponent, with the
  next block it holds; one not holding it sends an EMPTY packet with its pending next block.

Every worker sends in every use, so the dense protocol's slot machinery (versions per use,
bitmaps, stored results answering retransmissions) and its worst case hold unchanged. A
use's chunk number is the slot's use number in the session as in dense jobs
(wire.use_chunk; every worker sees every result, so all agree). A use whose result does
not come back is resent with exponential backoff; uses in flight are bounded by the same
congestion window as the dense client, never above SPARSE_IN_FLIGHT (pacing.py), the
lowest-numbered incomplete use always going out so that workers with different windows
never wait on each other. Primes count in the window like data uses (tiny, but a software
switch's work is per packet: let out beside the window, 64 primes doubled the round trip
on BMv2 and the resends with it) and, like the dense priming round, neither measure the
round trip nor widen or cut the window: they also wait for the slowest worker's
computation. What one pass of the loop sends is bounded all the same: at most BURST uses
more than the results it handled (each result's slot goes on at once), so a call's primes
go out a few at a time as the first results come back (below).
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from protocol.encodings import BY_CODE
from protocol.sizes import MAX_GROWTH
from worker import wire
from worker.allreduce.client import (
    BAD_CHECKSUM,
    BAD_CODES,
    INITIAL_WINDOW,
    MAX_CHUNKS,
    RTO_INITIAL,
    RTO_MAX,
    RTO_MIN,
    AllReduceError,
    JobParams,
    SessionMixin,
    check_options,
    checked_tensor,
    corrupt_hint,
    refusal_text,
    seen_text,
    session_answered_hint,
    used_session_hint,
)
from worker.allreduce.coding import ChunkCoder
from worker.allreduce.pacing import BURST, SPARSE_IN_FLIGHT, RetransmitTimer, Window
from worker.allreduce.stats import Stats
from worker.frames import Framer
from worker.transport import Port

NO_BLOCK = wire.NO_BLOCK
_READY, _RUNNING, _DONE = 1, 2, 3


def pads_empty(result_encoding: int, elems: int) -> bool:
    """Whether a switch job's EMPTY data packets must bring ELEMS bytes of padding: the
    result written into one would otherwise grow it by more than BMv2 allows (FIXED32
    results of 168 elements; any result of the wide profile's 1456)."""
    return BY_CODE[result_encoding].bytes_per_element * elems > MAX_GROWTH


class SparseAllReduceClient(SessionMixin):
    """One worker's end of a sparse job. Not thread-safe: one client per thread."""

    def __init__(self, port: Port, framer: Framer, job: JobParams, *, seed: int = 0,
                 rank: int = 0, rto: float = RTO_INITIAL, rto_min: float = RTO_MIN,
                 rto_max: float = RTO_MAX,
                 initial_window: int = INITIAL_WINDOW, adaptive_window: bool = True,
                 timeout: float = 10.0, pad_empty: bool = False, burst: int = BURST,
                 trace=None, clock=time.monotonic):
        check_options(framer, job, rto, rto_min, rto_max, timeout)
        if job.encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8):
            raise ValueError("sparse jobs carry FIXED32 or CNAT8 payloads")
        if not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got {burst!r}")
        self.burst = burst
        self.port, self.framer, self.job = port, framer, job
        self.coder = ChunkCoder(job.encoding, job.workers, seed, job.elems, job.headroom,
                                job=job.job_id, rank=rank)   # draws keyed (coding.py)
        self.timer = RetransmitTimer(rto, rto_min, rto_max)
        self.window = Window(initial_window, min(job.window, SPARSE_IN_FLIGHT), adaptive_window)
        self.timeout, self.clock, self.trace = timeout, clock, trace
        # A switch job whose results would grow an EMPTY packet too far wants its EMPTY
        # data packets padded to hold the sum (pads_empty; docs/PROTOCOL.md "Sparse jobs").
        self.pad_empty = pad_empty
        self.stats = Stats()
        self.last = Stats()
        self.uses = np.zeros(job.window, np.int64)     # per slot, across calls
        self.calls = 0
        self.session_index = 0                         # sessions moved to (start_session)
        self.failed = ""
        self.session_results = 0                       # results of this session, all calls
        self.blocks_aggregated = 0     # data uses of the last call (blocks any worker held)
        self.result_encoding: int | None = None     # of the last result with a payload

    # ------------------------------------------------------------------ the call
    def allreduce(self, tensor) -> np.ndarray:
        """The element-wise mean of `tensor` over the job's workers (float32, same shape)."""
        x, flat, nb = checked_tensor(tensor, self.job, self.failed, min(MAX_CHUNKS, NO_BLOCK),
                                     "blocks")
        if flat.size == 0:
            return x.copy()
        job, elems = self.job, self.job.elems
        rows = np.zeros((nb, elems), np.float32)
        rows.reshape(-1)[:flat.size] = flat
        nz = np.flatnonzero(rows.any(axis=1))
        self.rows, self.nb = rows, nb
        self.bexp = np.zeros(nb, np.int64)
        if nz.size:
            self.bexp[nz] = self.coder.exponents(rows[nz])
        S = self.S = min(job.window, nb)
        # Each slot's stream: its non-zero blocks, increasing.
        order = np.argsort(nz % S, kind="stable")
        cuts = np.searchsorted((nz % S)[order], np.arange(1, S))
        self.streams = np.split(nz[order], cuts)
        self.pos = np.zeros(S, np.int64)
        self.k = np.zeros(S, np.int64)
        self.block = np.full(S, nb, np.int64)          # the current use's block (B: prime)
        self.scale = np.zeros(S, np.int64)             # its exponent (from the last result)
        self.state = np.full(S, _READY, np.int8)
        self.deadline = np.full(S, np.inf)
        self.sent_at = np.zeros(S)
        self.seq = np.zeros(S, np.int64)
        self.tries = np.zeros(S, np.int32)
        self.rto = np.zeros(S)
        self.frames: list[bytes | None] = [None] * S
        self.sent: list[np.ndarray | None] = [None] * S       # kept for `trace` only
        self.done = 0
        self.sends = 0
        self.in_flight = 0
        self.ready = [(s, s) for s in range(S)]             # heap of (order, slot), READY
        heapq.heapify(self.ready)
        self.got: list[tuple[int, int, int, np.ndarray]] = []   # (block, enc, exp, payload)
        self.received_this_call = 0
        self.rejected = {BAD_CHECKSUM: 0, BAD_CODES: 0}     # results failing a check
        self.completed = 0                                  # uses of this call completed
        self.calls += 1
        self.coder.begin(self.session_index, self.calls)
        before = self.stats.copy()
        start = self.clock()
        try:
            self._run(start)
        except AllReduceError as e:
            self.failed = str(e).split(":")[0]
            raise
        out = self._decode()
        self.blocks_aggregated = len(self.got)
        self.stats.calls += 1
        self.stats.elements += flat.size
        self.stats.chunks += len(self.got)
        self.stats.seconds += self.clock() - start
        self.last = self.stats.since(before)
        self.rows = self.got = None
        return out.reshape(-1)[:flat.size].reshape(x.shape)

    # ------------------------------------------------------------------ the loop
    def _chunk(self, s: int) -> int:
        return wire.use_chunk(int(self.uses[s]), s, self.job.slots)

    def _order(self, s: int) -> int:
        """The use's place in the call: uses go out lowest first."""
        return int(self.k[s]) * self.S + s

    def _pending(self, s: int) -> int:
        st, p = self.streams[s], int(self.pos[s])
        return int(st[p]) if p < st.size else NO_BLOCK

    def _run(self, start: float) -> None:
        last_progress = start
        S = self.S
        self._schedule()
        frame = None
        while self.done < S:
            now = self.clock()
            give_up = last_progress + self.timeout
            if now >= give_up:
                self._aborted()
                raise AllReduceError(self._missing(now - last_progress))
            if frame is None:           # else: left over from the last burst
                frame = self.port.recv(max(0.0, min(self.deadline.min(), give_up) - now))
            oldest = None
            burst = answered = 0
            while frame is not None and burst < S + 16:
                q = self._receive(frame)
                if q is not None:
                    last_progress = self.clock()
                    oldest = q if oldest is None else min(oldest, q)
                    answered += 1
                burst += 1
                frame = self.port.recv(0.0)
            if oldest is not None:
                later = np.flatnonzero((self.seq > oldest) & np.isfinite(self.deadline))
                if later.size:
                    self.deadline[later] = np.maximum(self.deadline[later],
                                                      self.clock() + self.rto[later])
            self._schedule(answered)
            if frame is None:
                frame = self.port.recv(0.0)
            if frame is not None:
                continue            # more waiting: handle it before any timer fires
            now = self.clock()
            due = np.flatnonzero(self.deadline <= now)
            if due.size:
                self._aborted()
            oldest = int(due[np.argmin(self.seq[due])]) if due.size else -1
            if due.size and (self.completed == 0 or now - last_progress >= self.rto[oldest]):
                # Nothing of this call has completed: the other workers are likely still
                # computing. Or no result came for a whole timeout: the switch stalled
                # (BMv2 descheduled on the cores it shares) rather than lost what every
                # timer is about to say. Either way one use probes, the oldest, and every
                # other use in flight backs off with it.
                first = oldest
                flying = np.flatnonzero(np.isfinite(self.deadline))
                self._retransmit(first)
                rest = flying[flying != first]
                self.rto[rest] = np.minimum(self.rto[rest] * 2, self.timer.maximum)
                self.deadline[rest] = self.deadline[first]
                continue
            for s in due:
                self._retransmit(int(s))

    def _schedule(self, answered: int = 0) -> None:
        """Sends READY uses, lowest chunk number first, while the window has room; the lowest
        incomplete use of the call goes out whatever the window, primes included. At most
        `burst` uses more than the `answered` ones go out back to back (BURST): the rest
        wait for the next pass, which the results of these bring."""
        ready, limit = self.ready, self.window.limit()
        todo, counted = [], 0
        room = answered + self.burst
        while ready and len(todo) < room:
            c, s = ready[0]
            if self.in_flight + counted >= limit and c != self._lowest():
                break
            heapq.heappop(ready)
            todo.append(s)
            counted += 1
            self.state[s] = _RUNNING
        if todo:
            self._send(todo)

    def _lowest(self) -> int:
        """The place of the call's lowest incomplete use."""
        live = np.flatnonzero(self.state != _DONE)
        return int((self.k[live] * self.S + live).min())

    def _send(self, slots: list[int]) -> None:
        job = self.job
        hold = [s for s in slots if self.k[s] > 0 and self._pending(s) == self.block[s]]
        payloads = {}
        if hold:
            enc = self.coder.encode(self.rows[self.block[hold]], self.scale[hold],
                                    self.block[hold])
            payloads = {s: enc[i] for i, s in enumerate(hold)}
        for s in slots:
            b = int(self.block[s])
            payload = payloads.get(s)
            if payload is not None:
                self.pos[s] += 1
            nxt = self._pending(s)
            exp = int(self.bexp[nxt]) if nxt != NO_BLOCK else 0
            frame = self.framer.build_sparse(
                wire.MSG_SPARSE_CONTRIB, job.encoding, job.job_id, job.session, s,
                int(self.uses[s] & 1), exp, 1, self._chunk(s), b, nxt, payload,
                wire.FLAG_PRIME if self.k[s] == 0 else 0,
                pad=self.pad_empty and self.k[s] > 0)
            self.frames[s] = frame
            if self.trace is not None:
                self.sent[s] = payload
            self._put(frame)
            now = self.clock()
            self.sends += 1
            self.seq[s] = self.sends
            self.sent_at[s] = now
            self.tries[s] = 0
            self.rto[s] = self.timer.rto()
            self.deadline[s] = now + self.rto[s]
            self.in_flight += 1

    def _put(self, frame: bytes) -> None:
        self.port.send(frame)
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(frame)

    def _retransmit(self, s: int) -> None:
        if self.tries[s] == 0 and self.k[s] > 0:     # a prime also waits for slow workers
            self.window.on_timeout(int(self.seq[s]), self.sends)
        self.sends += 1
        self.seq[s] = self.sends
        self._put(self.frames[s])
        self.stats.bytes_resent += len(self.frames[s])
        self.stats.retransmissions += 1
        self.tries[s] += 1
        self.rto[s] = min(self.rto[s] * 2, self.timer.maximum)
        self.deadline[s] = self.clock() + self.rto[s]

    def _receive(self, frame: bytes) -> int | None:
        """Handles one frame; the send sequence number of the use it completed, if any (0 for
        a prime: its answer shows the workers are all there, so every timer restarts)."""
        st = self.stats
        st.packets_received += 1
        st.bytes_received += len(frame)
        bad = self.framer.bad_checksums
        parsed = self.framer.parse_sparse(frame)
        job = self.job
        if parsed is not None and parsed[0].msg_type == wire.MSG_SPARSE_REFUSED:
            self._refused(parsed[0])
            parsed = None
        if parsed is None or parsed[0].msg_type != wire.MSG_SPARSE_RESULT or \
                parsed[0].job_id != job.job_id or parsed[0].session != job.session or \
                parsed[0].slot >= self.S:
            if self.framer.bad_checksums != bad:
                st.corrupt_ignored += 1
                self.rejected[BAD_CHECKSUM] += 1
            else:
                st.foreign_ignored += 1
            return None
        hdr, payload = parsed
        self.received_this_call += 1
        self.session_results += 1
        s = hdr.slot
        if (self.state[s] != _RUNNING or hdr.version != self.uses[s] & 1
                or hdr.chunk != self._chunk(s) or hdr.block != self.block[s]):
            st.duplicates_ignored += 1
            return None
        self._check(s, hdr, payload)
        if payload is not None and not self.coder.valid(hdr.encoding, payload):
            st.corrupt_ignored += 1     # checksum good, a code no switch sends: corrupt
            self.rejected[BAD_CODES] += 1
            return None
        if self.k[s] > 0:
            self.result_encoding = hdr.encoding
            self.got.append((int(hdr.block), hdr.encoding, int(self.scale[s]), payload.copy()))
            if self.trace is not None:
                self.trace(call=self.calls, chunk=int(hdr.block), exp=int(self.scale[s]),
                           sent=self.sent[s], result=hdr, payload=payload.copy())
        # Karn: only a use answered without a resend measures the round trip; and not a
        # prime, which also waits for the slowest worker to finish its computation.
        if not self.tries[s] and self.k[s] > 0:
            r = float(self.clock() - self.sent_at[s])
            self.timer.sample(r)
            st.rtt_samples += 1
            st.rtt_seconds += r
        self.completed += 1
        seq = int(self.seq[s]) if self.k[s] > 0 else 0
        self.in_flight -= 1
        if self.k[s] > 0:               # a prime does not widen the window
            self.window.on_result()
        self.uses[s] += 1
        self.deadline[s] = np.inf
        if hdr.next == NO_BLOCK:
            self.state[s] = _DONE
            self.done += 1
        else:
            self.block[s] = hdr.next
            self.scale[s] = hdr.exp
            self.k[s] += 1
            self.state[s] = _READY
            heapq.heappush(self.ready, (self._order(s), s))
        return seq

    def _refused(self, hdr) -> None:
        """A refusal of this worker's current use of a slot fails the call at once (a PRIME
        whose block count contradicts the switch's names both); others count as foreign."""
        job, s = self.job, hdr.slot
        if (hdr.job_id == job.job_id and hdr.session == job.session and s < self.S
                and self.state[s] == _RUNNING and hdr.version == self.uses[s] & 1
                and hdr.chunk == self._chunk(s)):
            prime = self.k[s] == 0
            if prime and hdr.count == wire.DROP_BAD_BLOCK and hdr.block == self.nb:
                # The switch holds this worker's own count, so the PRIME it refused carried
                # another: not this worker's (a forged or corrupted copy from its port).
                self.stats.refusals_ignored += 1
                return
            where = f"slot {s} {'prime' if prime else f'block {self.block[s]}'}"
            raise AllReduceError(refusal_text(job, hdr, where, self.nb if prime else None))

    def _check(self, s: int, hdr, payload) -> None:
        """A result that cannot answer this worker's use is a configuration error."""
        job = self.job
        where = f"slot {s} block {hdr.block}"
        if hdr.count != job.workers:
            raise AllReduceError(f"{where}: the result sums {hdr.count} workers, this job has "
                                 f"{job.workers}: the switch's job {job.job_id} is set up for "
                                 f"another worker count")
        prime = self.k[s] == 0
        if prime != (payload is None):
            raise AllReduceError(f"{where}: a {'prime' if prime else 'data'} use answered "
                                 f"{'with' if prime else 'without'} a payload: is job "
                                 f"{job.job_id} a sparse job on the switch?")
        if not prime and not self.coder.accepts(hdr.encoding):
            raise AllReduceError(f"{where}: a result encoded as "
                                 f"{wire.ENCODINGS.get(hdr.encoding, hdr.encoding)} cannot "
                                 f"answer {wire.ENCODINGS[job.encoding]} contributions")
        nxt, mine = hdr.next, self._pending(s)
        if nxt == NO_BLOCK and mine == NO_BLOCK:
            return
        if (nxt > mine or nxt >= self.nb or nxt % self.S != s
                or (not prime and nxt <= hdr.block)):
            raise AllReduceError(
                f"{where}: the result's next block {nxt} cannot follow (this worker's next is "
                f"{mine if mine != NO_BLOCK else 'none'}, {self.nb} blocks on {self.S} "
                f"slots): the workers' tensors differ in size, or {used_session_hint(job)}")
        if nxt == mine and hdr.exp < self.bexp[mine]:
            raise AllReduceError(
                f"{where}: the result's exponent {hdr.exp} is below this worker's "
                f"{self.bexp[mine]} for block {mine}: {used_session_hint(job)}")

    def _decode(self) -> np.ndarray:
        out = np.zeros((self.nb, self.job.elems), np.float32)
        if not self.got:
            return out
        blocks = np.array([g[0] for g in self.got])
        encs = np.array([g[1] for g in self.got])
        exps = np.array([g[2] for g in self.got], np.int64)
        for enc in np.unique(encs):
            idx = np.flatnonzero(encs == enc)
            rows = np.stack([self.got[i][3] for i in idx]).astype(
                self.coder.result_dtype(int(enc)), copy=False)
            out[blocks[idx]] = self.coder.decode_mean(int(enc), rows, exps[idx])
        return out

    def _missing(self, idle: float) -> str:
        job = self.job
        waiting = [f"slot {s} {'prime' if self.k[s] == 0 else f'block {self.block[s]}'} "
                   f"version {self.uses[s] & 1} ({self.tries[s] + 1} sends)"
                   for s in np.flatnonzero(self.state == _RUNNING)]
        shown = "; ".join(waiting[:8]) + (f"; ... {len(waiting) - 8} more slots"
                                          if len(waiting) > 8 else "")
        saw = seen_text(self.rejected)
        if any(self.rejected.values()):
            hint = corrupt_hint(job)
        elif self.received_this_call:
            hint = (f"other slots completed, so the switch answers: a worker of the "
                    f"{job.workers} is likely missing or stopped")
        elif self.session_results:
            hint = session_answered_hint(job)
        else:
            hint = (f"no result of job {job.job_id} arrived in this call: is the switch up "
                    f"with job {job.job_id} in sparse mode and session {job.session}, and all "
                    f"{job.workers} workers running? Or {used_session_hint(job)}")
        return (f"sparse allreduce of job {job.job_id} (session {job.session}, call "
                f"{self.calls}) got no result for {idle:.1f} s: {self.S - self.done} of "
                f"{self.S} slots unfinished [{shown}]; "
                f"{f'this worker saw {saw}; ' if saw else ''}{hint}")
