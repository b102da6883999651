"""A PACKET_MMAP receive ring (TPACKET_V2) for a worker's raw socket.

The kernel writes each frame the socket's filter lets through into the next slot of a
ring shared with this process and marks it ready; reading a result then costs no system
call, and an empty ring no raised BlockingIOError, only a poll when the worker waits.
(softswitch/ring.py is the switch's own, with VLAN tags and a record native code reads;
the rooms of DESIGN.md keep the two apart.)
"""

from __future__ import annotations

import mmap
import struct

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V2 = 1
TP_STATUS_USER = 1
PACKET_OUTGOING = 4
HDR = struct.Struct("=IIIH")  # tp_status, tp_len, tp_snaplen, tp_mac of tpacket2_hdr
PKTTYPE = 32 + 10  # sll_pkttype of the struct sockaddr_ll after the 32-byte header
RING_BYTES = 4 << 20


class RxRing:
    def __init__(self, sock, ifname: str):
        try:
            mtu = int(open(f"/sys/class/net/{ifname}/mtu").read())
        except (OSError, ValueError):
            mtu = 1500
        need = 32 + 32 + 18 + mtu  # header, address, Ethernet and a tag, the MTU
        self.size = max(2048, 1 << (need - 1).bit_length())
        block = max(self.size, mmap.PAGESIZE * 8)
        per = block // self.size
        blocks = max(RING_BYTES // block, 1)
        self.n = blocks * per
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING,
                        struct.pack("IIII", block, blocks, self.size, self.n))
        self.map = mmap.mmap(sock.fileno(), block * blocks, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.map)
        self.cur = 0
        self.truncated = 0  # frames longer than a slot (an MTU raised after the open)

    def next(self) -> bytes | None:
        """The next frame, or None when no slot is ready."""
        m = self.map
        while True:
            off = self.cur * self.size
            status, length, snap, mac = HDR.unpack_from(m, off)
            if not status & TP_STATUS_USER:
                return None
            frame = None
            if snap < length:
                self.truncated += 1
            elif m[off + PKTTYPE] != PACKET_OUTGOING:
                frame = bytes(self.view[off + mac:off + mac + snap])
            struct.pack_into("=I", m, off, 0)
            self.cur = self.cur + 1 if self.cur + 1 < self.n else 0
            if frame is not None:
                return frame

    def close(self) -> None:
        self.view.release()
        self.map.close()
