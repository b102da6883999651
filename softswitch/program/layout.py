"""Where every header, field and packet register lives in the per-packet list F.

A packet's whole state (BMv2's PHV plus its packet registers) is one Python
list of ints, so generated code reads and writes fields as `F[123]` with
constant indices. A header instance occupies consecutive slots: its validity
bit (the hidden `$valid$` field) followed by its fields in declaration order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SwitchError

# Packet registers kept in F ahead of the headers.
EXIT = 0  # exit() was called
CLONE = 1  # clone session | 0x8000 when a clone was requested
CLONE_FL = 2  # field list id preserved by the clone
RESUBMIT = 3  # field list id of resubmit (0: none)
RECIRC = 4  # field list id of recirculate (0: none)
DIGEST = 5  # learn list id of generate_digest (0: none)
PKTLEN = 6  # BMv2's packet length register (follows add/remove header)
INLEN = 7  # ingress length, what counters count in bytes
TRUNC = 8  # truncation length, -1 when none
PAYLOAD = 9  # the bytes the parser did not consume
ABORT = 10  # an assert/assume failed
NFIXED = 11

# v1model instance_type values (simple_switch.h).
INSTANCE_NORMAL = 0
INSTANCE_INGRESS_CLONE = 1
INSTANCE_EGRESS_CLONE = 2
INSTANCE_RECIRC = 4
INSTANCE_REPLICATION = 5
INSTANCE_RESUBMIT = 6

MAX_FIELD_BITS = 1 << 12

CORE_ERRORS = (
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
)


def bad(msg: str) -> SwitchError:
    return SwitchError("INVALID_ARGUMENT", msg)


@dataclass
class FieldInfo:
    name: str
    width: int
    signed: bool
    saturating: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


VLEN = "$vlen$"  # hidden last field of a header type with a varbit: its current bit length


@dataclass
class HeaderType:
    name: str
    fields: list[FieldInfo]
    offsets: dict[str, int] = field(default_factory=dict)  # field name -> index
    nbits: int = 0  # fixed-width bits (a varbit field and its length excluded)
    varbit: int | None = None  # index of the varbit field (its width: the maximum)

    @property
    def wire_fields(self) -> list[FieldInfo]:
        """The fields as on the wire (without the hidden varbit length)."""
        return self.fields if self.varbit is None else self.fields[:-1]

    @property
    def nbytes(self) -> int:
        return self.nbits // 8


@dataclass
class Header:
    name: str
    id: int
    htype: HeaderType
    metadata: bool
    base: int = 0  # slot of the validity bit; field i is at base + 1 + i
    union: str | None = None  # the header union this header belongs to
    stack: str | None = None

    def slot(self, field_name: str) -> int:
        if field_name == "$valid$":
            return self.base
        try:
            return self.base + 1 + self.htype.offsets[field_name]
        except KeyError:
            raise bad(f"header {self.name!r} has no field {field_name!r}") from None

    def finfo(self, field_name: str) -> FieldInfo:
        if field_name == "$valid$":
            return FieldInfo("$valid$", 1, False)
        return self.htype.fields[self.htype.offsets[field_name]]


@dataclass
class Stack:
    name: str
    id: int
    htype: HeaderType
    headers: list[Header]
    next_slot: int = 0  # slot holding the stack's next index

    @property
    def size(self) -> int:
        return len(self.headers)


@dataclass
class Union:
    name: str
    id: int
    headers: list[Header]


@dataclass
class UnionStack:
    name: str
    id: int
    unions: list[Union]
    next_slot: int = 0  # slot holding the stack's next index

    @property
    def size(self) -> int:
        return len(self.unions)

    def member(self, i: int, name: str) -> Header:
        """Header `name` of element i (the union member of that name)."""
        u = self.unions[i]
        for h in u.headers:
            if h.name == f"{u.name}.{name}":
                return h
        raise bad(f"header union stack {self.name!r} has no member {name!r}")


class Layout:
    """The program's data model: header types, instances, stacks, unions, errors."""

    def __init__(self, j: dict):
        self.header_types: dict[str, HeaderType] = {}
        self.headers: dict[str, Header] = {}
        self.headers_by_id: dict[int, Header] = {}
        self.stacks: dict[str, Stack] = {}
        self.unions: dict[str, Union] = {}
        self.union_stacks: dict[str, UnionStack] = {}
        self.aliases: dict[str, tuple[str, str]] = {}
        self.errors: dict[str, int] = {}
        self.enums: dict[str, dict[str, int]] = {}
        self._build(j)

    # -- construction -------------------------------------------------------

    def _build(self, j: dict) -> None:
        for ht in j.get("header_types", []):
            fields = []
            varbit = None
            for f in ht["fields"]:
                if f[1] == "*":
                    if varbit is not None:
                        raise bad(f"header type {ht['name']!r}: two varbit fields")
                    varbit = len(fields)
                    fields.append(FieldInfo(str(f[0]), 0, False))  # width set below
                    continue
                w = int(f[1])
                signed = bool(f[2]) if len(f) > 2 else False
                sat = bool(f[3]) if len(f) > 3 else False
                if w < 0 or w > MAX_FIELD_BITS or (signed and w < 2):
                    raise bad(f"header type {ht['name']!r}: bad width for field {f[0]!r}")
                fields.append(FieldInfo(str(f[0]), w, signed, sat))
            t = HeaderType(ht["name"], fields, varbit=varbit)
            t.nbits = sum(f.width for f in fields)
            if varbit is not None:
                max_bits = int(ht.get("max_length", 0)) * 8 - t.nbits
                if not 0 < max_bits <= MAX_FIELD_BITS:
                    raise bad(f"header type {ht['name']!r}: bad varbit max_length")
                fields[varbit].width = max_bits
                fields.append(FieldInfo(VLEN, 32, False))
            t.offsets = {f.name: i for i, f in enumerate(fields)}
            self.header_types[t.name] = t
        slot = NFIXED
        stacks_j = j.get("header_stacks", [])
        union_stacks_j = j.get("header_union_stacks", []) or []
        self.stack_next_base = slot
        slot += len(stacks_j) + len(union_stacks_j)
        for h in j.get("headers", []):
            try:
                t = self.header_types[h["header_type"]]
            except KeyError:
                raise bad(f"header {h.get('name')!r}: unknown header type") from None
            hdr = Header(h["name"], int(h["id"]), t, bool(h.get("metadata", False)), base=slot)
            if not hdr.metadata and t.nbits % 8:
                raise bad(f"header {hdr.name!r}: {t.nbits} bits is not a whole number of bytes")
            slot += 1 + len(t.fields)
            self.headers[hdr.name] = hdr
            self.headers_by_id[hdr.id] = hdr
        self.nslots = slot
        for i, s in enumerate(stacks_j):
            try:
                members = [self.headers_by_id[int(x)] for x in s["header_ids"]]
                t = self.header_types[s["header_type"]]
            except KeyError:
                raise bad(f"header stack {s.get('name')!r}: unknown header or type") from None
            st = Stack(s["name"], int(s["id"]), t, members, self.stack_next_base + i)
            for m in members:
                m.stack = st.name
            self.stacks[st.name] = st
        for u in j.get("header_unions", []):
            try:
                members = [self.headers_by_id[int(x)] for x in u["header_ids"]]
            except KeyError:
                raise bad(f"header union {u.get('name')!r}: unknown header") from None
            un = Union(u["name"], int(u["id"]), members)
            for m in members:
                m.union = un.name
            self.unions[un.name] = un
        unions_by_id = {u.id: u for u in self.unions.values()}
        for i, s in enumerate(union_stacks_j):
            try:
                members = [unions_by_id[int(x)] for x in s["header_union_ids"]]
            except KeyError:
                raise bad(f"header union stack {s.get('name')!r}: unknown union") from None
            self.union_stacks[s["name"]] = UnionStack(
                s["name"], int(s["id"]), members, self.stack_next_base + len(stacks_j) + i)
        for a in j.get("field_aliases", []):
            self.aliases[a[0]] = (a[1][0], a[1][1])
        max_v = -1
        for name, v in j.get("errors", []):
            self.errors[name] = int(v)
            max_v = max(max_v, int(v))
        for name in CORE_ERRORS:
            if name not in self.errors:
                max_v += 1
                self.errors[name] = max_v
        for e in j.get("enums", []):
            self.enums[e["name"]] = {n: int(v) for n, v in e["entries"]}

    # -- lookups ------------------------------------------------------------

    def header(self, name: str) -> Header:
        try:
            return self.headers[name]
        except KeyError:
            raise bad(f"unknown header {name!r}") from None

    def stack(self, name: str) -> Stack:
        try:
            return self.stacks[name]
        except KeyError:
            raise bad(f"unknown header stack {name!r}") from None

    def field(self, hname: str, fname: str) -> tuple[Header, FieldInfo, int]:
        h = self.header(hname)
        if fname != "$valid$" and fname not in h.htype.offsets:
            raise bad(f"header {hname!r} has no field {fname!r}")
        return h, h.finfo(fname), h.slot(fname)

    def resolve(self, dotted: str) -> tuple[FieldInfo, int] | None:
        """A field the target itself needs (e.g. standard_metadata.egress_spec), via aliases."""
        if dotted in self.aliases:
            hname, fname = self.aliases[dotted]
        else:
            hname, _, fname = dotted.partition(".")
        h = self.headers.get(hname)
        if h is None or fname not in h.htype.offsets:
            return None
        return h.finfo(fname), h.slot(fname)

    def slot_info(self) -> dict[int, FieldInfo]:
        """Slot -> field of every header field (cached)."""
        if getattr(self, "_slot_info", None) is None:
            self._slot_info = {h.base + 1 + i: f for h in self.headers.values()
                               for i, f in enumerate(h.htype.fields)}
        return self._slot_info

    def initial_slots(self) -> list:
        """F for a fresh packet: everything 0, metadata valid, no truncation."""
        f: list = [0] * self.nslots
        f[TRUNC] = -1
        f[PAYLOAD] = b""
        for h in self.headers.values():
            if h.metadata:
                f[h.base] = 1
        return f

    def metadata_slots(self) -> list[int]:
        out = []
        for h in self.headers.values():
            if h.metadata:
                out.extend(range(h.base + 1, h.base + 1 + len(h.htype.fields)))
        return out
