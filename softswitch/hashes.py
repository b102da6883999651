"""BMv2's hash algorithms (src/bm_sim/calculations.cpp), on bytes, returning ints.

Names are the `algo` strings of the JSON `calculations`. Each function takes
the calculation's input bytes and returns the unsigned result BMv2 gives.
"""

from __future__ import annotations

import binascii
import itertools
import struct
import zlib

import numpy as np


def _reflect(v: int, nbits: int) -> int:
    r = 0
    for _ in range(nbits):
        r = (r << 1) | (v & 1)
        v >>= 1
    return r


class Crc:
    """Table-driven CRC with BMv2's crc_custom parameters."""

    def __init__(self, width: int, poly: int, init: int, xor_out: int, refin: bool, refout: bool):
        self.width = width
        self.mask = (1 << width) - 1
        self.init = init
        self.xor_out = xor_out
        self.refin = refin
        self.refout = refout
        top = 1 << (width - 1)
        table = []
        for d in range(256):
            r = d << (width - 8) if width >= 8 else d
            for _ in range(8):
                r = ((r << 1) ^ poly) if r & top else (r << 1)
            table.append(r & self.mask)
        self.table = table
        self.rev8 = [_reflect(b, 8) for b in range(256)]

    def __call__(self, data: bytes) -> int:
        r = self.init
        shift = self.width - 8
        t = self.table
        m = self.mask
        if self.refin:
            rev = self.rev8
            for b in data:
                r = t[(rev[b] ^ (r >> shift)) & 0xFF] ^ ((r << 8) & m)
        else:
            for b in data:
                r = t[(b ^ (r >> shift)) & 0xFF] ^ ((r << 8) & m)
        if self.refout:
            r = _reflect(r, self.width)
        return r ^ self.xor_out


_crc16 = Crc(16, 0x8005, 0x0000, 0x0000, True, True)
_crc8 = Crc(8, 0x07, 0x00, 0x00, False, False)
_crc64 = Crc(64, 0x1B, 0, 0, True, True)


def crc16(data: bytes) -> int:
    return _crc16(data)


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def crc_ccitt(data: bytes) -> int:
    return binascii.crc_hqx(data, 0xFFFF)


_NUMPY_SUM = 256  # bytes from which csum16 sums the words with numpy
_ADD = np.add.reduce  # ndarray.sum less its Python wrapper


def csum16(data: bytes) -> int:
    """Ones' complement of the ones' complement sum of 16-bit words (RFC 1071)."""
    if len(data) % 2:
        data = data + b"\x00"
    # The words' sum modulo 0xffff (2**16 = 1 mod 0xffff): the folded ones' complement sum,
    # which is 0xffff rather than 0 unless every word is 0. The buffer read as one integer
    # has the same remainder. A payload is summed with numpy as native 32-bit words: each is
    # two byte-swapped 16-bit words (2**16 = 1 again), and swapping bytes multiplies by 256
    # mod 0xffff, undone by swapping the remainder's bytes (RFC 1071's byte-order
    # independence). Big-endian words numpy must convert first: 3% of a wide packet's CPU.
    if len(data) >= _NUMPY_SUM:
        q = len(data) & ~3
        r = int(_ADD(np.frombuffer(data, "<u4", q >> 2), dtype=np.uint64))
        nonzero = r != 0
        r %= 0xFFFF
        n = ((r & 0xFF) << 8 | r >> 8) + int.from_bytes(data[q:], "big")
        nonzero = nonzero or n != 0
    else:
        n = int.from_bytes(data, "big")
        nonzero = n != 0
    s = n % 0xFFFF
    if s == 0 and nonzero:
        s = 0xFFFF
    return (~s) & 0xFFFF


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def _xor(n: int):
    def h(data: bytes) -> int:
        v = 0
        for i in range(0, len(data), n):
            chunk = data[i : i + n]
            v ^= int.from_bytes(chunk.ljust(n, b"\x00"), "big")
        return v

    return h


_P1, _P2, _P3, _P4, _P5 = (
    11400714785074694791,
    14029467366897019727,
    1609587929392839161,
    9650029242287828579,
    2870177450012600261,
)
_M64 = (1 << 64) - 1


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, v: int) -> int:
    acc = (acc + v * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = 0) -> int:
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed
        v4 = (seed - _P1) & _M64
        while p + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, p)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while p + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, p)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        p += 8
    if p + 4 <= n:
        (k,) = struct.unpack_from("<I", data, p)
        h ^= (k * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


class RoundRobin:
    """BMv2's round_robin: a counter per calculation instance."""

    def __init__(self):
        self.it = itertools.count()

    def __call__(self, data: bytes) -> int:
        return next(self.it)


class RoundRobinConsistent:
    def __init__(self):
        self.seen: dict[bytes, int] = {}

    def __call__(self, data: bytes) -> int:
        return self.seen.setdefault(bytes(data), len(self.seen))


class Toeplitz:
    """BMv2's toeplitz with its default all-zero 4-byte key (always 0 until keyed)."""

    def __init__(self, key: bytes = b"\x00" * 4):
        self.key = [int.from_bytes(key[i : i + 4], "big") for i in range(0, len(key), 4)]

    def __call__(self, data: bytes) -> int:
        words = [int.from_bytes(data[i : i + 4].ljust(4, b"\x00"), "big")
                 for i in range(0, len(data), 4)]
        out = 0
        k = self.key
        n = len(k)
        for i, w in enumerate(words):
            kl, kr = k[i % n], k[(i + 1) % n]
            for bit in range(32):
                if w & (1 << bit):
                    ib = 31 - bit
                    out ^= ((kl << ib) & 0xFFFFFFFF) | ((kr >> (32 - ib)) if ib else 0)
        return out


STATELESS = {
    "crc16": crc16,
    "crc16_custom": crc16,
    "crc32": crc32,
    "crc32_custom": crc32,
    "crcCCITT": crc_ccitt,
    "crc8_custom": _crc8,
    "crc64_custom": _crc64,
    "csum16": csum16,
    "cksum16": csum16,
    "identity": identity,
    "xor16": _xor(2),
    "xor32": _xor(4),
    "xxh64": xxh64,
}
STATEFUL = {
    "round_robin": RoundRobin,
    "round_robin_consistent": RoundRobinConsistent,
    "toeplitz": Toeplitz,
}


def algorithm(name: str):
    """A fresh callable for algorithm `name`, or None when BMv2 does not know it."""
    if name in STATELESS:
        return STATELESS[name]
    if name in STATEFUL:
        return STATEFUL[name]()
    return None
