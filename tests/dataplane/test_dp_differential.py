"""Property: BMv2 and softswitch agree on any traffic. Hypothesis draws rounds of a job's
workers' contributions (protocol-valid: each round the next use of its slot) and mixes in
malformed copies, copies of another session or use number and other header corruptions with
a valid checksum, duplicates, losses and reorderings; both targets get the same frames in
the same order, and harness/diff.py compares every frame out (in order per host port),
every counter and every register.

Five jobs: FIXED32 results on one switch, CNAT8 results re-compressed on the switch (the
rounding bits are a hash of the packet on both targets: every frame equal), a
two-level tree (s1 and s2 send partial sums to s3), NAT4 contributions (any nibble, 0x8
included: BAD_CODE) with CNAT8 results, and UQ4 contributions with SUM8 results."""

import os

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from controller.topology import JobSpec
from tests.dataplane.packets import ELEMS, contrib, random_cnat, random_fixed
from worker import frames as wire_frames
from worker import wire

JOBS = [JobSpec(61, ("h1", "h2", "h3"), slots=4),
        JobSpec(62, ("h4", "h5"), slots=4, encoding="cnat8"),
        JobSpec(63, ("h6", "h33"), slots=2),
        JobSpec(64, ("h7", "h8"), slots=2, encoding="cnat8"),        # NAT4 up
        JobSpec(65, ("h10", "h11"), slots=2, encoding="sum8")]       # UQ4 up
FOUR_BIT = {64: wire.ENC_NAT4, 65: wire.ENC_UQ4}
OUTSIDER = "h9"                     # in no job: its contributions are from a foreign port
HOSTS = sorted({h for j in JOBS for h in j.workers} | {OUTSIDER})
AGG = 14 + 20 + 8                   # where the aggregation header starts
# Each edit adds a broken copy of a frame (the original stays), except "dup" (a second
# identical copy later on: a replay once its use is over) and "lose" (the frame is never
# sent). "session", "chunk" and "header" copies keep a valid UDP checksum: another session,
# another use number (older or ahead), any byte from the session to the chunk.
EDITS = ("dup", "lose", "cut", "byte", "encoding", "version", "type", "slot", "job", "ttl",
         "checksum", "foreign", "session", "chunk", "header")
EXAMPLES = int(os.environ.get("NATSWITCH_DIFF_EXAMPLES", "20"))
# Shrinking a failure runs BMv2 hundreds of times (its 5-minute limit, measured): off unless
# asked for; the failing example is printed either way.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + \
    ([Phase.shrink] if os.environ.get("NATSWITCH_DIFF_SHRINK") else [])

rounds_st = st.lists(st.tuples(st.integers(0, len(JOBS) - 1), st.integers(0, 3),
                               st.integers(0, 2**32 - 1)),
                     min_size=1, max_size=5)
edits_st = st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 1 << 16),
                              st.integers(0, 1 << 16)), max_size=8)
swaps_st = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 1 << 16)), max_size=6)


def build(topo, session, rounds):
    """[(host, frame)]: each round is one contribution from every worker of its job to the
    next use of its slot."""
    out, uses = [], {}
    for job_i, slot, seed in rounds:
        job = JOBS[job_i]
        slot %= job.slots
        use = uses.get((job.id, slot), 0)
        uses[job.id, slot] = use + 1
        rng = np.random.default_rng(seed)
        for host in job.workers:
            if job.id in FOUR_BIT:
                nibbles = rng.integers(0, 16, ELEMS).astype(np.uint8)
                out.append((host, contrib(topo, host, job.id, session, slot, nibbles, use=use,
                                          encoding=FOUR_BIT[job.id])))
                continue
            values = (random_cnat(rng, 20) if job.encoding == "cnat8"
                      else random_fixed(rng, 1 << 20))
            out.append((host, contrib(topo, host, job.id, session, slot, values, use=use)))
    return out


def broken(kind: str, frame: bytes, a: int, b: int) -> bytes:
    f = bytearray(frame)
    if kind == "cut":
        return frame[:len(frame) - 1 - a % (len(frame) - AGG)]
    if kind == "byte":
        f[a % len(f)] = b & 0xFF
    elif kind == "encoding":
        f[AGG + 1] = b & 0xFF
    elif kind == "version":
        f[AGG + 8] = 2 + b % 254
    elif kind == "type":
        f[AGG] = b & 0xFF
    elif kind == "slot":
        f[AGG + 6:AGG + 8] = (2 + b % 0xFFFE).to_bytes(2, "big")
    elif kind == "job":
        f[AGG + 2:AGG + 4] = (100 + b % 1000).to_bytes(2, "big")
    elif kind == "ttl":
        pkt = Ether(frame)
        pkt[IP].ttl = b % 2
        pkt[IP].chksum = None
        return bytes(pkt)
    elif kind == "checksum":
        f[24] ^= 1 + b % 255
    elif kind in ("session", "chunk", "header"):
        if kind == "session":
            at, size, delta = AGG + 4, 2, 1 + b % 0xFFFF
        elif kind == "chunk":                   # up to 2^15 uses of a 4-slot job either way
            at, size, delta = AGG + 12, 4, ((b - (1 << 15)) << (a % 3)) or 1
        else:
            at, size, delta = AGG + 4 + a % 12, 1, 1 + b % 255
        bits = 8 * size
        field = int.from_bytes(f[at:at + size], "big")
        f[at:at + size] = ((field + delta) % (1 << bits)).to_bytes(size, "big")
        return wire_frames.with_udp_checksum(bytes(f))
    return bytes(f)


def mix(frames, edits, swaps):
    frames = list(frames)
    for kind, a, b in edits:
        i = a % len(frames)
        host, frame = frames[i]
        if kind == "dup":
            frames.insert(i + 1 + b % (len(frames) - i), (host, frame))
        elif kind == "lose":
            if len(frames) > 1:
                frames.pop(i)
        elif kind == "foreign":
            frames.insert(i, (OUTSIDER, frame))
        else:
            frames.insert(i + 1, (host, broken(kind, frame, a, b)))
    for a, b in swaps:
        i, j = a % len(frames), b % len(frames)
        frames[i], frames[j] = frames[j], frames[i]
    return frames


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=PHASES,
          report_multiple_bugs=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rounds=rounds_st, edits=edits_st, swaps=swaps_st)
def test_bmv2_and_softswitch_agree_on_any_traffic(both, rounds, edits, swaps):
    topo = both.program(JOBS)
    session = both.session()
    frames = mix(build(topo, session, rounds), edits, swaps)
    for host, frame in frames:
        both.send(host, frame)
    both.quiet(HOSTS)           # every frame out compared, in order per host
    both.check()                # counters and registers compared


def test_the_comparison_catches_a_difference(both):
    """The harness is not blind: a register softswitch alone changed, and a frame only one
    target emitted, are both reported."""
    import pytest

    from harness.diff import Mismatch

    topo = both.program(JOBS[:1])
    session = both.session()
    reg = both.soft.switches["s1"].registers["NatIngress.agg.max_exp"]
    reg.write(3, reg.read(3) ^ 1)
    with pytest.raises(Mismatch, match=r"max_exp\[3\]: BMv2"):
        both.check()                # and it puts softswitch's register back to BMv2's
    both.check()
    job = JOBS[0]
    frame = contrib(topo, "h1", job.id, session, 0, random_fixed(
        np.random.default_rng(0), 1 << 20))
    for h in job.workers:
        both.send(h, frame if h == "h1" else contrib(
            topo, h, job.id, session, 0, np.zeros(wire.ELEMS, np.int32)))
    both.soft.inbox["h2"].clear()   # as if softswitch had not sent h2 its result
    with pytest.raises(Mismatch, match="h2"):
        both.quiet(job.workers)
    both.quiet(HOSTS)
