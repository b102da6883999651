"""PACKET_MMAP receive rings (TPACKET_V2) for raw ports: frames without a system call each.

The kernel writes each frame into the next slot of a ring shared with this process and
marks it ready (TP_STATUS_USER); the reader takes it and hands the slot back (status 0).
epoll reports the socket readable while a slot is ready, as for recvmsg. A slot's header
carries what recvmsg's ancillary data and address did: the VLAN tag the kernel moved out
of the frame, and the packet type (our own sent frames are skipped).
"""

from __future__ import annotations

import ctypes
import mmap
import struct

import numpy as np

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V2 = 1
TP_STATUS_USER = 1
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
PACKET_OUTGOING = 4
HDR = struct.Struct("=IIIHHIIHH")  # struct tpacket2_hdr (its 4 padding bytes not read)
HDR_LEN = 32  # TPACKET_ALIGN(sizeof(struct tpacket2_hdr))
PKTTYPE = HDR_LEN + 10  # sll_pkttype in the struct sockaddr_ll after the header
RING_BYTES = 2 << 20  # as libpcap's default buffer
PAGE = mmap.PAGESIZE
# The ring's record, int64 cells shared with native code (softswitch/native/rx.py):
# port number, ring address, slot size, slots, next slot, frames received by native code,
# own frames skipped, frames too long for a slot.
NUMBER, RING, SLOT, SLOTS, CUR, RX, SKIPPED, TRUNCATED = range(8)
REC = 8


def slot_size(ifname: str) -> int:
    """Bytes per slot: the header, the address, a frame of the interface's MTU and a tag."""
    try:
        mtu = int(open(f"/sys/class/net/{ifname}/mtu").read())
    except (OSError, ValueError):
        mtu = 1500
    need = HDR_LEN + 32 + 14 + 4 + mtu
    size = 1 << max(need - 1, 1).bit_length()  # a power of two: whole slots per page
    return max(size, 2048)


class RxRing:
    """The receive ring of one packet socket."""

    def __init__(self, sock, ifname: str, number: int = 0):
        self.frame_size = slot_size(ifname)
        block = max(self.frame_size, PAGE * 8)
        self.frame_nr = max(RING_BYTES // self.frame_size, 64)
        per_block = block // self.frame_size
        block_nr = (self.frame_nr + per_block - 1) // per_block
        self.frame_nr = block_nr * per_block
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        req = struct.pack("IIII", block, block_nr, self.frame_size, self.frame_nr)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        self.map = mmap.mmap(sock.fileno(), block * block_nr, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.map)
        self._anchor = ctypes.c_char.from_buffer(self.map)  # pins the map: its address
        self.rec = np.zeros(REC, dtype=np.int64)
        self.rec[[NUMBER, RING, SLOT, SLOTS]] = (number, ctypes.addressof(self._anchor),
                                                 self.frame_size, self.frame_nr)
        self.rec_ptr = self.rec.ctypes.data

    @property
    def skipped(self) -> int:
        """Frames this host sent (the kernel shows them to the socket)."""
        return int(self.rec[SKIPPED])

    @property
    def truncated(self) -> int:
        """Frames longer than a slot (an MTU raised after the port opened)."""
        return int(self.rec[TRUNCATED])

    def next(self) -> bytes | None:
        """The next frame, its VLAN tag put back, or None when no slot is ready."""
        m, rec = self.map, self.rec
        while True:
            cur = int(rec[CUR])
            off = cur * self.frame_size
            status, length, snap, mac, _, _, _, tci, tpid = HDR.unpack_from(m, off)
            if not status & TP_STATUS_USER:
                return None
            frame = None
            if m[off + PKTTYPE] == PACKET_OUTGOING:
                rec[SKIPPED] += 1
            elif snap < length:
                rec[TRUNCATED] += 1
            else:
                frame = bytes(self.view[off + mac:off + mac + snap])
                if status & TP_STATUS_VLAN_VALID or tci:
                    if not status & TP_STATUS_VLAN_TPID_VALID:
                        tpid = ETH_P_8021Q
                    if len(frame) >= 12:
                        frame = frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
            struct.pack_into("=I", m, off, 0)  # the slot back to the kernel
            rec[CUR] = cur + 1 if cur + 1 < self.frame_nr else 0
            if frame is not None:
                return frame

    def close(self) -> None:
        del self._anchor
        self.view.release()
        self.map.close()
