"""The Scapy layers and the struct fast path are one format, and it is the P4 program's."""

import re
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from worker import frames, wire
from worker.frames import FrameError, Framer

P4 = Path(__file__).resolve().parents[2] / "p4src" / "include"
SRC = ("02:00:0a:00:01:01", "10.0.1.1")
DST = ("02:4e:41:ff:ff:fe", "10.255.255.254")
FIELDS = dict(job_id=0x1234, session=0xBEEF, slot=511, version=1, exp=0x85, count=7,
              chunk=0xDEADBEEF)


def scapy_frame(msg_type, encoding, payload_layer, **fields):
    return (Ether(src=SRC[0], dst=DST[0]) / IP(src=SRC[1], dst=DST[1], flags="DF", id=0, ttl=64)
            / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT)
            / wire.Agg(msg_type=msg_type, encoding=encoding, **fields) / payload_layer)


def test_header_fields_agree_with_p4():
    text = (P4 / "headers.p4").read_text()
    body = re.search(r"header agg_h \{(.*?)\}", text, re.S).group(1)
    p4 = [(name, int(bits)) for bits, name in re.findall(r"bit<(\d+)>\s+(\w+);", body)]
    ours = [(f.name, 8 * f.sz) for f in wire.Agg.fields_desc]
    assert ours == p4
    assert frames.HEADER.size == 16


def test_constants_agree_with_p4():
    # the encodings' numbers are generated into elements.p4 (p4src/gen_elements.py)
    consts = dict(re.findall(r"const bit<\d+>\s+(\w+)\s*=\s*(\w+);",
                             (P4 / "constants.p4").read_text() + (P4 / "elements.p4").read_text()))
    assert int(consts["AGG_UDP_PORT"]) == wire.AGG_PORT
    assert int(consts["MSG_CONTRIB"]) == wire.MSG_CONTRIB
    assert int(consts["MSG_RESULT"]) == wire.MSG_RESULT
    assert int(consts["ENC_FIXED32"]) == wire.ENC_FIXED32
    assert int(consts["ENC_CNAT8"]) == wire.ENC_CNAT8
    assert (int(consts["ENC_NAT4"]), int(consts["ENC_UQ4"]), int(consts["ENC_SUM8"])) == (
        wire.ENC_NAT4, wire.ENC_UQ4, wire.ENC_SUM8)
    drops = dict(re.findall(r"const bit<8> DROP_(\w+) = (\d+);",
                            (P4 / "constants.p4").read_text()))
    assert (int(drops["BAD_CODE"]), int(drops["SUM_OVERFLOW"])) == (21, 22)
    body = re.search(r"header nib_h \{(.*?)\}", (P4 / "headers.p4").read_text(), re.S).group(1)
    assert body.strip() == "NIB_FIELDS" and wire.NIBBLE_ELEMENT.size == 4
    elems = re.search(r"#define ELEMS (\d+)", (P4 / "sizes.p4").read_text()).group(1)
    assert int(elems) == wire.ELEMS


def test_scapy_round_trip_keeps_every_field():
    rng = np.random.default_rng(1)
    values = rng.integers(-(2**31), 2**31, wire.ELEMS).tolist()
    pkt = scapy_frame(wire.MSG_RESULT, wire.ENC_FIXED32, wire.Fixed32(values=values), **FIELDS)
    back = Ether(bytes(pkt))
    agg = back[wire.Agg]
    for name, value in FIELDS.items():
        assert getattr(agg, name) == value, name
    assert agg.msg_type == wire.MSG_RESULT and agg.flags == 0
    assert back[wire.Fixed32].values == values
    assert Raw not in back


@pytest.mark.parametrize("encoding", [wire.ENC_FIXED32, wire.ENC_CNAT8, wire.ENC_FLOAT32,
                                      wire.ENC_NAT4, wire.ENC_UQ4, wire.ENC_SUM8])
def test_fast_path_bytes_equal_scapy(encoding):
    rng = np.random.default_rng(encoding)
    if encoding in wire.FOUR_BIT:      # the fast path takes the packed bytes
        from worker import codec

        nibbles = rng.integers(0, 16, wire.ELEMS).astype(np.uint8)
        payload = codec.pack4(nibbles)
        layer = (wire.Nat4(codes=nibbles.tolist()) if encoding == wire.ENC_NAT4
                 else wire.Uq4(values=nibbles.tolist()))
    elif encoding == wire.ENC_SUM8:
        payload = rng.integers(0, 256, wire.ELEMS).astype(np.uint8)
        layer = wire.Sum8(values=payload.tolist())
    elif encoding == wire.ENC_FIXED32:
        payload = rng.integers(-(2**31), 2**31, wire.ELEMS).astype(np.int32)
        layer = wire.Fixed32(values=payload.tolist())
    elif encoding == wire.ENC_CNAT8:
        payload = rng.integers(0, 256, wire.ELEMS).astype(np.uint8)
        layer = wire.Cnat8(codes=payload.tolist())
    else:
        payload = rng.standard_normal(wire.ELEMS).astype(np.float32)
        layer = wire.Float32(values=payload.tolist())
    ours = Framer(SRC, DST).build(wire.MSG_CONTRIB, encoding, payload=payload, **FIELDS)
    theirs = bytes(scapy_frame(wire.MSG_CONTRIB, encoding, layer, **FIELDS))
    assert ours == theirs
    hdr, values = Framer(SRC, DST).parse(theirs)
    assert hdr._asdict() == {**FIELDS, "msg_type": wire.MSG_CONTRIB, "encoding": encoding,
                             "flags": 0}
    assert np.array_equal(values, payload)


def test_bare_datagram_is_header_and_payload():
    f = Framer()
    payload = np.arange(wire.ELEMS, dtype=np.float32)
    data = f.build(wire.MSG_CONTRIB, wire.ENC_FLOAT32, payload=payload, **FIELDS)
    assert len(data) == 16 + 4 * wire.ELEMS
    assert bytes(wire.Agg(data)[wire.Agg].payload)[:8] == bytes(wire.Float32(values=[0, 1]))
    hdr, back = f.parse(data)
    assert hdr.chunk == FIELDS["chunk"] and np.array_equal(back, payload)


def test_parse_rejects_what_is_not_an_aggregation_frame():
    f = Framer(SRC, DST)
    good = f.build(wire.MSG_RESULT, wire.ENC_CNAT8, payload=np.zeros(wire.ELEMS, np.uint8),
                   **FIELDS)
    assert f.parse(good) is not None
    other_port = good[:36] + (1234).to_bytes(2, "big") + good[38:]
    assert f.parse(other_port) is None
    assert f.parse(good[:-1]) is None                               # truncated
    assert f.parse(good + b"\0" * 4) is not None                    # Ethernet padding
    bad_enc = bytearray(good)
    bad_enc[frames.L2_LEN + 1] = 9
    assert f.parse(bytes(bad_enc)) is None
    # a FIXED32 header on a CNAT8-sized payload: the UDP length does not fit the encoding
    wrong = bytearray(good)
    wrong[frames.L2_LEN + 1] = wire.ENC_FIXED32
    assert f.parse(bytes(wrong) + b"\0" * (3 * wire.ELEMS)) is None
    not_ip = good[:12] + b"\x86\xdd" + good[14:]
    assert f.parse(not_ip) is None


def test_build_rejects_bad_fields_and_payloads():
    f = Framer(SRC, DST)
    zeros = np.zeros(wire.ELEMS, np.int32)
    with pytest.raises(FrameError, match="out of range"):
        f.build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 1, 1, 70000, 0, 0, 1, 0, zeros)
    with pytest.raises(FrameError, match="shape"):
        f.build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 1, 1, 0, 0, 0, 1, 0, zeros[:5])
    with pytest.raises(FrameError, match="unknown encoding"):
        f.build(wire.MSG_CONTRIB, 7, 1, 1, 0, 0, 0, 1, 0, zeros)
    with pytest.raises(FrameError, match="MAC"):
        Framer(("02:00", "10.0.0.1"), DST)


def test_with_udp_checksum_fills_in_what_the_framer_computes():
    """The in-process parameter server's answers carry a checksum the client verifies."""
    from worker.frames import Framer, udp_checksum_ok, with_udp_checksum

    f = Framer(("02:00:00:00:00:01", "10.0.0.1"), ("02:00:00:00:00:02", "10.0.0.2"))
    frame = f.build(wire.MSG_RESULT, wire.ENC_CNAT8, 1, 7, 3, 1, 120, 4, 99,
                    np.arange(wire.ELEMS, dtype=np.uint8))
    blank = frame[:40] + b"\0\0" + frame[42:]
    assert not udp_checksum_ok(blank, len(frame) - 34)
    assert with_udp_checksum(blank) == frame
    assert udp_checksum_ok(frame, len(frame) - 34)


@pytest.mark.parametrize("encoding", [wire.ENC_FIXED32, wire.ENC_CNAT8])
@pytest.mark.parametrize("empty", [False, True])
def test_sparse_fast_path_bytes_equal_scapy(encoding, empty):
    rng = np.random.default_rng(encoding + 2 * empty)
    flags = wire.FLAG_EMPTY if empty else 0
    if empty:
        payload, layer = None, wire.Block(block=7, next=wire.NO_BLOCK)
    elif encoding == wire.ENC_FIXED32:
        payload = rng.integers(-(2**31), 2**31, wire.ELEMS).astype(np.int32)
        layer = wire.Block(block=7, next=wire.NO_BLOCK) / wire.Fixed32(values=payload.tolist())
    else:
        payload = rng.integers(0, 256, wire.ELEMS).astype(np.uint8)
        layer = wire.Block(block=7, next=wire.NO_BLOCK) / wire.Cnat8(codes=payload.tolist())
    fields = {**FIELDS, "flags": flags}
    ours = Framer(SRC, DST).build_sparse(wire.MSG_SPARSE_CONTRIB, encoding, block=7,
                                         nxt=wire.NO_BLOCK, payload=payload, **fields)
    theirs = bytes(scapy_frame(wire.MSG_SPARSE_CONTRIB, encoding, layer, **fields))
    assert ours == theirs
    assert len(ours) - frames.L2_LEN == 24 + (0 if empty else len(bytes(layer)) - 8)
    hdr, values = Framer(SRC, DST).parse_sparse(theirs)
    assert (hdr.block, hdr.next, hdr.flags) == (7, wire.NO_BLOCK, flags)
    assert values is None if empty else np.array_equal(values, payload)
    assert Framer(SRC, DST).parse(theirs) is None        # not a dense frame
    with pytest.raises(FrameError, match="EMPTY"):
        Framer(SRC, DST).build_sparse(wire.MSG_SPARSE_CONTRIB, encoding, block=7, nxt=0,
                                      payload=np.zeros(wire.ELEMS), **{**FIELDS,
                                                                      "flags": wire.FLAG_EMPTY})


def test_a_padded_empty_sparse_frame_parses_as_empty():
    f = Framer(SRC, DST)
    frame = f.build_sparse(wire.MSG_SPARSE_CONTRIB, wire.ENC_FIXED32, block=3, nxt=9,
                           payload=None, pad=True, **FIELDS)
    assert len(frame) == frames.L2_LEN + 24 + wire.ELEMS
    pkt = Ether(frame)
    assert pkt[UDP].len == 8 + 24 + wire.ELEMS and frames.udp_checksum_ok(frame, pkt[UDP].len)
    hdr, values = f.parse_sparse(frame)
    assert values is None and hdr.flags & wire.FLAG_EMPTY and hdr.next == 9
    bare = Framer()
    hdr, values = bare.parse_sparse(bare.build_sparse(
        wire.MSG_SPARSE_CONTRIB, wire.ENC_CNAT8, block=3, nxt=9, payload=None, pad=True,
        **FIELDS))
    assert values is None and hdr.block == 3
