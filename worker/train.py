"""Data-parallel SGD of worker/model.py's MLP (or its embedding model) on scikit-learn's
digits, through any allreduce.

Every rank starts from the same parameters (same seed), trains on its own shard,
and replaces its gradient by the workers' mean that `allreduce` returns, so the
ranks stay identical step after step (the final parameters' hash shows it). An
optional compressor (worker/compression) is applied to the gradient first, layer-wise
or to the entire model (block top-k leaves zero blocks that a sparse job skips; so does
the embedding model, whose gradient is non-zero only in the rows a batch touched); the
encoding the switch adds (CNAT8 = C_nat, or FIXED32) comes after it, in the allreduce.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from worker.compression.modes import ModelCompressor
from worker.compression.registry import parse as parse_compressor
from worker.model import MLP, Batches, EmbeddingBag, load_digits_split, shard

MODELS = ("mlp", "embedding")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 100
    batch: int = 32                 # examples per rank and step
    lr: float = 0.1
    hidden: tuple[int, ...] = (64,)
    seed: int = 0
    compressor: str = "none"        # a worker/compression/registry.py spec
    mode: str = "layer"             # "layer" or "model": where the compressor applies
    eval_every: int = 1             # steps between test-set evaluations (and the last step)
    model: str = "mlp"              # "mlp", or "embedding": worker/model.py's EmbeddingBag,
                                    # whose gradient is non-zero only in the rows a batch touched

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch < 1 or self.eval_every < 1:
            raise ValueError("steps, batch and eval_every must be >= 1")
        if not self.lr > 0:
            raise ValueError(f"learning rate must be > 0, got {self.lr}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        parse_compressor(self.compressor)        # a bad spec fails before any traffic


@dataclass
class StepLog:
    step: int
    loss: float                     # this rank's mini-batch loss before the step
    test_accuracy: float | None     # after the step, on the whole test set
    compute_seconds: float
    comm_seconds: float
    compressor_bits: int | None     # what the compressor alone would send
    comm: dict = field(default_factory=dict)    # the allreduce's counters for this step
    nonzero: float = 1.0            # fraction of the sent gradient's elements that are non-zero
    step_seconds: float = 0.0
    end: float = 0.0                # time.time() when the step ended (mininet/bounds.py)


def train(allreduce: Callable[[np.ndarray], np.ndarray], rank: int, workers: int,
          cfg: TrainConfig, log: Callable[[str], None] | None = None,
          comm_stats: Callable[[], dict] | None = None) -> dict:
    """Runs cfg.steps steps; returns the per-step log and the final figures (JSON-ready)."""
    data = load_digits_split(seed=cfg.seed)
    x, y = shard(data.x_train, data.y_train, rank, workers)
    batches = Batches(x, y, cfg.batch, seed=cfg.seed * 1000 + rank)
    if cfg.model == "embedding":
        model = EmbeddingBag(data.x_train.shape[1], data.classes, seed=cfg.seed)
    else:
        model = MLP((data.x_train.shape[1], *cfg.hidden, data.classes), seed=cfg.seed)
    compressor = None
    if cfg.compressor.strip().lower() != "none":
        factory = parse_compressor(cfg.compressor)
        rng = np.random.default_rng([cfg.seed, rank, 0xC0])
        compressor = ModelCompressor(lambda: factory(rng), model.layer_sizes, cfg.mode)
    steps: list[StepLog] = []
    start = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        t0 = time.perf_counter()
        xb, yb = batches.next()
        loss, grad = model.loss_and_grad(xb, yb)
        bits = None
        if compressor is not None:
            grad, bits = compressor.roundtrip(grad)
        t1 = time.perf_counter()
        mean = allreduce(grad)
        t2 = time.perf_counter()
        model.step(mean, cfg.lr)
        acc = None
        if step % cfg.eval_every == 0 or step == cfg.steps:
            acc = model.accuracy(data.x_test, data.y_test)
        t3 = time.perf_counter()
        rec = StepLog(step, loss, acc, t1 - t0 + t3 - t2, t2 - t1, bits,
                      comm_stats() if comm_stats is not None else {},
                      float(np.count_nonzero(grad)) / grad.size, t3 - t0, time.time())
        steps.append(rec)
        if log is not None:
            acc_text = "" if acc is None else f" test accuracy {acc:.4f}"
            log(f"step {step}/{cfg.steps} loss {loss:.4f}{acc_text} "
                f"(allreduce {1e3 * (t2 - t1):.1f} ms)")
    final_acc = model.accuracy(data.x_test, data.y_test)
    return {
        "config": {**asdict(cfg), "hidden": list(cfg.hidden)},
        "rank": rank,
        "workers": workers,
        "parameters": model.num_params,
        "steps": [asdict(s) for s in steps],
        "final_test_accuracy": final_acc,
        "final_test_loss": model.loss(data.x_test, data.y_test),
        "seconds": time.perf_counter() - start,
        "params_sha256": hashlib.sha256(model.params.tobytes()).hexdigest(),
    }
