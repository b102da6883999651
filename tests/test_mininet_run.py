"""mininet/run.py's checks and plan, the worker failures it reports, the plot's title.

No root needed: nothing here builds an emulation (the end-to-end runs are in tests/e2e)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mininet.node", reason="Debian's mininet package is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mininet"))

import report  # noqa: E402
import run  # noqa: E402
from workers import WorkerGroup, WorkerProc  # noqa: E402


def plan(*argv: str):
    return run.make_plan(run.build_parser().parse_args([*argv, "--switch", "soft"]))


def test_the_runs_seed_reaches_every_jobs_topology_entry():
    """The switches' rounding keys come from the jobs' seed (controller/aggregation.py)."""
    assert [j.seed for j in plan("--seed", "41", "--jobs", "2").jobs] == [41, 41]
    assert [j.seed for j in plan().jobs] == [0]


@pytest.mark.parametrize("argv, message", [
    (["--compressor", "foo"], "--compressor foo: unknown compressor"),
    (["--topo", "fat-tree", "--hosts", "8"], "--hosts applies to --topo star only"),
    (["--k", "6"], "--k applies to --topo fat-tree only"),
    (["--topo", "fat-tree", "--k", "3"], "--k 3: must be an even number"),
    (["--loss", "1"], "--loss 1.0: must be within [0, 1)"),
    (["--bw", "0"], "--bw 0.0: must be above 0"),
    (["--workers", "9"], "--workers 9: the topology has 4 hosts"),
    (["--jobs", "5"], "--jobs 5: needs 1..4"),
    (["--seed", "-1"], "--seed -1: must be within 0..2^63-1"),
    (["--window", "100000"], "--window 100000: must be within 1..512"),
    (["--jobs", "3", "--window", "256"], "no room for job 3"),
    (["--steps", "-1"], "--steps -1: must be at least 0"),
    (["--rto", "0"], "--rto 0.0: must be above 0 s"),
    (["--timeout", "0"], "--timeout 0.0: must be above 0 s"),
    (["--aggregation", "ps", "--encoding", "fixed32"], "--encoding applies to --aggregation "
                                                        "switch only"),
    (["--aggregation", "ps", "--partials", "cnat8"], "--partials applies"),
    (["--aggregation", "ps", "--jobs", "3"], "do not split evenly into 3 jobs"),
    (["--sparse", "--framework", "torch", "--aggregation", "gloo"],
     "--sparse applies to --framework numpy, or --framework torch --aggregation switch only"),
    (["--model", "mlp", "--framework", "torch"], "--framework torch trains cnn or embedding"),
    (["--model", "cnn"], "--framework numpy trains mlp or embedding"),
    (["--sparse", "--partials", "cnat8"], "--partials applies to dense jobs"),
    (["--batch", "64"], "--batch applies to --framework torch only"),
    (["--framework", "torch", "--batch", "0"], "--batch 0: must be at least 1"),
    (["--framework", "torch", "--bucket-mb", "0"], "--bucket-mb 0.0: must be above 0 MB"),
    (["--framework", "torch", "--aggregation", "gloo", "--no-overlap"],
     "--no-overlap applies to --framework torch --aggregation switch only"),
    (["--network-bound", "--steps", "0"], "--network-bound runs a job"),
    (["--network-bound", "--switches-only"], "--network-bound runs a job"),
    (["--network-bound", "--jobs", "2"], "--network-bound picks one rate for one job"),
    (["--encoding", "uq4", "--result-encoding", "cnat8"], "UQ4 contributions need sum8"),
    (["--encoding", "nat4", "--result-encoding", "fixed32"], "NAT4 contributions need cnat8"),
    (["--encoding", "uq4", "--topo", "fat-tree", "--partials", "fixed32"],
     "UQ4 contributions need sum8 partial sums"),
    (["--encoding", "nat4", "--profile", "wide"], "profile wide has no nat4"),
    (["--encoding", "uq4", "--sparse"], "sparse jobs take FIXED32 or CNAT8"),
    (["--encoding", "cnat8", "--result-encoding", "sum8"],
     "CNAT8 contributions need fixed32 or cnat8 results"),
    (["--encoding", "fixed32", "--result-encoding", "sum8"], "FIXED32 contributions need"),
])
def test_a_bad_option_is_refused_before_anything_is_built(argv, message):
    with pytest.raises(run.UsageError) as e:
        plan(*argv)
    assert message in str(e.value)


def test_the_parameter_server_plan_gives_the_workers_what_the_topology_cannot():
    p = plan("--aggregation", "ps")
    assert p.ps_host == "h5" and [j.workers for j in p.jobs] == [("h1", "h2", "h3", "h4")]
    assert p.topo.jobs == []                      # the switches aggregate nothing
    args = run.worker_args(run.build_parser().parse_args([]), p, Path("t.json"), p.jobs[0])
    assert args[args.index("--baseline-ps") + 1] == p.topo.host("h5").ip
    assert args[args.index("--workers") + 1] == "4" and args[args.index("--window") + 1] == "64"
    head = run.header(run.build_parser().parse_args([]), p, Path("out"))
    assert "host parameter server on h5, float32 up, float32 down" in head
    assert "cnat8" not in head


def test_the_sparse_host_aggregator_plan():
    argv = ["--aggregation", "ps", "--sparse", "--model", "embedding"]
    p = plan(*argv)
    assert p.ps_host == "h5" and p.topo.jobs == [] and p.encoding == "cnat8"
    args = run.worker_args(run.build_parser().parse_args(argv), p, Path("t.json"), p.jobs[0])
    assert "--sparse" in args and args[args.index("--model") + 1] == "embedding"
    assert args[args.index("--ps-encoding") + 1] == "cnat8"
    head = run.header(run.build_parser().parse_args(argv), p, Path("out"))
    assert "sparse job, host block aggregator on h5, cnat8 up, cnat8 down" in head


def test_the_switch_plan_says_both_encodings():
    p = plan("--encoding", "fixed32", "--result-encoding", "cnat8")
    assert [j.encoding for j in p.jobs] == ["cnat8"] and p.topo.jobs == p.jobs
    head = run.header(run.build_parser().parse_args([]), p, Path("out"))
    assert "switch aggregation, fixed32 up, cnat8 down" in head


@pytest.mark.parametrize("encoding, result, partials", [("nat4", "cnat8", "cnat8"),
                                                        ("uq4", "sum8", "sum8")])
def test_the_4_bit_plans_give_their_jobs_the_sums_they_need(encoding, result, partials):
    p = plan("--encoding", encoding, "--topo", "leaf-spine")
    assert [(j.encoding, j.partials) for j in p.jobs] == [(result, partials)]
    head = run.header(run.build_parser().parse_args([]), p, Path("out"))
    assert f"switch aggregation, {encoding} up, {result} down" in head
    args = run.worker_args(run.build_parser().parse_args(["--encoding", encoding]), p,
                           Path("t.json"), p.jobs[0])
    assert args[args.index("--encoding") + 1] == encoding


def test_a_worker_without_a_result_reports_its_last_error_line(tmp_path):
    log = tmp_path / "h1.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; print('starting'); "
                                 "sys.exit('worker: job 1 is not in t.json')"],
                                stdout=f, stderr=subprocess.STDOUT)
    proc.wait(timeout=60)
    group = WorkerGroup([WorkerProc("h1", 1, 0, log, tmp_path / "h1.json", proc)])
    (result,) = group.results()
    assert result["error"] == (f"no result (exit code 1): worker: job 1 is not in t.json; "
                               f"see {log}")


def test_the_plot_title_names_loss_and_jobs():
    title = report.title({"topo": "star", "switch": "soft", "aggregation": "switch",
                          "encoding": "cnat8", "loss": 0.05, "jobs": 2}, 1)
    assert title == "star, 1 soft switch, cnat8 in-network, loss 0.05, 2 jobs"


def test_the_sparse_switch_plan_installs_a_sparse_job():
    argv = ["--sparse", "--encoding", "fixed32"]
    p = plan(*argv)
    assert [j.mode for j in p.jobs] == ["sparse"] and p.topo.jobs == p.jobs
    args = run.worker_args(run.build_parser().parse_args(argv), p, Path("t.json"), p.jobs[0])
    assert "--sparse" in args
    with pytest.raises(run.UsageError, match="(?i)sparse"):
        plan("--sparse", "--topo", "fat-tree")        # one switch only


def test_a_sparse_torch_plan_gives_its_ranks_the_sparse_client_and_the_embedding():
    import torch_workers

    argv = ["--framework", "torch", "--sparse", "--model", "embedding"]
    p = plan(*argv)
    assert [j.mode for j in p.jobs] == ["sparse"]
    args = torch_workers.worker_args(run.build_parser().parse_args(argv), p.encoding,
                                     Path("t.json"), p.topo, p.jobs[0])
    assert "--sparse" in args and args[args.index("--workload") + 1] == "embedding"
    dense = torch_workers.worker_args(run.build_parser().parse_args(["--framework", "torch"]),
                                      "cnat8", Path("t.json"), p.topo, p.jobs[0])
    assert "--sparse" not in dense and "--workload" not in dense


def test_the_language_model_reaches_the_ranks_and_is_not_judged_by_accuracy():
    import torch_workers

    argv = ["--framework", "torch", "--model", "charlm"]
    p = plan(*argv)
    args = run.build_parser().parse_args(argv)
    ranks = torch_workers.worker_args(args, p.encoding, Path("t.json"), p.topo, p.jobs[0])
    assert ranks[ranks.index("--workload") + 1] == "charlm"
    args.steps = 10
    assert run.short_of_target({"job": 1, "final_test_accuracy": 0.4}, args, "soft") is None
    with pytest.raises(run.UsageError, match="--model charlm"):
        plan("--model", "charlm")                   # numpy trains mlp or embedding


def test_a_default_torch_run_trains_to_the_target_where_steps_are_cheap(monkeypatch):
    args = run.build_parser().parse_args(["--framework", "torch", "--switch", "soft"])
    run.make_plan(args)
    assert args.steps == run.TORCH_STEPS and args.eval_every == run.TORCH_STEPS // 20
    # BMv2's per-packet work makes a switch-aggregated step take seconds: a short run...
    assert run.torch_steps("bmv2", "switch") == run.TORCH_STEPS_BMV2 < run.TORCH_STEPS
    # ...but Gloo's TCP through BMv2 and anything on softswitch still train to the target.
    assert run.torch_steps("bmv2", "gloo") == run.torch_steps("soft", "switch") == 400
    explicit = run.build_parser().parse_args(["--framework", "torch", "--steps", "7",
                                              "--switch", "soft"])
    run.make_plan(explicit)
    assert explicit.steps == 7 and explicit.eval_every == 5


def test_a_torch_run_short_of_the_target_says_why_and_what_gets_there():
    args = run.build_parser().parse_args(["--framework", "torch", "--steps", "30"])
    summary = {"job": 1, "final_test_accuracy": 0.24, "steps_per_second": 0.22,
               "bound": {"text": "switch s1: 97 % of a core -- bound by this machine's CPU "
                                 "or a software switch, this run's time does not describe"}}
    note = run.short_of_target(summary, args, "bmv2")
    assert note.startswith("job 1: test accuracy 24 % after 30 steps, short of 80 %")
    assert "about 30 min here" in note                      # 400 steps at 0.22 steps/s
    assert "bound by switch s1: 97 % of a core;" in note and "--switch soft" in note
    assert note.endswith("Give --steps 400 to train to 80 %.")
    assert run.short_of_target({**summary, "final_test_accuracy": 0.85}, args, "bmv2") is None
    numpy_args = run.build_parser().parse_args(["--steps", "30"])
    assert run.short_of_target(summary, numpy_args, "bmv2") is None


def test_the_torch_ranks_get_the_batch_bucket_and_overlap_asked_for():
    import torch_workers

    argv = ["--framework", "torch", "--batch", "256", "--bucket-mb", "0.5", "--no-overlap"]
    p = plan(*argv)
    args = torch_workers.worker_args(run.build_parser().parse_args(argv), p.encoding,
                                     Path("t.json"), p.topo, p.jobs[0])
    assert args[args.index("--batch") + 1] == "256"
    assert args[args.index("--bucket-mb") + 1] == "0.5" and "--no-overlap" in args
    plain = torch_workers.worker_args(run.build_parser().parse_args(["--framework", "torch"]),
                                      p.encoding, Path("t.json"), p.topo, p.jobs[0])
    assert not {"--batch", "--bucket-mb", "--no-overlap"} & set(plain)


def test_network_bound_probes_with_every_other_option_the_user_gave():
    """The probe and the job see the same options but the rate, the steps and the output."""
    parser = run.build_parser()
    given = ["--framework", "torch", "--encoding", "fixed32", "--window", "32", "--loss",
             "0.01", "--pcap", "--bw", "500", "--steps", "9", "--out", "/tmp/x",
             "--network-bound"]
    args = parser.parse_args(given)
    argv = run.argv_of(parser, args, {"network_bound", "bw", "out", "steps"})
    again = vars(parser.parse_args(argv))
    for name, value in vars(args).items():
        if name in ("network_bound", "bw", "out", "steps"):
            assert again[name] == parser.get_default(name)
        else:
            assert again[name] == value, name


def test_host_processes_get_one_blas_thread(tmp_path):
    """A spare OpenBLAS thread spins while its worker waits for results: on shared cores it
    slowed the numpy job tenfold and made a slow link look CPU-bound."""
    from workers import host_env

    probe = ("import numpy, threadpoolctl; "
             "print(max(i['num_threads'] for i in threadpoolctl.threadpool_info()))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env=host_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"
    assert host_env()["PYTHONPATH"] == str(Path(__file__).resolve().parents[1])


def test_switches_only_tells_how_to_start_a_worker_with_one_blas_thread(tmp_path):
    class Host:
        pid = 4242

    class Emu:
        def host(self, name):
            return Host()

    text = run.how_to_use(plan(), Emu(), tmp_path / "topology.json")
    line = next(x for x in text.splitlines() if x.startswith("a worker:"))
    assert "mnexec -a <host pid> env OPENBLAS_NUM_THREADS=1" in line
    assert "worker/main.py --topology" in line and "h1 4242" in text


def test_the_report_carries_each_workers_model_digest():
    def result(host, rank, digest, **kw):
        return {"host": host, "rank": rank, "params_sha256": digest, "steps": [{"step": 1,
                "test_accuracy": 0.5}], "final_test_accuracy": 0.5, "seconds": 1.0,
                "comm": {"elements": 10, "bytes_sent": 10, "bytes_received": 10,
                         "retransmissions": 0}, **kw}
    s = report.job_summary(1, [result("h2", 1, "bb"), result("h1", 0, "aa"),
                               result("h3", 2, "cc", error="lost")])
    assert s["model_sha256"] == {"h1": "aa", "h2": "bb"}
    assert list(s["model_sha256"]) == ["h1", "h2"] and not s["identical_models"]


def test_a_failed_job_prints_each_switchs_drops_by_reason():
    counters = {"s1": {"NatIngress.drops": {"14": [12, 1200], "20": [3, 300]}},
                "s2": {"NatIngress.agg.events": {"2": [5, 500]}},
                "s3": {"error": "s3: unreachable"}}
    failed = [{"ok": True}, {"ok": False}]
    assert report.drops_on_failure(failed, counters) == [
        "switch s1 dropped: ingress STALE 12, EARLY 3", "switch s2 dropped: nothing",
        "switch s3 dropped: s3: unreachable"]
    assert report.drops_on_failure([{"ok": True}], counters) == []
    assert report.drops_on_failure(failed, None) == []        # a parameter-server run
