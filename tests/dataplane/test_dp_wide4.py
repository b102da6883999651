"""The wide4 profile (p4src/build/wide4/, 1024 elements per packet) on both targets: UQ4
contributions of 512 bytes summed exactly into SUM8 results of 1024 (the packet grows by
BMv2's full 512), NAT4 re-compressed to CNAT8, and the contributions the program would have
to grow further dropped. On BMv2 the run is differential (harness/diff.py: every frame,
counter and register compared with softswitch's)."""

import numpy as np
import pytest

from controller.profiles import PROFILES
from controller.topology import JobSpec, star
from tests.dataplane.conftest import TARGETS, profile_fabric
from tests.dataplane.packets import COMPLETE, CONTRIB, RESULT, SUM_OVERFLOW, TOO_WIDE
from worker import codec, wire
from worker.frames import Framer

WIDE4 = PROFILES["wide4"]
HOSTS = ["h1", "h2", "h3"]
HEADERS = 14 + 20 + 8 + 16          # Ethernet, IPv4, UDP, AGG


@pytest.fixture(scope="module", params=TARGETS)
def fabric(request, tmp_path_factory):
    """This module's fabric (it replaces the folder's): the wide4 program on a star of 3."""
    with profile_fabric(request.param, tmp_path_factory, star(len(HOSTS)), WIDE4.build,
                        "natsw-dp4") as fab:
        yield fab


def framer(topo, host: str) -> Framer:
    h = topo.host(host)
    return Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip), elems=WIDE4.elems)


def packed(nibbles: np.ndarray) -> bytes:
    return codec.pack4(nibbles).tobytes()


def test_uq4_sums_exact_in_lanes_and_bytes_per_element(fabric):
    """Three UQ4 contributions (random, and every element 15 in one of them, so some lanes
    reach 45 and neighbours stay small): 570-byte frames up, 1082-byte SUM8 results down
    (0.557 and 1.057 bytes per element), every sum exact."""
    topo = fabric.program([JobSpec(801, tuple(HOSTS), slots=2, encoding="sum8")])
    s = fabric.session()
    rng = np.random.default_rng(801)
    parts = [rng.integers(0, 16, WIDE4.elems), np.full(WIDE4.elems, 15),
             rng.integers(0, 2, WIDE4.elems) * 15]
    frames = {h: framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_UQ4, 801, s, 0, 0, 127, 1,
                                       0, packed(p))
              for h, p in zip(HOSTS, parts, strict=True)}
    assert {len(f) for f in frames.values()} == {HEADERS + WIDE4.elems // 2}
    before = fabric.counters("s1")
    for h in HOSTS:
        fabric.send(h, frames[h])
    outs = fabric.expect(HOSTS)
    want = codec.aggregate(parts, wire.ENC_UQ4)
    for h in HOSTS:
        assert len(outs[h]) == HEADERS + WIDE4.elems
        hdr, payload = framer(topo, h).parse(outs[h])
        assert (hdr.msg_type, hdr.encoding, hdr.count) == (wire.MSG_RESULT, wire.ENC_SUM8, 3)
        assert np.array_equal(np.asarray(payload, np.int64), want)
    delta = fabric.counters("s1") - before
    assert delta.of("s1", "events") == {CONTRIB: 3, COMPLETE: 1, RESULT: 1}
    assert delta.of("s1", "drops_in") == {}


def test_sum8_partial_sums_add_and_one_lane_over_a_byte_drops(fabric):
    """SUM8 contributions (a child switch's partial sums) add a word at a time; one element
    at 300 (the rest small) is dropped as SUM_OVERFLOW, not sent with its lane cut."""
    topo = fabric.program([JobSpec(802, tuple(HOSTS[:2]), slots=2, encoding="sum8")])
    s = fabric.session()
    rng = np.random.default_rng(802)
    a, b = rng.integers(0, 128, WIDE4.elems), rng.integers(0, 128, WIDE4.elems)
    for h, p in (("h1", a), ("h2", b)):
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_SUM8, 802, s, 0, 0,
                                             127, 1, 0, p.astype(np.uint8)))
    outs = fabric.expect(HOSTS[:2])
    for h in HOSTS[:2]:
        _, payload = framer(topo, h).parse(outs[h])
        assert np.array_equal(np.asarray(payload, np.int64), a + b)
    before = fabric.counters("s1")
    big = np.zeros(WIDE4.elems, np.uint8)
    big[513] = 150                                  # lane 1 of a group
    for h in HOSTS[:2]:
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_SUM8, 802, s, 1, 0,
                                             127, 1, 1, big))
    delta = fabric.wait_counters(before, {("s1", "drops_in", SUM_OVERFLOW): 1},
                                 switches=("s1",))
    assert delta.of("s1", "drops_in") == {SUM_OVERFLOW: 1}
    assert not any(fabric.quiet(HOSTS).values())


def test_nat4_is_recompressed_and_what_would_grow_further_is_too_wide(fabric):
    """NAT4 of one level per element from all three: the sum 3 * 2^(m-1) re-compressed to
    CNAT8 (1082-byte frames). CNAT8 and NAT4 contributions to a FIXED32 job would grow
    by 3 and 3.5 bytes per element: TOO_WIDE."""
    topo = fabric.program([JobSpec(803, tuple(HOSTS), slots=2, encoding="cnat8"),
                           JobSpec(804, tuple(HOSTS[:2]), slots=2, encoding="fixed32")])
    s = fabric.session()
    m = np.random.default_rng(803).integers(1, 8, WIDE4.elems)
    for h in HOSTS:
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_NAT4, 803, s, 0, 0,
                                             127, 1, 0, packed(m)))
    outs = fabric.expect(HOSTS)
    lo = 1 << (m - 1)
    for h in HOSTS:
        assert len(outs[h]) == HEADERS + WIDE4.elems
        hdr, payload = framer(topo, h).parse(outs[h])
        assert hdr.encoding == wire.ENC_CNAT8
        got = codec.switch_decode(np.asarray(payload, np.uint8), wire.ENC_CNAT8)
        assert np.all((got == 2 * lo) | (got == 4 * lo))      # 3 * 2^(m-1) rounded
    before = fabric.counters("s1")
    fabric.send("h1", framer(topo, "h1").build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 804, s, 0,
                                               0, 127, 1, 0, np.ones(WIDE4.elems, np.uint8)))
    fabric.send("h2", framer(topo, "h2").build(wire.MSG_CONTRIB, wire.ENC_NAT4, 804, s, 0,
                                               0, 127, 1, 0, packed(m)))
    delta = fabric.wait_counters(before, {("s1", "drops_in", TOO_WIDE): 2}, switches=("s1",))
    assert delta.of("s1", "drops_in") == {TOO_WIDE: 2}
    assert not any(fabric.quiet(HOSTS).values())


@pytest.mark.uncompared
def test_a_rerun_of_a_seed_gives_the_same_models_despite_loss(fabric):
    """Reproducible on this profile too: NAT4 contributions of 1024 elements, re-compressed
    by the switch to CNAT8 results with its keyed rounding bits, each run losing other
    frames."""
    from tests.dataplane.test_dp_reproducible import check_reruns

    check_reruns(fabric, 811, tuple(HOSTS), "cnat8", contrib=wire.ENC_NAT4, framer=framer,
                 elems=WIDE4.elems)
