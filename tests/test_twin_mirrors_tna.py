"""The design that is compiled is the design that is tested: the v1model twin (p4src/twin/)
has the TNA program's tables (p4src/tna/) with the same keys and the same entries, in its
Tofino 2 form (no second pass); the codec rows the controller installs on the twin are the
ones the TNA program compiles in. Most tables are one definition in p4src/tna/*_shared_tna.p4
that both programs include, with a bool's form in a ternary match their arch_*.p4's: the
programs are compared as the compiler reads them, preprocessed."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
P4SRC = REPO / "p4src"
TNA = P4SRC / "tna"

pytestmark = pytest.mark.skipif(shutil.which("cpp") is None,
                                reason="no C preprocessor (cpp) to expand the P4 programs")

# The twin's form of the TNA program: Tofino 2, CNAT8 and the lanes both ways (agg_twin.p4);
# the walk's with -DPASSES.
FORMS = {
    "one pass": (["-D__TARGET_TOFINO__=2", "-DELEMS=16", "-DCNAT8_RESULTS", "-DWITH_LANES"],
                 ["-DELEMS=16"]),
    "walk": (["-D__TARGET_TOFINO__=2", "-DELEMS=16", "-DCNAT8_RESULTS", "-DPASSES=4"],
             ["-DELEMS=16", "-DPASSES=4"]),
}


def expand(program: str, flags: list[str], tmp: Path) -> str:
    """The program as the compiler reads it, its architecture's includes left empty."""
    for name in ("core.p4", "tna.p4", "t2na.p4", "v1model.p4"):
        (tmp / name).write_text("")
    return subprocess.run(["cpp", "-P", "-undef", "-nostdinc", "-I", str(tmp), *flags, program],
                          cwd=P4SRC, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p4inc")
    return {form: (expand("tna/agg_tna.p4", tna, tmp), expand("twin/agg_twin.p4", twin, tmp))
            for form, (tna, twin) in FORMS.items()}


def table(text: str, name: str, nth: int = 0) -> tuple[list[str], list[str]]:
    """(key fields, const entries) of the nth table `name`, normalized: a bool as 1 or 0, a
    (bit<1>) cast and its @name dropped, whitespace collapsed."""
    found = re.findall(r"\btable\s+" + name + r"\s*\{(.*?)\bsize\s*=", text, re.S)
    assert len(found) > nth, name
    body = found[nth]
    key = re.search(r"key\s*=\s*\{(.*?)\}", body, re.S).group(1)
    keys = [re.sub(r"\(bit<1>\)|@name\([^)]*\)|\s+", "", k).split(":")[0]
            for k in key.split(";") if k.strip()]
    ent = re.search(r"const entries\s*=\s*\{(.*)\}", body, re.S)
    entries = []
    for e in (ent.group(1).split(";") if ent else []):
        e = re.sub(r"\s+", " ", e).strip().replace("true", "1").replace("false", "0")
        if e:
            entries.append(e)
    return keys, entries


CONST, RUNTIME, CONTROLLER = "const", "runtime", "controller"


@pytest.mark.parametrize("form, name, nth, entries", [
    ("one pass", "admit_contrib", 0, CONST),
    ("walk", "admit_contrib", 0, CONST),
    ("one pass", "count_child", 0, CONST),
    ("one pass", "exponent", 0, CONST),
    ("one pass", "jobs", 0, RUNTIME),
    ("one pass", "children", 0, RUNTIME),
    ("one pass", "next_step", 0, CONST),
    ("walk", "next_step", 0, CONST),
    ("one pass", "sum", 0, CONST),
    ("one pass", "routes", 0, RUNTIME),
    ("one pass", "decode", 0, CONTROLLER),
    ("one pass", "lead", 0, CONTROLLER),     # RoundCode's
    ("one pass", "lead", 1, CONTROLLER),     # CodeOf's
])
def test_the_twin_has_the_tna_programs_table(programs, form, name, nth, entries):
    """const: the same entries in both; runtime: none in either (the controller's);
    controller: the TNA's constants, the twin's rows from the controller (below)."""
    tna, twin = programs[form]
    tna_keys, tna_entries = table(tna, name, nth)
    twin_keys, twin_entries = table(twin, name, nth)
    assert twin_keys == tna_keys
    if entries == CONST:
        assert tna_entries and twin_entries == tna_entries
    elif entries == RUNTIME:
        assert tna_entries == twin_entries == []
    else:
        # the TNA's the rows of gen_tna.py (compared with the controller's below), the
        # twin's none of its own
        assert tna_entries and twin_entries == []


def test_the_job_entries_carry_the_tna_programs_parameters_and_one_more(programs):
    """first_back: the control plane's write of `use`, which the twin applies when a new
    session first touches a cell (BMv2's P4Runtime writes no registers)."""
    def params(text, action):
        m = re.search(r"\baction\s+" + action + r"\s*\((.*?)\)\s*\{", text, re.S)
        return [p.split()[-1] for p in m.group(1).split(",")]

    tna, twin = programs["one pass"]
    for action in ("job_root", "job_child"):
        assert params(twin, action) == params(tna, action) + ["first_back"]


def test_the_controllers_codec_rows_are_the_tna_programs_constants():
    from controller import twin

    sys.path.insert(0, str(TNA))
    try:
        import gen_tna
    finally:
        sys.path.pop(0)
    rows = twin.codec_entries(1)
    decode = {e.match[0][1].value: e.params[0][1] for e in rows
              if e.table == "NatIngress.dec0.decode"}
    assert decode == {c: gen_tna.decode_value(c) for c in range(256)}
    lead = [e for e in rows if e.table.endswith("rnd0.lead")]
    assert [(e.match[0][1].value, e.match[0][1].mask, e.action.rsplit(".", 1)[1],
             e.params[0][1] if e.params else None) for e in lead] == gen_tna.round_rows()
    # priorities in the rows' order: the first row wins, as the TNA's const entries
    assert [e.priority for e in lead] == sorted((e.priority for e in lead), reverse=True)
    # (and the TNA's const entries are these rows rendered: tests/test_p4_tofino.py)
