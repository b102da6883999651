"""A star of 4 hosts in Mininet: exact allreduce, two jobs at once, loss, a killed worker."""

from __future__ import annotations

import time

import pytest
from conftest import assert_exact, finish_probes, reprogram, running, start_probes

from controller import topology
from controller.topology import JobSpec


@pytest.fixture(scope="module")
def star(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("star")
    topo = topology.star(hosts=4).with_jobs([
        JobSpec(1, ("h1", "h2", "h3", "h4"), slots=32, encoding="cnat8"),
        JobSpec(2, ("h1", "h2"), slots=16, encoding="fixed32"),
        JobSpec(3, ("h3", "h4"), slots=16, encoding="cnat8"),
    ])
    with running(topo, workdir) as (emu, topo_path):
        yield emu, topo, topo_path, workdir


def test_allreduce_is_exact_with_4_workers(star):
    emu, topo, path, workdir = star
    records = finish_probes(start_probes(emu, path, topo.job(1), workdir), 120)
    assert assert_exact(records) >= 2 * 18      # 2 calls of 3000 elements, 18 chunks each


def test_two_jobs_at_once_stay_apart_and_exact(star):
    emu, topo, path, workdir = star
    a = start_probes(emu, path, topo.job(2), workdir)
    b = start_probes(emu, path, topo.job(3), workdir)
    ra, rb = finish_probes(a, 120), finish_probes(b, 120)
    assert assert_exact(ra) and assert_exact(rb)
    # each job's mean is over its own two workers only
    assert not any(r["rank"] > 1 for r in ra + rb)


def test_allreduce_stays_exact_under_20_percent_loss(star):
    emu, topo, path, workdir = star
    lossy = topo.with_loss(0.2)
    reprogram(emu, lossy)
    try:
        records = finish_probes(start_probes(emu, path, topo.job(1), workdir, "--calls", "1"),
                                180)
        assert assert_exact(records) == 18
        assert sum(r["stats"]["retransmissions"] for r in records) > 0, "no loss happened"
    finally:
        reprogram(emu, topo)


def test_a_killed_worker_ends_the_others_with_a_clear_error(star):
    emu, topo, path, workdir = star
    timeout = 4.0
    job = topo.job(1)
    procs = start_probes(emu, path, job, workdir, "--calls", "400", "--timeout", str(timeout),
                         "--progress")
    host, victim, _ = procs[2]
    # killed once its 20th call is done, well before the 400th: a fixed sleep let a fast
    # machine finish every call first
    log = workdir / f"probe-j{job.id}-{host}.log"
    deadline = time.monotonic() + 120
    while "call 20\n" not in log.read_text(errors="replace"):
        assert victim.poll() is None, f"probe on {host} ended before its 20th call"
        assert time.monotonic() < deadline, f"probe on {host} made no 20 calls in 120 s"
        time.sleep(0.05)
    assert victim.poll() is None, f"probe on {host} ended before it could be killed"
    victim.kill()
    victim.wait()
    # finish_probes fails the test if a survivor is still running after the bound
    records = finish_probes([p for p in procs if p[1] is not victim], timeout + 60)
    for r in records:
        assert r["error"], f"rank {r['rank']} finished all calls without worker {host}"
        assert "chunk" in r["error"] or "slot" in r["error"], r["error"]


def test_ordinary_traffic_is_routed_ping_and_iperf(star):
    emu, topo, path, workdir = star
    assert emu.net.pingAll(timeout=2) == 0.0          # percent lost
    h1, h4 = emu.host("h1"), emu.host("h4")
    server = h4.popen(["iperf", "-s", "-p", "5201"])
    try:
        # the client must not race the server's listen() (a refused connect fails the test)
        deadline = time.monotonic() + 20
        while ":5201" not in h4.cmd("ss -Hltn 'sport = :5201'"):
            assert server.poll() is None and time.monotonic() < deadline, "iperf -s not listening"
            time.sleep(0.1)
        out = h1.cmd(f"iperf -c {topo.host('h4').ip} -p 5201 -t 2 -y C")
    finally:
        server.terminate()
        server.wait()
    # CSV: the last field is the throughput in bits/s
    assert out.strip() and int(out.strip().splitlines()[-1].split(",")[-1]) > 0, out
