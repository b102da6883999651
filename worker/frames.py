"""The fast path of the wire format: frames from precomputed templates, no Scapy per packet.

A frame is a constant Ethernet/IPv4/UDP prefix per (sender, encoding) -- the IPv4
checksum is precomputed because the total length is constant per encoding -- followed by
the struct-packed AGG header and the payload's numpy bytes. The UDP checksum covers the
payload (docs/PROTOCOL.md "Integrity"): the sum of the constant part (pseudo-header and
UDP header) is precomputed, the rest summed per frame with numpy. parse() drops a frame
whose checksum does not add up and counts it (`bad_checksums`).
The struct format and the dtypes come from worker/wire.py's field declarations, so the
header is declared once; tests/worker/test_wire.py shows the bytes equal Scapy's.

A Framer with no addresses builds and parses bare AGG datagrams (header + payload),
which is what a kernel UDP socket carries (worker/baseline.py).
"""

from __future__ import annotations

import ipaddress
import struct
from collections import namedtuple

import numpy as np

from worker import wire

try:  # compiled loops for the checks and checksums of a burst (numpy stays the reference)
    from worker import frames_kernels as _kernels
except ImportError:  # no numba
    _kernels = None

HEADER = struct.Struct("!" + "".join(f.fmt.lstrip("!") for f in wire.Agg.fields_desc))
# The same header as a numpy record, for building many frames at once (Framer.build_many).
HEADER_DTYPE = np.dtype([(f.name, np.dtype(f.fmt.replace("!", ">"))) for f in
                         wire.Agg.fields_desc])
assert HEADER_DTYPE.itemsize == HEADER.size
# Where each field lies, for the compiled loops (frames_kernels.fill).
_FIELD_AT = np.array([HEADER_DTYPE.fields[f][1] for f in HEADER_DTYPE.names], np.int64)
_FIELD_WIDTH = np.array([HEADER_DTYPE[f].itemsize for f in HEADER_DTYPE.names], np.int64)
_ENC_AT = HEADER_DTYPE.fields["encoding"][1]
AggHeader = namedtuple("AggHeader", [f.name for f in wire.Agg.fields_desc])
# Sparse packets: AGG then BLOCK (docs/PROTOCOL.md "Sparse jobs"), one struct for both.
BLOCK_HEADER = struct.Struct("!" + "".join(f.fmt.lstrip("!") for f in wire.Block.fields_desc))
SPARSE_HEADER = struct.Struct(HEADER.format + BLOCK_HEADER.format.lstrip("!"))
SparseHeader = namedtuple("SparseHeader", AggHeader._fields
                          + tuple(f.name for f in wire.Block.fields_desc))

ETH_LEN, IPV4_LEN, UDP_LEN = 14, 20, 8
L2_LEN = ETH_LEN + IPV4_LEN + UDP_LEN
ETHERTYPE_IPV4 = 0x0800
PROTO_UDP = 17
TTL = 64
IP_DF = 0x4000


def _dtype(field) -> np.dtype:
    return np.dtype(field.fmt.replace("!", ">"))


DTYPES = {
    wire.ENC_FIXED32: _dtype(wire.FIXED32_ELEMENT),
    wire.ENC_CNAT8: _dtype(wire.CNAT8_ELEMENT),
    wire.ENC_FLOAT32: _dtype(wire.FLOAT32_ELEMENT),
    # 4-bit payloads travel as their packed bytes (two elements each; wire.NIBBLE_ELEMENT)
    **{code: np.dtype(np.uint8) for code in wire.FOUR_BIT},
    wire.ENC_SUM8: _dtype(wire.SUM8_ELEMENT),
}


class FrameError(ValueError):
    """A frame that cannot be built (bad field value or payload)."""


def payload_bytes(encoding: int, elems: int) -> int:
    return wire.payload_bytes(encoding, elems)


def items(encoding: int, elems: int) -> int:
    """Payload items of `elems` elements: the elements, or for 4-bit encodings their packed
    bytes."""
    return payload_bytes(encoding, elems) // DTYPES[encoding].itemsize


def _encodings(elems: int):
    """The encodings a Framer of `elems` elements per packet builds (4-bit ones need an even
    count)."""
    return [e for e in DTYPES if e not in wire.FOUR_BIT or elems % 2 == 0]


def udp_length(encoding: int, elems: int) -> int:
    return UDP_LEN + HEADER.size + payload_bytes(encoding, elems)


def sparse_udp_length(encoding: int, elems: int, empty: bool, pad: bool = False) -> int:
    """UDP length of a sparse packet: 32 bytes when EMPTY (32 + ELEMS padded), else 32 + the
    payload."""
    if empty:
        return UDP_LEN + SPARSE_HEADER.size + (elems if pad else 0)
    return UDP_LEN + SPARSE_HEADER.size + payload_bytes(encoding, elems)


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise FrameError(f"not a MAC address: {mac!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise FrameError(f"not a MAC address: {mac!r}") from None


def ipv4_checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ones_sum(data: bytes) -> int:
    """The ones' complement sum (RFC 1071) of `data` as 16-bit words, not complemented.

    2^16 = 1 modulo 0xffff, so the bytes read as one big-endian integer are congruent to
    the sum of their words: one C-level conversion instead of a loop over words. The
    sum of nonzero data is 1..0xffff (0xffff where the remainder is 0)."""
    if len(data) % 2:
        data = data + b"\0"
    x = int.from_bytes(data, "big")
    return x % 0xFFFF or (0xFFFF if x else 0)


def _fold(s: int) -> int:
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def with_udp_checksum(frame: bytes) -> bytes:
    """An Ethernet/IPv4 (IHL 5)/UDP `frame` with its UDP checksum filled in (what the kernel
    does for a socket's datagrams)."""
    udp = ETH_LEN + IPV4_LEN
    body = frame[:udp + 6] + b"\0\0" + frame[udp + 8:]
    pseudo = frame[26:34] + bytes([0, PROTO_UDP]) + frame[38:40]
    csum = ~_fold(ones_sum(pseudo) + ones_sum(body[udp:])) & 0xFFFF
    return body[:udp + 6] + (csum or 0xFFFF).to_bytes(2, "big") + body[udp + 8:]


def udp_checksum_ok(frame: bytes, udp_len: int) -> bool:
    """The UDP checksum of an Ethernet/IPv4 (IHL 5)/UDP `frame` adds up over the pseudo-header,
    the UDP header and the first `udp_len` bytes from it: their ones' complement sum is 0xffff."""
    # The addresses of the pseudo-header lie just before the UDP header: one sum from the
    # source address on, plus the protocol and the UDP length the pseudo-header repeats.
    end = ETH_LEN + IPV4_LEN + udp_len
    s = ones_sum(frame[26:end]) + PROTO_UDP + (frame[38] << 8 | frame[39])
    return _fold(s) == 0xFFFF


def l2_prefix(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, udp_len: int,
              sport: int = wire.AGG_PORT, dport: int = wire.AGG_PORT) -> bytes:
    """Ethernet + IPv4 (IHL 5, DF, TTL 64, checksum filled) + UDP (checksum 0: build() fills
    it in per frame)."""
    eth = mac_bytes(dst_mac) + mac_bytes(src_mac) + struct.pack("!H", ETHERTYPE_IPV4)
    src, dst = ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, IPV4_LEN + udp_len, 0, IP_DF, TTL, PROTO_UDP,
                     0, src, dst)
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    return eth + ip + struct.pack("!HHHH", sport, dport, udp_len, 0)


class Framer:
    """Builds frames from one sender to one destination and parses frames sent back.

    `src`/`dst` are (mac, ip) pairs; both None for bare datagrams (kernel UDP).
    `zero_checksum`: a UDP checksum of 0 is none (RFC 768), as the Tofino profile's switches
    send results (docs/PROTOCOL.md "Tofino profile"); otherwise every frame's must add up.
    """

    def __init__(self, src: tuple[str, str] | None = None, dst: tuple[str, str] | None = None,
                 elems: int = wire.ELEMS, sport: int = wire.AGG_PORT,
                 dport: int = wire.AGG_PORT, zero_checksum: bool = False):
        if (src is None) != (dst is None):
            raise FrameError("give both the source and the destination addresses, or neither")
        if elems < 1:
            raise FrameError(f"elements per packet must be >= 1, got {elems}")
        self.elems = elems
        self.dport = dport
        self.zero_checksum = zero_checksum
        self.prefixes: dict[int, bytes] = {}
        self.lengths: dict[int, int] = {}
        self.items = {enc: items(enc, elems) for enc in _encodings(elems)}
        for enc in _encodings(elems):
            ulen = udp_length(enc, elems)
            self.prefixes[enc] = (b"" if src is None else
                                  l2_prefix(src[0], dst[0], src[1], dst[1], ulen, sport, dport))
            self.lengths[enc] = len(self.prefixes[enc]) + HEADER.size + payload_bytes(enc, elems)
        self.offset = 0 if src is None else L2_LEN   # where the AGG header starts
        # Sum of the pseudo-header and the UDP header (checksum 0) per encoding: constant.
        self.fixed_sums = {enc: ones_sum(p[26:34] + bytes([0, PROTO_UDP]) + p[38:40] + p[34:42])
                           for enc, p in self.prefixes.items() if p}
        # Sparse frames: one prefix per UDP length (EMPTY, or a payload of each encoding).
        self.sparse_prefixes: dict[int, bytes] = {}
        for enc in _encodings(elems):
            for empty, pad in ((False, False), (True, False), (True, True)):
                ulen = sparse_udp_length(enc, elems, empty, pad)
                self.sparse_prefixes[ulen] = (
                    b"" if src is None else
                    l2_prefix(src[0], dst[0], src[1], dst[1], ulen, sport, dport))
        self.sparse_sums = {n: ones_sum(p[26:34] + bytes([0, PROTO_UDP]) + p[38:40] + p[34:42])
                            for n, p in self.sparse_prefixes.items() if p}
        self.bad_checksums = 0     # frames parse() dropped because their checksum is wrong

    def build(self, msg_type: int, encoding: int, job_id: int, session: int, slot: int,
              version: int, exp: int, count: int, chunk: int, payload: np.ndarray | bytes,
              flags: int = 0) -> bytes:
        """One frame; `payload` is ELEMS values in any integer/float dtype, or ready bytes."""
        try:
            prefix = self.prefixes[encoding]
        except KeyError:
            raise FrameError(f"unknown encoding {encoding}") from None
        if isinstance(payload, np.ndarray):
            if payload.shape != (self.items[encoding],):
                raise FrameError(f"payload must have shape ({self.items[encoding]},), got "
                                 f"{payload.shape}")
            payload = payload.astype(DTYPES[encoding], copy=False).tobytes()
        elif len(payload) != payload_bytes(encoding, self.elems):
            raise FrameError(f"payload must be {payload_bytes(encoding, self.elems)} bytes, "
                             f"got {len(payload)}")
        try:
            hdr = HEADER.pack(msg_type, encoding, job_id, session, slot, version, exp, count,
                              flags, chunk)
        except struct.error as e:
            raise FrameError(f"header field out of range: {e}") from None
        if not self.offset:
            return prefix + hdr + payload
        body = hdr + payload
        csum = ~_fold(self.fixed_sums[encoding] + ones_sum(body)) & 0xFFFF
        return prefix[:-2] + (csum or 0xFFFF).to_bytes(2, "big") + body

    def build_sparse(self, msg_type: int, encoding: int, job_id: int, session: int, slot: int,
                     version: int, exp: int, count: int, chunk: int, block: int, nxt: int,
                     payload: np.ndarray | bytes | None, flags: int = 0,
                     pad: bool = False) -> bytes:
        """One sparse frame (AGG + BLOCK + payload); `payload` None makes it EMPTY (the flag
        is set here), with ELEMS zero bytes of padding if `pad` (an EMPTY data packet of a
        job with FIXED32 results brings room for the sum: docs/PROTOCOL.md); an EMPTY flag
        with a payload is refused."""
        if encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8):
            raise FrameError(f"sparse packets carry FIXED32 or CNAT8, not encoding {encoding}")
        if payload is None:
            flags |= wire.FLAG_EMPTY
            body = bytes(self.elems) if pad else b""
        elif flags & wire.FLAG_EMPTY:
            raise FrameError("an EMPTY sparse packet carries no payload")
        elif isinstance(payload, np.ndarray):
            if payload.shape != (self.elems,):
                raise FrameError(f"payload must have shape ({self.elems},), got {payload.shape}")
            body = payload.astype(DTYPES[encoding], copy=False).tobytes()
        else:
            body = bytes(payload)
            if len(body) != payload_bytes(encoding, self.elems):
                raise FrameError(f"payload must be {payload_bytes(encoding, self.elems)} bytes, "
                                 f"got {len(body)}")
        try:
            hdr = SPARSE_HEADER.pack(msg_type, encoding, job_id, session, slot, version, exp,
                                     count, flags, chunk, block, nxt)
        except struct.error as e:
            raise FrameError(f"header field out of range: {e}") from None
        ulen = UDP_LEN + len(hdr) + len(body)
        prefix = self.sparse_prefixes[ulen]
        if not self.offset:
            return prefix + hdr + body
        body = hdr + body
        csum = ~_fold(self.sparse_sums[ulen] + ones_sum(body)) & 0xFFFF
        return prefix[:-2] + (csum or 0xFFFF).to_bytes(2, "big") + body

    def parse_sparse(self, frame: bytes) -> tuple[SparseHeader, np.ndarray | None] | None:
        """(header, payload view or None if EMPTY or a refusal) of a sparse aggregation
        frame; None for anything else (dense frames included), a bad checksum counted as in
        parse(). An EMPTY frame may carry ELEMS bytes of padding, which are ignored."""
        off = self.offset
        if not self._addressed_to_us(frame, SPARSE_HEADER.size):
            return None
        hdr = SparseHeader._make(SPARSE_HEADER.unpack_from(frame, off))
        if hdr.msg_type == wire.MSG_SPARSE_REFUSED:   # the headers alone
            return (hdr, None) if self._whole(frame, off + SPARSE_HEADER.size) else None
        dtype = DTYPES.get(hdr.encoding)
        if hdr.encoding not in (wire.ENC_FIXED32, wire.ENC_CNAT8) \
                or hdr.msg_type not in wire.SPARSE_TYPES:
            return None
        empty = bool(hdr.flags & wire.FLAG_EMPTY)
        need = off + SPARSE_HEADER.size + (0 if empty else dtype.itemsize * self.elems)
        if empty and (len(frame) >= need + self.elems if not off else
                      (frame[38] << 8 | frame[39]) == need + self.elems - ETH_LEN - IPV4_LEN):
            need += self.elems        # padded
        if not self._whole(frame, need):
            return None
        if empty:
            return hdr, None
        return hdr, np.frombuffer(frame, dtype, self.elems, off + SPARSE_HEADER.size)

    def build_many(self, msg_type: int, encoding: int, job_id: int, session: int, slots,
                   versions, exps, count: int, chunks, payloads: np.ndarray,
                   flags: int = 0) -> list[bytes]:
        """Frames for many uses at once, equal byte for byte to build() of each row.

        slots, versions, exps, chunks: one value per frame; payloads: (frames, elems)
        values in any dtype. The frames are written into one array, header fields and UDP
        checksums by frames_kernels.fill (or numpy: a structured view, checksums summed per
        row): the per-frame Python work is one tobytes() of a row."""
        try:
            prefix = self.prefixes[encoding]
        except KeyError:
            raise FrameError(f"unknown encoding {encoding}") from None
        pay = np.asarray(payloads)
        if pay.ndim != 2 or pay.shape[1] != self.items[encoding]:
            raise FrameError(f"payloads must have shape (frames, {self.items[encoding]}), got "
                             f"{pay.shape}")
        n = pay.shape[0]
        cols = {"slot": slots, "version": versions, "exp": exps, "chunk": chunks}
        for name, value in cols.items():
            if np.shape(value) != (n,):
                raise FrameError(f"{name}: need one value per frame ({n}), got shape "
                                 f"{np.shape(value)}")
        if _kernels is not None:
            return self._fill(prefix, encoding, pay, dict(
                msg_type=msg_type, encoding=encoding, job_id=job_id, session=session,
                count=count, flags=flags, **cols))
        for name, value in cols.items():
            a = np.asarray(value)
            top = (1 << (8 * HEADER_DTYPE[name].itemsize)) - 1
            if n and (a.min() < 0 or a.max() > top):
                raise FrameError(f"header field out of range: {name} outside 0..{top}")
        for name, value in (("msg_type", msg_type), ("job_id", job_id), ("session", session),
                            ("count", count), ("flags", flags)):
            top = (1 << (8 * HEADER_DTYPE[name].itemsize)) - 1
            if not 0 <= value <= top:
                raise FrameError(f"header field out of range: {name} outside 0..{top}")
        off, plen = len(prefix), payload_bytes(encoding, self.elems)
        # One spare zero byte where the body has odd length: the checksum pads it so.
        width = self.lengths[encoding] + (self.lengths[encoding] - off) % 2
        buf = np.zeros((n, width), np.uint8)
        if off:
            buf[:, :off] = np.frombuffer(prefix, np.uint8)
        hdr = buf[:, off:off + HEADER.size].view(HEADER_DTYPE).reshape(n)
        hdr["msg_type"], hdr["encoding"], hdr["job_id"] = msg_type, encoding, job_id
        hdr["session"], hdr["count"], hdr["flags"] = session, count, flags
        for name, value in cols.items():
            hdr[name] = value
        body = off + HEADER.size
        buf[:, body:body + plen].view(DTYPES[encoding])[...] = pay
        end = self.lengths[encoding]
        if off:
            words = buf[:, off:].view(">u2")
            s = words.sum(axis=1, dtype=np.uint64) + np.uint64(self.fixed_sums[encoding])
            while (s >> np.uint64(16)).any():
                s = (s & np.uint64(0xFFFF)) + (s >> np.uint64(16))
            csum = (~s & np.uint64(0xFFFF)).astype(np.uint16)
            csum[csum == 0] = 0xFFFF
            buf[:, off - 2:off].view(">u2")[:, 0] = csum
        return [row.tobytes() for row in buf[:, :end]]

    def _fill(self, prefix: bytes, encoding: int, pay: np.ndarray, given: dict) -> list[bytes]:
        """build_many by frames_kernels.fill: every field's value from `given` (one value,
        or one per frame), checked against its width there."""
        n = pay.shape[0]
        if not n:
            return []
        values = np.empty((n, len(HEADER_DTYPE.names)), np.int64)
        for j, name in enumerate(HEADER_DTYPE.names):
            try:
                values[:, j] = given[name]
            except OverflowError:
                top = (1 << (8 * HEADER_DTYPE[name].itemsize)) - 1
                raise FrameError(f"header field out of range: {name} outside 0..{top}") \
                    from None
        body = np.ascontiguousarray(pay, dtype=DTYPES[encoding]).view(np.uint8).reshape(n, -1)
        buf = np.empty((n, self.lengths[encoding]), np.uint8)
        bad = _kernels.fill(buf, np.frombuffer(prefix, np.uint8), len(prefix), values,
                            _FIELD_AT, _FIELD_WIDTH, body, self.fixed_sums.get(encoding, 0))
        if bad >= 0:
            name = HEADER_DTYPE.names[bad]
            top = (1 << (8 * HEADER_DTYPE[name].itemsize)) - 1
            raise FrameError(f"header field out of range: {name} outside 0..{top}")
        return [row.tobytes() for row in buf]

    def checksum_ok(self, frame: bytes, udp_len: int) -> bool:
        if self.zero_checksum and frame[40] == frame[41] == 0:
            return True
        return udp_checksum_ok(frame, udp_len)

    def parse(self, frame: bytes) -> tuple[AggHeader, np.ndarray | None] | None:
        """(header, payload view) of an aggregation frame, (header, None) of a refusal;
        None for anything else."""
        off = self.offset
        if not self._addressed_to_us(frame, HEADER.size):
            return None
        hdr = AggHeader._make(HEADER.unpack_from(frame, off))
        if hdr.msg_type == wire.MSG_REFUSED:      # the header alone (docs/PROTOCOL.md)
            return (hdr, None) if self._whole(frame, off + HEADER.size) else None
        n = self.items.get(hdr.encoding)
        if n is None:
            return None
        dtype = DTYPES[hdr.encoding]
        need = off + HEADER.size + dtype.itemsize * n
        if not self._whole(frame, need):
            return None
        return hdr, np.frombuffer(frame, dtype, n, off + HEADER.size)

    def parse_many(self, frames: list[bytes]):
        """(header records, payload rows) of frames of one length and one encoding that
        parse() would each take; None when any frame is not such (then parse() each: it
        also counts what it drops). The checks are parse()'s, run on every frame at once."""
        n, size = len(frames), len(frames[0])
        off = self.offset
        if size < off + HEADER.size or any(len(f) != size for f in frames):
            return None
        buf = np.frombuffer(b"".join(frames), np.uint8).reshape(n, size)
        if off and self.zero_checksum and not (buf[:, 40:42] != 0).any(axis=1).all():
            return None     # (some carry none: parse() each)
        if off and _kernels is not None:
            enc = int(buf[0, off + _ENC_AT])
            if enc not in self.items:
                return None
            dtype = DTYPES[enc]
            need = off + HEADER.size + dtype.itemsize * self.items[enc]
            if size != need or not _kernels.check(buf, off + _ENC_AT, enc, self.dport,
                                                  need - ETH_LEN - IPV4_LEN):
                return None
            hdr = np.ascontiguousarray(buf[:, off:off + HEADER.size]).view(HEADER_DTYPE)
            return hdr.reshape(n), buf[:, off + HEADER.size:need].view(dtype)
        if off:
            b = buf.astype(np.uint16)
            if not ((b[:, 12] == 0x08) & (b[:, 13] == 0) & (b[:, 14] == 0x45)
                    & (b[:, 23] == PROTO_UDP) & ((b[:, 36] << 8 | b[:, 37]) == self.dport)).all():
                return None
        hdr = np.ascontiguousarray(buf[:, off:off + HEADER.size]).view(HEADER_DTYPE).reshape(n)
        enc = hdr["encoding"]
        if int(enc[0]) not in self.items or (enc != enc[0]).any():
            return None
        dtype = DTYPES[int(enc[0])]
        need = off + HEADER.size + dtype.itemsize * self.items[int(enc[0])]
        if size != need:  # (an Ethernet-padded frame: parse() one by one)
            return None
        if off:
            udp_len = need - ETH_LEN - IPV4_LEN
            if ((b[:, 38] << 8 | b[:, 39]) != udp_len).any():
                return None
            words = buf[:, 26:need]
            if words.shape[1] % 2:
                words = np.concatenate([words, np.zeros((n, 1), np.uint8)], axis=1)
            total = words.view(">u2").sum(axis=1, dtype=np.uint64) + (PROTO_UDP + udp_len)
            if (total % np.uint64(0xFFFF)).any():  # a sum of 0xffff: udp_checksum_ok()
                return None
        return hdr, buf[:, off + HEADER.size:need].view(dtype)

    def _addressed_to_us(self, frame: bytes, header_size: int) -> bool:
        """Long enough for the AGG header and, on raw ports, IPv4/UDP to our port."""
        off = self.offset
        if not off:
            return len(frame) >= header_size
        return not (len(frame) < off + header_size or frame[12] != 0x08 or frame[13] != 0x00
                    or frame[14] != 0x45 or frame[23] != PROTO_UDP
                    or (frame[36] << 8 | frame[37]) != self.dport)

    def _whole(self, frame: bytes, need: int) -> bool:
        """The frame holds exactly `need` bytes of message (a bad checksum is counted)."""
        if not self.offset:
            return len(frame) == need
        # Ethernet may pad a frame: the UDP length is what counts.
        if len(frame) < need or (frame[38] << 8 | frame[39]) != need - ETH_LEN - IPV4_LEN:
            return False
        if not self.checksum_ok(frame, need - ETH_LEN - IPV4_LEN):
            self.bad_checksums += 1
            return False
        return True
