"""P4Runtime binary strings <-> ints (P4Runtime 1.4, section "Bytestrings").

Values are big-endian; the canonical form is the shortest string holding the
value (one zero byte for 0). Longer strings are accepted if the value fits the
P4Info bitwidth; a value that does not fit is INVALID_ARGUMENT, as BMv2 answers.
"""

from .status import invalid


def decode(data: bytes, bitwidth: int, what: str) -> int:
    if len(data) == 0:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def decode_signed(data: bytes, bitwidth: int, what: str) -> int:
    """An int<W> in two's complement, sign-extended to any length."""
    if len(data) == 0:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big", signed=True)
    if not -(1 << (bitwidth - 1)) <= value < (1 << (bitwidth - 1)):
        raise invalid(f"{what}: value 0x{data.hex()} does not fit in int<{bitwidth}>")
    return value


def encode(value: int) -> bytes:
    """Canonical form of a non-negative value."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_signed(value: int) -> bytes:
    """Canonical (shortest sign-extended) form of a signed value."""
    nbits = value.bit_length() + 1 if value >= 0 else (~value).bit_length() + 1
    return value.to_bytes(max(1, (nbits + 7) // 8), "big", signed=True)
