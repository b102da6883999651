"""Workers of a sparse (block) job, in lockstep, for the data-plane tests: each holds some
blocks of a tensor and runs docs/PROTOCOL.md "Sparse jobs" over the fabric; every result is
checked against the integer reference as it arrives.

A worker's tensor is a dict block -> payload (ELEMS int32 values for FIXED32, uint8 codes for
CNAT8) of its non-zero blocks, and block -> exponent. All slots of a round go out together,
shuffled, so the switch sees uses of many slots interleaved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tests.dataplane.packets import ELEMS, check_rounding, received_sparse, sparse
from worker import codec, wire

NO_BLOCK = wire.NO_BLOCK


@dataclass
class Worker:
    host: str
    blocks: dict[int, np.ndarray]                 # its non-zero blocks
    exps: dict[int, int] = field(default_factory=dict)

    def exp(self, b: int) -> int:
        return 0 if b == NO_BLOCK else self.exps.get(b, 127)

    def after(self, stream: list[int], b: int | None) -> int:
        """Its first non-zero block of the stream after b (None: the first), or NO_BLOCK."""
        for x in stream:
            if x in self.blocks and (b is None or x > b):
                return x
        return NO_BLOCK


def streams(num_blocks: int, slots: int) -> list[list[int]]:
    return [list(range(s, num_blocks, slots)) for s in range(slots)]


def exact_sum(parts: list[np.ndarray]) -> np.ndarray:
    """What the switch adds: int32 values, or CNAT8 codes decoded as the switch decodes them."""
    total = np.zeros(ELEMS, np.int64)
    for p in parts:
        total += (codec.switch_decode_cnat8(p) if p.dtype == np.uint8 else p).astype(np.int64)
    return total


@dataclass
class CallLog:
    """What one call did: per slot, the blocks aggregated in order, and the exact sums."""

    order: dict[int, list[int]] = field(default_factory=dict)
    sums: dict[int, np.ndarray] = field(default_factory=dict)
    results: int = 0
    uses: int = 0


def run_call(fabric, topo, job: int, session: int, workers: list[Worker], num_blocks: int,
             slots: int, base: int = 0, versions: dict[int, int] | None = None,
             result_enc: str = "fixed32", rng: np.random.Generator | None = None,
             pad: bool | None = None) -> CallLog:
    """One allreduce call of the sparse protocol; every result every worker receives is
    checked (block, next, exp, count, payload). `versions` (slot -> the version its next use
    takes) carries over between calls and is updated. EMPTY data packets are padded when the
    results are FIXED32 (docs/PROTOCOL.md), unless `pad` says otherwise."""
    rng = rng or np.random.default_rng(0)
    versions = versions if versions is not None else {}
    pad = (result_enc == "fixed32") if pad is None else pad
    st = streams(num_blocks, slots)
    log = CallLog()
    # per slot: the block the next use aggregates (None: the prime), or NO_BLOCK: done
    pending: dict[int, int | None] = {s: None for s in range(slots)}
    k = 0
    while any(b != NO_BLOCK for b in pending.values()):
        sends, want = [], {}
        for s, b in pending.items():
            if b == NO_BLOCK:
                continue
            v = versions.get(s, 0)
            chunk = base + k * slots + s
            nexts, parts = [], []
            for w in workers:
                if b is None:
                    nxt = w.after(st[s], None)
                    frame = sparse(topo, w.host, job, session, s, num_blocks, nxt, prime=True,
                                   exp=w.exp(nxt), version=v, chunk=chunk)
                elif b in w.blocks:
                    nxt = w.after(st[s], b)
                    parts.append(w.blocks[b])
                    frame = sparse(topo, w.host, job, session, s, b, nxt, w.blocks[b],
                                   exp=w.exp(nxt), version=v, chunk=chunk)
                else:
                    nxt = w.after(st[s], b)
                    frame = sparse(topo, w.host, job, session, s, b, nxt, pad=pad,
                                   exp=w.exp(nxt), version=v, chunk=chunk)
                nexts.append((nxt, w.exp(nxt)))
                sends.append((w.host, frame))
            low = min(n for n, _ in nexts)
            exp = max(e for n, e in nexts if n == low)
            want[s] = (b, low, exp, v, chunk, None if b is None else exact_sum(parts))
        for i in rng.permutation(len(sends)):
            fabric.send(*sends[i])
        for w in workers:
            got = {}
            for _ in want:
                r = received_sparse(fabric, w.host)
                assert r.agg.slot not in got, f"{w.host}: slot {r.agg.slot} twice"
                got[r.agg.slot] = r
            for s, (b, low, exp, v, chunk, total) in want.items():
                r = got[s]
                where = f"{w.host} slot {s} use {k} (block {b})"
                assert (r.agg.job_id, r.agg.session, r.agg.version, r.agg.chunk) == (
                    job, session, v, chunk), where
                assert r.agg.count == len(workers), where
                assert (r.block.block, r.block.next, r.agg.exp) == (
                    num_blocks if b is None else b, low, exp), where
                if b is None:
                    assert r.payload is None and r.agg.flags == wire.FLAG_PRIME | wire.FLAG_EMPTY
                    continue
                assert r.agg.flags == 0 and r.payload is not None, where
                if result_enc == "fixed32":
                    assert r.agg.encoding == wire.ENC_FIXED32, where
                    assert np.array_equal(r.payload.astype(np.int64), total), where
                else:
                    assert r.agg.encoding == wire.ENC_CNAT8, where
                    check_rounding(total, r.payload)
                log.results += 1
        for s, (b, low, _, v, _, total) in want.items():
            versions[s] = v ^ 1
            if b is not None:
                log.order.setdefault(s, []).append(b)
                log.sums[b] = total
            pending[s] = low
            log.uses += 1
        k += 1
    return log


def check_coverage(log: CallLog, workers: list[Worker], num_blocks: int, slots: int) -> None:
    """The call aggregated exactly the blocks some worker holds, each once, in stream order,
    and each block's sum is the sum of its holders' payloads."""
    union = sorted({b for w in workers for b in w.blocks})
    for s in range(slots):
        mine = [b for b in union if b % slots == s]
        assert log.order.get(s, []) == mine, f"slot {s}: aggregated {log.order.get(s)}"
    for b in union:
        want = exact_sum([w.blocks[b] for w in workers if b in w.blocks])
        assert np.array_equal(log.sums[b], want), f"block {b}"
    assert all(b < num_blocks for b in union)


def random_workers(rng: np.random.Generator, hosts: list[str], num_blocks: int,
                   density: float, encoding: str, bound: int,
                   supports: list[set[int]] | None = None) -> list[Worker]:
    """Workers holding random blocks (or the given supports) of random payloads within
    `bound` units (FIXED32) or codes up to `bound` (CNAT8), random exponents."""
    out = []
    for i, h in enumerate(hosts):
        if supports is not None:
            held = sorted(supports[i])
        else:
            held = [b for b in range(num_blocks) if rng.random() < density]
        blocks, exps = {}, {}
        for b in held:
            if encoding == "fixed32":
                v = rng.integers(-bound, bound + 1, ELEMS, dtype=np.int64).astype(np.int32)
                v[int(rng.integers(ELEMS))] = 1 + int(rng.integers(bound))   # never all zero
            else:
                m = rng.integers(0, bound + 1, ELEMS).astype(np.uint8)
                m[int(rng.integers(ELEMS))] = 1 + int(rng.integers(bound))
                v = m | (rng.integers(0, 2, ELEMS).astype(np.uint8) << 7)
            blocks[b] = v
            exps[b] = int(rng.integers(100, 159))
        out.append(Worker(h, blocks, exps))
    return out
