"""Entries of the Tofino profile's v1model twin (p4src/twin/, docs/PROTOCOL.md "Tofino
profile"): the jobs and children of its SlotState, and the decode and re-compression tables
the TNA program compiles in as constants, here installed over P4Runtime from the same rows
(p4src/tna/gen_tna.py).

A job has one entry per version, keyed (job, version), whose parameters fold the v1model
program's checks into sums the data plane only adds: base (the region, plus POOL_SIZE for
version 1), back2 = -2S, slot_room = 0x8000 - S, exp_room = 254 - max_exp, for a job of S
slots. The session is in the entry; moving it is replacing the entries, which first_back
(the chunk two uses before the version's first, less the slot) makes each slot open afresh.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from controller import aggregation
from controller.aggregation import RESULT_ENCODING, group_id, round_key
from controller.entities import Entity, MulticastGroupEntry, TableEntry, Ternary
from controller.jobs import Region
from controller.topology import POOL_SIZE, Topology
from controller.tree import JobTree

JOBS = "NatIngress.slot.jobs"
JOB_ROOT = "NatIngress.slot.job_root"
JOB_CHILD = "NatIngress.slot.job_child"
CHILDREN = "NatIngress.slot.children"
SET_CHILD = "NatIngress.slot.set_child"
JOB_ID, VERSION, PORT = "hdr.agg.job_id", "hdr.agg.version", "port"
# The walk of a packet of several segments (p4src/tna/passes_tna.p4): the port each pass
# leaves through. The twin recirculates in its egress, so its port is one no host sits
# behind (the TNA program's are the ports the control plane put in loopback).
LOOPS, LOOP, SEG = "NatIngress.walk.loops", "NatIngress.walk.loop", "hdr.walk.seg"
TWIN_LOOP_PORT = 510
TABLES = (JOBS, CHILDREN, LOOPS)
M32 = 0xFFFFFFFF
# The per-element tables: their names end in the element's index.
ELEMENT_TABLE = re.compile(r"NatIngress\.dec(\d+)\.decode|NatEgress\.recompress\.(?:rnd|cod)"
                           r"(\d+)\.lead")


@lru_cache(maxsize=1)
def _gen_tna():
    """p4src/tna/gen_tna.py, which writes the rows the TNA program compiles in, loaded by
    its path: p4src/ holds P4 sources and their scripts, not a package."""
    path = Path(__file__).resolve().parents[1] / "p4src" / "tna" / "gen_tna.py"
    spec = importlib.util.spec_from_file_location("gen_tna", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def is_twin(p4info) -> bool:
    """The program is the twin (its jobs live in SlotState), not p4src/agg.p4."""
    return p4info is not None and p4info.has_table(JOBS)


def element_tables(p4info) -> list[str]:
    return sorted(n for n in p4info.tables if ELEMENT_TABLE.fullmatch(n))


def elems_of(p4info) -> int:
    """Elements per pass: one decode table each."""
    return sum(1 for n in p4info.tables if re.fullmatch(r"NatIngress\.dec\d+\.decode", n))


def passes_of(p4info) -> int:
    """Passes per packet: the walk's `loops` holds one port per segment (1: no walk)."""
    return p4info.table(LOOPS).size if p4info.has_table(LOOPS) else 1


def loop_entries(passes: int) -> list[Entity]:
    """The port of every segment's pass (none for a program of one pass)."""
    if passes < 2:
        return []
    return [TableEntry.make(LOOPS, {SEG: k}, LOOP, {"port": TWIN_LOOP_PORT})
            for k in range(passes)]


@lru_cache(maxsize=4)
def codec_entries(elems: int) -> tuple[Entity, ...]:
    """Every element's decode table (256 codes), leading-one match of the sum (priority in
    the rows' order) and leading-one match of the sum plus its random bits."""
    gen = _gen_tna()
    lead, code = gen.round_rows(), gen.code_rows()
    rows: list[Entity] = []
    for i in range(elems):
        rows.extend(TableEntry.make(f"NatIngress.dec{i}.decode", {"code": c},
                                    f"NatIngress.dec{i}.value", {"x": gen.decode_value(c)})
                    for c in range(256))
        rnd = f"NatEgress.recompress.rnd{i}"
        for k, (value, mask, action, arg) in enumerate(lead):
            rows.append(TableEntry.make(f"{rnd}.lead", {"s": Ternary(value, mask)},
                                        f"{rnd}.{action}",
                                        {} if arg is None else {"mask": arg},
                                        priority=len(lead) - k))
        cod = f"NatEgress.recompress.cod{i}"
        rows.extend(TableEntry.make(f"{cod}.lead", {"s": Ternary(value, mask)}, f"{cod}.code",
                                    {"m": m}, priority=len(code) - k)
                    for k, (value, mask, m) in enumerate(code))
    return tuple(rows)


def switch_entries(tree: JobTree, switch: str, region: Region, session: int,
                   device_id: int) -> list[Entity]:
    node = tree.nodes[switch]
    job = tree.job
    n = region.num_slots
    rows: list[Entity] = [MulticastGroupEntry.make(group_id(job.id),
                                                   [c.port for c in node.children])]
    for version in (0, 1):
        params = {"base": region.base + version * POOL_SIZE, "back2": -2 * n & M32,
                  "slot_room": 0x8000 - n, "exp_room": 254 - job.max_exp,
                  "num_children": len(node.children), "mcast_grp": group_id(job.id)}
        last = {"session": session, "workers": node.workers,
                "seed": round_key(job.seed, job.id, device_id),
                "first_back": (version - 2) * n & M32}
        if node.parent is None:
            action, own = JOB_ROOT, {"result_enc": RESULT_ENCODING[job.encoding]}
        else:
            action, own = JOB_CHILD, {"parent_port": node.parent_port,
                                      "partial_enc": RESULT_ENCODING[job.partials]}
        rows.append(TableEntry.make(JOBS, {JOB_ID: job.id, VERSION: version}, action,
                                    {**params, **own, **last}))
    rows.extend(TableEntry.make(CHILDREN, {JOB_ID: job.id, PORT: c.port}, SET_CHILD,
                                {"child_bit": 1 << c.bit})
                for c in node.children)
    return rows


def entries(topo: Topology, trees: list[JobTree], sessions: Mapping[int, int],
            elems: int, passes: int = 1) -> dict[str, list[Entity]]:
    """Every switch's twin entries: the codec tables, the walk's ports (a program of
    several passes) and the jobs in these sessions."""
    jobs = aggregation.entries(topo, trees, sessions, make=switch_entries)
    return {name: [*codec_entries(elems), *loop_entries(passes), *rows]
            for name, rows in jobs.items()}
