"""Aggregation packets for the data-plane tests, built and dissected with worker/wire.py's
Scapy layers (the one Python definition of the header), and the program's counter indices."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.topology import Topology, TopologyError
from worker import wire

ELEMS = wire.ELEMS

# agg events and drop reasons (docs/PROTOCOL.md "Counters"; p4src/include/constants.p4)
CONTRIB, DUPLICATE, COMPLETE, RESULT, ANSWERED, PARTIAL_UP, RESULT_DOWN, FORWARDED = range(8)
UNKNOWN_JOB, FOREIGN_PORT, BAD_SLOT, BAD_LENGTH, BAD_ENCODING, BAD_VERSION = range(1, 7)
NO_ROUTE, TTL_EXPIRED, IMPAIRMENT, NOT_IPV4, BAD_RESULT_PORT, BAD_TYPE = range(7, 13)
BAD_CHECKSUM, STALE, BAD_UDP_CHECKSUM, BAD_EXP = range(13, 17)
# 17 BAD_BLOCK and 18 TOO_WIDE are below, with the sparse jobs and the wide profile
WRONG_SESSION = 19      # not the session the control plane installed for the job
EARLY = 20              # a use of the slot no correct sender can have sent yet
BAD_CODE = 21           # a NAT4 payload holding the nibble 0x8
SUM_OVERFLOW = 22       # a sum its result cannot carry: SUM8 outside 0..255, CNAT8 > 2^30
OUT_OF_RANGE = 23       # an element above the bound of its port (refused to the sender)


def slots_of(topo: Topology, job: int) -> int:
    """The job's slot count on the switches (its region: the stride of the chunk numbers);
    1 for a job the topology does not hold (its packets are dropped before their number
    matters)."""
    try:
        return topo.job(job).slots
    except TopologyError:
        return 1


def numbering(topo: Topology, job: int, slot: int, use: int, version: int | None,
              chunk: int | None) -> tuple[int, int]:
    """(version, chunk) of use `use` of `slot` (docs/PROTOCOL.md "Uses": version use % 2,
    chunk wire.use_chunk), each unless given explicitly (a test forging a bad number)."""
    if version is None:
        version = use % 2
    if chunk is None:
        chunk = int(wire.use_chunk(use, slot, slots_of(topo, job)))
    return version, chunk


def contrib(topo: Topology, host: str, job: int, session: int, slot: int, values,
            **fields) -> bytes:
    """A contribution as `host` sends it: int32 values go as FIXED32, uint8 codes as CNAT8.
    `use` (default 0) numbers the slot's use in the session: it sets the chunk number and
    the version; `chunk=` or `version=` override them (forged numbers)."""
    return bytes(contrib_pkt(topo, host, job, session, slot, values, **fields))


def contrib_pkt(topo: Topology, host: str, job: int, session: int, slot: int, values,
                use: int = 0, version: int | None = None, exp: int = 127, count: int = 1,
                chunk: int | None = None, msg_type: int = wire.MSG_CONTRIB,
                encoding: int | None = None) -> Ether:
    """contrib() as a Scapy packet, to alter before sending."""
    h = topo.host(host)
    version, chunk = numbering(topo, job, slot, use, version, chunk)
    values = np.asarray(values)
    if encoding in wire.FOUR_BIT:       # ELEMS nibbles (0..15), one per element
        layer = wire.Nat4(codes=values.tolist()) if encoding == wire.ENC_NAT4 \
            else wire.Uq4(values=values.tolist())
        payload, enc = layer, encoding
    elif values.dtype == np.uint8:
        payload = wire.Cnat8(codes=values.tolist())
        enc = wire.ENC_CNAT8
    else:
        assert values.dtype == np.int32, values.dtype
        payload = wire.Fixed32(values=values.tolist())
        enc = wire.ENC_FIXED32
    pkt = (Ether(src=h.mac, dst=topo.service_mac)
           / IP(src=h.ip, dst=topo.service_ip)
           / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
           / wire.Agg(msg_type=msg_type, encoding=enc if encoding is None else encoding,
                      job_id=job, session=session, slot=slot, version=version, exp=exp,
                      count=count, chunk=chunk)
           / payload)
    return pkt


@dataclass
class Result:
    """A dissected RESULT (or partial-sum CONTRIB) and its payload as numpy."""

    pkt: Ether
    agg: wire.Agg
    payload: np.ndarray      # int32 sums (FIXED32) or uint8 codes (CNAT8)

    @property
    def key(self) -> tuple[int, int, int]:
        return self.agg.job_id, self.agg.slot, self.agg.version


def dissect(frame: bytes) -> Result:
    pkt = Ether(frame)
    assert wire.Agg in pkt, f"not an aggregation packet: {pkt.summary()}"
    agg = pkt[wire.Agg]
    if agg.encoding == wire.ENC_FIXED32:
        payload = np.array(pkt[wire.Fixed32].values, dtype=np.int64).astype(np.int32)
    elif agg.encoding == wire.ENC_SUM8:
        payload = np.array(pkt[wire.Sum8].values, dtype=np.uint8)
    else:
        assert agg.encoding == wire.ENC_CNAT8, agg.encoding
        payload = np.array(pkt[wire.Cnat8].codes, dtype=np.uint8)
    assert payload.size == ELEMS, f"{payload.size} elements, expected {ELEMS}"
    return Result(pkt, agg, payload)


def received(fabric, host: str) -> Result:
    """The next aggregation packet that reached `host`; its absence fails the test."""
    frame = fabric.recv(host)
    assert frame is not None, f"{fabric.name}: nothing reached {host}"
    return dissect(frame)


def refusal(fabric, host: str) -> wire.Agg:
    """The next packet that reached `host`, which must be a refusal: addressed to the host
    from the service address, its checksums good, the headers alone (docs/PROTOCOL.md
    "Refusals"); its AGG layer."""
    frame = fabric.recv(host)
    assert frame is not None, f"{fabric.name}: nothing reached {host}"
    pkt = Ether(frame)
    agg = pkt[wire.Agg]
    assert agg.msg_type in wire.REFUSED_TYPES, pkt.summary()
    topo = fabric.topo
    assert (pkt.dst, pkt[IP].dst) == (topo.host(host).mac, topo.host(host).ip)
    assert (pkt.src, pkt[IP].src) == (topo.service_mac, topo.service_ip)
    sparse = agg.msg_type == wire.MSG_SPARSE_REFUSED
    assert pkt[UDP].len == 8 + 16 + (8 if sparse else 0), "a refusal carries no payload"
    assert udp_checksum_ok(pkt), "the refusal's UDP checksum does not add up"
    return agg


def collect(fabric, hosts, per_host: int) -> dict[str, dict[tuple, Result]]:
    """per_host packets from each host, keyed by host, then (job, slot, version)."""
    out: dict[str, dict[tuple, Result]] = {}
    for h in hosts:
        mine = out.setdefault(h, {})
        for _ in range(per_host):
            res = received(fabric, h)
            assert res.key not in mine, f"{h}: {res.key} twice"
            mine[res.key] = res
    return out


def check_result_addressing(topo: Topology, host: str, res: Result) -> None:
    """A result leaving towards a host is addressed to it from the service address, UDP
    20033 both ways, lengths matching the encoding, IPv4 and UDP checksums valid."""
    h = topo.host(host)
    pkt = res.pkt
    assert (pkt.dst, pkt[IP].dst) == (h.mac, h.ip)
    assert (pkt.src, pkt[IP].src) == (topo.service_mac, topo.service_ip)
    udp = pkt[UDP]
    assert udp.sport == udp.dport == wire.AGG_PORT
    assert udp_checksum_ok(pkt), "the UDP checksum does not cover the payload"
    size = ELEMS * (4 if res.agg.encoding == wire.ENC_FIXED32 else 1)
    assert udp.len == 8 + 16 + size and pkt[IP].len == 20 + udp.len
    fresh = pkt[IP].copy()
    fresh.chksum = None
    assert IP(bytes(fresh)).chksum == pkt[IP].chksum, "IPv4 header checksum is wrong"


def udp_checksum_ok(pkt: Ether) -> bool:
    """The UDP checksum adds up over the pseudo-header, headers and payload (docs/PROTOCOL.md
    "Integrity"; a sum of 0 may travel as 0 or 0xffff)."""
    fresh = pkt[IP].copy()
    fresh[UDP].chksum = None
    want = IP(bytes(fresh))[UDP].chksum
    return pkt[UDP].chksum == want or {pkt[UDP].chksum, want} == {0, 0xFFFF}


def with_bad_checksum(pkt: Ether) -> bytes:
    """The frame of `pkt` with one payload bit flipped and its UDP checksum left as it was."""
    frame = bytearray(bytes(pkt))
    frame[-1] ^= 0x01
    return bytes(frame)


def random_fixed(rng: np.random.Generator, bound: int) -> np.ndarray:
    """ELEMS int32 values in [-bound, bound]."""
    return rng.integers(-bound, bound + 1, ELEMS, dtype=np.int64).astype(np.int32)


def random_cnat(rng: np.random.Generator, max_code: int) -> np.ndarray:
    """ELEMS CNAT8 codes 0..max_code with random signs."""
    m = rng.integers(0, max_code + 1, ELEMS).astype(np.uint8)
    return m | (rng.integers(0, 2, ELEMS).astype(np.uint8) << 7)


def check_rounding(exact, codes) -> np.ndarray:
    """Asserts each CNAT8 code is the exact int sum rounded to one of the two powers of two
    around it (the power itself when it is one; zero for zero; the sign kept); returns
    whether each element was rounded up."""
    exact = np.asarray(exact).astype(np.int64)
    codes = np.asarray(codes, dtype=np.uint8)
    mag = np.abs(exact)
    m = (codes & 0x7F).astype(np.int64)
    assert np.array_equal(m == 0, mag == 0), "zero codes where the sum is not zero, or back"
    nz = mag > 0
    assert np.array_equal((codes[nz] >> 7) == 1, exact[nz] < 0), "a sign differs"
    p = np.zeros_like(mag)
    p[nz] = np.frexp(mag[nz].astype(np.float64))[1] - 1         # leading one, exact < 2^53
    up = m - 1 - p
    assert np.all(up[nz] >= 0) and np.all(up[nz] <= 1), "a code is not a bracketing power"
    power = nz & (mag == (1 << p))
    assert np.all(up[power] == 0), "an exact power of two was rounded up"
    return (up == 1) & nz


# ---- sparse (block) jobs: docs/PROTOCOL.md "Sparse jobs" ----
BAD_BLOCK = 17
# ---- the wide profile (p4src/build/wide/): what it would have to grow ----
TOO_WIDE = 18


def sparse(topo: Topology, host: str, job: int, session: int, slot: int, block: int,
           nxt: int, values=None, *, prime: bool = False, pad: bool = False,
           encoding: int | None = None, **fields) -> bytes:
    """A SPARSE_CONTRIB as `host` sends it: with values (int32: FIXED32, uint8: CNAT8) it
    carries the block; without, it is EMPTY (flags PRIME too when `prime`), with ELEMS bytes
    of padding when `pad` (what an EMPTY data packet of a FIXED32-result job carries).
    `use` (default 0) sets the chunk number and the version as in contrib()."""
    return bytes(sparse_pkt(topo, host, job, session, slot, block, nxt, values, prime=prime,
                            pad=pad, encoding=encoding, **fields))


def sparse_pkt(topo: Topology, host: str, job: int, session: int, slot: int, block: int,
               nxt: int, values=None, *, prime: bool = False, pad: bool = False,
               encoding: int | None = None, use: int = 0, version: int | None = None,
               exp: int = 127, chunk: int | None = None, flags: int | None = None,
               msg_type: int = wire.MSG_SPARSE_CONTRIB) -> Ether:
    h = topo.host(host)
    version, chunk = numbering(topo, job, slot, use, version, chunk)
    if values is None:
        enc = wire.ENC_FIXED32
        payload = wire.Cnat8(codes=[0] * ELEMS) if pad else None
        f = wire.FLAG_EMPTY | (wire.FLAG_PRIME if prime else 0)
    else:
        values = np.asarray(values)
        if values.dtype == np.uint8:
            payload, enc = wire.Cnat8(codes=values.tolist()), wire.ENC_CNAT8
        else:
            assert values.dtype == np.int32, values.dtype
            payload, enc = wire.Fixed32(values=values.tolist()), wire.ENC_FIXED32
        f = wire.FLAG_PRIME if prime else 0
    pkt = (Ether(src=h.mac, dst=topo.service_mac)
           / IP(src=h.ip, dst=topo.service_ip)
           / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
           / wire.Agg(msg_type=msg_type, encoding=enc if encoding is None else encoding,
                      job_id=job, session=session, slot=slot, version=version, exp=exp,
                      count=1, flags=f if flags is None else flags, chunk=chunk)
           / wire.Block(block=block, next=nxt))
    return pkt if payload is None else pkt / payload


@dataclass
class SparseResult:
    """A dissected SPARSE_RESULT: its headers, and its payload as numpy (None when EMPTY)."""

    pkt: Ether
    agg: wire.Agg
    block: wire.Block
    payload: np.ndarray | None

    @property
    def key(self) -> tuple[int, int, int]:
        return self.agg.job_id, self.agg.slot, self.agg.version


def dissect_sparse(frame: bytes) -> SparseResult:
    pkt = Ether(frame)
    assert wire.Block in pkt, f"not a sparse packet: {pkt.summary()}"
    agg, blk = pkt[wire.Agg], pkt[wire.Block]
    assert agg.msg_type == wire.MSG_SPARSE_RESULT, agg.msg_type
    assert udp_checksum_ok(pkt), "the UDP checksum does not add up"
    udp = pkt[UDP]
    if agg.flags & wire.FLAG_EMPTY:
        assert udp.len == 8 + 16 + 8 and not blk.payload, "an EMPTY result with a payload"
        return SparseResult(pkt, agg, blk, None)
    if agg.encoding == wire.ENC_FIXED32:
        payload = np.array(pkt[wire.Fixed32].values, dtype=np.int64).astype(np.int32)
    else:
        assert agg.encoding == wire.ENC_CNAT8, agg.encoding
        payload = np.array(pkt[wire.Cnat8].codes, dtype=np.uint8)
    assert payload.size == ELEMS, f"{payload.size} elements, expected {ELEMS}"
    size = ELEMS * (4 if agg.encoding == wire.ENC_FIXED32 else 1)
    assert udp.len == 8 + 16 + 8 + size and pkt[IP].len == 20 + udp.len
    return SparseResult(pkt, agg, blk, payload)


def check_sparse_addressing(topo: Topology, host: str, res: SparseResult) -> None:
    """A sparse result is addressed to the host, from the service address, UDP 20033 both
    ways (dissect_sparse checked its lengths and UDP checksum); the IPv4 checksum is valid."""
    h = topo.host(host)
    pkt = res.pkt
    assert (pkt.dst, pkt[IP].dst) == (h.mac, h.ip)
    assert (pkt.src, pkt[IP].src) == (topo.service_mac, topo.service_ip)
    assert pkt[UDP].sport == pkt[UDP].dport == wire.AGG_PORT
    fresh = pkt[IP].copy()
    fresh.chksum = None
    assert IP(bytes(fresh)).chksum == pkt[IP].chksum, "IPv4 header checksum is wrong"


def received_sparse(fabric, host: str) -> SparseResult:
    frame = fabric.recv(host)
    assert frame is not None, f"{fabric.name}: nothing reached {host}"
    return dissect_sparse(frame)
