"""Ports a worker sends frames through: send(frame), recv(timeout) -> frame | None, close().

- RawPort: an AF_PACKET socket on an interface (Mininet hosts; needs CAP_NET_RAW).
- UdpTunnelPort: one Ethernet frame per UDP datagram, the worker's end of a softswitch
  tunnel port `PORT@udp:LOCAL>PEER` (root-less tests and runs).
- QueuePort: an in-process queue, for tests (harness/network.py connects it to a switch).
- DatagramPort: a kernel UDP socket carrying bare AGG datagrams (worker/baseline.py).

`open_port("raw:h1-eth0" | "udp:127.0.0.1:40001>127.0.0.1:40000")` opens one from text.
"""

from __future__ import annotations

import array
import ctypes
import errno
import fcntl
import os
import queue
import select
import socket
import struct
import threading
from collections.abc import Callable

import numpy as np

from worker import wire
from worker.ring import RxRing

ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23      # Linux >= 4.20
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
MAX_FRAME = 65535
SIOCOUTQ = 0x5411  # = TIOCOUTQ


class PortError(OSError):
    """A port that cannot be opened or used, with what to check."""


class Port:
    """Base of all ports: counts what passes, closes once."""

    def __init__(self) -> None:
        self.closed = False

    def send(self, frame: bytes) -> None:
        raise NotImplementedError

    def send_many(self, frames: list[bytes]) -> None:
        """Sends the frames in order (a socket port: with one system call, sendmmsg)."""
        for frame in frames:
            self.send(frame)

    def recv(self, timeout: float | None) -> bytes | None:
        """The next frame, waiting at most `timeout` seconds (None: forever); None if none."""
        raise NotImplementedError

    def backlog(self) -> int | None:
        """How much of what was sent still waits to leave (the kernel's units), or None
        where the port cannot tell."""
        return None

    def close(self) -> None:
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    # struct msghdr is padded to its alignment before msg_len: nested, as in C.
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _libc_sendmmsg():
    try:
        fn = ctypes.CDLL(None, use_errno=True).sendmmsg
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SENDMMSG = _libc_sendmmsg()


class _Batch:
    """sendmmsg's message and iovec arrays, made once: each call fills the iovecs of a
    burst (one buffer of the frames, one numpy assignment) instead of building ctypes
    objects per frame."""

    CAP = 256

    def __init__(self):
        self.iov = (_IoVec * self.CAP)()
        self.msgs = (_MMsgHdr * self.CAP)()
        for i in range(self.CAP):
            self.msgs[i].msg_hdr.msg_iov = ctypes.addressof(self.iov[i])
            self.msgs[i].msg_hdr.msg_iovlen = 1
        self.cells = np.frombuffer(self.iov, np.uint64).reshape(self.CAP, 2)
        self.addr = ctypes.addressof(self.msgs)
        self.size = ctypes.sizeof(_MMsgHdr)


# One batch per thread: the arrays are filled with the addresses of a burst and read by the
# kernel while sendmmsg runs (the GIL released), so a batch shared by threads sent one
# thread's frames on another's socket.
_BATCHES = threading.local()


def sendmmsg(sock: socket.socket, frames: list[bytes]) -> None:
    """Every frame as one datagram of the connected (or bound packet) socket, in order, in
    as few system calls as the kernel takes; plain send() where libc has no sendmmsg.
    Safe from any number of threads, on their own sockets or the same one."""
    n = len(frames)
    if _SENDMMSG is None or n < 2:
        for f in frames:
            sock.send(f)
        return
    b = getattr(_BATCHES, "batch", None)
    if b is None:
        b = _BATCHES.batch = _Batch()
    fd = sock.fileno()
    for k in range(0, n, b.CAP):
        part = frames[k:k + b.CAP]
        m = len(part)
        buf = b"".join(part)
        lens = np.fromiter(map(len, part), np.uint64, m)
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value
        b.cells[:m, 1] = lens
        b.cells[0, 0] = base
        np.cumsum(lens[:-1], out=b.cells[1:m, 0])
        b.cells[1:m, 0] += np.uint64(base)
        done = 0
        while done < m:
            sent = _SENDMMSG(fd, b.addr + done * b.size, m - done, 0)
            if sent < 0:
                err = ctypes.get_errno()
                if err == errno.EINTR:
                    continue
                raise OSError(err, os.strerror(err))
            done += sent
        del buf


def agg_filter(udp_port: int = wire.AGG_PORT) -> bytes:
    """Classic BPF: IPv4, IHL 5, unfragmented UDP to `udp_port`; keeps the socket quiet."""
    code = [
        (0x28, 0, 0, 12),           # ldh [12]            ethertype
        (0x15, 0, 7, ETH_P_IP),     # jeq IPv4 else drop
        (0x30, 0, 0, 14),           # ldb [14]            version/ihl
        (0x15, 0, 5, 0x45),         # jeq 0x45 else drop
        (0x30, 0, 0, 23),           # ldb [23]            protocol
        (0x15, 0, 3, 17),           # jeq UDP else drop
        (0x28, 0, 0, 36),           # ldh [36]            UDP destination port
        (0x15, 0, 1, udp_port),     # jeq port else drop
        (0x06, 0, 0, MAX_FRAME),    # ret accept
        (0x06, 0, 0, 0),            # ret drop
    ]
    return b"".join(struct.pack("HBBI", *ins) for ins in code)


class RawPort(Port):
    """AF_PACKET on `ifname`: sends whole frames, receives aggregation frames only.

    Results are addressed to this host's IP and UDP port 20033. With nothing bound to that
    port the kernel would answer each with ICMP port-unreachable, so `quiet_ip` (the host's
    address) gets a UDP socket bound to the port that is never read: its tiny buffer
    overflows silently instead.
    """

    def __init__(self, ifname: str, quiet_ip: str | None = None,
                 udp_port: int = wire.AGG_PORT):
        super().__init__()
        self.ifname = ifname
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        except PermissionError:
            raise PortError(errno.EPERM, f"raw socket on {ifname}: needs root or CAP_NET_RAW "
                            "(use a udp: tunnel port for runs without root)") from None
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, self._filter(udp_port))
            try:
                self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass        # older kernels: outgoing copies are skipped in recv()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            self.sock.bind((ifname, ETH_P_IP))
        except OSError as e:
            self.sock.close()
            raise PortError(e.errno, f"cannot open a raw socket on interface {ifname!r}: "
                            f"{e.strerror}") from None
        try:  # results read from a ring shared with the kernel, no system call each
            self.ring: RxRing | None = RxRing(self.sock, ifname)
        except OSError:
            self.ring = None  # recvfrom, frame by frame
        self._outq = array.array("i", [0])
        self.quiet = None
        if quiet_ip is not None:
            self.quiet = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.quiet.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            try:
                self.quiet.bind((quiet_ip, udp_port))
            except OSError as e:
                self.close()
                raise PortError(e.errno, f"cannot bind UDP {quiet_ip}:{udp_port} to keep the "
                                f"kernel from answering results: {e.strerror}") from None

    def _filter(self, udp_port: int) -> bytes:
        prog = agg_filter(udp_port)
        self._bpf = ctypes.create_string_buffer(prog)     # kept alive with the socket
        return struct.pack("HL", len(prog) // 8, ctypes.addressof(self._bpf))

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def send_many(self, frames: list[bytes]) -> None:
        sendmmsg(self.sock, frames)

    def backlog(self) -> int | None:
        # SIOCOUTQ: the socket's frames not yet sent by the interface (their buffers'
        # sizes, so a shaped link's queue shows here until the frames leave it)
        try:
            fcntl.ioctl(self.sock.fileno(), SIOCOUTQ, self._outq)
        except OSError:
            return None
        return self._outq[0]

    def recv(self, timeout: float | None) -> bytes | None:
        if self.ring is not None:
            return self._recv_ring(timeout)
        while True:
            # A frame already waiting costs one system call; select() only when none does.
            try:
                frame, addr = self.sock.recvfrom(MAX_FRAME, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if timeout is not None and timeout <= 0:
                    return None
                ready, _, _ = select.select([self.sock], [], [], timeout)
                if not ready:
                    return None
                timeout = 0.0 if timeout is not None else None
                continue
            if addr[2] != PACKET_OUTGOING:
                return frame
            timeout = 0.0 if timeout is not None else None

    def _recv_ring(self, timeout: float | None) -> bytes | None:
        ring = self.ring
        while True:
            frame = ring.next()
            if frame is not None or (timeout is not None and timeout <= 0):
                return frame
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if not ready:
                return None
            timeout = 0.0 if timeout is not None else None

    def close(self) -> None:
        if not self.closed:
            if self.ring is not None:
                self.ring.close()
            self.sock.close()
            if self.quiet is not None:
                self.quiet.close()
        super().close()


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PortError(errno.EINVAL, f"not HOST:PORT: {text!r}")
    return host, int(port)


class DatagramPort(Port):
    """A connected UDP socket bound to `local`, sending to `peer`: one datagram per send."""

    def __init__(self, local: tuple[str, int], peer: tuple[str, int]):
        super().__init__()
        self.local, self.peer = local, peer
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            self.sock.bind(local)
            self.sock.connect(peer)
        except OSError as e:
            self.sock.close()
            raise PortError(e.errno, f"UDP {local[0]}:{local[1]} -> {peer[0]}:{peer[1]}: "
                            f"{e.strerror}") from None

    def send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except ConnectionRefusedError:
            pass        # the peer is not up (yet): a lost packet, recovered by retransmission

    def send_many(self, frames: list[bytes]) -> None:
        try:
            sendmmsg(self.sock, frames)
        except ConnectionRefusedError:
            pass        # as in send(): the rest of the burst is lost, then retransmitted

    def recv(self, timeout: float | None) -> bytes | None:
        while True:
            # A datagram already waiting costs one system call; select() only when none does.
            try:
                return self.sock.recv(MAX_FRAME, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if timeout is not None and timeout <= 0:
                    return None
                ready, _, _ = select.select([self.sock], [], [], timeout)
                if not ready:
                    return None
                timeout = 0.0 if timeout is not None else None
            except ConnectionRefusedError:
                timeout = 0.0 if timeout is not None else None     # ICMP from an earlier send

    def close(self) -> None:
        if not self.closed:
            self.sock.close()
        super().close()


class UdpTunnelPort(DatagramPort):
    """The worker's end of a softswitch tunnel port: each datagram is one Ethernet frame."""


class QueuePort(Port):
    """In-process: send() hands the frame to `deliver`, recv() reads the inbox."""

    def __init__(self, deliver: Callable[[bytes], None] | None = None):
        super().__init__()
        self.deliver = deliver
        self.inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def send(self, frame: bytes) -> None:
        if self.closed:
            raise PortError(errno.EBADF, "send on a closed port")
        if self.deliver is not None:
            self.deliver(frame)

    def recv(self, timeout: float | None) -> bytes | None:
        try:
            if timeout is not None and timeout <= 0:
                return self.inbox.get_nowait()
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def put(self, frame: bytes) -> None:
        """Delivers a frame to this port's reader."""
        if not self.closed:
            self.inbox.put(frame)

    @staticmethod
    def pair() -> tuple[QueuePort, QueuePort]:
        """Two ports wired back to back."""
        a, b = QueuePort(), QueuePort()
        a.deliver, b.deliver = b.put, a.put
        return a, b


def open_port(spec: str, quiet_ip: str | None = None) -> Port:
    """`raw:IFNAME` or `udp:LOCAL_HOST:PORT>PEER_HOST:PORT` (a softswitch tunnel's far end)."""
    kind, sep, rest = spec.partition(":")
    if kind == "raw" and sep and rest:
        return RawPort(rest, quiet_ip=quiet_ip)
    if kind == "udp" and sep:
        local, gt, peer = rest.partition(">")
        if gt:
            return UdpTunnelPort(parse_hostport(local), parse_hostport(peer))
    raise PortError(errno.EINVAL, f"port spec {spec!r}: expected raw:IFNAME or "
                    "udp:LOCAL_HOST:PORT>PEER_HOST:PORT")
