"""The controller against running switch processes on loopback gRPC (no root needed):
softswitch, and BMv2's simple_switch_grpc where it is installed. They run the fixture program
tests/controller/p4/ctl_tables.p4, which has the real program's P4Runtime names
(test_ctl_names.py) and loads in a moment."""

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import replace

import pytest

from controller import topology as T
from controller.job_sessions import next_session
from controller.main import main
from controller.p4info import Pipeline
from controller.program import canonical_state, desired_state, program, read_state
from controller.session import Session, SwitchError, SwitchUnreachable, Update, WriteRejected
from controller.shell import shell_argv
from controller.topology import Topology

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
P4INFO = os.path.join(HERE, "p4", "build", "ctl_tables.p4info.txt")
BMV2_JSON = os.path.join(HERE, "p4", "build", "ctl_tables.json")
SESSIONS = {1: 9, 2: 10}    # the jobs' sessions the tests program


def _softswitch_missing() -> str | None:
    try:
        from softswitch import Switch  # noqa: F401  (what `python -m softswitch` runs)
    except (ImportError, AttributeError) as e:
        return f"softswitch is not importable ({e})"
    return None


TARGETS = [
    pytest.param("soft", marks=pytest.mark.skipif(_softswitch_missing() is not None,
                                                   reason=str(_softswitch_missing()))),
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.skipif(
        shutil.which("simple_switch_grpc") is None, reason="needs simple_switch_grpc on PATH")]),
]


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def with_addresses(topo, grpc_ports, thrift_ports=None):
    data = topo.to_dict()
    for i, sw in enumerate(data["switches"]):
        sw["grpc_addr"] = f"127.0.0.1:{grpc_ports[i]}"
        if thrift_ports:
            sw["thrift_port"] = thrift_ports[i]
    return Topology.from_dict(data)


def command(target, switch):
    if target == "soft":
        return [sys.executable, "-m", "softswitch", "--device-id", str(switch.device_id),
                "--grpc-server-addr", switch.grpc_addr, "--no-p4"]
    return ["simple_switch_grpc", "--device-id", str(switch.device_id), "--no-p4",
            "--thrift-port", str(switch.thrift_port), "--log-level", "warn",
            "--notifications-addr", f"ipc:///tmp/natswitch-ctl-{os.getpid()}-{switch.name}.ipc",
            "--", "--grpc-server-addr", switch.grpc_addr]


@pytest.fixture(scope="module")
def pipeline():
    return Pipeline.load(P4INFO, BMV2_JSON)


@pytest.fixture(scope="module", params=TARGETS)
def switches(request, tmp_path_factory):
    """A leaf-spine of 2 leaves and 1 spine (3 switches), one switch process each."""
    base = T.leaf_spine(leaves=2, spines=1, hosts=2)
    n = len(base.switches)
    ports = free_ports(2 * n)
    topo = with_addresses(base, ports[:n], ports[n:])
    topo = topo.with_jobs([T.JobSpec(1, ("h1", "h2", "h3", "h4"), 32, "cnat8"),
                           T.JobSpec(2, ("h1", "h3"), 16)]).with_loss(0.01)
    logs = tmp_path_factory.mktemp(request.param)
    procs = []
    for s in topo.switches:
        log = open(logs / f"{s.name}.log", "w")  # noqa: SIM115
        procs.append((subprocess.Popen(command(request.param, s), cwd=REPO, stdout=log,
                                       stderr=subprocess.STDOUT), log))
    try:
        for s in topo.switches:
            # Starting processes on a loaded machine: allow them time to listen.
            with Session(s, connect_timeout=60):
                pass
        yield topo
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, log in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def results_by_name(results):
    out = {}
    for switch, r in results:
        assert not isinstance(r, Exception), f"{switch.name}: {r}"
        out[switch.name] = r
    return out


def test_program_reads_back_and_second_run_writes_nothing(switches, pipeline):
    topo = switches
    want = canonical_state(desired_state(topo, SESSIONS), pipeline.p4info)
    first = results_by_name(program(topo, pipeline, SESSIONS, connect_timeout=30))
    for name, r in first.items():
        assert r.inserted + r.kept == len(want[name])
    for s in topo.switches:
        with Session(s, connect_timeout=30) as session:
            assert session.use_running_pipeline()
            assert set(read_state(session)) == set(want[s.name])
    second = results_by_name(program(topo, pipeline, SESSIONS, connect_timeout=30))
    for name, r in second.items():
        assert (r.pushed, r.written, r.kept) == (False, 0, len(want[name]))


def test_changed_jobs_modify_and_delete(switches, pipeline):
    topo = switches
    results_by_name(program(topo, pipeline, SESSIONS, connect_timeout=30))
    smaller = topo.with_jobs([T.JobSpec(1, ("h1", "h2", "h3", "h4"), 32, "fixed32")])
    changed = results_by_name(program(smaller, pipeline, SESSIONS, connect_timeout=30))
    spine = [s.name for s in topo.switches if s.role == "spine"][0]
    assert changed[spine].modified == 1                  # job 1's result encoding
    assert sum(r.deleted for r in changed.values()) > 0   # job 2's entries and groups
    want = canonical_state(desired_state(smaller, SESSIONS), pipeline.p4info)
    for s in topo.switches:
        with Session(s, connect_timeout=30) as session:
            session.use_running_pipeline()
            assert set(read_state(session)) == set(want[s.name])
    results_by_name(program(topo, pipeline, SESSIONS, connect_timeout=30))


def test_rejected_write_names_switch_entity_and_reason(switches, pipeline):
    topo = switches
    results_by_name(program(topo, pipeline, SESSIONS, connect_timeout=30))
    s = topo.switches[0]
    route = canonical_state(desired_state(topo, SESSIONS), pipeline.p4info)[s.name][0]
    with Session(s, connect_timeout=30) as session:
        session.use_running_pipeline()
        with pytest.raises(WriteRejected) as err:
            session.write([(Update.INSERT, route)])
    text = str(err.value)
    assert f"{s.name} (device {s.device_id} at {s.grpc_addr})" in text
    assert repr(route) in text and "ALREADY_EXISTS" in text
    assert err.value.rejected[0].entity == route


def test_dead_switch_is_named(switches, pipeline):
    dead = with_addresses(T.star(2), free_ports(1))
    (switch, r), = program(dead, pipeline, SESSIONS, connect_timeout=1.0)
    assert isinstance(r, SwitchUnreachable)
    assert f"s1 (device 1 at {switch.grpc_addr}): unreachable" in str(r)


def test_cli_program_twice_stats_and_reset(switches, tmp_path, capsys):
    path = tmp_path / "topo.json"
    switches.save(str(path))
    prog = ["--topology", str(path), "--timeout", "30", "--p4info", P4INFO, "--bmv2-json",
            BMV2_JSON]
    assert main(prog) == 0
    assert main(prog) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("3 of 3 switches programmed: 0 written")
    assert main(["stats", "--topology", str(path), "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    for s in switches.switches:
        assert f"{s.name} (device {s.device_id}, {s.grpc_addr}" in out
    assert "CONTRIB" in out and "rx pkts" in out
    assert main(prog + ["--reset"]) == 0
    assert "3 of 3 switches reset" in capsys.readouterr().out
    for s in switches.switches:
        with Session(s, connect_timeout=30) as session:
            assert session.use_running_pipeline()
            assert read_state(session) == []
    assert main(prog) == 0     # and back


def job_sessions_on(topo, election_id=(0, 1)) -> dict[str, dict[int, int]]:
    """switch -> {job id: the session its jobs entry holds}, read back over P4Runtime."""
    out = {}
    for s in topo.switches:
        with Session(s, election_id=election_id, connect_timeout=30) as session:
            session.use_running_pipeline()
            out[s.name] = {dict(e.match)["hdr.agg.job_id"].value: dict(e.params)["session"]
                           for e in session.read_table("NatIngress.agg.jobs")}
    return out


def test_cli_installs_the_sessions_it_writes_and_moves_them_on_request(switches, tmp_path,
                                                                        capsys):
    path = tmp_path / "topo.json"
    switches.save(str(path))
    prog = ["--topology", str(path), "--timeout", "30", "--p4info", P4INFO, "--bmv2-json",
            BMV2_JSON]
    assert main(prog) == 0
    first = json.loads((tmp_path / "sessions.json").read_text())["jobs"]
    sessions = {int(j): v["session"] for j, v in first.items()}
    assert sorted(sessions) == [1, 2] and all(v["epoch"] == 0 for v in first.values())
    held = job_sessions_on(switches)
    assert all(jobs == {j: sessions[j] for j in jobs} for jobs in held.values())
    assert sum(len(jobs) for jobs in held.values()) == 6       # both span the 3 switches
    # programming again keeps them; --new-session moves every job on every switch of it
    assert main(prog) == 0
    assert json.loads((tmp_path / "sessions.json").read_text())["jobs"] == first
    capsys.readouterr()
    assert main(prog + ["--new-session"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "3 of 3 switches programmed: 6 written (0 inserted, 6 modified")
    moved = json.loads((tmp_path / "sessions.json").read_text())["jobs"]
    for j, v in moved.items():
        assert (v["session"], v["epoch"]) == (next_session(first[j]["session"]), 1)
    held = job_sessions_on(switches)
    assert all(s == moved[str(j)]["session"] for jobs in held.values() for j, s in jobs.items())
    assert main(prog + ["--reset", "--new-session"]) == 2
    assert "it takes no --new-session" in capsys.readouterr().err


def test_shell_pushes_only_a_program_the_switch_does_not_run(switches, pipeline):
    results_by_name(program(switches, pipeline, SESSIONS, connect_timeout=30))
    s = switches.switches[0]
    argv = shell_argv(s, pipeline, 30, (0, 1))
    assert argv[1:] == ["-m", "p4runtime_sh", "--grpc-addr", s.grpc_addr, "--device-id",
                        str(s.device_id), "--election-id", "0,1"]
    other = replace(pipeline, cookie=pipeline.cookie ^ 1)
    assert shell_argv(s, other, 30, (0, 1))[-2:] == ["--config", f"{P4INFO},{BMV2_JSON}"]


def test_another_controller_is_reported(switches):
    s = switches.switches[0]
    with Session(s, election_id=(0, 1), connect_timeout=30):
        with pytest.raises(SwitchError, match=r"election id 0,1 is in use by another client"):
            Session(s, election_id=(0, 1), connect_timeout=1.0).connect()
    with Session(s, election_id=(0, 9), connect_timeout=30):
        with pytest.raises(SwitchError, match=r"not primary: .* higher election id than 0,1"):
            Session(s, election_id=(0, 1), connect_timeout=5.0).connect()
