"""A burst of results is accepted at once (AllReduceClient._accept_many) exactly as frame by
frame: the same tensor, the same counters; bursts it does not take go frame by frame."""

from collections import deque

import numpy as np
import pytest

from worker import wire
from worker.allreduce import client as client_mod
from worker.allreduce.client import AllReduceClient, JobParams
from worker.allreduce.protocol import State
from worker.frames import L2_LEN, Framer
from worker.transport import Port

ELEMS = 1456
SRC = ("02:00:0a:00:01:01", "10.0.1.1")
DST = ("02:4e:41:ff:ff:fe", "10.255.255.254")


class ReflectPort(Port):
    """Each contribution comes back as the result of a one-worker job (msg_type 1 -> 2 and
    its checksum), all of a burst's waiting at once."""

    def __init__(self):
        super().__init__()
        self.inbox: deque[bytes] = deque()

    def send(self, frame: bytes) -> None:
        b = bytearray(frame)
        b[L2_LEN] = wire.MSG_RESULT
        c = (~(b[40] << 8 | b[41]) & 0xFFFF) + 0x0100
        c = ~((c & 0xFFFF) + (c >> 16)) & 0xFFFF
        b[40], b[41] = c >> 8, c & 0xFF
        self.inbox.append(bytes(b))

    def recv(self, timeout):
        return self.inbox.popleft() if self.inbox else None


class DuplicatingPort(ReflectPort):
    """Every result twice, the copy right behind it: duplicates inside one burst."""

    def send(self, frame: bytes) -> None:
        super().send(frame)
        self.inbox.append(self.inbox[-1])


def run(port, accept_many: bool, monkeypatch, calls: int = 3):
    c = AllReduceClient(port, Framer(SRC, DST, elems=ELEMS),
                        JobParams(1, 1, 1, 64, wire.ENC_CNAT8, ELEMS), seed=3)
    taken = []
    real = c._accept_many

    def counting(frames, used):
        ok = accept_many and real(frames, used)
        taken.append(ok)
        return ok

    monkeypatch.setattr(c, "_accept_many", counting)
    x = np.random.default_rng(1).standard_normal(300 * ELEMS + 17).astype(np.float32)
    outs = [c.allreduce(x * (k + 1)) for k in range(calls)]
    stats = c.stats.as_dict()
    stats.pop("rtt_seconds")  # measured time
    stats.pop("seconds")
    return outs, stats, taken


@pytest.mark.parametrize("port", [ReflectPort, DuplicatingPort])
def test_bursts_accepted_at_once_give_what_frame_by_frame_does(port, monkeypatch, checks):
    fast, fast_stats, taken = run(port(), True, monkeypatch)
    slow, slow_stats, _ = run(port(), False, monkeypatch)
    for a, b in zip(fast, slow, strict=True):
        assert np.array_equal(a, b)
    assert fast_stats == slow_stats
    if port is ReflectPort:
        assert sum(taken) >= 10  # the usual burst took the fast path
    else:
        assert not any(taken)  # a slot twice in a burst: frame by frame
        assert fast_stats["duplicates_ignored"] > 0


def test_a_corrupted_frame_sends_its_burst_frame_by_frame_and_is_counted():
    f = Framer(SRC, DST, elems=ELEMS)
    pay = np.arange(4 * ELEMS, dtype=np.uint8).reshape(4, ELEMS)
    frames = f.build_many(wire.MSG_RESULT, wire.ENC_CNAT8, 1, 1, np.arange(4),
                          np.zeros(4, int), np.zeros(4, int), 1, np.arange(4), pay)
    hdr, rows = f.parse_many(frames)
    assert list(hdr["slot"]) == [0, 1, 2, 3] and np.array_equal(rows, pay)
    bad = bytearray(frames[2])
    bad[-1] ^= 1
    assert f.parse_many(frames[:2] + [bytes(bad)] + frames[3:]) is None
    assert f.parse(bytes(bad)) is None and f.bad_checksums == 1
    assert f.parse_many(frames[:3] + [frames[3] + b"\0\0"]) is None  # padded: one by one


def test_the_compiled_burst_check_equals_the_numpy_one_for_any_flawed_result():
    """A burst with one result off in any header field (type, job, session, count, slot,
    version, chunk, a lower exponent), a slot twice, a slot not running or beyond the call's
    slots: the compiled check refuses it as the numpy check does (the burst then goes frame
    by frame, which names the error); a good burst gives both the same slots, last-chunk
    flags and exponents."""
    if client_mod._bursts is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(8)
    framer = Framer(SRC, DST, elems=ELEMS)
    c = AllReduceClient(ReflectPort(), framer, JobParams(3, 7, 4, 16, wire.ENC_CNAT8, ELEMS))
    used, c.n_chunks = 16, 40
    c.state[:] = int(State.RUNNING)
    c.uses[:] = rng.integers((1 << 28) - 4, (1 << 28) + 4, used)  # use * 16 + slot wraps
    c.cur[:] = rng.permutation(40)[:used]
    c.sent_exp[:] = rng.integers(0, 200, used)
    pay = np.zeros(ELEMS, np.uint8)

    def burst(slots=(3, 7, 9, 12), **change):
        rows = [dict(msg_type=wire.MSG_RESULT, job_id=3, session=7, slot=s,
                     version=int(c.uses[s] & 1), exp=int(c.sent_exp[s]) + 1, count=4,
                     chunk=int(wire.use_chunk(c.uses[s], s, 16))) for s in slots]
        for name, (i, value) in change.items():
            rows[i][name] = value
        frames = [framer.build(r["msg_type"], wire.ENC_CNAT8, r["job_id"], r["session"],
                               r["slot"], r["version"], r["exp"], r["count"], r["chunk"], pay)
                  for r in rows]
        return framer.parse_many(frames)[0]

    def both(hdr):
        got = c._awaited(hdr, used)
        kernels, client_mod._bursts = client_mod._bursts, None
        try:
            want = c._awaited(hdr, used)
        finally:
            client_mod._bursts = kernels
        assert (got is None) == (want is None)
        if got is not None:
            for a, b in zip(got, want, strict=True):
                assert np.array_equal(a, b)
        return got

    ok = both(burst())
    assert ok is not None and list(ok[0]) == [3, 7, 9, 12]
    assert list(ok[1]) == list(c.cur[[3, 7, 9, 12]] + 16 >= 40)
    slots = [3, 7, 9, 12]
    for trial in range(200):
        i = int(rng.integers(0, 4))
        s = slots[i]
        name = ["msg_type", "job_id", "session", "count", "version", "chunk", "exp",
                "slot"][trial % 8]
        value = {"msg_type": wire.MSG_CONTRIB, "job_id": 4, "session": 6, "count": 3,
                 "version": int(c.uses[s] + 1) & 1,
                 "chunk": int(wire.use_chunk(c.uses[s] + 1, s, 16)),
                 "exp": int(c.sent_exp[s]) - 1,
                 "slot": int(rng.choice([3, 7, 9, 12, 16, 200]))}[name]
        if value < 0 or value == s:
            continue
        assert both(burst(**{name: (i, value)})) is None, (name, value)
    c.state[9] = int(State.READY)
    assert both(burst()) is None
    c.state[9] = int(State.RUNNING)
    assert both(burst(slots=[3, 3, 9, 12])) is None
