"""A fault that stops one rank stops every rank, naming it (worker/ddp/faults.py): the board
over the job's store on its own, then DDP training through the switch where one rank fails
(an error it posts) or stops dead (a heartbeat that stops), and the others end at their next
retransmission timer instead of their 60 s timeout, naming that rank and its cause."""

import threading

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

from tests.worker.ddp_switch import softswitch_missing, switch_clients  # noqa: E402
from worker.allreduce import AllReduceError  # noqa: E402
from worker.ddp.faults import FaultBoard, beat_key, describe  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.ddp.train import DDPConfig, train  # noqa: E402
from worker.ddp.workload import load_mnist1d  # noqa: E402

needs_switch = pytest.mark.skipif(softswitch_missing() is not None,
                                  reason=softswitch_missing() or "")
NAMES = ["h1", "h2", "h3", "h4"]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_first_fault_posted_is_the_one_every_rank_reads():
    store = dist.HashStore()
    boards = [FaultBoard(store, r, NAMES) for r in range(4)]
    assert all(b.check() is None for b in boards)
    assert boards[2].post("the tensor is bad") == "rank 2 (h3): the tensor is bad"
    assert boards[0].post("stopped: rank 2 (h3) ...") == "rank 2 (h3): the tensor is bad"
    assert {b.fault() for b in boards} == {"rank 2 (h3): the tensor is bad"}


def test_a_peer_whose_heartbeat_stands_still_is_reported_after_dead_after():
    store, clock = dist.HashStore(), Clock()
    me = FaultBoard(store, 0, NAMES[:3], dead_after=3.0, clock=clock)
    for r in range(3):
        store.add(beat_key(r), 1)
    assert me.stopped() is None                  # first look: the baseline
    clock.t = 2.9
    store.add(beat_key(1), 1)                    # rank 1 beats, rank 2 does not
    assert me.stopped() is None
    clock.t = 3.0
    assert me.stopped().startswith("rank 2 (h3) stopped: its heartbeat")
    store.add(beat_key(2), 1)                    # it was only slow
    assert me.stopped() is None


def test_the_heartbeat_thread_beats_and_stops():
    store = dist.HashStore()
    board = FaultBoard(store, 1, NAMES, beat=0.01, dead_after=1.0)
    board.start()
    seen = store.add(beat_key(1), 0)
    deadline = threading.Event()
    while store.add(beat_key(1), 0) < seen + 3:
        assert not deadline.wait(0.01)
    board.stop()
    stopped_at = store.add(beat_key(1), 0)
    deadline.wait(0.05)
    assert store.add(beat_key(1), 0) == stopped_at


@pytest.mark.parametrize("kw, message", [
    ({"beat": 0}, "need 0 < beat < dead_after"),
    ({"beat": 3, "dead_after": 3}, "need 0 < beat < dead_after"),
])
def test_bad_timings_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        FaultBoard(dist.HashStore(), 0, NAMES, **kw)
    with pytest.raises(ValueError, match="rank 4 is not one of the job's 4 ranks"):
        FaultBoard(dist.HashStore(), 4, NAMES)


def test_describe_keeps_the_first_line_and_names_the_type():
    assert describe(ValueError("bad shape\nmore")) == "ValueError: bad shape"
    assert describe(AllReduceError("slot 1: refused")) == "slot 1: refused"
    assert describe(KeyboardInterrupt()) == "KeyboardInterrupt"


def run_with_a_failing_rank(fail, dead_after=30.0):
    """Four ranks train through the switch (client timeout 60 s); rank 2's allreduce runs
    fail(board, call) at its third call instead of contributing."""
    data = load_mnist1d()
    cfg = DDPConfig(steps=6, eval_every=6, seed=1)
    _, make_client = switch_clients(4, "cnat8", timeout=60.0)
    store = dist.HashStore()
    release = threading.Event()

    def body(rank, group):
        client = make_client(rank)
        board = FaultBoard(store, rank, NAMES, beat=0.05, dead_after=dead_after)
        client.abort = board.check
        calls = [0]

        def allreduce(v):
            calls[0] += 1
            if rank == 2 and calls[0] == 3:
                fail(board, release)
            return client.allreduce(v)

        try:
            return train(group, cfg, allreduce=allreduce, data=data, faults=board)
        finally:
            if rank != 2:
                release.set()

    return run_ranks(4, body, timeout=120.0)


@needs_switch
def test_a_rank_that_raises_ends_every_rank_naming_it():
    def fail(board, release):
        raise AllReduceError("the tensor holds what this rank cannot send")

    out = run_with_a_failing_rank(fail)
    assert isinstance(out[2], AllReduceError)
    for r in (0, 1, 3):
        assert isinstance(out[r], AllReduceError), out[r]
        text = str(out[r])
        assert "stopped: rank 2 (h3): the tensor holds what this rank cannot send" in text
        assert "got no result" not in text


@needs_switch
def test_a_rank_that_stops_dead_is_named_by_its_heartbeat():
    def fail(board, release):
        board.stop()            # as SIGKILL would: no post, no more beats
        release.wait(120)
        raise SystemExit("killed")

    out = run_with_a_failing_rank(fail, dead_after=1.0)
    for r in (0, 1, 3):
        assert isinstance(out[r], AllReduceError), out[r]
        assert "rank 2 (h3) stopped: its heartbeat in the job's store has not moved" \
            in str(out[r])


class Gone:
    def check(self, keys):
        raise RuntimeError("recvValue failed: Connection reset by peer")


def test_a_store_that_is_gone_names_rank_0_which_serves_it():
    board = FaultBoard(Gone(), 2, NAMES)
    assert board.check() == ("the job's store is unreachable (RuntimeError): rank 0 (h1), "
                             "which serves it, has stopped")


def test_rank_0_lingers_until_the_others_left_or_stopped():
    store, clock = dist.HashStore(), Clock()
    board = FaultBoard(store, 0, NAMES[:3], dead_after=3.0, clock=clock)
    for r in range(3):
        store.add(beat_key(r), 1)
    naps = []

    def sleep(s):
        naps.append(s)
        clock.t += s
        store.add(beat_key(1), 1)           # rank 1 still runs, rank 2 is dead
        if len(naps) == 50:
            FaultBoard(store, 1, NAMES[:3]).leave()

    board.leave()                           # as worker/ddp/main.py does, before lingering
    board.linger(most=10.0, sleep=sleep)
    # rank 2 counts as stopped once its beat is 3 s old; rank 1, still reading its store,
    # leaves after 5 s: rank 0's own leave is not one of the others'
    assert len(naps) == 50
    naps.clear()
    board.linger(most=0.5, sleep=sleep)     # at most `most`
    assert len(naps) <= 1 + 5
