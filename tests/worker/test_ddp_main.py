"""worker/ddp/main.py as processes without root: torch.distributed's rendezvous on loopback,
gradients through the host parameter server over loopback UDP (the switch's algorithm) or
through Gloo; a worker killed mid-run ends the others with a clear error in bounded time."""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("mnist1d")

from controller.job_sessions import SessionsFile  # noqa: E402
from controller.topology import JobSpec, star  # noqa: E402
from harness.network import udp_ps  # noqa: E402
from worker.baseline import ParameterServer  # noqa: E402
from worker.ddp import main as ddp_main  # noqa: E402

MAIN = Path(__file__).resolve().parents[2] / "worker" / "ddp" / "main.py"
HOSTS = ("h1", "h2", "h3")


@pytest.fixture
def topo_file(tmp_path):
    """The topology file and, beside it, the sessions file the controller writes."""
    path = tmp_path / "topo.json"
    topo = star(4).with_jobs([JobSpec(1, HOSTS, slots=64)])
    topo.save(str(path))
    SessionsFile(str(tmp_path / "sessions.json"), topo).write()
    return path


@pytest.fixture
def ps_addr():
    with udp_ps(ParameterServer(len(HOSTS), slots=64)) as addr:
        yield addr


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(topo_file, host, tmp_path, *extra):
    # cwd elsewhere and no PYTHONPATH: main.py must find the repository by itself.
    log = open(tmp_path / f"{host}.log", "w")
    return subprocess.Popen(
        [sys.executable, str(MAIN), "--topology", str(topo_file), "--host", host,
         "--result", str(tmp_path / f"{host}.json"), *extra],
        cwd=tmp_path, stdout=log, stderr=subprocess.PIPE, text=True,
        env={"PATH": "/usr/bin:/bin"})


def ps_or_gloo(aggregation, ps_addr):
    if aggregation == "gloo":
        return ["--aggregation", "gloo"]
    return ["--baseline-ps", ps_addr, "--ps-encoding", "fixed32"]


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["switch", "gloo"])
def test_three_ranks_train_in_lockstep(topo_file, ps_addr, tmp_path, aggregation):
    master = f"127.0.0.1:{free_tcp_port()}"
    procs = [start(topo_file, h, tmp_path, "--master", master, "--steps", "6",
                   "--eval-every", "3", *ps_or_gloo(aggregation, ps_addr)) for h in HOSTS]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    results = [json.loads((tmp_path / f"{h}.json").read_text()) for h in HOSTS]
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert len({r["params_sha256"] for r in results}) == 1
    r = results[0]
    assert r["framework"] == "torch" and r["aggregation"] == aggregation
    assert len(r["steps"]) == 6 and r["parameters"] >= 100_000
    assert [s["test_accuracy"] is not None for s in r["steps"]] == [False, False, True] * 2
    if aggregation == "switch":
        assert r["path"] == "switch" and r["encoding"] == "FIXED32"
        # One reduction per bucket of every step went through the allreduce client.
        assert r["comm"]["elements"] == 6 * r["parameters"]


TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.mark.slow
def test_ranks_launched_by_torchrun_find_their_job_and_train_in_lockstep(topo_file, ps_addr,
                                                                        tmp_path):
    """One torchrun per host, as on real machines: env:// rendezvous, no --host, --job,
    --rank or --master; the host is named by NATSWITCH_HOST (on a real machine, found by its
    IP), the job is the one holding it, and torchrun's RANK is checked against it."""
    # Job 3 of two: the job holding the host, not worker/main.py's default 1.
    topo = star(4).with_jobs([JobSpec(2, ("h4",)), JobSpec(3, HOSTS, slots=64)])
    topo.save(str(topo_file))
    SessionsFile(str(tmp_path / "sessions.json"), topo).write()
    port = free_tcp_port()
    procs = []
    for rank, host in enumerate(HOSTS):
        log = open(tmp_path / f"{host}.log", "w")
        procs.append(subprocess.Popen(
            [str(TORCHRUN), "--nnodes", str(len(HOSTS)), "--node-rank", str(rank),
             "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port",
             str(port), str(MAIN), "--topology", str(topo_file), "--steps", "4",
             "--eval-every", "2", "--result", str(tmp_path / f"{host}.json"),
             *ps_or_gloo("switch", ps_addr)],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, text=True,
            env={"PATH": "/usr/bin:/bin", "NATSWITCH_HOST": host}))
    for p in procs:
        p.wait(timeout=300)
    logs = [(tmp_path / f"{h}.log").read_text()[-2000:] for h in HOSTS]
    assert [p.returncode for p in procs] == [0, 0, 0], logs
    results = [json.loads((tmp_path / f"{h}.json").read_text()) for h in HOSTS]
    assert [(r["host"], r["job"], r["rank"]) for r in results] == [
        ("h1", 3, 0), ("h2", 3, 1), ("h3", 3, 2)]
    assert {r["master"] for r in results} == {f"127.0.0.1:{port}"}
    assert len({r["params_sha256"] for r in results}) == 1
    assert results[0]["path"] == "switch"
    assert results[0]["comm"]["elements"] == 4 * results[0]["parameters"]


def test_under_torchrun_a_rank_that_is_not_its_hosts_position_is_refused(topo_file, capsys,
                                                                         monkeypatch):
    for key, value in {"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("NATSWITCH_HOST", "h2")
    assert ddp_main.main(["--topology", str(topo_file)]) == 2
    err = capsys.readouterr().err
    assert "torch's rank is 2 (RANK), but h2 is worker 1 of job 1 (h1, h2, h3)" in err
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert ddp_main.main(["--topology", str(topo_file), "--host", "h3"]) == 2
    assert "world size is 4 (WORLD_SIZE), but job 1 has 3 workers" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("aggregation, sig", [("switch", signal.SIGKILL),
                                              ("switch", signal.SIGTERM),
                                              ("gloo", signal.SIGKILL)])
def test_a_killed_worker_ends_the_others_with_a_clear_error(topo_file, ps_addr, tmp_path,
                                                           aggregation, sig):
    """Through the switch path the others name the rank: SIGTERM posts its cause to the
    job's store; after SIGKILL its heartbeat stands still (3 s), before their timeout."""
    master = f"127.0.0.1:{free_tcp_port()}"
    procs = [start(topo_file, h, tmp_path, "--master", master, "--steps", "100000",
                   "--eval-every", "1000", "--timeout", "20", "--gloo-timeout", "10",
                   *ps_or_gloo(aggregation, ps_addr)) for h in HOSTS]
    try:
        deadline = time.monotonic() + 240
        while "step 3/" not in (tmp_path / "h3.log").read_text():
            assert time.monotonic() < deadline, "the job never got to step 3"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.2)
        procs[2].send_signal(sig)
        killed = time.monotonic()
        errs = [p.communicate(timeout=60)[1] for p in procs[:2]]
        took = time.monotonic() - killed
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs[:2]] == [1, 1], errs
    # Bounded: the fault board (or Gloo noticing the closed connection), plus start-up
    # slack on a shared machine; never the 100000 steps.
    assert took < 60
    for host, err in zip(HOSTS[:2], errs, strict=True):
        r = json.loads((tmp_path / f"{host}.json").read_text())
        if aggregation == "switch" and sig == signal.SIGTERM:
            assert "stopped: rank 2 (h3): stopped by SIGTERM" in r["error"], err
        elif aggregation == "switch":
            assert "rank 2 (h3) stopped: its heartbeat in the job's store" in r["error"], err
        else:
            assert "a peer rank has likely stopped" in err and "Gloo" in r["error"]


@pytest.mark.parametrize("args, message", [
    (["--host", "h4"], "h4 is not a worker of job 1"),
    (["--host", "h1", "--compressor", "bogus"], "unknown compressor"),
    (["--host", "h1", "--gloo-timeout", "0"], "--gloo-timeout must be > 0"),
    (["--host", "h1", "--amp-scale", "inf"], "amp_scale must be 0 (off) or a finite scale"),
    (["--host", "h1", "--amp-scale", "-2"], "amp_scale must be 0 (off) or a finite scale"),
    (["--host", "h1", "--mode", "rows"], None),
])
def test_usage_errors(topo_file, capsys, args, message):
    if message is None:
        with pytest.raises(SystemExit):
            ddp_main.main(["--topology", str(topo_file), *args])
        return
    assert ddp_main.main(["--topology", str(topo_file), *args]) == 2
    assert message in capsys.readouterr().err
