"""Helpers the generated code calls for the rare, guarded cases.

The common paths are inlined by the code generator; these handle operands
whose range is unknown at load time, where BMv2 would assert or misbehave
(negative or enormous shift amounts, division by zero), so a hostile packet
or program can neither raise out of the pipeline nor allocate huge integers.
"""

from __future__ import annotations

# Beyond this many bits a left shift is treated as shifting everything out:
# any real program masks the result to a field width far below it.
MAX_SHIFT = 1 << 16


class ParserError(Exception):
    """Raised inside generated parser code: the v1model error value and the
    bytes consumed so far (headers extracted before the error stay)."""

    __slots__ = ("code", "pos")

    def __init__(self, code: int, pos: int):
        self.code = code
        self.pos = pos


def _shl(a: int, b: int) -> int:
    if b < 0:
        return a
    if b > MAX_SHIFT:
        return 0
    return a << b


def _shr(a: int, b: int) -> int:
    if b < 0:
        return a
    return a >> b


def _mod(a: int, b: int) -> int:
    return a % b if b > 0 else 0


def _div(a: int, b: int) -> int:
    return a // b if b > 0 else 0


def _tcm(a: int, w: int) -> int:
    if w <= 0:
        return 0
    h = 1 << (w - 1)
    return ((a + h) & ((1 << w) - 1)) - h


def _usatc(a: int, w: int) -> int:
    if w <= 0:
        return 0
    return min(max(a, 0), (1 << w) - 1)


def _satc(a: int, w: int) -> int:
    if w <= 0:
        return 0
    h = 1 << (w - 1)
    return min(max(a, -h), h - 1)


def _hdr_eq(F: list, a: int, b: int, n: int) -> bool:
    """BMv2 Header::cmp: both valid and all fields equal (same type assumed)."""
    return F[a] == 1 and F[b] == 1 and F[a + 1 : a + 1 + n] == F[b + 1 : b + 1 + n]


def _stack_push(F: list, bases: tuple, width: int, n: int, next_slot: int) -> None:
    """P4_16 push_front(n): shift elements up by n, the first n become invalid."""
    size = len(bases) - 1  # the last base is the scratch header
    if n <= 0:
        return
    F[next_slot] = min(size, F[next_slot] + n)
    for i in range(size - 1, n - 1, -1):
        s, d = bases[i - n], bases[i]
        F[d : d + width] = F[s : s + width]
    for i in range(min(size, n)):
        F[bases[i]] = 0


def _stack_pop(F: list, bases: tuple, width: int, n: int, next_slot: int) -> None:
    """P4_16 pop_front(n): shift elements down by n, the last n become invalid."""
    size = len(bases) - 1
    if n <= 0:
        return
    F[next_slot] -= min(F[next_slot], n)
    for i in range(0, max(size - n, 0)):
        s, d = bases[i + n], bases[i]
        F[d : d + width] = F[s : s + width]
    for i in range(max(size - n, 0), size):
        F[bases[i]] = 0


def _ustack_shift(F: list, columns: tuple, n: int, next_slot: int, push: bool) -> None:
    """push_front(n) / pop_front(n) of a header union stack as BMv2 does them: elements
    are swapped pairwise (every member header's slots), and nothing is invalidated,
    since BMv2 marking a union invalid is a no-op."""
    if n <= 0:
        return
    size = len(columns[0][0])
    if push:
        F[next_slot] = min(size, F[next_slot] + n)
        pairs = [(i, i - n) for i in range(size - 1, n - 1, -1)]
    else:
        F[next_slot] -= min(F[next_slot], n)
        pairs = [(i, i + n) for i in range(0, max(size - n, 0))]
    for a, b in pairs:
        for bases, width in columns:
            x, y = bases[a], bases[b]
            F[x : x + width], F[y : y + width] = F[y : y + width], F[x : x + width]


def _peek(D: bytes, bitpos: int, width: int) -> int:
    """`width` bits of D starting at bit `bitpos`, zero beyond the end (lookahead)."""
    first = bitpos >> 3
    last = (bitpos + width + 7) >> 3
    chunk = D[first:last]
    if len(chunk) < last - first:
        chunk = chunk + bytes(last - first - len(chunk))
    v = int.from_bytes(chunk, "big")
    return (v >> ((last << 3) - bitpos - width)) & ((1 << width) - 1)


def _bits_to_bytes(v: int, nbits: int) -> bytes:
    """A bit string (value, length) left-aligned into bytes, zero padded at the end."""
    pad = (-nbits) % 8
    return (v << pad).to_bytes((nbits + pad) // 8, "big")


HELPERS = {
    "_shl": _shl,
    "_shr": _shr,
    "_mod": _mod,
    "_div": _div,
    "_tcm": _tcm,
    "_usatc": _usatc,
    "_satc": _satc,
    "_hdr_eq": _hdr_eq,
    "_stack_push": _stack_push,
    "_stack_pop": _stack_pop,
    "_ustack_shift": _ustack_shift,
    "_peek": _peek,
    "_bits_to_bytes": _bits_to_bytes,
    "ParserError": ParserError,
}
