"""The topology's data: the file format's limits, its elements, and the fields and lookups
of a topology, which the checks (topology_check.py) and the job trees (tree.py) read.
topology.py builds on them: builders, the JSON form, a job's headroom.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.encodings import RESULTS
from protocol.sizes import MAX_CHILDREN, POOL_SIZE  # noqa: F401  (slots, bitmap width)

FORMAT_VERSION = 1
# Result and partial-sum encodings (protocol/encodings.py; docs/PROTOCOL.md "Payload").
ENCODINGS = RESULTS
# dense: every chunk in every use; sparse: only non-zero blocks, OmniReduce's streaming
# aggregation on one switch (docs/PROTOCOL.md "Sparse jobs").
MODES = ("dense", "sparse")
MAX_JOB_WORKERS = 255      # 8-bit count field and worker total (docs/PROTOCOL.md)
# The largest exponent (biased float32) a contribution may carry by default: values below
# 2^32 in magnitude. The switch drops a contribution above its job's bound (BAD_EXP).
DEFAULT_MAX_EXP = 158
MAX_EXP = 254              # the largest finite float32 exponent
MAX_PORT = 510             # bit<9>; 511 is v1model's drop port
IFNAME_MAX = 15            # Linux interface names: "<node>-eth<port>"
DEFAULT_BW_MBIT = 100.0
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
class TopologyData:
    """A topology's fields and lookups; controller.topology.Topology is the one to use."""

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


def _short_list(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def ifname(node: str, port: int) -> str:
    return f"{node}-eth{port}"


def valid_mac(text: object) -> bool:
    return isinstance(text, str) and bool(_MAC_RE.match(text))


def valid_name(text: object) -> bool:
    return isinstance(text, str) and bool(_NAME_RE.match(text))

