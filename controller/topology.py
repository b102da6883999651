"""The topology model, its builders and its JSON form: the one copy of the addressing plan
(its elements and lookups are in topology_data.py, below the checks and the job trees).

Built once (star, leaf-spine, fat-tree), written as JSON, read back by the controller,
by mininet/run.py (to build the emulation) and by the workers (host addresses, jobs).

Addressing plan, deterministic from the builder's arguments:
- switches s1..sN in builder order, device id i, P4Runtime at 127.0.0.1:(grpc_base_port + i - 1),
  Thrift at thrift_base_port + i - 1, MAC 02:53:00:00:HH:LL (i), ports numbered from 1;
- hosts h1..hM in the order of the switches they attach to, one interface (port 0);
  the n-th host on switch i gets 10.(i >> 8).(i & 255).n/8 and MAC 02:00 + its IPv4 bytes;
- the aggregation service address (docs/PROTOCOL.md) 10.255.255.254, MAC 02:4e:41:ff:ff:fe.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from controller.topology_check import parse_topology
from controller.topology_data import (
    DEFAULT_BW_MBIT,
    DEFAULT_MAX_EXP,
    ENCODINGS,
    FORMAT_VERSION,
    HOST_PREFIX_LEN,
    IFNAME_MAX,
    MAX_CHILDREN,
    MAX_EXP,
    MAX_JOB_WORKERS,
    MAX_PORT,
    MODES,
    POOL_SIZE,
    SERVICE_IP,
    SERVICE_MAC,
    Host,
    JobSpec,
    Link,
    Port,
    Switch,
    TopologyData,
    TopologyError,
    ifname,
    valid_mac,
    valid_name,
)
from controller.tree import build_tree

# The rest of the project reads the topology_data.py names from here too.
__all__ = [
    "BUILDERS", "DEFAULT_BW_MBIT", "DEFAULT_GRPC_BASE_PORT", "DEFAULT_MAX_EXP",
    "DEFAULT_THRIFT_BASE_PORT", "ENCODINGS", "FORMAT_VERSION", "HOST_PREFIX_LEN",
    "IFNAME_MAX", "MAX_CHILDREN", "MAX_EXP", "MAX_JOB_WORKERS", "MAX_PORT", "MODES",
    "POOL_SIZE", "SERVICE_IP", "SERVICE_MAC", "Host", "JobSpec", "Link", "Port", "Switch",
    "Topology", "TopologyError", "fat_tree", "ifname", "leaf_spine", "mac_from_int", "star",
    "valid_mac", "valid_name",
]

DEFAULT_GRPC_BASE_PORT = 50051
DEFAULT_THRIFT_BASE_PORT = 9090


class Topology(TopologyData):
    """A topology with its JSON form, derived copies and its jobs' headroom."""

    def headroom(self, job_id: int) -> int:
        """The bits every worker of the job keeps free (docs/PROTOCOL.md "Scaling"), from
        the job's aggregation tree: workers take it from here, as the controller does."""
        return build_tree(self, self.job(job_id)).headroom()

    # ---- JSON ----
    def to_dict(self) -> dict:
        return {
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "params": dict(self.params),
            "service": {"ip": self.service_ip, "mac": self.service_mac},
            "switches": [
                {"name": s.name, "device_id": s.device_id, "grpc_addr": s.grpc_addr,
                 "thrift_port": s.thrift_port, "mac": s.mac, "role": s.role, "tier": s.tier,
                 **({"pod": s.pod} if s.pod is not None else {})}
                for s in self.switches],
            "hosts": [{"name": h.name, "mac": h.mac, "ip": h.ip, "prefix_len": h.prefix_len}
                      for h in self.hosts],
            "links": [{"node1": k.node1, "port1": k.port1, "node2": k.node2, "port2": k.port2,
                       "bw_mbit": k.bw_mbit, "delay_ms": k.delay_ms, "loss": k.loss}
                      for k in self.links],
            "jobs": [j.to_dict() for j in self.jobs],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def from_dict(cls, data: object) -> Topology:
        return parse_topology(cls, data)

    @classmethod
    def load(cls, path: str) -> Topology:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise TopologyError(f"{path}: cannot read topology file: {e.strerror}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise TopologyError(f"{path}: not JSON: {e}") from None
        try:
            return cls.from_dict(data)
        except TopologyError as e:
            raise TopologyError(f"{path}: {e}") from None

    # ---- derived copies ----
    def with_jobs(self, jobs: Iterable[JobSpec]) -> Topology:
        return Topology(self.kind, dict(self.params), list(self.switches), list(self.hosts),
                        list(self.links), self.service_ip, self.service_mac, list(jobs))

    def with_loss(self, loss: float) -> Topology:
        """The same topology with every link's loss set to `loss`."""
        if not 0.0 <= loss <= 1.0:
            raise TopologyError(f"loss must be within [0, 1], got {loss}")
        links = [Link(k.node1, k.port1, k.node2, k.port2, k.bw_mbit, k.delay_ms, loss)
                 for k in self.links]
        return Topology(self.kind, dict(self.params), list(self.switches), list(self.hosts),
                        links, self.service_ip, self.service_mac, list(self.jobs))


def mac_from_int(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


# ---------------------------------------------------------------- builders


class _Builder:
    """Allocates names, addresses and port numbers in creation order."""

    def __init__(self, kind: str, params: dict, bw_mbit: float, delay_ms: float, loss: float,
                 grpc_base_port: int, thrift_base_port: int, grpc_host: str):
        if bw_mbit <= 0:
            raise TopologyError(f"link bandwidth must be > 0 Mbit/s, got {bw_mbit}")
        if delay_ms < 0:
            raise TopologyError(f"link delay must be >= 0 ms, got {delay_ms}")
        if not 0.0 <= loss <= 1.0:
            raise TopologyError(f"loss must be within [0, 1], got {loss}")
        self.kind, self.params = kind, params
        self.bw, self.delay, self.loss = float(bw_mbit), float(delay_ms), float(loss)
        self.grpc_base, self.thrift_base, self.grpc_host = (grpc_base_port, thrift_base_port,
                                                            grpc_host)
        self.switches: list[Switch] = []
        self.hosts: list[Host] = []
        self.links: list[Link] = []
        self.next_port: dict[str, int] = {}
        self.hosts_per_switch: dict[str, int] = {}

    def switch(self, role: str, tier: int, pod: int | None = None) -> str:
        i = len(self.switches) + 1
        name = f"s{i}"
        self.switches.append(Switch(
            name=name, device_id=i, grpc_addr=f"{self.grpc_host}:{self.grpc_base + i - 1}",
            thrift_port=self.thrift_base + i - 1, mac=mac_from_int(0x02_53_00_00_00_00 + i),
            role=role, tier=tier, pod=pod))
        self.next_port[name] = 1
        return name

    def host(self, switch: str) -> str:
        i = int(switch[1:])
        n = self.hosts_per_switch.get(switch, 0) + 1
        if n > 254:
            raise TopologyError(f"at most 254 hosts per switch, {switch} would get {n}")
        self.hosts_per_switch[switch] = n
        ip = ipaddress.IPv4Address(f"10.{i >> 8}.{i & 255}.{n}")
        name = f"h{len(self.hosts) + 1}"
        self.hosts.append(Host(name, mac_from_int(0x02_00_00_00_00_00 + int(ip)), str(ip)))
        self.links.append(Link(name, 0, switch, self._take_port(switch), self.bw, self.delay,
                               self.loss))
        return name

    def link(self, a: str, b: str) -> None:
        self.links.append(Link(a, self._take_port(a), b, self._take_port(b), self.bw,
                               self.delay, self.loss))

    def _take_port(self, switch: str) -> int:
        port = self.next_port[switch]
        self.next_port[switch] = port + 1
        return port

    def done(self) -> Topology:
        topo = Topology(self.kind, self.params, self.switches, self.hosts, self.links)
        # The builders' output goes through the same checks as a loaded file.
        return Topology.from_dict(topo.to_dict())


def _builder(kind: str, params: dict, opts: dict) -> _Builder:
    return _Builder(kind, params, opts.get("bw_mbit", DEFAULT_BW_MBIT), opts.get("delay_ms", 0.0),
                    opts.get("loss", 0.0), opts.get("grpc_base_port", DEFAULT_GRPC_BASE_PORT),
                    opts.get("thrift_base_port", DEFAULT_THRIFT_BASE_PORT),
                    opts.get("grpc_host", "127.0.0.1"))


_LINK_OPTS = {"bw_mbit", "delay_ms", "loss", "grpc_base_port", "thrift_base_port", "grpc_host"}


def _check_opts(opts: dict) -> None:
    unknown = set(opts) - _LINK_OPTS
    if unknown:
        raise TypeError(f"unknown builder options: {sorted(unknown)}")


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or value < minimum:
        raise TopologyError(f"{name} must be an integer >= {minimum}, got {value!r}")


def star(hosts: int = 4, **opts) -> Topology:
    """One switch with `hosts` hosts on ports 1..hosts."""
    _check_opts(opts)
    _positive("hosts", hosts)
    b = _builder("star", {"hosts": hosts}, opts)
    s = b.switch("switch", 0)
    for _ in range(hosts):
        b.host(s)
    return b.done()


def leaf_spine(leaves: int = 4, spines: int = 2, hosts: int = 2, **opts) -> Topology:
    """`leaves` leaves with `hosts` hosts each (ports 1..hosts), each leaf linked to every spine
    (leaf ports hosts+1..hosts+spines; spine port j towards leaf j)."""
    _check_opts(opts)
    _positive("leaves", leaves)
    _positive("spines", spines)
    _positive("hosts per leaf", hosts)
    b = _builder("leaf-spine", {"leaves": leaves, "spines": spines, "hosts": hosts}, opts)
    leaf_names = [b.switch("leaf", 0) for _ in range(leaves)]
    spine_names = [b.switch("spine", 1) for _ in range(spines)]
    for leaf in leaf_names:
        for _ in range(hosts):
            b.host(leaf)
    for leaf in leaf_names:
        for spine in spine_names:
            b.link(leaf, spine)
    return b.done()


def fat_tree(k: int = 4, **opts) -> Topology:
    """The k-ary fat-tree: (k/2)^2 cores, k pods of k/2 aggregation and k/2 edge switches,
    k/2 hosts per edge switch (k^3/4 hosts, 5k^2/4 switches).

    Ports: edge 1..k/2 hosts, k/2+1..k aggregation switches of its pod; aggregation 1..k/2 edge
    switches, k/2+1..k cores; core port p towards pod p. Core j (0-based) links to aggregation
    switch j // (k/2) of every pod.
    """
    _check_opts(opts)
    if not isinstance(k, int) or k < 2 or k % 2:
        raise TopologyError(f"fat-tree k must be an even integer >= 2, got {k!r}")
    half = k // 2
    b = _builder("fat-tree", {"k": k}, opts)
    cores = [b.switch("core", 2) for _ in range(half * half)]
    pods = []
    for pod in range(1, k + 1):
        aggs = [b.switch("aggregation", 1, pod) for _ in range(half)]
        edges = [b.switch("edge", 0, pod) for _ in range(half)]
        pods.append((aggs, edges))
    for _, edges in pods:
        for edge in edges:
            for _ in range(half):
                b.host(edge)
    for aggs, edges in pods:
        for edge in edges:
            for agg in aggs:
                b.link(edge, agg)
    for aggs, _ in pods:
        for i, agg in enumerate(aggs):
            for core in cores[i * half:(i + 1) * half]:
                b.link(agg, core)
    return b.done()


BUILDERS = {"star": star, "leaf-spine": leaf_spine, "fat-tree": fat_tree}
