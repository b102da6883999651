"""The Tofino profile's v1model twin (p4src/twin/, profile `tofino`: 16 elements per packet)
on both targets, BMv2 differential against softswitch (harness/diff.py): the slot per
version, the pair registers, the decode and re-compression tables the controller installs,
the checks folded into one table, sessions that live in the job's entry. Exact against the
integer reference, under chaos and on a two-level tree, and reproducible from a seed."""

from __future__ import annotations

import numpy as np
import pytest

from controller.profiles import PROFILES
from controller.topology import JobSpec
from harness.fabric import FabricPort
from harness.fabric import testbed_topology as leaf_spine  # (not collected as a test)
from tests.dataplane.chaos import Chaos
from tests.dataplane.conftest import TARGETS, profile_fabric
from tests.dataplane.packets import (
    BAD_ENCODING,
    BAD_EXP,
    BAD_LENGTH,
    BAD_RESULT_PORT,
    BAD_SLOT,
    BAD_VERSION,
    EARLY,
    FOREIGN_PORT,
    STALE,
    SUM_OVERFLOW,
    UNKNOWN_JOB,
    WRONG_SESSION,
)
from tests.dataplane.test_dp_chaos import TREES, check_stale_replay, run_chaos
from tests.dataplane.test_dp_reproducible import check_reruns
from worker import codec, wire
from worker.frames import Framer

TWIN = PROFILES["tofino"]
ELEMS = TWIN.elems
HOSTS = ("h1", "h2", "h3")
M32 = 0xFFFFFFFF


@pytest.fixture(scope="module", params=TARGETS)
def fabric(request, tmp_path_factory):
    """This module's fabric: the twin on the folder's leaf-spine testbed."""
    with profile_fabric(request.param, tmp_path_factory, leaf_spine(), TWIN.build,
                        "natsw-dpt") as fab:
        yield fab


def framer(topo, host: str) -> Framer:
    h = topo.host(host)
    return Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip), elems=ELEMS,
                  zero_checksum=True)


def send_chunk(fabric, topo, job: int, session: int, chunk: int, payloads: dict, enc: int,
               exp: int = 127, slots: int = 4) -> None:
    slot, use = chunk % slots, chunk // slots
    for h, pay in payloads.items():
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, enc, job, session, slot,
                                             use % 2, exp, 1, chunk, pay))


def results(fabric, topo, hosts, make=None) -> dict:
    """Every host's one frame, parsed by `make(topo, host)`'s framer (this module's by
    default); each must carry UDP checksum 0 (none)."""
    make = make or framer
    out = {}
    for h, frames in fabric.quiet(hosts).items():
        assert len(frames) == 1, (h, len(frames))
        assert frames[0][40:42] == b"\0\0"
        out[h] = make(topo, h).parse(frames[0])
    return out


def signed(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


def test_fixed32_and_every_cnat8_code_sum_exactly(fabric):
    """FIXED32 contributions sum lane by lane in the pair registers; CNAT8 contributions are
    decoded by the controller's tables, every one of the 256 codes over 16 chunks, into the
    same sums as the v1model program's shift (codec.aggregate)."""
    topo = fabric.program([JobSpec(120, HOSTS, slots=4, encoding="fixed32")])
    s = fabric.session()
    rng = np.random.default_rng(1)
    for chunk in range(6):      # both versions of some slots
        pay = {h: rng.integers(-(1 << 28), 1 << 28, ELEMS).astype(np.int32) for h in HOSTS}
        send_chunk(fabric, topo, 120, s, chunk, pay, wire.ENC_FIXED32, exp=120 + chunk)
        got = results(fabric, topo, HOSTS)
        want = sum(signed(p) for p in pay.values())
        for hdr, payload in got.values():
            assert (hdr.msg_type, hdr.chunk, hdr.count, hdr.exp) == (wire.MSG_RESULT, chunk,
                                                                      3, 120 + chunk)
            assert np.array_equal(signed(payload), want)
    codes = np.arange(256, dtype=np.uint8).reshape(-1, ELEMS)
    for k, row in enumerate(codes):
        chunk = 6 + k
        pay = {h: np.roll(row, i) for i, h in enumerate(HOSTS)}
        send_chunk(fabric, topo, 120, s, chunk, pay, wire.ENC_CNAT8)
        got = results(fabric, topo, HOSTS)
        want = codec.aggregate(list(pay.values()), wire.ENC_CNAT8)
        for hdr, payload in got.values():
            assert hdr.encoding == wire.ENC_FIXED32
            assert np.array_equal(signed(payload), signed(want)), k


def test_the_nonfinite_mark_reaches_every_worker(fabric):
    """docs/PROTOCOL.md "Non-finite values": a contribution announcing its next chunk as
    non-finite (exp = the job's max_exp) is admitted, and the result carries the mark to
    every worker, as on the v1model program; one above it is still dropped (BAD_EXP)."""
    topo = fabric.program([JobSpec(131, HOSTS, slots=4, encoding="fixed32", max_exp=150)])
    s = fabric.session()
    ones = np.ones(ELEMS, np.int32)
    before = fabric.counters()
    fabric.send("h2", framer(topo, "h2").build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 131, s,
                                               1, 0, 151, 1, 1, ones))
    for h, exp in zip(HOSTS, (120, 150, 130), strict=True):
        fabric.send(h, framer(topo, h).build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 131, s, 1,
                                             0, exp, 1, 1, ones))
    for hdr, payload in results(fabric, topo, HOSTS).values():
        assert (hdr.msg_type, hdr.exp, hdr.count) == (wire.MSG_RESULT, 150, 3)
        assert np.all(signed(payload) == 3)
    delta = fabric.counters() - before
    assert delta.of("s1", "drops_in") == {BAD_EXP: 1}


def test_cnat8_results_are_unbiased_and_every_copy_rounds_alike(fabric):
    """Sums re-compressed in the egress by the leading-one tables and hashed random bits:
    each element a neighbouring power of two of the exact sum with its sign, their mean the
    sum (16 elements x 150 chunks per value, 5 standard errors); a retransmission's
    answer, every multicast copy and a rerun of the use in a new session carry the same
    codes."""
    topo = fabric.program([JobSpec(121, HOSTS, slots=4, encoding="cnat8")])
    s = fabric.session()
    # per element: the three workers' codes and the exact sum they make
    w = np.array([[2, 2, 1], [3, 1, 1], [4, 3, 2], [0x82, 0x82, 0x81], [7, 5, 1]] * 4,
                 dtype=np.uint8)[:ELEMS]
    exact = signed(codec.aggregate(list(w.T), wire.ENC_CNAT8))
    chunks = 150
    decoded = []
    for chunk in range(chunks):
        send_chunk(fabric, topo, 121, s, chunk, dict(zip(HOSTS, w.T, strict=True)),
                   wire.ENC_CNAT8)
        got = results(fabric, topo, HOSTS)
        codes = {bytes(p) for _, p in got.values()}
        assert len(codes) == 1, "multicast copies rounded differently"
        hdr, payload = got["h1"]
        assert hdr.encoding == wire.ENC_CNAT8 and hdr.count == 3
        decoded.append(signed(codec.aggregate([np.asarray(payload)], wire.ENC_CNAT8)))
        if chunk == chunks - 1:     # the last use, asked again: answered alike
            send_chunk(fabric, topo, 121, s, chunk, {"h2": w.T[1]}, wire.ENC_CNAT8)
            again = results(fabric, topo, ["h2"])["h2"][1]
            assert bytes(again) == bytes(payload)
    # A rerun in a new session: the same use rounds alike (the key has no session).
    s2 = fabric.session()
    send_chunk(fabric, topo, 121, s2, 0, dict(zip(HOSTS, w.T, strict=True)), wire.ENC_CNAT8)
    rerun = results(fabric, topo, HOSTS)["h1"][1]
    assert np.array_equal(signed(codec.aggregate([np.asarray(rerun)], wire.ENC_CNAT8)),
                          decoded[0])
    d = np.array(decoded)
    mag = np.abs(exact)
    lo = 1 << (np.floor(np.log2(mag)).astype(np.int64))
    assert np.all((np.abs(d) == lo) | (np.abs(d) == 2 * lo))
    assert np.all(np.sign(d) == np.sign(exact))
    # C_nat's variance at s: (s - lo)(2 lo - s); per element over the chunks
    sd = np.sqrt((mag - lo) * (2 * lo - mag) / chunks)
    err = np.abs(d.mean(axis=0) - exact)
    assert np.all(err <= 5 * sd + 1e-9), (d.mean(axis=0), exact)
    # not a constant rounding: elements strictly between two powers take both ways
    between = mag != lo
    assert all(len(set(d[:, i])) == 2 for i in np.flatnonzero(between))


def test_uq4_and_sum8_sum_exactly_in_lanes_and_a_sum_a_byte_cannot_carry_is_dropped(fabric):
    """UQ4 integers (every value in every position over 16 chunks) and a SUM8 contribution
    (a child switch's partial sum, added as it is) sum in the pair registers' 16-bit lanes
    into SUM8 results equal to the integer reference, every copy and a retransmission's
    answer alike. A sum above 255 cannot travel as SUM8: every copy of its result is
    dropped in the egress (SUM_OVERFLOW), and the answer to a retransmission; no result goes
    out. A SUM8 job takes UQ4 and SUM8 only, a FIXED32 or CNAT8 job neither (BAD_ENCODING);
    a UQ4 packet of the wrong length is BAD_LENGTH. None of it harms a slot: the next uses
    sum as ever."""
    topo = fabric.program([JobSpec(128, HOSTS, slots=4, encoding="sum8", partials="sum8"),
                           JobSpec(129, HOSTS, slots=4, encoding="fixed32"),
                           JobSpec(130, HOSTS, slots=4, encoding="cnat8")])
    s = fabric.session()
    every = (np.arange(ELEMS) % 16).astype(np.uint8)

    def wire_form(values, enc):           # UQ4 goes packed, two to a byte
        return codec.pack4(values) if enc == wire.ENC_UQ4 else values

    def check(chunk, pay, encs):
        for h, enc in encs.items():
            send_chunk(fabric, topo, 128, s, chunk, {h: wire_form(pay[h], enc)}, enc)
        got = results(fabric, topo, HOSTS)
        want = sum(signed(codec.switch_decode(pay[h], encs[h])) for h in HOSTS)
        for hdr, payload in got.values():
            assert (hdr.encoding, hdr.count, hdr.chunk) == (wire.ENC_SUM8, 3, chunk)
            assert np.array_equal(signed(payload), signed(want)), chunk
        return got["h1"][1]

    uq4 = dict.fromkeys(HOSTS, wire.ENC_UQ4)
    for chunk in range(16):
        pay = {h: np.roll(every, chunk + 5 * i) for i, h in enumerate(HOSTS)}
        last = check(chunk, pay, uq4)
    send_chunk(fabric, topo, 128, s, 15, {"h2": codec.pack4(pay["h2"])}, wire.ENC_UQ4)
    assert bytes(results(fabric, topo, ["h2"])["h2"][1]) == bytes(last)
    partial = np.full(ELEMS, 200, np.uint8)
    partial[::3] = 225                                   # with two 15s: 255, the most
    check(16, {"h1": partial, "h2": every[::-1].copy(), "h3": np.full(ELEMS, 15, np.uint8)},
          {"h1": wire.ENC_SUM8, "h2": wire.ENC_UQ4, "h3": wire.ENC_UQ4})
    # One lane above 255, the high one of its word, then the low one: dropped, both uses.
    before = fabric.counters("s1")
    for chunk, k in ((17, 4), (18, 7)):
        over = np.zeros(ELEMS, np.uint8)
        over[k] = 250
        send_chunk(fabric, topo, 128, s, chunk, {"h1": over}, wire.ENC_SUM8)
        send_chunk(fabric, topo, 128, s, chunk, {h: codec.pack4(every) for h in HOSTS[1:]},
                   wire.ENC_UQ4)
    send_chunk(fabric, topo, 128, s, 17, {"h2": codec.pack4(every)}, wire.ENC_UQ4)  # again
    f1 = framer(topo, "h1")
    bad = {BAD_ENCODING: [
        f1.build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 128, s, 3, 0, 127, 1, 19,
                 np.ones(ELEMS, np.int32)),
        f1.build(wire.MSG_CONTRIB, wire.ENC_UQ4, 129, s, 3, 0, 127, 1, 3, codec.pack4(every)),
        f1.build(wire.MSG_CONTRIB, wire.ENC_SUM8, 129, s, 3, 0, 127, 1, 3, every),
        f1.build(wire.MSG_CONTRIB, wire.ENC_UQ4, 130, s, 3, 0, 127, 1, 3, codec.pack4(every))]}
    short = bytearray(f1.build(wire.MSG_CONTRIB, wire.ENC_UQ4, 128, s, 3, 0, 127, 1, 19,
                               codec.pack4(every)))
    short[38:40] = (int.from_bytes(short[38:40], "big") - 1).to_bytes(2, "big")
    bad[BAD_LENGTH] = [bytes(short[:-1])]
    for frames in bad.values():
        for frame in frames:
            fabric.send("h1", frame)
    # Narrowed in the egress, as on Tofino: each copy of the two uses' results (three
    # workers each) and the answer to the one asking again is dropped there.
    copies = 2 * len(HOSTS) + 1
    want = {("s1", "drops_in", r): len(f) for r, f in bad.items()}
    want["s1", "drops_out", SUM_OVERFLOW] = copies
    delta = fabric.wait_counters(before, want, switches=("s1",))
    assert delta.of("s1", "drops_in") == {r: len(f) for r, f in bad.items()}
    assert delta.of("s1", "drops_out") == {SUM_OVERFLOW: copies}
    assert not any(fabric.quiet(HOSTS).values())
    pay = {h: np.roll(every, i) for i, h in enumerate(HOSTS)}
    check(19, pay, uq4)
    send_chunk(fabric, topo, 129, s, 3, dict.fromkeys(HOSTS, np.ones(ELEMS, np.int32)),
               wire.ENC_FIXED32)
    for hdr, payload in results(fabric, topo, HOSTS).values():
        assert hdr.encoding == wire.ENC_FIXED32 and np.all(signed(payload) == 3)


def test_each_check_drops_and_counts_and_touches_no_slot(fabric):
    """The admit table's entries in their order, and the slot's STALE and EARLY: each bad
    packet is counted by its reason and sends nothing; the use goes on unharmed."""
    topo = fabric.program([JobSpec(122, HOSTS, slots=4, encoding="fixed32", max_exp=140)])
    s = fabric.session()
    ones = np.ones(ELEMS, np.int32)
    f1 = framer(topo, "h1")

    def contrib(**kw):
        a = dict(msg_type=wire.MSG_CONTRIB, encoding=wire.ENC_FIXED32, job_id=122,
                 session=s, slot=1, version=0, exp=127, count=1, chunk=1, payload=ones)
        a.update(kw)
        return f1.build(**a)

    # Use 1 of slot 1 completes (chunk 1), and its next use (chunk 9) is open on version 0
    # with h1's part in it.
    send_chunk(fabric, topo, 122, s, 1, dict.fromkeys(HOSTS, ones), wire.ENC_FIXED32)
    results(fabric, topo, HOSTS)
    before = fabric.counters("s1")
    bad = {
        UNKNOWN_JOB: [contrib(job_id=999)],
        BAD_VERSION: [contrib(version=2)],
        WRONG_SESSION: [contrib(session=s + 1000)],
        BAD_SLOT: [contrib(slot=4)],
        BAD_EXP: [contrib(exp=141)],
        BAD_ENCODING: [contrib(encoding=wire.ENC_NAT4, payload=bytes(ELEMS // 2))],
        BAD_RESULT_PORT: [contrib(msg_type=wire.MSG_RESULT)],
        EARLY: [contrib(chunk=17, slot=1, version=0)],
        STALE: [contrib(chunk=1 - 8 & M32, slot=1, version=0)],
    }
    short = bytearray(contrib())
    short[38:40] = (int.from_bytes(short[38:40], "big") - 4).to_bytes(2, "big")
    bad[BAD_LENGTH] = [bytes(short)]
    for frames in bad.values():
        for frame in frames:
            fabric.send("h1", frame)
    # a host outside the job
    fabric.send("h4", framer(topo, "h4").build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 122, s, 1,
                                               0, 127, 1, 1, ones))
    want = {("s1", "drops_in", r): len(f) for r, f in bad.items()}
    want["s1", "drops_in", FOREIGN_PORT] = 1
    delta = fabric.wait_counters(before, want, switches=("s1",))
    assert delta.of("s1", "drops_in") == {k[2]: v for k, v in want.items()}
    assert not any(fabric.quiet([*HOSTS, "h4"]).values())
    # The slot was not moved on: use 1's next use (chunk 9) opens and completes as ever.
    pay = {h: np.full(ELEMS, i + 1, np.int32) for i, h in enumerate(HOSTS)}
    send_chunk(fabric, topo, 122, s, 9, pay, wire.ENC_FIXED32)
    for hdr, payload in results(fabric, topo, HOSTS).values():
        assert hdr.chunk == 9 and np.array_equal(signed(payload), np.full(ELEMS, 6))


def test_a_new_session_opens_every_slot_afresh(fabric):
    """The session lives in the job's entry: after a move, the new session's first chunk of
    each slot and version opens a use (the use cells the control plane resets), whatever the
    old session left half done, and the old session's packets are WRONG_SESSION."""
    topo = fabric.program([JobSpec(123, HOSTS, slots=2, encoding="fixed32")])
    s1 = fabric.session()
    ones = np.ones(ELEMS, np.int32)
    for chunk in range(3):
        send_chunk(fabric, topo, 123, s1, chunk, dict.fromkeys(HOSTS, ones), wire.ENC_FIXED32,
                   slots=2)
        results(fabric, topo, HOSTS)
    send_chunk(fabric, topo, 123, s1, 3, {"h1": ones * 100}, wire.ENC_FIXED32,
               slots=2)  # half done
    s2 = fabric.session()
    before = fabric.counters("s1")
    send_chunk(fabric, topo, 123, s1, 3, {"h2": ones}, wire.ENC_FIXED32, slots=2)
    fabric.wait_counters(before, {("s1", "drops_in", WRONG_SESSION): 1}, switches=("s1",))
    for chunk in range(4):
        pay = {h: ones * (chunk + 2) for h in HOSTS}
        send_chunk(fabric, topo, 123, s2, chunk, pay, wire.ENC_FIXED32, slots=2)
        for hdr, payload in results(fabric, topo, HOSTS).values():
            assert (hdr.session, hdr.chunk) == (s2, chunk)
            assert np.array_equal(signed(payload), np.full(ELEMS, 3 * (chunk + 2)))


def twin_chaos(fabric, tree: str, result: str, contrib: int, seed: int, job_id: int):
    partials = "sum8" if result == "sum8" else "fixed32"
    topo = fabric.program([JobSpec(job_id, TREES[tree], slots=4, encoding=result,
                                   partials=partials)])
    fabric.uncompared()
    session = fabric.session()
    rng = np.random.default_rng(seed)
    # No corrupted copies: the profile checks no payload (docs/PROTOCOL.md "Tofino
    # profile"): on real links the MACs' FCS drops them before the switch.
    chaos = Chaos(loss=float(rng.uniform(0.1, 0.3)), corrupt=0.0, new_session=0.05,
                  early=0.05)
    before = fabric.counters()
    elements, ports = run_chaos(lambda h: FabricPort(fabric, h), topo, job_id, session, seed,
                                chaos, 3, 9, contrib, elems=ELEMS, framer=framer)
    fabric.quiet(TREES[tree])
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    delta = fabric.counters() - before
    drops: dict[int, int] = {}
    for s in {topo.attachment(w).node for w in TREES[tree]}:
        for reason, count in delta.of(s, "drops_in").items():
            drops[reason] = drops.get(reason, 0) + count
    assert drops.get(WRONG_SESSION, 0) == done["old_session"] + done["new_session"], drops
    assert drops.get(EARLY, 0) == done["early"], drops
    check_stale_replay(fabric, topo, TREES[tree][0], ports[0])
    print(f"{fabric.name} twin {tree} {result}: {elements} elements exact; chaos {done}; "
          f"drops {drops}")


# CNAT8 both ways on one switch; on the tree FIXED32 contributions and CNAT8 results, which
# cross a leaf on their way down, and UQ4 in lanes with SUM8 partial sums up and SUM8
# results down. (CNAT8 up and FIXED32 down: the exact-sums test above, and the rerun test's
# tree.)
@pytest.mark.uncompared
@pytest.mark.parametrize("tree,result,contrib,job_id", [
    ("one-switch", "cnat8", wire.ENC_CNAT8, 124),
    ("two-level", "cnat8", wire.ENC_FIXED32, 125),
    ("two-level", "sum8", wire.ENC_UQ4, 126),
])
def test_exact_sums_under_chaos(fabric, tree, result, contrib, job_id):
    twin_chaos(fabric, tree, result, contrib, seed=job_id, job_id=job_id)


@pytest.mark.uncompared
def test_a_rerun_of_a_seed_gives_the_same_models_despite_loss(fabric):
    """Reproducible on the twin: CNAT8 both ways on the two-level tree, its rounding bits
    the hash of the job's key and the use, each run losing other frames."""
    check_reruns(fabric, 127, TREES["two-level"], "cnat8", framer=framer, elems=ELEMS)
