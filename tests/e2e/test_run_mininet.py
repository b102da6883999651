"""mininet/run.py, the main job: it trains and reports, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import e2e_switch

REPO = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(REPO / "mininet" / "run.py")]


def switch_args(bmv2: bool = False) -> list[str]:
    return ["--switch", e2e_switch(bmv2)]


def test_run_trains_far_above_chance_and_writes_the_report(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([*RUN, *switch_args(bmv2=True), "--steps", "40", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    (job,) = report["jobs"]
    assert job["ok"] and job["workers"] == 4
    assert job["final_test_accuracy"] > 0.6      # ten classes: chance is 0.1
    assert job["identical_models"]               # every rank applied the same updates
    assert job["encoding"] == "CNAT8" and job["result_encoding"] == "CNAT8"
    assert (out / "accuracy.png").stat().st_size > 0
    counters = report["switch_counters"]["s1"]
    assert counters["NatIngress.agg.events"]["2"][0] > 0     # completions were counted
    assert "report:" in r.stdout
    bound = job["bound"]                         # what bound it, with its figures
    assert bound["text"] in r.stdout and bound["steps"] == 39
    assert 0 < bound["busiest_link"]["utilisation"] and bound["switch_cores"]["s1"] > 0


@pytest.mark.parametrize("switch, bw, bound", [("soft", 0.25, "link"),
                                                ("bmv2", 1000, "switch s1")])
def test_the_report_names_what_bound_the_run(tmp_path, switch, bw, bound):
    """At 0.25 Mbit/s the links hold the job back (a step's 6.4 kB take 0.2 s a link); at
    1000 Mbit/s BMv2's per-packet work does (a core's worth), and then the run says its time
    does not describe a network."""
    if switch == "bmv2" and not shutil.which("simple_switch_grpc"):
        pytest.skip("needs simple_switch_grpc on PATH")
    out = tmp_path / "run"
    r = subprocess.run([*RUN, "--switch", switch, "--bw", str(bw), "--steps", "20", "--out",
                        str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (job,) = json.loads((out / "report.json").read_text())["jobs"]
    verdict = job["bound"]
    assert verdict["bound"] == bound, verdict
    assert f"job 1 bound by {verdict['text']}" in r.stdout
    if bound == "link":
        assert verdict["busiest_link"]["utilisation"] > 0.5 and verdict["describes_network"]
    else:
        assert verdict["switch_cores"]["s1"] > 0.5 and not verdict["describes_network"]
        assert "does not describe a network" in verdict["text"]


def processes_mentioning(*texts: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if any(t.encode() in cmdline for t in texts):
                pids.append(int(proc.name))
    return pids


def kill_leftovers(*texts: str) -> None:
    """After a failure, so that one broken teardown does not slow every later test."""
    for pid in processes_mentioning(*texts):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("signum, inherited", [
    # What a shell without job control does to a background command.
    (signal.SIGINT, ignore_sigint),
    (signal.SIGTERM, None),
], ids=["ctrl-c-with-sigint-ignored-by-the-parent", "sigterm"])
def test_a_signal_tears_everything_down(tmp_path, signum, inherited):
    out = tmp_path / "interrupted"
    switch_cmd = "@s1-eth1"           # in the switch's command line, BMv2 or softswitch
    proc = subprocess.Popen([*RUN, *switch_args(), "--steps", "100000", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=inherited)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list((out / "logs").glob("h*.log")) if (out / "logs").exists() else []
            if any("step 2/" in p.read_text(errors="replace") for p in logs):
                break
            time.sleep(0.5)
        assert proc.poll() is None, "run.py ended before training started:\n" + proc.stdout.read()
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 128 + signum, output[-2000:]
        assert "interrupted" in output
        assert processes_mentioning(str(out), switch_cmd) == [], \
            "worker or switch processes survived"
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True,
                               text=True).stdout
        assert "s1-eth1" not in links, "the switch's interfaces survived"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(str(out), switch_cmd)


@pytest.mark.parametrize("profile", ["default", "wide4"])
def test_the_uniform_4_bit_encoding_trains_through_the_switch(tmp_path, profile):
    """--encoding uq4: 4 bits per element up (rotated, THC-style), SUM8 sums down, on the
    default profile and on wide4 (1024 elements per packet: fewer bytes per element); the
    job trains and every rank applies the same updates. (NAT4 takes the same path with
    CNAT8 results: tests/worker, tests/dataplane.)"""
    out = tmp_path / "uq4"
    r = subprocess.run([*RUN, *switch_args(), "--encoding", "uq4", "--profile", profile,
                        "--steps", "40", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "uq4 up, sum8 down" in r.stdout.splitlines()[0]
    (job,) = json.loads((out / "report.json").read_text())["jobs"]
    assert job["ok"] and job["encoding"] == "UQ4" and job["result_encoding"] == "SUM8"
    assert job["final_test_accuracy"] > 0.6 and job["identical_models"]


def test_the_parameter_server_variant_trains_and_says_what_it_ran(tmp_path):
    out = tmp_path / "ps"
    r = subprocess.run([*RUN, *switch_args(), "--aggregation", "ps", "--steps", "40",
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    head = r.stdout.splitlines()[0]
    assert "4 workers in 1 job, host parameter server on h5, float32 up, float32 down" \
        in head, head
    report = json.loads((out / "report.json").read_text())
    assert report["aggregation"] == "ps" and report["encoding"] == "float32"
    (job,) = report["jobs"]
    assert job["ok"] and job["workers"] == 4 and job["aggregation"] == "ps"
    assert job["encoding"] == "FLOAT32"
    assert job["final_test_accuracy"] > 0.6      # ten classes: chance is 0.1
    assert job["identical_models"]
    assert report["switch_counters"] is None     # the switches only forwarded


@pytest.mark.isolated      # refused before anything is built: no Mininet to collide with
def test_a_refused_option_builds_nothing_and_leaves_no_folder(tmp_path):
    out = tmp_path / "refused"
    r = subprocess.run([*RUN, *switch_args(), "--compressor", "foo", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("error: --compressor foo: unknown compressor")
    assert not out.exists()


def test_switches_only_then_the_controller_and_workers_by_hand(tmp_path):
    out = tmp_path / "by-hand"
    proc = subprocess.Popen([*RUN, *switch_args(), "--switches-only", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not lines or not lines[-1].startswith("Ctrl-C stops"):
            line = proc.stdout.readline()
            assert line, "run.py ended before the switches were up:\n" + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        topo = str(out / "topology.json")
        assert f"controller/main.py --topology {topo}" in text
        ctl = subprocess.run([sys.executable, str(REPO / "controller" / "main.py"),
                              "--topology", topo], capture_output=True, text=True, timeout=300)
        assert ctl.returncode == 0, ctl.stdout + ctl.stderr
        assert "1 of 1 switches programmed" in ctl.stdout
        (pids,) = [x for x in lines if x.startswith("host pids:")]
        host_pid = dict(p.split() for p in pids.split(":", 1)[1].split(","))
        workers = [subprocess.Popen(
            ["mnexec", "-a", host_pid[h], sys.executable, str(REPO / "worker" / "main.py"),
             "--topology", topo, "--host", h, "--steps", "3", "--quiet",
             "--result", str(tmp_path / f"{h}.json")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for h in ("h1", "h2", "h3", "h4")]
        for w in workers:
            output, _ = w.communicate(timeout=300)
            assert w.returncode == 0, output
        results = [json.loads((tmp_path / f"{h}.json").read_text()) for h in host_pid]
        assert len({r["params_sha256"] for r in results}) == 1
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, rest
        assert "stopped" in rest
        assert processes_mentioning(str(out), "@s1-eth1") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(str(out), "@s1-eth1")


def test_the_cli_shows_what_its_commands_print(tmp_path):
    out = tmp_path / "cli"
    r = subprocess.run([*RUN, *switch_args(), "--steps", "0", "--cli", "--out", str(out)],
                       input="nodes\nexit\n", capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "available nodes are" in r.stdout + r.stderr


@pytest.mark.parametrize("profile,encoding", [("tofino", "cnat8"), ("tofino", "uq4"),
                                              ("tofino-mp", "cnat8")])
def test_the_tofino_profile_trains_alike_on_both_targets(tmp_path, profile, encoding):
    """--profile tofino: the Tofino profile's v1model twin (16 elements per packet) trains end
    to end, on softswitch and on BMv2, to the same model bit for bit (the seed fixes every
    rounding, DESIGN contract 10): CNAT8 with results re-compressed by its tables, and UQ4
    summed in 16-bit lanes with SUM8 results. UDP checksum 0 down; a packet's 58 bytes of
    headers weigh on its 16 elements. --profile tofino-mp: the walk of 4 passes carries 64
    CNAT8 codes under the same headers."""
    digests = {}
    targets = ["soft"] + (["bmv2"] if shutil.which("simple_switch_grpc") else [])
    for switch in targets:
        out = tmp_path / switch
        r = subprocess.run([*RUN, "--switch", switch, "--profile", profile, "--steps", "8",
                            "--encoding", encoding, "--out", str(out)],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        report = json.loads((out / "report.json").read_text())
        (job,) = report["jobs"]
        assert report["profile"] == profile and job["ok"] and job["identical_models"]
        assert job["final_test_accuracy"] > 0.3      # ten classes: chance is 0.1
        if profile == "tofino-mp":
            assert job["encoding"] == "CNAT8" and job["result_encoding"] == "CNAT8"
            # (58 + 64) / 64 = 1.91 each way, and what a loaded host resent
            resent = job["bytes_per_element_resent"]
            assert 1.9 < job["bytes_per_element_up"] < 2.0 + 4 * resent
            assert 1.9 < job["bytes_per_element_down"] < 2.0 + 4 * resent
        elif encoding == "cnat8":
            assert job["encoding"] == "CNAT8" and job["result_encoding"] == "CNAT8"
            # (58 + 16) / 16 = 4.625, and the answers to what a loaded host resent
            resent = job["bytes_per_element_resent"]
            assert 4.62 < job["bytes_per_element_down"] < 4.7 + 4 * resent
        else:
            assert job["encoding"] == "UQ4" and job["result_encoding"] == "SUM8"
            # half a byte an element up, a byte down, on the same headers
            assert job["bytes_per_element_up"] < job["bytes_per_element_down"]
        digests[switch] = set(job["model_sha256"].values())
    assert all(len(d) == 1 for d in digests.values()), digests
    assert len(set.union(*digests.values())) == 1, digests


@pytest.mark.isolated      # refused before anything is built: no Mininet to collide with
def test_the_tofino_profile_refuses_what_it_has_not(tmp_path):
    """NAT4 (it sums UQ4 in lanes, with no NAT4 decode), sparse jobs and the switches' link
    loss are not in the profile: a clear error before anything starts."""
    for extra, why in ((["--encoding", "nat4"], "has no nat4"),
                       (["--sparse"], "no sparse jobs"),
                       (["--loss", "0.05"], "no egress impairment")):
        r = subprocess.run([*RUN, "--switch", "soft", "--profile", "tofino", *extra, "--out",
                            str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and why in r.stdout + r.stderr, r.stdout + r.stderr
        assert not (tmp_path / "x").exists()
    # the walk sums CNAT8 only
    for enc in ("fixed32", "uq4"):
        r = subprocess.run([*RUN, "--switch", "soft", "--profile", "tofino-mp", "--encoding",
                            enc, "--out", str(tmp_path / "x")], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2 and "walks CNAT8 packets" in r.stdout + r.stderr, r.stderr
        assert not (tmp_path / "x").exists()
