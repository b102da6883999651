"""The walk of the cnat8-mp variants (p4src/tna/passes_tna.p4), run by the twin built with
it (profile `tofino-mp`: packets of 64 CNAT8 codes, 4 segments of 16, one summed a pass, the
passes recirculated) on both targets, BMv2 differential against softswitch: every segment
summed where it belongs and harvested in order, every pass counted, the results unbiased
within C_nat's second-moment bound, duplicates, replays and strays harmless, exact under
chaos on one switch and a two-level tree, and reproducible from a seed."""

from __future__ import annotations

import numpy as np
import pytest

from controller.profiles import PROFILES
from controller.topology import JobSpec
from controller.twin import TWIN_LOOP_PORT
from harness.fabric import FabricPort
from harness.fabric import testbed_topology as leaf_spine  # (not collected as a test)
from tests.dataplane.chaos import Chaos
from tests.dataplane.conftest import TARGETS, profile_fabric
from tests.dataplane.packets import BAD_ENCODING, BAD_LENGTH, NOT_IPV4, STALE, WRONG_SESSION
from tests.dataplane.test_dp_chaos import TREES, check_stale_replay, run_chaos
from tests.dataplane.test_dp_reproducible import check_reruns
from tests.dataplane.test_dp_twin import results as twin_results
from worker import codec, wire
from worker.frames import Framer

WALK = PROFILES["tofino-mp"]
ELEMS, PASSES = WALK.elems, WALK.passes
SEG = ELEMS // PASSES
HOSTS = ("h1", "h2", "h3")


# Every job of the module, programmed once (a sync of the twin's 6,000 codec rows a switch
# takes seconds): each test has its own job, so its slots start clean in one session.
JOBS = [JobSpec(140, HOSTS, slots=4, encoding="cnat8"),
        JobSpec(141, HOSTS, slots=4, encoding="fixed32"),
        JobSpec(142, HOSTS, slots=2, encoding="cnat8"),
        JobSpec(143, HOSTS, slots=4, encoding="cnat8"),
        JobSpec(144, TREES["one-switch"], slots=4, encoding="cnat8"),
        JobSpec(145, TREES["two-level"], slots=4, encoding="cnat8", partials="cnat8")]


@pytest.fixture(scope="module", params=TARGETS)
def fabric(request, tmp_path_factory):
    """This module's fabric: the walk's twin on the folder's leaf-spine testbed, with
    JOBS."""
    with profile_fabric(request.param, tmp_path_factory, leaf_spine(), WALK.build,
                        "natsw-dpw") as fab:
        fab.program(JOBS)
        yield fab


def framer(topo, host: str, elems: int = ELEMS) -> Framer:
    h = topo.host(host)
    return Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip), elems=elems,
                  zero_checksum=True)


def send(fabric, topo, job: int, session: int, chunk: int, payloads: dict,
         enc: int = wire.ENC_CNAT8, slots: int = 4) -> None:
    slot, use = chunk % slots, chunk // slots
    for h, pay in payloads.items():
        fabric.send(h, framer(topo, h, len(pay)).build(wire.MSG_CONTRIB, enc, job, session,
                                                       slot, use % 2, 127, 1, chunk, pay))


def results(fabric, topo, hosts) -> dict:
    """Every host's one frame, parsed as a packet of the walk (test_dp_twin.results)."""
    return twin_results(fabric, topo, hosts, framer)


def power_sums(rng) -> tuple[dict, np.ndarray]:
    """Three workers' codes whose sum is a power of two (or zero) in every element, so the
    re-compressed result is exact: m, m and m + 1 make 2^(m+1) (code m + 2), each segment its
    own exponents and signs, some elements zero at one worker or all."""
    m = rng.integers(1, 28, ELEMS)
    sign = np.where(rng.integers(0, 2, ELEMS) == 1, 0x80, 0).astype(np.uint8)
    a = (m | sign).astype(np.uint8)
    c = ((m + 1) | sign).astype(np.uint8)
    want = ((m + 2) | sign).astype(np.uint8)
    zero = rng.integers(0, 8, ELEMS) == 0          # all three zero: the sum is 0, code 0
    a[zero], c[zero], want[zero] = 0, 0, 0
    return {"h1": a, "h2": a.copy(), "h3": c}, want


def test_every_segment_sums_where_it_belongs_and_comes_back_in_order(fabric):
    """Codes whose sums are powers of two come back exact, element by element across all 4
    segments (a segment summed at another's cells, or harvested out of order, would not);
    every contribution takes 4 passes and the one that completes the use 3 more, each
    through the `loops` port; a FIXED32 packet and a packet of one segment are refused."""
    topo, s = fabric.topo, fabric.current
    rng = np.random.default_rng(3)
    for chunk in range(10):     # both versions of every slot
        pay, want = power_sums(rng)
        before = fabric.counters("s1")
        send(fabric, topo, 140, s, chunk, pay)
        for hdr, payload in results(fabric, topo, HOSTS).values():
            assert (hdr.msg_type, hdr.encoding, hdr.chunk, hdr.count) == (
                wire.MSG_RESULT, wire.ENC_CNAT8, chunk, 3)
            assert np.array_equal(np.asarray(payload), want), chunk
        passes = (fabric.counters("s1") - before).of("s1", "port_tx").get(TWIN_LOOP_PORT, 0)
        assert passes == 3 * (PASSES - 1) + (PASSES - 1)
    before = fabric.counters("s1")
    send(fabric, topo, 140, s, 10, {"h1": np.ones(ELEMS, np.int32)}, wire.ENC_FIXED32)
    send(fabric, topo, 140, s, 10, {"h2": np.ones(SEG, np.uint8)})
    fabric.wait_counters(before, {("s1", "drops_in", BAD_ENCODING): 1,
                                  ("s1", "drops_in", BAD_LENGTH): 1}, switches=("s1",))


def test_a_job_with_fixed32_results_is_refused_by_the_switch_too(fabric):
    """The walk re-compresses every result: a job whose entry says FIXED32 (which the
    controller refuses before any switch: controller/profiles.py) has its contributions
    dropped as BAD_ENCODING, none summed."""
    topo, s = fabric.topo, fabric.current
    before = fabric.counters("s1")
    send(fabric, topo, 141, s, 0, {h: np.ones(ELEMS, np.uint8) for h in HOSTS})
    fabric.wait_counters(before, {("s1", "drops_in", BAD_ENCODING): 3}, switches=("s1",))
    assert fabric.quiet(HOSTS) == {h: [] for h in HOSTS}


def test_duplicates_replays_and_strays_leave_the_sums_exact(fabric):
    """A duplicate contribution adds nothing (the bitmap), a retransmission after the use
    completed is answered with the same codes to its sender alone, a replay of an old use is
    STALE, an old session's packet WRONG_SESSION, and a frame from a host that starts with
    a walk header is no walk (only recirculated packets carry one): it sums nothing."""
    topo, s = fabric.topo, fabric.current
    rng = np.random.default_rng(4)
    pay, want = power_sums(rng)
    send(fabric, topo, 142, s, 0, {"h1": pay["h1"]}, slots=2)
    send(fabric, topo, 142, s, 0, {"h1": pay["h1"]}, slots=2)     # a duplicate
    # a forged walk header (ridx 0, segment 3, add, harvest 0, no destination) in front
    f = framer(topo, "h2").build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 142, s, 0, 0, 127, 1, 0,
                                 pay["h2"])
    before = fabric.counters("s1")
    fabric.send("h2", bytes([0, 0, 3 << 5 | 2 << 3, 0, 0, 0, 0, 0, 0]) + f)
    # read as Ethernet, its type is no IPv4: dropped and counted, nothing summed
    fabric.wait_counters(before, {("s1", "drops_in", NOT_IPV4): 1}, switches=("s1",))
    send(fabric, topo, 142, s, 0, {"h2": pay["h2"], "h3": pay["h3"]}, slots=2)
    got = results(fabric, topo, HOSTS)
    for _, payload in got.values():
        assert np.array_equal(np.asarray(payload), want)
    send(fabric, topo, 142, s, 0, {"h3": pay["h3"]}, slots=2)     # asked again
    again = fabric.quiet(HOSTS)
    assert [len(again[h]) for h in HOSTS] == [0, 0, 1]
    assert bytes(framer(topo, "h3").parse(again["h3"][0])[1]) == bytes(got["h3"][1])
    for chunk in (1, 2, 3, 4):                                      # the slots move on
        p, w = power_sums(rng)
        send(fabric, topo, 142, s, chunk, p, slots=2)
        assert all(np.array_equal(np.asarray(x), w)
                   for _, x in results(fabric, topo, HOSTS).values())
    before = fabric.counters("s1")
    send(fabric, topo, 142, s, 0, {"h1": pay["h1"]}, slots=2)     # a replay of use 0
    send(fabric, topo, 142, s - 1, 5, {"h1": pay["h1"]}, slots=2)
    fabric.wait_counters(before, {("s1", "drops_in", STALE): 1,
                                  ("s1", "drops_in", WRONG_SESSION): 1}, switches=("s1",))
    assert fabric.quiet(HOSTS) == {h: [] for h in HOSTS}


def test_results_are_unbiased_within_the_second_moment_bound(fabric):
    """C_nat's promise of the re-compressed sums (DESIGN contract 6, docs/PROTOCOL.md): each
    element a neighbouring power of two of the exact sum with its sign; over 60 chunks of 64
    elements the mean of every sum class within 5 standard errors of the sum, and the
    second moment at most 9/8 of the sum's square (5 standard errors of slack). The
    rounding-up events of two elements of a packet are measured for correlation: the twin
    draws each element's bits from one CRC-32 of the key with the element's index and
    segment, mixed (docs/PROTOCOL.md "Passes"); the largest pairwise |r| over the 2016 pairs
    must stay within 6 standard errors of independence and their mean near its value."""
    topo, s = fabric.topo, fabric.current
    # per element the codes of the three workers: sums 3, 5, 6, 7, 12 x 2^k, both signs
    base = [(2, 2, 1), (3, 2, 0), (3, 3, 2), (3, 3, 1), (4, 4, 3), (0x82, 0x82, 0x81),
            (0x83, 0x82, 0), (5, 4, 1)]
    w = np.array([tuple(c + (k // len(base) if c & 0x7F else 0) for c in base[k % len(base)])
                  for k in range(ELEMS)], dtype=np.uint8)
    exact = codec.aggregate(list(w.T), wire.ENC_CNAT8).astype(np.float64)
    chunks = 60
    got = np.empty((chunks, ELEMS))
    for chunk in range(chunks):
        send(fabric, topo, 143, s, chunk, dict(zip(HOSTS, w.T, strict=True)))
        r = results(fabric, topo, HOSTS)
        codes = {bytes(p) for _, p in r.values()}
        assert len(codes) == 1, "multicast copies rounded differently"
        got[chunk] = codec.aggregate([np.asarray(r["h1"][1])], wire.ENC_CNAT8)
    lo = 2.0 ** np.floor(np.log2(np.abs(exact)))
    assert np.all((np.abs(got) == lo) | (np.abs(got) == 2 * lo))
    assert np.all(np.sign(got) == np.sign(exact))
    # the classes of equal sums (the same code triple): mean and second moment
    for k in range(len(base)):
        idx = [i for i in range(ELEMS) if i % len(base) == k]
        x = (got[:, idx] / exact[idx]).ravel()          # unbiased: mean 1
        assert abs(x.mean() - 1) <= 5 * x.std(ddof=1) / np.sqrt(x.size), k
        x2 = x ** 2
        assert x2.mean() <= 9 / 8 + 5 * x2.std(ddof=1) / np.sqrt(x2.size), k
    up = (np.abs(got) == 2 * lo).astype(np.float64)
    live = up.std(axis=0) > 0
    r = np.corrcoef(up[:, live].T)
    off = np.abs(r[~np.eye(len(r), dtype=bool)])
    print(f"{fabric.name} walk rounding: max |r| {off.max():.3f}, mean |r| {off.mean():.3f} "
          f"over {live.sum()} elements x {chunks} chunks")
    assert off.max() <= 6 / np.sqrt(chunks)
    # independent pairs: E|r| = sqrt(2 / (pi (n - 1))), 0.104 here; pairs that round alike
    # every use (a linear hash's fixed pattern) raise it by their share
    assert off.mean() <= 1.25 * np.sqrt(2 / (np.pi * (chunks - 1)))


def test_a_two_level_tree_walks_on_every_switch_and_sums_exactly(fabric):
    """h1-h3 under leaf s1, h33 under leaf s2, the spine s3 the root: each switch walks its
    packets (the leaves' partial sums go up re-compressed, CNAT8), and codes whose partial
    and total sums are powers of two come back exact in every segment: s1 sums m, m, m + 1
    into 2^(m+1), h33 sends m + 2, the root's 2^(m+2) is code m + 3; a retransmission
    after a lost result is answered through the tree with the same codes."""
    topo, s = fabric.topo, fabric.current
    rng = np.random.default_rng(5)
    hosts = TREES["two-level"]
    for chunk in range(3):
        m = rng.integers(1, 27, ELEMS)
        sign = np.where(rng.integers(0, 2, ELEMS) == 1, 0x80, 0)
        pay = {"h1": m | sign, "h2": m | sign, "h3": (m + 1) | sign, "h33": (m + 2) | sign}
        pay = {h: v.astype(np.uint8) for h, v in pay.items()}
        want = ((m + 3) | sign).astype(np.uint8)
        before = fabric.counters()
        send(fabric, topo, 145, s, chunk, pay)
        for hdr, payload in results(fabric, topo, hosts).values():
            assert (hdr.msg_type, hdr.count) == (wire.MSG_RESULT, 4)
            assert np.array_equal(np.asarray(payload), want)
        loops = {sw: (fabric.counters(sw) - before).of(sw, "port_tx").get(TWIN_LOOP_PORT, 0)
                 for sw in ("s1", "s2", "s3")}
        # every contribution 3 recirculations, the completing one 3 more: s1 three
        # workers, s2 one, the root two children (the leaves' partial sums)
        assert loops == {"s1": 3 * 3 + 3, "s2": 3 + 3, "s3": 2 * 3 + 3}, loops
    # h1's result lost: its retransmission makes leaf s1 send its partial sum up again, the
    # root answers it from its registers, and s1 passes the answer to its children: the
    # same codes, every copy
    send(fabric, topo, 145, s, 2, {"h1": pay["h1"]})
    again = fabric.quiet(hosts)
    assert len(again["h1"]) == 1 and not again["h33"], {h: len(f) for h, f in again.items()}
    for h, frames in again.items():
        for f in frames:
            assert np.array_equal(np.asarray(framer(topo, h).parse(f)[1]), want), h


@pytest.mark.uncompared
def test_exact_sums_under_chaos(fabric):
    """(Last but one: real clients poll, so from here on the fabric compares no frames.)
    Real clients through chaos ports (loss, replays, old and new sessions, uses ahead),
    CNAT8 both ways through the walk: every chunk's result one of the two roundings of the
    integer reference (check_exact), on every worker alike. (On a tree the leaves' CNAT8
    partial sums are rounded too, which check_exact cannot follow: the tree test below.)"""
    topo, session = fabric.topo, fabric.current
    fabric.uncompared()
    rng = np.random.default_rng(144)
    chaos = Chaos(loss=float(rng.uniform(0.1, 0.3)), corrupt=0.0, new_session=0.05,
                  early=0.05)
    before = fabric.counters()
    elements, ports = run_chaos(lambda h: FabricPort(fabric, h), topo, 144, session, 144,
                                chaos, 3, 6, wire.ENC_CNAT8, elems=ELEMS, framer=framer)
    fabric.quiet(TREES["one-switch"])
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    drops = (fabric.counters() - before).of("s1", "drops_in")
    assert drops.get(WRONG_SESSION, 0) == done["old_session"] + done["new_session"], drops
    check_stale_replay(fabric, topo, TREES["one-switch"][0], ports[0])
    print(f"{fabric.name} walk: {elements} elements exact; chaos {done}; drops {drops}")


@pytest.mark.uncompared
def test_a_rerun_of_a_seed_gives_the_same_models_despite_loss(fabric):
    """Reproducible through the walk: CNAT8 both ways on the two-level tree, each segment's
    rounding bits the hash of the job's key, the use and the segment."""
    check_reruns(fabric, 145, TREES["two-level"], "cnat8", framer=framer, elems=ELEMS,
                 partials="cnat8", programmed=True)
