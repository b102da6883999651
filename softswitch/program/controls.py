"""Pipelines (tables, conditionals, action calls) -> one Python function per node.

A node function takes F and returns the next node function (None at the end).
The pipeline driver calls nodes until None or until exit() marked the packet.
"""

from __future__ import annotations

from ..tables import INT32_MAX, Entry, Table
from .exprs import parse_hex
from .layout import EXIT, INLEN, bad


class ControlCompiler:
    def __init__(self, env, mod, actions_by_id: dict, action_fn: dict, lock):
        self.env = env
        self.L = env.L
        self.mod = mod
        self.actions_by_id = actions_by_id  # id -> JSON action
        self.action_fn = action_fn  # id -> generated function name
        self.lock = lock
        self.tables: dict[str, Table] = {}
        self.bindings: list = []  # (table, {action name: fn name}, ...) resolved after exec
        self.const_entries: dict[str, list[Entry]] = {}
        self.table_action_ids: dict[str, dict[str, int]] = {}  # table -> action name -> id
        from .exprs import ExprCompiler

        self.x = ExprCompiler(env.L, mod, [], env.registers)

    def table_actions(self, t: dict) -> tuple[list[str], dict[str, int]]:
        """The table's action names and the JSON action id each is bound to.

        p4c may emit several actions of one name (a copy per call site), so a
        table's actions are bound by 'action_ids', as BMv2 does; its names
        ('actions', the control plane's handle) are unique within the table.
        """
        ids = t.get("action_ids")
        if ids is None:  # older JSON without ids: names must be unique program-wide
            ids = [self.action_by_name(an)["id"] for an in t.get("actions", [])]
        names, by_name = [], {}
        for aid in ids:
            a = self.actions_by_id.get(aid)
            if a is None:
                raise bad(f"table {t['name']!r}: unknown action id {aid!r}")
            if a["name"] in by_name:
                raise bad(f"table {t['name']!r}: two actions named {a['name']!r}")
            names.append(a["name"])
            by_name[a["name"]] = aid
        return names, by_name

    def action_by_name(self, name: str) -> dict:
        found = [a for a in self.actions_by_id.values() if a["name"] == name]
        if len(found) != 1:
            raise bad(f"{'ambiguous' if found else 'unknown'} action {name!r}")
        return found[0]

    def params_of(self, a: dict) -> list[tuple[str, int]]:
        return [(r["name"], int(r["bitwidth"])) for r in a.get("runtime_data", [])]

    # -- keys ---------------------------------------------------------------------------

    def key_field(self, k: dict) -> tuple[str, str, int, str]:
        """(name, match kind, width, Python expression) for one table key element."""
        mt = k.get("match_type")
        tgt = k.get("target")
        if mt == "valid":
            h = self.L.header(tgt if isinstance(tgt, str) else tgt[0])
            return k.get("name", h.name), "valid", 1, f"F[{h.base}]"
        if mt not in ("exact", "lpm", "ternary", "range", "optional"):
            raise bad(f"unsupported match type {mt!r}")
        h, fi, slot = self.L.field(tgt[0], tgt[1])
        name = k.get("name") or f"{tgt[0]}.{tgt[1]}"
        code = f"F[{slot}]"
        width = fi.width
        if fi.signed:
            code = f"({code} & {fi.mask})"
        if not h.metadata and fi.name != "$valid$":
            code = f"({code} if F[{h.base}] else 0)"
        m = k.get("mask")
        if m is not None:
            # the key keeps the field's width, as in BMv2 and the P4Info
            code = f"({code} & {parse_hex(m) & fi.mask})"
        return name, mt, width, code

    def key_mask(self, k: dict) -> int | None:
        m = k.get("mask")
        if m is None or k.get("match_type") == "valid":
            return None
        return parse_hex(m) & self.L.field(k["target"][0], k["target"][1])[1].mask

    # -- tables -------------------------------------------------------------------------

    def table(self, t: dict, node_fn: dict) -> list[str]:
        name = t["name"]
        if t.get("type", "simple") != "simple":
            raise bad(f"table {name!r}: action profiles/selectors are not supported")
        keys = [self.key_field(k) for k in t.get("key", [])]
        match_fields = [(n, mt, w) for n, mt, w, _ in keys]
        action_names, ids = self.table_actions(t)
        self.table_action_ids[name] = ids
        params = {}
        fns = {}
        for an in action_names:
            a = self.actions_by_id[ids[an]]
            params[an] = self.params_of(a)
            fns[an] = self.action_fn[a["id"]]
        de = t.get("default_entry")
        default = None
        const_default = entry_const = False
        if de is not None:
            a = self.actions_by_id.get(de.get("action_id"))
            if a is None:
                raise bad(f"table {name!r}: unknown default action id")
            data = [parse_hex(v) for v in de.get("action_data", [])]
            if len(data) != len(self.params_of(a)):
                raise bad(f"table {name!r}: default action data has the wrong length")
            data = [v & ((1 << w) - 1) for v, (_, w) in zip(data, self.params_of(a), strict=True)]
            if a["name"] not in params:  # default-only action not listed in 'actions'
                params[a["name"]] = self.params_of(a)
                fns[a["name"]] = self.action_fn[a["id"]]
                action_names.append(a["name"])
                ids[a["name"]] = a["id"]
            elif ids[a["name"]] != a["id"]:
                raise bad(f"table {name!r}: default action id {a['id']} is not the table's "
                          f"{a['name']!r} (id {ids[a['name']]})")
            default = (a["name"], data)
            const_default = bool(de.get("action_const", False))
            entry_const = bool(de.get("action_entry_const", False))
        direct = None
        for c in self.env.direct_counters:
            if c.get("binding") == name:
                direct = c["name"]
        tbl = Table(
            name,
            int(t.get("max_size", 1024)),
            match_fields,
            action_names,
            params,
            self.lock,
            default=default,
            has_const_default=const_default,
            default_entry_const=entry_const,
            direct_counter=direct,
            with_counters=bool(t.get("with_counters", False)) or direct is not None,
            key_masks=[self.key_mask(k) for k in t.get("key", [])],
        )
        self.tables[name] = tbl
        nt = t.get("next_tables", {})

        def node(n):
            if n is None:
                return None
            if n not in node_fn:
                raise bad(f"table {name!r}: unknown next node {n!r}")
            return node_fn[n]

        hit_miss = None
        if "__HIT__" in nt or "__MISS__" in nt:
            hit_miss = (node(nt.get("__HIT__")), node(nt.get("__MISS__")))
        nexts = {an: node(nt.get(an)) for an in action_names}
        self.bindings.append((tbl, fns, nexts, hit_miss, node(t.get("base_default_next"))))
        entries = []
        for i, ce in enumerate(t.get("entries", []) or []):
            entries.append(self.const_entry(tbl, ce, i))
        self.const_entries[name] = entries

        tname = self.mod.bind(tbl, "T")
        fname = node_fn[name]
        body = []
        if not keys:
            if const_default and entry_const and default is not None:
                an, data = default
                nxt = hit_miss[1] if hit_miss else nexts.get(an)
                args = "".join(f", {v}" for v in data)
                body = [f"{fns[an]}(F{args})", f"return {nxt}"]
                return [f"def {fname}(F):"] + ["    " + b for b in body]
            body.append(f"h = {tname}.miss")
        elif tbl.exact_only:
            d = self.mod.bind(tbl.exact, "D")
            kc = keys[0][3] if len(keys) == 1 else "(" + ", ".join(k[3] for k in keys) + ",)"
            body += [f"h = {d}.get({kc})", "if h is None:", f"    h = {tname}.miss"]
        else:
            kc = "(" + ", ".join(k[3] for k in keys) + ",)"
            body.append(f"h = {tname}.match({kc})")
        body.append("fn, args, nxt, e = h")
        if tbl.with_counters:
            body += ["if e is not None:", "    e.packets += 1", f"    e.bytes += F[{INLEN}]"]
        meter_target = self.env.direct_meter_targets.get(name)
        if meter_target is not None:
            body += ["if e is not None:", f"    F[{meter_target}] = 0"]
        body += ["fn(F, *args)", "return nxt"]
        return [f"def {fname}(F):"] + ["    " + b for b in body]

    def const_entry(self, tbl: Table, ce: dict, index: int) -> Entry:
        key = []
        mk = ce.get("match_key", [])
        if len(mk) != len(tbl.match_fields):
            raise bad(f"table {tbl.name!r}: const entry key has the wrong length")
        for (_, kind, w), k in zip(tbl.match_fields, mk, strict=True):
            mt = k.get("match_type")
            full = (1 << w) - 1
            if kind == "exact":
                key.append(parse_hex(k["key"]) & full)
            elif kind == "valid":
                key.append(bool(k["key"]))
            elif kind == "lpm":
                plen = int(k["prefix_length"])
                pm = full ^ ((1 << (w - plen)) - 1)
                key.append((parse_hex(k["key"]) & pm, plen))
            elif kind == "ternary":
                m = parse_hex(k["mask"]) & full
                key.append((parse_hex(k["key"]) & m, m))
            elif kind == "range":
                key.append((parse_hex(k["start"]) & full, parse_hex(k["end"]) & full))
            elif kind == "optional":
                if mt == "ternary" or "mask" in k:
                    m = parse_hex(k.get("mask", "0x0")) & full
                    key.append(None if m == 0 else parse_hex(k["key"]) & full)
                else:
                    key.append(parse_hex(k["key"]) & full)
        ae = ce.get("action_entry", {})
        a = self.actions_by_id.get(ae.get("action_id"))
        if a is None or self.table_action_ids[tbl.name].get(a["name"]) != a["id"]:
            raise bad(f"table {tbl.name!r}: const entry with an unknown action")
        spec = self.params_of(a)
        data = [parse_hex(v) & ((1 << w) - 1)
                for v, (_, w) in zip(ae.get("action_data", []), spec, strict=False)]
        if len(data) != len(spec):
            raise bad(f"table {tbl.name!r}: const entry action data has the wrong length")
        prio = 0
        if tbl.needs_priority:
            # BMv2: a smaller number wins; P4Runtime (the contract): a larger one.
            jp = ce.get("priority")
            prio = INT32_MAX - (int(jp) if jp is not None else index + 1)
        return Entry(tuple(key), a["name"], data, prio)

    # -- pipelines ----------------------------------------------------------------------

    @staticmethod
    def check_acyclic(p: dict) -> None:
        """A control flow graph must be a DAG (p4c's always are): no packet can loop."""
        succ: dict[str, set] = {}
        for t in p.get("tables", []):
            nt = t.get("next_tables", {}) or {}
            succ[t["name"]] = {n for n in list(nt.values()) + [t.get("base_default_next")] if n}
        for c in p.get("conditionals", []):
            succ[c["name"]] = {n for n in (c.get("true_next"), c.get("false_next")) if n}
        for ac in p.get("action_calls", []) or []:
            succ[ac["name"]] = {ac["next_node"]} if ac.get("next_node") else set()
        state: dict[str, int] = {}  # 1 on the DFS stack, 2 done
        for root in succ:
            if state.get(root):
                continue
            stack = [(root, iter(succ[root]))]
            state[root] = 1
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[node] = 2
                    stack.pop()
                elif state.get(nxt) == 1:
                    raise bad(f"pipeline {p['name']!r}: control flow loops through {nxt!r}")
                elif not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, iter(succ.get(nxt, ()))))

    def pipeline(self, p: dict) -> str:
        pname = p["name"]
        node_fn: dict[str, str] = {}
        for t in p.get("tables", []):
            node_fn[t["name"]] = self.mod.fresh("t")
        for c in p.get("conditionals", []):
            node_fn[c["name"]] = self.mod.fresh("c")
        for ac in p.get("action_calls", []) or []:
            node_fn[ac["name"]] = self.mod.fresh("ac")
        for t in p.get("tables", []):
            self.mod.emit(self.table(t, node_fn))
        for c in p.get("conditionals", []):
            e = self.x.boolean(c.get("expression"))
            tn = node_fn.get(c.get("true_next")) if c.get("true_next") else "None"
            fn_ = node_fn.get(c.get("false_next")) if c.get("false_next") else "None"
            if tn is None or fn_ is None:
                raise bad(f"conditional {c['name']!r}: unknown next node")
            self.mod.emit([f"def {node_fn[c['name']]}(F):",
                           f"    return {tn} if {e.code} else {fn_}"])
        for ac in p.get("action_calls", []) or []:
            fn = self.action_fn.get(ac.get("action_id"))
            if fn is None:
                raise bad(f"action call {ac['name']!r}: unknown action")
            nxt = node_fn.get(ac.get("next_node")) if ac.get("next_node") else "None"
            self.mod.emit([f"def {node_fn[ac['name']]}(F):", f"    {fn}(F)", f"    return {nxt}"])
        init = p.get("init_table")
        if init is not None and init not in node_fn:
            raise bad(f"pipeline {pname!r}: unknown init node {init!r}")
        self.check_acyclic(p)
        first = node_fn[init] if init is not None else "None"
        drv = self.mod.fresh("run")
        self.mod.emit([
            f"def {drv}(F):",
            f"    n = {first}",
            "    while n is not None:",
            f"        if F[{EXIT}]:",
            "            return",
            "        n = n(F)",
        ])
        return drv
