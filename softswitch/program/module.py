"""The generated Python module: source lines plus the globals they reference."""

from __future__ import annotations

import itertools


class Module:
    def __init__(self):
        self.lines: list[str] = []
        self.globals: dict = {}
        self._ids: dict[int, str] = {}
        self._consts: dict[tuple, str] = {}
        self._counter = itertools.count()
        self.deferred: list[str] = []  # statements run after all functions exist

    def bind(self, obj, hint: str = "g") -> str:
        """A global name for a runtime object (a list, a table, a function)."""
        key = id(obj)
        if key in self._ids:
            return self._ids[key]
        name = f"{hint}_{next(self._counter)}"
        self._ids[key] = name
        self.globals[name] = obj
        return name

    def const(self, value: tuple, hint: str = "k") -> str:
        """A global name for an immutable constant (tuples of slots, masks)."""
        key = (hint, value)
        if key not in self._consts:
            name = f"{hint}_{next(self._counter)}"
            self._consts[key] = name
            self.globals[name] = value
        return self._consts[key]

    def fresh(self, hint: str) -> str:
        return f"{hint}_{next(self._counter)}"

    def emit(self, lines: list[str]) -> None:
        self.lines.extend(lines)
        self.lines.append("")

    def source(self) -> str:
        return "\n".join(self.lines + self.deferred) + "\n"


def struct_plan(widths: list[int]) -> tuple[str, list[list[tuple[int, int, int, int]]]] | None:
    """How to read/write byte-aligned fields with one struct format.

    Splits the concatenated fields into byte-aligned chunks; each chunk is
    read with struct codes (B, H, I, Q pieces). Returns the format and, per
    field, the pieces it is made of: (struct item index, shift, width, position)
    with the field = OR of ((item >> shift) & mask(width)) << position. None when
    the fields do not fill whole bytes.
    """
    total = sum(widths)
    if total % 8:
        return None
    # Chunk boundaries: smallest byte-aligned groups of consecutive fields.
    chunks: list[tuple[int, int]] = []  # (start bit, nbits)
    start = pos = 0
    for w in widths:
        pos += w
        if pos % 8 == 0 and pos > start:
            chunks.append((start, pos - start))
            start = pos
    fmt = ">"
    items: list[tuple[int, int]] = []  # (start bit, nbits) of each struct item
    for cstart, cbits in chunks:
        nbytes = cbits // 8
        off = cstart
        while nbytes:
            for size, code in ((8, "Q"), (4, "I"), (2, "H"), (1, "B")):
                if nbytes >= size:
                    fmt += code
                    items.append((off, size * 8))
                    off += size * 8
                    nbytes -= size
                    break
    # Each field covers bit range [fs, fs+w); express it from the items it overlaps.
    # Fields and items are both in stream order: each field scans from the first item that
    # can overlap it (linear, not fields x items, for headers of thousands of fields).
    plans: list[list[tuple[int, int, int]]] = []
    fs = 0
    first = 0
    for w in widths:
        pieces = []
        while first < len(items) and items[first][0] + items[first][1] <= fs:
            first += 1
        for idx in range(first, len(items)):
            istart, ibits = items[idx]
            if istart >= fs + w:
                break
            lo = max(fs, istart)
            hi = min(fs + w, istart + ibits)
            if lo >= hi:
                continue
            # bits [lo, hi) of the stream: inside the item they sit at
            # shift = istart + ibits - hi from the item's LSB.
            shift = istart + ibits - hi
            nb = hi - lo
            position = fs + w - hi  # where they go inside the field
            pieces.append((idx, shift, nb, position))
        plans.append(pieces)
        fs += w
    return fmt, plans


def struct_read(widths: list[int], item: str) -> tuple[str, list[str]] | None:
    """(format, [expression per field]) reading the fields from struct items."""
    plan = struct_plan(widths)
    if plan is None:
        return None
    fmt, plans = plan
    sizes = {"Q": 64, "I": 32, "H": 16, "B": 8}
    item_bits = [sizes[c] for c in fmt[1:]]
    exprs = []
    for pieces in plans:
        parts = []
        for idx, shift, nb, position in pieces:
            src = f"{item}[{idx}]"
            if shift:
                src = f"({src} >> {shift})"
            if shift + nb != item_bits[idx]:
                src = f"({src} & {hex((1 << nb) - 1)})"
            if position:
                src = f"({src} << {position})"
            parts.append(src)
        exprs.append(" | ".join(parts) if len(parts) > 1 else parts[0])
    return fmt, exprs


def struct_write(widths: list[int], values: list[str]) -> tuple[str, list[str]] | None:
    """(format, [expression per struct item]) packing field values (already in range)."""
    plan = struct_plan(widths)
    if plan is None:
        return None
    fmt, plans = plan
    per_item: dict[int, list[str]] = {}
    for pieces, v in zip(plans, values, strict=True):
        for idx, shift, nb, position in pieces:
            src = v
            if position:
                src = f"({src} >> {position})"
            if len(pieces) > 1:
                src = f"({src} & {hex((1 << nb) - 1)})"
            if shift:
                src = f"({src} << {shift})"
            per_item.setdefault(idx, []).append(src)
    items = []
    for idx in range(len(fmt) - 1):
        parts = per_item[idx]
        items.append(" | ".join(parts) if len(parts) > 1 else parts[0])
    return fmt, items
