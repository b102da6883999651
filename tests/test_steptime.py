"""mininet/steptime.py: the figures it reads from a run, its predictions on figures recorded
from real runs (tests/data/steptime_runs.json, written by bench/steptime.py), its
projections; mininet/netbound.py's choice of a rate and its check of a run."""

import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "mininet"))

import netbound  # noqa: E402
import steptime  # noqa: E402

# Two validations' runs: 2026-12-03 (2 cores shared with other work; numpy workers then ran
# a second, spinning BLAS thread) and 2026-12-04 (the machine otherwise idle; one BLAS
# thread per host process, DDP evaluations timed apart).
RECORDED = {name: json.loads((REPO / "tests" / "data" / name).read_text())["runs"]
            for name in ("steptime_runs.json", "steptime_runs_1204.json")}
RUNS = RECORDED["steptime_runs.json"]


def write_run(folder: Path, step=0.1, compute=0.02, comm=0.08, steps=5, bw=10.0) -> Path:
    """A run folder as mininet/run.py leaves it, with 2 workers."""
    (folder / "workers").mkdir(parents=True)
    bound = {"seconds": step * (steps - 1), "steps": steps - 1,
             "busiest_link": {"link": "s1->h1", "utilisation": 0.5, "bytes": 4000.0 * (steps - 1),
                              "packets": 20.0 * (steps - 1), "bw_mbit": bw},
             "switch_cores": {"s1": 0.2}, "host_cores": {"h1": 0.4, "h2": 0.6},
             "kernel_cores": 0.1, "machine_cores": 1.5, "other_cores": 0.2, "cores": 2,
             "switch_packets": 40.0 * (steps - 1), "compute_share": compute / step}
    report = {"framework": "numpy", "aggregation": "switch", "encoding": "CNAT8",
              "result_encoding": "CNAT8", "bw_mbit": bw, "jobs": [{"job": 1, "bound": bound}]}
    (folder / "report.json").write_text(json.dumps(report))
    for rank, host in enumerate(("h1", "h2")):
        st = [{"step": i + 1, "step_seconds": step, "compute_seconds": compute,
               "comm_seconds": comm, "comm": {"chunks": 20, "retransmissions": rank,
                                              "rtt_samples": 20, "rtt_seconds": 0.02 * (i + 1)}}
              for i in range(steps)]
        (folder / "workers" / f"{host}.json").write_text(json.dumps(
            {"host": host, "job": 1, "rank": rank, "window": 8, "steps": st}))
    return folder


def test_figures_are_per_step_and_come_from_the_run(tmp_path):
    f = steptime.figures(write_run(tmp_path / "run"))
    assert f.workers == 2 and f.bw_mbit == 10.0 and f.window == 8 and f.chunks == 20
    assert f.step_s == pytest.approx(0.1)                 # the bound window's mean
    assert f.busiest_bytes == pytest.approx(4000) and f.busiest_packets == pytest.approx(20)
    assert f.switch_packets == pytest.approx(40)
    assert f.switch_cpu_s == pytest.approx(0.02)          # 0.2 cores x 0.1 s
    assert f.switch_cost_s == pytest.approx(0.02 / 40)
    assert f.host_cpu_s == pytest.approx(0.05)            # the median worker's 0.5 cores
    assert f.hosts_cpu_s == pytest.approx(0.1) and f.kernel_cpu_s == pytest.approx(0.01)
    assert f.host_comm_s == pytest.approx(0.03)
    assert f.overlap_s == 0.0                             # 0.02 + 0.08 = the step
    assert f.rtt_s == pytest.approx(0.002)                # the second step's, the smallest after
    assert f.retransmissions == 1                         # both workers', per step


def test_overlap_is_what_compute_and_reduction_took_beyond_the_step(tmp_path):
    f = steptime.figures(write_run(tmp_path / "run", step=0.1, compute=0.06, comm=0.07))
    assert f.overlap_s == pytest.approx(0.03)


def test_a_run_without_the_workers_cpu_is_refused_with_a_reason(tmp_path):
    run = write_run(tmp_path / "run")
    report = json.loads((run / "report.json").read_text())
    del report["jobs"][0]["bound"]["host_cores"]
    (run / "report.json").write_text(json.dumps(report))
    with pytest.raises(ValueError, match="no bound figures with the workers' CPU"):
        steptime.figures(run)
    r = subprocess.run([sys.executable, str(REPO / "mininet" / "steptime.py"), "predict",
                        str(run), "--bw", "10"], capture_output=True, text=True)
    assert r.returncode == 2 and "cannot read the run's figures" in r.stderr


def figs(run: dict) -> steptime.Figures:
    return steptime.Figures(**run["figures"])


def test_the_link_term_follows_bytes_over_rate_and_binds_a_slow_link():
    f = figs(RUNS[0])
    slow, slower = steptime.predict(f, 1.0), steptime.predict(f, 0.5)
    assert slow.terms["bound"] == "link"
    assert slower.terms["link"] == pytest.approx(2 * slow.terms["link"])
    assert slow.terms["link"] == pytest.approx(f.busiest_bytes * 8 / 1e6)
    # slower links never make a step faster
    rates = [1000, 100, 10, 1, 0.1]
    times = [steptime.predict(f, r).step_s for r in rates]
    assert times == sorted(times)


def test_a_prediction_never_reads_the_step_time_it_is_checked_with():
    f = figs(RUNS[0])
    other = replace(f, step_s=f.step_s * 10)
    for bw in (1000, 10, 1):
        assert steptime.predict(f, bw).step_s == steptime.predict(other, bw).step_s


def test_shared_cores_and_the_rest_of_a_step_join_smoothly():
    # Far apart, the larger alone; equal, 2^(1/3) of either: the recorded runs took longer
    # than the larger where the two were near.
    assert steptime.join(1.0, 0.01) == pytest.approx(1.0, rel=1e-5)
    assert steptime.join(0.01, 1.0) == pytest.approx(1.0, rel=1e-5)
    assert steptime.join(1.0, 1.0) == pytest.approx(2 ** (1 / 3))
    assert steptime.join(0.0, 0.0) == 0.0
    assert 1.0 < steptime.join(1.0, 0.7) < 1.7
    # in a prediction: the step is the join of the machine's term and the rest, and a
    # cluster (no machine term) keeps the rest as it is
    f = figs(RUNS[0])
    for bw in (1000, 30, 3, 1):
        p = steptime.predict(f, bw)
        rest = steptime.predict(f, bw, machine=False).step_s
        assert p.step_s == pytest.approx(steptime.join(rest, p.terms["machine"]))
        assert p.step_s >= max(rest, p.terms["machine"])


def test_cpu_grows_from_the_fast_run_to_the_slow_one_as_the_link_spreads_the_packets():
    fast = figs(RUNS[0])
    slow = replace(fast, bw_mbit=fast.bw_mbit / 100, host_cpu_s=fast.host_cpu_s + 0.004,
                   hosts_cpu_s=fast.hosts_cpu_s + 0.016, switch_cpu_s=fast.switch_cpu_s * 3,
                   kernel_cpu_s=fast.kernel_cpu_s + 0.002)
    assert steptime.spread(fast, slow, fast.bw_mbit) == fast
    for bw in (slow.bw_mbit, slow.bw_mbit / 10):       # at the slow rate and beyond: slow's
        at = steptime.spread(fast, slow, bw)
        assert at.hosts_cpu_s == pytest.approx(slow.hosts_cpu_s)
        assert at.host_cpu_s == pytest.approx(slow.host_cpu_s)
        assert at.switch_cpu_s == pytest.approx(slow.switch_cpu_s)
        assert at.kernel_cpu_s == pytest.approx(slow.kernel_cpu_s)
    # between: the square root of the way by the link's time per step
    t0 = steptime.link_seconds(fast, fast.bw_mbit)
    t1 = steptime.link_seconds(slow, slow.bw_mbit)
    bw = fast.busiest_bytes * 8 / ((t0 + (t1 - t0) / 4) * 1e6)     # a quarter of the way
    mid = steptime.spread(fast, slow, bw)
    assert mid.switch_cpu_s == pytest.approx(fast.switch_cpu_s * (1 + 2 * 0.25 ** 0.5))
    assert mid.compute_s == fast.compute_s and mid.step_s == fast.step_s
    # a slow run that used less CPU does not make a slower link cheaper
    cheaper = replace(slow, switch_cpu_s=fast.switch_cpu_s / 2)
    assert steptime.spread(fast, cheaper, bw).switch_cpu_s == fast.switch_cpu_s
    # predictions carry it and stay monotone in the rate
    times = [steptime.predict(fast, r, slow=slow).step_s for r in (1000, 100, 10, 1, 0.1)]
    assert times == sorted(times)
    assert steptime.predict(fast, bw, slow=slow).step_s >= steptime.predict(fast, bw).step_s


def test_predict_takes_a_slower_run_of_the_same_job_only(tmp_path):
    cmd = [sys.executable, str(REPO / "mininet" / "steptime.py"), "predict"]
    fast = write_run(tmp_path / "fast", bw=100.0)
    slow = write_run(tmp_path / "slow", bw=1.0)
    r = subprocess.run([*cmd, str(fast), "--bw", "10", "--slow", str(slow)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "10 Mbit/s" in r.stdout
    r = subprocess.run([*cmd, str(slow), "--bw", "10", "--slow", str(fast)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "at a slower link than 1 Mbit/s" in r.stderr


def test_a_line_rate_switch_and_a_cluster_leave_compute_and_the_link():
    f = figs(RUNS[0])
    p = steptime.predict(f, 1e6, switch_pps=math.inf, machine=False)
    assert p.terms["switch"] == 0 and "machine" not in p.terms
    q = steptime.predict(f, 1e6, compute_s=f.compute_s + 1.0, switch_pps=math.inf,
                         machine=False)
    assert q.step_s - p.step_s == pytest.approx(1.0)


@pytest.mark.parametrize("recorded", sorted(RECORDED))
def test_the_model_predicts_recorded_runs_it_was_not_calibrated_on(recorded):
    """The recorded runs between the fastest and the slowest of each method, predicted from
    those two alone: closer than either naive guess, that the step stays what it was at the
    fastest rate (CPU-bound), or that it is the link's time alone."""
    RUNS = RECORDED[recorded]
    rows = steptime.validate(RUNS)
    predicted = [r for r in rows if not r["calibration"]]
    assert len(predicted) >= 6, "the fixture has runs between its calibration rates"
    by = {(r["switch"], r["method"], r["bw"]): r for r in RUNS}
    naive_cpu, naive_link = [], []
    for r in predicted:
        cal = [x for x in RUNS if (x["switch"], x["method"]) == (r["switch"], r["method"])]
        fast = figs(max(cal, key=lambda x: x["bw"]))
        f = figs(by[r["switch"], r["method"], r["bw"]])
        naive_cpu.append(abs(1 / fast.step_s - r["measured"]) / r["measured"])
        link = fast.busiest_bytes * 8 / (r["bw"] * 1e6)
        naive_link.append(abs(1 / link - r["measured"]) / r["measured"])
        assert r["measured"] == pytest.approx(1 / f.step_s)
    model = statistics.median(r["error"] for r in predicted)
    assert model < 0.5 * statistics.median(naive_cpu)
    assert model < 0.5 * statistics.median(naive_link)
    if recorded == "steptime_runs_1204.json":     # the targets, on runs like the bench's
        assert statistics.median(r["error"] for r in predicted) <= 0.15
        assert max(r["error"] for r in predicted) <= 0.30
    # each calibration is the fastest and the slowest run of its method
    for r in rows:
        same = [x["bw"] for x in rows if (x["switch"], x["method"]) == (r["switch"], r["method"])]
        assert r["calibration"] == (r["bw"] in (max(same), min(same)))


def test_a_ring_moves_twice_n_minus_1_over_n_words_and_cnat_a_third_of_int32():
    ring = steptime.project(1e8, 0.1, 10, 8, "ring")
    assert ring.bytes_per_step == pytest.approx(1e8 * 2 * 7 / 8 * 4 * steptime.RING_OVERHEAD)
    cnat = steptime.project(1e8, 0.1, 10, 8, "cnat")
    int32 = steptime.project(1e8, 0.1, 10, 8, "int32")
    assert cnat.bytes_per_step / int32.bytes_per_step == pytest.approx(1.35 / 4.35)
    assert cnat.step_s < int32.step_s < ring.step_s           # link-bound at 10 Gbit/s
    # a faster link leaves compute: the methods draw together
    fast = [steptime.project(1e8, 0.1, 1e4, 8, m).step_s for m in ("cnat", "int32", "ring")]
    assert max(fast) / min(fast) < 1.01


def test_a_small_window_caps_the_rate_at_window_packets_per_round_trip():
    p = steptime.project(25.6e6, 0.0, 100, 8, "cnat", rtt_s=10e-6, window=64)
    packets = math.ceil(25.6e6 / 168)
    assert p.bound == "window"
    assert p.comm_s == pytest.approx(packets / 64 * 10e-6 + 10e-6)
    filled = steptime.project(25.6e6, 0.0, 100, 8, "cnat", rtt_s=10e-6)
    assert filled.bound == "link" and filled.slots_to_fill == math.ceil(100e9 * 10e-6 / 8
                                                                          / (1.35 * 168))


def test_project_prints_a_labelled_projection_and_refuses_bad_input():
    cmd = [sys.executable, str(REPO / "mininet" / "steptime.py"), "project"]
    r = subprocess.run([*cmd, "--params", "25.6e6", "--compute-ms", "100", "--gbit", "10",
                        "--workers", "8", "--steps", "1000"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PROJECTION (not a measurement)")
    assert "equal steps to accuracy" in r.stdout and "cnat" in r.stdout and "ring" in r.stdout
    for bad, why in ((["--params", "0", "--compute-ms", "1"], "must be a finite number above 0"),
                     (["--params", "1e6", "--compute-ms", "1", "--workers", "1"],
                      "must be at least 2"),
                     (["--params", "x", "--compute-ms", "1"], "is not a number")):
        r = subprocess.run([*cmd, *bad], capture_output=True, text=True)
        assert r.returncode == 2 and why in r.stderr


def test_network_bound_picks_a_rate_where_the_link_takes_headroom_times_the_rest():
    f = max((figs(r) for r in RUNS), key=lambda f: f.bw_mbit)
    rate, why = netbound.pick_rate(f)
    floor, _ = netbound.floor_seconds(f)
    assert rate in (1, 2, 5) or math.log10(rate / netbound.nice_below(rate)) == 0
    assert f.busiest_bytes * 8 / (rate * 1e6) >= netbound.HEADROOM * floor * 0.999
    assert netbound.nice_below(rate * 2.5) > rate or rate < 1     # not far below it
    assert f"at {f.bw_mbit:g} Mbit/s" in why


@pytest.mark.parametrize("rate, nice", [(787, 500), (1000, 1000), (0.79, 0.5), (3.3, 2),
                                        (19.9, 10)])
def test_rates_round_down_to_1_2_5(rate, nice):
    assert netbound.nice_below(rate) == pytest.approx(nice)


def bound(kind="link", link=0.9, switch=0.1, hosts=0.2, kernel=0.1, other=0.0, compute=0.1):
    return {"bound": kind, "text": f"{kind}: ...", "busiest_link": {"utilisation": link},
            "switch_cores": {"s1": switch}, "host_cores": {"h1": hosts}, "kernel_cores": kernel,
            "other_cores": other, "cores": 2, "compute_share": compute}


@pytest.mark.parametrize("b, problem", [
    (bound(), None),
    (bound("switch s1", link=0.3, switch=0.6), "bound by switch s1"),
    (bound(switch=0.6), "switch s1 at 60 % of a core"),
    (bound(hosts=1.5), "the job's CPU at 1.70 of the 2.00 cores"),
    # a machine all busy with other work: the job's own share decides
    (bound("machine", other=1.2), None),
    (bound("machine", link=0.05, compute=0.5), "bound by machine"),
])
def test_a_run_is_network_bound_only_with_the_link_ahead_and_cpu_to_spare(b, problem):
    why = netbound.check(b)
    assert (not why) if problem is None else any(problem in w for w in why), why


# ------------------------------------------------- a Tofino's pipes (issue 48)


def test_workers_that_do_not_fit_pipe_0_are_refused():
    # Tofino 1: 16 x 100G front-panel ports a pipe, 64 lanes for 25G; Tofino 2: 8 x 400G,
    # 32 x 100G. A job's workers share pipe 0, whose registers hold its slots.
    assert steptime.project(25.6e6, 0.1, 100, 16, "cnat", switch="tofino1").step_s > 0
    with pytest.raises(ValueError, match="17 workers at 100 Gbit/s do not fit pipe 0 of a "
                                         "Tofino 1: it has 16 ports"):
        steptime.project(25.6e6, 0.1, 100, 17, "cnat", switch="tofino1")
    assert steptime.project(25.6e6, 0.1, 25, 64, "int32", switch="tofino1").step_s > 0
    with pytest.raises(ValueError, match="65 workers at 25 Gbit/s"):
        steptime.project(25.6e6, 0.1, 25, 65, "int32", switch="tofino1")
    assert steptime.project(25.6e6, 0.1, 100, 32, "cnat", switch="tofino2").step_s > 0
    with pytest.raises(ValueError, match="Tofino 2: it has 32 ports"):
        steptime.project(25.6e6, 0.1, 100, 33, "cnat", switch="tofino2")
    with pytest.raises(ValueError, match="no Tofino 1 port runs at 200 Gbit/s"):
        steptime.project(25.6e6, 0.1, 200, 8, "cnat", switch="tofino1")
    # a line-rate switch has no pipes, the ring no switch
    assert steptime.project(25.6e6, 0.1, 100, 64, "cnat").bound == "link"
    assert steptime.project(25.6e6, 0.1, 100, 64, "ring", switch="tofino1").bound == "link"
    r = subprocess.run([sys.executable, str(REPO / "mininet" / "steptime.py"), "project",
                        "--params", "1e6", "--compute-ms", "1", "--gbit", "100", "--workers",
                        "17", "--switch", "tofino1"], capture_output=True, text=True)
    assert r.returncode == 2 and "17 workers at 100 Gbit/s do not fit pipe 0" in r.stderr


def test_json_rows_and_the_text_name_passes_pipes_and_loopback(tmp_path, monkeypatch, capsys):
    from tests.test_switch_wire import multi_pass

    assert steptime._switch_wire() is multi_pass.__globals__["sw"]   # the module it patches
    multi_pass(tmp_path, monkeypatch)
    args = ["project", "--params", "25.6e6", "--compute-ms", "100", "--gbit", "10", "100",
            "--switch", "tofino1"]
    assert steptime.main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = ("elements_per_packet", "passes_per_packet", "harvest_passes", "pipes")
    assert all(set(keys) <= set(r) for r in rows)
    by = {(r["gbit"], r["method"]): r for r in rows}
    # at 10 Gbit/s the fewest bytes per element win: 128 codes under one frame's headers
    assert [by[10.0, "cnat"][k] for k in ("variant", *keys)] == ["cnat8-mp-t1", 128, 8, 7, 4]
    assert [by[10.0, "int32"][k] for k in keys] == [64, 1, 1, 1]
    assert by[10.0, "ring"]["passes_per_packet"] is None and by[10.0, "ring"]["pipes"] is None
    assert steptime.main(args) == 0
    text = capsys.readouterr().out
    assert "cnat8-mp-t1, 128 elements per packet (8 pass(es) of 16, over 4 pipe(s)), 7 " \
           "harvest pass(es)" in text
    assert "4 pipes of 1.22e9 passes/s" in text and "recirculation port (100 Gbit/s" in text
    assert "16 x 100 Gbit/s front-panel ports in loopback" in text
