"""docs/results.md against its own tables (bench/docs_check.py): the committed file passes,
and a Holm column that says more than its intervals allow is caught."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from docs_check import holm_problems  # noqa: E402  (bench/ is on the path from here)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results.md"

# TernGrad's row of the layer-wise table: better by its own interval (p about 0.027), not
# after Holm over 9; with the top-k row (p < 1e-6) a family of 2 keeps it
TABLE = """
| compressor | layer - entire [95 % CI] | seeds | verdict | Holm (family of {n}) |
| --- | --- | ---: | --- | --- |
| top-k | +0.1110 [+0.0886, +0.1334] | 10 | entire-model better | entire-model better |
| TernGrad | -0.0187 [-0.0347, -0.0027] | 10 | layer-wise better | {tern} |
| QSGD s=4 | diverged: layer-wise 1/10, entire-model 10/10 | 10 | cannot tell | - |
""" + "".join(f"| filler {i} | +0.001{i} [-0.0100, +0.0120] | 10 | cannot tell | cannot tell |\n"
               for i in range(7))


def test_the_committed_results_agree_with_their_holm_columns():
    text = DOCS.read_text()
    assert text.count("Holm (family of") >= 6
    assert holm_problems(text) == []


def test_a_verdict_holm_would_take_away_is_caught():
    ok = TABLE.format(n=9, tern="cannot tell")
    assert holm_problems(ok) == []
    bad = holm_problems(TABLE.format(n=9, tern="layer-wise better"))
    assert len(bad) == 1 and "TernGrad" in bad[0] and "'cannot tell'" in bad[0]


def test_a_family_of_the_wrong_size_is_caught():
    assert any("but 9 rows have an interval" in p
               for p in holm_problems(TABLE.format(n=8, tern="cannot tell")))


def test_a_smaller_family_keeps_the_verdict():
    two = "\n".join(ln for ln in TABLE.splitlines() if "filler" not in ln)
    assert holm_problems(two.format(n=2, tern="layer-wise better")) == []
    assert holm_problems(two.format(n=2, tern="cannot tell"))


def test_ratio_intervals_and_families_per_block():
    # a speed-up of 1.30x [1.02, 1.66] over 5 seeds has p about 0.04 (a t interval of its
    # log): alone in its block it keeps 'sooner'; two such rows in one block lose it
    # (0.04 x 2 > 0.05); a Holm column grouped by a column the table lacks is an error
    head = ("| switch, link | method | speed-up [95 % CI] | verdict | Holm (per switch, link) |\n"
            "| --- | --- | --- | --- | --- |\n")
    row = "| {b} | {m} | {ci} | {v} | {h} |\n"
    border = "1.300x [1.020, 1.657], n=5"
    alone = head + row.format(b="A", m="x", ci=border, v="sooner", h="sooner") + \
        row.format(b="B", m="y", ci=border, v="sooner", h="sooner")
    assert holm_problems(alone) == []
    pair = head + row.format(b="A", m="x", ci=border, v="sooner", h="sooner") + \
        row.format(b="A", m="y", ci=border, v="sooner", h="sooner")
    assert len(holm_problems(pair)) == 2          # each needs 'cannot tell' in a family of 2
    fixed = pair.replace("| sooner |\n", "| cannot tell |\n")
    assert holm_problems(fixed) == []
    assert holm_problems(head.replace("per switch, link", "per nothing")
                         + row.format(b="A", m="x", ci=border, v="sooner", h="sooner"))


def test_the_committed_prose_of_the_checked_sections_says_only_what_tables_print():
    from docs_check import prose_problems
    assert prose_problems(DOCS.read_text()) == []


def test_a_range_in_a_sentence_that_no_table_prints_is_caught():
    from docs_check import prose_problems
    doc = ("## Checked part\n\n| method | ratio |\n| --- | ---: |\n| a | 1.06 |\n| b | 2.21 |\n\n"
           "C_nat INA is {lo}-{hi}x faster, at momentum 0.9 (`--lr 0.1`).\n"
           "## Other part\n\nAnything goes here: 7.77.\n")
    assert prose_problems(doc.format(lo="1.06", hi="2.21"), checked=("Checked",)) == []
    # the example: a range rounded past its table, at either end
    bad = prose_problems(doc.format(lo="1.2", hi="2.2"), checked=("Checked",))
    assert [p.split(": ")[1] for p in bad] == ["1.2 is in no table", "2.2 is in no table"]
    # a setting of the run is allowed only when it is named as one
    assert prose_problems(doc.format(lo="1.06", hi="2.21"), checked=("Checked",),
                          settings={}) == ["Checked part: 0.9 is in no table: C_nat INA is "
                                           "1.06-2.21x faster, at momentum 0.9 (`--lr 0.1`)."]
