"""worker/main.py end to end without root: workers as processes, the host parameter server
over loopback UDP; and its usage errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.job_sessions import SessionsFile
from controller.topology import JobSpec, Topology, star
from harness.network import udp_ps
from worker import main as worker_main
from worker import wire
from worker.baseline import ParameterServer

MAIN = Path(__file__).resolve().parents[2] / "worker" / "main.py"


@pytest.fixture
def topo_file(tmp_path):
    """The topology file and, beside it, the sessions file the controller writes."""
    path = tmp_path / "topo.json"
    topo = star(4).with_jobs([JobSpec(1, ("h1", "h2", "h3"), slots=16)])
    topo.save(str(path))
    SessionsFile(str(tmp_path / "sessions.json"), topo, first=300).write()
    return path


@pytest.fixture
def ps_addr():
    with udp_ps(ParameterServer(3)) as addr:
        yield addr


def start(topo_file, host, tmp_path, *extra):
    # cwd elsewhere and no PYTHONPATH: main.py must find the repository by itself.
    return subprocess.Popen(
        [sys.executable, str(MAIN), "--topology", str(topo_file), "--host", host,
         "--result", str(tmp_path / f"{host}.json"), "--quiet", *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PATH": "/usr/bin:/bin"})


def test_three_workers_train_in_lockstep_through_the_parameter_server(topo_file, ps_addr,
                                                                      tmp_path):
    procs = [start(topo_file, h, tmp_path, "--baseline-ps", ps_addr, "--steps", "40",
                   "--eval-every", "10", "--compressor", "topk:0.5") for h in ("h1", "h2", "h3")]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    results = [json.loads((tmp_path / f"{h}.json").read_text()) for h in ("h1", "h2", "h3")]
    assert [r["rank"] for r in results] == [0, 1, 2]
    # The same mean every step keeps the replicas identical.
    assert len({r["params_sha256"] for r in results}) == 1
    r = results[0]
    assert len(r["steps"]) == 40 and r["aggregation"] == "ps" and r["encoding"] == "FLOAT32"
    assert [s["test_accuracy"] is not None for s in r["steps"]].count(True) == 4
    # Digits, 3 x 32 examples per step, lr 0.1: 40 steps reach well above chance (0.1).
    assert r["final_test_accuracy"] > 0.6
    per_call = 1 + (r["parameters"] - 1) // wire.ELEMS   # chunks per gradient
    assert r["comm"]["chunks"] == 40 * per_call
    assert r["comm"]["packets_sent"] - r["comm"]["retransmissions"] == 40 * per_call
    assert r["steps"][0]["comm"]["packets_sent"] >= per_call
    assert r["steps"][0]["compressor_bits"] > 0
    # Round trips were measured; the window grew from 8 to the job's 16 slots (unless a
    # timer expired on this shared machine, which halves it).
    assert r["comm"]["rtt_samples"] > 0 and r["pacing"]["srtt"] > 0
    assert r["pacing"]["window"] == 16 or r["pacing"]["window_cuts"] > 0


def test_the_embedding_model_trains_through_the_sparse_block_aggregator(topo_file, tmp_path):
    """--sparse --model embedding: only the gradient's non-zero blocks travel, and the
    replicas stay identical."""
    from worker.block_aggregator import BlockAggregator

    agg = BlockAggregator(3, slots=16, result_encoding=wire.ENC_CNAT8)
    with udp_ps(agg) as addr:
        procs = [start(topo_file, h, tmp_path, "--baseline-ps", addr, "--sparse", "--model",
                       "embedding", "--steps", "30", "--lr", "0.3", "--batch", "8",
                       "--eval-every", "30") for h in ("h1", "h2", "h3")]
        outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    results = [json.loads((tmp_path / f"{h}.json").read_text()) for h in ("h1", "h2", "h3")]
    assert len({r["params_sha256"] for r in results}) == 1
    r = results[0]
    assert r["sparse"] and r["encoding"] == "CNAT8" and r["final_test_accuracy"] > 0.3
    blocks = -(-r["parameters"] // wire.ELEMS)
    # fewer blocks aggregated than the gradient has: the rows no worker's batch touched
    assert r["comm"]["chunks"] < 0.9 * 30 * blocks
    assert max(s["nonzero"] for s in r["steps"]) < 0.5
    assert agg.stats.dropped == {}


def test_missing_worker_ends_with_a_clear_error(topo_file, ps_addr, tmp_path):
    procs = [start(topo_file, h, tmp_path, "--baseline-ps", ps_addr, "--steps", "3",
                   "--timeout", "1") for h in ("h1", "h2")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1]
    assert "never completed" in outs[0][1] and "job 1" in outs[0][1]
    r = json.loads((tmp_path / "h1.json").read_text())
    assert "never completed" in r["error"]


@pytest.mark.parametrize("args, message", [
    (["--host", "h9"], "no host named 'h9'"),
    (["--host", "h4"], "h4 is not a worker of job 1"),
    (["--host", "h1", "--workers", "4"], "job 1 in the topology has 3 workers"),
    (["--host", "h1", "--job", "2"], "job 2 is not in"),
    (["--host", "h1", "--compressor", "bogus"], "unknown compressor"),
    (["--host", "h1", "--port", "eth0"], "expected raw:IFNAME"),
    (["--host", "h1", "--session", "0"], "--session must be within"),
    (["--host", "h1", "--rto-min", "0"], "--rto-min must be > 0"),
    (["--host", "h1", "--initial-window", "0"], "--initial-window >= 1"),
    (["--host", "h1", "--coalesce", "1.5"], "--coalesce must be within 0..1"),
    (["--host", "h1", "--uplink-share", "-0.5"], "--uplink-share must be within 0..1"),
    (["--host", "h1", "--sparse", "--uplink-share", "0.2"],
     "--uplink-share applies to dense jobs"),
    (["--host", "h1", "--sparse", "--coalesce", "0.5", "--uplink-share", "0"],
     "--coalesce and --uplink-share apply to dense jobs"),
])
def test_usage_errors(topo_file, capsys, args, message):
    assert worker_main.main(["--topology", str(topo_file), *args]) == 2
    assert message in capsys.readouterr().err


def test_the_session_is_the_controllers(topo_file, tmp_path, capsys):
    """The session comes from the sessions file the controller wrote beside the topology
    (it installed that one on the switches), or --session; without either the worker says
    where it comes from instead of guessing one the switches would drop."""
    from worker.main import build_parser, resolve

    def session(*extra):
        return resolve(build_parser().parse_args(["--topology", str(topo_file), "--host",
                                                  "h1", *extra]))["session"]

    assert session() == 300
    assert session("--session", "77") == 77
    other = tmp_path / "other.json"
    SessionsFile(str(other), Topology.load(str(topo_file)), first=12).write()
    assert session("--sessions", str(other)) == 12
    (tmp_path / "sessions.json").unlink()
    assert worker_main.main(["--topology", str(topo_file), "--host", "h1"]) == 2
    err = capsys.readouterr().err
    assert "no session for job 1" in err and "controller/main.py program" in err
    assert worker_main.main(["--topology", str(topo_file), "--host", "h1", "--sessions",
                             str(tmp_path / "none.json")]) == 2
    assert "no sessions file" in capsys.readouterr().err
    SessionsFile(str(other), Topology.load(str(topo_file)).with_jobs([])).write()
    assert worker_main.main(["--topology", str(topo_file), "--host", "h1", "--sessions",
                             str(other)]) == 2
    assert "job 1 is not in the sessions file" in capsys.readouterr().err


def test_encoding_auto_picks_what_the_switches_can_answer(tmp_path, monkeypatch):
    from controller.topology import leaf_spine
    from worker.main import UsageError, build_parser, resolve

    def chosen(topo, *extra):
        path = tmp_path / "t.json"
        topo.save(str(path))
        args = build_parser().parse_args(["--topology", str(path), "--host", "h1",
                                          "--session", "5", *extra])
        return resolve(args)["encoding"]

    workers = ("h1", "h2", "h3")
    one_cnat = star(4).with_jobs([JobSpec(1, workers, encoding="cnat8")])
    one_fixed = star(4).with_jobs([JobSpec(1, workers, encoding="fixed32")])
    # h1, h2 on one leaf and h3 on another: partial sums go up as FIXED32.
    tree = leaf_spine(2, 1, 2).with_jobs([JobSpec(1, workers, encoding="cnat8")])
    # 3 bytes more per element fit BMv2's 512 bytes of headroom at this packet size.
    assert 3 * wire.ELEMS <= 512
    assert [chosen(t) for t in (one_cnat, one_fixed, tree)] == ["cnat8"] * 3
    # With packets of 256 elements they would not: CNAT8 only where nothing grows.
    monkeypatch.setattr(wire, "ELEMS", 256)
    assert [chosen(t) for t in (one_cnat, one_fixed, tree)] == ["cnat8", "fixed32", "fixed32"]
    with pytest.raises(UsageError, match="grows a packet by 768 bytes"):
        chosen(tree, "--encoding", "cnat8")
