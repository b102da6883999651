"""Match-action tables with BMv2's match semantics and the contract's Table API.

Exact tables keep a dict from key to hit, updated in place on every change,
so the data plane does one dict lookup. Other kinds group entries by their
mask (tuple space search) and rebuild those groups lazily after a change.
A hit is the tuple (action function, params, next node, entry).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .errors import SwitchError

INT32_MAX = (1 << 31) - 1
PRIORITY_KINDS = frozenset({"ternary", "range", "optional"})


@dataclass
class Entry:
    key: tuple
    action: str
    params: list[int]
    priority: int = 0
    packets: int = 0
    bytes: int = 0
    seq: int = field(default=0, repr=False, compare=False)


def _bad(msg: str) -> SwitchError:
    return SwitchError("INVALID_ARGUMENT", msg)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _apply_mask(kind: str, mask: int | None, k):
    if mask is None or k is None:
        return k
    if kind in ("exact", "optional"):
        return k & mask
    if kind in ("ternary", "lpm"):
        return (k[0] & mask, k[1])
    return k


class Table:
    def __init__(
        self,
        name: str,
        size: int,
        match_fields: list[tuple[str, str, int]],
        action_names: list[str],
        action_params: dict[str, list[tuple[str, int]]],
        lock: threading.RLock,
        *,
        default: tuple[str, list[int]] | None = None,
        has_const_default: bool = False,
        default_entry_const: bool = False,
        direct_counter: str | None = None,
        with_counters: bool = False,
        key_masks: list[int | None] | None = None,
    ):
        self.name = name
        self.size = size
        self.match_fields = match_fields
        self.action_names = action_names
        self._params = action_params
        self._lock = lock
        self.has_const_default = has_const_default
        self._default_entry_const = default_entry_const
        self.has_const_entries = False
        self.direct_counter = direct_counter
        self.with_counters = with_counters
        self._initial_default = default
        self.default: tuple[str, list[int]] = default or ("", [])
        # a key masked in the program (p4c's "mask"): BMv2 masks entry values with it
        self.key_masks = list(key_masks or [None] * len(match_fields))
        self.kinds = [k for _, k, _ in match_fields]
        self.widths = [w for _, _, w in match_fields]
        self.needs_priority = any(k in PRIORITY_KINDS for k in self.kinds)
        self.exact_only = all(k in ("exact", "valid") for k in self.kinds) and bool(self.kinds)
        self.has_range = "range" in self.kinds
        self._entries: dict[tuple, Entry] = {}  # (key, priority) -> entry, insertion order
        self._seq = 0
        # data-plane structures
        self.exact: dict = {}  # exact tables: lookup key -> hit
        self.miss: tuple = (_noop, (), None, None)
        self._groups: list = []
        self._linear: list = []
        self._dirty = False
        # set by bind(): action name -> function, next node per action / hit / miss
        self._fns: dict = {}
        self._next: dict = {}
        self._next_hit = None
        self._next_miss = None
        self._has_hit_miss = False
        self._base_default_next = None
        # the native tier's buffers (native/tables.py): told of changes, asked for counts
        self.native = None

    # -- wiring to the compiled program -----------------------------------------

    def bind(self, fns: dict, next_by_action: dict, hit_miss: tuple | None, base_default_next):
        self._fns = fns
        self._next = next_by_action
        if hit_miss is not None:
            self._has_hit_miss = True
            self._next_hit, self._next_miss = hit_miss
        self._base_default_next = base_default_next
        self._refresh_miss()

    def _hit(self, e: Entry) -> tuple:
        nxt = self._next_hit if self._has_hit_miss else self._next.get(e.action)
        return (self._fns[e.action], tuple(e.params), nxt, e if self.with_counters else None)

    def _refresh_miss(self) -> None:
        name, params = self.default
        if not name:
            self.miss = (_noop, (), self._base_default_next, None)
            return
        nxt = self._next_miss if self._has_hit_miss else self._next.get(name)
        self.miss = (self._fns[name], tuple(params), nxt, None)

    def params_of(self, action: str) -> list[tuple[str, int]]:
        return list(self._params[action])

    # -- validation -----------------------------------------------------------------

    def _check_action(self, action: str, params) -> list[int]:
        if action not in self.action_names:
            raise _bad(f"table {self.name}: action {action!r} is not one of {self.action_names}")
        spec = self._params[action]
        if not isinstance(params, (list, tuple)) or len(params) != len(spec):
            raise _bad(f"table {self.name}: action {action} takes {len(spec)} parameters")
        out = []
        for (pname, w), v in zip(spec, params, strict=True):
            if not _is_int(v) or not 0 <= v < (1 << w):
                raise _bad(f"table {self.name}: {action}.{pname}={v!r} does not fit {w} bits")
            out.append(v)
        return out

    def _check_key(self, key, priority) -> tuple:
        if not isinstance(key, (list, tuple)) or len(key) != len(self.match_fields):
            raise _bad(f"table {self.name}: key needs {len(self.match_fields)} items")
        out = []
        for (fname, kind, w), k in zip(self.match_fields, key, strict=True):
            lim = 1 << w
            full = lim - 1
            if kind == "exact":
                if not _is_int(k) or not 0 <= k < lim:
                    raise _bad(f"table {self.name}: {fname}={k!r} does not fit {w} bits")
                out.append(k)
            elif kind == "valid":
                if not isinstance(k, (bool, int)) or k not in (0, 1):
                    raise _bad(f"table {self.name}: {fname} needs a bool")
                out.append(bool(k))
            elif kind == "lpm":
                if (not isinstance(k, (list, tuple)) or len(k) != 2 or not _is_int(k[0])
                        or not _is_int(k[1])):
                    raise _bad(f"table {self.name}: {fname} needs (value, prefix_len)")
                v, plen = k
                if not 0 <= plen <= w or not 0 <= v < lim:
                    raise _bad(f"table {self.name}: {fname}: bad prefix {v}/{plen}")
                pm = full ^ ((1 << (w - plen)) - 1)
                if v & ~pm:
                    raise _bad(f"table {self.name}: {fname}: bits beyond the prefix must be 0")
                out.append((v, plen))
            elif kind == "ternary":
                if (not isinstance(k, (list, tuple)) or len(k) != 2 or not _is_int(k[0])
                        or not _is_int(k[1])):
                    raise _bad(f"table {self.name}: {fname} needs (value, mask)")
                v, m = k
                if not 0 <= v < lim or not 0 <= m < lim:
                    raise _bad(f"table {self.name}: {fname}: value/mask exceed {w} bits")
                if v & ~m:
                    raise _bad(f"table {self.name}: {fname}: value has bits outside the mask")
                out.append((v, m))
            elif kind == "range":
                if (not isinstance(k, (list, tuple)) or len(k) != 2 or not _is_int(k[0])
                        or not _is_int(k[1])):
                    raise _bad(f"table {self.name}: {fname} needs (low, high)")
                lo, hi = k
                if not 0 <= lo <= hi < lim:
                    raise _bad(f"table {self.name}: {fname}: bad range {lo}..{hi}")
                out.append((lo, hi))
            elif kind == "optional":
                if k is not None and (not _is_int(k) or not 0 <= k < lim):
                    raise _bad(f"table {self.name}: {fname}={k!r} does not fit {w} bits")
                out.append(k)
            else:
                raise _bad(f"table {self.name}: unsupported match kind {kind}")
        if any(m is not None for m in self.key_masks):
            out = [_apply_mask(kind, m, k) for (_, kind, _), m, k in
                   zip(self.match_fields, self.key_masks, out, strict=True)]
        if self.needs_priority:
            if not _is_int(priority) or not 0 < priority <= INT32_MAX:
                raise _bad(f"table {self.name}: entries need a priority in [1, 2^31)")
        elif priority != 0:
            raise _bad(f"table {self.name}: entries of this table take no priority")
        return tuple(out)

    def _exact_key(self, key: tuple):
        k = tuple(int(x) for x in key)
        return k[0] if len(k) == 1 else k

    # -- control-plane API ------------------------------------------------------------

    def insert(self, e: Entry) -> None:
        with self._lock:
            if self.has_const_entries:
                raise SwitchError("FAILED_PRECONDITION", f"table {self.name} has const entries")
            self._insert(e)

    def _insert(self, e: Entry) -> None:
        key = self._check_key(e.key, e.priority)
        params = self._check_action(e.action, e.params)
        ident = (key, e.priority)
        if ident in self._entries:
            raise SwitchError("ALREADY_EXISTS", f"table {self.name}: entry already exists")
        if len(self._entries) >= self.size:
            raise SwitchError("RESOURCE_EXHAUSTED", f"table {self.name} is full ({self.size})")
        self._seq += 1
        ent = Entry(key, e.action, params, e.priority, e.packets, e.bytes, self._seq)
        self._entries[ident] = ent
        self._changed(ent, add=True)

    def modify(self, e: Entry) -> None:
        with self._lock:
            if self.has_const_entries:
                raise SwitchError("FAILED_PRECONDITION", f"table {self.name} has const entries")
            key = self._check_key(e.key, e.priority)
            params = self._check_action(e.action, e.params)
            ent = self._entries.get((key, e.priority))
            if ent is None:
                raise SwitchError("NOT_FOUND", f"table {self.name}: no such entry")
            ent.action, ent.params = e.action, params
            self._changed(ent, add=True)

    def delete(self, key, priority: int = 0) -> None:
        with self._lock:
            if self.has_const_entries:
                raise SwitchError("FAILED_PRECONDITION", f"table {self.name} has const entries")
            k = self._check_key(key, priority)
            ent = self._entries.pop((k, priority), None)
            if ent is None:
                raise SwitchError("NOT_FOUND", f"table {self.name}: no such entry")
            self._changed(ent, add=False)

    def get(self, key, priority: int = 0) -> Entry | None:
        with self._lock:
            if self.native is not None:
                self.native.sync(self)
            try:
                k = self._check_key(key, priority)
            except SwitchError:
                return None
            return self._entries.get((k, priority))

    def set_counter(self, key, priority: int, packets: int, nbytes: int) -> None:
        """Sets an entry's direct counter (P4Runtime DirectCounterEntry / counter_data)."""
        with self._lock:
            for v in (packets, nbytes):
                if not _is_int(v) or not 0 <= v < (1 << 64):
                    raise _bad(f"table {self.name}: bad counter value {v!r}")
            k = self._check_key(key, priority)
            ent = self._entries.get((k, priority))
            if ent is None:
                raise SwitchError("NOT_FOUND", f"table {self.name}: no such entry")
            if self.native is not None:
                self.native.sync(self)
            ent.packets, ent.bytes = packets, nbytes

    def entries(self) -> list[Entry]:
        with self._lock:
            if self.native is not None:
                self.native.sync(self)
            return list(self._entries.values())

    def clear(self) -> None:
        with self._lock:
            if self.has_const_entries:
                raise SwitchError("FAILED_PRECONDITION", f"table {self.name} has const entries")
            self._entries.clear()
            self.exact.clear()
            self._dirty = True
            if self.native is not None:
                self.native.changed(self)

    def set_default(self, action: str, params: list[int]) -> None:
        with self._lock:
            p = self._check_action(action, params)
            if self.has_const_default and self._initial_default is not None:
                cur_name, cur_params = self._initial_default
                if action != cur_name or (self._default_entry_const and p != list(cur_params)):
                    raise SwitchError("FAILED_PRECONDITION",
                                      f"table {self.name}: the default action is const")
            self.default = (action, p)
            self._refresh_miss()
            if self.native is not None:
                self.native.changed(self)

    def reset_default(self) -> None:
        with self._lock:
            self.default = self._initial_default or ("", [])
            self._refresh_miss()
            if self.native is not None:
                self.native.changed(self)

    def load_const_entries(self, entries: list[Entry]) -> None:
        for e in entries:
            self._insert(e)
        self.has_const_entries = True

    def reset_counters(self) -> None:
        if self.native is not None:
            self.native.sync(self)
        for e in self._entries.values():
            e.packets = e.bytes = 0

    # -- data plane --------------------------------------------------------------------

    def _changed(self, ent: Entry, add: bool) -> None:
        if self.native is not None:
            self.native.changed(self)
        if self.exact_only:
            k = self._exact_key(ent.key)
            if add:
                self.exact[k] = self._hit(ent)
            else:
                self.exact.pop(k, None)
        else:
            self._dirty = True

    def _rebuild(self) -> None:
        ents = sorted(self._entries.values(), key=lambda e: (-self._rank(e), e.seq))
        if self.has_range:
            self._linear = [(self._matcher(e), self._hit(e)) for e in ents]
            self._groups = []
        else:
            groups: dict[tuple, dict] = {}
            best: dict[tuple, int] = {}
            for e in ents:  # best first: the first entry per masked key wins
                masks, vals = self._mask_vals(e)
                d = groups.setdefault(masks, {})
                if vals not in d:
                    d[vals] = (self._rank(e), -e.seq, self._hit(e))
                best.setdefault(masks, self._rank(e))
            self._groups = sorted(
                ((m, d, best[m]) for m, d in groups.items()), key=lambda g: -g[2]
            )
        self._dirty = False

    def _rank(self, e: Entry) -> int:
        if self.needs_priority:
            return e.priority
        for (_, kind, _), k in zip(self.match_fields, e.key, strict=True):
            if kind == "lpm":
                return k[1]
        return 0

    def _mask_vals(self, e: Entry) -> tuple[tuple, tuple]:
        masks, vals = [], []
        for (_, kind, w), k in zip(self.match_fields, e.key, strict=True):
            full = (1 << w) - 1
            if kind == "exact":
                masks.append(full)
                vals.append(k)
            elif kind == "valid":
                masks.append(1)
                vals.append(int(k))
            elif kind == "lpm":
                m = full ^ ((1 << (w - k[1])) - 1)
                masks.append(m)
                vals.append(k[0] & m)
            elif kind == "ternary":
                masks.append(k[1])
                vals.append(k[0] & k[1])
            elif kind == "optional":
                masks.append(0 if k is None else full)
                vals.append(0 if k is None else k)
        return tuple(masks), tuple(vals)

    def _matcher(self, e: Entry):
        checks = []
        for i, ((_, kind, w), k) in enumerate(zip(self.match_fields, e.key, strict=True)):
            full = (1 << w) - 1
            if kind == "range":
                checks.append((i, None, k[0], k[1]))
            elif kind == "exact":
                checks.append((i, full, k, None))
            elif kind == "valid":
                checks.append((i, 1, int(k), None))
            elif kind == "lpm":
                m = full ^ ((1 << (w - k[1])) - 1)
                checks.append((i, m, k[0] & m, None))
            elif kind == "ternary":
                checks.append((i, k[1], k[0] & k[1], None))
            elif kind == "optional" and k is not None:
                checks.append((i, full, k, None))
        return tuple(checks)

    def match(self, key: tuple) -> tuple:
        """The hit for a lookup key (a tuple of field values), or the miss."""
        if self._dirty:
            self._rebuild()
        if self._groups:
            best = None
            for masks, d, top in self._groups:
                if best is not None and top < best[0]:
                    break
                h = d.get(tuple([k & m for k, m in zip(key, masks, strict=True)]))
                if h is not None and (best is None or h[:2] > best[:2]):
                    best = h
            return self.miss if best is None else best[2]
        for checks, hit in self._linear:
            for i, m, v, hi in checks:
                k = key[i]
                if m is None:
                    if not v <= k <= hi:
                        break
                elif k & m != v:
                    break
            else:
                return hit
        return self.miss


def _noop(F, *args):
    return None
