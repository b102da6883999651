"""Ranks as threads of one process, for tests and benches without processes or root.

torch.distributed allows one default group per process, but a ProcessGroup can be built
directly on a shared in-memory store, one per thread, and handed to DDP. This uses
ProcessGroup's backend registration, which torch does not document as public API: it is a
test harness, never the way workers run (worker/ddp/main.py uses init_process_group).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable

import torch
import torch.distributed as dist


def thread_groups(workers: int, timeout: float = 30.0, prefix: str = "g"):
    """A factory rank -> ProcessGroup (Gloo) over one in-memory store; call it in each
    rank's thread (the groups connect to each other on creation)."""
    store = dist.HashStore()

    def make(rank: int) -> dist.ProcessGroup:
        s = dist.PrefixStore(prefix, store)
        backend = dist.ProcessGroupGloo(s, rank, workers, datetime.timedelta(seconds=timeout))
        pg = dist.ProcessGroup(s, rank, workers)
        gloo = dist.ProcessGroup.BackendType.GLOO
        pg._set_default_backend(gloo)
        pg._register_backend(torch.device("cpu"), gloo, backend)
        return pg

    return make


def run_ranks(workers: int, body: Callable[[int, dist.ProcessGroup], object],
              timeout: float = 30.0, join_timeout: float = 600.0) -> list:
    """body(rank, group) in one thread per rank; returns each rank's value or exception."""
    # DDP's constructor imports torch._dynamo on first use, and that import runs ast.parse,
    # whose recursion counter CPython 3.11 shares between threads: ranks importing it while
    # another parses fail with "AST constructor recursion depth mismatch". Import it here.
    import torch._dynamo  # noqa: F401
    make = thread_groups(workers, timeout)
    out: list = [None] * workers

    def run(rank: int) -> None:
        try:
            out[rank] = body(rank, make(rank))
        except BaseException as e:        # handed to the caller with its rank
            out[rank] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_timeout)
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    if hung:
        raise RuntimeError(f"ranks {hung} still running after {join_timeout} s")
    return out
