"""Conformance programs: compiled P4 under tests/p4/ with expected packets as data.

Each program X has X.p4, build/X.json, build/X.p4info.txt, build/X.sha256
(the sha256 of X.p4 the build came from) and X.cases.json:

    {"setup": {"multicast_groups": {gid: [[port, rid], ...]},
               "clone_sessions": {sid: [[port, rid], ...]},
               "table_defaults": {table: [action, [param, ...]]}},
     "cases": [{"note": str, "port": int, "in": hex, "out": [[port, hex], ...]}, ...]}

Cases run in order on one switch (registers carry over). BMv2 interleaves
packets of different inputs on different ports, and recirculated ones with
later inputs, so a BMv2 run is compared per port as a multiset.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from softswitch import Switch

from . import bmv2

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
ROOT = HERE.parents[1]


def programs() -> list[str]:
    return sorted(p.name[: -len(".cases.json")] for p in HERE.glob("*.cases.json"))


def sources() -> list[str]:
    """Every program under tests/p4/, with expected packets or used by P4Runtime tests."""
    return sorted(p.stem for p in HERE.glob("*.p4"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compile_p4(name: str, outdir: Path) -> tuple[Path, Path]:
    """p4c-bm2-ss on tests/p4/<name>.p4, run from the repository root so the
    source paths embedded in the JSON are the same wherever it runs."""
    outdir.mkdir(parents=True, exist_ok=True)
    js, info = outdir / f"{name}.json", outdir / f"{name}.p4info.txt"
    src = (HERE / f"{name}.p4").relative_to(ROOT)
    subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "--p4runtime-files", str(info),
                    "-o", str(js), str(src)], cwd=ROOT, check=True, capture_output=True,
                   text=True)
    return js, info


def load_cases(name: str) -> dict:
    return json.loads((HERE / f"{name}.cases.json").read_text())


def engine_switch(name: str, setup: dict) -> Switch:
    sw = Switch(seed=1)
    sw.load((BUILD / f"{name}.json").read_text())
    for gid, reps in setup.get("multicast_groups", {}).items():
        sw.pre.create(int(gid), [tuple(r) for r in reps])
    for sid, reps in setup.get("clone_sessions", {}).items():
        sw.clones.set(int(sid), [tuple(r) for r in reps])
    for table, (action, params) in setup.get("table_defaults", {}).items():
        sw.tables[table].set_default(action, list(params))
    return sw


def run_engine(name: str, setup: dict, inputs: list[tuple[int, bytes]]) -> list[list]:
    sw = engine_switch(name, setup)
    outs = [[[p, o.hex()] for p, o in sw.process(port, data)] for port, data in inputs]
    if sw.stats["errors"]:
        raise AssertionError(f"engine errors on {name}: {sw.stats}")
    return outs


def cli_setup(setup: dict) -> list[str]:
    """simple_switch_CLI commands for the setup; clone sessions replicate through
    a multicast group, as simple_switch_grpc does for P4Runtime clone sessions."""
    cmds, node = [], 0
    groups = {int(g): r for g, r in setup.get("multicast_groups", {}).items()}
    sessions = {int(s): r for s, r in setup.get("clone_sessions", {}).items()}
    for s, reps in sessions.items():
        groups[0x8000 + s] = reps
    for g, reps in groups.items():
        cmds.append(f"mc_mgrp_create {g}")
        for port, rid in reps:
            cmds += [f"mc_node_create {rid} {port}", f"mc_node_associate {g} {node}"]
            node += 1
    for s in sessions:
        cmds.append(f"mirroring_add_mc {s} {0x8000 + s}")
    for table, (action, params) in setup.get("table_defaults", {}).items():
        cmds.append(" ".join(["table_set_default", table, action] + [str(p) for p in params]))
    return cmds


def run_bmv2(name: str, setup: dict, inputs: list[tuple[int, bytes]], expected: int,
             ports: set[int]) -> dict[int, list[str]]:
    with bmv2.SimpleSwitch(BUILD / f"{name}.json", ports, inputs, wait=2) as ss:
        ss.cli(cli_setup(setup))
        got = ss.settle(expected=expected, idle=1.5)
    return {p: sorted(o.hex() for o in v) for p, v in got.items()}


def per_port(outs: list[list], ports: set[int]) -> dict[int, list[str]]:
    d: dict[int, list[str]] = {p: [] for p in ports}
    for case in outs:
        for p, h in case:
            d.setdefault(p, []).append(h)
    return {p: sorted(v) for p, v in d.items()}


def all_ports(cases: dict) -> set[int]:
    ports = {c["port"] for c in cases["cases"]}
    for c in cases["cases"]:
        ports |= {p for p, _ in c["out"]}
    for reps in list(cases.get("setup", {}).get("multicast_groups", {}).values()) + \
            list(cases.get("setup", {}).get("clone_sessions", {}).values()):
        ports |= {p for p, _ in reps}
    return ports


def have_p4c() -> bool:
    return shutil.which("p4c-bm2-ss") is not None
