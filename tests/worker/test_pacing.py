"""The retransmission timer, the window and the two ways of handling results in bursts
(worker/allreduce/pacing.py), and the client against a slow switch or a slow link modelled
in virtual time (harness/network.py SlowSwitchPort, SlowLinkPort below): a burst the
switch needs hundreds of milliseconds to work through causes no retransmission, a lost
contribution is resent one timeout after the use before it was answered, the window
starts small and grows, a link-bound worker handles its results in bursts without
letting its link idle, and a sparse job's client never sends more at once than BMv2's
receive ring holds."""

import numpy as np
import pytest

from harness.network import PsNetwork, SlowSwitchPort
from worker import wire
from worker.allreduce import AllReduceClient, JobParams
from worker.allreduce.pacing import (
    SPARSE_IN_FLIGHT,
    Coalescer,
    RetransmitTimer,
    UplinkPacer,
    Window,
)
from worker.allreduce.sparse import SparseAllReduceClient
from worker.baseline import ParameterServer
from worker.block_aggregator import BlockAggregator
from worker.frames import Framer
from worker.transport import QueuePort

ELEMS = wire.ELEMS
# The digits MLP: 4810 parameters, 29 chunks.
PARAMS = 4810


def test_timer_is_initial_until_a_sample_then_rfc6298_within_bounds():
    t = RetransmitTimer(initial=0.5, minimum=0.05, maximum=1.0)
    assert t.rto() == 0.5
    t.sample(0.1)                       # srtt 0.1, rttvar 0.05: 0.1 + 4 * 0.05
    assert t.rto() == pytest.approx(0.3)
    t.sample(0.1)                       # rttvar 0.75 * 0.05: 0.1 + 0.15
    assert t.rto() == pytest.approx(0.25)
    for _ in range(100):
        t.sample(0.001)
    assert t.rto() == 0.05              # the floor
    for _ in range(100):
        t.sample(5.0)
    assert t.rto() == 1.0               # the ceiling
    with pytest.raises(ValueError):
        RetransmitTimer(0.5, 0.2, 0.1)


def test_window_slow_start_then_additive_increase_and_one_cut_per_window():
    w = Window(initial=4, maximum=64)
    assert w.limit() == 4
    for _ in range(4):
        w.on_result()                   # slow start: one more per result
    assert w.limit() == 8
    w.on_timeout(seq=10, last_seq=20)
    assert w.limit() == 4 and w.cuts == 1
    w.on_timeout(seq=15, last_seq=21)   # sent before the cut: the same congestion event
    assert w.limit() == 4 and w.cuts == 1
    for _ in range(4):
        w.on_result()                   # above ssthresh: 1/size per result
    assert w.limit() == 4
    w.on_result()                       # a window's worth (4.9 results): one more
    assert w.limit() == 5
    before = w.size
    w.on_timeout(seq=21, last_seq=30)   # sent after the cut: a new event
    assert w.size == pytest.approx(before / 2) and w.cuts == 2
    for _ in range(5000):
        w.on_result()
    assert w.limit() == 64              # never beyond the job's slots
    fixed = Window(initial=64, maximum=64, adaptive=False)
    fixed.on_timeout(seq=1, last_seq=2)
    assert fixed.limit() == 64


def run_calls(port, calls, seed=0, params=PARAMS, **kw):
    client = AllReduceClient(port, Framer(), JobParams(1, 1, 1, 64, wire.ENC_CNAT8),
                             clock=port.clock, sleep=port.sleep, **kw)
    rng = np.random.default_rng(seed)
    times = []
    for _ in range(calls):
        t0 = port.now
        out = client.allreduce(rng.standard_normal(params).astype(np.float32))
        assert out.shape == (params,)
        times.append(port.now - t0)
    return client, times


# A BMv2-like switch for a job of 4 workers: 1 ms per contribution, 10 ms to re-compress a
# result. A call's 29 x 4 contributions take the switch about 0.4 s.
SLOW = dict(peers=4, service=1e-3, finish=10e-3)


@pytest.mark.parametrize("settings", [
    {},                                                         # the defaults
    dict(rto=0.05, rto_min=0.002, initial_window=64, adaptive_window=False),   # aggressive
])
def test_a_slow_switch_draining_a_burst_causes_no_retransmission(settings):
    port = SlowSwitchPort(**SLOW)
    client, times = run_calls(port, 5, **settings)
    # The last result of a burst comes ~0.4 s after it was sent, far beyond the 50 ms or
    # 2 ms timers, but the results before it keep coming: its timer restarts.
    assert client.stats.retransmissions == 0
    assert port.ps.stats.answered == 0
    bound = 29 * (4 * SLOW["service"] + SLOW["finish"])
    assert all(t >= bound for t in times)
    assert times[-1] <= 1.05 * bound              # later calls: the switch never idles


class LosingSlowSwitch(SlowSwitchPort):
    """Drops the contributions whose send numbers are listed (1-based); notes when each
    chunk was sent."""

    def __init__(self, drop, **kw):
        super().__init__(**kw)
        self.drop, self.sends, self.log = set(drop), 0, []

    def send(self, frame):
        self.sends += 1
        self.log.append((self.now, Framer().parse(frame)[0].chunk))
        if self.sends not in self.drop:
            super().send(frame)


def test_a_lost_contribution_is_resent_one_timeout_after_the_use_before_it():
    # Sends: 1 is call 1's priming, 2.. its chunks (the window starts at 8); lose chunk 4.
    port = LosingSlowSwitch(drop={6}, **SLOW)
    client, times = run_calls(port, 2)
    assert client.stats.retransmissions == 1
    # chunk 4 is slot 4's first use: chunk number 4 (wire.use_chunk)
    sent4 = [t for t, c in port.log if c == wire.use_chunk(0, 4, 64) and t < times[0]]
    # The priming round and chunks 0-3 are answered after 5 x 14 ms. The first answered
    # chunk replaced the initial 0.5 s timeout by the measured one, so chunk 4 is resent
    # that long after chunk 3's answer, not 0.5 s after it was sent.
    assert len(sent4) == 2 and 0.07 < sent4[1] - sent4[0] < 0.2
    # The resent chunk queued behind the burst: no second resend, and the call took no
    # longer than the switch needed for the burst.
    bound = 29 * (4 * SLOW["service"] + SLOW["finish"])
    assert times[0] <= 1.05 * bound
    assert times[1] <= 1.05 * bound


def test_under_random_loss_the_adaptive_window_recovers_faster_than_a_full_one():
    # 5% of the results lost on a slow switch. A full window keeps the whole burst queued,
    # so the measured round trip (hence the timeout) spans the queue; the adaptive window
    # halves on each loss, the queue and the timeout shrink, and losses are found sooner.
    def mean_call(**kw):
        times, resent, lost = [], 0, 0
        for seed in range(3):
            port = SlowSwitchPort(**SLOW, loss=0.05, seed=seed)
            client, t = run_calls(port, 10, seed=seed, **kw)
            times += t
            resent += client.stats.retransmissions
            lost += port.lost
        return sum(times) / len(times), resent, lost

    adaptive, resent_a, lost_a = mean_call()
    full, resent_f, lost_f = mean_call(initial_window=64, adaptive_window=False)
    # Every retransmission answers a lost result: none is spurious (a lost answer to a
    # retransmission costs one more).
    assert lost_a > 10 and resent_a == lost_a
    assert lost_f > 10 and resent_f == lost_f
    # About 0.60 s against 0.94 s per call here; 0.41 s without loss.
    assert adaptive < 0.75 * full


def test_the_first_burst_is_the_initial_window():
    net = PsNetwork(1, ParameterServer(1, slots=16))
    log = []

    class Logged(QueuePort):
        def send(self, frame):
            log.append(("sent", Framer().parse(frame)[0].chunk))
            net.ports[0].send(frame)

        def recv(self, timeout):
            frame = net.ports[0].recv(timeout)
            if frame is not None:
                log.append(("got", Framer().parse(frame)[0].chunk))
            return frame

    client = AllReduceClient(Logged(), Framer(), JobParams(1, 1, 1, 16, wire.ENC_FIXED32),
                             initial_window=3)
    client.allreduce(np.ones(40 * ELEMS, np.float32))
    # The priming round, its result, then three chunks before any chunk's result is read.
    assert log[0][0] == "sent" and log[1][0] == "got"
    first_got = next(i for i, (what, _) in enumerate(log) if i > 1 and what == "got")
    # (chunk numbers: the priming round is slot 0's use 0, chunk 0 its use 1, chunks 1 and 2
    # the first uses of slots 1 and 2)
    assert [c for _, c in log[2:first_got]] == [wire.use_chunk(1, 0, 16), 1, 2]
    # Every result widened the window by one (slow start) up to the 16 slots.
    assert client.window.limit() == 16
    assert client.stats.packets_sent == 40 + 1


def test_coalescer_sleeps_for_a_share_of_the_uses_in_flight_within_its_bounds():
    c = Coalescer(share=0.5, floor=16, cap=0.02)
    c.start(10.0)
    assert c.pause(10.001, 0, 40, float("inf")) == 0      # no rate measured yet
    assert c.pause(10.004, 4, 40, float("inf")) == pytest.approx(0.5 * 40 * 1e-3)
    # the rate is a moving average: 2 ms per use now weighs a quarter
    assert c.pause(10.008, 6, 8, float("inf")) == 0        # few in flight: handle at once
    assert c.gap == pytest.approx(0.75e-3 + 0.25 * 2e-3)
    assert c.pause(10.008, 6, 64, float("inf")) == 0.02    # the cap
    assert c.pause(10.008, 6, 40, 10.010) == pytest.approx(0.002)  # the next timer
    assert c.pause(10.008, 6, 40, 10.0) == 0               # a timer already due
    off = Coalescer(share=0)
    off.start(0.0)
    off.pause(0.01, 10, 64, float("inf"))
    assert off.pause(0.02, 20, 64, float("inf")) == 0
    for bad in (dict(share=1.5), dict(share=-0.1), dict(floor=0), dict(cap=-1)):
        with pytest.raises(ValueError):
            Coalescer(**bad)


class CountingSlowSwitch(SlowSwitchPort):
    """Counts the bursts a worker sends (one per pass of its loop that released chunks)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.bursts = 0

    def send_many(self, frames):
        self.bursts += 1
        for f in frames:
            self.send(f)


def test_coalescing_batches_results_without_idling_the_switch():
    # A softswitch-like rate: 0.1 ms per contribution of each of 4 workers, 0.1 ms to
    # finish; 400 chunks per call, so that the window fills.
    fast = dict(peers=4, service=0.1e-3, finish=0.1e-3)
    runs = {}
    for share in (0.0, 0.5):
        port = CountingSlowSwitch(**fast)
        client, times = run_calls(port, 4, params=400 * ELEMS, coalesce=share)
        assert client.stats.retransmissions == 0
        runs[share] = (port.bursts, times, client.coalescer.slept)
    bound = 400 * (4 * fast["service"] + fast["finish"])
    (b0, _, s0), (b1, t1, s1) = runs[0.0], runs[0.5]
    assert s0 == 0 and s1 > 0
    # without coalescing about one burst per result; with it several results per burst
    assert b1 < 0.5 * b0, (b0, b1)
    # and the switch is never starved: later calls take no longer than it needs
    assert all(t >= bound for t in t1) and t1[-1] <= 1.05 * bound, (t1, bound)


def test_uplink_pacer_sleeps_for_a_share_of_the_backlog_at_the_rate_it_drains():
    p = UplinkPacer(share=0.5, minimum=3e-4, cap=0.02)
    assert p.pause(1.0, 90_000, float("inf")) == 0          # no rate measured yet
    p.passed(1.0, 100_000)
    # 100 kB left at 1.000, 90 kB at 1.010: 1 MB/s; half of 90 kB is 45 ms, capped at 20
    assert p.pause(1.010, 90_000, float("inf")) == 0.02
    assert p.rate == pytest.approx(1e6)
    p.passed(1.030, 30_000)
    # 10 kB drained in 5 ms (2 MB/s) weighs a quarter: 1.25 MB/s; 10 kB of it is 4 ms
    assert p.pause(1.035, 20_000, float("inf")) == pytest.approx(0.5 * 20_000 / 1.25e6)
    assert p.pause(1.035, 20_000, 1.036) == pytest.approx(0.001)  # the next timer
    assert p.pause(1.035, 20_000, 1.0) == 0                      # a timer already due
    assert p.pause(1.035, 200, float("inf")) == 0                # below the minimum
    assert p.pause(1.035, 0, float("inf")) == 0                  # an empty uplink
    assert p.pause(1.035, None, float("inf")) == 0               # a port that cannot tell
    p.passed(1.040, 50_000)
    assert p.pause(1.050, 60_000, float("inf")) > 0              # sent in between: no sample
    assert p.rate == pytest.approx(1.25e6)
    off = UplinkPacer(share=0)
    off.passed(0.0, 10_000)
    assert off.pause(0.01, 5_000, float("inf")) == 0
    for bad in (dict(share=1.5), dict(share=-0.1), dict(minimum=-1), dict(cap=-1)):
        with pytest.raises(ValueError):
            UplinkPacer(**bad)


class SlowLinkPort(CountingSlowSwitch):
    """A worker behind a slow uplink, in virtual time: its frames leave one per `per_frame`
    seconds in order, the switch answers at once (the job's other workers keep pace), and
    backlog() is the bytes not yet sent, as a shaped link's queue shows it."""

    def __init__(self, per_frame: float):
        super().__init__(peers=1, service=0.0, finish=0.0, latency=1e-4)
        self.per_frame = per_frame
        self.departures: list[tuple[float, int]] = []
        self.link_free = 0.0
        self.asked = 0

    def send(self, frame: bytes) -> None:
        self.link_free = max(self.now, self.link_free) + self.per_frame
        self.departures.append((self.link_free, len(frame)))
        now, self.now = self.now, self.link_free     # the switch sees it when it has left
        super().send(frame)
        self.now = now

    def backlog(self) -> int:
        self.asked += 1
        return sum(n for t, n in self.departures if t > self.now)


def test_a_link_bound_worker_handles_results_in_bursts_and_keeps_its_link_busy():
    # 250 us per frame (a 1.5 kB frame at 50 Mbit/s); 400 chunks per call fill the window.
    runs = {}
    for share in (0.0, 0.5):
        port = SlowLinkPort(per_frame=250e-6)
        client, times = run_calls(port, 4, params=400 * ELEMS, uplink_share=share)
        assert client.stats.retransmissions == 0
        runs[share] = (port.bursts, times, client.pacer.slept)
        assert (port.asked > 0) == (share > 0)     # off, the port is never asked (a syscall)
    bound = 401 * 250e-6                       # the chunks and the priming round, back to back
    (b0, t0, s0), (b1, t1, s1) = runs[0.0], runs[0.5]
    assert s0 == 0 and s1 > 0
    # handled as they come: about one burst per result; paced: several results per burst
    assert b0 > 4 * 300 and b1 < 0.25 * b0, (b0, b1)
    # and the link never waits for the worker: no call takes longer than unpaced ones
    assert all(t >= bound for t in t1) and max(t1) <= 1.02 * max(t0), (t0, t1, bound)


def run_sparse_calls(port, calls, blocks=259, held=200, **kw):
    """A sparse job's calls on the embedding model's gradient: 259 blocks on 64 slots, 200
    of them non-zero in each call (another 200 every call)."""
    client = SparseAllReduceClient(port, Framer(), JobParams(1, 1, 1, 64, wire.ENC_CNAT8),
                                   clock=port.clock, **kw)
    rng = np.random.default_rng(3)
    times = []
    for _ in range(calls):
        x = np.zeros(blocks * ELEMS, np.float32)
        for b in rng.choice(blocks, held, replace=False):
            x[b * ELEMS:(b + 1) * ELEMS] = rng.standard_normal(ELEMS)
        t0 = port.now
        assert client.allreduce(x).shape == x.shape
        times.append(port.now - t0)
    return client, times


@pytest.mark.parametrize("switch,settings", [
    (SLOW, {}),                                                 # BMv2-like, the defaults
    (SLOW, dict(rto=0.05, rto_min=0.002, initial_window=64, adaptive_window=False)),
    (dict(peers=4, service=0.1e-3, finish=0.1e-3), {}),         # a softswitch-like rate
])
def test_a_sparse_call_never_overflows_the_switchs_receive_ring(switch, settings):
    # BMv2 in Mininet reads a port through a ring of 32 frames, which its receive thread
    # (on cores it shares) empties here in a tenth of the time the switch needs per
    # contribution. A call's 64 primes sent back to back lost the 32 beyond the ring in
    # every call, and the uses were resent.
    port = SlowSwitchPort(**switch, ring=32, take=switch["service"] / 10,
                          server=BlockAggregator(1, slots=64, result_encoding=wire.ENC_CNAT8))
    client, times = run_sparse_calls(port, 5, **settings)
    assert port.ring_lost == 0
    assert client.stats.retransmissions == 0
    assert port.ps.stats.answered == port.ps.stats.duplicates == 0
    # A call is 64 primes and 200 data uses; the primes held back a few per result never
    # let the switch idle: every call takes what the switch needs for it.
    bound = (64 + 200) * (switch["peers"] * switch["service"] + switch["finish"])
    assert all(bound <= t <= 1.05 * bound for t in times), (times, bound)


def test_a_sparse_calls_primes_count_in_its_window():
    # A fixed window of 4 and no burst bound: the call's 64 primes may only go out 4 at a
    # time, as data uses do, so a ring of 8 frames at the switch never overflows.
    port = SlowSwitchPort(**SLOW, ring=8, take=SLOW["service"] / 10,
                          server=BlockAggregator(1, slots=64, result_encoding=wire.ENC_CNAT8))
    client, _ = run_sparse_calls(port, 2, initial_window=4, adaptive_window=False, burst=64)
    assert port.ring_lost == 0 and client.stats.retransmissions == 0


class StallingSwitchPort(SlowSwitchPort):
    """SlowSwitchPort that stops for `stall` seconds once, when the `at`-th frame comes: its
    pipeline (BMv2 descheduled on the cores it shares: nothing is lost, everything is
    late), or with `receive_only` its receive thread alone (the pipeline answers what it
    already took, and the results release new uses into the stopped ring)."""

    def __init__(self, *a, at: int, stall: float, receive_only: bool = False, **kw):
        super().__init__(*a, **kw)
        self.at, self.stall, self.receive_only, self.frames = at, stall, receive_only, 0

    def send(self, frame: bytes) -> None:
        self.frames += 1
        take = self.take
        if self.frames == self.at:
            if self.receive_only:
                self.take = self.stall
            else:
                self.busy_until = max(self.busy_until, self.now) + self.stall
        super().send(frame)
        self.take = take


@pytest.mark.parametrize("pause,probes", [(0.02, 0), (0.2, 4)])
def test_a_sparse_call_keeps_fewer_uses_in_flight_than_the_ring_holds(pause, probes):
    # The job's window is 64 slots; BMv2's ring holds 32 frames. When its receive thread
    # stops while a call has its window in flight, the results of what the pipeline
    # already took release as many new uses into the stopped ring: with 64 in flight the
    # 32 beyond the ring were lost and resent (1,666 resends in 100 steps on BMv2). A
    # pause longer than the timer costs a probe per backoff, nothing lost.
    assert SPARSE_IN_FLIGHT < 32
    port = StallingSwitchPort(peers=4, service=0.1e-3, finish=0.1e-3, ring=32, take=0.01e-3,
                              at=300, stall=pause, receive_only=True,
                              server=BlockAggregator(1, slots=64, result_encoding=wire.ENC_CNAT8))
    client, _ = run_sparse_calls(port, 3)
    assert client.window.limit() <= SPARSE_IN_FLIGHT
    assert port.ring_lost == 0
    assert client.stats.retransmissions <= probes
    assert port.ps.stats.answered <= probes


@pytest.mark.parametrize("service", [80e-6, 5e-6])
def test_a_dense_call_never_overflows_the_switchs_receive_ring(service):
    # The priming result releases a call's 63 other slots at once, and the window grows to
    # 64: sent back to back, what went beyond BMv2's 32-frame ring was lost and resent
    # (every other step of the embedding job on BMv2). A burst is at most 8 frames beyond
    # the results a pass handled, which costs the call no time.
    times = {}
    for burst in (None, 10**6):
        port = SlowSwitchPort(peers=4, service=service, finish=service, ring=32,
                              take=service / 10)
        kw = {} if burst is None else {"burst": burst}
        client = AllReduceClient(port, Framer(), JobParams(1, 1, 1, 64, wire.ENC_CNAT8),
                                 clock=port.clock, **kw)
        rng = np.random.default_rng(1)
        times[burst] = []
        for _ in range(6):
            x = rng.standard_normal(259 * ELEMS - 50).astype(np.float32)
            t0 = port.now
            client.allreduce(x)
            times[burst].append(port.now - t0)
        if burst is None:
            assert port.ring_lost == 0 and client.stats.retransmissions == 0
            assert client.window.limit() == 64            # the window still opens fully
        else:                                             # what the bound prevents
            assert port.ring_lost > 0 and client.stats.retransmissions > 0
    assert max(times[None]) <= min(times[10**6]) * 1.001


def test_a_stalled_switch_costs_a_sparse_call_a_probe_per_backoff_not_a_window():
    # 1.5 s without a result: every use in flight times out at once (up to the window's
    # 64). They were not lost, so one probe per backoff finds out, and the rest wait.
    port = StallingSwitchPort(**SLOW, at=150, stall=1.5, ring=32, take=SLOW["service"] / 10,
                              server=BlockAggregator(1, slots=64, result_encoding=wire.ENC_CNAT8))
    client, _ = run_sparse_calls(port, 2, rto_min=0.05)
    assert 1 <= client.stats.retransmissions <= 4, (client.stats, port.ring_lost)
