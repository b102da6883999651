"""Sparse gradients through the switch from the DDP hook (a sparse job: only the blocks some
rank holds non-zero travel): the embedding workload's own gradient (the rows a batch
touched) and block top-k with error feedback on the CNN's, every block exact against the
integer reference, the ranks in lockstep."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from harness.workers import Trace, check_sparse  # noqa: E402
from tests.worker.ddp_switch import softswitch_missing, sparse_switch_clients  # noqa: E402
from worker import wire  # noqa: E402
from worker.ddp.hook import HookState, is_sparsifier  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.ddp.train import DDPConfig, train  # noqa: E402
from worker.ddp.workload import VOCAB, DigitsEmbedding, load_data, tokens_of  # noqa: E402

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")
WORKERS = 4


def run_sparse_job(cfg: DDPConfig, encoding: str = "cnat8"):
    """cfg's training on WORKERS ranks through a sparse job; (results, traces, what each
    rank handed the client per call, what it got back)."""
    traces = [Trace() for _ in range(WORKERS)]
    _, make_client = sparse_switch_clients(WORKERS, encoding, traces=traces)
    sent = [[] for _ in range(WORKERS)]
    got = [[] for _ in range(WORKERS)]
    data = load_data(cfg.workload)

    def body(rank, group):
        client = make_client(rank)

        def allreduce(x):
            sent[rank].append(x.copy())
            got[rank].append(client.allreduce(x))
            return got[rank][-1]
        out = train(group, cfg, allreduce=allreduce, data=data, sparse=True)
        out["blocks"] = client.stats.chunks
        return out

    out = run_ranks(WORKERS, body)
    assert not [o for o in out if isinstance(o, BaseException)], out
    return out, traces, sent, got


def test_the_embedding_gradient_travels_as_the_blocks_a_batch_touched():
    cfg = DDPConfig(steps=4, eval_every=4, workload="embedding", seed=2, batch=16)
    out, traces, sent, got = run_sparse_job(cfg)
    assert len({o["params_sha256"] for o in out}) == 1
    assert out[0]["path"] == "switch"
    # every block some rank held is the exact sum of what the ranks sent (CNAT8 results:
    # one of its two roundings), and nothing else came back non-zero
    checked = check_sparse(traces, sent, got, WORKERS)
    calls = len(sent[0])
    blocks = -(-sum(p.numel() for p in DigitsEmbedding().parameters()) // wire.ELEMS)
    assert checked == out[0]["blocks"] > 0
    # a batch of 16 examples touches a fraction of the table: far fewer blocks travel
    assert checked < 0.5 * calls * blocks, (checked, calls * blocks)


def test_block_top_k_with_error_feedback_rides_the_sparse_job():
    probe = HookState(DigitsEmbedding(), None, mode="layer", compressor="ef:blocktopk:0.1",
                      allreduce=lambda x: x, sparse=True, overlap=False)
    assert is_sparsifier(probe._compressor(0)) and probe.path == "switch"
    gathered = HookState(DigitsEmbedding(), None, mode="layer", compressor="ef:blocktopk:0.1",
                         allreduce=lambda x: x, overlap=False)
    assert gathered.path == "gather"        # a dense job cannot skip blocks
    cfg = DDPConfig(steps=3, eval_every=3, seed=4, compressor="ef:blocktopk:0.1",
                    mode="model")
    out, traces, sent, got = run_sparse_job(cfg, "fixed32")
    assert len({o["params_sha256"] for o in out}) == 1
    checked = check_sparse(traces, sent, got, WORKERS)
    params = out[0]["parameters"]
    # each rank keeps a tenth of its blocks: at most 4 tenths of them travel
    assert 0 < checked <= 3 * (0.4 * params / wire.ELEMS + WORKERS)
    assert sum(s["hook"]["compressor_bits"] for s in out[0]["steps"]) > 0


def test_a_digit_becomes_its_row_and_column_patterns():
    x = np.zeros((1, 64), np.float32)
    x[0, 8 * 2 + 3] = 1.0           # row 2, column 3
    x[0, 8 * 5 + 0] = 0.3           # below the threshold
    t = tokens_of(x)[0]
    assert t[:8].tolist() == [i * 256 + (8 if i == 2 else 0) for i in range(8)]
    assert t[8:].tolist() == [2048 + j * 256 + (4 if j == 3 else 0) for j in range(8)]
    assert t.max() < VOCAB
