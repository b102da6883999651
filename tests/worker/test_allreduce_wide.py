"""The wide profile (p4src/build/wide/, 1456 elements per packet): the same program sums
exactly through softswitch in process, and what it cannot do is refused clearly -- by the
program (a counted TOO_WIDE drop), the controller, mininet/run.py and the worker."""

import sys
from pathlib import Path

import numpy as np
import pytest

from controller.profiles import PROFILES, check_jobs, job_problem
from controller.topology import JobSpec, leaf_spine, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import Trace, check_exact, check_sparse, run_workers
from worker import wire
from worker.allreduce import AllReduceClient
from worker.allreduce.sparse import SparseAllReduceClient, pads_empty

WIDE = PROFILES["wide"]
DROPS = "NatIngress.drops"
EVENTS = "NatIngress.agg.events"
BAD_LENGTH = 4
TOO_WIDE = 18

needs_softswitch = pytest.mark.skipif(softswitch_missing() is not None,
                                      reason=softswitch_missing() or "")


@pytest.fixture(scope="module")
def wide_net():
    """A builder of star networks on the wide program (compiled once per module)."""
    def make(n, encoding="cnat8", slots=8, mode="dense"):
        hosts = tuple(f"h{i + 1}" for i in range(n))
        topo = star(n).with_jobs([JobSpec(1, hosts, slots=slots, encoding=encoding,
                                          mode=mode)])
        return SwitchNetwork(topo, WIDE.bmv2_json), list(hosts)
    return make


@needs_softswitch
@pytest.mark.parametrize("n", [2, 4])
def test_wide_packets_sum_exactly_through_the_program(wide_net, n):
    net, hosts = wide_net(n)
    assert net.elems == WIDE.elems == 1456
    job = net.job_params(1, wire.ENC_CNAT8)
    traces = [Trace() for _ in range(n)]
    rng = np.random.default_rng(n)
    # Two calls: a partial last chunk, then more chunks than slots (slots reused).
    tensors = [[(rng.standard_normal(size) * (r + 1)).astype(np.float32)
                for size in (2 * WIDE.elems + 5, 11 * WIDE.elems)] for r in range(n)]

    def make(rank):
        h = hosts[rank]
        return AllReduceClient(net.ports[h], net.framer(h), job, seed=rank, timeout=20,
                               trace=traces[rank])
    outputs, clients, errors = run_workers(make, tensors, calls=2)
    assert errors == [None] * n
    assert check_exact(traces, tensors, outputs, n, elems=WIDE.elems) == 3 + 11
    # Every packet on the wire is a full CNAT8 frame of 1514 bytes (1500-byte MTU).
    assert clients[0].last.bytes_sent == clients[0].last.packets_sent * 1514
    assert net.counter("s1", DROPS, TOO_WIDE) == 0


@needs_softswitch
def test_the_wide_program_drops_cnat8_it_would_have_to_grow(wide_net):
    """A job whose results are FIXED32 (not refused here: SwitchNetwork installs what it is
    given) gets no result: each CNAT8 contribution is dropped and counted as TOO_WIDE."""
    net, hosts = wide_net(2, encoding="fixed32")
    before = net.counter("s1", DROPS, TOO_WIDE)
    frames = {h: net.framer(h).build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 1, 1, 0, 0, 130, 1, 0,
                                     np.ones(net.elems, np.uint8)) for h in hosts}
    assert {len(f) for f in frames.values()} == {1514}     # a full 1500-byte MTU
    for h in hosts:
        net.ports[h].send(frames[h])
    assert net.counter("s1", DROPS, TOO_WIDE) - before == 2
    assert all(net.ports[h].recv(0) is None for h in hosts)


@needs_softswitch
def test_a_sparse_cnat8_job_sums_exactly_on_the_wide_program(wide_net):
    """Sparse jobs take CNAT8 results on the wide profile, their EMPTY data packets padded
    (a 1456-byte CNAT8 sum would grow an unpadded one beyond BMv2's 512)."""
    n, slots = 3, 4
    net, hosts = wide_net(n, slots=slots, mode="sparse")
    assert pads_empty(wire.ENC_CNAT8, net.elems) and not pads_empty(wire.ENC_CNAT8, wire.ELEMS)
    job = net.job_params(1, wire.ENC_CNAT8)
    rng = np.random.default_rng(7)
    nb = 11                                 # blocks of 1456; block 3 nobody holds
    held = [sorted({0, 5} | set(rng.choice([1, 2, 4, 6, 7, 8, 9, 10], 3, replace=False)))
            for _ in range(n)]
    tensors = []
    for r in range(n):
        x = np.zeros(nb * WIDE.elems - 9, np.float32)
        for b in held[r]:
            x[b * WIDE.elems:(b + 1) * WIDE.elems] = rng.standard_normal(
                min(WIDE.elems, x.size - b * WIDE.elems)) * 2.0 ** (r - b % 3)
        tensors.append([x])
    traces = [Trace() for _ in range(n)]

    def make(rank):
        h = hosts[rank]
        return SparseAllReduceClient(net.ports[h], net.framer(h), job, seed=rank, timeout=20,
                                     trace=traces[rank], pad_empty=True)
    before = {i: net.counter("s1", DROPS, i) for i in (BAD_LENGTH, TOO_WIDE)}
    outputs, clients, errors = run_workers(make, tensors, calls=1)
    assert errors == [None] * n
    union = set().union(*map(set, held))
    assert check_sparse(traces, tensors, outputs, n, elems=WIDE.elems) == len(union)
    assert {i: net.counter("s1", DROPS, i) for i in before} == before


def sparse_frame(net, host, *, block, nxt, payload=None, flags=0, pad=False, chunk=0,
                 version=0, session=1, encoding=wire.ENC_CNAT8):
    return net.framer(host).build_sparse(wire.MSG_SPARSE_CONTRIB, encoding, 1, session, 0,
                                         version, 130, 1, chunk, block, nxt, payload,
                                         flags=flags, pad=pad)


@needs_softswitch
def test_the_wide_program_wants_empty_sparse_packets_padded(wide_net):
    """A data use's EMPTY packet without padding would grow by the 1456-byte CNAT8 sum: it
    is dropped as BAD_LENGTH (the default profile takes it); padded, it holds the sum."""
    net, hosts = wide_net(2, slots=1, mode="sparse")
    h1, h2 = hosts
    for h in hosts:     # the prime use: 2 blocks, each worker's first is block 0
        net.ports[h].send(sparse_frame(net, h, block=2, nxt=0, flags=wire.FLAG_PRIME))
    assert all(net.ports[h].recv(0) is not None for h in hosts)
    before = net.counter("s1", DROPS, BAD_LENGTH)
    net.ports[h1].send(sparse_frame(net, h1, block=0, nxt=wire.NO_BLOCK, chunk=1, version=1))
    assert net.counter("s1", DROPS, BAD_LENGTH) - before == 1
    net.ports[h1].send(sparse_frame(net, h1, block=0, nxt=wire.NO_BLOCK, chunk=1, version=1,
                                    pad=True))
    codes = np.full(net.elems, 3, np.uint8)
    net.ports[h2].send(sparse_frame(net, h2, block=0, nxt=wire.NO_BLOCK, chunk=1, version=1,
                                    payload=codes))
    results = [net.ports[h].recv(0) for h in hosts]
    assert net.counter("s1", DROPS, BAD_LENGTH) - before == 1
    assert {len(f) for f in results} == {14 + 1508}     # CNAT8 both ways: no growth
    hdr, payload = net.framer(h1).parse_sparse(results[0])
    assert hdr.msg_type == wire.MSG_SPARSE_RESULT and hdr.encoding == wire.ENC_CNAT8
    assert (hdr.block, hdr.next, hdr.count) == (0, wire.NO_BLOCK, 2)
    assert np.array_equal(payload, codes)               # 4 + 0: a power of two stays exact


@needs_softswitch
def test_the_wide_program_drops_a_padded_empty_packet_of_fixed32_results(wide_net):
    """A FIXED32 sum written over an EMPTY packet's padding grows it by 3 * 1456 bytes: the
    program drops it as TOO_WIDE (the controller refuses such a job beforehand)."""
    net, hosts = wide_net(2, encoding="fixed32", slots=1, mode="sparse")
    h1, _ = hosts
    for h in hosts:
        net.ports[h].send(sparse_frame(net, h, block=2, nxt=0, flags=wire.FLAG_PRIME,
                                       encoding=wire.ENC_FIXED32))
    assert all(net.ports[h].recv(0) is not None for h in hosts)
    before = net.counter("s1", DROPS, TOO_WIDE)
    net.ports[h1].send(sparse_frame(net, h1, block=0, nxt=wire.NO_BLOCK, chunk=1, version=1,
                                    pad=True, encoding=wire.ENC_FIXED32))
    assert net.counter("s1", DROPS, TOO_WIDE) - before == 1


def test_the_controller_refuses_what_the_wide_profile_cannot_aggregate():
    hosts = ("h1", "h2", "h3")
    ok = star(3).with_jobs([JobSpec(1, hosts, encoding="cnat8")])
    fixed = star(3).with_jobs([JobSpec(1, hosts, encoding="fixed32")])
    # h1, h2 on one leaf, h3 on the other: partial sums go up the tree.
    tree = leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding="cnat8")])
    tree_cnat = leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding="cnat8",
                                                       partials="cnat8")])
    check_jobs(WIDE, ok)
    check_jobs(WIDE, tree_cnat)
    for topo in (ok, fixed, tree, tree_cnat):
        check_jobs(PROFILES["default"], topo)           # 168 elements can grow
    with pytest.raises(ValueError, match="CNAT8 both ways only: fixed32 results"):
        check_jobs(WIDE, fixed)
    assert "fixed32 partial sums" in job_problem(WIDE, tree, tree.jobs[0])
    sparse = star(3).with_jobs([JobSpec(1, hosts, encoding="fixed32", mode="sparse")])
    check_jobs(PROFILES["default"], sparse)
    with pytest.raises(ValueError, match="sparse job's fixed32 results .* padding"):
        check_jobs(WIDE, sparse)
    check_jobs(WIDE, star(3).with_jobs([JobSpec(1, hosts, encoding="cnat8", mode="sparse")]))


def test_mininet_run_refuses_the_wide_profile_for_fixed32():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "mininet"))
    try:
        import run
    finally:
        sys.path.pop(0)

    def plan(*argv):
        return run.make_plan(run.build_parser().parse_args([*argv, "--switch", "soft"]))

    p = plan("--profile", "wide")
    args = run.worker_args(run.build_parser().parse_args(["--profile", "wide"]), p,
                           Path("t.json"), p.jobs[0])
    assert args[args.index("--elems") + 1] == "1456"
    assert args[args.index("--encoding") + 1] == "cnat8"
    with pytest.raises(run.UsageError, match="CNAT8 both ways only"):
        plan("--profile", "wide", "--result-encoding", "fixed32")
    with pytest.raises(run.UsageError, match="does not fit a 1500-byte MTU"):
        plan("--profile", "wide", "--encoding", "fixed32", "--result-encoding", "cnat8")
    with pytest.raises(run.UsageError, match="partial sums"):
        plan("--profile", "wide", "--topo", "leaf-spine")
    assert plan("--profile", "wide", "--topo", "leaf-spine", "--partials", "cnat8")
    # A sparse packet's block header takes the wide profile past the links' MTU.
    with pytest.raises(run.UsageError, match="1508 bytes of IPv4, beyond the links' 1500"):
        plan("--profile", "wide", "--sparse")
    assert plan("--sparse")


def test_the_wide4_profile_takes_the_4_bit_jobs_and_no_fixed32():
    """wide4 (1024 elements): UQ4 jobs (sum8 results and partial sums) and NAT4 ones (cnat8)
    pass the controller and mininet/run.py, whose workers get --elems 1024; FIXED32 results
    or partial sums are refused as on the wide profile, and the wide profile refuses the
    4-bit encodings."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "mininet"))
    try:
        import run
    finally:
        sys.path.pop(0)
    wide4, hosts = PROFILES["wide4"], ("h1", "h2", "h3")
    assert wide4.four_bit and wide4.cnat8_only and not WIDE.four_bit
    for enc, parts in (("sum8", "sum8"), ("cnat8", "cnat8")):
        check_jobs(wide4, leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding=enc,
                                                                 partials=parts)]))
    with pytest.raises(ValueError, match="takes cnat8 or sum8 results only"):
        check_jobs(wide4, star(3).with_jobs([JobSpec(1, hosts, encoding="fixed32")]))
    tree = leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding="cnat8")])
    assert "partials cnat8 or sum8" in job_problem(wide4, tree, tree.jobs[0])
    with pytest.raises(ValueError, match="CNAT8 both ways only: sum8 results"):
        check_jobs(WIDE, star(3).with_jobs([JobSpec(1, hosts, encoding="sum8")]))

    def plan(*argv):
        return run.make_plan(run.build_parser().parse_args([*argv, "--switch", "soft"]))
    for enc, result in (("uq4", "sum8"), ("nat4", "cnat8")):
        p = plan("--profile", "wide4", "--encoding", enc)
        assert p.jobs[0].encoding == result
        args = run.worker_args(run.build_parser().parse_args(
            ["--profile", "wide4", "--encoding", enc]), p, Path("t.json"), p.jobs[0])
        assert args[args.index("--elems") + 1] == "1024"
        assert args[args.index("--encoding") + 1] == enc
    with pytest.raises(run.UsageError, match="wide .* CNAT8 both ways only: sum8 results"):
        plan("--profile", "wide", "--encoding", "uq4")


def test_the_worker_refuses_fixed32_packets_beyond_the_mtu(tmp_path, capsys):
    from worker import main as worker_main

    path = tmp_path / "topo.json"
    star(3).with_jobs([JobSpec(1, ("h1", "h2"), encoding="cnat8")]).save(str(path))
    base = ["--topology", str(path), "--host", "h1", "--session", "3", "--elems", "1456"]
    assert worker_main.main([*base, "--encoding", "fixed32"]) == 2
    assert "do not fit a 1500-byte MTU" in capsys.readouterr().err
    assert worker_main.main([*base[:-1], "1457"]) == 2
    assert "--elems must be within 1..1456" in capsys.readouterr().err
    args = worker_main.build_parser().parse_args(base)
    assert worker_main.resolve(args)["encoding"] == "cnat8"
    assert worker_main.main([*base, "--sparse"]) == 2
    assert "a sparse cnat8 packet is 1508 bytes of IPv4" in capsys.readouterr().err


def test_the_controller_cli_refuses_a_job_before_pushing_the_wide_program():
    import argparse

    from controller import main as ctl
    from controller.session import ControllerError

    hosts = ("h1", "h2")
    args = argparse.Namespace(profile="wide", p4info=None, bmv2_json=None)
    fixed = star(2).with_jobs([JobSpec(1, hosts, encoding="fixed32")])
    with pytest.raises(ControllerError, match="CNAT8 both ways only"):
        ctl._load_pipeline(args, fixed)
    assert ctl._load_pipeline(args, star(2).with_jobs([JobSpec(1, hosts, encoding="cnat8")]))
    args.profile = "default"
    assert ctl._load_pipeline(args, fixed)


def test_the_tofino_profile_keeps_lanes_apart_from_fixed32_and_cnat8_up_a_tree():
    """The Tofino profile sums UQ4/SUM8 in lanes its admit table keeps for jobs whose
    results are SUM8: a job whose partial sums travel in the other kind is refused before
    any switch could drop them (BAD_ENCODING); on one switch there are no partials. Its
    4-bit encoding is UQ4 alone, and sparse jobs are refused."""
    tofino, hosts = PROFILES["tofino"], ("h1", "h2", "h3")
    assert tofino.four_bit == ("uq4",)
    for enc, parts in (("sum8", "sum8"), ("cnat8", "cnat8"), ("fixed32", "fixed32"),
                       ("cnat8", "fixed32")):
        check_jobs(tofino, leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding=enc,
                                                                  partials=parts)]))
    for enc, parts in (("sum8", "cnat8"), ("sum8", "fixed32"), ("cnat8", "sum8")):
        tree = leaf_spine(2, 1, 2).with_jobs([JobSpec(1, hosts, encoding=enc, partials=parts)])
        assert "use sum8 for both or for neither" in job_problem(tofino, tree, tree.jobs[0])
        check_jobs(tofino, star(3).with_jobs([JobSpec(1, hosts, encoding=enc, partials=parts)]))
    sparse = star(3).with_jobs([JobSpec(1, hosts, encoding="cnat8", mode="sparse")])
    with pytest.raises(ValueError, match="has no sparse jobs"):
        check_jobs(tofino, sparse)
