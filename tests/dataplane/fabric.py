"""The switches the data-plane tests run on: the compiled program on softswitch or on BMv2.

Both fabrics build the same topology (testbed_topology), take their entries from the
controller's own code over P4Runtime (controller.program.program) and read counters with
controller.stats. Tests talk to hosts only: send a frame from a host, receive what reaches a
host, check that nothing else reached it (quiet), read counter deltas.

- SoftFabric: one in-process softswitch.Switch per switch, each behind its own P4Runtime
  server on loopback; a frame is processed in the sender's thread, so everything it causes
  has happened when send() returns.
- Bmv2Fabric: one simple_switch_grpc per switch inside a network namespace the fabric
  creates, its ports veth pairs (switch to switch, switch to host); the tests' ends are raw
  sockets on the host ends. P4Runtime runs over a unix socket, reachable from outside the
  namespace. Needs root.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import select
import shutil
import socket
import subprocess
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

ROOT = Path(__file__).resolve().parents[2]
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

    def __init__(self) -> None:
        self.base: Topology = testbed_topology()
        self.topo: Topology = self.base
        self.pipeline = Pipeline.load(str(BUILD / "agg.p4info.txt"), str(BUILD / "agg.json"))
        self._sessions = itertools.count(1)
        self._nonce = itertools.count(1)
        self.p4rt: dict[str, Session] = {}
        # What the fabric's own barrier frames added to the counters; counters() leaves it out.
        self.own = Counters()

    def _connect(self) -> None:
        """One P4Runtime session per switch for the fabric's life (the primary controller)."""
        for s in self.base.switches:
            session = Session(s, connect_timeout=60)
            session.connect()
            self.p4rt[s.name] = session

    # ---- control plane: the controller's code ----
    def program(self, jobs: list[JobSpec] = (), loss: float = 0.0) -> Topology:
        """Brings every switch to the controller's desired state for these jobs (what
        `controller/main.py program` does); the previous test's entries are deleted by the
        controller's diff, the pipeline is pushed only the first time."""
        topo = self.base.with_jobs(list(jobs))
        if loss:
            topo = topo.with_loss(loss)
        state = canonical_state(desired_state(topo), self.pipeline.p4info)
        for s in topo.switches:
            try:
                sync(self.p4rt[s.name], state[s.name], self.pipeline)
            except ControllerError as e:
                raise AssertionError(f"programming {s.name} failed: {e}") from None
        self.topo = topo
        return topo

    def session(self) -> int:
        """A session id no test has used on this fabric: slots it touches start clean."""
        return next(self._sessions)

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
        for session in self.p4rt.values():
            session.close()
        self.p4rt.clear()


# ---------------------------------------------------------------- softswitch, in-process


class SoftFabric(Fabric):
    name = "soft"

    def __init__(self) -> None:
        super().__init__()
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
        work = [(att.node, att.port, bytes(frame))]
        while work:
            name, port, data = work.pop(0)
            for out_port, out in self.switches[name].process(port, data):
                try:
                    peer = self.topo.port(name, out_port)
                except KeyError:
                    self.unattached += 1
                    continue
                if self.topo.is_host(peer.peer):
                    self.inbox[peer.peer].append(out)
                else:
                    work.append((peer.peer, peer.peer_port, out))

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


# ---------------------------------------------------------------- BMv2 in a namespace

_CLONE_NEWNET = 0x40000000
_ETH_P_ALL = 0x0003
_SOL_PACKET = 263
_PACKET_IGNORE_OUTGOING = 23
_PACKET_OUTGOING = 4
_SO_RCVBUFFORCE = 33


def bmv2_missing() -> str | None:
    """Why the BMv2 fabric cannot run here, or None."""
    if shutil.which("simple_switch_grpc") is None:
        return "simple_switch_grpc is not on PATH: no BMv2 to run the program on"
    if os.geteuid() != 0:
        return "the BMv2 fabric needs root (a network namespace with veth pairs); CI runs as root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed: cannot create the namespace"
    return None


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Bmv2Fabric(Fabric):
    name = "bmv2"
    RECV_TIMEOUT = 10.0      # an expected frame; returns as soon as it arrives

    def __init__(self, workdir: Path) -> None:
        super().__init__()
        self.dir = Path(workdir)
        self.ns = f"natsw-dp-{os.getpid()}"
        self.procs: list[subprocess.Popen] = []
        self.logs = []
        self.socks: dict[str, socket.socket] = {}
        self.pending = {h.name: deque() for h in self.base.hosts}
        try:
            self._namespace()
            self._start_switches()
            self._open_sockets()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def ifname(node: str, port: int) -> str:
        return node if port == 0 else f"{node}p{port}"

    def _ip(self, *args: str, batch: str | None = None) -> None:
        cmd = ["ip", *args] if batch is None else ["ip", "-n", self.ns, "-batch", "-"]
        r = subprocess.run(cmd, input=batch, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")

    def _namespace(self) -> None:
        # Namespaces of earlier runs that died before their cleanup (named by their pid).
        for stale in Path("/run/netns").glob("natsw-dp-*") if Path("/run/netns").is_dir() else []:
            pid = stale.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                subprocess.run(["ip", "netns", "del", stale.name], capture_output=True,
                               timeout=60)
        self._ip("netns", "add", self.ns)
        # No IPv6 on the namespace's interfaces: the kernel would send router and neighbour
        # solicitations into the switches, which count them as drops.
        r = subprocess.run(["ip", "netns", "exec", self.ns, "sysctl", "-qw",
                            "net.ipv6.conf.all.disable_ipv6=1",
                            "net.ipv6.conf.default.disable_ipv6=1"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"sysctl in {self.ns} failed: {r.stderr.strip()}")
        lines = []
        for k in self.base.links:
            a, b = self.ifname(k.node1, k.port1), self.ifname(k.node2, k.port2)
            lines += [f"link add {a} type veth peer name {b}", f"link set {a} up",
                      f"link set {b} up"]
        self._ip(batch="\n".join(lines) + "\n")

    def _start_switches(self) -> None:
        switches = []
        for s in self.base.switches:
            sock = self.dir / f"{s.name}.grpc"
            # Killed with the test process even when that dies without cleaning up.
            cmd = (["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else [])
            cmd += ["ip", "netns", "exec", self.ns, "simple_switch_grpc",
                   "--device-id", str(s.device_id), "--no-p4", "--log-level", "warn",
                   "--thrift-port", str(s.thrift_port),
                   "--notifications-addr", f"ipc://{self.dir / (s.name + '.ipc')}"]
            for p in self.base.ports(s.name):
                cmd += ["-i", f"{p.port}@{self.ifname(s.name, p.port)}"]
            cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
            log = open(self.dir / f"{s.name}.log", "wb")  # noqa: SIM115 (closed in close())
            self.logs.append(log)
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
            switches.append(replace(s, grpc_addr=f"unix:{sock}"))
        self.base = Topology(self.base.kind, self.base.params, switches, self.base.hosts,
                             self.base.links, self.base.service_ip, self.base.service_mac)
        self.topo = self.base
        try:
            self._connect()
        except ControllerError as e:
            logs = "".join(f"{s.name} (exit {p.poll()}): "
                           + (self.dir / f"{s.name}.log").read_text(errors="replace")[-1000:]
                           for s, p in zip(self.base.switches, self.procs, strict=True))
            raise RuntimeError(f"simple_switch_grpc did not start: {e}\n{logs}") from None

    def _open_sockets(self) -> None:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
        try:
            _setns(target)
            try:
                for h in self.base.hosts:
                    # Protocol 0 until bound: no frames from other interfaces slip in.
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                    # past net.core.rmem_max (root may): bursts of results must all fit
                    s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 8 << 20)
                    try:
                        s.setsockopt(_SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
                    except OSError:
                        pass        # older kernels: recv() skips them by pkttype
                    # CPython puts the protocol in network order itself.
                    s.bind((self.ifname(h.name, 0), _ETH_P_ALL))
                    s.setblocking(False)
                    self.socks[h.name] = s
            finally:
                _setns(own)
        finally:
            os.close(own)
            os.close(target)

    def send(self, host: str, frame: bytes) -> None:
        self.socks[host].send(bytes(frame))

    def _read(self, host: str, timeout: float) -> bytes | None:
        s = self.socks[host]
        deadline = time.monotonic() + timeout
        while True:
            try:
                data, addr = s.recvfrom(65535)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                select.select([s], [], [], left)
                continue
            if addr[2] != _PACKET_OUTGOING:
                return data

    def recv(self, host: str, timeout: float | None = None) -> bytes | None:
        if self.pending[host]:
            return self.pending[host].popleft()
        return self._read(host, self.RECV_TIMEOUT if timeout is None else timeout)

    def quiet(self, hosts) -> dict[str, list[bytes]]:
        """A frame routed back to each host orders after everything sent before it to that
        host's port (one FIFO queue per egress port), so what arrives before it is all that
        was pending."""
        hosts = list(hosts)
        tags = {}
        for h in hosts:
            frame, tag = self.barrier_frame(h)
            tags[h] = tag
            self.send(h, frame)
            att = self.topo.attachment(h)
            for key in ((att.node, "events", FORWARDED), (att.node, "port_rx", att.port),
                        (att.node, "port_tx", att.port)):
                self.own[key] = self.own.get(key, 0) + 1
        out = {}
        for h in hosts:
            got = list(self.pending[h])
            self.pending[h].clear()
            while True:
                frame = self._read(h, self.RECV_TIMEOUT)
                assert frame is not None, f"bmv2: the barrier frame did not come back to {h}"
                if frame.endswith(tags[h]):
                    break
                got.append(frame)
            out[h] = got
        return out

    def close(self) -> None:
        super().close()
        for s in self.socks.values():
            s.close()
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs:
            log.close()
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=60)
