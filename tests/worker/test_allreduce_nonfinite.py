"""Non-finite gradients through the compiled program on softswitch, as Gloo carries them:
a chunk holding NaN, inf or a value beyond the job's range on one worker comes back NaN on
every worker, in the same call, with no round trip more (docs/PROTOCOL.md "Non-finite
values"); the other chunks are summed as usual and the next call is unharmed."""

import numpy as np
import pytest

from controller.topology import JobSpec, star
from harness.network import SwitchNetwork, softswitch_missing
from harness.workers import run_workers
from worker import wire
from worker.allreduce import AllReduceClient

ELEMS = wire.ELEMS
N = 4
HOSTS = [f"h{i + 1}" for i in range(N)]
SLOTS = 4

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")

RESULTS = {"fixed32": "fixed32", "cnat8": "cnat8", "nat4": "cnat8", "uq4": "sum8"}


def run(encoding, tensors, calls=1, max_exp=158):
    topo = star(N).with_jobs([JobSpec(1, tuple(HOSTS), slots=SLOTS,
                                      encoding=RESULTS[encoding], partials=RESULTS[encoding],
                                      max_exp=max_exp)])
    net = SwitchNetwork(topo)
    job = net.job_params(1, wire.ENCODING_BY_NAME[encoding])

    def make(rank):
        return AllReduceClient(net.ports[HOSTS[rank]], net.framer(HOSTS[rank]), job,
                               seed=rank, timeout=5)

    outputs, clients, errors = run_workers(make, tensors, calls=calls)
    assert errors == [None] * N, errors
    return outputs, clients


def tensors(chunks, seed=0):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(chunks * ELEMS).astype(np.float32)] for _ in range(N)]


def nan_rows(out):
    rows = np.isnan(out.reshape(-1, ELEMS))
    assert np.array_equal(rows.all(axis=1), rows.any(axis=1)), "a chunk partly NaN"
    return set(np.flatnonzero(rows.all(axis=1)).tolist())


@pytest.mark.parametrize("encoding", ["fixed32", "cnat8", "nat4"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 2.0 ** 31])
def test_a_nonfinite_chunk_on_one_worker_comes_back_nan_on_every_worker(encoding, bad):
    xs = tensors(3 * SLOTS, seed=7)
    kept = [x[0].copy() for x in xs]
    xs[2][0][6 * ELEMS + 11] = bad       # chunk 6: not among the primed first chunks
    outputs, clients = run(encoding, xs)
    assert np.array_equal(xs[2][0][:6 * ELEMS], kept[2][:6 * ELEMS])     # input untouched
    # Every other chunk is what the same seeds give without the bad value: its draws are
    # keyed by the chunk, and the mark travels in the exponent field only.
    ref, ref_clients = run(encoding, [[k] for k in kept])
    for r in range(N):
        out = outputs[r][0]
        assert nan_rows(out) == {6}
        finite = ~np.isnan(out)
        assert np.array_equal(out[finite], ref[r][0][finite])
        assert np.array_equal(out[finite], outputs[0][0][finite])
        # no round more than the finite call: the same new uses sent
        st, ref_st = clients[r].stats, ref_clients[r].stats
        assert st.nonfinite_chunks == 1 and ref_st.nonfinite_chunks == 0
        assert (st.packets_sent - st.retransmissions
                == ref_st.packets_sent - ref_st.retransmissions)


def test_a_first_chunk_marks_every_slot_s_first_chunk_and_the_next_call_is_unharmed():
    """The priming round negotiates one exponent for the first chunk of every slot, so a
    mark there makes all of them NaN (the documented limit); the next call sums exactly as
    on a fresh job."""
    first = tensors(2 * SLOTS, seed=3)
    second = tensors(2 * SLOTS, seed=4)
    clean = [[a[0].copy(), b[0]] for a, b in zip(first, second, strict=True)]
    first[1][0][2 * ELEMS] = np.nan
    xs = [[a[0], b[0]] for a, b in zip(first, second, strict=True)]
    outputs, _ = run("cnat8", xs, calls=2)
    ref, _ = run("cnat8", clean, calls=2)
    for r in range(N):
        assert nan_rows(outputs[r][0]) == set(range(SLOTS))
        assert np.array_equal(outputs[r][0][SLOTS * ELEMS:], ref[r][0][SLOTS * ELEMS:])
        assert nan_rows(outputs[r][1]) == set()
        assert np.array_equal(outputs[r][1], ref[r][1])


def test_uq4_marks_the_rotated_chunk_and_its_rotation_block():
    xs = tensors(8, seed=5)
    xs[0][0][5] = np.inf
    outputs, _ = run("uq4", xs)
    for r in range(N):
        assert np.isnan(outputs[r][0][:1024]).all()
        assert np.array_equal(np.isnan(outputs[r][0]), np.isnan(outputs[0][0]))


def test_values_below_the_bound_are_summed_and_at_it_are_marked():
    """max_exp 140: values below 2^13 are finite; 2^13 is the job's mark."""
    xs = tensors(2 * SLOTS, seed=9)
    xs[0][0][5 * ELEMS] = np.float32(2.0 ** 13) * np.float32(0.999)
    xs[3][0][7 * ELEMS] = np.float32(2.0 ** 13)
    outputs, _ = run("fixed32", xs, max_exp=140)
    for r in range(N):
        assert nan_rows(outputs[r][0]) == {7}
        assert abs(outputs[r][0][5 * ELEMS] - 2.0 ** 13 * 0.999 / N) < 1
