"""The bounds a job's ports may send (docs/PROTOCOL.md "Bounds", "Refusals"): every element
of a contribution is at most what its port's child can send in a correct job (2^(30-h)
units for a worker), so no sum passes 2^30 and every CNAT8 result reads back as it was
sent. Above it, the contribution is refused to its sender (OUT_OF_RANGE) and nothing else
changes: the use completes with the honest contributions' exact sum."""

import numpy as np

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    CONTRIB,
    ELEMS,
    OUT_OF_RANGE,
    SUM_OVERFLOW,
    check_rounding,
    contrib,
    received,
    refusal,
)
from worker import codec, wire

HOSTS = ("h1", "h2", "h3", "h4")
TOP = 1 << (30 - codec.headroom(len(HOSTS)))     # a 4-worker job's largest element: 2^28


def test_sums_at_the_top_of_the_range_answer_a_lost_multicast_alike(fabric):
    """Four workers at their largest values (the top code, or FIXED32 just below it): sums
    of 2^30 units and just below, whose rounding may go up to 2^30. A worker that lost the
    multicast resends and gets the very codes the others got, sign included (a code 32
    would read back as -2^31)."""
    topo = fabric.program([JobSpec(81, HOSTS, slots=4, encoding="cnat8")])
    session = fabric.session()
    rng = np.random.default_rng(81)
    top = np.uint8(codec.max_code(len(HOSTS)))
    for use in range(4):
        sign = rng.integers(0, 2, ELEMS).astype(np.uint8) << 7
        codes = np.full(ELEMS, top, np.uint8) | sign
        below = rng.integers(0, 1 << 12, ELEMS)
        fixed = (np.where(sign, -1, 1) * (TOP - below)).astype(np.int32)
        for h in HOSTS[:3]:
            fabric.send(h, contrib(topo, h, 81, session, 0, codes, use=use))
        fabric.send("h4", contrib(topo, "h4", 81, session, 0, fixed, use=use))
        got = {h: received(fabric, h).payload for h in HOSTS}
        for h in HOSTS[1:]:
            assert np.array_equal(got[h], got["h1"]), "the multicast copies differ"
        exact = np.where(sign, -1, 1) * (4 * TOP - below)
        check_rounding(exact, got["h1"])
        assert ((got["h1"] & 0x7F) <= 31).all()
        before = fabric.counters("s1")
        fabric.send("h2", contrib(topo, "h2", 81, session, 0, codes, use=use))
        again = received(fabric, "h2")
        assert np.array_equal(again.payload, got["h1"]), "the answer differs from the multicast"
        delta = fabric.wait_counters(before, {("s1", "events", ANSWERED): 1}, switches=("s1",))
        assert delta.of("s1", "events") == {ANSWERED: 1}
    assert not any(fabric.quiet(list(HOSTS)).values())


def test_elements_above_the_ports_bound_are_refused_and_change_nothing(fabric):
    """FIXED32 contributions to a job with CNAT8 results (a FIXED32 value can be any int32)
    and CNAT8 codes from a worker scaling with one bit less headroom than the job's: each is
    sent back to its sender as a refusal naming OUT_OF_RANGE, counted as that drop, and the
    slot is as if it never came: the honest contributions then complete it exactly."""
    topo = fabric.program([JobSpec(82, HOSTS, slots=2, encoding="cnat8")])
    session = fabric.session()
    rng = np.random.default_rng(82)
    short = codec.max_code(len(HOSTS)) + 1          # headroom h - 1: one code too far
    bad = []
    for v in (TOP + 1, -(TOP + 1), 1 << 30, -(1 << 31), (1 << 31) - 1):
        vals = rng.integers(-TOP, TOP + 1, ELEMS).astype(np.int32)
        vals[rng.integers(ELEMS)] = v
        bad.append(vals)
    for sign in (0, 0x80):
        codes = rng.integers(0, short, ELEMS).astype(np.uint8)
        codes[rng.integers(ELEMS)] = short | sign
        bad.append(codes)
    for i, frame_vals in enumerate(bad):
        before = fabric.counters("s1")
        fabric.send("h3", contrib(topo, "h3", 82, session, 1, frame_vals))
        got = refusal(fabric, "h3")
        assert (got.msg_type, got.count, got.job_id, got.session, got.slot, got.chunk) == (
            wire.MSG_REFUSED, OUT_OF_RANGE, 82, session, 1, 1), f"case {i}"
        delta = fabric.wait_counters(before, {("s1", "drops_in", OUT_OF_RANGE): 1},
                                     switches=("s1",))
        assert delta.of("s1", "drops_in") == {OUT_OF_RANGE: 1}, f"case {i}"
        assert delta.of("s1", "events") == {}, f"case {i}"
    # At the bound exactly, both signs: taken, and the sum rounded from the exact one.
    before = fabric.counters("s1")
    parts = [rng.integers(-TOP, TOP + 1, ELEMS).astype(np.int32) for _ in HOSTS]
    parts[0][:2] = (TOP, -TOP)
    for h, part in zip(HOSTS, parts, strict=True):
        fabric.send(h, contrib(topo, h, 82, session, 1, part))
    want = np.sum(np.stack(parts).astype(np.int64), axis=0)
    for h in HOSTS:
        check_rounding(want, received(fabric, h).payload)
    delta = fabric.wait_counters(before, {("s1", "events", CONTRIB): 4}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {}
    assert not any(fabric.quiet(list(HOSTS)).values())


def test_a_cnat8_sum_above_2_30_is_dropped_never_sent_with_a_wrong_sign(fabric, monkeypatch):
    """Were the bounds installed too loose (a controller bug, simulated here), sums above
    2^30 units could reach the re-compression: their code would be 32, which reads back as
    -2^31. The use that completes such a sum is dropped and counted (SUM_OVERFLOW), and so
    is every answer to it; elements within range in the same job still aggregate. (A sum
    that wraps the int32 accumulator cannot be told from a small one: the bounds are what
    keep sums from it.)"""
    from controller.tree import JobTree

    monkeypatch.setattr(JobTree, "max_magnitude", lambda self, child: (1 << 31) - 1)
    topo = fabric.program([JobSpec(83, HOSTS, slots=2, encoding="cnat8")])
    session = fabric.session()
    parts = [np.zeros(ELEMS, np.uint8) for _ in HOSTS]
    parts[0][5], parts[1][5] = 31, 30               # 2^30 + 2^29 units
    before = fabric.counters("s1")
    for h, part in zip(HOSTS, parts, strict=True):
        fabric.send(h, contrib(topo, h, 83, session, 0, part))
    fabric.send("h1", contrib(topo, "h1", 83, session, 0, parts[0]))  # a resend: dropped too
    delta = fabric.wait_counters(before, {("s1", "drops_in", SUM_OVERFLOW): 2},
                                 switches=("s1",))
    assert delta.of("s1", "drops_in") == {SUM_OVERFLOW: 2}
    assert not any(fabric.quiet(list(HOSTS)).values())
    ok = np.zeros(ELEMS, np.uint8)
    ok[5] = 29
    for h in HOSTS:
        fabric.send(h, contrib(topo, h, 83, session, 1, ok))
    for h in HOSTS:
        assert received(fabric, h).payload[5] == 31        # 4 * 2^28 = 2^30: code 31
