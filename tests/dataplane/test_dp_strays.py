"""One stray packet from a member's port can neither change a sum nor stop a job (DESIGN
contract 6; docs/PROTOCOL.md "Sessions", "Uses", "Sparse jobs"). Each test runs a job through
numbered uses and, in the middle of it, sends strays from members' ports: a use number no
correct worker can have sent yet (EARLY), a finished use (STALE), another session
(WRONG_SESSION), copies of a worker's frame with its session, slot, version or chunk field
changed and the UDP checksum recomputed; for sparse jobs, a forged first PRIME with a wrong
bound under a use number not yet due, a PRIME into a data use or opening the next use of a
stream that is not done (BAD_BLOCK). Then the legitimate packets of that use and of the
following ones arrive: every result must be the exact integer sum of what the workers sent,
a straggler's retransmission of the previous use must be answered from the shadow copy,
and each stray counted under its reason, nothing else dropped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    BAD_BLOCK,
    BAD_SLOT,
    COMPLETE,
    CONTRIB,
    EARLY,
    RESULT,
    STALE,
    WRONG_SESSION,
    collect,
    contrib,
    random_fixed,
    received,
    sparse,
)
from tests.dataplane.sparse import Worker, run_call
from worker import codec, frames, wire

HOSTS = ("h1", "h2", "h3")      # h3 is the straggler: it retransmits the previous use
SLOTS = 2
AGG = frames.L2_LEN             # where the AGG header starts in a frame
FIELDS = {"session": (4, 2), "slot": (6, 2), "version": (8, 1), "chunk": (12, 4)}


def changed(frame: bytes, field: str, xor: int) -> bytes:
    """`frame` with `xor` applied to one AGG header field, its UDP checksum recomputed: a
    corruption the checksum cannot catch."""
    at, size = FIELDS[field]
    out = bytearray(frame)
    value = int.from_bytes(out[AGG + at:AGG + at + size], "big") ^ xor
    out[AGG + at:AGG + at + size] = value.to_bytes(size, "big")
    return frames.with_udp_checksum(bytes(out))


@dataclass
class Use:
    """One use of the job's slots as the test plays it: each worker's values and frames."""

    use: int
    parts: dict[tuple[int, str], np.ndarray]
    frames: dict[tuple[int, str], bytes]


@dataclass
class Stray:
    use: int                            # sent while this use is played
    before: bool                        # before any of it (else after h1's contributions)
    host: str                           # from this member's port
    frame: Callable[[Use], bytes]       # built from the use's legitimate frames, or forged
    reason: int                         # the drop it must be counted as


def play(fabric, topo, job: int, session: int, uses: int, strays: list[Stray], rng) -> None:
    """Uses 0..uses-1 of every slot of the job, in lockstep, with the strays sent where they
    say; checks every result and the counters (see the module's docstring)."""
    spec = topo.job(job)
    hosts, slots = spec.workers, spec.slots
    before = fabric.counters("s1")
    answered, previous = 0, None
    for u in range(uses):
        parts = {(s, h): random_fixed(rng, 1 << 26) for s in range(slots) for h in hosts}
        now = Use(u, parts, {(s, h): contrib(topo, h, job, session, s, parts[s, h], use=u)
                             for s in range(slots) for h in hosts})
        mine = [x for x in strays if x.use == u]
        for x in mine:
            if x.before:
                fabric.send(x.host, x.frame(now))
        for s in range(slots):
            fabric.send(hosts[0], now.frames[s, hosts[0]])
        for x in mine:
            if not x.before:
                fabric.send(x.host, x.frame(now))
        assert not any(fabric.quiet(hosts).values()), f"use {u}: a stray was answered"
        if previous is not None:
            # the straggler lost the previous use's results: the shadow copy answers
            for s in range(slots):
                fabric.send(hosts[-1], previous.frames[s, hosts[-1]])
                res = received(fabric, hosts[-1])
                assert (res.agg.slot, res.agg.chunk) == (s, wire.use_chunk(u - 1, s, slots))
                want = codec.aggregate([previous.parts[s, h] for h in hosts])
                assert np.array_equal(res.payload, want), f"use {u - 1} slot {s} answered"
                answered += 1
        for h in hosts[1:]:
            for s in range(slots):
                fabric.send(h, now.frames[s, h])
        got = collect(fabric, hosts, slots)
        for s in range(slots):
            want = codec.aggregate([parts[s, h] for h in hosts])
            for h in hosts:
                res = got[h][job, s, u % 2]
                assert (res.agg.chunk, res.agg.count) == (wire.use_chunk(u, s, slots),
                                                          len(hosts))
                assert np.array_equal(res.payload, want), f"use {u} slot {s} at {h}"
        assert not any(fabric.quiet(hosts).values())
        previous = now
    n = uses * slots
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): n}, switches=("s1",))
    assert delta.of("s1", "drops_in") == dict(Counter(x.reason for x in strays))
    assert delta.of("s1", "events") == {CONTRIB: len(hosts) * n, COMPLETE: n, RESULT: n,
                                        ANSWERED: answered}


def forged(topo, job: int, session: int, host: str, slot: int, rng, **numbers):
    """A contribution with values no worker sent, numbered as `numbers` say."""
    values = random_fixed(rng, 1 << 26)
    return lambda _use: contrib(topo, host, job, session, slot, values, **numbers)


def use_strays(topo, job: int, s: int, rng) -> list[Stray]:
    """Forged uses from members' ports: the next use while the current one is open, the
    one after the next (the open use's version), far ahead, the use of another slot's
    number, just below half the chunk space ahead (EARLY); replays of use 0 once the slot
    moved on (STALE)."""
    use0 = contrib(topo, "h2", job, s, 0, random_fixed(rng, 1 << 26))

    def f(host, slot, **numbers):
        return forged(topo, job, s, host, slot, rng, **numbers)
    return [
        Stray(1, False, "h2", f("h2", 0, use=2), EARLY),           # use 1 still open
        Stray(2, False, "h2", f("h2", 0, use=4), EARLY),           # version 0, as use 2
        Stray(3, True, "h2", f("h2", 1, use=4), EARLY),            # the slot's next is 3
        Stray(3, False, "h3", f("h3", 0, use=3 + (1 << 20)), EARLY),
        Stray(4, False, "h2", f("h2", 0, use=4, chunk=wire.use_chunk(4, 1, SLOTS)), EARLY),
        Stray(5, True, "h1", f("h1", 1, use=5,
                               chunk=wire.use_chunk(4, 1, SLOTS) + (1 << 31) - 1), EARLY),
        Stray(2, False, "h2", lambda _use: use0, STALE),           # use 0, over
        Stray(5, True, "h2", lambda _use: use0, STALE),
    ]


def session_strays(topo, job: int, s: int, earlier: int, rng) -> list[Stray]:
    """Packets of other sessions amid the job: a newer one numbered as a restarted worker
    numbers its first use, the session before this one at the open use, one half the space
    away at the slot's next use, and 0 (WRONG_SESSION)."""
    def f(host, slot, session, **numbers):
        return forged(topo, job, session, host, slot, rng, **numbers)
    return [
        Stray(1, False, "h2", f("h2", 0, (s + 1) & 0xFFFF, use=0), WRONG_SESSION),
        Stray(2, False, "h2", f("h2", 1, earlier, use=2), WRONG_SESSION),
        Stray(3, True, "h3", f("h3", 0, (s + 0x8000) & 0xFFFF, use=3), WRONG_SESSION),
        Stray(3, False, "h2", f("h2", 0, 0, use=3), WRONG_SESSION),
    ]


def corrupted_strays() -> list[Stray]:
    """Copies of h2's own frame (before h2's real one arrives) with one header field
    changed and the UDP checksum recomputed: session bits (WRONG_SESSION); the slot, into
    the other slot at rest (a number that is not its next: EARLY) or beyond the job's
    (BAD_SLOT); the version (the open use's number in the shadow copy's version: STALE);
    the chunk, a use ahead (EARLY), a finished use (STALE), bit 30 (EARLY) and bit 31 (half
    the space away: STALE). Use u of slot 0 is chunk 2u."""
    def c(field, xor, slot=0):
        return lambda use: changed(use.frames[slot, "h2"], field, xor)
    return [
        Stray(1, False, "h2", c("session", 0x0001), WRONG_SESSION),
        Stray(1, False, "h2", c("version", 1), STALE),
        Stray(2, False, "h2", c("chunk", 1 << 1), EARLY),          # 4 -> 6: use 3
        Stray(2, False, "h2", c("session", 0x8000), WRONG_SESSION),
        Stray(3, True, "h2", c("slot", 1), EARLY),                 # slot 1, chunk 6
        Stray(3, False, "h2", c("chunk", 1 << 31), STALE),
        Stray(3, False, "h2", c("chunk", 1 << 30), EARLY),
        Stray(4, False, "h2", c("slot", 0x100), BAD_SLOT),
        Stray(4, False, "h2", c("version", 1, slot=1), STALE),
        Stray(4, False, "h2", c("chunk", 1 << 3), STALE),          # 8 -> 0: use 0
    ]


def test_a_use_no_worker_can_send_yet_is_early_a_finished_one_stale(fabric):
    """use_strays amid seven uses of two slots: none moves a slot on or enters a sum."""
    topo = fabric.program([JobSpec(501, HOSTS, slots=SLOTS)])
    s = fabric.session()
    rng = np.random.default_rng(501)
    play(fabric, topo, 501, s, 7, use_strays(topo, 501, s, rng), rng)


def test_another_session_from_a_members_port_is_wrong_session(fabric):
    """session_strays amid five uses: each is WRONG_SESSION; the job goes on exact."""
    topo = fabric.program([JobSpec(502, HOSTS, slots=SLOTS)])
    earlier = fabric.session()
    s = fabric.session()
    rng = np.random.default_rng(502)
    play(fabric, topo, 502, s, 5, session_strays(topo, 502, s, earlier, rng), rng)


def test_a_corrupted_header_with_a_valid_checksum_changes_nothing(fabric):
    """corrupted_strays amid six uses: each dropped for its reason, the shadow copy still
    answers the straggler, every sum exact."""
    topo = fabric.program([JobSpec(503, HOSTS, slots=SLOTS)])
    s = fabric.session()
    play(fabric, topo, 503, s, 6, corrupted_strays(), np.random.default_rng(503))


def test_sparse_strays_change_nothing(fabric):
    """A sparse job (3 workers, 2 slots, 12 blocks every worker holds some of), two calls.
    Amid the first: a forged PRIME with a wrong bound under a use number not yet due
    (EARLY), a PRIME into the open data use (BAD_BLOCK), a PRIME opening the next use of a
    stream that is not done (BAD_BLOCK), a data packet ahead (EARLY), another session
    (WRONG_SESSION), a replay of a prime (STALE), a copy of a frame with its version changed
    and the checksum recomputed (STALE); at the start of the second call, a forged first
    PRIME with a wrong bound two uses ahead (EARLY). Every result is checked as it arrives
    (block, next, exponent, exact sum) and every block aggregated once."""
    nb = 12
    topo = fabric.program([JobSpec(504, HOSTS, slots=SLOTS, mode="sparse")])
    s = fabric.session()
    rng = np.random.default_rng(504)
    numbers: dict[int, int] = {}        # slot -> its use in the session, as run_call plays
    primes: dict[tuple[str, int], bytes] = {}
    expected: list[int] = []

    def before_host(order, host, slot):
        """The position of `host`'s frame for `slot` in the round's shuffled sends."""
        return next(i for i, (h, sl, _) in enumerate(order) if (h, sl) == (host, slot))

    def stray(at, host, frame, reason):
        expected.append(reason)
        return at, host, frame

    def first_call(k, order):
        if k == 0:
            primes.update({(h, slot): frame for h, slot, frame in order})
        u = {sl: numbers.get(sl, 0) for sl in range(SLOTS)}      # the round's uses
        out = []
        if k == 1:      # slot 0's data use 1 is open
            out.append(stray(before_host(order, "h2", 0), "h2",
                             sparse(topo, "h2", 504, s, 0, nb + 5, 0, prime=True,
                                    use=u[0] + 2), EARLY))
            out.append(stray(before_host(order, "h3", 0), "h3",
                             sparse(topo, "h3", 504, s, 0, nb, 0, prime=True, use=u[0]),
                             BAD_BLOCK))
        if k == 2:      # before any of the round: use 1 complete, its stream goes on
            out.append(stray(0, "h2", sparse(topo, "h2", 504, s, 1, nb + 1, 1, prime=True,
                                             use=u[1]), BAD_BLOCK))
        if k == 3:
            values = random_fixed(rng, 1 << 20)
            out.append(stray(before_host(order, "h1", 1), "h1",
                             sparse(topo, "h1", 504, s, 1, 9, wire.NO_BLOCK, values,
                                    use=u[1] + 3), EARLY))
            out.append(stray(before_host(order, "h2", 0), "h2",
                             sparse(topo, "h2", 504, (s + 1) & 0xFFFF, 0, 6, 8, values,
                                    use=u[0]), WRONG_SESSION))
        if k == 4:
            out.append(stray(len(order) // 2, "h3", primes["h3", 0], STALE))
            h, slot, frame = order[-1]
            out.append(stray(len(order) - 1, h, changed(frame, "version", 1), STALE))
        return out

    def second_call(k, order):
        if k != 0:
            return []
        return [stray(len(order) // 2, "h1",
                      sparse(topo, "h1", 504, s, 1, nb + 7, 0, prime=True,
                             use=numbers[1] + 2), EARLY)]

    # every block held by one worker or more: each slot streams through all of its 6
    supports = [set(range(0, nb, 2)) | {3}, set(range(1, nb, 2)), {0, 5, 6, 11}]
    workers = []
    for h, held in zip(HOSTS, supports, strict=True):
        blocks = {b: random_fixed(rng, 1 << 20) for b in sorted(held)}
        workers.append(Worker(h, blocks, {b: int(rng.integers(100, 150)) for b in held}))
    before = fabric.counters("s1")
    log = run_call(fabric, topo, 504, s, workers, nb, SLOTS, numbers, rng=rng,
                   strays=first_call)
    assert all(log.order[sl] == list(range(sl, nb, SLOTS)) for sl in range(SLOTS))
    uses = log.uses
    log = run_call(fabric, topo, 504, s, workers, nb, SLOTS, numbers, rng=rng,
                   strays=second_call)
    uses += log.uses
    assert not any(fabric.quiet(HOSTS).values())
    assert Counter(expected) == {EARLY: 3, BAD_BLOCK: 2, WRONG_SESSION: 1, STALE: 2}
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): uses},
                                 switches=("s1",))
    assert delta.of("s1", "drops_in") == dict(Counter(expected))
    assert delta.of("s1", "events") == {CONTRIB: len(HOSTS) * uses, COMPLETE: uses,
                                        RESULT: uses}
