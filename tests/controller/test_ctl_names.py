"""The names the controller writes exist in the compiled program, with the same shapes in the
small fixture program the softswitch tests load (tests/controller/p4/ctl_tables.p4)."""

import hashlib
import os
import shutil
import subprocess

import pytest

from controller import topology as T
from controller import twin
from controller.p4info import P4Info
from controller.program import MANAGED_TABLES, canonical_state, desired_state
from controller.stats import COUNTERS

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REAL = os.path.join(REPO, "p4src", "build", "agg.p4info.txt")
FIXTURE_P4 = os.path.join(HERE, "p4", "ctl_tables.p4")
FIXTURE = os.path.join(HERE, "p4", "build", "ctl_tables.p4info.txt")


def shapes(info: P4Info) -> dict:
    """What the controller relies on: tables, their keys and actions, and the counters."""
    out = {}
    for name in MANAGED_TABLES:
        if name in twin.TABLES:     # (the Tofino profile's twin: the test below)
            continue
        t = info.table(name)
        actions = {}
        for ref in t.action_refs:
            a = info.actions_by_id[ref.id]
            actions[a.preamble.name] = [(p.name, p.bitwidth) for p in a.params]
        out[name] = ([(mf.name, mf.bitwidth, mf.match_type) for mf in t.match_fields], actions)
    for name in COUNTERS:
        c = info.counter(name)
        out[name] = (c.spec.unit, c.size)
    return out


def test_fixture_program_has_the_shapes_of_the_real_one():
    assert shapes(P4Info.load(FIXTURE)) == shapes(P4Info.load(REAL))


def test_every_entry_the_controller_computes_fits_the_real_program():
    topo = T.fat_tree(4).with_loss(0.01)
    topo = topo.with_jobs([T.JobSpec(1, tuple(h.name for h in topo.hosts), 64, "cnat8"),
                           T.JobSpec(2, ("h1", "h2"), 448)])
    state = canonical_state(desired_state(topo, {1: 1, 2: 65535}), P4Info.load(REAL))
    assert sum(len(rows) for rows in state.values()) > 20 * 16


def test_every_entry_the_controller_computes_fits_the_twin():
    """The Tofino profile's twin: two job entries per job and switch (one per version), a
    children entry per child, and every element's 256 + 95 + 33 codec rows."""
    info = P4Info.load(os.path.join(REPO, "p4src", "build", "twin", "agg.p4info.txt"))
    assert twin.is_twin(info) and twin.elems_of(info) == 16
    topo = T.fat_tree(4).with_jobs([T.JobSpec(1, ("h1", "h2", "h16"), 8, "cnat8")])
    state = canonical_state(desired_state(topo, {1: 3}, info), info)
    for switch, rows in state.items():
        jobs = [e for e in rows if getattr(e, "table", "") == twin.JOBS]
        codec = [e for e in rows if twin.ELEMENT_TABLE.fullmatch(getattr(e, "table", ""))]
        assert len(codec) == 16 * (256 + 95 + 33), switch
        assert len(jobs) in (0, 2), switch
    from controller.tree import build_tree

    nodes = len(build_tree(topo, topo.job(1)).nodes)
    assert sum(1 for rows in state.values() for e in rows
               if getattr(e, "table", "") == twin.JOBS) == 2 * nodes


def test_fixture_build_is_from_its_source():
    with open(os.path.join(HERE, "p4", "build", "ctl_tables.sha256")) as f:
        recorded = f.read().split()[0]
    with open(FIXTURE_P4, "rb") as f:
        assert recorded == hashlib.sha256(f.read()).hexdigest(), \
            "ctl_tables.p4 changed: recompile it into tests/controller/p4/build/"


@pytest.mark.p4c
@pytest.mark.skipif(shutil.which("p4c-bm2-ss") is None, reason="needs p4c-bm2-ss on PATH")
def test_fixture_build_matches_a_fresh_compile(tmp_path):
    info = tmp_path / "x.p4info.txt"
    subprocess.run(["p4c-bm2-ss", "--p4runtime-files", str(info), "-o", str(tmp_path / "x.json"),
                    FIXTURE_P4], check=True, capture_output=True, timeout=120)
    assert P4Info.load(str(info)).msg == P4Info.load(FIXTURE).msg
