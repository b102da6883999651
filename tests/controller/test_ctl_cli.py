"""The command line: topology files, dry runs, errors; run as a script from elsewhere."""

import json
import os
import re
import subprocess
import sys

import pytest

from controller import topology as T
from controller.main import main
from controller.stats import (
    DROPS_IN,
    DROPS_OUT,
    EVENTS,
    PORT_RX,
    PORT_TX,
    SwitchStats,
    format_stats,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_script_runs_without_the_repo_on_the_path(tmp_path):
    out = tmp_path / "t.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-I", os.path.join(REPO, "controller", "main.py"), "topology",
         "--topo", "fat-tree", "--k", "4", "-o", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "20 switches, 16 hosts" in proc.stderr
    assert T.Topology.load(str(out)).to_json() == T.fat_tree(4).with_jobs(
        T.Topology.load(str(out)).jobs).to_json()
    proc = subprocess.run([sys.executable, "-I", os.path.join(REPO, "controller", "main.py"),
                           "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "stats" in proc.stdout and "shell" in proc.stdout


def test_topology_command_writes_jobs_and_loss(tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["topology", "--topo", "leaf-spine", "--leaves", "2", "--spines", "1",
                 "--hosts", "3", "--loss", "0.02", "--jobs", "h1-h4:slots=32",
                 "h5,h6:enc=cnat8:partials=cnat8:max_exp=140",
                 "-o", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["jobs"] == [
        {"id": 1, "workers": ["h1", "h2", "h3", "h4"], "slots": 32, "encoding": "fixed32",
         "partials": "fixed32", "max_exp": 158},
        {"id": 2, "workers": ["h5", "h6"], "slots": 64, "encoding": "cnat8",
         "partials": "cnat8", "max_exp": 140}]
    assert {link["loss"] for link in data["links"]} == {0.02}
    # Without --jobs, a built topology gets one job of all hosts; a file keeps its own.
    assert main(["topology", "--topo", "star", "--hosts", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"][0]["workers"] == ["h1", "h2", "h3"]
    assert main(["topology", "--topology", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == data["jobs"]


def test_topology_command_takes_the_machines_addresses(tmp_path):
    """Real machines (docs/TORCH.md): the switch server's gRPC address and the NICs' MACs
    and IPs go into the file by options, and what programs the switch uses them."""
    path = tmp_path / "t.json"
    assert main(["topology", "--topo", "star", "--hosts", "3", "--grpc-host", "203.0.113.10",
                 "--host-addr", "h1=0C:42:A1:00:00:01,198.51.100.1/24",
                 "h3=0c:42:a1:00:00:03,198.51.100.3", "-o", str(path)]) == 0
    topo = T.Topology.load(str(path))
    assert topo.switch("s1").grpc_addr == "203.0.113.10:50051"
    assert topo.host("h1") == T.Host("h1", "0c:42:a1:00:00:01", "198.51.100.1", 24)
    assert topo.host("h3") == T.Host("h3", "0c:42:a1:00:00:03", "198.51.100.3", 8)
    assert topo.host("h2") == T.star(3).host("h2")
    from controller.forwarding import entries
    assert "198.51.100.3" in repr(entries(topo)["s1"])


def test_dry_run_prints_trees_and_entries(capsys, tmp_path):
    sessions = tmp_path / "sessions.json"
    assert main(["--topo", "fat-tree", "--dry-run", "--jobs", "h1,h5:id=4", "--sessions",
                 str(sessions)]) == 0
    out = capsys.readouterr().out
    m = re.search(r"job 4: 2 workers, 64 slots, fixed32 results, dense, session (\d+), "
                  r"root s4", out)
    assert m, out[:300]
    assert ("NatIngress.agg.job_root(base=0, num_slots=64, num_children=2, mcast_grp=4, "
            f"result_enc=0, max_exp=158, session={m.group(1)}, round_key=") in out
    assert out.count("NatIngress.fwd.routes[") == 20 * 16
    assert not sessions.exists()        # a dry run writes nothing


@pytest.mark.parametrize("argv,message", [
    (["--topo", "star", "--k", "4"], "--k does not apply to --topo star"),
    (["--dry-run"], "no topology"),
    (["--topo", "star", "--topology", "x.json"], "not both"),
    (["--topology", "/nonexistent/t.json"], "cannot read topology file"),
    (["--topo", "star", "--hosts", "33", "--dry-run"], "33 children, at most 32"),
    (["--topo", "star", "--jobs", "h1-h9"], "'h5' is not a host"),
    (["--topo", "star", "--loss", "2"], "loss must be within [0, 1]"),
    (["--topo", "star", "--p4info", "/nonexistent.txt"], "make p4"),
    (["--topo", "star", "--switches", "s7"], "no switch named 's7'"),
    (["--topology", "t.json", "--grpc-host", "10.0.0.1"], "--grpc-host applies to a built"),
    (["--topo", "star", "--host-addr", "h9=0c:42:a1:00:00:01,10.1.1.1"], "no host named 'h9'"),
    (["--topo", "star", "--host-addr", "h1=10.1.1.1"], "expected NAME=MAC,IP/LEN"),
    (["--topo", "star", "--host-addr", "h1=0c:42:a1:00:00:01,10.1.1"], "is not IPv4"),
    (["--topo", "star", "--host-addr", "h1=0c:42:a1:00:00:01,10.0.1.2"], "share ip"),
])
def test_errors_are_clear(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err


def test_stats_table():
    topo = T.star(2)
    stats = SwitchStats(topo.switches[0], {
        EVENTS: {0: (10, 0), 2: (5, 0)},
        DROPS_IN: {2: (3, 300)},
        DROPS_OUT: {9: (1, 100)},
        PORT_RX: {1: (7, 700), 2: (8, 800), 9: (1, 64)},
        PORT_TX: {1: (5, 500)},
    })
    lines = format_stats(stats, topo).splitlines()
    assert lines[0] == "s1 (device 1, 127.0.0.1:50051, switch)"
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert rows["CONTRIB"] == ["10"] and rows["COMPLETE"] == ["5"] and rows["ANSWERED"] == ["0"]
    assert rows["FOREIGN_PORT"] == ["3", "0"] and rows["IMPAIRMENT"] == ["0", "1"]
    assert "NO_ROUTE" not in rows                       # only drops that happened
    assert rows["1"] == ["h1", "7", "700", "5", "500"]
    assert rows["2"] == ["h2", "8", "800", "0", "0"]
    assert rows["9"] == ["-", "1", "64", "0", "0"]      # traffic on an unlinked port shows
    empty = format_stats(SwitchStats(topo.switches[0]), topo)
    assert "runs no program" in empty


def idle_port_range(count: int) -> int:
    """A base port with nothing listening on it and the `count - 1` ports above it."""
    import socket

    for base in range(47000, 60000, 97):
        for port in range(base, base + count):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
        else:
            return base
    pytest.skip("no idle port range on this machine")


@pytest.mark.parametrize("command", ["program", "stats"])
def test_no_switch_running_is_one_short_error_with_a_hint(command, capsys):
    base = idle_port_range(20)
    assert main([command, "--topo", "fat-tree", "--grpc-port", str(base)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    (line,) = out.err.splitlines()
    assert line.startswith("error: no switch answers")
    assert f"127.0.0.1:{base} .. 127.0.0.1:{base + 19} (20 switches)" in line
    assert "mininet/run.py --topo fat-tree --k 4 --switches-only" in line


def test_a_socket_connected_to_itself_is_not_a_listening_switch(monkeypatch):
    """A port in the ephemeral range can be "connected" with nothing listening: the kernel
    may bind the connecting socket to that port (TCP simultaneous open with itself)."""
    import socket
    from types import SimpleNamespace

    from controller import session

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sw = SimpleNamespace(grpc_addr=f"127.0.0.1:{port}")

    def self_connect(addr, timeout=None):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.settimeout(timeout)
        s.connect(addr)         # succeeds: the socket is its own peer
        return s

    with monkeypatch.context() as m:
        m.setattr(session.socket, "create_connection", self_connect)
        assert session.listening([sw], 0) == []
    with socket.socket() as server:         # and a real listener is found
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        assert session.listening([sw], 0) == [sw]


def test_drops_text_names_each_reason_where_it_was_counted():
    from controller.stats import DROPS_IN, DROPS_OUT, drops_text

    counters = {DROPS_IN: {"20": [3, 300], "14": [12, 1200], "19": [0, 0]},
                DROPS_OUT: {"22": [1, 90]}, "NatIngress.agg.events": {"2": [5, 500]}}
    assert drops_text(counters) == "ingress STALE 12, EARLY 3; egress SUM_OVERFLOW 1"
    assert drops_text({DROPS_IN: {"99": [2, 20]}}) == "ingress reason 99 2"
    assert drops_text({"NatIngress.agg.events": {"2": [5, 500]}}) is None
