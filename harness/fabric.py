"""The switches the data-plane tests run on: the compiled program on softswitch or on BMv2.

Both fabrics build the same topology (testbed_topology), take their entries from the
controller's own code over P4Runtime (controller.program.program) and read counters with
controller.stats. Tests talk to hosts only: send a frame from a host, receive what reaches a
host, check that nothing else reached it (quiet), read counter deltas.

- SoftFabric: one in-process softswitch.Switch per switch, each behind its own P4Runtime
  server on loopback; a frame is processed in the sender's thread, so everything it causes
  has happened when send() returns.
- harness.netns.Bmv2Fabric: one simple_switch_grpc per switch inside a network namespace,
  its ports veth pairs; the tests' ends are raw sockets on the host ends. Needs root.
- harness.diff.DiffFabric: both at once, every output, counter and register compared.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller import stats as S
from controller.p4info import Pipeline
from controller.program import canonical_state, desired_state, sync
from controller.session import ControllerError, Session
from controller.topology import JobSpec, Topology, leaf_spine
from harness.network import route
from worker.transport import Port

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "p4src" / "build"
HOSTS_ON_S1 = 32        # the widest job: 32 children on one switch (the bitmap's width)
HOSTS_ON_S2 = 4
COUNTERS = {S.EVENTS: "events", S.DROPS_IN: "drops_in", S.DROPS_OUT: "drops_out",
            S.PORT_RX: "port_rx", S.PORT_TX: "port_tx"}
BARRIER = b"natswitch-dataplane-barrier-"
FORWARDED = 7           # agg events index of a routed packet (docs/PROTOCOL.md)


def testbed_topology() -> Topology:
    """Leaves s1 (h1..h32 on ports 1..32, spine on 33) and s2 (h33..h36 on ports 1..4, spine
    on 33), spine s3 (port 1 to s1, 2 to s2). Jobs on s1's hosts only are aggregated on s1
    alone; a job spanning both leaves is a two-level tree rooted at s3."""
    full = leaf_spine(leaves=2, spines=1, hosts=HOSTS_ON_S1)
    keep = {f"h{i}" for i in range(1, HOSTS_ON_S1 + HOSTS_ON_S2 + 1)}
    hosts = [h for h in full.hosts if h.name in keep]
    links = [k for k in full.links if not (k.node1.startswith("h") and k.node1 not in keep)]
    return Topology(full.kind, dict(full.params), list(full.switches), hosts, links,
                    full.service_ip, full.service_mac)


class Counters(dict):
    """(switch, counter, index) -> packets, for the counters controller.stats reads."""

    def __sub__(self, before: Counters) -> Counters:
        keys = set(self) | set(before)
        return Counters({k: self.get(k, 0) - before.get(k, 0) for k in keys
                         if self.get(k, 0) != before.get(k, 0)})

    def __add__(self, delta: Counters) -> Counters:
        keys = set(self) | set(delta)
        return Counters({k: self.get(k, 0) + delta.get(k, 0) for k in keys})

    def of(self, switch: str, counter: str) -> dict[int, int]:
        """index -> packets of one counter of one switch (non-zero entries only)."""
        return {i: v for (s, c, i), v in self.items() if s == switch and c == counter and v}


class Fabric:
    name = "?"

    def __init__(self, topo: Topology | None = None, build: Path = BUILD) -> None:
        self.base: Topology = topo or testbed_topology()
        self.topo: Topology = self.base
        # build: the compiled profile pushed (controller/profiles.py), p4src/build/ by default
        self.pipeline = Pipeline.load(str(build / "agg.p4info.txt"), str(build / "agg.json"))
        self._sessions = itertools.count(2)
        self.current = 1            # the session every job is programmed in (session())
        self._nonce = itertools.count(1)
        self.p4rt: dict[str, Session] = {}
        # What the fabric's own barrier frames added to the counters; counters() leaves it out.
        self.own = Counters()

    def _connect(self) -> None:
        """One P4Runtime session per switch for the fabric's life (the primary controller)."""
        for s in self.base.switches:
            p4rt = Session(s, connect_timeout=60)
            p4rt.connect()
            self.p4rt[s.name] = p4rt

    def uncompared(self) -> None:
        """Until the next program(), frames are not compared with another target's (a fabric
        that runs two, harness.diff): for real clients whose concurrent polling makes the
        targets' outputs arrive at different moments. Nothing to do on one target."""

    # ---- control plane: the controller's code ----
    def program(self, jobs: list[JobSpec] = (), loss: float = 0.0) -> Topology:
        """Brings every switch to the controller's desired state for these jobs (what
        `controller/main.py program` does), all in the current session; the previous
        test's entries are deleted by the controller's diff, the pipeline is pushed only the
        first time."""
        topo = self.base.with_jobs(list(jobs))
        if loss:
            topo = topo.with_loss(loss)
        self._sync(topo, {j.id: self.current for j in topo.jobs})
        self.topo = topo
        return topo

    def _sync(self, topo: Topology, sessions: dict[int, int]) -> None:
        state = canonical_state(desired_state(topo, sessions, self.pipeline.p4info),
                                self.pipeline.p4info)
        for s in topo.switches:
            try:
                sync(self.p4rt[s.name], state[s.name], self.pipeline)
            except ControllerError as e:
                raise AssertionError(f"programming {s.name} failed: {e}") from None

    def session(self) -> int:
        """Moves every programmed job to a session no test has used on this fabric (the
        controller's part: the switches drop every other), so the slots it touches start
        clean; returns it."""
        self.current = next(self._sessions)
        self.set_sessions({j.id: self.current for j in self.topo.jobs})
        return self.current

    def set_sessions(self, sessions: dict[int, int]) -> None:
        """Installs these sessions (job id -> session) for the programmed jobs."""
        self._sync(self.topo, {j.id: sessions.get(j.id, self.current) for j in self.topo.jobs})

    def counters(self, *switches: str) -> Counters:
        """The switches' counters (all switches by default) as `controller/main.py stats`
        reads them, less what the fabric's own barrier frames added."""
        names = switches or tuple(s.name for s in self.base.switches)
        out = Counters()
        for switch in names:
            st = S.read_stats(self.p4rt[switch])
            for name, short in COUNTERS.items():
                for index, (packets, _) in st.counters.get(name, {}).items():
                    if packets:
                        out[switch, short, index] = packets
        for key, packets in self.own.items():
            if key[0] in names:
                out[key] = out.get(key, 0) - packets
        return out

    def wait_for(self, before: Counters, done, timeout: float = 20.0,
                 switches: tuple[str, ...] = ()) -> Counters:
        """The delta since `before` once done(delta) holds (or after `timeout`; the caller
        asserts on it). `switches` limits the reading as counters() does; `before` must be
        of the same switches."""
        deadline = time.monotonic() + timeout
        while True:
            delta = self.counters(*switches) - before
            if done(delta) or time.monotonic() >= deadline:
                return delta
            time.sleep(0.05)

    def wait_counters(self, before: Counters, want: dict, timeout: float = 20.0,
                      switches: tuple[str, ...] = ()) -> Counters:
        """wait_for() every (switch, counter, index) in `want` to grow by its value."""
        return self.wait_for(before, lambda d: all(d.get(k, 0) >= v for k, v in want.items()),
                             timeout, switches)

    # ---- data plane ----
    def send(self, host: str, frame: bytes) -> None:
        raise NotImplementedError

    def recv(self, host: str, timeout: float | None = None) -> bytes | None:
        raise NotImplementedError

    def expect(self, hosts, timeout: float | None = None) -> dict[str, bytes]:
        """One frame from each host; a missing one fails the test."""
        out = {}
        for h in hosts:
            frame = self.recv(h, timeout)
            assert frame is not None, f"{self.name}: nothing reached {h}"
            out[h] = frame
        return out

    def quiet(self, hosts) -> dict[str, list[bytes]]:
        """Frames that reached each host and were not yet received; empty lists when none."""
        raise NotImplementedError

    def barrier_frame(self, host: str) -> tuple[bytes, bytes]:
        """A plain UDP packet from `host` to itself, routed straight back by the switch."""
        h = self.topo.host(host)
        sw = self.topo.switch(self.topo.attachment(host).node)
        tag = BARRIER + str(next(self._nonce)).encode()
        frame = (Ether(src=h.mac, dst=sw.mac) / IP(src=h.ip, dst=h.ip, ttl=64)
                 / UDP(sport=9, dport=9) / Raw(tag))
        return bytes(frame), tag

    def close(self) -> None:
        for p4rt in self.p4rt.values():
            p4rt.close()
        self.p4rt.clear()


# ---------------------------------------------------------------- softswitch, in-process


class SoftFabric(Fabric):
    name = "soft"

    def __init__(self, topo: Topology | None = None, build: Path = BUILD) -> None:
        super().__init__(topo, build)
        from softswitch import Switch
        from softswitch.p4runtime import P4RuntimeServer, P4RuntimeService

        self.switches = {}
        self.servers = []
        switches = []
        for s in self.base.switches:
            # A fixed seed per switch: the random extern's draws repeat from run to run.
            sw = Switch(device_id=s.device_id, seed=1000 + s.device_id)
            server = P4RuntimeServer(P4RuntimeService(sw, s.device_id), "127.0.0.1:0")
            port = server.start()
            self.servers.append(server)
            self.switches[s.name] = sw
            switches.append(replace(s, grpc_addr=f"127.0.0.1:{port}"))
        self.base = Topology(self.base.kind, self.base.params, switches, self.base.hosts,
                             self.base.links, self.base.service_ip, self.base.service_mac)
        self.topo = self.base
        self.inbox = {h.name: deque() for h in self.base.hosts}
        self.unattached = 0
        self._connect()

    def send(self, host: str, frame: bytes) -> None:
        att = self.topo.attachment(host)
        self.unattached += route(self.topo, self.switches, att.node, att.port, frame,
                                 lambda h, out: self.inbox[h].append(out))

    def recv(self, host: str, timeout: float | None = None) -> bytes | None:
        box = self.inbox[host]
        return box.popleft() if box else None

    def quiet(self, hosts) -> dict[str, list[bytes]]:
        out = {}
        for h in hosts:
            out[h] = list(self.inbox[h])
            self.inbox[h].clear()
        return out

    def close(self) -> None:
        super().close()
        for server in self.servers:
            server.stop(0)


class FabricPort(Port):
    """A host of a fabric as a worker's port (softswitch in process, or BMv2): real allreduce
    clients on the data-plane tests' and benches' switches."""

    def __init__(self, fabric: Fabric, host: str):
        super().__init__()
        self.fabric, self.host = fabric, host

    def send(self, frame: bytes) -> None:
        self.fabric.send(self.host, frame)

    def recv(self, timeout: float | None) -> bytes | None:
        deadline = time.monotonic() + (60.0 if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            frame = self.fabric.recv(self.host, max(0.0, min(left, 0.02)))
            if frame is not None or left <= 0:
                return frame
            time.sleep(0.001)
