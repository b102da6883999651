"""Data-parallel training of the MNIST-1D CNN with DistributedDataParallel.

DDP broadcasts rank 0's parameters when it wraps the model, and after each backward pass
every parameter's gradient is the mean over the ranks: through the switch or the gather
path (worker/ddp/hook.py), or through Gloo's own allreduce (no hook: what DDP does by
default). Each rank trains on its own shard with its own batches; the per-step log has the
shape of worker/train.py's, plus the wall time since the start (accuracy against time).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from worker.compression.modes import MODES
from worker.compression.registry import parse as parse_compressor
from worker.ddp.faults import FaultBoard, describe
from worker.ddp.hook import HookState, comm_hook
from worker.ddp.workload import (
    WORKLOADS,
    Data,
    accuracy,
    evaluate,
    load_data,
    loss,
    make_model,
    num_params,
)
from worker.model import Batches, shard


@dataclass(frozen=True)
class DDPConfig:
    steps: int = 300
    batch: int = 32                 # examples per rank and step
    lr: float = 0.1
    momentum: float = 0.9
    seed: int = 0                   # model init and batches (the data split is MNIST-1D's)
    compressor: str = "none"        # a worker/compression/registry.py spec
    mode: str = "layer"             # "layer" or "model"
    eval_every: int = 10            # steps between test-set evaluations (and the last step)
    bucket_mb: float = 25.0         # DDP's bucket_cap_mb
    overlap: bool = True            # switch path: buckets reduced while backward goes on
    workload: str = "mnist1d"       # worker/ddp/workload.py WORKLOADS
    # Mixed precision as PyTorch users run it: 0 is off; else the forward runs in float16
    # (torch.autocast) and torch.amp.GradScaler scales the loss, starting at amp_scale and
    # cut by amp_backoff after a step whose gradients (the mean over the ranks) hold inf or
    # NaN, a step the scaler skips.
    amp_scale: float = 0.0
    amp_backoff: float = 0.5

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch < 1 or self.eval_every < 1:
            raise ValueError("steps, batch and eval_every must be >= 1")
        if not self.lr > 0 or not 0 <= self.momentum < 1:
            raise ValueError("need lr > 0 and 0 <= momentum < 1")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got "
                             f"{self.workload!r}")
        if not self.bucket_mb > 0:
            raise ValueError(f"bucket_mb must be > 0, got {self.bucket_mb}")
        parse_compressor(self.compressor)
        if not (self.amp_scale == 0 or 0 < self.amp_scale < float("inf")):
            raise ValueError(f"amp_scale must be 0 (off) or a finite scale > 0, got "
                             f"{self.amp_scale}")
        if not 0 < self.amp_backoff < 1:
            raise ValueError(f"amp_backoff must be within (0, 1), got {self.amp_backoff}")


def params_sha256(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


def train(group: dist.ProcessGroup, cfg: DDPConfig,
          allreduce: Callable[[np.ndarray], np.ndarray] | None = None,
          comm_stats: Callable[[], dict] | None = None,
          log: Callable[[str], None] | None = None, data: Data | None = None,
          sparse: bool = False, faults: FaultBoard | None = None) -> dict:
    """cfg.steps steps on this rank of `group`; `allreduce` (the switch client's mean) or,
    when None, Gloo carries the gradients; `sparse`: `allreduce` is the block-sparse client
    of a sparse job (the hook then sends sparsifiers' outputs through it); `faults`: the
    job's fault board (worker/ddp/faults.py), whose heartbeat runs during training and
    which hears this rank's error. Returns the per-step log and the final figures."""
    rank, workers = group.rank(), group.size()
    data = data or load_data(cfg.workload)
    x, y = shard(data.x_train.numpy(), data.y_train.numpy(), rank, workers)
    batches = Batches(x, y, cfg.batch, seed=cfg.seed * 1000 + rank)
    model = make_model(cfg.seed if rank == 0 else cfg.seed + 1 + rank,  # DDP broadcasts
                       cfg.workload)
    ddp = DDP(model, process_group=group, bucket_cap_mb=cfg.bucket_mb)
    state = None
    if allreduce is not None or cfg.compressor.strip().lower() != "none":
        state = HookState(model, group, allreduce=allreduce, mode=cfg.mode,
                          compressor=cfg.compressor, seed=cfg.seed, overlap=cfg.overlap,
                          sparse=sparse)
        ddp.register_comm_hook(state, comm_hook)
    path = state.path if state is not None else "gloo"
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    scaler = (torch.amp.GradScaler("cpu", init_scale=cfg.amp_scale,
                                   backoff_factor=cfg.amp_backoff)
              if cfg.amp_scale else None)
    initial = accuracy(model, data.x_test, data.y_test)      # rank 0's model, broadcast
    steps = []
    start = time.perf_counter()
    if faults is not None:
        faults.start()
    try:
        for step in range(1, cfg.steps + 1):
            t0, c0 = time.perf_counter(), time.thread_time()
            xb, yb = batches.next()
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cpu", dtype=torch.float16, enabled=scaler is not None):
                out = ddp(torch.from_numpy(xb))
                batch_loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(yb))
            try:
                # the hook (or Gloo) runs in here
                (batch_loss if scaler is None else scaler.scale(batch_loss)).backward()
            except RuntimeError:
                # autograd wraps what the hook raised; the switch client's own error says more
                if state is not None and state.error is not None:
                    raise state.error from None
                raise
            t1 = time.perf_counter()
            skipped = None
            if scaler is None:
                opt.step()
            else:
                scale = scaler.get_scale()
                scaler.step(opt)        # skipped when the mean gradient is not finite
                scaler.update()
                skipped = scaler.get_scale() < scale
            # the step ends here: an evaluation is timed apart (eval_seconds), so that
            # step_seconds, and the window mininet/bounds.py measures, is training alone
            t2, compute, end = time.perf_counter(), time.thread_time() - c0, time.time()
            acc = test_loss = None
            if step % cfg.eval_every == 0 or step == cfg.steps:
                acc, test_loss = evaluate(model, data.x_test, data.y_test)
            t3 = time.perf_counter()
            hook = state.take_counters().as_dict() if state is not None else {}
            comm = hook.pop("seconds", None)
            # compute: this thread's CPU (forward, backward, optimizer; torch runs them
            # here with one intra-op thread), not the waits for the reductions
            rec = {"step": step, "loss": float(batch_loss.detach()), "test_accuracy": acc,
                   "test_loss": test_loss,
                   "backward_seconds": t1 - t0, "comm_seconds": comm, "step_seconds": t2 - t0,
                   "compute_seconds": compute, "end": end, "eval_seconds": t3 - t2,
                   "wall_seconds": t3 - start, "hook": hook, "skipped": skipped,
                   "comm": comm_stats() if comm_stats is not None else {}}
            steps.append(rec)
            if log is not None:
                acc_text = "" if acc is None else f" test accuracy {acc:.4f}"
                log(f"step {step}/{cfg.steps} loss {rec['loss']:.4f}{acc_text} "
                    f"(step {1e3 * (t2 - t0):.1f} ms)")
    except BaseException as e:
        if faults is not None:      # the other ranks stop too, naming this one
            faults.post(describe(e))
        raise
    finally:
        if state is not None:
            state.close()      # the communication thread
        if faults is not None:
            faults.stop()
    return {
        "config": asdict(cfg),
        "framework": "torch",
        "path": path,
        "rank": rank,
        "workers": workers,
        "parameters": num_params(model),
        "steps": steps,
        "initial_test_accuracy": initial,
        "final_test_accuracy": accuracy(model, data.x_test, data.y_test),
        "final_test_loss": loss(model, data.x_test, data.y_test),
        "seconds": time.perf_counter() - start,
        "params_sha256": params_sha256(model),
    }
