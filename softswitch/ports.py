"""Packet ports: raw interfaces (AF_PACKET), UDP tunnels for root-less tests, pcap capture.

Port specs as simple_switch's -i option: `N@IFNAME` attaches interface IFNAME
as port N; `N@udp:LHOST:LPORT>RHOST:RPORT` binds a UDP socket on LHOST:LPORT
and sends to RHOST:RPORT, one Ethernet frame per datagram.
"""

import errno
import logging
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

from .ring import RX as RING_RX
from .ring import RxRing

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23   # Linux >= 4.20; packets we send are not read back
PACKET_OUTGOING = 4           # sll_pkttype of a frame this host sent
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
CMSG_SPACE = socket.CMSG_SPACE(AUXDATA.size)
MAX_FRAME = 65535 + 14
SO_RCVBUFFORCE = 33           # SO_RCVBUF past net.core.rmem_max (needs CAP_NET_ADMIN)
RCVBUF = 4 << 20              # receive buffer of a raw port, bytes
REOPEN_INTERVAL = 1.0         # seconds between attempts to reopen a vanished interface


@dataclass(frozen=True)
class PortSpec:
    number: int
    name: str                               # interface name, or "udpN" for a tunnel
    local: tuple[str, int] | None = None    # UDP tunnel only
    peer: tuple[str, int] | None = None

    @property
    def is_udp(self) -> bool:
        return self.local is not None


def parse_port_spec(text: str) -> PortSpec:
    """Parse `N@IFNAME` or `N@udp:LHOST:LPORT>RHOST:RPORT`; ValueError with a reason."""
    number_text, sep, target = text.partition("@")
    if not sep or not target:
        raise ValueError(f"port spec {text!r}: expected <port-num>@<interface>")
    try:
        number = int(number_text)
    except ValueError:
        raise ValueError(f"port spec {text!r}: port number {number_text!r} is not an "
                         f"integer") from None
    if number < 0:
        raise ValueError(f"port spec {text!r}: negative port number")
    if not target.startswith("udp:"):
        if len(target) >= 16 or "/" in target or any(c.isspace() for c in target):
            raise ValueError(f"port spec {text!r}: {target!r} is not a valid interface name")
        return PortSpec(number, target)
    local_text, arrow, peer_text = target[4:].partition(">")
    if not arrow:
        raise ValueError(f"port spec {text!r}: expected udp:LHOST:LPORT>RHOST:RPORT")
    return PortSpec(number, f"udp{number}", _host_port(local_text, text),
                    _host_port(peer_text, text))


def _host_port(text: str, spec: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"port spec {spec!r}: {text!r} is not HOST:PORT")
    try:
        value = int(port)
    except ValueError:
        raise ValueError(f"port spec {spec!r}: {port!r} is not a UDP port") from None
    if not 0 <= value <= 65535:
        raise ValueError(f"port spec {spec!r}: UDP port {value} out of range")
    return host, value


class PcapWriter:
    """A classic pcap file (Ethernet link type), written as frames pass."""

    def __init__(self, path: str):
        self._file = open(path, "wb")  # open for the port's lifetime
        self._lock = threading.Lock()
        self._file.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_FRAME, 1))
        self._file.flush()

    def write(self, frame: bytes) -> None:
        now = time.time()
        sec = int(now)
        with self._lock:
            if self._file.closed:
                return
            self._file.write(struct.pack("<IIII", sec, int((now - sec) * 1e6), len(frame),
                                         len(frame)))
            self._file.write(frame)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class Port:
    """One switch port. recv() blocks at most `timeout` seconds; poll() never blocks (the
    packet loop calls it when fileno() is readable); send() never raises."""

    changes = 0  # bumped whenever any port's socket is opened or lost (native/loop.py)
    ring = None  # a raw port's receive ring, where it has one

    def __init__(self, spec: PortSpec, pcap_dir: str | None, log: logging.Logger):
        self.spec = spec
        self.number = spec.number
        self.name = spec.name
        self.log = log
        self.rx = self.tx = self.tx_errors = 0
        self.pcap_in = self.pcap_out = None
        if pcap_dir is not None:
            self.pcap_in = PcapWriter(os.path.join(pcap_dir, f"{spec.name}_in.pcap"))
            self.pcap_out = PcapWriter(os.path.join(pcap_dir, f"{spec.name}_out.pcap"))

    def recv(self, timeout: float) -> bytes | None:
        return self._received(self._recv(timeout))

    def poll(self) -> bytes | None:
        """The next frame already queued on the port, or None; never blocks."""
        return self._received(self._poll())

    def _received(self, frame: bytes | None) -> bytes | None:
        """Counts and captures a frame that came in."""
        if frame is not None:
            self.rx += 1
            if self.pcap_in:
                self.pcap_in.write(frame)
        return frame

    def fileno(self) -> int | None:
        """The descriptor to wait on for poll(), or None while the port has none."""
        sock = self.sock
        return None if sock is None else sock.fileno()

    def send(self, frame: bytes) -> bool:
        try:
            self._send(frame)
        except OSError as exc:
            self.tx_errors += 1
            if self.tx_errors in (1, 10, 100) or self.tx_errors % 1000 == 0:
                self.log.warning("port %d (%s): send failed (%d so far): %s", self.number,
                                 self.name, self.tx_errors, exc)
            return False
        self.tx += 1
        if self.pcap_out:
            self.pcap_out.write(frame)
        return True

    def close(self) -> None:
        self._close()
        for pcap in (self.pcap_in, self.pcap_out):
            if pcap:
                pcap.close()

    def _recv(self, timeout: float) -> bytes | None:
        raise NotImplementedError

    def _poll(self) -> bytes | None:
        raise NotImplementedError

    def _send(self, frame: bytes) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class UdpPort(Port):
    """A UDP tunnel to one peer. Datagrams from any other address are dropped and counted in
    `foreign`: the tunnel stands for a cable, and only the host at its other end is on it."""

    def __init__(self, spec: PortSpec, pcap_dir: str | None, log: logging.Logger):
        family = socket.AF_INET6 if ":" in spec.local[0] else socket.AF_INET
        self.foreign = 0
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            # The peer as recvfrom() reports it (a name resolved once, the family's form).
            self._peer = socket.getaddrinfo(spec.peer[0], spec.peer[1], family,
                                            socket.SOCK_DGRAM)[0][4][:2]
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.sock.bind(spec.local)
        except OSError:
            self.sock.close()
            raise
        super().__init__(spec, pcap_dir, log)

    def _recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                frame, source = self.sock.recvfrom(MAX_FRAME)
            except TimeoutError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ECONNREFUSED, errno.EAGAIN):
                    return None   # ICMP from a peer not listening yet; or a zero timeout
                raise
            if source[:2] == self._peer:
                return frame
            self._foreign(source)

    def _poll(self) -> bytes | None:
        sock = self.sock
        if sock.gettimeout() != 0.0:
            sock.settimeout(0.0)
        while True:
            try:
                frame, source = sock.recvfrom(MAX_FRAME)
            except OSError as exc:  # BlockingIOError included: nothing queued
                if exc.errno in (errno.ECONNREFUSED, errno.EAGAIN):
                    return None
                raise
            if source[:2] == self._peer:
                return frame
            self._foreign(source)

    def _foreign(self, source) -> None:
        self.foreign += 1
        if self.foreign in (1, 10, 100) or self.foreign % 1000 == 0:
            self.log.warning("port %d (%s): dropped a datagram from %s:%d, not the peer "
                             "%s:%d (%d so far)", self.number, self.name, source[0],
                             source[1], *self._peer, self.foreign)

    def _send(self, frame: bytes) -> None:
        self.sock.sendto(frame, self.spec.peer)

    def _close(self) -> None:
        self.sock.close()


class RawPort(Port):
    """An interface in promiscuous mode; survives the interface vanishing and returning."""

    @property
    def rx(self) -> int:
        """Frames received, in Python and by native code from the ring (native/rx.py)."""
        ring = self.ring
        return self._rx + (int(ring.rec[RING_RX]) if ring is not None else 0)

    @rx.setter
    def rx(self, value: int) -> None:
        ring = self.ring
        self._rx = value - (int(ring.rec[RING_RX]) if ring is not None else 0)

    def __init__(self, spec: PortSpec, pcap_dir: str | None, log: logging.Logger):
        self._rx = 0
        super().__init__(spec, pcap_dir, log)
        self.sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._next_open = 0.0
        self._closed = False
        try:
            self._open(first=True)
        except OSError:
            self.close()
            raise

    def _open(self, first: bool = False) -> bool:
        self._next_open = time.monotonic() + REOPEN_INTERVAL
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except OSError as exc:
            self.log.error("port %d: cannot open a raw socket (needs root): %s", self.number, exc)
            raise
        try:
            sock.bind((self.name, 0))
            ifindex = socket.if_nametoindex(self.name)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass  # older kernels: outgoing frames are filtered in _recv
            # the kernel moves a VLAN tag out of the frame into auxiliary data; libpcap,
            # and so BMv2, puts it back, and so must we
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            # a burst must fit while the loop serves another port, as in libpcap's 2 MB ring
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        except OSError as exc:
            sock.close()
            if first:
                self.log.error("port %d: cannot attach interface %s: %s; retrying every %.0fs",
                               self.number, self.name, exc, REOPEN_INTERVAL)
            return False
        ring = None
        try:  # frames from a ring shared with the kernel: no system call each
            ring = RxRing(sock, self.name, self.number)
        except OSError as exc:
            self.log.info("port %d: no receive ring on %s (%s): reading with recvmsg",
                          self.number, self.name, exc)
        with self._lock:
            if self._closed:
                if ring:
                    ring.close()
                sock.close()
                return False
            self.sock, self.ring = sock, ring
            Port.changes += 1
        if not first:
            self.log.warning("port %d: interface %s is back", self.number, self.name)
        return True

    def _lost(self, exc: OSError) -> None:
        self.log.warning("port %d: interface %s lost (%s); retrying every %.0fs", self.number,
                         self.name, exc, REOPEN_INTERVAL)
        with self._lock:
            sock, self.sock = self.sock, None
            ring, self.ring = self.ring, None
            Port.changes += 1
        if ring:
            self._rx += int(ring.rec[RING_RX])
            ring.close()
        if sock:
            sock.close()
        self._next_open = time.monotonic() + REOPEN_INTERVAL

    def _recv(self, timeout: float) -> bytes | None:
        sock = self.sock
        if sock is None:
            wait = self._next_open - time.monotonic()
            if wait > 0:
                time.sleep(min(wait, timeout))
                return None
            if self._closed or not self._open():
                return None
            sock = self.sock
        if self.ring is not None:
            return self._recv_ring(sock, timeout)
        sock.settimeout(timeout)
        while True:
            try:
                frame, anc, _, addr = sock.recvmsg(MAX_FRAME, CMSG_SPACE)
            except TimeoutError:
                return None
            except OSError as exc:
                if self._closed:
                    return None
                self._lost(exc)
                return None
            if addr[2] != PACKET_OUTGOING:
                return restore_vlan(frame, anc)

    def reopen_due(self) -> bool:
        """While the interface is gone: try to attach it again once the interval is up; True
        when it is back (the packet loop then waits on the new descriptor)."""
        if self.sock is not None or self._closed or time.monotonic() < self._next_open:
            return False
        return self._open()

    def _recv_ring(self, sock, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            frame = self._poll()
            if frame is not None or self.sock is None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([sock], [], [], left)

    def failed(self) -> bool:
        """The socket reports an error (its interface went away): the port is lost.
        A receive ring never fails a read, so the packet loop asks on error events."""
        sock = self.sock
        if sock is None:
            return False
        try:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError as exc:
            err = exc.errno or errno.EBADF
        if not err or self._closed:
            return False
        self._lost(OSError(err, os.strerror(err)))
        return True

    def _poll(self) -> bytes | None:
        sock = self.sock
        if sock is None:
            return None
        ring = self.ring
        if ring is not None:
            frame = ring.next()
            if frame is None:
                self.failed()
            return frame
        if sock.gettimeout() != 0.0:
            sock.settimeout(0.0)
        while True:
            try:
                frame, anc, _, addr = sock.recvmsg(MAX_FRAME, CMSG_SPACE)
            except BlockingIOError:
                return None
            except OSError as exc:
                if not self._closed:
                    self._lost(exc)
                return None
            if addr[2] != PACKET_OUTGOING:
                return restore_vlan(frame, anc) if anc else frame

    def _send(self, frame: bytes) -> None:
        sock = self.sock
        if sock is None:
            raise OSError(errno.ENODEV, f"interface {self.name} is not attached")
        sock.send(frame)

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            sock, self.sock = self.sock, None
            ring, self.ring = self.ring, None
        if ring:
            self._rx += int(ring.rec[RING_RX])
            ring.close()
        if sock:
            sock.close()


def restore_vlan(frame: bytes, ancdata) -> bytes:
    """Re-inserts the VLAN tag the kernel stripped into PACKET_AUXDATA, as libpcap does."""
    for level, kind, data in ancdata:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < AUXDATA.size:
            continue
        status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(data)
        if tci == 0 and not status & TP_STATUS_VLAN_VALID:
            return frame
        if not status & TP_STATUS_VLAN_TPID_VALID:
            tpid = ETH_P_8021Q
        if len(frame) < 12:
            return frame
        return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


def open_port(spec: PortSpec, pcap_dir: str | None = None,
              log: logging.Logger | None = None) -> Port:
    log = log or logging.getLogger("softswitch.ports")
    return (UdpPort if spec.is_udp else RawPort)(spec, pcap_dir, log)
