"""The design that is compiled is the design that is tested: the v1model twin (p4src/twin/)
has the TNA program's tables (p4src/tna/) with the same keys and the same entries, in its
Tofino 2 form (no second pass); the codec rows the controller installs on the twin are the
ones the TNA program compiles in."""

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TNA, TWIN = REPO / "p4src" / "tna", REPO / "p4src" / "twin"


def source(path: Path, lo_lane: bool = False) -> str:
    """The file without line continuations, comments, and the Tofino 1 (LO_LANE_PASS)
    branches: the #else side of each `#ifdef LO_LANE_PASS`."""
    text = path.read_text().replace("\\\n", "\n")
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    out, keep = [], [True]
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#ifdef LO_LANE_PASS"):
            keep.append(lo_lane)
        elif s.startswith("#if"):
            keep.append(None)           # another condition: kept, its #else too
        elif s.startswith("#else") and keep[-1] is not None:
            keep[-1] = not keep[-1]
        elif s.startswith("#endif"):
            keep.pop()
        elif all(k is not False for k in keep):
            out.append(line)
    return "\n".join(out)


def table(text: str, name: str, nth: int = 0) -> tuple[list[str], list[str]]:
    """(key fields, const entries) of the nth table `name`, normalized: a bool as 1 or 0, a
    (bit<1>) cast and its @name dropped, whitespace collapsed."""
    found = re.findall(r"table\s+" + name + r"\s*\{(.*?)\n\s*size", text, re.S)
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


@pytest.mark.parametrize("tna_file, twin_file, name, nth, entries", [
    ("slot_tna.p4", "slot_twin.p4", "admit_contrib", 0, CONST),
    ("slot_tna.p4", "slot_twin.p4", "count_child", 0, CONST),
    ("slot_tna.p4", "slot_twin.p4", "exponent", 0, CONST),
    ("slot_tna.p4", "slot_twin.p4", "jobs", 0, RUNTIME),
    ("slot_tna.p4", "slot_twin.p4", "children", 0, RUNTIME),
    ("next_step_tna.p4", "next_step_twin.p4", "next_step", 0, CONST),
    ("pairsum_tna.p4", "pairsum_twin.p4", "sum", 0, CONST),
    ("codec_tna.p4", "codec_twin.p4", "decode", 0, CONTROLLER),
    ("codec_tna.p4", "codec_twin.p4", "lead", 0, CONTROLLER),     # RoundCode's
    ("codec_tna.p4", "codec_twin.p4", "lead", 1, CONTROLLER),     # CodeOf's
])
def test_the_twin_has_the_tna_programs_table(tna_file, twin_file, name, nth, entries):
    """const: the same entries in both; runtime: none in either (the controller's jobs);
    controller: the TNA's constants, the twin's rows from the controller (below)."""
    tna_keys, tna_entries = table(source(TNA / tna_file), name, nth)
    twin_keys, twin_entries = table(source(TWIN / twin_file), name, nth)
    assert twin_keys == tna_keys
    if entries == CONST:
        assert tna_entries and twin_entries == tna_entries
    elif entries == RUNTIME:
        assert tna_entries == twin_entries == []
    else:
        # the TNA's a generated macro (gen_tna.py's rows), the twin's none of its own
        assert len(tna_entries) == 1 and tna_entries[0].endswith("_ENTRIES")
        assert twin_entries == []


def test_the_job_entries_carry_the_tna_programs_parameters_and_one_more():
    """first_back: the control plane's write of `use`, which the twin applies when a new
    session first touches a cell (BMv2's P4Runtime writes no registers)."""
    def params(text, action):
        m = re.search(r"action\s+" + action + r"\((.*?)\)\s*\{", text, re.S)
        return [p.split()[-1] for p in m.group(1).split(",")]

    tna, twin = source(TNA / "slot_tna.p4"), source(TWIN / "slot_twin.p4")
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
