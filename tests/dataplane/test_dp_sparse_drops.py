"""What a sparse job refuses (docs/PROTOCOL.md "Sparse jobs", "Switch checks"): a block or
next that does not fit the use, a prime with a payload or the wrong bound (sent back to its
sender with the bound the use holds: a refusal), a PRIME in a data
use or opening the next use of a stream not done, a data use with no complete use before it
(BAD_BLOCK); a use no correct sender can have sent yet (EARLY); dense packets to a sparse job
(BAD_TYPE); an EMPTY packet too short to carry a FIXED32 result (BAD_LENGTH). Each is
dropped and counted, and the slot is as if it never came: the use completes with the exact
sum and the sender's real packet is not a duplicate."""

import numpy as np
from scapy.layers.inet import IP, UDP

from controller.topology import JobSpec
from tests.dataplane.packets import (
    ANSWERED,
    BAD_BLOCK,
    BAD_LENGTH,
    BAD_RESULT_PORT,
    BAD_TYPE,
    COMPLETE,
    CONTRIB,
    EARLY,
    ELEMS,
    RESULT,
    contrib,
    received_sparse,
    refusal,
    sparse,
    sparse_pkt,
)
from worker import wire

HOSTS = ["h1", "h2", "h3", "h4"]
NO_BLOCK = wire.NO_BLOCK
B = 12          # the tensor's blocks


def expect_drops(fabric, cases, hosts):
    """Sends each (reason, host, frame); each must be dropped and counted for its reason
    alone, with no event and nothing reaching a host."""
    for i, (reason, host, frame) in enumerate(cases):
        before = fabric.counters("s1")
        fabric.send(host, frame)
        delta = fabric.wait_counters(before, {("s1", "drops_in", reason): 1}, switches=("s1",))
        assert delta.of("s1", "drops_in") == {reason: 1}, f"case {i}: expected {reason}"
        assert delta.of("s1", "events") == {}, f"case {i}"
    assert not any(fabric.quiet(hosts).values())


def test_bad_blocks_are_dropped_and_the_slot_stays_intact(fabric):
    hosts = HOSTS[:3]
    topo = fabric.program([JobSpec(401, tuple(hosts), slots=2, mode="sparse")])
    s = fabric.session()
    rng = np.random.default_rng(401)
    good = rng.integers(-(1 << 20), 1 << 20, ELEMS).astype(np.int32)

    def pkt(host, block, nxt, values=None, **kw):
        return sparse(topo, host, 401, s, 0, block, nxt, values, **kw)

    # A data packet before any prime of the session: in use 0 (the prime's) there is no use
    # before it to take a block from; as use 1 it is a use no correct sender can have sent.
    expect_drops(fabric, [(BAD_BLOCK, "h1", pkt("h1", 0, 2, good)),
                          (EARLY, "h1", pkt("h1", 0, 2, good, use=1))], hosts)
    # The prime (bound B) opens with h1; then what a prime must not be.
    before = fabric.counters("s1")
    fabric.send("h1", pkt("h1", B, 2, prime=True))
    expect_drops(fabric, [
        (BAD_BLOCK, "h2", pkt("h2", B, 2, good, prime=True)),      # with a payload
        (BAD_BLOCK, "h2", pkt("h2", B, 2, prime=True, pad=True)),  # with padding
        (BAD_BLOCK, "h2", pkt("h2", B, B, prime=True)),            # next = bound
        (BAD_BLOCK, "h2", pkt("h2", B, B + 7, prime=True)),        # next outside
        (BAD_BLOCK, "h2", pkt("h2", 0, 2, good)),                  # data in a prime
        (BAD_TYPE, "h2", contrib(topo, "h2", 401, s, 0, good)),    # a dense packet
        (BAD_RESULT_PORT, "h2", bytes(sparse_pkt(topo, "h2", 401, s, 0, B, 2, prime=True,
                                                 msg_type=wire.MSG_SPARSE_RESULT))),
    ], hosts)
    # A PRIME naming another bound than the one the use holds: the workers disagree (or
    # the first was forged). Counted as BAD_BLOCK, sent back with the bound held and, in
    # `next`, the bitmap of the children whose PRIMEs gave it: h1's alone (bit 0).
    at = fabric.counters("s1")
    fabric.send("h2", pkt("h2", B + 5, 2, prime=True))
    got = refusal(fabric, "h2")
    assert (got.msg_type, got.count, got[wire.Block].block, got[wire.Block].next) == (
        wire.MSG_SPARSE_REFUSED, BAD_BLOCK, B, 0b1)
    delta = fabric.wait_counters(at, {("s1", "drops_in", BAD_BLOCK): 1}, switches=("s1",))
    assert delta.of("s1", "events") == {}
    fabric.send("h2", pkt("h2", B, 4, prime=True, exp=131))
    fabric.send("h3", pkt("h3", B, 2, prime=True, exp=135))
    for h in hosts:
        r = received_sparse(fabric, h)
        assert (r.block.block, r.block.next, r.agg.exp, r.agg.count) == (B, 2, 135, 3)
    # A packet with a payload, seen in the complete prime (the same chunk): answered with
    # the prime's result, which has none.
    fabric.send("h1", pkt("h1", 2, 6, good))
    r = received_sparse(fabric, "h1")
    assert r.payload is None and (r.block.block, r.block.next) == (B, 2)
    # The data use of block 2 (version 1): a bad first packet changes nothing either.
    a, b = good, rng.integers(-(1 << 20), 1 << 20, ELEMS).astype(np.int32)
    expect_drops(fabric, [(BAD_BLOCK, "h1", pkt("h1", 4, 6, a, use=1))], hosts)
    fabric.send("h1", pkt("h1", 2, 6, a, use=1, exp=140))
    expect_drops(fabric, [
        (BAD_BLOCK, "h2", pkt("h2", B + 3, NO_BLOCK, b, use=1)),  # outside
        (BAD_BLOCK, "h2", pkt("h2", 4, 6, b, use=1)),             # not the use's
        (BAD_BLOCK, "h2", pkt("h2", 2, 2, b, use=1)),             # next = block
        (BAD_BLOCK, "h2", pkt("h2", 2, 0, b, use=1)),             # next < block
        (BAD_BLOCK, "h2", pkt("h2", 2, B, b, use=1)),             # next = bound
        (BAD_BLOCK, "h2", pkt("h2", 2, 0x7FFFFFFF, b, use=1)),    # next outside
        (BAD_BLOCK, "h2", pkt("h2", B, 4, prime=True, use=1)),    # a PRIME
        (BAD_BLOCK, "h3", pkt("h3", 2, 1, pad=True, use=1)),      # EMPTY, next <
        # EMPTY without the padding a FIXED32 result needs (BMv2 grows a packet <= 512 B)
        (BAD_LENGTH, "h3", pkt("h3", 2, 4, use=1)),
        (BAD_TYPE, "h2", contrib(topo, "h2", 401, s, 0, b, use=1)),
    ], hosts)
    fabric.send("h2", pkt("h2", 2, NO_BLOCK, b, use=1, exp=0))
    fabric.send("h3", pkt("h3", 2, 4, pad=True, use=1, exp=150))
    for h in hosts:
        r = received_sparse(fabric, h)
        assert (r.block.block, r.block.next, r.agg.exp, r.agg.count) == (2, 4, 150, 3)
        assert np.array_equal(r.payload.astype(np.int64), a.astype(np.int64) + b), h
    delta = fabric.counters("s1") - before
    # six accepted contributions, none a duplicate: the drops left no trace
    assert delta.of("s1", "events") == {CONTRIB: 6, COMPLETE: 2, RESULT: 2, ANSWERED: 1}
    # The slot's stream goes on (block 4 next): a PRIME may not open its next use (only a
    # done stream's: docs/PROTOCOL.md "Sparse jobs"), nor a use after that.
    expect_drops(fabric, [
        (BAD_BLOCK, "h1", pkt("h1", B, 4, prime=True, use=2)),
        (BAD_BLOCK, "h1", pkt("h1", B, NO_BLOCK, prime=True, use=2)),
        (EARLY, "h1", pkt("h1", B, 4, prime=True, use=3)),
        (EARLY, "h1", pkt("h1", 4, NO_BLOCK, a, use=3)),
    ], hosts)
    # Retransmissions to the complete use: unpadded EMPTY ones, a PRIME among them, cannot
    # hold the FIXED32 answer (BMv2 would abort growing them); a padded one gets it.
    expect_drops(fabric, [
        (BAD_LENGTH, "h3", pkt("h3", B, 4, prime=True, use=1)),
        (BAD_LENGTH, "h3", pkt("h3", 2, 4, use=1)),
    ], hosts)
    fabric.send("h3", pkt("h3", 2, 4, pad=True, use=1, exp=150))
    r = received_sparse(fabric, "h3")
    assert np.array_equal(r.payload.astype(np.int64), a.astype(np.int64) + b)
    assert not any(fabric.quiet(hosts).values())


def test_bad_empty_packets_and_lengths(fabric):
    """EMPTY packets whose UDP length is neither the bare header nor the padded one, an
    EMPTY packet with a payload's length, and a payload packet cut to the EMPTY length are
    BAD_LENGTH; a CNAT8-result job takes an unpadded EMPTY packet."""
    hosts = HOSTS[:2]
    topo = fabric.program([JobSpec(402, tuple(hosts), slots=1, encoding="cnat8",
                                   mode="sparse")])
    s = fabric.session()
    codes = np.full(ELEMS, 3, np.uint8)

    def resized(p, extra: bytes = b"", cut: int = 0) -> bytes:
        raw = bytes(p[UDP].payload) + extra
        raw = raw[:len(raw) - cut] if cut else raw
        p[UDP].remove_payload()
        p = p / raw
        p[UDP].len = None
        p[UDP].chksum = None
        p[IP].len = None
        p[IP].chksum = None
        return bytes(p)

    prime = sparse_pkt(topo, "h1", 402, s, 0, 3, 0, prime=True)
    data = sparse_pkt(topo, "h1", 402, s, 0, 0, NO_BLOCK, codes, use=1)
    empty = sparse_pkt(topo, "h2", 402, s, 0, 0, NO_BLOCK, use=1)
    expect_drops(fabric, [
        (BAD_LENGTH, "h1", resized(prime.copy(), b"\0" * 7)),
        (BAD_LENGTH, "h1", resized(prime.copy(), b"\0" * (4 * ELEMS))),
        (BAD_LENGTH, "h1", resized(data.copy(), cut=ELEMS)),
        (BAD_LENGTH, "h1", resized(data.copy(), cut=1)),
    ], hosts)
    fabric.send("h1", bytes(prime))
    fabric.send("h2", sparse(topo, "h2", 402, s, 0, 3, 0, prime=True))
    for h in hosts:
        assert received_sparse(fabric, h).block.next == 0
    fabric.send("h1", bytes(data))
    fabric.send("h2", bytes(empty))
    for h in hosts:
        r = received_sparse(fabric, h)
        assert r.agg.encoding == wire.ENC_CNAT8 and np.array_equal(r.payload, codes)
    assert not any(fabric.quiet(hosts).values())
