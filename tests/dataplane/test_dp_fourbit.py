"""The 4-bit encodings on both targets (docs/PROTOCOL.md "Payload"): NAT4 codes summed as
CNAT8's and re-compressed down, UQ4 integers summed as they are and sent down as exact SUM8
bytes, each against worker/codec's integer reference; a bad nibble, a sum a byte cannot
carry and a 4-bit packet whose job would return FIXED32 are dropped and counted, and leave
the slot as it was."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import (
    BAD_CODE,
    BAD_ENCODING,
    BAD_LENGTH,
    COMPLETE,
    CONTRIB,
    ELEMS,
    RESULT,
    SUM_OVERFLOW,
    TOO_WIDE,
    check_result_addressing,
    check_rounding,
    collect,
    contrib,
    contrib_pkt,
    received,
)
from worker import codec, wire

HOSTS = [f"h{i}" for i in range(1, 33)]


def gradients(rng, n, encoding):
    """What n workers send for one chunk of gradients of different scales: their nibbles at
    the negotiated exponent, as worker/codec encodes them (UQ4 after no rotation: the switch
    sums integers whatever they stand for)."""
    floats = [codec.chunk((rng.standard_normal(ELEMS) * s).astype(np.float32))
              for s in 10.0 ** rng.uniform(-3, 1, n)]
    exp = int(max(codec.chunk_exponents(f)[0] for f in floats))
    enc = codec.encode_nat4 if encoding == wire.ENC_NAT4 else codec.encode_uq4
    return [enc(f, [exp], rng)[0] for f in floats], exp


def test_sums_of_real_and_extreme_contributions(fabric):
    """n = 2, 5, 17 workers: one chunk of encoded gradients and one of the extremes (NAT4
    the top level, all of one sign; UQ4 all 15, the largest SUM8 sum 255 at n = 17), per
    encoding: UQ4's SUM8 result equals the integer sum, NAT4's CNAT8 result is one of its two
    power-of-two roundings."""
    ns = (2, 5, 17)
    jobs = [JobSpec(200 + n, tuple(HOSTS[:n]), slots=2, encoding="cnat8") for n in ns]
    jobs += [JobSpec(220 + n, tuple(HOSTS[:n]), slots=2, encoding="sum8") for n in ns]
    topo = fabric.program(jobs)
    session = fabric.session()
    rng = np.random.default_rng(431)
    before = fabric.counters()
    want = {}
    for n in ns:
        for job, enc in ((200 + n, wire.ENC_NAT4), (220 + n, wire.ENC_UQ4)):
            real, exp = gradients(rng, n, enc)
            top = np.full(ELEMS, 0x7 if enc == wire.ENC_NAT4 else 15, np.uint8)
            if enc == wire.ENC_NAT4:
                top |= (rng.integers(0, 2) * 0x8).astype(np.uint8)
            for slot, parts in ((0, real), (1, [top] * n)):
                for i in rng.permutation(n):
                    fabric.send(HOSTS[i], contrib(topo, HOSTS[i], job, session, slot, parts[i],
                                                  exp=exp, encoding=enc))
                want[job, slot] = (codec.aggregate(parts, enc), exp, n, enc)
    per_host = {h: sum(4 for n in ns if n > i) for i, h in enumerate(HOSTS)}
    got = {h: collect(fabric, [h], per_host[h])[h] for h in HOSTS if per_host[h]}
    for (job, slot), (total, exp, n, enc) in want.items():
        for h in HOSTS[:n]:
            res = got[h][job, slot, 0]
            assert (res.agg.exp, res.agg.count, res.agg.chunk) == (exp, n, slot)
            if enc == wire.ENC_UQ4:
                assert res.agg.encoding == wire.ENC_SUM8
                assert np.array_equal(res.payload.astype(np.int32), total), (job, slot, h)
            else:
                assert res.agg.encoding == wire.ENC_CNAT8
                check_rounding(total, res.payload)
        check_result_addressing(topo, HOSTS[n - 1], got[HOSTS[n - 1]][job, slot, 0])
        assert res.pkt[wire.Agg].payload.__class__ in (wire.Sum8, wire.Cnat8)
    assert want[237, 1][0].max() == 255                  # the largest SUM8 sum came through
    assert not any(fabric.quiet(HOSTS).values())
    jobs_done = 4 * len(ns)
    delta = fabric.wait_counters(before, {("s1", "events", COMPLETE): jobs_done})
    assert delta.of("s1", "events") == {CONTRIB: 4 * sum(ns), COMPLETE: jobs_done,
                                        RESULT: jobs_done}
    assert delta.of("s1", "drops_in") == {}


def test_every_nibble_and_the_drops(fabric):
    """Every UQ4 nibble adds its value and every NAT4 nibble but 0x8 its +-2^(m-1); a NAT4
    payload holding 0x8 is BAD_CODE, a 4-bit packet with a byte payload's length
    BAD_LENGTH, and neither touches the slot: the same worker's correct packet then counts,
    and the sum is exact."""
    topo = fabric.program([JobSpec(240, ("h1", "h2"), slots=2, encoding="cnat8"),
                           JobSpec(241, ("h1", "h2"), slots=2, encoding="sum8")])
    session = fabric.session()
    every = np.resize(np.arange(16, dtype=np.uint8), ELEMS)
    nat = np.where(every == 0x8, 0, every).astype(np.uint8)
    before = fabric.counters()
    bad = every.copy()                                    # holds 0x8
    fabric.send("h1", contrib(topo, "h1", 240, session, 0, bad, encoding=wire.ENC_NAT4))
    short = contrib_pkt(topo, "h1", 240, session, 0, nat, encoding=wire.ENC_NAT4)
    short[wire.Nat4].codes = list(nat) + list(nat)         # ELEMS bytes: CNAT8's length
    fabric.send("h1", bytes(short))
    fabric.wait_counters(before, {("s1", "drops_in", BAD_CODE): 1,
                                  ("s1", "drops_in", BAD_LENGTH): 1})
    for job, enc, parts in ((240, wire.ENC_NAT4, [nat, nat[::-1].copy()]),
                            (241, wire.ENC_UQ4, [every, every[::-1].copy()])):
        for h, p in zip(("h1", "h2"), parts, strict=True):
            fabric.send(h, contrib(topo, h, job, session, 0, p, encoding=enc))
        total = codec.aggregate(parts, enc)
        for h in ("h1", "h2"):
            res = received(fabric, h)
            assert res.agg.job_id == job
            if enc == wire.ENC_UQ4:
                assert np.array_equal(res.payload.astype(np.int32), total)
            else:
                check_rounding(total, res.payload)
    delta = fabric.counters() - before
    assert delta.of("s1", "drops_in") == {BAD_CODE: 1, BAD_LENGTH: 1}
    assert delta.of("s1", "events")[COMPLETE] == 2


def test_a_sum_a_byte_cannot_carry_is_dropped_and_a_fixed32_job_refuses_4_bits(fabric):
    """18 workers' UQ4 15s sum to 270: the completing packet is dropped (SUM_OVERFLOW), no
    result goes out, a retransmission is dropped the same way. Two SUM8 partial sums whose
    one element adds up to 400 (its lane alone, the rest 0) likewise. A SUM8 job takes UQ4
    and SUM8 only, the others neither (BAD_ENCODING): their sums live in other registers.
    A NAT4 packet to a job whose results are FIXED32 would grow by 3.5 bytes per element:
    TOO_WIDE."""
    n = 18
    topo = fabric.program([JobSpec(250, tuple(HOSTS[:n]), slots=2, encoding="sum8"),
                           JobSpec(251, ("h1", "h2"), slots=2, encoding="sum8"),
                           JobSpec(252, ("h1", "h2"), slots=2, encoding="fixed32"),
                           JobSpec(253, ("h1", "h2"), slots=2, encoding="cnat8")])
    session = fabric.session()
    before = fabric.counters()
    fifteen = np.full(ELEMS, 15, np.uint8)
    for h in HOSTS[:n]:
        fabric.send(h, contrib(topo, h, 250, session, 0, fifteen, encoding=wire.ENC_UQ4))
    fabric.send("h1", contrib(topo, "h1", 250, session, 0, fifteen, encoding=wire.ENC_UQ4))
    one = np.zeros(ELEMS, np.uint8)
    one[ELEMS - 3] = 200                                # a group's third lane
    for h in ("h1", "h2"):
        fabric.send(h, contrib(topo, h, 251, session, 0, one, encoding=wire.ENC_SUM8))
    fabric.send("h1", contrib(topo, "h1", 251, session, 1, np.full(ELEMS, -3, np.int32)))
    fabric.send("h1", contrib(topo, "h1", 251, session, 1, fifteen))       # CNAT8
    fabric.send("h1", contrib(topo, "h1", 253, session, 0, fifteen, encoding=wire.ENC_UQ4))
    fabric.send("h1", contrib(topo, "h1", 253, session, 0, one, encoding=wire.ENC_SUM8))
    fabric.send("h1", contrib(topo, "h1", 252, session, 0, fifteen, encoding=wire.ENC_NAT4))
    want = {SUM_OVERFLOW: 3, BAD_ENCODING: 4, TOO_WIDE: 1}
    delta = fabric.wait_counters(before, {("s1", "drops_in", r): k for r, k in want.items()})
    assert delta.of("s1", "drops_in") == want
    assert delta.of("s1", "events").get(RESULT, 0) == 0
    assert not any(fabric.quiet(HOSTS[:n]).values())
