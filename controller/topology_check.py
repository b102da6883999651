"""Parsing and validation of the topology JSON: every error names the offending item."""

from __future__ import annotations

import ipaddress
from collections import deque
from typing import TypeVar

from controller.topology_data import (
    DEFAULT_MAX_EXP,
    ENCODINGS,
    FORMAT_VERSION,
    IFNAME_MAX,
    MAX_EXP,
    MAX_JOB_WORKERS,
    MAX_PORT,
    MODES,
    POOL_SIZE,
    Host,
    JobSpec,
    Link,
    Switch,
    TopologyData,
    TopologyError,
    ifname,
    valid_mac,
    valid_name,
)

_MISSING = object()
T = TypeVar("T", bound=TopologyData)


def _get(obj: dict, key: str, where: str, kind: type | tuple, default=_MISSING):
    if key not in obj:
        if default is not _MISSING:
            return default
        raise TopologyError(f"{where}: missing field {key!r}")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python; a JSON true is never a number here.
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TopologyError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _list(data: dict, key: str) -> list:
    value = _get(data, key, "topology", list, [])
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise TopologyError(f"{key}[{i}]: expected an object, got {item!r}")
    return value


def _mac(value: object, where: str) -> str:
    if not valid_mac(value):
        raise TopologyError(f"{where}: not a MAC address (lower-case aa:bb:cc:dd:ee:ff): "
                            f"{value!r}")
    return value


def _ipv4(value: object, where: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except (ipaddress.AddressValueError, ValueError):
        raise TopologyError(f"{where}: not an IPv4 address: {value!r}") from None


def _grpc_addr(value: str, where: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TopologyError(f"{where}: expected HOST:PORT, got {value!r}")
    return value


def _unique(items: list, attr: str, what: str) -> None:
    seen: dict = {}
    for item in items:
        value = getattr(item, attr)
        if value in seen:
            raise TopologyError(f"{what} {item.name!r} and {seen[value]!r} share {attr} {value!r}")
        seen[value] = item.name


def _parse_switch(i: int, d: dict) -> Switch:
    where = f"switches[{i}]"
    name = _get(d, "name", where, str)
    if not valid_name(name):
        raise TopologyError(f"{where}.name: {name!r} is not a name (letter, then letters, "
                            "digits, _)")
    where = f"switch {name!r}"
    device_id = _get(d, "device_id", where, int)
    if not 0 <= device_id < 2 ** 64:
        raise TopologyError(f"{where}.device_id: out of range: {device_id}")
    pod = _get(d, "pod", where, (int, type(None)), None)
    tier = _get(d, "tier", where, int, 0)
    if tier < 0:
        raise TopologyError(f"{where}.tier: must be >= 0, got {tier}")
    thrift = _get(d, "thrift_port", where, int, 9090)
    if not 0 < thrift < 65536:
        raise TopologyError(f"{where}.thrift_port: out of range: {thrift}")
    return Switch(name, device_id,
                  _grpc_addr(_get(d, "grpc_addr", where, str), f"{where}.grpc_addr"),
                  thrift, _mac(_get(d, "mac", where, str), f"{where}.mac"),
                  _get(d, "role", where, str, "switch"), tier, pod)


def _parse_host(i: int, d: dict) -> Host:
    where = f"hosts[{i}]"
    name = _get(d, "name", where, str)
    if not valid_name(name):
        raise TopologyError(f"{where}.name: {name!r} is not a name (letter, then letters, "
                            "digits, _)")
    where = f"host {name!r}"
    prefix = _get(d, "prefix_len", where, int, 8)
    if not 0 < prefix <= 32:
        raise TopologyError(f"{where}.prefix_len: must be 1..32, got {prefix}")
    return Host(name, _mac(_get(d, "mac", where, str), f"{where}.mac"),
                _ipv4(_get(d, "ip", where, str), f"{where}.ip"), prefix)


def _parse_link(i: int, d: dict) -> Link:
    where = f"links[{i}]"
    bw = _get(d, "bw_mbit", where, (int, float), 100.0)
    delay = _get(d, "delay_ms", where, (int, float), 0.0)
    loss = _get(d, "loss", where, (int, float), 0.0)
    if bw <= 0:
        raise TopologyError(f"{where}.bw_mbit: must be > 0, got {bw}")
    if delay < 0:
        raise TopologyError(f"{where}.delay_ms: must be >= 0, got {delay}")
    if not 0 <= loss <= 1:
        raise TopologyError(f"{where}.loss: must be within [0, 1], got {loss}")
    return Link(_get(d, "node1", where, str), _get(d, "port1", where, int),
                _get(d, "node2", where, str), _get(d, "port2", where, int),
                float(bw), float(delay), float(loss))


def parse_job(i: int, d: dict) -> JobSpec:
    where = f"jobs[{i}]"
    job_id = _get(d, "id", where, int)
    if not 1 <= job_id <= 0xFFFF:
        raise TopologyError(f"{where}.id: must be 1..65535, got {job_id}")
    where = f"job {job_id}"
    workers = _get(d, "workers", where, list)
    if not workers or not all(isinstance(w, str) for w in workers):
        raise TopologyError(f"{where}.workers: expected a non-empty list of host names")
    if len(set(workers)) != len(workers):
        raise TopologyError(f"{where}.workers: a host is listed twice: {workers}")
    if len(workers) > MAX_JOB_WORKERS:
        raise TopologyError(f"{where}.workers: {len(workers)} workers, at most "
                            f"{MAX_JOB_WORKERS} (the header's count and the switch's worker "
                            f"total are 8 bits)")
    slots = _get(d, "slots", where, int, 64)
    if not 1 <= slots <= POOL_SIZE:
        raise TopologyError(f"{where}.slots: must be 1..{POOL_SIZE}, got {slots}")
    enc, partials = (_get(d, key, where, str, "fixed32") for key in ("encoding", "partials"))
    for key, value in (("encoding", enc), ("partials", partials)):
        if value not in ENCODINGS:
            raise TopologyError(f"{where}.{key}: must be one of {ENCODINGS}, got {value!r}")
    max_exp = _get(d, "max_exp", where, int, DEFAULT_MAX_EXP)
    if not 1 <= max_exp <= MAX_EXP:
        raise TopologyError(f"{where}.max_exp: must be 1..{MAX_EXP} (a biased float32 "
                            f"exponent), got {max_exp}")
    mode = _get(d, "mode", where, str, "dense")
    if mode not in MODES:
        raise TopologyError(f"{where}.mode: must be one of {MODES}, got {mode!r}")
    seed = _get(d, "seed", where, int, 0)
    if not 0 <= seed < 1 << 64:
        raise TopologyError(f"{where}.seed: must be 0..2^64-1, got {seed}")
    return JobSpec(job_id, tuple(workers), slots, enc, partials, max_exp, mode, seed)


def _check_links(topo: TopologyData) -> None:
    nodes = {s.name for s in topo.switches} | {h.name for h in topo.hosts}
    used: dict[tuple[str, int], int] = {}
    host_links: dict[str, int] = {}
    for i, link in enumerate(topo.links):
        where = f"links[{i}]"
        if link.node1 == link.node2:
            raise TopologyError(f"{where}: links {link.node1!r} to itself")
        for node, port in link.ends():
            if node not in nodes:
                raise TopologyError(f"{where}: unknown node {node!r}")
            if topo.is_host(node):
                host_links[node] = host_links.get(node, 0) + 1
                if port != 0:
                    raise TopologyError(f"{where}: host {node!r} has one interface, port 0, "
                                        f"not {port}")
            elif not 1 <= port <= MAX_PORT:
                raise TopologyError(f"{where}: switch {node!r} port {port} outside 1..{MAX_PORT}")
            if (node, port) in used:
                raise TopologyError(f"{where}: port {port} of {node!r} is already used by "
                                    f"links[{used[node, port]}]")
            used[node, port] = i
            if len(ifname(node, port)) > IFNAME_MAX:
                raise TopologyError(f"{where}: interface name {ifname(node, port)!r} is longer "
                                    f"than {IFNAME_MAX} characters")
        if topo.is_host(link.node1) and topo.is_host(link.node2):
            raise TopologyError(f"{where}: links two hosts ({link.node1}, {link.node2})")
    for h in topo.hosts:
        if host_links.get(h.name, 0) != 1:
            raise TopologyError(f"host {h.name!r} must have exactly one link, has "
                                f"{host_links.get(h.name, 0)}")


def _check_connected(topo: TopologyData) -> None:
    if not topo.switches:
        raise TopologyError("no switches")
    start = topo.switches[0].name
    seen, todo = {start}, deque([start])
    while todo:
        for p in topo.ports(todo.popleft()):
            if p.peer not in seen:
                seen.add(p.peer)
                if topo.is_switch(p.peer):
                    todo.append(p.peer)
    missing = [n for n in [s.name for s in topo.switches] + [h.name for h in topo.hosts]
               if n not in seen]
    if missing:
        raise TopologyError(f"not connected: {', '.join(missing[:8])} unreachable from {start}")


def _check_jobs(topo: TopologyData) -> None:
    seen = set()
    for job in topo.jobs:
        if job.id in seen:
            raise TopologyError(f"job id {job.id} is used twice")
        seen.add(job.id)
        for w in job.workers:
            if not topo.is_host(w):
                raise TopologyError(f"job {job.id}: worker {w!r} is not a host of the topology")


def parse_topology(cls: type[T], data: object) -> T:
    """A topology of class `cls` (controller.topology.Topology) from its JSON form."""
    if not isinstance(data, dict):
        raise TopologyError(f"expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != FORMAT_VERSION:
        raise TopologyError(f"unsupported topology format version {version!r} "
                            f"(this controller reads version {FORMAT_VERSION})")
    kind = _get(data, "kind", "topology", str, "custom")
    params = _get(data, "params", "topology", dict, {})
    service = _get(data, "service", "topology", dict)
    service_ip = _ipv4(_get(service, "ip", "service", str), "service.ip")
    service_mac = _mac(_get(service, "mac", "service", str), "service.mac")
    switches = [_parse_switch(i, d) for i, d in enumerate(_list(data, "switches"))]
    hosts = [_parse_host(i, d) for i, d in enumerate(_list(data, "hosts"))]
    links = [_parse_link(i, d) for i, d in enumerate(_list(data, "links"))]
    jobs = [parse_job(i, d) for i, d in enumerate(_list(data, "jobs"))]

    names: dict[str, str] = {}
    for what, items in (("switch", switches), ("host", hosts)):
        for item in items:
            if item.name in names:
                raise TopologyError(f"name {item.name!r} is used by a {names[item.name]} and "
                                    f"a {what}")
            names[item.name] = what
    _unique(switches, "device_id", "switches")
    _unique(switches, "grpc_addr", "switches")
    _unique(switches, "mac", "switches")
    _unique(hosts, "ip", "hosts")
    _unique(hosts, "mac", "hosts")
    macs = {s.mac: s.name for s in switches} | {h.mac: h.name for h in hosts}
    if service_mac in macs:
        raise TopologyError(f"service.mac {service_mac} is also the MAC of {macs[service_mac]!r}")
    for h in hosts:
        if h.ip == service_ip:
            raise TopologyError(f"service.ip {service_ip} is also the address of {h.name!r}")

    topo = cls(kind, params, switches, hosts, links, service_ip, service_mac, jobs)
    _check_links(topo)
    _check_connected(topo)
    _check_jobs(topo)
    return topo
