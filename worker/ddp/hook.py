"""A DistributedDataParallel communication hook that all-reduces through the P4 switch.

    state = HookState(model, group, allreduce=client.allreduce, mode="layer",
                      compressor="cnat")
    ddp.register_comm_hook(state, comm_hook)

Every gradient bucket DDP hands over is reduced to the workers' mean and returned in a
torch.futures.Future. On the switch path the reductions run on a communication thread of the
rank, one at a time in the order DDP hands the buckets over (the allreduce client is not
thread-safe, and the same order gives the same bits), while the backward pass goes on to
the next buckets; DDP waits for the futures before backward() returns. `overlap=False`
reduces on the autograd thread instead. The Gloo and gather paths always do: their
collectives must keep their order against DDP's own.

Two modes, as worker/compression/modes.py defines them:
  layer  one compressor per parameter tensor (its own error-feedback residual), one
         reduction per bucket;
  model  one compressor over the whole gradient, in the model's parameter order, and one
         reduction per step: the buckets wait until DDP hands over the last one.

Two paths:
  dense   the compressor's output (or the gradient itself) is a dense float vector that
          adds up: it goes through `allreduce` (the switch client: CNAT8 or FIXED32 up, the
          job's result encoding down), or through Gloo's allreduce when `allreduce` is None
          (the baseline).
  gather  sparsifiers and bit quantizers (top-k, one-bit, Strom, Dryden, ...) send
          payloads a switch cannot add: every rank's packed payload is all-gathered over
          Gloo and each rank decompresses and averages them, in rank order, so all ranks get
          the same bits. With `sparse=True` (`allreduce` is the block-sparse client of a
          sparse job) sparsifiers take the switch path instead: what they decompress to is
          mostly zero blocks, and only the blocks any rank holds travel.
The compressors live in the state, so their error-feedback residuals (`ef:` specs) persist
across steps. A bucket's buffer is used in place when nothing compresses it; otherwise a
gradient is copied once into the compressor's input.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from worker.allreduce.client import AboveBound, AllReduceError
from worker.compression.base import Compressed, Compressor, Identity
from worker.compression.compose import Compose
from worker.compression.dithering import RandomDithering, TernGrad
from worker.compression.feedback import ErrorFeedback
from worker.compression.modes import MODES
from worker.compression.natural import NaturalCompression, NaturalDithering
from worker.compression.registry import parse as parse_compressor
from worker.compression.sparsify import Sparsifier
from worker.ddp import payload

# One dense float per element, adding up to the sum of what each worker means: these can
# ride the switch. Everything else (sparse or bit-packed) takes the gather path.
DENSE = (Identity, NaturalCompression, NaturalDithering, RandomDithering, TernGrad)


def is_dense(c: Compressor) -> bool:
    if isinstance(c, ErrorFeedback):
        return is_dense(c.inner)
    return isinstance(c, DENSE) and not isinstance(c, Compose)


def is_sparsifier(c: Compressor) -> bool:
    """A compressor whose output decompresses to the input with most elements zero."""
    if isinstance(c, ErrorFeedback):
        return is_sparsifier(c.inner)
    return isinstance(c, Sparsifier)


@dataclass
class StepCounters:
    """What the hook did since the last reset (one training step)."""

    calls: int = 0                  # dense reductions (switch or Gloo allreduce)
    gathers: int = 0                # payload allgathers
    elements: int = 0
    compressor_bits: int = 0        # what the compressor's payloads cost (its bits())
    gathered_bytes: int = 0         # blob bytes this rank sent in allgathers
    seconds: float = 0.0            # reducing (on the communication thread, when overlapped)

    def as_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class HookState:
    model: torch.nn.Module
    group: dist.ProcessGroup | None
    allreduce: Callable[[np.ndarray], np.ndarray] | None = None
    mode: str = "layer"
    compressor: str = "none"
    seed: int = 0
    counters: StepCounters = field(default_factory=StepCounters)
    error: AllReduceError | None = None     # what stopped a reduction
    overlap: bool = True            # switch path: reduce on a communication thread
    sparse: bool = False            # allreduce is a sparse job's block-sparse client

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        self.factory = (None if self.compressor.strip().lower() == "none"
                        else parse_compressor(self.compressor))
        self.rank = self.group.rank() if self.group is not None else 0
        self.world = self.group.size() if self.group is not None else 1
        params = list(self.model.parameters())
        self.index = {id(p): i for i, p in enumerate(params)}
        names = {id(p): n for n, p in self.model.named_parameters()}
        self.names = [names.get(id(p), f"parameter {i}") for i, p in enumerate(params)]
        self.sizes = [p.numel() for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.compressors: dict[int, Compressor] = {}
        self.pending: list[tuple[dist.GradBucket, torch.futures.Future]] = []
        self.flat: np.ndarray | None = None       # model mode: the step's whole gradient
        probe = self._compressor(-1) if self.factory is not None else None
        self.dense = probe is None or is_dense(probe) or (
            self.sparse and self.allreduce is not None and is_sparsifier(probe))
        self.compressors.pop(-1, None)
        self.comm = CommThread() if self.overlap and self.path == "switch" else None

    def close(self) -> None:
        """Ends the communication thread (after the last step)."""
        if self.comm is not None:
            self.comm.close()

    @property
    def path(self) -> str:
        if not self.dense:
            return "gather"
        return "switch" if self.allreduce is not None else "gloo"

    def take_counters(self) -> StepCounters:
        c, self.counters = self.counters, StepCounters()
        return c

    # ------------------------------------------------------------------ compressors
    def _compressor(self, key: int) -> Compressor:
        """The compressor of a parameter (layer mode) or of the model (key 0, model mode);
        seeded per rank and key, so a run repeats."""
        c = self.compressors.get(key)
        if c is None:
            rng = np.random.default_rng([self.seed, self.rank, 0xC0, key + 1])
            c = self.compressors[key] = self.factory(rng)
        return c

    # ------------------------------------------------------------------ reductions
    def _reduce_dense(self, vec: np.ndarray, layout: list[tuple[int, int, int]]) -> np.ndarray:
        self.counters.calls += 1
        if self.allreduce is not None:
            try:
                return self.allreduce(vec)
            except AboveBound as e:
                raise AllReduceError(f"the gradient of {self._name_at(e.index, layout)} "
                                     f"holds {e.value:g}: {e.reason}") from None
        t = torch.from_numpy(vec)
        dist.all_reduce(t, group=self.group)
        t /= self.world
        return vec

    def _name_at(self, index: int, layout: list[tuple[int, int, int]]) -> str:
        """The parameter whose gradient holds element `index` of a reduced vector (layout:
        (parameter index, a, b) per piece in layer mode; the whole model in model mode)."""
        if self.mode == "layer":
            for k, a, b in layout:
                if a <= index < b:
                    return self.names[k]
        i = int(np.searchsorted(self.offsets, index, side="right")) - 1
        return self.names[min(max(i, 0), len(self.names) - 1)]

    def _gather_mean(self, parts: list[Compressed], decompress) -> np.ndarray:
        """Every rank's payloads, decompressed and averaged in rank order."""
        blob = payload.pack(parts)
        mine = torch.frombuffer(bytearray(blob), dtype=torch.uint8)
        size = torch.tensor([mine.numel()], dtype=torch.int64)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.world)]
        dist.all_gather(sizes, size, group=self.group)
        top = int(max(s.item() for s in sizes))
        padded = torch.zeros(top, dtype=torch.uint8)
        padded[:mine.numel()] = mine
        blobs = [torch.empty(top, dtype=torch.uint8) for _ in range(self.world)]
        dist.all_gather(blobs, padded, group=self.group)
        self.counters.gathers += 1
        self.counters.gathered_bytes += len(blob)
        total = None
        for r in range(self.world):
            got = payload.unpack(blobs[r][:int(sizes[r].item())].numpy().tobytes())
            v = decompress(got)
            total = v if total is None else total + v
        total /= np.float32(self.world)
        return total

    def _reduce(self, vec: np.ndarray, layout: list[tuple[int, int, int]]) -> np.ndarray:
        """The mean over the ranks of `vec` (a float32 vector whose pieces (key, a, b) each
        belong to one compressor), after compression."""
        self.counters.elements += vec.size
        if self.factory is None:
            return self._reduce_dense(vec, layout)
        comps = [(self._compressor(k), a, b) for k, a, b in layout]
        if self.dense:
            out = np.empty_like(vec)
            for c, a, b in comps:
                part = c.compress(vec[a:b])
                self.counters.compressor_bits += c.bits(part)
                out[a:b] = c.decompress(part).reshape(-1)
            return self._reduce_dense(out, layout)
        parts = []
        for c, a, b in comps:
            parts.append(c.compress(vec[a:b]))
            self.counters.compressor_bits += c.bits(parts[-1])

        def decompress(got: list[Compressed]) -> np.ndarray:
            if len(got) != len(comps):
                raise payload.PayloadError(f"a rank sent {len(got)} payloads, expected "
                                           f"{len(comps)}: the ranks' models differ")
            out = np.empty_like(vec)
            for (c, a, b), g in zip(comps, got, strict=True):
                if g.size != b - a:
                    raise payload.PayloadError(f"a payload of {g.size} elements where "
                                               f"{b - a} belong")
                out[a:b] = c.decompress(g).reshape(-1)
            return out

        return self._gather_mean(parts, decompress)

    # ------------------------------------------------------------------ the hook
    def __call__(self, bucket: dist.GradBucket) -> torch.futures.Future:
        if self.mode == "layer":
            return self._layer(bucket)
        return self._model(bucket)

    def _complete(self, work: Callable[[], None]) -> None:
        """Runs `work` (a reduction that completes its futures) on the communication thread,
        or here."""
        def timed() -> None:
            t0 = time.perf_counter()
            try:
                work()
            finally:
                self.counters.seconds += time.perf_counter() - t0
        if self.comm is not None:
            self.comm.submit(timed)
        else:
            timed()

    def _fail(self, futures: list[torch.futures.Future], e: BaseException) -> None:
        """Keeps the client's error (backward() re-raises it wrapped in a RuntimeError) before
        the futures fail, so whoever DDP wakes finds it."""
        if isinstance(e, AllReduceError):
            self.error = e
        if not isinstance(e, Exception):    # a future takes Exceptions only: else it hangs
            e = RuntimeError(f"{type(e).__name__}: {e}")
        for f in futures:
            f.set_exception(e)

    def _layer(self, bucket: dist.GradBucket) -> torch.futures.Future:
        buf = bucket.buffer()
        vec = buf.numpy()       # the bucket itself, no copy: DDP leaves it alone until done
        layout, a = [], 0
        for p, g in zip(bucket.parameters(), bucket.gradients(), strict=True):
            layout.append((self.index[id(p)], a, a + g.numel()))
            a += g.numel()
        fut = torch.futures.Future()

        def work() -> None:
            try:
                mean = self._reduce(vec, layout)
            except BaseException as e:
                self._fail([fut], e)
                raise
            fut.set_result(buf if mean is vec else torch.from_numpy(mean))
        self._complete(work)
        return fut

    def _model(self, bucket: dist.GradBucket) -> torch.futures.Future:
        if self.flat is None:
            self.flat = np.empty(int(self.offsets[-1]), np.float32)
        for p, g in zip(bucket.parameters(), bucket.gradients(), strict=True):
            i = self.index[id(p)]
            self.flat[self.offsets[i]:self.offsets[i + 1]] = g.detach().reshape(-1).numpy()
        fut = torch.futures.Future()
        self.pending.append((bucket, fut))
        if not bucket.is_last():
            return fut
        pending, self.pending = self.pending, []

        def work() -> None:
            try:
                mean = self._reduce(self.flat, [(0, 0, self.flat.size)])
            except BaseException as e:
                self._fail([f for _, f in pending], e)
                raise
            for b, f in pending:
                pieces = [mean[self.offsets[self.index[id(p)]]:
                               self.offsets[self.index[id(p)] + 1]] for p in b.parameters()]
                f.set_result(torch.from_numpy(np.concatenate(pieces)))
        self._complete(work)
        return fut


class CommThread:
    """A rank's communication thread: runs the reductions handed to it one at a time, in the
    order they came (what DDP's own process group does with its collectives)."""

    def __init__(self):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="natswitch-comm", daemon=True)
        self.thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        self.queue.put(work)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(5)

    def _run(self) -> None:
        while (work := self.queue.get()) is not None:
            try:
                work()
            except BaseException:   # noqa: BLE001  (work already failed its futures)
                pass


def comm_hook(state, bucket):
    """The function DDP calls per bucket: `ddp.register_comm_hook(state, comm_hook)`.
    (No annotations: DDP checks them, and postponed ones are strings.)"""
    return state(bucket)
