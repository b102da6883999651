"""Pipelines (tables, conditionals, action calls) -> one IR function each, a block per node.

A table's block computes its key as controls.py does, finds the row (a hash probe for
exact tables, else the first matching row), runs the row's action (or the miss action)
and goes on to the node the JSON names for that action, or for hit and miss.
"""

from __future__ import annotations

from ..program.exprs import parse_hex
from ..program.layout import EXIT, INLEN
from .exprs import Ctx
from .ir import Fn, Unsupported
from .tables import GOLDEN, s64


def key_values(ctx: Ctx, t: dict) -> list[str]:
    """The table's lookup key, one unsigned i64 per key field (controls.key_field)."""
    f = ctx.fn
    L = ctx.L
    out = []
    for k in t.get("key", []):
        mt, tgt = k.get("match_type"), k.get("target")
        if mt == "valid":
            h = L.header(tgt if isinstance(tgt, str) else tgt[0])
            out.append(f.load("%F", str(h.base)))
            continue
        if mt not in ("exact", "lpm", "ternary", "range", "optional"):
            raise Unsupported(f"match type {mt!r}")
        h, fi, slot = L.field(tgt[0], tgt[1])
        if fi.width > 64:
            raise Unsupported("a key field wider than 64 bits")
        x = f.load("%F", str(slot))
        if fi.signed and fi.width < 64:
            x = f.op(f"and i64 {x}, {fi.mask}")
        if not h.metadata and fi.name != "$valid$":
            on = f.op(f"icmp ne i64 {f.load('%F', str(h.base))}, 0")
            x = f.op(f"select i1 {on}, i64 {x}, i64 0")
        m = k.get("mask")
        if m is not None:
            x = f.op(f"and i64 {x}, {s64(parse_hex(m) & fi.mask)}")
        out.append(x)
    return out


def lookup(env, ctx: Ctx, t: dict, lay, tindex: int) -> tuple[str, str]:
    """(row or -1, buffer pointer) of the table's lookup in the current block."""
    f = ctx.fn
    keys = key_values(ctx, t)
    TP = ctx.ptr(env.store.TABLES)
    raw = f.load(TP, str(tindex))
    B = f.op(f"inttoptr i64 {raw} to ptr")
    n = f.load(B, "0")
    res = f.local("i64", "-1")
    done = f.label("lkdone")
    S, R0 = lay.stride, lay.r0
    kinds = [k.get("match_type") for k in t.get("key", [])]
    if not keys:
        f.br(done)
        f.block(done)
        return "-1", B
    if lay.hashed:
        h = "0"
        for k in keys:
            x = f.op(f"xor i64 {h}, {k}")
            h = f.op(f"mul i64 {x}, {s64(GOLDEN)}")
        h = f.op(f"xor i64 {h}, {f.op(f'lshr i64 {h}, 29')}")
        cap = f.load(B, str(2 + lay.nparams))
        capm = f.op(f"sub i64 {cap}, 1")
        hix = f.op(f"add i64 {f.op(f'mul i64 {n}, {S}')}, {R0}")
        probe = f.local("i64", None)
        f.emit(f"store i64 {f.op(f'and i64 {h}, {capm}')}, ptr {probe}")
        head, body, nxt = f.label("probe"), f.label("probebody"), f.label("probenext")
        f.br(head)
        f.block(head)
        pv = f.op(f"load i64, ptr {probe}")
        r = f.load(B, f.op(f"add i64 {hix}, {pv}"))
        empty = f.op(f"icmp slt i64 {r}, 0")
        f.cbr(empty, done, body)
        f.block(body)
        row = f.op(f"add i64 {f.op(f'mul i64 {r}, {S}')}, {R0}")
        eq = "true"
        for i, k in enumerate(keys):
            v = f.load(B, f.op(f"add i64 {row}, {2 * i}"))
            e = f.op(f"icmp eq i64 {k}, {v}")
            eq = e if eq == "true" else f.op(f"and i1 {eq}, {e}")
        hit = f.label("probehit")
        f.cbr(eq, hit, nxt)
        f.block(hit)
        f.emit(f"store i64 {r}, ptr {res}")
        f.br(done)
        f.block(nxt)
        pn = f.op(f"add i64 {pv}, 1")
        f.emit(f"store i64 {f.op(f'and i64 {pn}, {capm}')}, ptr {probe}")
        f.br(head)
    else:
        iv = f.local("i64", "0")
        head, body, nxt = f.label("scan"), f.label("scanbody"), f.label("scannext")
        f.br(head)
        f.block(head)
        r = f.op(f"load i64, ptr {iv}")
        f.cbr(f.op(f"icmp slt i64 {r}, {n}"), body, done)
        f.block(body)
        row = f.op(f"add i64 {f.op(f'mul i64 {r}, {S}')}, {R0}")
        for i, (k, kind) in enumerate(zip(keys, kinds, strict=True)):
            a = f.load(B, f.op(f"add i64 {row}, {2 * i}"))
            b = f.load(B, f.op(f"add i64 {row}, {2 * i + 1}"))
            if kind == "range":
                c = f.op(f"and i1 {f.op(f'icmp uge i64 {k}, {a}')}, "
                         f"{f.op(f'icmp ule i64 {k}, {b}')}")
            else:
                c = f.op(f"icmp eq i64 {f.op(f'and i64 {k}, {b}')}, {a}")
            ok = f.label("keyok")
            f.cbr(c, ok, nxt)
            f.block(ok)
        f.emit(f"store i64 {r}, ptr {res}")
        f.br(done)
        f.block(nxt)
        f.emit(f"store i64 {f.op(f'add i64 {r}, 1')}, ptr {iv}")
        f.br(head)
    f.block(done)
    return f.op(f"load i64, ptr {res}", "row"), B


def compile_pipeline(env, p: dict) -> str:
    """`void @pipe(F, C)` for one JSON pipeline."""
    ctrl = env.controls  # program.controls.ControlCompiler: tables, action ids
    name = env.mod.name("pipe")
    f: Fn = env.mod.fn(name, ["ptr noalias %F", "ptr noalias %C"])
    ctx = Ctx(f, env.L, env.store)
    labels = {}
    for t in p.get("tables", []):
        labels[t["name"]] = f.label("tbl")
    for c in p.get("conditionals", []):
        labels[c["name"]] = f.label("cond")
    for ac in p.get("action_calls", []) or []:
        labels[ac["name"]] = f.label("call")
    end = f.label("end")

    def node(n) -> str:
        if n is None:
            return end
        if n not in labels:
            raise Unsupported(f"unknown next node {n!r}")
        return labels[n]

    def enter(lbl: str) -> None:
        f.block(lbl)
        go = f.label("go")
        f.cbr(f.op(f"icmp ne i64 {f.load('%F', str(EXIT))}, 0"), end, go)
        f.block(go)
        ctx.start()

    init = p.get("init_table")
    f.br(node(init))
    for t in p.get("tables", []):
        tname = t["name"]
        if t.get("type", "simple") != "simple":
            raise Unsupported(f"table {tname!r}: action profiles")
        if tname in env.direct_meter_targets:
            raise Unsupported(f"table {tname!r}: direct meters")
        tbl = ctrl.tables[tname]
        ti = env.tables.index[tname]
        lay = env.tables.layouts[ti]
        enter(labels[tname])
        row, B = lookup(env, ctx, t, lay, ti)
        nk, S, R0 = lay.nkeys, lay.stride, lay.r0
        hit = f.op(f"icmp sge i64 {row}, 0")
        rbase = f.op(f"add i64 {f.op(f'mul i64 {row}, {S}')}, {R0}")
        aslot = f.op(f"select i1 {hit}, i64 {f.op(f'add i64 {rbase}, {2 * nk}')}, i64 1")
        pslot = f.op(f"select i1 {hit}, i64 {f.op(f'add i64 {rbase}, {2 * nk + 2}')}, i64 2")
        aid = f.load(B, aslot)
        if tbl.with_counters:
            cnt, go = f.label("dcount"), f.label("dcdone")
            f.cbr(hit, cnt, go)
            f.block(cnt)
            ent = f.load(B, f.op(f"add i64 {rbase}, {2 * nk + 1}"))
            DCP = ctx.ptr(env.store.DCOUNTERS)
            D = f.op(f"inttoptr i64 {f.load(DCP, str(ti))} to ptr")
            c0 = f.op(f"mul i64 {ent}, 2")
            f.store(D, c0, f.op(f"add i64 {f.load(D, c0)}, 1"))
            c1 = f.op(f"add i64 {c0}, 1")
            f.store(D, c1, f.op(f"add i64 {f.load(D, c1)}, {f.load('%F', str(INLEN))}"))
            f.br(go)
            f.block(go)
        nt = t.get("next_tables", {}) or {}
        hit_miss = "__HIT__" in nt or "__MISS__" in nt
        cases = []
        for i, an in enumerate(tbl.action_names):
            aid_json = ctrl.table_action_ids[tname][an]
            lbl = f.label("act")
            cases.append((i, lbl, an, aid_json))
        none = f.label("noact")
        f.emit(f"switch i64 {aid}, label %{none} [" +
               " ".join(f"i64 {i}, label %{lbl}" for i, lbl, _, _ in cases) + "]")
        f.open = False
        after_hm = None
        if hit_miss:
            after_hm = f.label("hm")
        for _, lbl, an, aid_json in cases:
            f.block(lbl)
            nparams = len(tbl.params_of(an))
            args = "".join(f", i64 {f.load(B, f.op(f'add i64 {pslot}, {k}'))}"
                           for k in range(nparams))
            f.emit(f"call void @{env.action_fn[aid_json]}(ptr %F, ptr %C{args})")
            f.br(after_hm if hit_miss else node(nt.get(an)))
        f.block(none)  # no action (no default either): the base default next node
        f.br(node(t.get("base_default_next")))
        if hit_miss:
            f.block(after_hm)
            f.cbr(hit, node(nt.get("__HIT__")), node(nt.get("__MISS__")))
    for c in p.get("conditionals", []):
        enter(labels[c["name"]])
        e = ctx.boolean(c.get("expression"))
        tn = node(c.get("true_next")) if c.get("true_next") else end
        fn_ = node(c.get("false_next")) if c.get("false_next") else end
        f.cbr(e.ref, tn, fn_)
    for ac in p.get("action_calls", []) or []:
        enter(labels[ac["name"]])
        fn = env.action_fn.get(ac.get("action_id"))
        if fn is None:
            raise Unsupported(f"action call {ac['name']!r}: unknown action")
        f.emit(f"call void @{fn}(ptr %F, ptr %C)")
        f.br(node(ac.get("next_node")) if ac.get("next_node") else end)
    f.block(end)
    f.retv()
    return name
