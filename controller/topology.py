"""The topology model, its builders and its JSON form: the one copy of the addressing plan.

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
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

FORMAT_VERSION = 1
# Result and partial-sum encodings: sum8, unsigned byte sums of UQ4 contributions
# (docs/PROTOCOL.md "Payload"; at most 17 workers: 15 each).
ENCODINGS = ("fixed32", "cnat8", "sum8")
# dense: every chunk in every use; sparse: only non-zero blocks, OmniReduce's streaming
# aggregation on one switch (docs/PROTOCOL.md "Sparse jobs").
MODES = ("dense", "sparse")
POOL_SIZE = 512            # register slots per switch (p4src/include/sizes.p4)
MAX_CHILDREN = 32          # bitmap width (p4src/include/sizes.p4)
MAX_JOB_WORKERS = 255      # 8-bit count field and worker total (docs/PROTOCOL.md)
# The largest exponent (biased float32) a contribution may carry by default: values below
# 2^32 in magnitude. The switch drops a contribution above its job's bound (BAD_EXP).
DEFAULT_MAX_EXP = 158
MAX_EXP = 254              # the largest finite float32 exponent
MAX_PORT = 510             # bit<9>; 511 is v1model's drop port
IFNAME_MAX = 15            # Linux interface names: "<node>-eth<port>"
DEFAULT_BW_MBIT = 100.0
DEFAULT_GRPC_BASE_PORT = 50051
DEFAULT_THRIFT_BASE_PORT = 9090
SERVICE_IP = "10.255.255.254"
SERVICE_MAC = "02:4e:41:ff:ff:fe"
HOST_PREFIX_LEN = 8

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


class TopologyError(ValueError):
    """A topology that cannot be built or a topology file that does not validate."""


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int
    grpc_addr: str
    thrift_port: int
    mac: str
    role: str = "switch"     # switch | leaf | spine | edge | aggregation | core
    tier: int = 0            # 0 where hosts attach, growing towards the top of the tree
    pod: int | None = None   # fat-tree pod of edge and aggregation switches


@dataclass(frozen=True)
class Host:
    name: str
    mac: str
    ip: str
    prefix_len: int = HOST_PREFIX_LEN


@dataclass(frozen=True)
class Link:
    node1: str
    port1: int
    node2: str
    port2: int
    bw_mbit: float = DEFAULT_BW_MBIT
    delay_ms: float = 0.0    # recorded for the emulation; not applied without netem
    loss: float = 0.0        # drop probability of packets a switch sends onto this link

    def ends(self) -> tuple[tuple[str, int], tuple[str, int]]:
        return (self.node1, self.port1), (self.node2, self.port2)


@dataclass(frozen=True)
class JobSpec:
    """One aggregation job: its workers, window (slots), the encoding of its results and of
    the partial sums switches below the root send up (fixed32: exact; cnat8: re-compressed,
    one byte per element on every link, unbiased but not exact), and its mode (dense, or
    sparse: block-sparse, on a single switch)."""

    id: int
    workers: tuple[str, ...]
    slots: int = 64
    encoding: str = "fixed32"
    partials: str = "fixed32"
    max_exp: int = DEFAULT_MAX_EXP
    mode: str = "dense"
    # The run's seed: the switches' rounding bits for the job come from it (round_key in
    # controller/aggregation.py), so a rerun of the seed is the same run.
    seed: int = 0

    def __post_init__(self) -> None:
        # Refused here, not only where files and the command line are parsed: a job built
        # in memory with more workers would have its count wrap (256 workers -> 0).
        if len(self.workers) > MAX_JOB_WORKERS:
            raise TopologyError(f"job {self.id}: {len(self.workers)} workers, at most "
                                f"{MAX_JOB_WORKERS} (the header's count and the switch's "
                                f"worker total are 8 bits)")

    def to_dict(self) -> dict:
        d = {"id": self.id, "workers": list(self.workers), "slots": self.slots,
             "encoding": self.encoding, "partials": self.partials, "max_exp": self.max_exp}
        if self.mode != "dense":
            d["mode"] = self.mode   # dense files stay as they were
        if self.seed:
            d["seed"] = self.seed
        return d


@dataclass(frozen=True)
class Port:
    """One end of a link seen from `node`: the peer node and the peer's port."""

    node: str
    port: int
    peer: str
    peer_port: int
    link: Link


@dataclass
class Topology:
    kind: str
    params: dict
    switches: list[Switch]
    hosts: list[Host]
    links: list[Link]
    service_ip: str = SERVICE_IP
    service_mac: str = SERVICE_MAC
    jobs: list[JobSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._switches = {s.name: s for s in self.switches}
        self._hosts = {h.name: h for h in self.hosts}
        self._ports: dict[str, dict[int, Port]] = {}
        for link in self.links:
            (a, pa), (b, pb) = link.ends()
            self._ports.setdefault(a, {})[pa] = Port(a, pa, b, pb, link)
            self._ports.setdefault(b, {})[pb] = Port(b, pb, a, pa, link)

    # ---- lookups ----
    def switch(self, name: str) -> Switch:
        try:
            return self._switches[name]
        except KeyError:
            raise TopologyError(f"no switch named {name!r} (switches: "
                                f"{_short_list(self._switches)})") from None

    def host(self, name: str) -> Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise TopologyError(f"no host named {name!r} (hosts: "
                                f"{_short_list(self._hosts)})") from None

    def is_switch(self, name: str) -> bool:
        return name in self._switches

    def is_host(self, name: str) -> bool:
        return name in self._hosts

    def ports(self, node: str) -> list[Port]:
        """The node's connected ports in port order."""
        return [p for _, p in sorted(self._ports.get(node, {}).items())]

    def port(self, node: str, number: int) -> Port:
        return self._ports[node][number]

    def attachment(self, host: str) -> Port:
        """The switch port the host is connected to (node = the switch, peer = the host)."""
        (p,) = self.ports(host)
        return self.port(p.peer, p.peer_port)

    def hosts_on(self, switch: str) -> list[Port]:
        return [p for p in self.ports(switch) if p.peer in self._hosts]

    def job(self, job_id: int) -> JobSpec:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise TopologyError(f"no job {job_id} in the topology")

    def headroom(self, job_id: int) -> int:
        """The bits every worker of the job keeps free (docs/PROTOCOL.md "Scaling"), from
        the job's aggregation tree: workers take it from here, as the controller does."""
        from controller.tree import build_tree  # tree.py builds on this module

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
        from controller.topology_check import parse_topology
        return parse_topology(data)

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


def _short_list(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def ifname(node: str, port: int) -> str:
    return f"{node}-eth{port}"


def mac_from_int(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def valid_mac(text: object) -> bool:
    return isinstance(text, str) and bool(_MAC_RE.match(text))


def valid_name(text: object) -> bool:
    return isinstance(text, str) and bool(_NAME_RE.match(text))


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
