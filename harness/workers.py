"""Worker threads over an in-process network and the exactness check of their results.

Trace records what one worker sent and received per chunk; run_workers runs one allreduce
client per rank in its own thread; check_exact asserts every result is the integer sum of
what the workers sent (DESIGN contract 6)."""

from __future__ import annotations

import threading

import numpy as np

from protocol.encodings import BY_CODE
from worker import codec, hadamard, wire


class Trace:
    """What one worker sent and received per chunk (the client's `trace` hook)."""

    def __init__(self):
        self.rows: list[dict] = []

    def __call__(self, call, chunk, exp, sent, result, payload):
        self.rows.append({"call": call, "chunk": chunk, "exp": exp,
                          "sent": None if sent is None else sent.copy(),
                          "result": result, "payload": payload.copy()})

    def by_chunk(self) -> dict:
        out = {}
        for row in self.rows:
            key = (row["call"], row["chunk"])
            assert key not in out, f"chunk {key} completed twice"
            out[key] = row
        return out


def in_threads(n: int, body, join_timeout: float = 300.0) -> list:
    """body(rank) in one thread per rank; each rank's value or the exception it raised.
    A thread still running after `join_timeout` fails the caller as a hang."""
    out: list = [None] * n

    def run(rank: int) -> None:
        try:
            out[rank] = body(rank)
        except BaseException as e:     # reported to the test thread
            out[rank] = e

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_timeout)
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    if hung:
        raise AssertionError(f"workers {hung} still running after {join_timeout} s: a hang")
    return out


def run_workers(make_client, tensors, calls: int = 1, join_timeout: float = 120.0):
    """Runs make_client(rank) in one thread per rank, each doing `calls` allreduce calls of
    tensors[rank][call]; returns (outputs[rank][call], clients, errors[rank])."""
    n = len(tensors)
    outputs = [[None] * calls for _ in range(n)]
    clients = [make_client(rank) for rank in range(n)]

    def run(rank: int) -> None:
        for k in range(calls):
            outputs[rank][k] = clients[rank].allreduce(tensors[rank][k])

    done = in_threads(n, run, join_timeout)
    errors = [e if isinstance(e, BaseException) else None for e in done]
    return outputs, clients, errors


def check_exact(traces, tensors, outputs, workers: int, elems: int = wire.ELEMS,
                job=None) -> int:
    """Asserts, for every chunk of every call, that the result is exactly the integer sum of
    what the workers sent (or, re-compressed to CNAT8, one of its two roundings), that the
    exponent is the max of the workers' own (for a slot's first chunk in the call, over all
    the first chunks: the priming round's), and that each output is its decoded mean.
    `job` (the workers' JobParams) is needed for 4-bit contributions: the encoding of what
    was sent, and for a rotated encoding the rotation of each call (the output is the
    rotated-back mean).
    Returns the number of chunks checked."""
    rows = [t.by_chunk() for t in traces]
    keys = set(rows[0])
    sent_as = None if job is None else job.encoding
    rotates = sent_as is not None and BY_CODE[sent_as].rotated

    def prepared(r, k):
        if not rotates:
            return tensors[r][k]
        return hadamard.rotate(tensors[r][k], hadamard.seed_of(job.job_id, k + 1))
    exps = {(r, k): codec.chunk_exponents(codec.chunk(prepared(r, k), elems))
            for r in range(workers) for k in range(len(tensors[r]))}
    means: dict[int, dict[int, np.ndarray]] = {}
    assert all(set(r) == keys for r in rows), "workers completed different chunks"
    # A slot's first chunk in a call (chunk == slot) is scaled by the call's priming round:
    # the max over the workers and over all first chunks; later ones by their own max.
    first = {}
    for call, chunk in keys:
        if rows[0][call, chunk]["result"].slot == chunk:
            first.setdefault(call, []).append(chunk)
    for call, chunk in sorted(keys):
        mine = [r[call, chunk] for r in rows]
        res = mine[0]["result"]
        enc = res.encoding
        assert all(m["result"] == res for m in mine), f"chunk {chunk}: headers differ"
        assert all(np.array_equal(m["payload"], mine[0]["payload"]) for m in mine)
        which = first[call] if res.slot == chunk else [chunk]
        want = max(int(exps[r, call - 1][c]) for r in range(workers) for c in which)
        assert all(m["exp"] == want for m in mine), f"chunk {chunk}: exponent not the max"
        sent_enc = sent_as if sent_as is not None else (
            wire.ENC_CNAT8 if mine[0]["sent"].dtype == np.uint8 else wire.ENC_FIXED32)
        sent = [np.asarray(m["sent"]) for m in mine]
        if sent_enc in wire.FOUR_BIT:
            sent = [codec.unpack4(s) for s in sent]
        exact = codec.aggregate(sent, sent_enc)
        got = np.asarray(mine[0]["payload"])
        assert_sum(got, exact, enc, f"chunk {chunk}")
        if sent_enc in wire.FOUR_BIT:
            mean = codec.decode_mean4(sent_enc, enc, got[None], mine[0]["exp"], workers)[0]
        else:
            decode = codec.decode_fixed32 if enc == wire.ENC_FIXED32 else codec.decode_cnat8
            mean = decode(got[None], mine[0]["exp"], workers, mean=True)[0]
        if rotates:
            means.setdefault(call, {})[chunk] = mean
            continue
        for r in range(workers):
            out = outputs[r][call - 1].reshape(-1)
            lo = chunk * elems
            assert np.array_equal(out[lo:lo + elems], mean[:out[lo:lo + elems].size]), \
                f"rank {r} chunk {chunk}: output is not the decoded mean"
    for call, by_chunk in means.items():   # rotated: the decoded means, rotated back
        size = tensors[0][call - 1].size
        rotated = np.concatenate([by_chunk[c] for c in sorted(by_chunk)])
        assert sorted(by_chunk) == list(range(len(by_chunk))), f"call {call}: chunks missing"
        want = hadamard.unrotate(rotated[:hadamard.padded_size(size)], size,
                                 hadamard.seed_of(job.job_id, call))
        for r in range(workers):
            assert np.array_equal(outputs[r][call - 1].reshape(-1), want), \
                f"rank {r} call {call}: output is not the rotated-back decoded mean"
    return len(keys)


def assert_sum(got, exact, enc: int, what: str) -> None:
    """A result payload is the exact int32 sum (FIXED32) or one of its two roundings to a
    power of two (the switch's CNAT8 re-compression)."""
    if enc == wire.ENC_FIXED32:
        assert np.array_equal(got.astype(np.int32), exact), f"{what}: sum differs"
        return
    if enc == wire.ENC_SUM8:
        assert np.array_equal(got.astype(np.int32), exact), f"{what}: SUM8 sum differs"
        return
    assert enc == wire.ENC_CNAT8
    mag = np.abs(exact.astype(np.int64))
    p = np.where(mag > 0, np.frexp(mag.astype(np.float64))[1] - 1, 0)
    m = got.astype(np.int64) & 0x7F
    sign = got >> 7
    assert np.all((m == 0) == (mag == 0)), f"{what}: zero codes differ"
    nz = mag > 0
    assert np.all(sign[nz] == (exact[nz] < 0)), f"{what}: sign differs"
    power = mag == (1 << p)
    assert np.all((m[nz] - 1 == p[nz]) | ((m[nz] - 1 == p[nz] + 1) & ~power[nz])), \
        f"{what}: a CNAT8 code is not a rounding of the exact sum"


def round_bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the switch's CNAT8 re-compression can take any sum between lo and hi: a sum is
    rounded to one of the two powers of two around it (with its sign), and both roundings are
    non-decreasing in the sum, so from the lower one of lo to the upper one of hi."""
    def pow2(v, up):
        mag = np.abs(v).astype(np.float64)
        e = np.frexp(np.where(mag > 0, mag, 1.0))[1] - 1          # floor(log2 |v|)
        exact = np.ldexp(1.0, e) == mag
        grow = (v > 0) == up                                      # away from zero
        e = np.where(grow & ~exact, e + 1, e)
        return np.where(v == 0, 0, np.sign(v) * (np.int64(1) << e.astype(np.int64)))
    return pow2(lo, up=False), pow2(hi, up=True)


def assert_tree_sum(got, enc: int, sent: dict, tree, what: str) -> None:
    """A result of a job whose switches below the root re-compress their partial sums
    (partials: cnat8), against the integer reference of its tree: every partial sum is one of
    the two power-of-two roundings of its children's sum, so the result lies between the
    sums that round every partial sum down and every one up (and the root's CNAT8 rounding
    of those, for CNAT8 results), with the workers' own sign where they agree, and never
    beyond 2^30. `sent` maps each worker host to its contribution as integers."""
    def bounds(name):
        lo = hi = 0
        for c in tree.nodes[name].children:
            a, b = bounds(c.node) if c.node in tree.nodes else (sent[c.node], sent[c.node])
            lo, hi = lo + a, hi + b
        if tree.nodes[name].parent is not None and tree.job.partials == "cnat8":
            lo, hi = round_bounds(lo, hi)
        return lo, hi

    lo, hi = bounds(tree.root)
    if enc == wire.ENC_CNAT8:
        lo, hi = round_bounds(lo, hi)
        m = got.astype(np.int64) & 0x7F
        value = np.where(m == 0, 0, np.int64(1) << np.maximum(m - 1, 0))
        value = np.where(got >> 7 == 1, -value, value)
    else:
        value = got.astype(np.int64)
    bad = (value < lo) | (value > hi)
    assert not bad.any(), (f"{what}: {int(bad.sum())} elements outside the tree's roundings, "
                           f"e.g. {value[bad][:4].tolist()} not within "
                           f"{list(zip(lo[bad][:4].tolist(), hi[bad][:4].tolist(), strict=True))}")
    assert np.abs(value).max(initial=0) <= 1 << 30, f"{what}: a sum beyond 2^30"


def check_sparse(traces, tensors, outputs, workers: int, elems: int = wire.ELEMS) -> int:
    """The sparse protocol's exactness (docs/PROTOCOL.md "Sparse jobs"): per call, exactly
    the blocks some worker holds non-zero are aggregated, each once; every worker saw the same
    result; its payload is the exact sum of what the workers holding the block sent (EMPTY
    ones add nothing), its exponent the max of theirs; each output is the decoded mean there
    and zero elsewhere. Returns the number of blocks checked."""
    rows = [t.by_chunk() for t in traces]
    checked = 0
    for call in range(1, len(tensors[0]) + 1):
        blocks = [codec.chunk(tensors[r][call - 1], elems) for r in range(workers)]
        held = [np.flatnonzero(b.any(axis=1)) for b in blocks]
        union = sorted(set().union(*(set(h.tolist()) for h in held)))
        for r in range(workers):
            got = sorted(b for c, b in rows[r] if c == call)
            assert got == union, f"rank {r} call {call}: blocks {got}, held {union}"
        for b in union:
            mine = [rows[r][call, b] for r in range(workers)]
            res = mine[0]["result"]
            assert all(m["result"] == res for m in mine), f"block {b}: headers differ"
            holders = [r for r in range(workers) if b in held[r]]
            assert all((mine[r]["sent"] is not None) == (r in holders)
                       for r in range(workers)), f"block {b}: a worker sent what it lacks"
            want = max(int(codec.chunk_exponents(blocks[r][b:b + 1])[0]) for r in holders)
            assert all(m["exp"] == want for m in mine), f"block {b}: exponent not the max"
            sent = [np.asarray(mine[r]["sent"]) for r in holders]
            sent_enc = wire.ENC_CNAT8 if sent[0].dtype == np.uint8 else wire.ENC_FIXED32
            got = np.asarray(mine[0]["payload"])
            assert_sum(got, codec.aggregate(sent, sent_enc), res.encoding, f"block {b}")
            decode = (codec.decode_fixed32 if res.encoding == wire.ENC_FIXED32
                      else codec.decode_cnat8)
            mean = decode(got[None], want, workers, mean=True)[0]
            for r in range(workers):
                out = outputs[r][call - 1].reshape(-1)[b * elems:(b + 1) * elems]
                assert np.array_equal(out, mean[:out.size]), f"rank {r} block {b}: not the mean"
            checked += 1
        for r in range(workers):
            out = codec.chunk(outputs[r][call - 1], elems)
            rest = np.setdiff1d(np.arange(out.shape[0]), union)
            assert not out[rest].any(), f"rank {r} call {call}: non-zero outside the blocks"
    return checked
