"""The compiled program in switch processes inside a network namespace, behind veths.

NetnsFabric creates a namespace, a veth pair per link of its topology (switch to switch,
switch to host), and starts one switch process per switch on the switch ends:
simple_switch_grpc (Bmv2Fabric) or softswitch's `python -m softswitch`, started with the
same arguments. The host ends are raw sockets opened once; P4Runtime runs over a unix
socket, reachable from outside the namespace. Needs root.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

from controller.session import ControllerError
from controller.stats import EVENTS
from controller.topology import Topology
from harness.fabric import BUILD, FORWARDED, ROOT, Fabric

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
    return netns_missing()


def netns_missing() -> str | None:
    """Why no namespace with veths can be made here, or None."""
    if os.geteuid() != 0:
        return "the namespace fabric needs root (a network namespace with veth pairs); " \
               "CI runs as root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed: cannot create the namespace"
    return None


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def inside(ns: str):
    """Runs the block's thread in namespace `ns`: sockets it opens stay there."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)


class NetnsFabric(Fabric):
    """target "bmv2" runs simple_switch_grpc, "soft" runs `python -m softswitch`."""

    RECV_TIMEOUT = 10.0      # an expected frame; returns as soon as it arrives

    def __init__(self, workdir: Path, target: str = "bmv2", topo: Topology | None = None,
                 prefix: str = "natsw-dp", build: Path = BUILD, mtu: int | None = None) -> None:
        super().__init__(topo, build)
        self.mtu = mtu          # of every veth; None: the kernel's 1500
        if target not in ("bmv2", "soft"):
            raise ValueError(f"target {target!r}: bmv2 or soft")
        self.name = self.target = target
        self.dir = Path(workdir)
        self.prefix = prefix
        self.ns = f"{prefix}-{os.getpid()}"
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
        netns = Path("/run/netns")
        for stale in netns.glob(f"{self.prefix}-*") if netns.is_dir() else []:
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
        lines = ["link set lo up"]      # Thrift servers listen there
        for k in self.base.links:
            a, b = self.ifname(k.node1, k.port1), self.ifname(k.node2, k.port2)
            mtu = "" if self.mtu is None else f" mtu {self.mtu}"
            lines += [f"link add {a}{mtu} type veth peer name {b}{mtu}", f"link set {a} up",
                      f"link set {b} up"]
        self._ip(batch="\n".join(lines) + "\n")

    def _start_switches(self) -> None:
        switches = []
        for s in self.base.switches:
            sock = self.dir / f"{s.name}.grpc"
            # Killed with the test process even when that dies without cleaning up.
            cmd = (["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else [])
            binary = (["simple_switch_grpc"] if self.target == "bmv2"
                      else [sys.executable, "-m", "softswitch"])
            cmd += ["ip", "netns", "exec", self.ns, *binary,
                   "--device-id", str(s.device_id), "--no-p4", "--log-level", "warn",
                   "--thrift-port", str(s.thrift_port),
                   "--notifications-addr", f"ipc://{self.dir / (s.name + '.ipc')}"]
            for p in self.base.ports(s.name):
                cmd += ["-i", f"{p.port}@{self.ifname(s.name, p.port)}"]
            cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
            log = open(self.dir / f"{s.name}.log", "wb")  # noqa: SIM115 (closed in close())
            self.logs.append(log)
            # softswitch from this tree: its folder is the working directory
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                               cwd=str(ROOT)))
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
            raise RuntimeError(f"{self.target} switches did not start: {e}\n{logs}") from None

    def _open_sockets(self) -> None:
        with inside(self.ns):
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
            keys = [(att.node, "port_rx", att.port), (att.node, "port_tx", att.port)]
            if EVENTS in self.pipeline.p4info.counters:     # (the Tofino profile has none)
                keys.append((att.node, "events", FORWARDED))
            for key in keys:
                self.own[key] = self.own.get(key, 0) + 1
        out = {}
        for h in hosts:
            got = list(self.pending[h])
            self.pending[h].clear()
            while True:
                frame = self._read(h, self.RECV_TIMEOUT)
                assert frame is not None, f"{self.name}: the barrier frame did not come back to {h}"
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


class Bmv2Fabric(NetnsFabric):
    """simple_switch_grpc behind veths: what the data-plane tests run on BMv2."""

    def __init__(self, workdir: Path, topo: Topology | None = None,
                 prefix: str = "natsw-dp", build: Path = BUILD, mtu: int | None = None) -> None:
        super().__init__(workdir, "bmv2", topo, prefix, build, mtu)
