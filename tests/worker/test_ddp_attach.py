"""worker/ddp/attach.py: a user's DDP script attached to the switch by natswitch_hook(),
which finds the rank's host (by the IPs of this machine), job and session, checks torch's
rank against the job's, and builds the client as worker/main.py does. No root: the hook's
client reaches the host parameter server over loopback UDP (the switch's arithmetic)."""

import socket

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from controller.job_sessions import SessionsFile, read_jobs  # noqa: E402
from controller.topology import JobSpec, TopologyError, star  # noqa: E402
from harness.network import udp_ps  # noqa: E402
from worker.baseline import ParameterServer  # noqa: E402
from worker.ddp import AttachError, attach, natswitch_hook  # noqa: E402
from worker.ddp.inproc import run_ranks  # noqa: E402
from worker.main import session_from_file  # noqa: E402

TOPO = star(5).with_jobs([JobSpec(1, ("h1", "h2", "h3")), JobSpec(2, ("h4", "h5"))])
IP = {h.name: h.ip for h in TOPO.hosts}


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(attach.HOST_ENV, raising=False)
    monkeypatch.delenv(attach.JOB_ENV, raising=False)


# ---------------------------------------------------------------------- the host


def test_local_addresses_hold_loopback():
    assert attach.local_addresses().get("127.0.0.1") == "lo"


def test_the_host_is_the_one_whose_ip_is_here():
    here = {"127.0.0.1": "lo", "192.0.2.7": "eth0", IP["h2"]: "enp1s0"}
    assert attach.find_host(TOPO, addresses=here) == ("h2", "enp1s0")


def test_a_named_host_wins_and_gets_its_interface_if_here(monkeypatch):
    here = {IP["h2"]: "enp1s0"}
    assert attach.find_host(TOPO, "h4", addresses=here) == ("h4", None)
    assert attach.find_host(TOPO, "h2", addresses={**here, IP["h3"]: "x"}) == ("h2", "enp1s0")
    monkeypatch.setenv(attach.HOST_ENV, "h3")
    assert attach.find_host(TOPO, addresses=here) == ("h3", None)
    with pytest.raises(TopologyError, match="no host named 'h9'"):
        attach.find_host(TOPO, "h9", addresses=here)


def test_no_host_here_is_a_clear_error():
    with pytest.raises(AttachError) as e:
        attach.find_host(TOPO, addresses={"127.0.0.1": "lo", "192.0.2.7": "eth0"},
                         where="topo.json")
    text = str(e.value)
    assert "no host of topo.json has its IP on this machine" in text
    assert f"h1 {IP['h1']}" in text and "192.0.2.7 on eth0" in text
    assert "127.0.0.1" not in text and attach.HOST_ENV in text


def test_several_hosts_here_is_a_clear_error():
    with pytest.raises(AttachError) as e:
        attach.find_host(TOPO, addresses={IP["h1"]: "eth0", IP["h3"]: "eth1"})
    assert "several hosts" in str(e.value) and "h1 on eth0, h3 on eth1" in str(e.value)


# ---------------------------------------------------------------------- the job


def test_the_job_is_the_one_holding_the_host(monkeypatch):
    assert attach.find_job(TOPO, "h2") == 1
    assert attach.find_job(TOPO, "h5") == 2
    assert attach.find_job(TOPO, "h5", 2) == 2
    monkeypatch.setenv(attach.JOB_ENV, "2")
    assert attach.find_job(TOPO, "h4") == 2


@pytest.mark.parametrize("topo, host, job, env, message", [
    (TOPO, "h2", 2, None, "h2 is not a worker of job 2 (h4, h5)"),
    (TOPO, "h2", 7, None, "no job 7"),
    (TOPO, "h2", None, "x", "NATSWITCH_JOB='x': expected a job id"),
    (TOPO.with_jobs([JobSpec(1, ("h1", "h2")), JobSpec(3, ("h2", "h3"))]), "h2", None, None,
     "h2 is a worker of jobs 1, 3: name one"),
    (TOPO.with_jobs([JobSpec(1, ("h1", "h2"))]), "h4", None, None,
     "h4 is not a worker of job 1 (h1, h2)"),
    (TOPO.with_jobs([JobSpec(1, ("h1",)), JobSpec(2, ("h2",))]), "h4", None, None,
     "h4 is not a worker of any job of the topology (job 1: h1; job 2: h2)"),
    (TOPO.with_jobs([]), "h1", None, None, "holds no job"),
])
def test_job_errors_are_clear(monkeypatch, topo, host, job, env, message):
    if env is not None:
        monkeypatch.setenv(attach.JOB_ENV, env)
    with pytest.raises((AttachError, TopologyError)) as e:
        attach.find_job(topo, host, job)
    assert message in str(e.value)


# ---------------------------------------------------------------------- the rank


def test_the_rank_must_be_the_hosts_position():
    attach.check_rank("h2", 1, ("h1", "h2", "h3"), 1, 1, 3)
    with pytest.raises(AttachError) as e:
        attach.check_rank("h2", 1, ("h1", "h2", "h3"), 1, 0, 3)
    assert ("torch's rank is 0 (RANK), but h2 is worker 1 of job 1 (h1, h2, h3)"
            in str(e.value)) and "--node-rank 1" in str(e.value)
    with pytest.raises(AttachError, match=r"world size is 2 \(WORLD_SIZE\), but job 1 has 3"):
        attach.check_rank("h2", 1, ("h1", "h2", "h3"), 1, 1, 2)


# ---------------------------------------------------------------------- the hook


@pytest.fixture
def topo_file(tmp_path):
    """Two workers of job 1, and beside the file the sessions the controller writes."""
    path = tmp_path / "topo.json"
    topo = star(3).with_jobs([JobSpec(1, ("h1", "h2"), slots=64)])
    topo.save(str(path))
    SessionsFile(str(tmp_path / "sessions.json"), topo).write()
    return path


@pytest.fixture
def ps_addr():
    with udp_ps(ParameterServer(2, slots=64)) as addr:
        yield addr


def small_model(rank: int) -> nn.Module:
    torch.manual_seed(rank)          # ranks start apart; DDP broadcasts rank 0's
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_a_users_ddp_loop_trains_in_lockstep_through_the_hook(topo_file, ps_addr):
    steps = 4

    def body(rank, group):
        model = small_model(rank)
        ddp = DDP(model, process_group=group)
        comm = natswitch_hook(ddp, topo_file, host=f"h{rank + 1}", baseline_ps=ps_addr,
                              ps_encoding="fixed32", timeout=20)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        with comm:
            for _ in range(steps):
                x = torch.randn(16, 8, generator=gen)
                loss = ddp(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        return comm, params

    out = run_ranks(2, body, join_timeout=300)
    for r in out:
        if isinstance(r, BaseException):
            raise r
    (c0, p0), (c1, p1) = out
    assert torch.equal(p0, p1)                       # the same means, bit for bit
    assert not torch.equal(p0, torch.cat([p.reshape(-1) for p in small_model(0).parameters()]))
    n = p0.numel()
    assert (c0.host, c0.rank, c0.job, c0.workers) == ("h1", 0, 1, 2)
    assert (c1.host, c1.rank) == ("h2", 1)
    # A host parameter server's session, as worker/main.py agrees on it (the switch's comes
    # from the controller's sessions file: tests/e2e/test_real_machines.py).
    assert c0.session == c1.session == session_from_file(str(topo_file))
    assert c0.state.path == "switch" and c0.encoding == "FIXED32"
    # Every gradient of every step went through the client.
    assert c0.stats.as_dict()["elements"] == steps * n == c1.stats.as_dict()["elements"]
    assert c0.closed and "h1 rank 0 of 2, job 1 session" in str(c0)


def attach_each(topo_file, hosts, **kw):
    """natswitch_hook() on each of len(hosts) thread ranks; returns each one's outcome."""
    def body(rank, group):
        ddp = DDP(small_model(rank), process_group=group)
        comm = natswitch_hook(ddp, topo_file, host=hosts[rank], **kw)
        comm.close()
        return comm
    return run_ranks(len(hosts), body, join_timeout=120)


def test_a_rank_that_is_not_its_hosts_position_is_refused_before_any_port(topo_file,
                                                                         monkeypatch):
    opened = []
    monkeypatch.setattr("worker.main.open_transport",
                        lambda *a: opened.append(a) or pytest.fail("a port was opened"))
    out = attach_each(topo_file, ["h2", "h1"])
    assert all(isinstance(r, AttachError) for r in out), out
    assert "torch's rank is 0 (RANK), but h2 is worker 1 of job 1 (h1, h2)" in str(out[0])
    assert "torch's rank is 1 (RANK), but h1 is worker 0 of job 1 (h1, h2)" in str(out[1])
    assert not opened


def test_the_host_is_found_by_its_ip_and_its_interface_is_the_port(topo_file, monkeypatch):
    ip = star(3).host("h2").ip
    monkeypatch.setattr(attach, "local_addresses", lambda: {ip: "nosuchnic0"})
    out = attach_each(topo_file, [None, None])
    # Rank 0 found h2 (worker 1); rank 1 did too, and went on to open a raw socket on the
    # interface that holds h2's IP.
    assert isinstance(out[0], AttachError) and "but h2 is worker 1" in str(out[0])
    assert isinstance(out[1], AttachError) and "nosuchnic0" in str(out[1])


def test_the_switch_path_takes_the_controllers_session(topo_file):
    """Towards a switch (here a tunnel port to nowhere: nothing is sent before a backward
    pass), the session is the one the controller wrote beside the topology."""
    ports = []
    for _ in range(2):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])

    def body(rank, group):
        ddp = DDP(small_model(rank), process_group=group)
        with natswitch_hook(ddp, topo_file, host=f"h{rank + 1}",
                            port=f"udp:127.0.0.1:{ports[rank]}>127.0.0.1:9") as comm:
            return comm
    out = run_ranks(2, body, join_timeout=120)
    session = read_jobs(str(topo_file.parent / "sessions.json"))[1]["session"]
    assert [(c.session, c.encoding, c.state.path) for c in out] == [
        (session, "CNAT8", "switch")] * 2, out
    assert "switch via udp:" in out[0].where


@pytest.mark.parametrize("kw, error, message", [
    ({"compressor": "bogus"}, AttachError, "unknown compressor"),
    ({"mode": "rows"}, AttachError, "mode must be one of"),
    ({"steps": 3}, TypeError, "unexpected option 'steps'"),
    ({"nonsense": 1}, TypeError, "unexpected option 'nonsense'"),
    ({"session": 0}, AttachError, "--session must be within 1..65535"),
])
def test_option_errors_are_clear(topo_file, kw, error, message):
    out = attach_each(topo_file, ["h1", "h2"], **kw)
    assert all(isinstance(r, error) and message in str(r) for r in out), out


def test_it_needs_the_ddp_model():
    with pytest.raises(TypeError, match="needs the DistributedDataParallel model"):
        natswitch_hook(nn.Linear(2, 2), "topo.json")
