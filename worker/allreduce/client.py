"""The allreduce client: a tensor in, the mean over the job's workers out, through a switch.

The tensor is cut into chunks of ELEMS elements; chunk c travels on slot c % window. Each
slot runs the table in protocol.py. A call starts with one priming round on slot 0 that
agrees on the exponent of every slot's first chunk; its result releases all slots at
once, and from then on each contribution piggybacks the exponent of its slot's next
chunk. Chunks go out lowest first as far as the congestion window allows (pacing.py).
The chunk field names the use: the slot's use number in the session (its priming rounds
and chunks, across calls) times the job's slot count, plus the slot (wire.use_chunk), so a
use is named unambiguously and the switch knows the one number a slot's next use may carry:
results are matched by (slot, version, chunk number); anything else is counted and ignored. A
use whose result does not come back is retransmitted with exponential backoff; when no
result at all arrives for `timeout` seconds the call fails, naming the chunks that never
completed.

Memory stays bounded: per call, the padded tensor, one exponent byte per chunk, the
results' payloads and the output; per slot, a few numbers and the last frame sent (for
retransmission). The codec is called on many rows at once: the chunks released by one
burst of results are encoded together, and all results are decoded together at the end
of the call.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from protocol import encodings
from protocol.combos import workers_problem
from worker import codec, hadamard, wire
from worker.allreduce import agree
from worker.allreduce.coding import ChunkCoder
from worker.allreduce.pacing import BURST, Coalescer, RetransmitTimer, UplinkPacer, Window
from worker.allreduce.protocol import IN_FLIGHT, Action, Event, State, transition
from worker.allreduce.stats import Stats
from worker.frames import Framer
from worker.transport import Port

try:  # a burst's checks as one compiled loop (the numpy checks stay the reference)
    from worker.allreduce import burst_kernels as _bursts
except ImportError:  # no numba
    _bursts = None

# A call's chunks (a bound on one call's memory and work, far above any tensor's).
MAX_CHUNKS = 1 << 30
PRIME_SLOT = 0              # the slot that carries each call's priming round
PROGRESS_EVERY = 0.5        # seconds between progress callbacks

# Retransmission defaults (docs/WORKER.md): RFC 6298's conservative start, and a floor
# above the scheduling noise of Python workers and software switches sharing a few cores.
RTO_INITIAL, RTO_MIN, RTO_MAX = 0.5, 0.05, 1.0
INITIAL_WINDOW = 8
# From this many frames per burst on, Framer.build_many (one compiled pass over the burst)
# is faster than build() per frame: 1456-element frames, 2: 18.5 against 18.4 us, 3: 20.2
# against 21.9 us, 8: 28 against 57 us.
BATCH_FRAMES = 3
# Share of the uses in flight to let complete before a woken worker handles results
# (pacing.Coalescer); 0 handles each result at once. Off: it saves CPU only where the
# switch is far slower than the workers (BMv2, softswitch's Python tier); with the compiled
# softswitch it delays the next sends more than it saves (docs/WORKER.md).
COALESCE = 0.0
# Share of the worker's own uplink backlog to let drain before a woken worker handles
# results (pacing.UplinkPacer): only a worker whose link holds the job back sleeps.
UPLINK_SHARE = 0.5

# Plain ints on the per-packet path (enum attribute lookups cost more than the work).
_PRIMING, _AWAIT, _READY, _RUNNING, _DONE = (
    int(State.PRIMING), int(State.AWAIT_PRIME), int(State.READY), int(State.RUNNING),
    int(State.DONE))
_IN_FLIGHT = frozenset(int(x) for x in IN_FLIGHT)
_PRIMED, _SEND, _MORE, _LAST, _STALE, _TIMEOUT = (
    int(Event.PRIMED), int(Event.SEND), int(Event.RESULT_MORE), int(Event.RESULT_LAST),
    int(Event.STALE), int(Event.TIMEOUT))


class AllReduceError(RuntimeError):
    """The allreduce cannot complete; the message says what is missing or wrong."""


class AboveBound(AllReduceError):
    """A tensor holds a value the job's exponent bound refuses (the switch would drop it):
    `value` at flat `index`; `reason` states the bound. Raised before anything is sent."""

    def __init__(self, value: float, index: int, reason: str):
        super().__init__(f"the tensor holds {value:g} (element {index}): {reason}")
        self.value, self.index, self.reason = value, index, reason


@dataclass(frozen=True)
class JobParams:
    """What every worker of the job must agree on (docs/WORKER.md)."""

    job_id: int
    session: int
    workers: int
    window: int
    encoding: int = wire.ENC_CNAT8
    elems: int = wire.ELEMS
    # From the controller (Topology.headroom, the job's max_exp): None for ceil(log2 workers),
    # right for a job aggregated exactly (no cnat8 partial sums below the root).
    headroom: int | None = None
    max_exp: int = 254
    # The job's slots on the switches (its region): the stride of the chunk numbers
    # (wire.use_chunk); None: the window. The window may use fewer.
    slots: int | None = None
    # A one-switch job's children by bitmap bit, (host, switch port) (controller/tree.py):
    # how a refusal's bitmap names ports. Empty where the topology does not say.
    children: tuple[tuple[str, int], ...] = ()

    @property
    def nonfinite_exp(self) -> int:
        """The exponent that marks a chunk as non-finite (docs/PROTOCOL.md "Non-finite
        values"): the job's bound itself, which every switch admits and takes the max of,
        so one worker's mark reaches every worker in the result that scales the chunk.
        Finite chunks carry less: values below 2^(max_exp - 127)."""
        return self.max_exp

    def __post_init__(self) -> None:
        if self.slots is None:
            object.__setattr__(self, "slots", self.window)
        for name, value, lo, hi in (("job id", self.job_id, 0, 0xFFFF),
                                    ("session", self.session, 0, 0xFFFF),
                                    ("workers", self.workers, 1, 0xFF),
                                    ("window", self.window, 1, 0xFFFF),
                                    ("slots", self.slots, 1, 0xFFFF),
                                    ("elements per packet", self.elems, 1, 0xFFFF)):
            if not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
        if self.window > self.slots:
            raise ValueError(f"a window of {self.window} needs that many slots; the job has "
                             f"{self.slots}")
        if self.session == 0:
            raise ValueError("session 0 is reserved (a switch's slot that no session touched)")
        if self.headroom is not None and not 0 <= self.headroom <= 30:
            raise ValueError(f"headroom must be within 0..30 bits, got {self.headroom!r}")
        if not 1 <= self.max_exp <= 254:
            raise ValueError(f"max_exp must be a biased float32 exponent 1..254, "
                             f"got {self.max_exp!r}")
        if self.encoding not in wire.ENCODINGS:
            raise ValueError(f"unknown encoding {self.encoding!r} "
                             f"(one of {sorted(wire.ENCODINGS)})")
        if self.encoding in wire.FOUR_BIT and self.elems % 2:
            raise ValueError(f"4-bit encodings carry two elements per byte: elements per "
                             f"packet must be even, got {self.elems}")
        enc = encodings.BY_CODE[self.encoding]
        if most := workers_problem(enc, self.workers):
            into = encodings.BY_NAME[enc.sums[0]]
            raise ValueError(f"{enc.label} sums of {self.workers} workers can exceed the "
                             f"{into.top} of a {into.label} result ({enc.top} per worker): "
                             f"at most {most} workers")


def check_options(framer: Framer, job: JobParams, rto: float, rto_min: float, rto_max: float,
                  timeout: float) -> None:
    """The constructor arguments both clients share, refused with the reason."""
    if framer.elems != job.elems:
        raise ValueError(f"framer has {framer.elems} elements per packet, job {job.elems}")
    if not 0 < rto_min <= rto_max or not 0 < rto <= rto_max:
        raise ValueError("need 0 < rto_min <= rto_max and 0 < rto <= rto_max")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 s, got {timeout}")


def checked_tensor(tensor, job: JobParams, failed: str, limit: int, unit: str,
                   marks: bool = False):
    """(tensor as float32, its flat view, rows of ELEMS it needs), or AllReduceError: an
    earlier failure, more than `limit - 1` rows, or (unless the caller `marks` them as
    non-finite chunks) NaN/inf or a value the switch would drop."""
    if failed:
        raise AllReduceError(f"an earlier call of this client failed ({failed}); its slots "
                             "are out of step with the other workers: start a new session")
    x = np.asarray(tensor, dtype=np.float32)
    flat = x.reshape(-1)
    if flat.size == 0:
        return x, flat, 0
    rows = -(-flat.size // job.elems)
    if rows >= limit:
        raise AllReduceError(f"tensor of {flat.size} elements needs {rows} {unit}, "
                             f"at most {limit - 1}")
    if marks:
        return x, flat, rows
    top = codec.max_exponent(flat)  # one pass for both checks
    if top == 255:
        raise AllReduceError("the tensor holds NaN or infinity: nothing to aggregate")
    if top > job.max_exp:
        index = int(np.argmax(np.abs(flat)))
        raise AboveBound(float(flat[index]), index, bound_text(job))
    return x, flat, rows


def used_session_hint(job) -> str:
    """What to do when the switch holds state of this session that this worker did not make:
    the session was used before (an earlier run of the job). Only the control plane moves a
    job to another session (docs/PROTOCOL.md "Sessions")."""
    return (f"the switch holds later uses of session {job.session} than this worker's (an "
            f"earlier run of job {job.job_id} used it): move the job to a new session "
            f"(controller/main.py program --new-session) and start the workers again")


def bound_text(job) -> str:
    """The job's exponent bound, as errors state it."""
    return (f"job {job.job_id} allows exponents up to max_exp={job.max_exp} (values below "
            f"2^{job.max_exp - 126}); the switch would drop it, so nothing was sent")


BAD_CHECKSUM = "failed the UDP checksum"
BAD_CODES = "passed the checksum but held codes no switch sends"


def refusal_text(job, hdr, where: str, blocks: int | None = None) -> str:
    """Why the switch sent a contribution back (docs/PROTOCOL.md "Refusals"), as the error
    states it; `blocks`: the tensor's block count this worker sent (sparse)."""
    reason = wire.REFUSALS.get(hdr.count, f"drop reason {hdr.count}")
    if hdr.count == wire.DROP_OUT_OF_RANGE:
        h = job.headroom if job.headroom is not None else codec.headroom(job.workers)
        return (f"{where}: the switch refused this worker's contribution ({reason}): an "
                f"element is larger than this port may send. Job {job.job_id}'s workers scale "
                f"their values to at most 2^{30 - h} units (headroom h={h}, from the "
                f"topology's tree), so that no sum passes 2^30; a worker scaling with less "
                f"headroom than the job's, or a corrupt sender, is refused rather than summed "
                f"wrong: give every worker the job's headroom (Topology.headroom)")
    if hdr.count == wire.DROP_BAD_BLOCK and blocks is not None:
        return (f"{where}: workers disagree on the tensor's block count: the switch holds "
                f"B={hdr.block} from the first PRIME it took, sent by {held_by(job, hdr.next)}; "
                f"this worker sent B={blocks}; every "
                f"worker of job {job.job_id} must allreduce tensors of the same size, and a "
                f"PRIME from another port may have been forged")
    return f"{where}: the switch refused this worker's contribution ({reason})"


def held_by(job, bitmap: int) -> str:
    """The ports a BAD_BLOCK refusal's bitmap names (docs/PROTOCOL.md "Refusals"): the
    children whose PRIMEs gave the switch the count it holds."""
    bits = [b for b in range(bitmap.bit_length()) if bitmap >> b & 1]
    if not bits:
        return "no port"
    return " and ".join("{} on port {}".format(*job.children[b]) if b < len(job.children)
                        else f"child bit {b}" for b in bits)


def seen_text(rejected: dict[str, int]) -> str:
    """What a worker saw that failed its checks, for a timeout's message ('' if nothing)."""
    return "; ".join(f"{n} results that {check}" for check, n in rejected.items() if n)


def corrupt_hint(job) -> str:
    return (f"results for job {job.job_id} reached this worker but failed its checks: frames "
            f"are corrupted between the switch and this worker (a link, a port or the "
            f"switch), so its missing results may never arrive intact")


def session_answered_hint(job) -> str:
    """Why a call gets no result when earlier calls of its session did: the switch was up,
    programmed and took the session, so a worker is the likely cause (or a switch restart,
    which the restart monitor follows)."""
    return (f"no result arrived in this call, though the switch answered this session's "
            f"earlier calls: a worker of the {job.workers} is likely missing or stopped (or "
            f"the switch restarted)")


class SessionMixin:
    """What the dense and the sparse client share once constructed: moving to a new session,
    reporting their pacing, and hearing that the job stopped elsewhere. Needs job, uses,
    calls, failed, timer, window."""

    # Polled when a retransmission timer fires and before a timeout: why another worker of
    # the job stopped it (worker/ddp/faults.py), or None.
    abort: Callable[[], str | None] | None = None

    def _aborted(self) -> None:
        if self.abort is None:
            return
        why = self.abort()
        if why:
            raise AllReduceError(f"allreduce of job {self.job.job_id} (session "
                                 f"{self.job.session}, call {self.calls}) stopped: {why}")

    def start_session(self, session: int) -> None:
        """Go on in a new session (after a switch restart, restart.py): every slot starts at
        its first use, calls count from 1 and uses are numbered from 0 again, as on every
        other worker of the job; an interrupted call is simply called again."""
        self.job = replace(self.job, session=session)
        self.uses[:] = 0
        self.calls = 0
        self.session_index += 1           # keys the draws (coding.py), not the number
        self.failed = ""
        self.session_results = 0

    def pacing(self) -> dict:
        """The retransmission timer's and the window's state (JSON-ready)."""
        t, w = self.timer, self.window
        return {"srtt": t.srtt, "rttvar": t.rttvar, "rto": t.rto(), "window": w.size,
                "ssthresh": w.ssthresh, "window_cuts": w.cuts}


class AllReduceClient(SessionMixin):
    """One worker's end of a job. Not thread-safe: one client per thread."""

    def __init__(self, port: Port, framer: Framer, job: JobParams, *, seed: int = 0,
                 rank: int = 0, rto: float = RTO_INITIAL, rto_min: float = RTO_MIN,
                 rto_max: float = RTO_MAX, initial_window: int = INITIAL_WINDOW,
                 adaptive_window: bool = True, timeout: float = 10.0, coalesce: float = COALESCE,
                 uplink_share: float = UPLINK_SHARE, burst: int = BURST,
                 progress: Callable[[int, int], None] | None = None,
                 trace: Callable[..., None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, verify: str = "auto"):
        check_options(framer, job, rto, rto_min, rto_max, timeout)
        agree.verifies(verify, job.encoding, 0, job.window)      # refuses a bad mode
        # after a call, the workers' digests of its result through the switch (agree.py)
        self.verify, self.verifying = verify, False
        self.port, self.framer, self.job = port, framer, job
        # seed and rank: the run's seed and this worker's rank, whose draws differ from the
        # other workers' (coding.py)
        self.coder = ChunkCoder(job.encoding, job.workers, seed, job.elems, job.headroom,
                                job=job.job_id, rank=rank)
        self.timer = RetransmitTimer(rto, rto_min, rto_max)
        self.window = Window(initial_window, job.window, adaptive_window)
        if not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got {burst!r}")
        self.timeout, self.burst = timeout, burst
        self.coalescer = Coalescer(coalesce)
        self.pacer = UplinkPacer(uplink_share)
        self.progress, self.trace, self.clock, self.sleep = progress, trace, clock, sleep
        self.stats = Stats()
        w = job.window
        # Per slot; `uses` outlives a call: every worker runs the same sequence of calls.
        self.uses = np.zeros(w, np.int64)         # uses completed in the session
        self.slot_ids = np.arange(w, dtype=np.int64)
        self.state = np.zeros(w, np.int8)
        self.cur = np.zeros(w, np.int64)          # the chunk the slot works on next
        self.exp = np.zeros(w, np.int16)          # negotiated exponent of that chunk
        self.sent_exp = np.zeros(w, np.int16)     # the exponent we piggybacked
        self.deadline = np.full(w, np.inf)
        self.sent_at = np.zeros(w)
        self.seq = np.zeros(w, np.int64)          # send sequence number of the current use
        self.tries = np.zeros(w, np.int32)
        self.rto = np.zeros(w)
        self.frames: list[bytes | None] = [None] * w
        self.payloads: list[np.ndarray | None] = [None] * w   # kept for `trace` only
        self.calls = 0
        self.session_index = 0                    # sessions moved to (start_session)
        self.sends = 0                            # new uses sent (the sequence counter)
        self.first_sample = False                 # the first round trip was just measured
        self.in_flight = 0                        # slots in IN_FLIGHT states
        self.failed = ""                          # why a call failed: the client is unusable
        self.session_results = 0                  # results of this session, earlier calls too
        self._actions = {
            Action.PRIME: self._prime,
            Action.WAIT: self._wait,
            Action.RELEASE: self._release,
            Action.TAKE_PRIME: self._take_prime,
            Action.SEND_CHUNK: self._send_chunk,
            Action.ACCEPT_NEXT: self._accept_next,
            Action.ACCEPT_LAST: self._accept_last,
            Action.RETRANSMIT: self._retransmit,
            Action.IGNORE: self._ignore,
        }

    @property
    def mark(self) -> int:
        return self.job.nonfinite_exp

    # ------------------------------------------------------------------ the call
    def allreduce(self, tensor) -> np.ndarray:
        """The element-wise mean of `tensor` over the job's workers (float32, same shape)."""
        x, flat, n_chunks = checked_tensor(tensor, self.job, self.failed, MAX_CHUNKS, "chunks",
                                           marks=self.coder.primed)
        if flat.size == 0:
            return x.copy()
        elems, window = self.job.elems, self.job.window
        size = flat.size
        if self.coder.rotates:
            # Every worker rotates with the same signs: the call's numbers are the same on all.
            # Not the session's number: the controller draws it from the clock, and a rerun
            # must rotate alike (a call after a restart reusing signs is harmless).
            seed = hadamard.seed_of(self.job.job_id, self.calls + 1)
            flat = hadamard.rotate(flat, seed)
            n_chunks = -(-flat.size // elems)
        if flat.size == n_chunks * elems:
            self.chunks = flat.reshape(n_chunks, elems)
        else:
            padded = np.zeros(n_chunks * elems, np.float32)
            padded[:flat.size] = flat
            self.chunks = padded.reshape(n_chunks, elems)
        self.n_chunks = n_chunks
        if self.coder.primed:
            # A chunk with NaN, inf or a value beyond the job's range goes as zeros under
            # the NONFINITE exponent, which comes back as every worker's mark (_decode).
            self.exps, over = self.coder.marked_exponents(self.chunks, self.mark)
            if over.any():
                self.chunks = self.chunks.copy()    # not the caller's tensor
                self.chunks[over] = 0
        else:
            self.exps = self.coder.exponents(self.chunks)
        self.res_enc = np.full(n_chunks, -1, np.int8)        # each chunk's result encoding
        self.res_exp = np.zeros(n_chunks, np.int16)          # and the exponent it decodes with
        self.res: dict[int, np.ndarray] = {}                 # encoding -> payload rows
        self.to_send: list[int] = []
        self.ready: list[tuple[int, int]] = []               # heap of (chunk, slot), READY
        self.lowest = 0                                      # lowest chunk without a result
        self.oldest_done: int | None = None                  # oldest use answered in a burst
        self.done_chunks = 0
        self.received_this_call = 0
        self.other_chunk = 0
        self.rejected = {BAD_CHECKSUM: 0, BAD_CODES: 0}     # results failing a check
        used = self.used = min(window, n_chunks)
        self.calls += 1
        self.coder.begin(self.session_index, self.calls)
        before = self.stats.copy()
        start = self.clock()
        self.coalescer.start(start)
        self.state[:] = State.IDLE
        self.deadline[:] = np.inf
        self.in_flight = 0
        self.cur[:used] = np.arange(used)
        if self.coder.primed:
            self._dispatch(PRIME_SLOT, int(Event.START_PRIMER), None)
            for s in range(used):
                if s != PRIME_SLOT:
                    self._dispatch(s, int(Event.START), None)
        else:
            for s in range(used):
                self._dispatch(s, int(Event.START_UNPRIMED), None)
        try:
            self._schedule()
            self._flush()
            self._run(used, start)
        except AllReduceError as e:
            self.failed = str(e).split(":")[0]
            raise
        out = self._decode(n_chunks * elems)
        if self.coder.rotates:
            out = hadamard.unrotate(out[:flat.size], size, seed)
        if not self.verifying and agree.verifies(self.verify, self.job.encoding, n_chunks,
                                                 window):
            self._agree(out[:size])
        self.stats.calls += 1
        self.stats.elements += size
        self.stats.chunks += n_chunks
        self.stats.seconds += self.clock() - start
        self.last = self.stats.since(before)
        self.chunks = self.res = None
        return out[:size].reshape(x.shape)

    def _agree(self, out: np.ndarray) -> None:
        """The call's digest through the switch as one more call of one chunk; raises,
        naming the call, when the workers' digests differ (agree.py). The digest call keeps
        the call's number and its counts out of the call's own: with or without it, the
        calls' draws and figures are the same."""
        call, before = self.calls, self.stats.copy()
        self.verifying = True
        try:
            mean = self.allreduce(agree.digest_bits(out, self.job.elems))
        finally:
            self.verifying = False
            self.calls = call
            st = self.stats
            st.calls, st.elements, st.chunks = before.calls, before.elements, before.chunks
            st.verified += 1
        bad = agree.disagreeing(mean)
        if bad:
            self.failed = f"call {call}: the workers' results differ"
            raise AllReduceError(
                f"allreduce of job {self.job.job_id} (session {self.job.session}, call "
                f"{call}): the workers' results differ ({bad} of {mean.size} digest bits "
                f"disagree): a result frame reached some worker corrupted with a checksum "
                f"that still adds up; no worker can tell whose is wrong, so none goes on")

    def _run(self, used: int, start: float) -> None:
        deadline = self.deadline[:used]
        last_progress = start
        next_report = start + PROGRESS_EVERY
        burst_limit = used + 16
        frame = None
        reported = False
        while self.done_chunks < self.n_chunks:
            now = self.clock()
            give_up = last_progress + self.timeout
            if now >= give_up:
                self._aborted()
                raise AllReduceError(self._missing(used, now - last_progress))
            if frame is None:
                frame = self.port.recv(max(0.0, min(deadline.min(), give_up) - now))
                if frame is not None:   # woken: let more results gather (pacing.py)
                    now, soonest = self.clock(), deadline.min()
                    pause = self.coalescer.pause(now, self.done_chunks, self.in_flight, soonest)
                    if self.pacer.share:    # off: no syscall for the backlog
                        pause = max(pause, self.pacer.pause(now, self.port.backlog(), soonest))
                    if pause > 0:
                        self.sleep(pause)
            # What else already waits is handled in the same burst, so the chunks it
            # releases are encoded in one codec call.
            batch = []
            while frame is not None and len(batch) < burst_limit:
                batch.append(frame)
                frame = self.port.recv(0.0)
            flying = self.in_flight
            if batch and self._receive_many(batch, used):
                last_progress = self.clock()
            answered = max(0, flying - self.in_flight)
            if self.first_sample:
                self._rearm_initial(used)
            if self.oldest_done is not None:
                self._restart_timers(used, self.oldest_done)
                self.oldest_done = None
            self._schedule(answered)
            self._flush()
            # Timers fire only when the inbox is empty: a result waiting there is no loss.
            if frame is None:
                frame = self.port.recv(0.0)
            if frame is None:
                now = self.clock()
                fired = np.flatnonzero(deadline <= now)
                for s in fired:
                    self._dispatch(int(s), _TIMEOUT, None)
                if fired.size:
                    self._aborted()
                if self.pacer.share:
                    self.pacer.passed(self.clock(), self.port.backlog())
            if (self.progress is not None and last_progress >= next_report
                    and self.done_chunks < self.n_chunks):
                next_report = last_progress + PROGRESS_EVERY
                self.progress(self.done_chunks, self.n_chunks)
                reported = True
        if reported:                    # a long call also reports its end
            self.progress(self.done_chunks, self.n_chunks)

    def _receive_many(self, frames: list[bytes], used: int) -> bool:
        """Handles a burst of frames in order; True if one completed a use of a slot.

        The usual burst is results for distinct slots, each the awaited one of a chunk
        with another after it: that is handled for all of them at once, with what
        _receive -> _dispatch -> _accept_next does per frame, in the same order where order
        matters (round-trip samples, the window). Anything else, frame by frame."""
        if len(frames) > 1 and self.trace is None and self._accept_many(frames, used):
            return True
        done = False
        for f in frames:
            done = self._receive(f, used) or done
        return done

    def _accept_many(self, frames: list[bytes], used: int) -> bool:
        got = self.framer.parse_many(frames)
        if got is None:
            return False
        hdr, pay = got
        enc = int(hdr["encoding"][0])
        found = self._awaited(hdr, used) if self.coder.accepts(enc) else None
        if found is None or not self.coder.valid(enc, pay):   # (frame by frame: counted)
            return False
        # every frame is an ACCEPT_NEXT (RUNNING -> READY) or, for a slot's last chunk, an
        # ACCEPT_LAST (RUNNING -> DONE): _receive, _store and _accept_next or _accept_last
        s, last, exps = found
        job, n = self.job, len(frames)
        st = self.stats
        st.packets_received += n
        st.bytes_received += n * len(frames[0])
        self.received_this_call += n
        self.session_results += n
        tries, sent_at = self.tries[s].tolist(), self.sent_at[s].tolist()
        timer, window = self.timer, self.window
        now = self.clock()
        for i in range(n):
            if not tries[i]:  # _rtt_sample (Karn)
                r = float(now - sent_at[i])
                self.first_sample = self.first_sample or timer.srtt is None
                timer.sample(r)
                st.rtt_samples += 1
                st.rtt_seconds += r
            window.on_result()
        q = int(self.seq[s].min())
        if self.oldest_done is None or q < self.oldest_done:
            self.oldest_done = q
        rows = self.res.get(enc)
        if rows is None:
            rows = self.res[enc] = np.empty((self.n_chunks, job.elems),
                                            self.coder.result_dtype(enc))
        cur = self.cur[s]
        rows[cur] = pay
        self.res_enc[cur] = enc
        self.res_exp[cur] = self.exp[s]
        self.done_chunks += n
        while self.lowest < self.n_chunks and self.res_enc[self.lowest] >= 0:
            self.lowest += 1
        self.uses[s] += 1
        self.in_flight -= n
        self.deadline[s] = np.inf
        if last.any():
            self.state[s[last]] = _DONE
            more = ~last
            s, exps = s[more], exps[more]
        nxt = self.cur[s] + job.window
        self.cur[s] = nxt
        self.exp[s] = exps
        self.state[s] = _READY
        for c, slot in zip(nxt.tolist(), s.tolist(), strict=True):
            heapq.heappush(self.ready, (c, slot))
        return True

    def _awaited(self, hdr, used: int):
        """(slots, last, exponents) when every header is the awaited result of a distinct
        running slot (last: that chunk is the slot's last of the call), else None."""
        job, n = self.job, hdr.shape[0]
        if _bursts is not None:
            s, exps = np.empty(n, np.int64), np.empty(n, np.int64)
            last = np.empty(n, np.bool_)
            if not _bursts.awaited(hdr.view(np.uint8).reshape(n, -1), _bursts.AT, _bursts.WIDTH,
                                   np.array([wire.MSG_RESULT, job.job_id, job.session,
                                             job.workers], np.int64),
                                   self.state, self.uses, self.cur, self.sent_exp, _RUNNING,
                                   job.slots, used, self.n_chunks, job.window, s, last, exps):
                return None
            return s, last, exps
        s = hdr["slot"].astype(np.int64)
        if not ((hdr["msg_type"] == wire.MSG_RESULT).all() and (hdr["job_id"] == job.job_id).all()
                and (hdr["session"] == job.session).all() and int(s.max()) < used
                and np.unique(s).size == n):
            return None
        cur = self.cur[s]
        if not ((self.state[s] == _RUNNING).all()
                and (hdr["version"] == (self.uses[s] & 1)).all()
                and (hdr["chunk"] == wire.use_chunk(self.uses[s], s, job.slots)).all()
                and (hdr["count"] == job.workers).all()
                and (hdr["exp"] >= self.sent_exp[s]).all()):
            return None
        return s, cur + job.window >= self.n_chunks, hdr["exp"].astype(np.int64)

    def _receive(self, frame: bytes, used: int) -> bool:
        """Handles one frame; True if it completed a use of a slot."""
        self.stats.packets_received += 1
        self.stats.bytes_received += len(frame)
        bad = self.framer.bad_checksums
        got = self._classify(frame, used)
        if got is None:
            if self.framer.bad_checksums != bad:
                self.stats.corrupt_ignored += 1
                self.rejected[BAD_CHECKSUM] += 1
            else:
                self.stats.foreign_ignored += 1
            return False
        s, event, msg = got
        if msg is not None and not self.coder.valid(msg[0].encoding, msg[1]):
            # checksum good, payload not one a switch sends: corrupt, as a bad checksum
            self.stats.corrupt_ignored += 1
            self.rejected[BAD_CODES] += 1
            return False
        self._dispatch(s, event, msg)
        return event == _MORE or event == _LAST

    def _classify(self, frame: bytes, used: int):
        parsed = self.framer.parse(frame)
        if parsed is None:
            return None
        hdr, payload = parsed
        job = self.job
        if hdr.msg_type == wire.MSG_REFUSED:
            self._refused(hdr, used)
            return None
        if (hdr.msg_type != wire.MSG_RESULT or hdr.job_id != job.job_id
                or hdr.session != job.session or hdr.slot >= used):
            return None
        self.received_this_call += 1
        self.session_results += 1
        s = hdr.slot
        state = int(self.state[s])
        if state not in _IN_FLIGHT or hdr.version != int(self.uses[s]) & 1:
            return s, _STALE, None
        cur = int(self.cur[s])
        if hdr.chunk != wire.use_chunk(int(self.uses[s]), s, job.slots):
            self.other_chunk += 1       # the awaited version, someone else's chunk
            return s, _STALE, None
        if hdr.count != job.workers:
            raise AllReduceError(
                f"slot {s}: the result sums {hdr.count} workers, this job has {job.workers}: "
                f"the switch's job {job.job_id} is set up for another worker count")
        if hdr.exp < self.sent_exp[s]:
            raise AllReduceError(
                f"slot {s}: the result's exponent {hdr.exp} is below this worker's "
                f"{self.sent_exp[s]}: {used_session_hint(job)}")
        if not self.coder.accepts(hdr.encoding):
            raise AllReduceError(f"slot {s}: a result encoded as "
                                 f"{wire.ENCODINGS.get(hdr.encoding, hdr.encoding)} cannot "
                                 f"answer {wire.ENCODINGS[job.encoding]} contributions")
        last = state == _RUNNING and cur + self.job.window >= self.n_chunks
        return s, _LAST if last else _MORE, (hdr, payload)

    def _refused(self, hdr, used: int) -> None:
        """A refusal of this worker's current use of a slot fails the call at once; one of
        another job, session or use is ignored (counted as foreign)."""
        job, s = self.job, hdr.slot
        if (hdr.job_id == job.job_id and hdr.session == job.session and s < used
                and int(self.state[s]) in _IN_FLIGHT and hdr.version == int(self.uses[s]) & 1
                and hdr.chunk == self._chunk_field(s)):
            what = "the priming round" if self.state[s] == _PRIMING else f"chunk {self.cur[s]}"
            raise AllReduceError(refusal_text(job, hdr, f"slot {s} {what}"))

    def _dispatch(self, s: int, event: int, msg) -> None:
        old = int(self.state[s])
        action, nxt = transition(old, event)
        self._actions[action](s, msg)
        self.state[s] = nxt
        if nxt == old:
            return
        if (old in _IN_FLIGHT) != (nxt in _IN_FLIGHT):
            if nxt in _IN_FLIGHT:
                self.in_flight += 1
            else:
                self.in_flight -= 1
                self.deadline[s] = np.inf
        if nxt == _READY:
            heapq.heappush(self.ready, (int(self.cur[s]), s))

    def _rearm_initial(self, used: int) -> None:
        """The initial timeout only stands in for a measurement: once the first round trip
        is measured, the uses still on it get the measured timeout, counted from now."""
        self.first_sample = False
        rto = self.timer.rto()
        armed = np.flatnonzero(np.isfinite(self.deadline[:used]) & (self.tries[:used] == 0)
                               & (self.rto[:used] > rto))
        if armed.size:
            self.rto[armed] = rto
            self.deadline[armed] = np.minimum(self.deadline[armed], self.clock() + rto)

    def _restart_timers(self, used: int, seq: int) -> None:
        """RFC 6298 (5.3) per slot: a use answered restarts the timers of the uses sent after
        it. A switch works through its queue in order, so while the uses ahead of ours are
        being answered, ours is queued, not lost: a slow switch draining a burst causes no
        retransmission, and a lost use still times out one RTO after the use before it."""
        # (a use with no timer keeps its infinite deadline: max(inf, t) is inf)
        d = self.deadline[:used]
        np.maximum(d, self.clock() + self.rto[:used], out=d, where=self.seq[:used] > seq)

    def _schedule(self, answered: int = 0) -> None:
        """Sends READY chunks, lowest first, while the window has room. The lowest chunk
        without a result goes out whatever the window: every worker's lowest incomplete
        chunk is sent, so windows of different sizes cannot wait on each other. At most
        `burst` chunks more than the `answered` uses go out back to back (pacing.BURST):
        the priming result releases every slot at once, and the rest follow its results."""
        ready, window = self.ready, self.window.limit()
        room = answered + self.burst
        while ready and ((self.in_flight < window and room > 0)
                         or ready[0][0] == self.lowest):
            _, s = heapq.heappop(ready)
            self._dispatch(s, _SEND, None)
            room -= 1

    # ------------------------------------------------------------------ actions
    def _chunk_field(self, s: int) -> int:
        """The chunk number of the slot's current use (wire.use_chunk)."""
        return wire.use_chunk(int(self.uses[s]), s, self.job.slots)

    def _prime(self, s: int, _msg) -> None:
        # One exponent for the first chunk of every slot: the max over them.
        e = int(self.exps[:self.used].max())
        self.sent_exp[s] = e
        frame = self.framer.build(wire.MSG_CONTRIB, self.job.encoding, self.job.job_id,
                                  self.job.session, s, int(self.uses[s] & 1), e,
                                  1, self._chunk_field(s), self.coder.zeros)
        self._send_new(s, frame, None)

    def _wait(self, s: int, _msg) -> None:
        pass

    def _release(self, s: int, msg) -> None:
        # No RTT sample and no wider window: a priming round also waits for the slowest
        # worker to finish its computation, which says nothing about the network.
        self.uses[s] += 1
        self.exp[s] = msg[0].exp
        self._answered(s)
        for t in range(self.used):
            if t != s and self.state[t] == _AWAIT:
                self._dispatch(t, _PRIMED, msg)

    def _take_prime(self, s: int, msg) -> None:
        self.exp[s] = msg[0].exp

    def _send_chunk(self, s: int, _msg) -> None:
        self.to_send.append(s)
        self.deadline[s] = np.inf         # no timer until the chunk is sent

    def _accept_next(self, s: int, msg) -> None:
        self._store(s, msg)
        self.uses[s] += 1
        self.cur[s] += self.job.window
        self.exp[s] = msg[0].exp

    def _accept_last(self, s: int, msg) -> None:
        self._store(s, msg)
        self.uses[s] += 1

    def _retransmit(self, s: int, _msg) -> None:
        if self.tries[s] == 0:
            self.window.on_timeout(int(self.seq[s]), self.sends)
        # The resent frame queues behind everything sent so far: answers to those restart
        # its timer (_restart_timers), as for a new use.
        self.sends += 1
        self.seq[s] = self.sends
        frame = self.frames[s]
        self.port.send(frame)
        self.stats.packets_sent += 1
        self.stats.bytes_sent += len(frame)
        self.stats.bytes_resent += len(frame)
        self.stats.retransmissions += 1
        self.tries[s] += 1
        self.rto[s] = min(self.rto[s] * 2, self.timer.maximum)
        self.deadline[s] = self.clock() + self.rto[s]

    def _ignore(self, s: int, _msg) -> None:
        self.stats.duplicates_ignored += 1

    # ------------------------------------------------------------------ helpers
    def _flush(self) -> None:
        """Encodes the chunks queued by this burst's actions in one call and sends them."""
        if not self.to_send:
            return
        slots, self.to_send = self.to_send, []
        cs = self.cur[slots]
        exps = self.exp[slots]
        rows = self.chunks[cs]
        if self.coder.primed:
            rows[exps == self.mark] = 0     # comes back NaN: its values do not matter
        payloads = self.coder.encode(rows, exps, cs)
        window, n_chunks, job = self.job.window, self.n_chunks, self.job
        if len(slots) >= BATCH_FRAMES:
            nxt = cs + window
            has_next = nxt < n_chunks
            nxt_exp = np.where(has_next, self.exps[np.where(has_next, nxt, 0)], 0)
            self.sent_exp[slots] = nxt_exp
            uses = self.uses[slots]
            frames = self.framer.build_many(wire.MSG_CONTRIB, job.encoding, job.job_id,
                                            job.session, slots, uses & 1, nxt_exp, 1,
                                            wire.use_chunk(uses, self.slot_ids[slots],
                                                           job.slots), payloads)
        else:
            frames = []
            for i, s in enumerate(slots):
                c = int(cs[i])
                nxt = c + window
                e = int(self.exps[nxt]) if nxt < n_chunks else 0
                self.sent_exp[s] = e
                frames.append(self.framer.build(
                    wire.MSG_CONTRIB, job.encoding, job.job_id, job.session, s,
                    int(self.uses[s] & 1), e, 1, self._chunk_field(s), payloads[i]))
        self._record_many(slots, frames, payloads)
        self.port.send_many(frames)

    def _send_new(self, s: int, frame: bytes, payload) -> None:
        self._record_many([s], [frame], [payload])
        self.port.send(frame)

    def _record_many(self, slots: list[int], frames: list[bytes], payloads) -> None:
        """The bookkeeping of new uses' frames, sent right after (one timestamp: they leave
        in one burst)."""
        for s, frame in zip(slots, frames, strict=True):
            self.frames[s] = frame
        if self.trace is not None:
            for s, payload in zip(slots, payloads, strict=True):
                self.payloads[s] = payload
        m = len(slots)
        self.stats.packets_sent += m
        self.stats.bytes_sent += sum(map(len, frames))
        now = self.clock()
        rto = self.timer.rto()
        self.seq[slots] = np.arange(self.sends + 1, self.sends + m + 1)
        self.sends += m
        self.sent_at[slots] = now
        self.tries[slots] = 0
        self.rto[slots] = rto
        self.deadline[slots] = now + rto

    def _store(self, s: int, msg) -> None:
        hdr, payload = msg
        self._rtt_sample(s)
        self.window.on_result()
        self._answered(s)
        c = int(self.cur[s])
        rows = self.res.get(hdr.encoding)
        if rows is None:
            rows = self.res[hdr.encoding] = np.empty(
                (self.n_chunks, self.job.elems), self.coder.result_dtype(hdr.encoding))
        rows[c] = payload
        self.res_enc[c] = hdr.encoding
        self.res_exp[c] = self.exp[s]
        self.done_chunks += 1
        while self.lowest < self.n_chunks and self.res_enc[self.lowest] >= 0:
            self.lowest += 1
        if self.trace is not None:
            self.trace(call=self.calls, chunk=c, exp=int(self.exp[s]), sent=self.payloads[s],
                       result=hdr, payload=payload.copy())

    def _answered(self, s: int) -> None:
        q = int(self.seq[s])
        if self.oldest_done is None or q < self.oldest_done:
            self.oldest_done = q

    def _decode(self, size: int) -> np.ndarray:
        out = np.empty((self.n_chunks, self.job.elems), np.float32)
        for enc, rows in self.res.items():
            idx = np.flatnonzero(self.res_enc == enc)
            if idx.size == self.n_chunks:
                out[:] = self.coder.decode_mean(enc, rows, self.res_exp)
            else:
                out[idx] = self.coder.decode_mean(enc, rows[idx], self.res_exp[idx])
        if self.coder.primed:
            nonfinite = self.res_exp == self.mark
            if nonfinite.any():
                out[nonfinite] = np.nan
                self.stats.nonfinite_chunks += int(np.count_nonzero(nonfinite))
        return out.reshape(size)

    def _rtt_sample(self, s: int) -> None:
        # Karn: only a use answered without retransmission measures the round trip.
        if self.tries[s]:
            return
        r = float(self.clock() - self.sent_at[s])
        self.first_sample = self.first_sample or self.timer.srtt is None
        self.timer.sample(r)
        self.stats.rtt_samples += 1
        self.stats.rtt_seconds += r

    def _missing(self, used: int, idle: float) -> str:
        job = self.job
        waiting = []
        for s in range(used):
            if self.state[s] == _PRIMING:
                waiting.append(f"slot {s} priming the call ({self.tries[s] + 1} sends)")
            elif self.state[s] == _RUNNING:
                waiting.append(f"slot {s} chunk {self.cur[s]} version {self.uses[s] & 1} "
                               f"({self.tries[s] + 1} sends)")
        shown = "; ".join(waiting[:8]) + (f"; ... {len(waiting) - 8} more slots"
                                          if len(waiting) > 8 else "")
        held = int(np.count_nonzero(self.state[:used] == _AWAIT))
        if held:
            shown += f"; {held} slots wait for the priming result"
        saw = seen_text(self.rejected)
        if self.other_chunk:
            saw = "; ".join(filter(None, (saw, f"{self.other_chunk} results for other uses "
                                               "of its slots")))
            hint = (f"the switch answered {self.other_chunk} times with results for other "
                    f"uses: {used_session_hint(job)}")
        elif any(self.rejected.values()):
            hint = corrupt_hint(job)
        elif self.received_this_call == 0 and self.session_results:
            hint = session_answered_hint(job)
        elif self.received_this_call == 0:
            hint = (f"no result of job {job.job_id} arrived in this call: is the switch up, "
                    f"programmed for job {job.job_id}, and are all {job.workers} workers "
                    f"running, in session {job.session} on the switch too? Or "
                    f"{used_session_hint(job)}")
        else:
            hint = (f"other slots completed, so the switch answers: a worker of the "
                    f"{job.workers} is likely missing or stopped")
        return (f"allreduce of job {job.job_id} (session {job.session}, call "
                f"{self.calls}) got no result for {idle:.1f} s: "
                f"{self.n_chunks - self.done_chunks} of {self.n_chunks} chunks never completed "
                f"[{shown}]; {f'this worker saw {saw}; ' if saw else ''}{hint}")
