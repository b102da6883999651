"""The block-sparse allreduce (docs/PROTOCOL.md "Sparse jobs") against the host block
aggregator: exact sums for random sparsity patterns (all-zero workers, disjoint supports,
nothing at all), loss, duplication and reordering, and the aggregator's BAD_BLOCK checks."""

import numpy as np
import pytest

from harness.network import PsNetwork
from harness.workers import Trace, check_sparse, run_workers
from worker import wire
from worker.allreduce import AllReduceError, JobParams
from worker.allreduce.sparse import SparseAllReduceClient
from worker.block_aggregator import BlockAggregator
from worker.frames import Framer
from worker.impair import ImpairedPort
from worker.transport import QueuePort

ELEMS = wire.ELEMS


def sparse_tensor(rng, size, blocks, octaves=True):
    """Normal values in the given blocks (spanning octaves, so exponents differ), zero
    elsewhere."""
    x = np.zeros(size, np.float32)
    for b in blocks:
        lo, hi = b * ELEMS, min(size, (b + 1) * ELEMS)
        scale = 2.0 ** int(rng.integers(-8, 8)) if octaves else 1.0
        x[lo:hi] = rng.standard_normal(hi - lo) * scale
    return x


def patterns(rng, n, size, kind):
    """Per worker, the blocks it holds under one sparsity pattern."""
    nb = -(-size // ELEMS)
    if kind == "random":
        return [np.flatnonzero(rng.random(nb) < rng.uniform(0.05, 0.6)) for _ in range(n)]
    if kind == "disjoint":
        owner = rng.integers(0, n + 1, nb)          # n: nobody holds the block
        return [np.flatnonzero(owner == r) for r in range(n)]
    if kind == "some-zero":
        return [np.flatnonzero(rng.random(nb) < 0.3) if r % 2 else np.array([], int)
                for r in range(n)]
    if kind == "all-zero":
        return [np.array([], int) for _ in range(n)]
    if kind == "dense":
        return [np.arange(nb) for _ in range(n)]
    raise ValueError(kind)


def run_job(n, enc, result_enc, tensors, window=8, wrap=None, agg=None, **kw):
    agg = agg or BlockAggregator(n, slots=window, result_encoding=result_enc)
    net = PsNetwork(n, ps=agg)
    job = JobParams(job_id=2, session=7, workers=n, window=window, encoding=enc)
    traces = [Trace() for _ in range(n)]

    def make(rank):
        port = net.ports[rank] if wrap is None else wrap(rank, net.ports[rank])
        return SparseAllReduceClient(port, Framer(), job, seed=100 + rank, trace=traces[rank],
                                     **kw)
    outputs, clients, errors = run_workers(make, tensors, calls=len(tensors[0]))
    assert errors == [None] * n
    checked = check_sparse(traces, tensors, outputs, n)
    for k in range(len(tensors[0])):
        for r in range(1, n):
            assert np.array_equal(outputs[r][k], outputs[0][k])
    return outputs, clients, agg, checked


@pytest.mark.parametrize("kind", ["random", "disjoint", "some-zero", "all-zero", "dense"])
@pytest.mark.parametrize("enc,result_enc", [(wire.ENC_FIXED32, wire.ENC_FIXED32),
                                            (wire.ENC_CNAT8, wire.ENC_CNAT8),
                                            (wire.ENC_CNAT8, wire.ENC_FIXED32)])
def test_exact_sums_for_sparsity_patterns(kind, enc, result_enc):
    n = 4
    rng = np.random.default_rng([n, enc, result_enc, len(kind)])
    sizes = [40 * ELEMS + 17, 3 * ELEMS, 5]       # ragged, fewer blocks than slots, tiny
    tensors = [[] for _ in range(n)]
    for size in sizes:
        for r, held in enumerate(patterns(rng, n, size, kind)):
            tensors[r].append(sparse_tensor(rng, size, held))
    outputs, clients, agg, checked = run_job(n, enc, result_enc, tensors)
    union = sum(len(set().union(*(set(np.flatnonzero(
        np.pad(t[k], (0, -t[k].size % ELEMS)).reshape(-1, ELEMS).any(axis=1)))
        for t in tensors))) for k in range(len(sizes)))
    assert checked == union
    # Without loss: one packet per use; a use per slot and call to prime it, then one per
    # block any worker holds. Every worker sends every use.
    primes = sum(min(8, -(-s // ELEMS)) for s in sizes)
    for c in clients:
        assert c.stats.packets_sent - c.stats.retransmissions == primes + union
    assert agg.stats.dropped == {}
    if enc == result_enc == wire.ENC_FIXED32:
        ref = np.mean([t[0] for t in tensors], axis=0)
        assert np.max(np.abs(outputs[0][0] - ref)) <= max(np.max(np.abs(ref)), 1) * 2.0**-20


def test_a_worker_with_nothing_sends_only_empty_packets_and_ends():
    n = 3
    rng = np.random.default_rng(5)
    tensors = [[sparse_tensor(rng, 20 * ELEMS, [3, 11])], [np.zeros(20 * ELEMS, np.float32)],
               [sparse_tensor(rng, 20 * ELEMS, [11, 19])]]
    sent = []

    class Spy(ImpairedPort):
        def send(self, frame):
            sent.append(frame)
            super().send(frame)
    outputs, clients, _, checked = run_job(n, wire.ENC_CNAT8, wire.ENC_CNAT8, tensors,
                                           wrap=lambda r, p: Spy(p) if r == 1 else p)
    assert checked == 3
    assert not outputs[1][0][:3 * ELEMS].any() and outputs[1][0][3 * ELEMS:4 * ELEMS].any()
    hdrs = [Framer().parse_sparse(f)[0] for f in sent]
    assert all(h.flags & wire.FLAG_EMPTY for h in hdrs)
    assert sorted(h.block for h in hdrs if not h.flags & wire.FLAG_PRIME) == [3, 11, 19]
    assert all(h.next == wire.NO_BLOCK for h in hdrs)


def test_a_worker_that_stops_between_calls_is_named_not_the_switch():
    # No result at all in call 2, as with a dead switch; but call 1 of the session was
    # answered, so the message points at the missing worker.
    n = 3
    rng = np.random.default_rng(9)
    tensors = [[sparse_tensor(rng, 20 * ELEMS, [2, 7])] for _ in range(n)]
    _, clients, _, _ = run_job(n, wire.ENC_CNAT8, wire.ENC_CNAT8, tensors, timeout=0.5,
                               rto=0.01, rto_max=0.05)
    _, _, errors = run_workers(lambda r: clients[r], tensors[:2])
    for e in errors:
        assert isinstance(e, AllReduceError)
        assert "call 2" in str(e)
        assert "likely missing or stopped" in str(e) and "is the switch up" not in str(e)


def test_only_the_blocks_held_travel():
    """The bytes: a worker holding 2 of 100 blocks sends 2 payloads and EMPTY packets."""
    n = 2
    rng = np.random.default_rng(6)
    tensors = [[sparse_tensor(rng, 100 * ELEMS, [4, 60])], [sparse_tensor(rng, 100 * ELEMS,
                                                                          [60])]]
    _, clients, _, _ = run_job(n, wire.ENC_CNAT8, wire.ENC_CNAT8, tensors, window=16)
    empty = 16 + 8                    # bare datagram: AGG + BLOCK, EMPTY
    full = empty + ELEMS              # + one CNAT8 payload
    # 16 slots primed, then the uses of blocks 4 (slot 4) and 60 (slot 12)
    assert clients[0].stats.bytes_sent == 16 * empty + 2 * full
    assert clients[1].stats.bytes_sent == 16 * empty + full + empty


@pytest.mark.parametrize("seed", range(4))
def test_exact_sums_under_loss_duplication_and_reordering(seed):
    n = 4
    rng = np.random.default_rng(seed)
    tensors = [[] for _ in range(n)]
    for size in (30 * ELEMS + 3, 12 * ELEMS):
        for r, held in enumerate(patterns(rng, n, size, ["random", "disjoint"][seed % 2])):
            tensors[r].append(sparse_tensor(rng, size, held))
    ports = {}

    def wrap(rank, port):
        ports[rank] = ImpairedPort(port, loss=0.15, dup=0.1, reorder=0.2,
                                   seed=seed * 10 + rank)
        return ports[rank]
    _, clients, agg, _ = run_job(n, wire.ENC_CNAT8 if seed % 2 else wire.ENC_FIXED32,
                                 wire.ENC_CNAT8 if seed < 2 else wire.ENC_FIXED32, tensors,
                                 window=4, wrap=wrap, rto=0.05, rto_min=0.01, timeout=20)
    st = {k: sum(getattr(p.stats, k) for p in ports.values())
          for k in vars(ports[0].stats)}
    # the schedule lost, duplicated and reordered what the workers sent, and lost results
    # (how many results a port reorders or duplicates depends on the threads' interleaving)
    assert st["sent_dropped"] and st["sent_duplicated"] and st["sent_reordered"], st
    assert st["recv_dropped"], st
    assert sum(c.stats.retransmissions for c in clients) > 0
    for c in clients:       # a resend counts its bytes apart
        assert (c.stats.bytes_resent > 0) == (c.stats.retransmissions > 0), c.stats
        assert c.stats.retransmissions <= c.stats.bytes_resent < c.stats.bytes_sent
    assert agg.stats.answered + agg.stats.duplicates > 0


def test_calls_of_different_sizes_agree_on_use_numbers():
    """Every worker sends in every use of a slot, so a worker that held nothing still
    numbers its next call's uses (the slots' use counts) as the others do."""
    n = 2
    rng = np.random.default_rng(8)
    sizes = [50 * ELEMS, 7 * ELEMS, 50 * ELEMS, ELEMS]
    tensors = [[sparse_tensor(rng, s, range(0, -(-s // ELEMS), 3)) for s in sizes],
               [np.zeros(s, np.float32) for s in sizes]]
    _, clients, _, checked = run_job(n, wire.ENC_FIXED32, wire.ENC_FIXED32, tensors)
    assert checked == 17 + 3 + 17 + 1
    assert list(clients[0].uses) == list(clients[1].uses) and clients[0].uses.sum() > 0


def _frame(**kw):
    f = dict(msg_type=wire.MSG_SPARSE_CONTRIB, encoding=wire.ENC_FIXED32, job_id=1, session=3,
             slot=0, version=0, exp=127, count=1, chunk=0, block=10, nxt=wire.NO_BLOCK,
             payload=None, flags=wire.FLAG_PRIME)
    f.update(kw)
    return Framer().build_sparse(**f)


def test_the_aggregator_drops_and_counts_bad_blocks():
    agg = BlockAggregator(2, slots=4)
    bad = [
        _frame(nxt=10),                                     # next not below the bound
        _frame(nxt=11),
        _frame(payload=np.ones(ELEMS)),                     # a prime with a payload
        _frame(pad=True),                                   # or with padding (as the switch)
    ]
    for f in bad:
        assert agg.handle(f, "a") == []
    assert agg.stats.dropped == {"bad_block": 4}
    # a good prime use: block 4 is the first next
    assert agg.handle(_frame(nxt=4), "a") == []
    out = agg.handle(_frame(nxt=8), "b")
    hdr, payload = Framer().parse_sparse(out[0][1])
    assert (hdr.msg_type, hdr.block, hdr.next, payload) == (wire.MSG_SPARSE_RESULT, 10, 4, None)
    data = dict(version=1, chunk=4, flags=0, payload=np.ones(ELEMS))
    for f in (_frame(**{**data, "block": 5}),               # not the use's block
              _frame(**{**data, "block": 4, "nxt": 3}),     # next not after the block
              _frame(**{**data, "block": 4, "nxt": 12})):   # next beyond the tensor
        assert agg.handle(f, "a") == []
    assert agg.stats.dropped == {"bad_block": 7}
    assert agg.handle(_frame(**{**data, "block": 4, "nxt": 8}), "a") == []
    # a PRIME in the data use
    assert agg.handle(_frame(**{**data, "block": 10, "flags": wire.FLAG_PRIME,
                                "payload": None}), "b") == []
    assert agg.stats.dropped == {"bad_block": 8}
    # and none of them changed the use: b's EMPTY completes it with a's payload alone
    out = agg.handle(_frame(**{**data, "block": 4, "nxt": 8, "payload": None}), "b")
    hdr, payload = Framer().parse_sparse(out[0][1])
    assert (hdr.block, hdr.next, hdr.count) == (4, 8, 2)
    assert np.array_equal(payload, np.ones(ELEMS))


@pytest.mark.parametrize("nxt,exp,count,why", [
    (5, 127, 2, "next block 5 cannot follow"),          # beyond this 1-block tensor
    (0, 100, 2, "exponent 100 is below"),                # below this worker's own
    (0, 127, 3, "sums 3 workers"),
])
def test_results_that_cannot_answer_this_worker_are_clear_errors(nxt, exp, count, why):
    """State of another run or another job on the switch: said, not summed."""
    port = QueuePort(lambda frame: None)
    port.put(_frame(msg_type=wire.MSG_SPARSE_RESULT, block=1, nxt=nxt, exp=exp, count=count))
    job = JobParams(job_id=1, session=3, workers=2, window=4, encoding=wire.ENC_FIXED32)
    c = SparseAllReduceClient(port, Framer(), job, timeout=1)
    with pytest.raises(AllReduceError, match=why):
        c.allreduce(np.full(ELEMS, 1.5, np.float32))
    with pytest.raises(AllReduceError, match="earlier call"):
        c.allreduce(np.ones(ELEMS, np.float32))


def test_a_late_worker_costs_a_probe_per_backoff_not_a_resend_per_slot():
    """Three workers wait 0.3 s per call for the fourth (still computing): while nothing of
    the call has completed, one prime probes and the other 63 back off with it."""
    import threading
    import time

    n, window = 4, 64
    net = PsNetwork(n, ps=BlockAggregator(n, slots=window))
    job = JobParams(1, 5, n, window, wire.ENC_CNAT8)
    primes = [0] * n

    class Spy(ImpairedPort):
        def __init__(self, inner, rank):
            super().__init__(inner)
            self.rank = rank

        def send(self, frame):
            if Framer().parse_sparse(frame)[0].flags & wire.FLAG_PRIME:
                primes[self.rank] += 1
            super().send(frame)
    rng = np.random.default_rng(0)
    x = [sparse_tensor(rng, 200 * ELEMS, range(r, 200, 3)) for r in range(n)]
    clients = [SparseAllReduceClient(Spy(net.ports[r], r), Framer(), job, seed=r,
                                     rto_min=0.02) for r in range(n)]
    calls = 4
    errors = []

    def run(r):
        try:
            for _ in range(calls):
                if r == 0:
                    time.sleep(0.3)
                clients[r].allreduce(x[r])
        except Exception as e:         # reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert primes[0] == calls * window
    for r in range(1, n):
        # per call: the 64 primes, and a probe per backoff of 0.02 s doubling within 0.3 s
        # (the first call waits within its initial 0.5 s timeout); slack for a loaded host
        assert primes[r] <= calls * window + (calls - 1) * 8, primes


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_both_clients_refuse_bad_tensors_and_options_alike(kind):
    """The checks the two clients share: each bad input is refused before a frame leaves.
    (NaN, inf and values beyond the bound: the sparse client refuses them, the dense one
    marks their chunks non-finite, tests/worker/test_allreduce_nonfinite.py.)"""
    from worker.allreduce import AllReduceClient

    cls = SparseAllReduceClient if kind == "sparse" else AllReduceClient
    sent = []
    port = QueuePort(deliver=sent.append)
    job = JobParams(1, 1, 2, 4, wire.ENC_CNAT8, max_exp=130)
    client = cls(port, Framer(), job)
    if kind == "sparse":
        with pytest.raises(AllReduceError, match="NaN or infinity"):
            client.allreduce(np.array([1.0, np.nan], np.float32))
        with pytest.raises(AllReduceError, match=r"holds -32 \(element 1\): job 1 allows "
                           r"exponents up to max_exp=130 .*nothing was sent"):
            client.allreduce(np.array([1.0, -32.0], np.float32))
    assert client.allreduce(np.zeros((0, 3), np.float32)).shape == (0, 3)
    assert sent == []
    for kw, match in [({"timeout": 0}, "timeout"), ({"rto": 2.0, "rto_max": 1.0}, "rto"),
                      ({"rto_min": 0}, "rto")]:
        with pytest.raises(ValueError, match=match):
            cls(port, Framer(), job, **kw)
    with pytest.raises(ValueError, match="framer has 128"):
        cls(port, Framer(elems=128), job)
    client.failed = "slot 3 timed out"
    with pytest.raises(AllReduceError, match=r"earlier call of this client failed \(slot 3"):
        client.allreduce(np.ones(4, np.float32))
