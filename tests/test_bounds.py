"""mininet/bounds.py: what bound a run, from sampled counters and the workers' step logs
(synthetic here; tests/e2e/test_run_mininet.py makes a real run link-bound and another
switch-bound)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mininet"))

import bounds  # noqa: E402

from controller.topology import star  # noqa: E402


def samples(t0, seconds, tx_rate, rx_rate, switch_core, machine_cores, cores=2, n=11):
    """Readings every seconds/(n-1) s: port s1-eth2 sends tx_rate and receives rx_rate
    bytes/s, s1 burns switch_core of a core, the machine machine_cores of `cores`."""
    s = bounds.Samples(ports={"s1-eth2": [], "s1-eth1": []}, switch_cpu={"s1": []})
    for i in range(n):
        t = i * seconds / (n - 1)
        s.times.append(t0 + t)
        s.ports["s1-eth2"].append((int(tx_rate * t), int(rx_rate * t)))
        s.ports["s1-eth1"].append((0, 0))
        s.switch_cpu["s1"].append(switch_core * t)
        s.machine.append((machine_cores * t, cores * t))
    return s


def result(t0, steps, step_seconds, compute):
    return {"steps": [{"step": i + 1, "step_seconds": step_seconds,
                       "compute_seconds": compute, "end": t0 + (i + 1) * step_seconds}
                      for i in range(steps)]}


LINKS = [bounds.PortLink("s1-eth1", "s1", "h1", 10.0), bounds.PortLink("s1-eth2", "s1", "h2",
                                                                     10.0)]


def test_the_busiest_link_direction_over_the_steps_after_the_first():
    t0 = 1000.0
    # 10 Mbit/s links; s1 sends h2 1 MB/s (80 %), receives 0.25 MB/s (20 %)
    s = samples(t0, 10.0, 1e6, 2.5e5, 0.3, 1.0)
    r = bounds.analyse(s, LINKS, [result(t0, 10, 1.0, 0.1)], "soft", cores=2)
    bl = r["busiest_link"]
    assert bl["link"] == "s1->h2" and bl["utilisation"] == pytest.approx(0.8, rel=1e-6)
    assert r["seconds"] == pytest.approx(9.0) and r["steps"] == 9     # step 1 left out
    assert r["switch_cores"]["s1"] == pytest.approx(0.3)
    assert r["machine_cores"] == pytest.approx(1.0)
    assert r["compute_share"] == pytest.approx(0.1)
    assert r["bound"] == "link" and r["text"] == "link: s1->h2 80 % busy"
    assert r["describes_network"]


@pytest.mark.parametrize("tx, switch, machine, compute, bound, text", [
    (1e5, 0.97, 1.2, 0.1, "switch s1", "switch s1: 97 % of a core -- bound by"),
    (1e5, 0.3, 1.97, 0.1, "machine", "this machine's CPU: 1.97 of 2 cores -- bound by"),
    (1e5, 0.2, 1.0, 0.81, "compute", "compute: 81 % of the step"),
    (1.2e6, 0.5, 1.5, 0.3, "link", "link: s1->h2 96 % busy"),
    # A full link binds even when the CPU is full too: only more bandwidth would help.
    (1.2e6, 0.5, 1.97, 0.3, "link", "link: s1->h2 96 % busy"),
    (1.0e6, 0.5, 1.97, 0.3, "machine", "this machine's CPU: 1.97 of 2 cores"),
    # Nothing near full: the run waited on round trips, however a software switch made them.
    (1e5, 0.26, 1.2, 0.1, "latency", "round trips: nothing near full (the most: switch s1: "
                                     "26 % of a core) -- round trips through software"),
])
def test_the_bound_is_the_resource_closest_to_full(tx, switch, machine, compute, bound, text):
    t0 = 50.0
    s = samples(t0, 5.0, tx, 0.0, switch, machine)
    r = bounds.analyse(s, LINKS, [result(t0, 5, 1.0, compute)], "bmv2", cores=2)
    assert r["bound"] == bound and r["text"].startswith(text), r["text"]
    software = bound in ("machine", "switch s1", "latency")
    assert ("does not describe a network" in r["text"]) == software
    assert r["describes_network"] == (not software)


def test_readings_between_samples_are_interpolated():
    s = bounds.Samples(times=[0.0, 1.0, 3.0], ports={"p": [(0, 0), (10, 20), (30, 20)]})
    assert s.at(s.ports["p"], 2.0) == (20.0, 20.0)
    assert s.at(s.ports["p"], -5.0) == (0, 0) and s.at(s.ports["p"], 9.0) == (30, 20)


def test_no_timed_steps_no_verdict():
    s = samples(0.0, 1.0, 0, 0, 0, 0)
    assert bounds.analyse(s, LINKS, [{"steps": []}, {"error": "x"}], "soft") is None


def test_every_switch_port_of_a_star_is_sampled_with_its_peer():
    links = bounds.port_links(star(3))
    assert sorted((p.ifname, p.peer) for p in links) == [
        ("s1-eth1", "h1"), ("s1-eth2", "h2"), ("s1-eth3", "h3")]


def test_the_sampler_reads_this_machine_and_a_live_process():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        sampler = bounds.Sampler(["lo"], {"s1": busy.pid}, period=0.05).start()
        time.sleep(0.6)
        got = sampler.stop()
    finally:
        busy.kill()
        busy.wait()
    cpu = got.switch_cpu["s1"]
    assert len(got.times) >= 5 and cpu[-1] > cpu[0]      # a spinning process burns CPU
    busy_s, total_s = got.machine[-1][0] - got.machine[0][0], got.machine[-1][1] - got.machine[0][1]
    assert 0 < busy_s <= total_s + 1e-6 and total_s > 0
    assert all(len(v) == len(got.times) for v in got.ports.values())
    assert os.path.exists("/sys/class/net/lo/statistics/tx_bytes")
