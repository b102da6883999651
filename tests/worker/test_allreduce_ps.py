"""The allreduce client against the in-process parameter server (the switch's slot algorithm
on a host): exact sums, loss recovery, the protocol's bookkeeping and its clear errors."""

import threading

import numpy as np
import pytest

from harness.network import PsNetwork
from harness.workers import Trace, check_exact, run_workers
from worker import codec, wire
from worker.allreduce import AllReduceClient, AllReduceError, JobParams
from worker.allreduce.protocol import TABLE, Event, ProtocolError, State, transition
from worker.baseline import ParameterServer
from worker.frames import Framer
from worker.impair import ImpairedPort
from worker.transport import QueuePort

ELEMS = wire.ELEMS


def tensors_for(n, sizes, seed=0, scale=1.0):
    """Per worker and call, normal values whose chunks span different octaves: the
    exponents differ per chunk and per worker, so a wrong max shows in check_exact."""
    rng = np.random.default_rng(seed)

    def one(size, r):
        octaves = rng.integers(-6, 6, -(-size // ELEMS)).repeat(ELEMS)[:size]
        return (rng.standard_normal(size) * scale * (1 + r) * 2.0 ** octaves).astype(np.float32)
    return [[one(size, r) for size in sizes] for r in range(n)]


def clients_on(net, job, traces=None, wrap=None, **kw):
    def make(rank):
        port = net.ports[rank] if wrap is None else wrap(rank, net.ports[rank])
        return AllReduceClient(port, Framer(), job, seed=100 + rank,
                               trace=None if traces is None else traces[rank], **kw)
    return make


@pytest.mark.parametrize("encoding", [wire.ENC_FIXED32, wire.ENC_CNAT8])
@pytest.mark.parametrize("n", [2, 5, 8])
def test_integer_encodings_sum_exactly(encoding, n):
    net = PsNetwork(n, slots=4)
    job = JobParams(job_id=3, session=11, workers=n, window=4, encoding=encoding)
    traces = [Trace() for _ in range(n)]
    # Sizes: one element, less than a window, several windows with a ragged end.
    tensors = tensors_for(n, [1, 3 * ELEMS - 5, 11 * ELEMS + 17], seed=n)
    outputs, clients, errors = run_workers(clients_on(net, job, traces), tensors, calls=3)
    assert errors == [None] * n
    checked = check_exact(traces, tensors, outputs, n)
    assert checked == 1 + 3 + 12
    for k in range(3):
        for r in range(1, n):
            assert np.array_equal(outputs[r][k], outputs[0][k])
        assert outputs[0][k].shape == tensors[0][k].shape
    # Without loss: one priming round per call, one packet per chunk.
    st = clients[0].stats
    assert st.packets_sent - st.retransmissions == 16 + 3
    assert st.chunks == 16 and st.calls == 3


def test_fixed32_mean_is_close_to_numpy():
    n = 4
    net = PsNetwork(n)
    job = JobParams(1, 1, n, 16, wire.ENC_FIXED32)
    tensors = tensors_for(n, [5000], seed=3)
    outputs, _, errors = run_workers(clients_on(net, job), tensors)
    assert errors == [None] * n
    ref = np.mean([t[0] for t in tensors], axis=0)
    # One unit is 2^-(30-h) of the chunk's range (2^-28 here); float32 rounding of the mean
    # and of numpy's reference adds about 2^-24 of max|x| each: 2^-21 bounds all three.
    assert np.max(np.abs(outputs[0][0] - ref)) <= np.max(np.abs(ref)) * 2.0**-21


def test_float32_baseline_mean():
    n = 3
    net = PsNetwork(n)
    job = JobParams(1, 1, n, 8, wire.ENC_FLOAT32)
    rng = np.random.default_rng(4)
    # Small integers: float32 sums are exact in any order, so the mean is exactly numpy's.
    tensors = [[rng.integers(-1000, 1000, 3000).astype(np.float32)] for _ in range(n)]
    outputs, clients, errors = run_workers(clients_on(net, job), tensors)
    assert errors == [None] * n
    ref = np.sum([t[0] for t in tensors], axis=0, dtype=np.float32) / np.float32(n)
    assert np.array_equal(outputs[0][0], ref)
    # No priming round for float32: one packet per chunk.
    assert clients[0].stats.packets_sent - clients[0].stats.retransmissions == -(-3000 // ELEMS)


@pytest.mark.parametrize("encoding", [wire.ENC_FIXED32, wire.ENC_CNAT8])
def test_exact_under_loss_duplication_and_reordering(encoding):
    n = 4
    net = PsNetwork(n, slots=8)
    job = JobParams(2, 9, n, 8, encoding)
    traces = [Trace() for _ in range(n)]
    impaired = {}

    def wrap(rank, port):
        impaired[rank] = ImpairedPort(port, loss=0.2, dup=0.1, reorder=0.2, seed=rank)
        return impaired[rank]

    tensors = tensors_for(n, [20 * ELEMS, 7 * ELEMS + 3], seed=5)
    outputs, clients, errors = run_workers(
        clients_on(net, job, traces, wrap, rto=0.01, rto_min=0.005, rto_max=0.1), tensors,
        calls=2)
    assert errors == [None] * n
    assert check_exact(traces, tensors, outputs, n) == 28
    st = [c.stats for c in clients]
    assert sum(s.retransmissions for s in st) > 0
    assert sum(s.duplicates_ignored for s in st) > 0
    assert sum(i.stats.sent_dropped + i.stats.recv_dropped for i in impaired.values()) > 0
    assert net.ps.stats.duplicates + net.ps.stats.answered > 0


def test_dead_worker_gives_a_clear_error_naming_the_chunks():
    n = 3
    net = PsNetwork(n)
    job = JobParams(7, 2, n, 4, wire.ENC_CNAT8)
    tensors = tensors_for(2, [6 * ELEMS])       # rank 2 never runs
    _, _, errors = run_workers(clients_on(net, job, timeout=0.5, rto=0.01, rto_max=0.05),
                               tensors, join_timeout=30)
    for e in errors:
        assert isinstance(e, AllReduceError)
        msg = str(e)
        assert "6 of 6 chunks never completed" in msg
        assert "slot 0 priming the call" in msg and "3 slots wait for the priming result" in msg
        assert "job 7" in msg and "no result" in msg


def test_a_worker_that_stops_between_calls_is_named_not_the_switch():
    # The worker stops after a call it finished, before sending anything of the next: the
    # others get no result at all in that call, as with a dead switch, but this session's
    # earlier call was answered, so the message points at the worker.
    n = 3
    net = PsNetwork(n)
    job = JobParams(7, 2, n, 4, wire.ENC_CNAT8)
    tensors = tensors_for(n, [6 * ELEMS, 6 * ELEMS])
    _, clients, errors = run_workers(clients_on(net, job, rto=0.01, rto_max=0.05,
                                                timeout=0.5), [t[:1] for t in tensors])
    assert errors == [None] * n
    _, _, errors = run_workers(lambda r: clients[r], [t[1:] for t in tensors[:2]])
    for e in errors:
        assert isinstance(e, AllReduceError)
        assert "call 2" in str(e) and "6 of 6 chunks never completed" in str(e)
        assert "likely missing or stopped" in str(e) and "is the switch up" not in str(e)


def test_missing_switch_gives_a_clear_error():
    port = QueuePort()                     # sends go nowhere
    client = AllReduceClient(port, Framer(), JobParams(1, 1, 2, 4, wire.ENC_FIXED32),
                             timeout=0.3, rto=0.01, rto_max=0.05)
    with pytest.raises(AllReduceError, match="is the switch up"):
        client.allreduce(np.ones(10, np.float32))
    assert client.stats.retransmissions > 0
    with pytest.raises(AllReduceError, match="earlier call of this client failed"):
        client.allreduce(np.ones(10, np.float32))


def test_result_for_another_worker_count_is_rejected():
    ps = ParameterServer(2)
    net = PsNetwork(2, ps=ps)
    job = JobParams(1, 1, 3, 4, wire.ENC_FIXED32)      # the workers think there are 3
    _, _, errors = run_workers(clients_on(net, job, timeout=5), tensors_for(2, [100]))
    assert all(isinstance(e, AllReduceError) for e in errors)
    assert "sums 2 workers, this job has 3" in str(errors[0])


def test_reused_session_is_detected():
    n = 2
    net = PsNetwork(n, slots=4)
    job = JobParams(1, 42, n, 4, wire.ENC_FIXED32)
    # Slot 0 ends on version 0 (priming, chunks 0 and 4), where the next run's priming
    # starts and finds chunk 4's result.
    small = tensors_for(n, [8 * ELEMS], scale=1e-3)
    _, _, errors = run_workers(clients_on(net, job), small)
    assert errors == [None] * n
    # A new run with the same session finds the old run's completed results.
    big = tensors_for(n, [4 * ELEMS], scale=1e3)
    _, _, errors = run_workers(clients_on(net, job, timeout=1, rto=0.05, rto_max=0.1), big)
    assert all(isinstance(e, AllReduceError) and "to a new session" in str(e) for e in errors)
    # With a new session the same run goes through.
    job2 = JobParams(1, 43, n, 4, wire.ENC_FIXED32)
    _, _, errors = run_workers(clients_on(net, job2), big)
    assert errors == [None] * n


def test_foreign_frames_are_ignored():
    n = 2
    net = PsNetwork(n)
    job = JobParams(1, 5, n, 4, wire.ENC_FIXED32)
    f = Framer()
    junk = [b"short", f.build(wire.MSG_RESULT, wire.ENC_FIXED32, 9, 5, 0, 0, 0, 2, 0,
                              np.zeros(ELEMS, np.int32)),                       # other job
            f.build(wire.MSG_RESULT, wire.ENC_FIXED32, 1, 6, 0, 0, 0, 2, 0,
                    np.zeros(ELEMS, np.int32))]                                 # other session
    for p in net.ports:
        for j in junk:
            p.put(j)
    tensors = tensors_for(n, [300])
    outputs, clients, errors = run_workers(clients_on(net, job), tensors)
    assert errors == [None] * n
    assert all(c.stats.foreign_ignored == 3 for c in clients)


def test_progress_is_reported_for_long_tensors():
    n = 2
    net = PsNetwork(n, slots=8)
    job = JobParams(1, 1, n, 8, wire.ENC_CNAT8)
    seen = []
    lock = threading.Lock()

    def progress(done, total):
        with lock:
            seen.append((done, total))

    tensors = tensors_for(n, [64 * ELEMS])
    # A clock that advances 0.1 s per reading: the call looks long, without being slow.
    ticks = [iter(range(10**9)) for _ in range(n)]
    _, _, errors = run_workers(
        lambda r: AllReduceClient(net.ports[r], Framer(), job, progress=progress,
                                  timeout=1e6, clock=lambda: 0.1 * next(ticks[r])), tensors)
    assert errors == [None] * n
    assert seen.count((64, 64)) == n and all(t == 64 for _, t in seen)
    assert any(done < 64 for done, _ in seen)
    # A short call reports nothing.
    seen.clear()
    job2 = JobParams(1, 2, n, 8, wire.ENC_CNAT8)
    _, _, errors = run_workers(
        lambda r: AllReduceClient(net.ports[r], Framer(), job2, progress=progress),
        tensors_for(n, [64 * ELEMS]))
    assert errors == [None] * n and seen == []


def test_bad_tensors_and_parameters_are_refused():
    port = QueuePort()
    # FLOAT32 (a host aggregator's) refuses what the integer encodings mark as non-finite
    client = AllReduceClient(port, Framer(), JobParams(1, 1, 2, 4, wire.ENC_FLOAT32))
    with pytest.raises(AllReduceError, match="NaN or infinity"):
        client.allreduce(np.array([1.0, np.inf], np.float32))
    assert client.allreduce(np.zeros((0, 3), np.float32)).shape == (0, 3)
    with pytest.raises(ValueError, match="workers"):
        JobParams(1, 1, 0, 4)
    with pytest.raises(ValueError, match="session"):
        JobParams(1, 70000, 2, 4)
    with pytest.raises(ValueError, match="framer"):
        AllReduceClient(port, Framer(elems=128), JobParams(1, 1, 2, 4))


def test_state_table_is_closed():
    # Every row leads to a state that has rows for the events that can reach it.
    for (state, _event), (_action, nxt) in TABLE.items():
        assert (nxt, Event.STALE) in TABLE, (state, nxt)
        if nxt in (State.PRIMING, State.RUNNING):
            assert (nxt, Event.TIMEOUT) in TABLE
            assert (nxt, Event.RESULT_MORE) in TABLE
        if nxt == State.AWAIT_PRIME:
            assert (nxt, Event.PRIMED) in TABLE
        if nxt == State.READY:
            assert (nxt, Event.SEND) in TABLE
    # Only a slot in flight has a timer; a waiting slot cannot take a result.
    assert (State.AWAIT_PRIME, Event.TIMEOUT) not in TABLE
    assert (State.READY, Event.RESULT_MORE) not in TABLE
    with pytest.raises(ProtocolError, match="RESULT_LAST in state PRIMING"):
        transition(State.PRIMING, Event.RESULT_LAST)


class Recorder(QueuePort):
    """A port that notes the header of every frame its client sends and receives."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.log = inner, []

    def send(self, frame):
        self.log.append(("sent", Framer().parse(frame)[0]))
        self.inner.send(frame)

    def recv(self, timeout):
        frame = self.inner.recv(timeout)
        if frame is not None and (p := Framer().parse(frame)) is not None:
            self.log.append(("got", p[0]))
        return frame


@pytest.mark.parametrize("encoding", [wire.ENC_FIXED32, wire.ENC_CNAT8])
def test_a_call_primes_once_on_slot_0(encoding):
    n, window = 3, 8
    net = PsNetwork(n, slots=window)
    job = JobParams(4, 8, n, window, encoding)
    recorders = {}

    def wrap(rank, port):
        recorders[rank] = Recorder(port)
        return recorders[rank]

    traces = [Trace() for _ in range(n)]
    # Fewer chunks than slots, exactly a window, then several windows.
    sizes = [3 * ELEMS, window * ELEMS, 3 * window * ELEMS + 1]
    tensors = tensors_for(n, sizes, seed=9)
    outputs, clients, errors = run_workers(clients_on(net, job, traces, wrap), tensors,
                                           calls=3)
    assert errors == [None] * n
    assert check_exact(traces, tensors, outputs, n) == 3 + 8 + 25
    # A use's chunk number is the slot's use number in the session times the slots, plus
    # the slot: slot 0 primes each call (its uses 0, 2 and 4: one chunk of each of the
    # first two calls follows the prime on it).
    bases = [wire.use_chunk(u, 0, window) for u in (0, 2, 4)]
    uses = clients[0].uses
    for rank, rec in recorders.items():
        sent = [h for what, h in rec.log if what == "sent"]
        primes = [h for h in sent if h.chunk in bases]
        assert [(h.slot, h.chunk) for h in primes] == [(0, b) for b in bases]
        assert sorted(h.chunk for h in sent) == sorted(
            wire.use_chunk(u, s, window) for s in range(window) for u in range(uses[s]))
        assert all(h.chunk % window == h.slot and h.version == (h.chunk // window) % 2
                   for h in sent)
        assert len(sent) == 3 + 8 + 25 + 3
        # The priming exponent is this worker's max over the call's first chunks.
        for k, h in enumerate(primes):
            own = codec.chunk_exponents(codec.chunk(tensors[rank][k], ELEMS))
            assert h.exp == own[:window].max()
        # No chunk leaves before this call's priming result is back.
        got_prime = [i for i, (what, h) in enumerate(rec.log)
                     if what == "got" and h.chunk == bases[0]]
        first_chunk = next(i for i, (what, h) in enumerate(rec.log)
                           if what == "sent" and h.chunk not in bases)
        assert got_prime and got_prime[0] < first_chunk
    # Slot 0 had one more use per call than the others: 3 calls of 1 + (1, 1, 4) uses.
    assert list(clients[0].uses) == [3 + 1 + 1 + 4, 1 + 1 + 3, 1 + 1 + 3, 0 + 1 + 3,
                                     0 + 1 + 3, 0 + 1 + 3, 0 + 1 + 3, 0 + 1 + 3]


def test_a_late_priming_result_of_the_last_call_is_ignored():
    n = 2
    net = PsNetwork(n, slots=4)
    job = JobParams(1, 3, n, 4, wire.ENC_FIXED32)
    traces = [Trace() for _ in range(n)]
    tensors = tensors_for(n, [2 * ELEMS, 2 * ELEMS], seed=4)
    cl = [clients_on(net, job, traces)(r) for r in range(n)]
    # Call 1 in threads, then a stale priming result of call 1, on the version call 2's
    # priming round will use and with an absurd exponent, waits in rank 0's inbox.
    outputs, _, errors = run_workers(lambda r: cl[r], [[t[0]] for t in tensors])
    assert errors == [None] * n
    version = int(cl[0].uses[0] & 1)
    stale = Framer().build(wire.MSG_RESULT, wire.ENC_FIXED32, 1, 3, 0, version, 250, n,
                           0, np.zeros(ELEMS, np.int32))
    net.ports[0].put(stale)
    outputs2, _, errors = run_workers(lambda r: cl[r], [[t[1]] for t in tensors])
    assert errors == [None] * n
    both = [[outputs[r][0], outputs2[r][0]] for r in range(n)]
    assert check_exact(traces, tensors, both, n) == 4
    assert cl[0].stats.duplicates_ignored >= 1
    assert codec.headroom(8) == 3        # the exactness checks above rely on n <= 8 here
