"""Conformance: the compiled P4 programs under tests/p4/ and their expected packets.

The engine must reproduce every case exactly; BMv2 (when simple_switch is on
PATH) must send the same packets per port; the committed builds must come
from the committed sources (recompiled and compared when p4c-bm2-ss is on PATH).
Expected packets are (re)made with `python -m tests.p4.make_cases`.
"""

import json

import pytest

from tests.p4 import bmv2, conformance

PROGRAMS = conformance.programs()
SOURCES = conformance.sources()
EXPECTED = {"parse", "stacks", "exprs", "tables", "externs", "replication", "samename", "hashsel",
            "hashwide", "varlen", "varcopy", "vlbits", "vlstack", "deadtable"}


def test_all_conformance_programs_are_present():
    assert EXPECTED <= set(PROGRAMS)


@pytest.mark.parametrize("name", SOURCES)
def test_build_comes_from_source(name):
    recorded = (conformance.BUILD / f"{name}.sha256").read_text().split()[0]
    assert recorded == conformance.sha256(conformance.HERE / f"{name}.p4"), \
        f"tests/p4/{name}.p4 changed: rebuild with python -m tests.p4.make_cases --compile {name}"


@pytest.mark.p4c
@pytest.mark.skipif(not conformance.have_p4c(),
                    reason="p4c-bm2-ss is not on PATH: committed builds not recompiled")
@pytest.mark.parametrize("name", SOURCES)
def test_recompiled_build_is_identical(name, tmp_path):
    js, info = conformance.compile_p4(name, tmp_path)
    committed = conformance.BUILD / f"{name}.json"
    assert json.loads(js.read_text()) == json.loads(committed.read_text())
    assert info.read_text() == (conformance.BUILD / f"{name}.p4info.txt").read_text()


@pytest.mark.parametrize("name", PROGRAMS)
def test_engine_conformance(name):
    cases = conformance.load_cases(name)
    inputs = [(c["port"], bytes.fromhex(c["in"])) for c in cases["cases"]]
    outs = conformance.run_engine(name, cases.get("setup", {}), inputs)
    for c, got in zip(cases["cases"], outs, strict=True):
        assert got == c["out"], f"{name}: {c['note']}"


@pytest.mark.bmv2
@pytest.mark.skipif(bmv2.available() is None,
                    reason="simple_switch and simple_switch_CLI are not on PATH: "
                           "conformance checked on the engine only")
@pytest.mark.parametrize("name", PROGRAMS)
def test_bmv2_conformance(name):
    cases = conformance.load_cases(name)
    inputs = [(c["port"], bytes.fromhex(c["in"])) for c in cases["cases"]]
    want_outs = [c["out"] for c in cases["cases"]]
    ports = conformance.all_ports(cases)
    want = conformance.per_port(want_outs, ports)
    got = conformance.run_bmv2(name, cases.get("setup", {}), inputs,
                               sum(len(o) for o in want_outs), ports)
    assert got == want
