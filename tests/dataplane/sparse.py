"""Workers of a sparse (block) job, in lockstep, for the data-plane tests: each holds some
blocks of a tensor and runs docs/PROTOCOL.md "Sparse jobs" over the fabric; every result is
checked against the integer reference as it arrives.

A worker's tensor is a dict block -> payload (ELEMS int32 values for FIXED32, uint8 codes for
CNAT8) of its non-zero blocks, and block -> exponent. All slots of a round go out together,
shuffled, so the switch sees uses of many slots interleaved. Uses are numbered per slot
across the calls of a session (docs/PROTOCOL.md "Uses": chunk use * slots + slot, version
use % 2): a caller running several calls passes the same `uses` dict to each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tests.dataplane.packets import (
    ELEMS,
    check_rounding,
    dissect_sparse,
    received_sparse,
    slots_of,
    sparse,
)
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


@dataclass
class Want:
    """One use of a slot as the workers see it: what its result must say."""

    slot: int
    block: int | None           # None: the prime
    next: int
    exp: int
    use: int                    # the slot's use in the session
    version: int
    chunk: int
    total: np.ndarray | None    # the exact sum (None for the prime)


def plan_round(topo, job: int, session: int, workers: list[Worker], num_blocks: int,
               st: list[list[int]], pending: dict[int, int | None], uses: dict[int, int],
               pad: bool):
    """The frames every worker sends in this round (one per active slot: the slot's next
    use, uses[s]) and what each slot's result must be."""
    sends, want = [], {}
    for s, b in pending.items():
        if b == NO_BLOCK:
            continue
        u = uses.get(s, 0)
        nexts, parts = [], []
        for w in workers:
            nxt = w.after(st[s], b)
            if b is None:
                frame = sparse(topo, w.host, job, session, s, num_blocks, nxt, prime=True,
                               exp=w.exp(nxt), use=u)
            elif b in w.blocks:
                parts.append(w.blocks[b])
                frame = sparse(topo, w.host, job, session, s, b, nxt, w.blocks[b],
                               exp=w.exp(nxt), use=u)
            else:
                frame = sparse(topo, w.host, job, session, s, b, nxt, pad=pad,
                               exp=w.exp(nxt), use=u)
            nexts.append((nxt, w.exp(nxt)))
            sends.append((w.host, s, frame))
        low = min(n for n, _ in nexts)
        exp = max(e for n, e in nexts if n == low)
        chunk = int(wire.use_chunk(u, s, slots_of(topo, job)))
        want[s] = Want(s, b, low, exp, u, u % 2, chunk,
                       None if b is None else exact_sum(parts))
    return sends, want


def check_result(r, w: Want, job: int, session: int, n: int, num_blocks: int,
                 result_enc: str, where: str) -> None:
    assert (r.agg.job_id, r.agg.session, r.agg.slot, r.agg.version, r.agg.chunk) == (
        job, session, w.slot, w.version, w.chunk), where
    assert r.agg.count == n, where
    assert (r.block.block, r.block.next, r.agg.exp) == (
        num_blocks if w.block is None else w.block, w.next, w.exp), where
    if w.block is None:
        assert r.payload is None and r.agg.flags == wire.FLAG_PRIME | wire.FLAG_EMPTY, where
        return
    assert r.agg.flags == 0 and r.payload is not None, where
    if result_enc == "fixed32":
        assert r.agg.encoding == wire.ENC_FIXED32, where
        assert np.array_equal(r.payload.astype(np.int64), w.total), where
    else:
        assert r.agg.encoding == wire.ENC_CNAT8, where
        check_rounding(w.total, r.payload)


def _advance(log: CallLog, want: dict[int, Want], pending, uses) -> None:
    for s, w in want.items():
        uses[s] = w.use + 1
        if w.block is not None:
            log.order.setdefault(s, []).append(w.block)
            log.sums[w.block] = w.total
        pending[s] = w.next
        log.uses += 1


Stray = tuple[int, str, bytes]      # (before which of the round's sends, host, frame)


def run_call(fabric, topo, job: int, session: int, workers: list[Worker], num_blocks: int,
             slots: int, uses: dict[int, int] | None = None, result_enc: str = "fixed32",
             rng: np.random.Generator | None = None, pad: bool | None = None,
             strays: Callable[[int, list], list[Stray]] | None = None) -> CallLog:
    """One allreduce call of the sparse protocol; every result every worker receives is
    checked (block, next, exp, count, payload). `uses` (slot -> the slot's next use in the
    session) carries over between calls and is updated. EMPTY data packets are padded when
    the results are FIXED32 (docs/PROTOCOL.md), unless `pad` says otherwise. `strays(k,
    sends)` may add frames to round k, each sent before the round's shuffled send it names
    (len(sends): after them all): they must change nothing."""
    rng = rng or np.random.default_rng(0)
    uses = uses if uses is not None else {}
    pad = (result_enc == "fixed32") if pad is None else pad
    st = streams(num_blocks, slots)
    log = CallLog()
    # per slot: the block the next use aggregates (None: the prime), or NO_BLOCK: done
    pending: dict[int, int | None] = {s: None for s in range(slots)}
    k = 0
    while any(b != NO_BLOCK for b in pending.values()):
        sends, want = plan_round(topo, job, session, workers, num_blocks, st, pending, uses,
                                 pad)
        order = [sends[i] for i in rng.permutation(len(sends))]
        extra = sorted(strays(k, order) if strays else [], key=lambda x: x[0])
        for i, (host, _, frame) in enumerate([*order, (None, None, None)]):
            while extra and extra[0][0] <= i:
                _, stray_host, stray = extra.pop(0)
                fabric.send(stray_host, stray)
            if host is not None:
                fabric.send(host, frame)
        for w in workers:
            got = {}
            for _ in want:
                r = received_sparse(fabric, w.host)
                assert r.agg.slot not in got, f"{w.host}: slot {r.agg.slot} twice"
                got[r.agg.slot] = r
            for s, wt in want.items():
                check_result(got[s], wt, job, session, len(workers), num_blocks, result_enc,
                             f"{w.host} slot {s} use {k} (block {wt.block})")
                log.results += 1
        _advance(log, want, pending, uses)
        k += 1
    return log


def run_call_lossy(fabric, topo, job: int, session: int, workers: list[Worker],
                   num_blocks: int, slots: int, uses: dict[int, int],
                   result_enc: str, rng: np.random.Generator, loss: float, dup: float,
                   replay: float) -> tuple[CallLog, dict[str, int]]:
    """run_call over a lossy, duplicating, reordering network the test plays itself (so
    both targets see the same frames): each contribution is lost with probability `loss`,
    sent twice with `dup`, the round's sends shuffled; each result a host receives is lost
    with `loss`; with `replay`, a frame from any earlier round is sent again (the previous
    use's is answered, older ones are STALE unless their version has not moved on). A worker
    without its result retransmits; every result that arrives, answers to retransmissions
    and replays of the previous use included, must equal what that use's result says."""
    pad = result_enc == "fixed32"
    st = streams(num_blocks, slots)
    log = CallLog()
    hosts = [w.host for w in workers]
    pending: dict[int, int | None] = {s: None for s in range(slots)}
    seen_results: dict[tuple[int, int], tuple] = {}      # (slot, chunk) -> fields, payload
    history: list[tuple[str, int, bytes]] = []
    named: dict[tuple[int, int], Want] = {}      # (slot, chunk) -> its use
    stats = {"sent": 0, "lost": 0, "dups": 0, "replays": 0, "results_lost": 0, "rounds": 0}
    k = 0
    while any(b != NO_BLOCK for b in pending.values()):
        sends, want = plan_round(topo, job, session, workers, num_blocks, st, pending, uses,
                                 pad)
        for w in want.values():
            named[w.slot, w.chunk] = w
        have: set[tuple[str, int]] = set()
        tries = 0
        while len(have) < len(hosts) * len(want):
            tries += 1
            assert tries < 60, f"round {k}: results still missing after 60 tries"
            batch = [x for x in sends if (x[0], x[1]) not in have]
            out = []
            for host, _, frame in batch:
                if rng.random() < loss:
                    stats["lost"] += 1
                    continue
                out.append((host, frame))
                if rng.random() < dup:
                    out.append((host, frame))
                    stats["dups"] += 1
            if history and rng.random() < replay:
                host, _, frame = history[int(rng.integers(len(history)))]
                out.append((host, frame))
                stats["replays"] += 1
            for i in rng.permutation(len(out)):
                fabric.send(*out[i])
                stats["sent"] += 1
            for host, frames in fabric.quiet(hosts).items():
                for frame in frames:
                    r = dissect_sparse(frame)
                    key = (r.agg.slot, r.agg.chunk)
                    assert key in named, f"{host}: a result of no use: {key}"
                    fields = (r.block.block, r.block.next, r.agg.exp, r.agg.count,
                              None if r.payload is None else r.payload.tobytes())
                    if key in seen_results:
                        # the stored result: the same bytes, re-compressed codes included
                        assert fields == seen_results[key], f"{host}: {key} answered otherwise"
                    else:
                        check_result(r, named[key], job, session, len(workers), num_blocks,
                                     result_enc, f"{host} slot {key[0]} chunk {key[1]}")
                        seen_results[key] = fields
                    if rng.random() < loss:
                        stats["results_lost"] += 1
                        continue
                    if r.agg.slot in want and r.agg.chunk == want[r.agg.slot].chunk:
                        have.add((host, r.agg.slot))
        stats["rounds"] += tries
        history.extend(sends)
        _advance(log, want, pending, uses)
        k += 1
    return log, stats


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
