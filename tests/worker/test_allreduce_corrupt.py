"""A result whose checksum adds up but whose payload holds a CNAT8 code above 32 (none a switch
sends: it was corrupted on the way) is counted as corrupt and ignored, as a result with a
bad checksum is, by the dense client (frame by frame and in a burst) and the sparse one; the
use is resent and answered whole, and the call ends with the right sums instead of the
decoder's ValueError."""

from collections import deque

import numpy as np
import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from harness.network import PsNetwork
from harness.workers import Trace, check_sparse, run_workers
from worker import wire
from worker.allreduce.client import AllReduceClient, JobParams
from worker.allreduce.sparse import SparseAllReduceClient
from worker.block_aggregator import BlockAggregator
from worker.frames import L2_LEN, Framer
from worker.transport import Port

ELEMS = 1456
SRC = ("02:00:0a:00:01:01", "10.0.1.1")
DST = ("02:4e:41:ff:ff:fe", "10.255.255.254")
BAD = 0x80 | 40          # sign bit and code 40


def with_bad_code(p, layers: bool = True) -> bytes:
    """The packet `p` (Scapy layers of worker/wire.py) with one CNAT8 code of its payload
    above 32; its UDP checksum recomputed, so it adds up."""
    codes = list(p[wire.Cnat8].codes)
    codes[7] = BAD
    p[wire.Cnat8].codes = codes
    if layers:
        del p[UDP].chksum
    return bytes(p)


class ReflectingPort(Port):
    """A one-worker job's switch: each contribution comes back as its result (msg_type 1 -> 2
    and its checksum), all of a burst's waiting at once. The results of the `which`-th
    contributions sent (0: the priming round) carry a code above 32 the first time (a
    retransmission is answered whole). Time is virtual: recv(timeout) with nothing waiting
    moves the clock to the timeout."""

    def __init__(self, which=()):
        super().__init__()
        self.inbox: deque[bytes] = deque()
        self.which, self.sent, self.now = set(which), 0, 0.0
        self.seen: set[bytes] = set()
        self.corrupted: list[bytes] = []

    def clock(self) -> float:
        return self.now

    def send(self, frame: bytes) -> None:
        b = bytearray(frame)
        b[L2_LEN] = wire.MSG_RESULT
        c = (~(b[40] << 8 | b[41]) & 0xFFFF) + 0x0100
        c = ~((c & 0xFFFF) + (c >> 16)) & 0xFFFF
        b[40], b[41] = c >> 8, c & 0xFF
        result = bytes(b)
        if frame not in self.seen:
            self.seen.add(frame)
            if self.sent in self.which:
                result = with_bad_code(Ether(result))
                self.corrupted.append(result)
            self.sent += 1
        self.inbox.append(result)

    def recv(self, timeout):
        if not self.inbox:
            self.now += timeout or 0.0
            return None
        return self.inbox.popleft()


def run_dense(port: ReflectingPort, accept_many: bool, monkeypatch):
    c = AllReduceClient(port, Framer(SRC, DST, elems=ELEMS),
                        JobParams(1, 1, 1, 64, wire.ENC_CNAT8, ELEMS), seed=3, clock=port.clock)
    bursts = []
    real = c._accept_many

    def spy(frames, used):
        bursts.append([f in port.corrupted for f in frames])
        return accept_many and real(frames, used)

    monkeypatch.setattr(c, "_accept_many", spy)
    return c.allreduce(X), c.stats, bursts


X = np.random.default_rng(1).standard_normal(300 * ELEMS + 17).astype(np.float32)


def cnat_of_x(out: np.ndarray) -> bool:
    """The one worker's mean is C_nat(X): every value a power of two next to X's (a code
    from a corrupted result would be far off), with X's sign."""
    lo = np.exp2(np.floor(np.log2(np.abs(X))))
    return bool(np.all(((np.abs(out) == lo) | (np.abs(out) == 2 * lo))
                       & (np.sign(out) == np.sign(X))))


@pytest.mark.parametrize("accept_many", [True, False], ids=["bursts", "frame-by-frame"])
def test_the_dense_client_counts_and_ignores_a_result_with_a_code_above_32(
        accept_many, monkeypatch, checks):
    port = ReflectingPort({0, 3, 90, 200, 301})      # the priming round's too
    out, stats, bursts = run_dense(port, accept_many, monkeypatch)
    assert len(port.corrupted) == 5
    f = Framer(SRC, DST, elems=ELEMS)
    assert all(f.parse(x) is not None for x in port.corrupted) and f.bad_checksums == 0
    assert cnat_of_x(out)
    assert stats.corrupt_ignored == 5
    assert stats.retransmissions >= 5
    # in a burst the client would otherwise take at once: the burst check refuses it
    assert sum(any(b) and len(b) > 1 for b in bursts) >= 3


def test_the_sparse_client_counts_and_ignores_a_result_with_a_code_above_32():
    n, window = 3, 4
    rng = np.random.default_rng(4)
    held = [[0, 2, 5, 9], [2, 3, 9], [5, 6, 9]]
    tensors = [[np.zeros(10 * wire.ELEMS, np.float32)] for _ in range(n)]
    for r, blocks in enumerate(held):
        for b in blocks:
            tensors[r][0][b * wire.ELEMS:(b + 1) * wire.ELEMS] = \
                rng.standard_normal(wire.ELEMS)
    corrupted = []

    class Corrupting(Port):
        """Rank 0's port: its first three results with a payload get a code above 32."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def send(self, frame):
            self.inner.send(frame)

        def recv(self, timeout):
            frame = self.inner.recv(timeout)
            if frame is not None and len(corrupted) < 3:
                p = wire.Agg(frame)
                if p.msg_type == wire.MSG_SPARSE_RESULT and p.haslayer(wire.Cnat8):
                    frame = with_bad_code(p, layers=False)
                    corrupted.append(frame)
            return frame

    agg = BlockAggregator(n, slots=window, result_encoding=wire.ENC_CNAT8)
    net = PsNetwork(n, ps=agg)
    job = JobParams(job_id=2, session=7, workers=n, window=window, encoding=wire.ENC_CNAT8)
    traces = [Trace() for _ in range(n)]

    def make(rank):
        port = Corrupting(net.ports[rank]) if rank == 0 else net.ports[rank]
        return SparseAllReduceClient(port, Framer(), job, seed=100 + rank, trace=traces[rank],
                                     rto=0.05, rto_min=0.01, timeout=20)
    outputs, clients, errors = run_workers(make, tensors)
    assert errors == [None] * n
    assert len(corrupted) == 3
    assert clients[0].stats.corrupt_ignored == 3
    assert all(c.stats.corrupt_ignored == 0 for c in clients[1:])
    assert check_sparse(traces, tensors, outputs, n) == 6
    assert all(np.array_equal(outputs[r][0], outputs[0][0]) for r in range(n))
