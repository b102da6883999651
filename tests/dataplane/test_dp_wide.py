"""The wide profile (p4src/build/wide/, 1456 elements per packet) on both targets: a CNAT8
sum of full 1500-byte packets, the TOO_WIDE drop of a contribution the program would have to
grow, and a sparse CNAT8 use with its padded EMPTY packet. On BMv2 the run is differential
(harness/diff.py: every frame, counter and register compared with softswitch's).

One small star for the module: simple_switch_grpc takes seconds to load the 24 MB program.
Its veths carry 1600 bytes: a sparse packet of the wide profile is 1508 bytes of IPv4."""

import numpy as np
import pytest

from controller.profiles import PROFILES
from controller.topology import JobSpec, star
from tests.dataplane.conftest import TARGETS, profile_fabric
from tests.dataplane.packets import BAD_LENGTH, COMPLETE, CONTRIB, RESULT, TOO_WIDE
from worker import wire
from worker.frames import Framer

WIDE = PROFILES["wide"]
HOSTS = ["h1", "h2", "h3"]


@pytest.fixture(scope="module", params=TARGETS)
def fabric(request, tmp_path_factory):
    """This module's fabric (it replaces the folder's): the wide program on a star of 3."""
    with profile_fabric(request.param, tmp_path_factory, star(len(HOSTS)), WIDE.build,
                        "natsw-dpw", mtu=1600) as fab:
        yield fab


def framer(topo, host: str) -> Framer:
    h = topo.host(host)
    return Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip), elems=WIDE.elems)


def test_cnat8_sums_in_full_mtu_packets(fabric):
    """Three CNAT8 contributions of 1456 elements: one 1514-byte frame per host back, the
    exact sum re-compressed (powers of two: the codes of the sum are exact)."""
    topo = fabric.program([JobSpec(701, tuple(HOSTS), slots=2, encoding="cnat8")])
    s = fabric.session()
    rng = np.random.default_rng(701)
    m = rng.integers(1, 21, WIDE.elems).astype(np.uint8)
    # h1 sends -2^(m-1), h2 and h3 +2^(m-1): every sum is the power 2^(m-1), code m exactly.
    codes = [m | np.uint8(0x80), m, m]
    before = fabric.counters("s1")
    chunk = wire.use_chunk(0, 1, 2)         # use 0 of slot 1
    for h, c in zip(HOSTS, codes, strict=True):
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 701, s, 1, 0,
                                             127, 1, chunk, c))
    outs = fabric.expect(HOSTS)
    for h in HOSTS:
        assert len(outs[h]) == 14 + 1500, f"{h}: {len(outs[h])} bytes"
        hdr, payload = framer(topo, h).parse(outs[h])
        assert (hdr.msg_type, hdr.encoding, hdr.count, hdr.chunk) == (
            wire.MSG_RESULT, wire.ENC_CNAT8, 3, chunk)
        assert np.array_equal(np.asarray(payload), m)
    delta = fabric.counters("s1") - before
    assert delta.of("s1", "events") == {CONTRIB: 3, COMPLETE: 1, RESULT: 1}
    assert delta.of("s1", "drops_in") == {}


def test_a_contribution_the_program_would_grow_is_dropped_too_wide(fabric):
    """A job with FIXED32 results: each CNAT8 contribution would leave 4368 bytes longer."""
    topo = fabric.program([JobSpec(702, tuple(HOSTS[:2]), slots=2, encoding="fixed32")])
    s = fabric.session()
    before = fabric.counters("s1")
    for h in HOSTS[:2]:
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 702, s, 0, 0,
                                             127, 1, 0, np.ones(WIDE.elems, np.uint8)))
    delta = fabric.wait_counters(before, {("s1", "drops_in", TOO_WIDE): 2}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {TOO_WIDE: 2}
    assert delta.of("s1", "events") == {}
    assert not any(fabric.quiet(HOSTS).values())


def test_a_sparse_cnat8_use_wants_its_empty_packet_padded(fabric):
    """Prime, then a data use of block 0: h1 does not hold it. Its EMPTY packet without
    padding is BAD_LENGTH (a 1456-byte sum would grow it past 512 bytes); padded, it counts
    as zero and the result goes out as CNAT8 in the same 1522-byte frames."""
    hosts = HOSTS[:2]
    topo = fabric.program([JobSpec(703, tuple(hosts), slots=1, encoding="cnat8",
                                   mode="sparse")])
    s = fabric.session()
    fr = {h: framer(topo, h) for h in hosts}

    def sparse(h, block, nxt, payload=None, use=1, **kw):
        """Slot 0 of a 1-slot job: use u is chunk u, version u % 2."""
        return fr[h].build_sparse(wire.MSG_SPARSE_CONTRIB, wire.ENC_CNAT8, 703, s, 0,
                                  use % 2, 127, 1, wire.use_chunk(use, 0, 1), block, nxt,
                                  payload, **kw)
    for h in hosts:     # the prime use: 2 blocks, block 0 the first either holds
        fabric.send(h, sparse(h, 2, 0, flags=wire.FLAG_PRIME, use=0))
    primes = fabric.expect(hosts)
    assert all(fr[h].parse_sparse(primes[h])[0].next == 0 for h in hosts)
    before = fabric.counters("s1")
    fabric.send("h1", sparse("h1", 0, wire.NO_BLOCK))
    delta = fabric.wait_counters(before, {("s1", "drops_in", BAD_LENGTH): 1}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {BAD_LENGTH: 1}
    fabric.send("h1", sparse("h1", 0, wire.NO_BLOCK, pad=True))
    codes = np.full(WIDE.elems, 5, np.uint8)
    codes[::2] |= 0x80
    fabric.send("h2", sparse("h2", 0, wire.NO_BLOCK, codes))
    outs = fabric.expect(hosts)
    for h in hosts:
        assert len(outs[h]) == 14 + 1508
        hdr, payload = fr[h].parse_sparse(outs[h])
        assert (hdr.msg_type, hdr.encoding, hdr.block, hdr.next, hdr.count) == \
            (wire.MSG_SPARSE_RESULT, wire.ENC_CNAT8, 0, wire.NO_BLOCK, 2)
        assert np.array_equal(np.asarray(payload), codes)     # 0 + (+-16): exact
    delta = fabric.counters("s1") - before
    assert delta.of("s1", "drops_in") == {BAD_LENGTH: 1}
    assert delta.of("s1", "events") == {CONTRIB: 2, COMPLETE: 1, RESULT: 1}
