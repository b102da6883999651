"""Hash algorithms against their published check values and BMv2's definitions."""

import struct

from softswitch import hashes

CHECK = b"123456789"


def test_crc_check_values():
    # Standard catalogue check values: CRC-16/ARC, CRC-32, CRC-16/CCITT-FALSE, CRC-8.
    assert hashes.crc16(CHECK) == 0xBB3D
    assert hashes.crc32(CHECK) == 0xCBF43926
    assert hashes.crc_ccitt(CHECK) == 0x29B1
    assert hashes.algorithm("crc8_custom")(CHECK) == 0xF4
    assert hashes.algorithm("crc16_custom")(CHECK) == 0xBB3D
    assert hashes.algorithm("crc32_custom")(CHECK) == 0xCBF43926


def test_crc32_table_matches_zlib_path():
    generic = hashes.Crc(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)
    for data in (b"", b"\x00", b"\xff" * 7, bytes(range(256))):
        assert generic(data) == hashes.crc32(data)


def test_csum16_is_rfc1071():
    # The IPv4 header example of RFC 1071 section 3 style: checksum of a header
    # that already holds its checksum is 0.
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    c = hashes.csum16(hdr)
    fixed = hdr[:10] + struct.pack(">H", c) + hdr[12:]
    assert hashes.csum16(fixed) == 0
    assert c == 0xB861
    assert hashes.csum16(b"\x01") == hashes.csum16(b"\x01\x00") == 0xFEFF


def test_identity_xor_and_xxh64():
    assert hashes.identity(b"\x01\x02\x03") == 0x010203
    assert hashes.identity(bytes(range(1, 11))) == 0x0102030405060708
    assert hashes.algorithm("xor16")(b"\x12\x34\x56\x78\x9a") == 0x1234 ^ 0x5678 ^ 0x9A00
    assert hashes.algorithm("xor32")(b"\x12\x34\x56\x78\x9a") == 0x12345678 ^ 0x9A000000
    # xxHash64 reference values (seed 0).
    assert hashes.xxh64(b"") == 0xEF46DB3751D8E999
    assert hashes.xxh64(b"abc") == 0x44BC2CF5AD770999
    assert hashes.xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


def test_stateful_algorithms_are_per_instance():
    a, b = hashes.algorithm("round_robin"), hashes.algorithm("round_robin")
    assert [a(b"x"), a(b"y"), b(b"z")] == [0, 1, 0]
    rc = hashes.algorithm("round_robin_consistent")
    assert [rc(b"x"), rc(b"y"), rc(b"x")] == [0, 1, 0]
    assert hashes.algorithm("toeplitz")(b"abcd") == 0  # all-zero default key
    assert hashes.algorithm("nope") is None
