"""What bound a run: its links, its switches, this machine's CPU, or the workers' compute.

While the workers train, a sampler reads, every PERIOD seconds, the byte counters of every
switch port (each link's switch end sits in the root namespace: what it sent went to the
peer, what it received came from it), the CPU seconds of every switch process, and this
machine's busy CPU time. Per job, over the steps after the first (which builds buffers and
warms caches), it gives:

- the busiest link direction: bytes over bandwidth and time (`utilisation`, 0..1);
- each switch's CPU in cores (a software switch is one process; BMv2 uses a few threads
  but its pipeline is one);
- this machine's CPU: cores busy of all it has, and of them the cores the job's own
  processes (switches, workers, a parameter server) and the kernel's interrupt work (moving
  the job's packets over the veths, mostly) used: the rest is other load;
- packets: those entering the switches, and those on the busiest link direction;
- the workers' compute: its share of a step (the median over the job's workers).

The bound is the resource closest to full. A link nearly always busy binds whatever else
is busy (no faster CPU would move its bytes sooner); else this machine's CPU when nearly
all its cores are busy (then nothing else can be told apart); else the highest of the
link's utilisation, a switch's share of a core, and the compute share; and when even that
is far from full (below BUSY), the run waited on round trips (its window and the time each
packet spends in the hosts' and switches' software), which a software switch stretches.
Hardware switches aggregate at line rate and a cluster has a core (or a GPU) per worker,
so a run bound by this machine's CPU or by a software switch measures neither network nor
model: the report says so.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

PERIOD = 0.1                # seconds between samples
MACHINE_FULL = 0.9          # share of all cores busy above which this machine binds
LINK_FULL = 0.9             # utilisation above which a link binds, however busy the CPU
BUSY = 0.5                  # below this share nothing binds: the run waits on round trips
SOFTWARE = ("bmv2", "soft")


@dataclass
class Samples:
    """Cumulative readings at each sample time (time.time())."""

    times: list[float] = field(default_factory=list)
    # (tx, rx) bytes, then (tx, rx) packets where they were read
    ports: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    switch_cpu: dict[str, list[float]] = field(default_factory=dict)       # CPU seconds
    host_cpu: dict[str, list[float]] = field(default_factory=dict)         # CPU seconds
    machine: list[tuple[float, float]] = field(default_factory=list)       # (busy, total) s

    def at(self, series: list, t: float):
        """A cumulative series at time t, linearly between the samples around it."""
        ts = self.times
        i = bisect_left(ts, t)
        if i <= 0:
            return series[0]
        if i >= len(ts):
            return series[-1]
        f = (t - ts[i - 1]) / (ts[i] - ts[i - 1]) if ts[i] > ts[i - 1] else 1.0
        a, b = series[i - 1], series[i]
        if isinstance(a, tuple):
            return tuple(x + f * (y - x) for x, y in zip(a, b, strict=True))
        return a + f * (b - a)


def machine_cpu() -> tuple[float, float, float]:
    """(busy, total, interrupts) seconds of all cores since boot, from /proc/stat; the
    interrupts' (irq and softirq) are mostly the kernel moving packets over the veths."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)      # idle + iowait
    total = sum(fields[:8])                                          # guest is in user
    return (total - idle) / tick, total / tick, sum(fields[5:7]) / tick


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process and its threads, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def port_bytes(ifname: str) -> tuple[int, int, int, int] | None:
    """(tx bytes, rx bytes, tx packets, rx packets) of an interface."""
    base = f"/sys/class/net/{ifname}/statistics/"
    try:
        return tuple(int(Path(base + n).read_text())
                     for n in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"))
    except OSError:
        return None


class Sampler:
    """Samples in a thread from start() to stop(); `ports` maps a switch port's interface to
    its link's name, `pids` a switch to its process; watch() adds a worker's process."""

    def __init__(self, ports: list[str], pids: dict[str, int], period: float = PERIOD):
        self.port_names, self.pids, self.period = ports, pids, period
        self.samples = Samples(ports={p: [] for p in ports},
                               switch_cpu={s: [] for s in pids})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bounds", daemon=True)
        self._lock = threading.Lock()
        self._last_cpu = {s: 0.0 for s in pids}
        self.hosts: dict[str, int] = {}
        self._last_host: dict[str, float] = {}

    def watch(self, name: str, pid: int) -> None:
        """Sample a worker's (or a server's) process too, from now on; before, it used none."""
        with self._lock:
            self.hosts[name] = pid
            self._last_host[name] = 0.0
            self.samples.host_cpu[name] = [0.0] * len(self.samples.times)

    def start(self) -> Sampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> Samples:
        self._stop.set()
        self._thread.join(5)
        self._sample()
        return self.samples

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def _sample(self) -> None:
        s = self.samples
        with self._lock:
            s.times.append(time.time())
            for p in self.port_names:
                s.ports[p].append(port_bytes(p) or (s.ports[p][-1] if s.ports[p]
                                                    else (0, 0, 0, 0)))
            for sw, pid in self.pids.items():
                cpu = process_cpu(pid)
                self._last_cpu[sw] = cpu if cpu is not None else self._last_cpu[sw]
                s.switch_cpu[sw].append(self._last_cpu[sw])
            for h, pid in self.hosts.items():
                cpu = process_cpu(pid)
                self._last_host[h] = cpu if cpu is not None else self._last_host[h]
                s.host_cpu[h].append(self._last_host[h])
            s.machine.append(machine_cpu())


@dataclass(frozen=True)
class PortLink:
    """A switch port and what is at its other end, with the link's rate."""

    ifname: str
    switch: str
    peer: str
    bw_mbit: float


def port_links(topo) -> list[PortLink]:
    """Every switch port of the topology (Mininet names them <switch>-eth<port>)."""
    out = []
    for k in topo.links:
        for (node, port), (peer, _) in (k.ends(), k.ends()[::-1]):
            if topo.is_switch(node):
                out.append(PortLink(f"{node}-eth{port}", node, peer, k.bw_mbit))
    return out


def step_windows(result: dict) -> list[tuple[float, float]]:
    """(start, end) of each step of a worker's result, in time.time() seconds."""
    steps = result.get("steps") or []
    ends = [s.get("end") for s in steps]
    if not steps or any(e is None for e in ends):
        return []
    return [(e - s["step_seconds"], e) for s, e in zip(steps, ends, strict=True)]


def analyse(samples: Samples, links: list[PortLink], results: list[dict], kind: str,
            cores: int | None = None) -> dict | None:
    """The figures and the verdict of one job from its workers' results (None without
    timed steps: a run that failed early)."""
    windows = [step_windows(r) for r in results]
    windows = [w for w in windows if len(w) > 1] or [w for w in windows if w]
    if not windows:
        return None
    lead = windows[0]
    t0 = lead[1][0] if len(lead) > 1 else lead[0][0]     # after the first step
    t1 = lead[-1][1]
    dt = max(t1 - t0, 1e-9)
    cores = cores or os.cpu_count() or 1
    busiest, switch_packets = None, 0.0
    for link in links:
        series = samples.ports.get(link.ifname)
        if not series:
            continue
        a, b = samples.at(series, t0), samples.at(series, t1)
        packets = ((b[2] - a[2], b[3] - a[3]) if len(a) >= 4 and len(b) >= 4
                   else (None, None))
        if packets[1] is None:
            switch_packets = None               # a port whose packets were not read
        elif switch_packets is not None:
            switch_packets += packets[1]        # what the switch received on this port
        for sent, pkts, name in ((b[0] - a[0], packets[0], f"{link.switch}->{link.peer}"),
                                 (b[1] - a[1], packets[1], f"{link.peer}->{link.switch}")):
            util = sent * 8 / (link.bw_mbit * 1e6 * dt)
            if busiest is None or util > busiest["utilisation"]:
                busiest = {"link": name, "utilisation": util, "bytes": sent,
                           "packets": pkts, "bw_mbit": link.bw_mbit}
    switches = {sw: (samples.at(cpu, t1) - samples.at(cpu, t0)) / dt
                for sw, cpu in samples.switch_cpu.items() if cpu}
    hosts = {h: (samples.at(cpu, t1) - samples.at(cpu, t0)) / dt
             for h, cpu in samples.host_cpu.items() if cpu}
    m0, m1 = samples.at(samples.machine, t0), samples.at(samples.machine, t1)
    busy_cores = (m1[0] - m0[0]) / max(m1[1] - m0[1], 1e-9) * cores
    kernel = ((m1[2] - m0[2]) / max(m1[1] - m0[1], 1e-9) * cores
              if len(m0) > 2 and len(m1) > 2 else 0.0)
    shares = [r["compute_seconds"] / r["step_seconds"]
              for res in results for r in res.get("steps", [])[1:]
              if r.get("compute_seconds") is not None and r.get("step_seconds")]
    compute = sorted(shares)[len(shares) // 2] if shares else None
    figures = {"seconds": dt, "steps": len(lead) - (1 if len(lead) > 1 else 0),
               "busiest_link": busiest, "switch_cores": switches,
               "machine_cores": busy_cores, "cores": cores, "compute_share": compute,
               # the job's own processes (cores each), the kernel's interrupt work (the
               # job's packets, mostly), and what else kept the machine busy
               "host_cores": hosts, "kernel_cores": kernel,
               "other_cores": (max(0.0, busy_cores - kernel - sum(switches.values())
                                   - sum(hosts.values())) if hosts else None),
               "switch_packets": switch_packets if busiest else None}
    return {**figures, **verdict(figures, kind)}


def verdict(f: dict, kind: str) -> dict:
    """{"bound": resource, "figure": its share, "text": the line the console prints,
    "describes_network": bool}."""
    cands = []
    if f["busiest_link"]:
        bl = f["busiest_link"]
        cands.append(("link", bl["utilisation"],
                      f"link: {bl['link']} {100 * bl['utilisation']:.0f} % busy"))
    for sw, c in sorted(f["switch_cores"].items()):
        cands.append((f"switch {sw}", c, f"switch {sw}: {100 * c:.0f} % of a core"))
    if f["compute_share"] is not None:
        cands.append(("compute", f["compute_share"],
                      f"compute: {100 * f['compute_share']:.0f} % of the step"))
    machine = f["machine_cores"] / f["cores"]
    link_full = bool(f["busiest_link"]) and f["busiest_link"]["utilisation"] >= LINK_FULL
    if not link_full and (machine >= MACHINE_FULL or not cands):
        bound, share = "machine", machine
        text = f"this machine's CPU: {f['machine_cores']:.2f} of {f['cores']} cores"
    else:
        bound, share, text = max(cands, key=lambda c: c[1])
        if share < BUSY and not link_full:
            bound, text = "latency", f"round trips: nothing near full (the most: {text})"
    network = bound in ("link", "compute")
    if bound == "machine" or (bound.startswith("switch") and kind in SOFTWARE):
        text += (" -- bound by this machine's CPU or a software switch, this run's time "
                 "does not describe a network")
    elif bound == "latency" and kind in SOFTWARE:
        text += (" -- round trips through software switches and hosts, this run's time "
                 "does not describe a network")
    return {"bound": bound, "figure": share, "text": text, "describes_network": network}
