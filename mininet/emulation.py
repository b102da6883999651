"""The Mininet emulation of a topology JSON: hosts, P4 switches and shaped links.

Everything comes from controller.topology (DESIGN contract 3): names, MAC and
IP addresses, port numbers, bandwidths. Links are shaped with HTB only; these
machines have no netem, so loss is the switches' impairment control.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from mininet.link import TCLink
from mininet.net import Mininet
from p4switch import P4Switch

from controller.topology import Topology

# Checksums must be complete in every frame: a user-space switch forwards
# what the kernel left for the NIC to finish.
OFFLOADS = "tx off rx off sg off tso off gso off gro off"


class Emulation:
    """A running Mininet network for one topology; use as a context manager."""

    def __init__(self, topo: Topology, kind: str, log_dir: Path, pcap_dir: Path | None = None,
                 shape: bool = True):
        self.topo = topo
        self.kind = kind
        self.log_dir = Path(log_dir)
        self.pcap_dir = pcap_dir
        self.shape = shape
        self.net: Mininet | None = None

    def __enter__(self) -> Emulation:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        busy = self.conflicts()
        if busy:
            raise RuntimeError("another emulation seems to be running: " + "; ".join(busy)
                               + " (stop it first; this run changed nothing)")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        net = self.net = Mininet(topo=None, controller=None, link=TCLink, build=False,
                                 autoSetMacs=False, autoStaticArp=False)
        for s in self.topo.switches:
            net.addSwitch(s.name, cls=P4Switch, kind=self.kind, device_id=s.device_id,
                          grpc_addr=s.grpc_addr, thrift_port=s.thrift_port,
                          log_dir=str(self.log_dir),
                          pcap_dir=str(self.pcap_dir) if self.pcap_dir else None,
                          dpid=f"{s.device_id:016x}")
        for h in self.topo.hosts:
            net.addHost(h.name, ip=f"{h.ip}/{h.prefix_len}", mac=h.mac)
        for link in self.topo.links:
            opts = {"bw": link.bw_mbit} if self.shape else {}
            net.addLink(link.node1, link.node2, port1=link.port1, port2=link.port2,
                        txo=False, rxo=False, **opts)
        net.build()
        for s in self.topo.switches:
            net.get(s.name).start([])
        for s in self.topo.switches:
            net.get(s.name).wait_ready()
        self.configure_hosts()

    def conflicts(self) -> list[str]:
        """Interfaces or gRPC ports of this topology that already exist or are taken."""
        found = []
        names = [f"{s.name}-eth{p.port}" for s in self.topo.switches
                 for p in self.topo.ports(s.name)]
        taken = [n for n in names if Path("/sys/class/net", n).exists()]
        if taken:
            found.append(f"interface {taken[0]} exists" + (f" (+{len(taken) - 1} more)"
                                                            if len(taken) > 1 else ""))
        for s in self.topo.switches:
            host, port = s.grpc_addr.rsplit(":", 1)
            with socket.socket() as sock:
                if sock.connect_ex((host, int(port))) == 0:
                    found.append(f"{s.grpc_addr} ({s.name}'s gRPC address) is in use")
                    break
        return found

    def configure_hosts(self) -> None:
        peers = [(h.ip, h.mac) for h in self.topo.hosts]
        peers.append((self.topo.service_ip, self.topo.service_mac))
        for h in self.topo.hosts:
            node = self.net.get(h.name)
            intf = node.defaultIntf().name
            node.cmd(f"ethtool -K {intf} {OFFLOADS} >/dev/null 2>&1")
            node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                     "net.ipv6.conf.default.disable_ipv6=1")
            # The switches route IPv4 only: every neighbour is static.
            script = "; ".join(f"ip neigh replace {ip} lladdr {mac} dev {intf} nud permanent"
                               for ip, mac in peers if ip != h.ip)
            node.cmd(script)

    def host(self, name: str):
        return self.net.get(name)

    def stop(self) -> None:
        net, self.net = self.net, None
        if net is None:
            return
        # Switch processes first (by PID), then Mininet removes links and namespaces.
        for s in self.topo.switches:
            with contextlib.suppress(KeyError):
                net.get(s.name).terminate_process()
        net.stop()

