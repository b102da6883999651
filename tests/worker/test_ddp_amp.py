"""Non-finite gradients in DDP training, as PyTorch users meet them: loss scaling
(torch.amp.GradScaler) whose first steps overflow skips those steps on every rank through
the switch exactly where Gloo's allreduce skips them, and every rank ends with one model;
a NaN in one rank's bucket comes back NaN on every rank (docs/PROTOCOL.md "Non-finite
values")."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from tests.worker.ddp_switch import softswitch_missing, switch_clients  # noqa: E402
from tests.worker.test_ddp_hook import SIZES, Probe  # noqa: E402
from worker.ddp.hook import HookState, comm_hook  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.ddp.train import DDPConfig, train  # noqa: E402
from worker.ddp.workload import load_mnist1d  # noqa: E402

needs_switch = pytest.mark.skipif(softswitch_missing() is not None,
                                  reason=softswitch_missing() or "")
WORKERS = 4


def skipped(result):
    return [s["skipped"] for s in result["steps"]]


@needs_switch
@pytest.mark.parametrize("encoding, mode", [("cnat8", "layer"), ("fixed32", "model")])
def test_grad_scaler_skips_the_overflowing_steps_where_gloo_does(encoding, mode):
    """float16 forward, loss scaled from 2^24: its backward overflows (NaN and inf in the
    gradients) until the scaler has halved the scale enough."""
    data = load_mnist1d()
    cfg = DDPConfig(steps=10, eval_every=10, mode=mode, amp_scale=2.0 ** 24,
                    amp_backoff=0.5, seed=3)
    gloo = run_ranks(WORKERS, lambda rank, group: train(group, cfg, data=data))
    _, make_client = switch_clients(WORKERS, encoding)

    def body(rank, group):
        client = make_client(rank)
        out = train(group, cfg, allreduce=client.allreduce, data=data)
        out["nonfinite_chunks"] = client.stats.nonfinite_chunks
        return out

    switch = run_ranks(WORKERS, body)
    for out in gloo + switch:
        assert not isinstance(out, BaseException), out
    want = skipped(gloo[0])
    assert want[:2] == [True, True] and not want[-1], want   # the first steps overflowed
    for out in switch:
        assert skipped(out) == want
        assert out["params_sha256"] == switch[0]["params_sha256"]
        assert out["nonfinite_chunks"] > 0
    for out in gloo:
        assert out["params_sha256"] == gloo[0]["params_sha256"]
    # the steps the scaler took trained: the model moved on from its start
    assert switch[0]["final_test_accuracy"] != switch[0]["initial_test_accuracy"]


@needs_switch
@pytest.mark.parametrize("mode", ["layer", "model"])
def test_a_nan_in_one_rank_s_gradient_comes_back_nan_on_every_rank(mode):
    # two slots: the NaN's chunk is not among the first chunks, which are primed together
    _, make_client = switch_clients(WORKERS, "cnat8", window=2)

    def body(rank, group):
        client = make_client(rank)
        model = Probe()
        ddp = DDP(model, process_group=group)
        state = HookState(model, group, allreduce=client.allreduce, mode=mode)
        ddp.register_comm_hook(state, comm_hook)
        xs = [np.full(n, 0.5, np.float32) for n in SIZES]
        if rank == 1:
            xs[0][500] = np.nan
        ddp([torch.from_numpy(x) for x in xs]).backward()
        return [p.grad.numpy().copy() for p in model.parameters()], state.error

    out = run_ranks(WORKERS, body)
    for o in out:
        assert not isinstance(o, BaseException), o
    for grads, error in out:
        assert error is None
        assert np.isnan(grads[0][500])
        nan0 = [np.isnan(g) for g in out[0][0]]
        assert all(np.array_equal(np.isnan(g), m) for g, m in zip(grads, nan0, strict=True))
        # one chunk of 168 is NaN; what the others hold is the mean, 0.5
        assert sum(int(np.isnan(g).sum()) for g in grads) == 168
        assert all(np.all(g[~np.isnan(g)] == 0.5) for g in grads)
