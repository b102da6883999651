"""The workers' fast path: frames built a burst at a time equal the per-frame builder's byte
for byte, their UDP checksums verify, bad input is refused, and a burst sent with one
system call (sendmmsg) arrives whole and in order."""

import socket
import struct
import sys
import threading

import numpy as np
import pytest

from worker import frames, wire
from worker.frames import FrameError, Framer, udp_checksum_ok
from worker.transport import DatagramPort, sendmmsg

SRC = ("02:00:0a:00:01:01", "10.0.1.1")
DST = ("02:4e:41:ff:ff:fe", "10.255.255.254")
DTYPE = {wire.ENC_FIXED32: np.int32, wire.ENC_CNAT8: np.uint8, wire.ENC_FLOAT32: np.float32}


@pytest.fixture(params=["compiled", "numpy"])
def kernels(request, monkeypatch):
    """Each test on frames_kernels' loops and on the numpy passes they replace."""
    if request.param == "compiled":
        if frames._kernels is None:
            pytest.skip("numba is not installed")
    else:
        monkeypatch.setattr(frames, "_kernels", None)
    return request.param


def payloads(rng, enc, n, elems):
    if enc == wire.ENC_CNAT8:
        return rng.integers(0, 256, (n, elems)).astype(np.uint8)
    if enc == wire.ENC_FIXED32:
        return rng.integers(-2**31, 2**31, (n, elems)).astype(np.int32)
    return rng.standard_normal((n, elems)).astype(np.float32)


@pytest.mark.parametrize("elems", [168, 1456, 7])     # 7: a CNAT8 body of odd length
@pytest.mark.parametrize("l2", [True, False], ids=["ethernet", "bare"])
@pytest.mark.parametrize("enc", sorted(DTYPE))
def test_batch_equals_per_frame_builder(elems, l2, enc, kernels):
    rng = np.random.default_rng(elems * 10 + enc)
    f = Framer(SRC, DST, elems=elems) if l2 else Framer(elems=elems)
    n = 70
    pay = payloads(rng, enc, n, elems)
    slots = rng.integers(0, 1 << 16, n)
    versions = rng.integers(0, 2, n)
    exps = rng.integers(0, 256, n)
    chunks = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    many = f.build_many(wire.MSG_CONTRIB, enc, 513, 65535, slots, versions, exps, 3, chunks,
                        pay, flags=5)
    one = [f.build(wire.MSG_CONTRIB, enc, 513, 65535, int(slots[i]), int(versions[i]),
                   int(exps[i]), 3, int(chunks[i]), pay[i], flags=5) for i in range(n)]
    assert many == one
    for frame, row in zip(many, pay, strict=True):
        hdr, got = f.parse(frame)
        assert np.array_equal(got, row.astype(DTYPE[enc]))
        if l2:
            assert udp_checksum_ok(frame, len(frame) - 34)
    assert f.bad_checksums == 0


def test_batch_checksums_catch_corruption(kernels):
    f = Framer(SRC, DST)
    pay = np.arange(4 * wire.ELEMS).reshape(4, wire.ELEMS).astype(np.uint8)
    frames = f.build_many(wire.MSG_RESULT, wire.ENC_CNAT8, 1, 1, np.arange(4), np.zeros(4, int),
                          np.zeros(4, int), 1, np.arange(4), pay)
    bad = bytearray(frames[2])
    bad[100] ^= 0x10
    assert f.parse(bytes(bad)) is None and f.bad_checksums == 1
    assert all(f.parse(x) is not None for x in frames)


def test_a_zero_checksum_is_none_only_where_the_profile_says_so(kernels):
    """The Tofino profile's results carry UDP checksum 0 (none, RFC 768): a framer told so
    takes them, one by one and in a burst; any other framer drops them, and a wrong
    non-zero checksum is dropped by both."""
    pay = np.arange(4 * 16).reshape(4, 16).astype(np.uint8)
    sent = Framer(SRC, DST, elems=16).build_many(
        wire.MSG_RESULT, wire.ENC_CNAT8, 1, 1, np.arange(4), np.zeros(4, int),
        np.zeros(4, int), 1, np.arange(4), pay)
    none = [x[:40] + b"\0\0" + x[42:] for x in sent]
    wrong = bytearray(sent[0])
    wrong[41] ^= 1
    strict, lax = Framer(SRC, DST, elems=16), Framer(SRC, DST, elems=16, zero_checksum=True)
    assert all(strict.parse(x) is None for x in none) and strict.bad_checksums == 4
    assert strict.parse_many(none) is None
    for x, row in zip(none, pay, strict=True):
        assert np.array_equal(lax.parse(x)[1], row)
    assert lax.parse_many(none) is None     # (a burst that carries none: parsed one by one)
    assert lax.parse_many(sent) is not None
    assert lax.parse(bytes(wrong)) is None and lax.bad_checksums == 1


def test_batch_refuses_bad_input(kernels):
    f = Framer(SRC, DST)
    z = np.zeros(2, int)
    good = np.zeros((2, wire.ELEMS), np.uint8)
    with pytest.raises(FrameError, match="shape"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1, z, z, z, 1, z, np.zeros((2, 5), np.uint8))
    with pytest.raises(FrameError, match="one value per frame"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1, np.zeros(3, int), z, z, 1, z, good)
    with pytest.raises(FrameError, match="slot"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1, np.array([0, 1 << 16]), z, z, 1, z, good)
    with pytest.raises(FrameError, match="chunk"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1, z, z, z, 1, np.array([-1, 0]), good)
    with pytest.raises(FrameError, match="session"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1 << 16, z, z, z, 1, z, good)
    with pytest.raises(FrameError, match="chunk"):
        f.build_many(1, wire.ENC_CNAT8, 1, 1, z, z, z, 1, np.array([0, 1 << 70], object), good)
    with pytest.raises(FrameError, match="unknown encoding"):
        f.build_many(1, 9, 1, 1, z, z, z, 1, z, good)
    assert f.build_many(1, wire.ENC_CNAT8, 1, 1, z[:0], z[:0], z[:0], 1, z[:0],
                        good[:0]) == []


@pytest.mark.parametrize("elems", [168, 7])
def test_a_burst_parses_as_its_frames_do_and_any_flaw_sends_it_frame_by_frame(elems):
    """parse_many's compiled checks equal its numpy passes: a burst parses to the frames'
    headers and payloads, and a burst with one frame changed anywhere in its Ethernet, IPv4,
    UDP or AGG headers or its payload is refused by both (parse() then says which frame)."""
    if frames._kernels is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(elems)
    f = Framer(SRC, DST, elems=elems)
    for enc in sorted(DTYPE):
        n = 5
        burst = f.build_many(wire.MSG_RESULT, enc, 3, 4, np.arange(n), np.zeros(n, int),
                             np.full(n, 9), 2, np.arange(n) + 100, payloads(rng, enc, n, elems))
        hdr, rows = f.parse_many(burst)
        for frame, h, row in zip(burst, hdr, rows, strict=True):
            want_h, want_row = f.parse(frame)
            assert tuple(int(v) for v in h) == tuple(want_h)
            assert np.array_equal(row, want_row)
        other = Framer(SRC, DST, elems=elems, dport=wire.AGG_PORT + 1).build_many(
            wire.MSG_RESULT, enc, 3, 4, np.arange(1), np.zeros(1, int), np.full(1, 9), 2,
            np.arange(1), payloads(rng, enc, 1, elems))
        assert f.parse_many(burst[:2] + other + burst[3:]) is None  # another port, checksum ok
        for trial in range(150):
            bad = bytearray(burst[trial % n])
            at = int(rng.integers(0, len(bad)))
            bad[at] ^= 1 << int(rng.integers(0, 8))
            mutated = burst[:trial % n] + [bytes(bad)] + burst[trial % n + 1:]
            got = f.parse_many(mutated)
            kernels, frames._kernels = frames._kernels, None
            try:
                want = f.parse_many(mutated)
            finally:
                frames._kernels = kernels
            assert (got is None) == (want is None), (enc, at)
            if got is not None:  # a flip the checks do not cover: the AGG fields
                assert got[0].tobytes() == want[0].tobytes()
                assert np.array_equal(got[1], want[1])
            else:
                assert at >= 12


def test_a_burst_sent_with_sendmmsg_arrives_whole_and_in_order():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    port = DatagramPort(("127.0.0.1", 0), rx.getsockname())
    try:
        # more frames than one call's arrays hold: sent in parts, still in order
        frames = [bytes([i % 256]) * (100 + i % 300) for i in range(600)]
        port.send_many(frames)
        rx.settimeout(2)
        assert [rx.recv(4096) for _ in frames] == frames
        # the other way: recv(0) neither blocks nor loses what waits
        assert port.recv(0.0) is None
        rx.sendto(b"back", port.sock.getsockname())
        assert port.recv(2.0) == b"back"
        assert port.recv(0.0) is None
    finally:
        port.close()
        rx.close()


def test_sendmmsg_of_one_or_no_frames():
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b.connect(a.getsockname())
    try:
        sendmmsg(b, [])
        sendmmsg(b, [b"x"])
        a.settimeout(2)
        assert a.recv(10) == b"x"
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("l2", [True, False], ids=["ethernet", "bare"])
def test_sparse_frames_parse_as_built_and_bad_ones_are_refused(l2):
    f = Framer(SRC, DST) if l2 else Framer()
    pay = np.arange(wire.ELEMS).astype(np.uint8)
    data = f.build_sparse(wire.MSG_SPARSE_CONTRIB, wire.ENC_CNAT8, 1, 2, 3, 1, 120, 1, 9, 4, 7,
                          pay)
    empty = f.build_sparse(wire.MSG_SPARSE_CONTRIB, wire.ENC_FIXED32, 1, 2, 3, 1, 120, 1, 9, 4,
                           7, None)
    padded = f.build_sparse(wire.MSG_SPARSE_CONTRIB, wire.ENC_FIXED32, 1, 2, 3, 1, 120, 1, 9, 4,
                            7, None, pad=True)
    hdr, got = f.parse_sparse(data)
    assert (hdr.block, hdr.next, hdr.slot) == (4, 7, 3) and np.array_equal(got, pay)
    for frame in (empty, padded):
        hdr, got = f.parse_sparse(frame)
        assert got is None and hdr.flags & wire.FLAG_EMPTY
    assert f.parse(data) is None, "a sparse frame is not a dense one"
    assert f.parse_sparse(data[:-1]) is None, "one byte short"
    trailing = f.parse_sparse(empty + b"\0" * 3)
    # Ethernet may pad a frame (the UDP length counts); a bare message must be exact.
    assert (trailing == f.parse_sparse(empty)) if l2 else trailing is None
    if l2:
        bad = bytearray(data)
        bad[-5] ^= 0x40
        assert f.parse_sparse(bytes(bad)) is None and f.bad_checksums == 1
        wrong_port = bytearray(data)
        wrong_port[37] ^= 1
        assert f.parse_sparse(bytes(wrong_port)) is None and f.bad_checksums == 1


def test_threads_sending_bursts_on_their_own_ports_each_reach_only_their_own_peer():
    """sendmmsg's arrays are not shared between callers: 4 threads, each sending bursts on
    its own port, get every datagram of theirs on their own socket, whole and in order,
    and none of another thread's."""
    threads, bursts, size = 4, 75, 32            # 9,600 datagrams
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                   # threads switch as often as they can
    rxs, ports = [], []
    try:
        for _ in range(threads):
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            rx.bind(("127.0.0.1", 0))
            rx.settimeout(5)
            rxs.append(rx)
            ports.append(DatagramPort(("127.0.0.1", 0), rx.getsockname()))
        go = threading.Barrier(threads)
        wrong = [[] for _ in range(threads)]

        def sender(t: int) -> None:
            go.wait()
            for b in range(bursts):
                burst = [struct.pack("!HHH", t, b, i) * (8 + i % 40) for i in range(size)]
                ports[t].send_many(burst)
                for want in burst:     # read the burst back before the next: nothing drops
                    try:
                        got = rxs[t].recv(4096)
                    except TimeoutError:
                        wrong[t].append(("missing", want[:6].hex()))
                        return
                    if got != want:
                        wrong[t].append((got[:6].hex(), want[:6].hex()))

        workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert not any(w.is_alive() for w in workers)
        assert [len(w) for w in wrong] == [0] * threads, [w[:3] for w in wrong]
    finally:
        sys.setswitchinterval(old)
        for p in ports:
            p.close()
        for rx in rxs:
            rx.close()
