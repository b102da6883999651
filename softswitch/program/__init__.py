"""Translation of a BMv2 JSON program into Python functions, once, at load time."""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
from dataclasses import dataclass, field

from ..errors import SwitchError
from ..externs import Counter, MeterArray, Register
from ..tables import Table
from .actions import Env, compile_action
from .controls import ControlCompiler
from .deparsers import compile_calculation, compile_checksums, compile_deparser
from .layout import Layout, bad
from .lazy import HELPERS as LAZY_HELPERS
from .lazy import lazify
from .module import Module
from .parsers import ParserCompiler
from .runtime import HELPERS
from .vector import HELPERS as VECTOR_HELPERS
from .vector import RandomBatch, forget_shapes, plan_banks

SUPPORTED_MAJOR = 2
DEEP_RECURSION = 20000

# Fields simple_switch needs, by the names it uses (aliases resolve them).
REQUIRED = ("ingress_port", "packet_length", "instance_type", "egress_spec", "egress_port")
OPTIONAL = {
    "parser_error": "standard_metadata.parser_error",
    "checksum_error": "standard_metadata.checksum_error",
    "mcast_grp": "intrinsic_metadata.mcast_grp",
    "egress_rid": "intrinsic_metadata.egress_rid",
    "priority": "intrinsic_metadata.priority",
    "ingress_global_timestamp": "intrinsic_metadata.ingress_global_timestamp",
    "egress_global_timestamp": "intrinsic_metadata.egress_global_timestamp",
    "enq_timestamp": "queueing_metadata.enq_timestamp",
    "enq_qdepth": "queueing_metadata.enq_qdepth",
    "deq_timedelta": "queueing_metadata.deq_timedelta",
    "deq_qdepth": "queueing_metadata.deq_qdepth",
    "qid": "queueing_metadata.qid",
}


@dataclass
class Program:
    json: dict
    layout: Layout
    source: str
    init_slots: list
    tables: dict[str, Table]
    registers: dict[str, Register]
    counters: dict[str, Counter]
    meters: dict[str, MeterArray]
    parse: object
    deparse: object
    verify_checksums: object
    update_checksums: object
    ingress: object
    egress: object
    field_lists: dict[int, list[int]]
    action_params: dict[str, list[tuple[str, int]]]
    sm: dict[str, tuple[int, int] | None]  # target name -> (slot, mask)
    metadata_slots: list[int]
    vsets: dict[str, set] = field(default_factory=dict)
    # standard metadata writes of the packet flow, generated for the program's slots
    set_ingress_meta: object = None  # (F, port, pktlen, itype, now, new)
    set_parse_result: object = None  # (F, parser_error, checksum_error)
    set_egress_meta: object = None  # (F, port, now, pktlen)
    controls: object = None  # the ControlCompiler: table action ids the native tier needs
    native: object = None  # native.NativeProgram when the packet path is compiled


def decode(config) -> dict:
    if isinstance(config, dict):
        return config
    if isinstance(config, (bytes, bytearray)):
        try:
            config = bytes(config).decode("utf-8")
        except UnicodeDecodeError:
            raise bad("program is not UTF-8 JSON") from None
    if not isinstance(config, str):
        raise bad(f"program must be JSON text or a dict, not {type(config).__name__}")
    try:
        j = json.loads(config)
    except json.JSONDecodeError as e:
        raise bad(f"program is not valid JSON: {e}") from None
    if not isinstance(j, dict):
        raise bad("program JSON must be an object")
    return j


def compile_program(config, *, lock: threading.RLock, rng: random.Random,
                    log: logging.Logger, drop_port: int = 511, vectorize: bool = True,
                    nprng: RandomBatch | None = None) -> Program:
    j = decode(config)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_RECURSION))  # deep expressions recurse deeply
    try:
        return _compile(j, lock, rng, log, drop_port, vectorize,
                        nprng if nprng is not None else RandomBatch(rng.getrandbits(64)))
    except SwitchError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise bad(f"malformed program JSON: {type(e).__name__}: {e}") from None
    except (SyntaxError, RecursionError, MemoryError, OverflowError) as e:
        # never a half-loaded switch, whatever the input
        raise bad(f"could not translate the program: {type(e).__name__}: {e}") from None
    finally:
        sys.setrecursionlimit(limit)
        forget_shapes()


def _compile(j: dict, lock, rng, log, drop_port, vectorize, nprng) -> Program:
    """The steps below run in this order: each names its functions with mod.fresh, so the
    order is the generated source, and the first malformed part found is the one reported."""
    _check_shape(j)
    L = Layout(j)
    mod = _new_module(rng, log)
    env = _new_env(j, L, mod, lock, drop_port, vectorize, nprng)
    actions_by_id, action_fn, action_params = _compile_actions(env, mod, j)
    parse_name, deparse_name, ver_name, upd_name = _compile_parser_side(env, mod, j)
    cc = ControlCompiler(env, mod, actions_by_id, action_fn, lock)
    ing_name, eg_name = _compile_pipelines(cc, j)
    sm = _standard_metadata(L)
    meta_names = _emit_metadata_setters(mod, sm, drop_port)
    field_lists = _field_lists(j, L)
    source, ns, lazy_runs = _run_source(mod, L, field_lists, sm, vectorize)
    _bind_tables(cc, ns)
    return Program(
        json=j,
        layout=L,
        source=source,
        init_slots=_initial_slots(L, lazy_runs),
        tables=cc.tables,
        registers=env.registers,
        counters=env.counters,
        meters=env.meters,
        parse=ns[parse_name],
        deparse=ns[deparse_name],
        verify_checksums=ns[ver_name],
        update_checksums=ns[upd_name],
        ingress=ns[ing_name],
        egress=ns[eg_name],
        field_lists=field_lists,
        action_params=action_params,
        sm=sm,
        metadata_slots=L.metadata_slots(),
        vsets=env.vsets,
        set_ingress_meta=ns[meta_names[0]],
        set_parse_result=ns[meta_names[1]],
        set_egress_meta=ns[meta_names[2]],
        controls=cc,
    )


def _check_shape(j: dict) -> None:
    """A BMv2 JSON version this reads, and lists where lists belong."""
    meta = j.get("__meta__", {})
    ver = meta.get("version")
    if ver is not None and (not isinstance(ver, list) or not ver or ver[0] != SUPPORTED_MAJOR):
        raise bad(f"unsupported BMv2 JSON version {ver!r} (need {SUPPORTED_MAJOR}.x)")
    for key in ("header_types", "headers", "parsers", "deparsers", "pipelines", "actions"):
        if not isinstance(j.get(key, []), list):
            raise bad(f"'{key}' must be a list")


def _new_module(rng, log) -> Module:
    """The module the program's functions go into, with the helpers they call."""
    mod = Module()
    mod.globals.update(HELPERS)
    mod.globals.update(VECTOR_HELPERS)
    mod.globals.update(LAZY_HELPERS)
    mod.globals["_rng"] = rng
    mod.globals["_log_error"] = log.error

    def _log_msg(fmt: str, args: tuple) -> None:
        log.info(_format(fmt, args))

    mod.globals["_log_msg"] = _log_msg
    return mod


def _new_env(j: dict, L: Layout, mod: Module, lock, drop_port, vectorize, nprng) -> Env:
    """The program's stateful objects, and the Env its actions are compiled in, with its
    calculations compiled."""
    registers = {}
    for r in j.get("register_arrays", []):
        registers[r["name"]] = Register(r["name"], _size(r), _width(r["bitwidth"]), lock)
    counters, direct = {}, []
    for c in j.get("counter_arrays", []):
        if c.get("is_direct"):
            direct.append(c)
        else:
            counters[c["name"]] = Counter(c["name"], _size(c), lock)
    meters, meter_targets = {}, {}
    for m in j.get("meter_arrays", []):
        if m.get("is_direct"):
            tgt = m.get("result_target")
            if tgt:
                meter_targets[m.get("binding")] = L.field(tgt[0], tgt[1])[2]
            continue
        meters[m["name"]] = MeterArray(m["name"], _size(m), m.get("type", "packets"),
                                       int(m.get("rate_count", 2)), lock)
    env = Env(L, mod, registers, counters, meters, {}, drop_port)
    env.direct_counters = direct
    env.direct_meter_targets = meter_targets
    env.vsets = {v["name"]: set() for v in j.get("parse_vsets", [])}
    env.vectorize = vectorize
    if vectorize:
        env.banks = plan_banks(j.get("actions", []), registers)
        env.nprng = mod.bind(nprng, "nprng")
    for c in j.get("calculations", []):
        env.calcs[c["name"]] = compile_calculation(env, mod, c)
    return env


def _compile_actions(env: Env, mod: Module, j: dict) -> tuple[dict, dict, dict]:
    """Every action as a function: (id -> JSON, id -> function name, name -> params)."""
    actions_by_id, action_fn, action_params = {}, {}, {}
    for a in j.get("actions", []):
        aid = int(a["id"])
        if aid in actions_by_id:
            raise bad(f"duplicate action id {aid}")
        actions_by_id[aid] = a
        fname = mod.fresh("a")
        action_fn[aid] = fname
        mod.emit(compile_action(env, fname, a))
        rd = a.get("runtime_data", [])
        action_params.setdefault(a["name"], [(r["name"], int(r["bitwidth"])) for r in rd])
    return actions_by_id, action_fn, action_params


def _compile_parser_side(env: Env, mod: Module, j: dict) -> tuple[str, str, str, str]:
    """The parser, deparser and checksum functions' names (verify, update)."""
    parsers = j.get("parsers", [])
    if not parsers:
        raise bad("program has no parser")
    pc = ParserCompiler(env, mod)
    parse_name = pc.compile_parser(_pick(parsers, "parser"))
    deparsers = j.get("deparsers", [])
    if not deparsers:
        raise bad("program has no deparser")
    deparse_name = compile_deparser(env, mod, _pick(deparsers, "deparser"))
    ver_name, upd_name = compile_checksums(env, mod, j.get("checksums", []), env.calcs)
    return parse_name, deparse_name, ver_name, upd_name


def _compile_pipelines(cc: ControlCompiler, j: dict) -> tuple[str, str]:
    pipes = {p["name"]: p for p in j.get("pipelines", [])}
    if "ingress" not in pipes or "egress" not in pipes:
        raise bad("program needs pipelines named 'ingress' and 'egress' (v1model)")
    return cc.pipeline(pipes["ingress"]), cc.pipeline(pipes["egress"])


def _standard_metadata(L: Layout) -> dict[str, tuple[int, int] | None]:
    """simple_switch's metadata names -> (slot, mask), None where the program lacks one."""
    sm: dict[str, tuple[int, int] | None] = {}
    for n in REQUIRED:
        r = L.resolve(f"standard_metadata.{n}")
        if r is None:
            raise bad(f"program lacks standard_metadata.{n}, which simple_switch needs")
        sm[n] = (r[1], r[0].mask)
    for n, dotted in OPTIONAL.items():
        r = L.resolve(dotted)
        if r is None and dotted.split(".")[0] != "standard_metadata":
            r = L.resolve("standard_metadata." + n)
        sm[n] = None if r is None else (r[1], r[0].mask)
    return sm


def _field_lists(j: dict, L: Layout) -> dict[int, list[int]]:
    """Field list id -> the slots of its fields."""
    field_lists = {}
    for fl in j.get("field_lists", []) or []:
        slots = []
        for el in fl.get("elements", []):
            if el.get("type") == "field":
                slots.append(L.field(el["value"][0], el["value"][1])[2])
        field_lists[int(fl["id"])] = slots
    return field_lists


def _run_source(mod: Module, L: Layout, field_lists: dict, sm: dict,
                vectorize: bool) -> tuple[str, dict, dict]:
    """The module's source (lazified where vectorized), executed: (source, its namespace,
    the lazy runs). Fields a field list or the metadata setters read stay eager."""
    excluded = {s for slots in field_lists.values() for s in slots}
    excluded |= {v[0] for v in sm.values() if v is not None}
    lines, lazy_runs = mod.source().split("\n"), {}
    if vectorize:  # the scalar code stays the plain reference
        lines, lazy_runs = lazify(lines, L, excluded)
    source = "\n".join(lines)
    ns = mod.globals
    code = compile(source, "<softswitch program>", "exec")
    exec(code, ns)  # noqa: S102 - our own generated source
    return source, ns, lazy_runs


def _bind_tables(cc: ControlCompiler, ns: dict) -> None:
    """Each table given its compiled action and next-node functions, and its const
    entries."""
    for tbl, fns, nexts, hit_miss, base_next in cc.bindings:
        fobjs = {an: ns[f] for an, f in fns.items()}
        nobjs = {an: (ns[n] if n else None) for an, n in nexts.items()}
        hm = None if hit_miss is None else tuple(ns[n] if n else None for n in hit_miss)
        tbl.bind(fobjs, nobjs, hm, ns[base_next] if base_next else None)
        ents = cc.const_entries.get(tbl.name, [])
        if ents:
            tbl.load_const_entries(ents)


def _initial_slots(L: Layout, lazy_runs: dict) -> list:
    init = L.initial_slots()
    init.extend([0] * (L.nslots - len(init)))  # scratch headers added while compiling
    for k in lazy_runs.values():
        init[k] = None  # the run's fields are in their slots
    return init


MAX_ARRAY = 1 << 22  # cells of one register/counter/meter array
MAX_WIDTH = 1 << 12  # bits of one field or register cell


def _size(obj: dict) -> int:
    n = int(obj["size"])
    if not 0 <= n <= MAX_ARRAY:
        raise bad(f"{obj.get('name')!r}: size {n} outside [0, {MAX_ARRAY}]")
    return n


def _width(w) -> int:
    w = int(w)
    if not 0 < w <= MAX_WIDTH:
        raise bad(f"bit width {w} outside [1, {MAX_WIDTH}]")
    return w


def _emit_metadata_setters(mod: Module, sm: dict, drop_port: int) -> tuple[str, str, str]:
    def put(name: str, value: str) -> list[str]:
        s = sm.get(name)
        return [] if s is None else [f"F[{s[0]}] = ({value}) & {s[1]}"]

    names = (mod.fresh("sm_in"), mod.fresh("sm_parsed"), mod.fresh("sm_out"))
    new = put("ingress_port", "port") + put("ingress_global_timestamp", "now")
    body = ([("if new:")] + ["    " + x for x in new] if new else []) + \
        put("packet_length", "pktlen") + put("instance_type", "itype")
    mod.emit([f"def {names[0]}(F, port, pktlen, itype, now, new):"] +
             ["    " + x for x in body or ["pass"]])
    body = put("parser_error", "err") + put("checksum_error", "ck")
    mod.emit([f"def {names[1]}(F, err, ck):"] + ["    " + x for x in body or ["pass"]])
    body = put("egress_global_timestamp", "now")
    if sm.get("enq_timestamp") is not None:
        body += put("deq_timedelta", f"now - F[{sm['enq_timestamp'][0]}]")
    body += put("deq_qdepth", "0") + put("qid", "0") + put("egress_port", "port")
    body += put("egress_spec", str(drop_port + 1)) + put("packet_length", "pktlen")
    mod.emit([f"def {names[2]}(F, port, now, pktlen):"] + ["    " + x for x in body or ["pass"]])
    return names


def _pick(objs: list, name: str) -> dict:
    for o in objs:
        if o.get("name") == name:
            return o
    return objs[0]


def _format(fmt: str, args: tuple) -> str:
    """BMv2 log_msg: each '{}' takes the next argument, in decimal."""
    out, i, k = [], 0, 0
    while i < len(fmt):
        if fmt.startswith("{}", i) and k < len(args):
            out.append(str(args[k]))
            k += 1
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)
