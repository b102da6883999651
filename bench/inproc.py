"""Benches without root: the compiled program on in-process softswitch switches.

harness/network.py's SwitchNetwork gives one softswitch.Switch per switch of the topology
with the controller's aggregation, addressing and impairment entries; here the IPv4
routes (controller.forwarding) are added too, so traffic to the host parameter server is
routed by the switch like any other, and a host runs the parameter server
(worker/baseline.py's ParameterServer) behind an Ethernet/IPv4/UDP stack of its own.
The switches' port counters are read directly (NatIngress.port_rx, NatEgress.port_tx),
and every host port is tapped (Capture): the frames each host sent and received, with
their real lengths.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path

from common import Load

from controller import forwarding
from controller.stats import PORT_RX, PORT_TX
from harness.network import PROGRAM, SwitchNetwork, softswitch_missing, to_softswitch_entry
from harness.workers import run_workers
from worker import wire
from worker.allreduce import AllReduceClient, job_params
from worker.baseline import PS_PORT, ParameterServer
from worker.frames import L2_LEN, Framer, l2_prefix, with_udp_checksum

__all__ = ["Capture", "PsHost", "network", "read_ports", "run", "softswitch_missing"]


def network(topo, session: int = 1, program: Path = PROGRAM) -> SwitchNetwork:
    net = SwitchNetwork(topo, program, session=session)
    for name, entries in forwarding.entries(topo).items():
        sw = net.switches[name]
        for e in entries:
            table, entry = to_softswitch_entry(sw, e)
            table.insert(entry)
    return net


def read_ports(net: SwitchNetwork) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    out = {}
    for name, sw in net.switches.items():
        for p in net.topo.ports(name):
            out[name, p.port] = (*sw.counters[PORT_RX].read(p.port),
                                 *sw.counters[PORT_TX].read(p.port))
    return out


class Capture:
    """Taps every host's port: packets and bytes each host sent to and received from its
    switch, as the link between them carried them."""

    def __init__(self, net: SwitchNetwork):
        self.topo = net.topo
        self.lock = threading.Lock()
        self.count: dict[tuple[str, str], list[int]] = {}
        for host, port in net.ports.items():
            sw = self.topo.attachment(host).node
            port.deliver = self._tap((host, sw), port.deliver)
            port.put = self._tap((sw, host), port.put)

    def _tap(self, key, inner):
        self.count[key] = [0, 0]

        def tapped(frame: bytes) -> None:
            with self.lock:
                c = self.count[key]
                c[0] += 1
                c[1] += len(frame)
            inner(frame)
        return tapped

    def snapshot(self) -> dict[tuple[str, str], tuple[int, int]]:
        with self.lock:
            return {k: tuple(v) for k, v in self.count.items()}

    @staticmethod
    def loads(before: dict, after: dict) -> list[Load]:
        return [Load(a, b, after[a, b][0] - before[a, b][0], after[a, b][1] - before[a, b][1])
                for a, b in sorted(after)]


class PsHost:
    """The parameter server on host `host` of the network: UDP port 20034 over the host's
    queue port; answers go back addressed to each worker's host (static neighbours, as
    mininet/emulation.py configures them)."""

    def __init__(self, net: SwitchNetwork, host: str, workers: int, slots: int = 64):
        self.net, self.topo = net, net.topo
        self.me = self.topo.host(host)
        self.port = net.ports[host]
        self.ps = ParameterServer(workers, slots=slots)
        self.by_ip = {h.ip: h for h in self.topo.hosts}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def framer(self, host: str) -> Framer:
        """What a worker on `host` uses to reach this server (kernel UDP's frames)."""
        h = self.topo.host(host)
        return Framer((h.mac, h.ip), (self.me.mac, self.me.ip), sport=PS_PORT, dport=PS_PORT)

    def __enter__(self) -> PsHost:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)

    def _serve(self) -> None:
        while not self.stop.is_set():
            frame = self.port.recv(0.05)
            if frame is None or len(frame) < L2_LEN or frame[23] != 17 or \
                    struct.unpack_from("!H", frame, 36)[0] != PS_PORT:
                continue
            src = ".".join(str(b) for b in frame[26:30])
            for dest, data in self.ps.handle(frame[L2_LEN:], src):
                h = self.by_ip[dest]
                prefix = l2_prefix(self.me.mac, h.mac, self.me.ip, h.ip, 8 + len(data),
                                   PS_PORT, PS_PORT)
                self.port.send(with_udp_checksum(prefix + data))


def run(net: SwitchNetwork, hosts: list[str], tensors: list[list], *, job: int, session: int,
        encoding: str, framers=None, window: int = 64, timeout: float = 20.0,
        rto: float | None = None):
    """Allreduce calls of tensors[rank][call] from `hosts`, one thread each; returns the
    outputs and the clients. rto: a fixed retransmission timeout (default the client's
    adaptive one)."""
    enc = wire.ENCODING_BY_NAME[encoding]
    if job in net.sessions:         # a switch job: the switches take its session first
        net.set_session(job, session)
        params = net.job_params(job, enc, window)
    else:                           # the parameter server's (framers)
        params = job_params(net.topo, job, session, enc, net.elems, window=window,
                            workers=len(hosts), host_aggregator=True)

    def make(rank: int) -> AllReduceClient:
        host = hosts[rank]
        framer = framers(host) if framers else net.framer(host)
        fixed = {} if rto is None else {"rto": rto, "rto_min": rto, "rto_max": rto}
        return AllReduceClient(net.ports[host], framer, params, seed=rank, timeout=timeout,
                               **fixed)

    outputs, clients, errors = run_workers(make, tensors, calls=len(tensors[0]))
    bad = [f"rank {r}: {e}" for r, e in enumerate(errors) if e is not None]
    if bad:
        raise RuntimeError("allreduce failed in process: " + "; ".join(bad))
    return outputs, clients
