"""P4Runtime FieldMatch lists <-> the engine's key tuples (docs/SOFTSWITCH.md, The engine's API).

Validation follows BMv2's DeviceMgr::construct_match_key: a don't-care field is
omitted, never sent as a zero mask, zero prefix or full range; lpm values have
no bits beyond the prefix; ternary values have no bits outside the mask.
"""

from p4.v1 import p4runtime_pb2

from . import bytestrings
from .pipeline import TableInfo
from .status import invalid

_FIELD_ONEOF = {"exact": "exact", "valid": "exact", "lpm": "lpm", "ternary": "ternary",
                "range": "range", "optional": "optional"}


def dont_care(kind: str, bitwidth: int):
    """The engine key item matching everything, for an engine match kind."""
    if kind in ("lpm", "ternary"):
        return (0, 0)
    if kind == "range":
        return (0, (1 << bitwidth) - 1)
    if kind == "optional":
        return None
    return None  # exact and valid have no don't-care; the caller rejects a missing one


def build_key(table: TableInfo, entry: p4runtime_pb2.TableEntry) -> tuple[tuple, int]:
    """(engine key tuple, priority) for a non-default entry; raises INVALID_ARGUMENT."""
    if len(entry.match) > len(table.fields):
        raise invalid(f"table {table.name}: too many fields in match key")
    given: dict[int, p4runtime_pb2.FieldMatch] = {}
    for fm in entry.match:
        if fm.field_id not in table.by_field_id:
            raise invalid(f"table {table.name}: unknown field id {fm.field_id} in match key")
        if fm.field_id in given:
            raise invalid(f"table {table.name}: field id {fm.field_id} given twice")
        given[fm.field_id] = fm
    key: list = [None] * len(table.engine_kinds)
    for info in table.fields:
        fm = given.get(info.id)
        if fm is None:
            if info.kind in ("exact", "valid"):
                raise invalid(f"table {table.name}: missing exact field {info.name} in match key")
            key[info.position] = dont_care(info.engine_kind, info.bitwidth)
            continue
        if fm.WhichOneof("field_match_type") != _FIELD_ONEOF[info.kind]:
            raise invalid(f"table {table.name} field {info.name}: invalid match type, "
                          f"expected {info.kind}")
        key[info.position] = _field_value(table, info, fm)
    priority = entry.priority
    if table.needs_priority:
        if priority <= 0:
            raise invalid(f"table {table.name}: zero or negative priority for a ternary, range "
                          f"or optional match")
    elif priority != 0:
        raise invalid(f"table {table.name}: non-zero priority for a table without ternary, "
                      f"range or optional match")
    return tuple(key), priority


def _field_value(table, info, fm):
    what = f"table {table.name} field {info.name}"
    w = info.bitwidth
    if info.kind == "exact":
        return bytestrings.decode(fm.exact.value, w, what)
    if info.kind == "valid":
        return bytestrings.decode(fm.exact.value, max(w, 1), what) != 0
    if info.kind == "lpm":
        value = bytestrings.decode(fm.lpm.value, w, what)
        plen = fm.lpm.prefix_len
        if plen < 0 or plen > w:
            raise invalid(f"{what}: prefix length {plen} outside 1..{w}")
        if plen == 0:
            raise invalid(f"{what}: invalid representation of a 'don't care' LPM match, omit "
                          f"the field instead of using a prefix length of 0")
        if value & ((1 << (w - plen)) - 1):
            raise invalid(f"{what}: LPM value has bits set beyond the prefix length {plen}")
        return (value, plen)
    if info.kind == "ternary":
        value = bytestrings.decode(fm.ternary.value, w, what)
        mask = bytestrings.decode(fm.ternary.mask, w, what)
        if mask == 0:
            raise invalid(f"{what}: invalid representation of a 'don't care' ternary match, "
                          f"omit the field instead of using a 0 mask")
        if value & ~mask:
            raise invalid(f"{what}: ternary value has bits outside the mask")
        return (value, mask)
    if info.kind == "range":
        lo = bytestrings.decode(fm.range.low, w, what)
        hi = bytestrings.decode(fm.range.high, w, what)
        if lo > hi:
            raise invalid(f"{what}: range low {lo} > high {hi}")
        if lo == 0 and hi == (1 << w) - 1:
            raise invalid(f"{what}: invalid representation of a 'don't care' range match, "
                          f"omit the field instead")
        return (lo, hi)
    value = bytestrings.decode(fm.optional.value, w, what)  # optional
    return (value, (1 << w) - 1) if info.engine_kind == "ternary" else value


def fill_match(table: TableInfo, key: tuple, entry: p4runtime_pb2.TableEntry) -> None:
    """Append the FieldMatch list for an engine key, omitting don't-care fields."""
    for info in table.fields:
        item = key[info.position]
        kind = info.kind
        if kind == "exact":
            entry.match.add(field_id=info.id).exact.value = bytestrings.encode(item)
        elif kind == "valid":
            entry.match.add(field_id=info.id).exact.value = b"\x01" if item else b"\x00"
        elif kind == "lpm":
            value, plen = item
            if plen:
                fm = entry.match.add(field_id=info.id)
                fm.lpm.value = bytestrings.encode(value)
                fm.lpm.prefix_len = plen
        elif kind == "ternary":
            value, mask = item
            if mask:
                fm = entry.match.add(field_id=info.id)
                fm.ternary.value = bytestrings.encode(value)
                fm.ternary.mask = bytestrings.encode(mask)
        elif kind == "range":
            lo, hi = item
            if (lo, hi) != (0, (1 << info.bitwidth) - 1):
                fm = entry.match.add(field_id=info.id)
                fm.range.low = bytestrings.encode(lo)
                fm.range.high = bytestrings.encode(hi)
        else:  # optional, held by the engine as itself or as a ternary (value, mask)
            if info.engine_kind == "ternary":
                item = item[0] if item[1] else None
            if item is not None:
                entry.match.add(field_id=info.id).optional.value = bytestrings.encode(item)
