"""Exact sums: whatever the children send, each of them receives the integer sum, bit for bit
equal to worker/codec's reference aggregator (codec.aggregate)."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import (
    COMPLETE,
    CONTRIB,
    ELEMS,
    OUT_OF_RANGE,
    RESULT,
    check_result_addressing,
    collect,
    contrib,
    random_cnat,
    random_fixed,
    received,
    refusal,
)
from worker import codec, wire

HOSTS = [f"h{i}" for i in range(1, 33)]


def encoded(rng, n, encoding):
    """What n workers send for one chunk of random gradients: their codes at the negotiated
    exponent (the max of their own), as worker/codec encodes them."""
    scales = 10.0 ** rng.uniform(-4, 1, n)
    floats = [codec.chunk((rng.standard_normal(ELEMS) * s).astype(np.float32)) for s in scales]
    exp = int(max(codec.chunk_exponents(f)[0] for f in floats))
    enc = codec.encode_fixed32 if encoding == codec.FIXED32 else codec.encode_cnat8
    return [enc(f, [exp], n, rng)[0] for f in floats], exp


def test_one_chunk_n_children_2_to_32(fabric):
    """Every n from 2 to 32 (the bitmap's width): one FIXED32 and one CNAT8 chunk each,
    contributions as worker/codec encodes random gradients for n workers."""
    ns = range(2, 33)
    topo = fabric.program([JobSpec(100 + n, tuple(HOSTS[:n]), slots=2) for n in ns])
    session = fabric.session()
    rng = np.random.default_rng(2032)
    before = fabric.counters()
    want = {}
    for n in ns:
        for slot, enc in ((0, codec.FIXED32), (1, codec.CNAT8)):
            parts, exp = encoded(rng, n, enc)
            # each worker piggybacks its own exponent; the switch keeps the max
            exps = [exp - int(e) for e in rng.integers(0, 4, n)]
            exps[int(rng.integers(n))] = exp
            for i in rng.permutation(n):
                fabric.send(HOSTS[i], contrib(topo, HOSTS[i], 100 + n, session, slot, parts[i],
                                              exp=exps[i]))
            want[100 + n, slot] = (codec.aggregate(parts, enc), exp, n)
    per_host = {h: sum(2 for n in ns if n > i) for i, h in enumerate(HOSTS)}
    got = {}
    for h in HOSTS:
        got[h] = collect(fabric, [h], per_host[h])[h]
    for (job, slot), (total, exp, n) in want.items():
        for h in HOSTS[:n]:
            res = got[h][job, slot, 0]
            assert res.agg.msg_type == wire.MSG_RESULT and res.agg.encoding == wire.ENC_FIXED32
            # use 0 of the slot: its chunk number is the slot's (docs/PROTOCOL.md "Uses")
            assert (res.agg.exp, res.agg.count, res.agg.chunk) == (exp, n, slot)
            assert np.array_equal(res.payload, total), f"job {job} slot {slot} at {h}"
        check_result_addressing(topo, HOSTS[n - 1], got[HOSTS[n - 1]][job, slot, 0])
    assert not any(fabric.quiet(HOSTS + ["h33"]).values())
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): 2 * len(ns)})
    assert delta.of("s1", "events") == {CONTRIB: 2 * sum(ns), COMPLETE: 2 * len(ns),
                                        RESULT: 2 * len(ns)}
    assert delta.of("s1", "drops_in") == {} and delta.of("s1", "drops_out") == {}


def test_worst_case_magnitudes_do_not_overflow(fabric):
    """n contributions of the largest magnitude the codec lets an n-worker job send:
    2^(30-h) units (FIXED32, and CNAT8's top code 31-h), h = ceil(log2 n). Their sum is at
    most 2^30 in magnitude and must arrive exact."""
    ns = (2, 3, 5, 17, 31, 32)
    topo = fabric.program([JobSpec(60 + n, tuple(HOSTS[:n]), slots=4) for n in ns])
    session = fabric.session()
    rng = np.random.default_rng(30)
    for n in ns:
        h = codec.headroom(n)
        top = 1 << (30 - h)
        # The premise, from the codec itself: the largest float of the chunk's exponent
        # encodes to just below `top` units (FIXED32), and CNAT8 stops at code 31 - h.
        E = 150
        biggest = np.full((1, ELEMS), np.nextafter(np.float32(2.0 ** (E - 126)), 0,
                                                   dtype=np.float32), np.float32)
        fixed_max = np.abs(codec.encode_fixed32(biggest, [E], n, rng)).max()
        assert top - (top >> 23) <= fixed_max <= top
        assert codec.max_code(n) == 31 - h
        assert codec.encode_cnat8(biggest, [E], n, rng).max() == 31 - h
        signs = np.where(rng.integers(0, 2, ELEMS) == 1, -1, 1).astype(np.int32)
        cases = {
            0: [np.full(ELEMS, top, np.int32)] * n,
            1: [np.full(ELEMS, -top, np.int32)] * n,
            2: [np.full(ELEMS, 31 - h, np.uint8)] * n,
            3: [np.full(ELEMS, (31 - h) | 0x80, np.uint8)] * (n - 1)
               + [(signs * top).astype(np.int32)],
        }
        for slot, parts in cases.items():
            for i, p in enumerate(parts):
                fabric.send(HOSTS[i], contrib(topo, HOSTS[i], 60 + n, session, slot, p))
        for slot, parts in cases.items():
            enc = codec.CNAT8 if parts[0].dtype == np.uint8 else codec.FIXED32
            if slot == 3:
                exact = (-(n - 1) * top + signs.astype(np.int64) * top)
            else:
                exact = codec.aggregate(parts, enc).astype(np.int64)
            assert np.abs(exact).max() <= 1 << 30
            for host in HOSTS[:n]:
                res = received(fabric, host)
                assert res.agg.slot == slot and res.agg.job_id == 60 + n
                assert np.array_equal(res.payload.astype(np.int64), exact), \
                    f"n={n} slot {slot} at {host}"
    assert not any(fabric.quiet(HOSTS).values())


def test_fixed32_and_cnat8_mixed_as_a_parent_sees_them(fabric):
    """A parent's children are workers sending CNAT8 codes and child switches sending FIXED32
    partial sums (count = the workers below them); one slot takes both."""
    topo = fabric.program([JobSpec(71, tuple(HOSTS[:5]), slots=8)])
    session = fabric.session()
    rng = np.random.default_rng(71)
    for slot in range(4):
        below = [int(k) for k in rng.integers(2, 9, 3)]   # workers under each child switch
        parts, counts = [], []
        for i in range(5):
            if i < 2:
                parts.append(random_cnat(rng, 26))
                counts.append(1)
            else:
                k = below[i - 2]
                subtree = [random_cnat(rng, 26) for _ in range(k)]
                parts.append(codec.aggregate(subtree, codec.CNAT8))
                counts.append(k)
        order = rng.permutation(5)
        for i in order:
            fabric.send(HOSTS[i], contrib(topo, HOSTS[i], 71, session, slot, parts[i],
                                          count=counts[i]))
        exact = sum(codec.switch_decode_cnat8(p).astype(np.int64) if p.dtype == np.uint8
                    else p.astype(np.int64) for p in parts)
        for host in HOSTS[:5]:
            res = received(fabric, host)
            # the count is the children's weights from the controller's table (1 per
            # host port here), never what the packets claim (docs/PROTOCOL.md "Weights")
            assert res.agg.slot == slot and res.agg.count == 5
            assert np.array_equal(res.payload.astype(np.int64), exact)
    assert not any(fabric.quiet(HOSTS[:6]).values())


def test_every_cnat8_byte_decodes_as_the_codec_says(fabric):
    """All 256 byte values through the switch's decoder: +-(1 << (m-1)) on 32 bits, m = 0 and
    m > 32 are zero (codec.switch_decode_cnat8), including the sign with m = 0. A byte whose
    value is above a 2-worker job's bound (2^29 units: m = 31 and 32, either sign) is
    refused back to its sender, one packet each."""
    topo = fabric.program([JobSpec(72, ("h1", "h2"), slots=2)])
    session = fabric.session()
    every = np.arange(256, dtype=np.uint8)
    big = np.isin(every & 0x7F, (31, 32))
    codes = np.zeros(2 * ELEMS, np.uint8)
    codes[:256 - big.sum()] = every[~big]
    for slot in range(2):
        mine = codes[slot * ELEMS:(slot + 1) * ELEMS]
        fabric.send("h1", contrib(topo, "h1", 72, session, slot, mine))
        fabric.send("h2", contrib(topo, "h2", 72, session, slot, np.zeros(ELEMS, np.uint8)))
        for host in ("h1", "h2"):
            res = received(fabric, host)
            assert np.array_equal(res.payload, codec.switch_decode_cnat8(mine))
    for byte in every[big]:
        mine = np.zeros(ELEMS, np.uint8)
        mine[7] = byte
        fabric.send("h1", contrib(topo, "h1", 72, session, 0, mine, use=1))
        got = refusal(fabric, "h1")
        assert (got.msg_type, got.count, got.slot) == (wire.MSG_REFUSED, OUT_OF_RANGE, 0), byte
    assert not any(fabric.quiet(["h1", "h2"]).values())


def test_many_slots_in_flight_interleaved(fabric):
    """48 slots open at once, contributions of 5 workers shuffled across slots, encodings and
    versions mixed per slot (a slot on version 1 is on its second use: its first one ran
    before, itself shuffled across those slots): each use completes once, with its own
    exact sum."""
    n, slots = 5, 48
    topo = fabric.program([JobSpec(73, tuple(HOSTS[:n]), slots=slots)])
    session = fabric.session()
    rng = np.random.default_rng(73)
    parts, uses = {}, {}
    for s in range(slots):
        uses[s] = int(rng.integers(0, 2))
        for u in range(uses[s] + 1):
            if (s + u) % 2:
                parts[s, u] = [random_cnat(rng, codec.max_code(n)) for _ in range(n)]
            else:
                parts[s, u] = [random_fixed(rng, 1 << (30 - codec.headroom(n)))
                               for _ in range(n)]
    before = fabric.counters()
    first = [s for s in range(slots) if uses[s] == 1]
    for rnd, active in ((0, first), (1, range(slots))):
        sends = [(s, i) for s in active for i in range(n)]
        for k in rng.permutation(len(sends)):
            s, i = sends[k]
            u = uses[s] if rnd else 0
            fabric.send(HOSTS[i], contrib(topo, HOSTS[i], 73, session, s, parts[s, u][i],
                                          use=u))
        got = collect(fabric, HOSTS[:n], len(active))
        for s in active:
            u = uses[s] if rnd else 0
            enc = codec.CNAT8 if (s + u) % 2 else codec.FIXED32
            exact = codec.aggregate(parts[s, u], enc)
            for h in HOSTS[:n]:
                res = got[h][73, s, u % 2]
                assert res.agg.chunk == wire.use_chunk(u, s, slots) and res.agg.count == n
                assert np.array_equal(res.payload, exact), f"slot {s} use {u} at {h}"
    assert not any(fabric.quiet(HOSTS[:n + 1]).values())
    total = slots + len(first)
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): total})
    assert delta.of("s1", "events") == {CONTRIB: n * total, COMPLETE: total, RESULT: total}


def test_two_jobs_at_once_are_isolated_by_region(fabric):
    """Two jobs sharing hosts h3 and h4, the same session, slots and versions: each job's
    sums stay in its own region, its results go to its own workers only."""
    a_hosts, b_hosts = HOSTS[0:4], HOSTS[2:6]
    topo = fabric.program([JobSpec(81, tuple(a_hosts), slots=16),
                           JobSpec(82, tuple(b_hosts), slots=16)])
    session = fabric.session()
    rng = np.random.default_rng(81)
    slots = range(12)
    pa = {s: [random_fixed(rng, 1 << 28) for _ in a_hosts] for s in slots}
    pb = {s: [random_cnat(rng, 29) for _ in b_hosts] for s in slots}
    # All of A's and all but the last of B's, interleaved: only A completes.
    sends = [(81, s, i) for s in slots for i in range(4)]
    sends += [(82, s, i) for s in slots for i in range(3)]
    for k in rng.permutation(len(sends)):
        job, s, i = sends[k]
        host, part = (a_hosts[i], pa[s][i]) if job == 81 else (b_hosts[i], pb[s][i])
        fabric.send(host, contrib(topo, host, job, session, s, part))
    got = collect(fabric, a_hosts, len(slots))
    assert not any(fabric.quiet(HOSTS[:7]).values()), "job 82 completed without its 4th child"
    for s in slots:
        fabric.send(b_hosts[3], contrib(topo, b_hosts[3], 82, session, s, pb[s][3]))
    got_b = collect(fabric, b_hosts, len(slots))
    for s in slots:
        for h in a_hosts:
            assert np.array_equal(got[h][81, s, 0].payload, codec.aggregate(pa[s]))
        for h in b_hosts:
            assert np.array_equal(got_b[h][82, s, 0].payload,
                                  codec.aggregate(pb[s], codec.CNAT8))
    assert not any(fabric.quiet(HOSTS[:7]).values())
