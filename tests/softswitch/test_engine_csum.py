"""csum16 (the whole buffer as one integer modulo 0xffff) equals RFC 1071's word-by-word
ones' complement sum, including the sums that fold to 0xffff and all-zero input."""

import random
import struct

from softswitch.hashes import csum16


def rfc1071(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def test_csum16_equals_the_word_by_word_sum():
    rng = random.Random(1)
    cases = [b"", b"\x00", b"\x00\x00", b"\xff\xff", b"\xff\xff" * 3, b"\x00\x01\xff\xfe",
             b"\x80\x00\x7f\xff"]
    cases += [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
              for _ in range(3000)]
    cases += [bytes([rng.choice([0, 0xFF])] * rng.randint(0, 9)) for _ in range(500)]
    # payload-sized buffers (summed another way), also those folding to 0xffff or all zero
    cases += [bytes(rng.getrandbits(8) for _ in range(rng.randint(250, 1600)))
              for _ in range(300)]
    cases += [bytes([v]) * n for v in (0, 0xFF) for n in (255, 256, 257, 1480, 1481)]
    cases += [b"\xff\xfe" + b"\x00\x01" + bytes(300)]  # words adding up to 0xffff
    for c in cases:
        assert csum16(c) == rfc1071(c), c.hex()
