"""Exact sums under chaos (tests/dataplane/chaos.py): real allreduce clients, one thread each,
through the compiled program on both targets, on a single switch and on an unbalanced
two-level tree (3 workers under one leaf, 1 under the other). Every chunk's result is
compared bit for bit with the integer sum of what the workers sent (harness/workers.check_exact);
no call may hang, whatever strays the workers' ports add: replays (STALE), older and newer
sessions (WRONG_SESSION), uses ahead of any worker's (EARLY), corrupted frames (the
parser's BAD_LENGTH or BAD_ENCODING, else BAD_UDP_CHECKSUM), each reaching the switch and
counted. Chunks at the job's largest exponent, all of one sign, put the sums at the
headroom's bound. The three-level tree runs on softswitch in process
(tests/worker/test_allreduce_chaos.py).

CI runs SEEDS (a window of 4 slots, 3 calls of 9 chunks); NATSWITCH_CHAOS_LONG=1 runs
LONG_SEEDS with a window of 32 and 4 calls of 400 chunks: 4 x 268,000 elements per target.
A seed that ever fails stays in SEEDS as a regression case."""

from __future__ import annotations

import os

import numpy as np
import pytest

from controller.topology import JobSpec
from harness.fabric import FabricPort
from harness.workers import Trace, check_exact, run_workers
from tests.dataplane.chaos import Chaos, ChaosPort
from tests.dataplane.packets import (
    BAD_ENCODING,
    BAD_LENGTH,
    BAD_UDP_CHECKSUM,
    EARLY,
    STALE,
    WRONG_SESSION,
)
from worker import hadamard, wire
from worker.allreduce import AllReduceClient, job_params

ELEMS = wire.ELEMS
LONG = bool(os.environ.get("NATSWITCH_CHAOS_LONG"))
SEEDS = [1, 2]
LONG_SEEDS = [101, 102]
TREES = {"one-switch": ("h1", "h2", "h3"), "two-level": ("h1", "h2", "h3", "h33")}
WINDOW = 32 if LONG else 4
CALLS, CHUNKS = (4, 400) if LONG else (3, 2 * WINDOW + 1)


class Caller:
    """A client whose port learns where each call starts (for stale results)."""

    def __init__(self, client: AllReduceClient, port: ChaosPort):
        self.client, self.port = client, port

    def allreduce(self, tensor):
        self.port.new_call()
        return self.client.allreduce(tensor)


def tensors_for(n: int, calls: int, chunks: int, max_exp: int, rng,
                worst: bool = True, elems: int = ELEMS) -> list[list[np.ndarray]]:
    """Per worker and call: chunks spanning octaves, and (`worst`) one chunk per call at the
    job's largest finite exponent (max_exp - 1: max_exp marks a non-finite chunk) with the
    same sign at every worker (the sum at its bound)."""
    top = np.nextafter(np.float32(2.0 ** (max_exp - 127)), np.float32(0))
    out = [[None] * calls for _ in range(n)]
    for k in range(calls):
        worst = int(rng.integers(chunks)) if worst else False
        size = chunks * elems - int(rng.integers(elems))
        sign = np.where(rng.integers(0, 2, elems) == 1, -1, 1).astype(np.float32)
        for r in range(n):
            octaves = rng.integers(-20, 20, chunks).repeat(elems)
            t = (rng.standard_normal(chunks * elems) * 2.0 ** octaves).astype(np.float32)
            if worst is not False:
                t[worst * elems:(worst + 1) * elems] = top * sign
            out[r][k] = t[:size]
    return out


def run_chaos(make_port, topo, job_id: int, session: int, seed: int, chaos: Chaos,
              calls: int, chunks: int, contrib: int, elems: int = ELEMS, framer=None):
    """Runs the job's workers through chaos ports; returns (elements checked, ports).
    `elems` and `framer(topo, host)`: the profile's packet (default: the default profile's)."""
    spec = topo.job(job_id)
    n = len(spec.workers)
    rng = np.random.default_rng(seed)
    job = job_params(topo, job_id, session, contrib, elems)
    framer = framer or topo_framer
    traces = [Trace() for _ in range(n)]
    ports = {}

    def make(rank):
        ports[rank] = ChaosPort(make_port(spec.workers[rank]), chaos, seed * 100 + rank,
                                session, spec.slots)
        # The long run keeps the whole window in flight: an adaptive window halves on
        # every loss, and at 30% loss it would crawl. Backoff stops at 0.3 s: up to half the
        # round trips are lost, and at the default 1 s the calls mostly waited (more resends,
        # so more duplicates at the switch, not fewer).
        client = AllReduceClient(ports[rank], framer(topo, spec.workers[rank]), job,
                                 seed=seed * 100 + rank, trace=traces[rank], timeout=30,
                                 rto=0.3, rto_min=0.05, rto_max=0.3, adaptive_window=not LONG,
                                 initial_window=spec.slots if LONG else 8)
        return Caller(client, ports[rank])
    # UQ4 rotates each call's tensor: a chunk at the bound could leave it (and come back
    # marked non-finite); its sums are at most 15 per worker whatever the values.
    tensors = tensors_for(n, calls, chunks, spec.max_exp, rng,
                          worst=contrib != wire.ENC_UQ4, elems=elems)
    outputs, _, errors = run_workers(make, tensors, calls=calls, join_timeout=600)
    assert errors == [None] * n, f"seed {seed}: {errors}"
    checked = check_exact(traces, tensors, outputs, n, elems, job=job)
    rows = (hadamard.padded_size if contrib == wire.ENC_UQ4 else int)
    assert checked == sum(-(-rows(t.size) // elems) for t in tensors[0])
    for k in range(calls):
        assert all(np.array_equal(outputs[0][k], outputs[r][k]) for r in range(n))
    return sum(t.size for t in tensors[0]), ports


def check_stale_replay(fabric, topo, host: str, port: ChaosPort) -> None:
    """The first frame `host`'s client sent, sent again after the run: its slot has moved
    past both copies since, so its switch must drop it STALE. (Whether the schedule's own
    replays land STALE or as duplicates of a live use depends on the threads' timing.)"""
    switch = topo.attachment(host).node
    before = fabric.counters(switch)
    fabric.send(host, port.sent[0])
    delta = fabric.wait_counters(before, {(switch, "drops_in", STALE): 1}, switches=(switch,))
    assert delta.of(switch, "drops_in") == {STALE: 1}
    assert delta.of(switch, "events") == {}


def topo_framer(topo, host):
    from worker.frames import Framer

    h = topo.host(host)
    return Framer((h.mac, h.ip), (topo.service_mac, topo.service_ip))


@pytest.mark.uncompared
@pytest.mark.parametrize("seed", LONG_SEEDS if LONG else SEEDS)
@pytest.mark.parametrize("tree", list(TREES))
def test_exact_sums_under_chaos(fabric, tree, seed):
    rng = np.random.default_rng(seed)
    job_id = 90 + list(TREES).index(tree)
    result = "cnat8" if seed % 2 else "fixed32"
    contrib = wire.ENC_CNAT8 if seed % 3 else wire.ENC_FIXED32
    topo = fabric.program([JobSpec(job_id, TREES[tree], slots=WINDOW, encoding=result)])
    # Real clients in threads poll for results: each target's answers come at their own
    # moments, so the results are checked against the integer reference, not each other.
    fabric.uncompared()
    session = fabric.session()
    chaos = Chaos(loss=float(rng.uniform(0.1, 0.3)), new_session=0.05, early=0.05)
    before = fabric.counters()
    elements, ports = run_chaos(lambda h: FabricPort(fabric, h), topo, job_id, session, seed,
                                chaos, CALLS, CHUNKS, contrib)
    # Late answers to the last retransmissions: read them, so the next test starts quiet.
    fabric.quiet(TREES[tree])
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    left_out = [k for k, v in done.items() if not v and k != "corrupted_out"]
    assert not left_out, f"the schedule left something out: {done}"
    delta = fabric.counters() - before
    drops = {}
    for s in {topo.attachment(w).node for w in TREES[tree]}:
        for reason, count in delta.of(s, "drops_in").items():
            drops[reason] = drops.get(reason, 0) + count
    # Every flipped copy a client sent was dropped as malformed, by the first check it
    # fails: the parser's (an encoding no program knows: BAD_ENCODING; a flipped length or
    # type field leaves the frame short of what its header says: BAD_LENGTH), else the
    # checksum's. (A run may flip only frames on their way back, which the switch never
    # sees.)
    malformed = sum(drops.get(r, 0) for r in (BAD_UDP_CHECKSUM, BAD_LENGTH, BAD_ENCODING))
    assert malformed == done["corrupted_out"], drops
    # every copy of another session or use ahead reached the switch and was dropped for it
    assert drops.get(WRONG_SESSION, 0) == done["old_session"] + done["new_session"], drops
    assert drops.get(EARLY, 0) == done["early"], drops
    check_stale_replay(fabric, topo, TREES[tree][0], ports[0])
    print(f"{fabric.name} {tree} seed {seed}: {elements} elements in {CALLS} calls exact; "
          f"chaos {done}; switch drops {drops}")


# The 4-bit encodings (docs/PROTOCOL.md "Payload"): NAT4 summed as CNAT8 codes and sent down
# re-compressed, on one switch; UQ4's integers summed as they are, with exact SUM8 partial
# sums up the two-level tree and SUM8 results down.
FOUR_BIT = {"nat4": (wire.ENC_NAT4, "cnat8", "cnat8", "one-switch"),
            "uq4": (wire.ENC_UQ4, "sum8", "sum8", "two-level")}


@pytest.mark.uncompared
@pytest.mark.parametrize("name", list(FOUR_BIT))
def test_four_bit_exact_under_chaos(fabric, name):
    contrib, result, partials, tree = FOUR_BIT[name]
    seed = SEEDS[0]
    rng = np.random.default_rng(seed)
    job_id = 94 + list(FOUR_BIT).index(name)
    topo = fabric.program([JobSpec(job_id, TREES[tree], slots=WINDOW, encoding=result,
                                   partials=partials)])
    fabric.uncompared()
    session = fabric.session()
    chaos = Chaos(loss=float(rng.uniform(0.1, 0.3)), new_session=0.05, early=0.05)
    before = fabric.counters()
    elements, ports = run_chaos(lambda h: FabricPort(fabric, h), topo, job_id, session, seed,
                                chaos, CALLS, CHUNKS, contrib)
    fabric.quiet(TREES[tree])
    done = {k: sum(p.counts[k] for p in ports.values()) for k in ports[0].counts}
    delta = fabric.counters() - before
    drops = {}
    for s in {topo.attachment(w).node for w in TREES[tree]}:
        for reason, count in delta.of(s, "drops_in").items():
            drops[reason] = drops.get(reason, 0) + count
    assert drops.get(WRONG_SESSION, 0) == done["old_session"] + done["new_session"], drops
    assert drops.get(EARLY, 0) == done["early"], drops
    print(f"{fabric.name} {name} {tree}: {elements} elements in {CALLS} calls exact; "
          f"chaos {done}; switch drops {drops}")
