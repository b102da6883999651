"""Name-based P4Runtime entities: what the controller computes, writes, reads back and compares.

Values are plain integers (MAC and IPv4 helpers below); names are the P4Info names of tables,
actions, match fields and parameters. controller.p4info turns them into protos and back.
Two entities with the same key address the same switch object; equal entities need no write.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass


def mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def ipv4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def show_value(name: str, value: int) -> str:
    """A readable form of a value, guessed from its field or parameter name."""
    short = name.rsplit(".", 1)[-1]
    if short.endswith("mac") and value < 1 << 48:
        return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))
    if short.endswith(("addr", "ip")) and value < 1 << 32:
        return str(ipaddress.IPv4Address(value))
    return str(value)


@dataclass(frozen=True)
class Exact:
    value: int

    def show(self, name: str) -> str:
        return show_value(name, self.value)


@dataclass(frozen=True)
class Lpm:
    value: int
    prefix_len: int

    def show(self, name: str) -> str:
        return f"{show_value(name, self.value)}/{self.prefix_len}"


@dataclass(frozen=True)
class Ternary:
    value: int
    mask: int

    def show(self, name: str) -> str:
        return f"{show_value(name, self.value)}&&&{self.mask:#x}"


Match = Exact | Lpm | Ternary


def _is_wildcard(m: Match) -> bool:
    # P4Runtime omits don't-care fields; so do these entities, so reads compare equal.
    return isinstance(m, Lpm) and m.prefix_len == 0 or isinstance(m, Ternary) and m.mask == 0


@dataclass(frozen=True, eq=False)
class TableEntry:
    """Match fields and parameters keep the order they were given in (for reading); equality
    and hashing ignore that order."""

    table: str
    match: tuple[tuple[str, Match], ...]
    action: str
    params: tuple[tuple[str, int], ...]
    priority: int = 0

    @classmethod
    def make(cls, table: str, match: Mapping[str, Match | int], action: str,
             params: Mapping[str, int] | None = None, priority: int = 0) -> TableEntry:
        fields = {}
        for name, m in match.items():
            m = Exact(m) if isinstance(m, int) else m
            if not _is_wildcard(m):
                fields[name] = m
        return cls(table, tuple(fields.items()), action, tuple((params or {}).items()),
                   priority)

    def _canonical(self) -> tuple:
        return (self.table, tuple(sorted(self.match)), self.action, tuple(sorted(self.params)),
                self.priority)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TableEntry):
            return NotImplemented
        return self._canonical() == other._canonical()

    def __hash__(self) -> int:
        return hash(self._canonical())

    @property
    def key(self) -> tuple:
        return ("table", self.table, tuple(sorted(self.match)), self.priority)

    def __repr__(self) -> str:
        match = ", ".join(f"{n}={m.show(n)}" for n, m in self.match) or "*"
        params = ", ".join(f"{n}={show_value(n, v)}" for n, v in self.params)
        prio = f" priority {self.priority}" if self.priority else ""
        return f"TableEntry({self.table}[{match}]{prio} -> {self.action}({params}))"


@dataclass(frozen=True)
class MulticastGroupEntry:
    group_id: int
    replicas: tuple[tuple[int, int], ...]   # (egress port, instance), sorted

    @classmethod
    def make(cls, group_id: int, ports, instance: int = 0) -> MulticastGroupEntry:
        return cls(group_id, tuple(sorted((int(p), instance) for p in ports)))

    @property
    def key(self) -> tuple:
        return ("multicast", self.group_id)

    def __repr__(self) -> str:
        reps = ", ".join(f"{p}" if i == 0 else f"{p}#{i}" for p, i in self.replicas)
        return f"MulticastGroupEntry({self.group_id} -> ports [{reps}])"


Entity = TableEntry | MulticastGroupEntry
