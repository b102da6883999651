"""Mixed-precision DDP training through the compiled program on both targets (docs/PROTOCOL.md
"Non-finite values"): GradScaler's overflowing first steps are skipped on every rank exactly
where Gloo's allreduce skips them for the same seed, and every rank ends with one model.
(tests/worker/test_ddp_amp.py runs more cases on softswitch in process.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from controller.topology import JobSpec  # noqa: E402
from harness.fabric import FabricPort  # noqa: E402
from tests.dataplane.test_dp_chaos import topo_framer  # noqa: E402
from worker import wire  # noqa: E402
from worker.allreduce import AllReduceClient, job_params  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.ddp.train import DDPConfig, train  # noqa: E402
from worker.ddp.workload import load_mnist1d  # noqa: E402

HOSTS = ("h1", "h2", "h3", "h4")


@pytest.mark.uncompared
def test_grad_scaler_skips_the_overflowing_steps_where_gloo_does(fabric):
    topo = fabric.program([JobSpec(350, HOSTS, slots=32, encoding="cnat8")])
    fabric.uncompared()     # ranks in threads: each target answers at its own moments
    session = fabric.session()
    job = job_params(topo, 350, session, wire.ENC_CNAT8)
    data = load_mnist1d()
    cfg = DDPConfig(steps=6, eval_every=6, amp_scale=2.0 ** 24, amp_backoff=0.5, seed=3)
    gloo = run_ranks(len(HOSTS), lambda rank, group: train(group, cfg, data=data))

    def body(rank, group):
        client = AllReduceClient(FabricPort(fabric, HOSTS[rank]),
                                 topo_framer(topo, HOSTS[rank]), job, seed=rank, timeout=60)
        out = train(group, cfg, allreduce=client.allreduce, data=data)
        out["nonfinite_chunks"] = client.stats.nonfinite_chunks
        return out

    switch = run_ranks(len(HOSTS), body)
    fabric.quiet(HOSTS)
    for out in gloo + switch:
        assert not isinstance(out, BaseException), out
    want = [s["skipped"] for s in gloo[0]["steps"]]
    assert want[:2] == [True, True] and not want[-1], want
    for out in switch:
        assert [s["skipped"] for s in out["steps"]] == want
        assert out["params_sha256"] == switch[0]["params_sha256"]
        assert out["nonfinite_chunks"] > 0
