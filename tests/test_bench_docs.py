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


def test_the_committed_prose_of_every_section_says_only_what_its_tables_print():
    from docs_check import prose_problems
    from docs_prose import sections
    text = DOCS.read_text()
    assert len(sections(text)) >= 16
    assert prose_problems(text) == []


def test_a_range_in_a_sentence_that_no_table_prints_is_caught():
    from docs_check import prose_problems
    doc = ("## Checked part\n\n| method | ratio |\n| --- | ---: |\n| a | 1.06 |\n| b | 2.21 |\n\n"
           "C_nat INA is {lo}-{hi}x faster, at momentum 0.9 (`--lr 0.1`).\n"
           "## Other part\n\nAnything goes here: 7.77.\n")
    assert prose_problems(doc.format(lo="1.06", hi="2.21"), checked=("Checked",)) == []
    # the example: a range rounded past its table, at either end
    bad = prose_problems(doc.format(lo="1.2", hi="2.2"), checked=("Checked",))
    assert [p.split(": ")[1] for p in bad] == [
        "1.2 is in no table nor the quotient of two rows it names",
        "2.2 is in no table nor the quotient of two rows it names"]
    # a setting of the run is allowed only when it is named as one
    assert prose_problems(doc.format(lo="1.06", hi="2.21"), checked=("Checked",),
                          settings={}) == ["Checked part: 0.9 is in no table: C_nat INA is "
                                           "1.06-2.21x faster, at momentum 0.9 ()."]
    # every section is checked by default
    assert prose_problems(doc.format(lo="1.06", hi="2.21")) == [
        "Other part: 7.77 is in no table: Anything goes here: 7.77."]


# two sections: a run's table, and prose elsewhere that cites it
TWO = ("## Time to allreduce (bench/allreduce.py)\n\n"
       "| part | variant | median s |\n| --- | --- | ---: |\n"
       "| star | C_nat INA | 0.316 |\n| star | int32 INA | 0.415 |\n\n"
       "## Elsewhere\n\n{prose}\n")


def test_a_sentence_is_held_to_the_tables_of_its_own_section():
    from docs_prose import prose_problems
    assert prose_problems(TWO.format(prose="Its median was 0.316 s.")) == [
        "Elsewhere: 0.316 is in no table: Its median was 0.316 s."]
    # unless its paragraph names the section: its title's start in quotes, or its bench
    for named in ('("Time to allreduce")', "(the allreduce table)"):
        assert prose_problems(TWO.format(prose=f"Its median was 0.316 s {named}.")) == []
    assert prose_problems(TWO.format(prose='Its median was 0.316 s ("Time to go").'))


def test_a_bench_output_pasted_in_its_section_counts_as_printed():
    from docs_prose import prose_problems
    code = "```\nBMv2: uq4 aggregates 7.47x the elements/s of cnat8\n```\n\n"
    doc = "## Four bits\n\n{code}UQ4 does 7.47x on wide4.\n## Other\n\n{other}"
    assert prose_problems(doc.format(code=code, other="")) == []
    assert prose_problems(doc.format(code="", other=code))       # another section's output
    # the version of a tool is not a number
    assert prose_problems("## V\n\nBMv2 1.15.0 and p4c 1.2.5.8, P4 Studio 9.13.4.\n") == []


def test_a_ratio_is_the_quotient_of_two_rows_it_names_at_its_digits():
    from docs_prose import prose_problems

    def problems(prose):
        return prose_problems(TWO.replace("## Elsewhere\n\n", "").format(prose=prose))

    # 0.316 / 0.415 = 0.7614...
    for ok in ("0.76x", "0.761x", "0.8x", "0.76 times", "0.76-0.761x"):
        assert problems(f"On the star C_nat INA took {ok} the time of int32 INA.") == [], ok
    for wrong in ("0.77x", "0.75x", "0.7615x", "0.7x", "0.77 times"):
        assert len(problems(f"On the star C_nat INA took {wrong} the time of int32 INA.")) \
            == 1, wrong
    # the rows must be named in the ratio's sentence, each by its key (part and variant)
    assert problems("On the star C_nat INA took 0.76x the time of the other.")
    assert problems("C_nat INA took 0.76x the time of int32 INA.")
    assert problems("On the star C_nat INA took 0.76x the time. It is int32 INA's.")
    # a ratio is a quotient; a plain number is not
    assert problems("On the star C_nat INA took 0.76 of int32 INA's time.")


def test_a_setting_is_a_number_or_the_phrase_it_is_stated_in():
    from docs_prose import prose_problems
    doc = "## Run\n\n{}\n"
    settings = {"lr 0.1": "the learning rate", "0.9": "momentum"}
    assert prose_problems(doc.format("SGD lr 0.1, momentum 0.9."), settings=settings) == []
    assert prose_problems(doc.format("A step took 0.1 s."), settings=settings)
    assert prose_problems(doc.format("Momentum 0.95."), settings=settings)


def test_a_verdict_the_printed_digits_cannot_decide_passes_either_way():
    # +0.05 [+0.00, +0.10]: the low end lies anywhere in [-0.005, +0.005], so p lies on
    # both sides of 0.05 and a family of one may keep or drop 'better'; a wider reading of
    # the digits does not excuse a clear case or a verdict of the wrong side
    row = ("| compressor | d [95 % CI] | seeds | verdict | Holm (family of 1) |\n"
           "| --- | --- | --- | --- | --- |\n| x | {ci} | 10 | {v} | {h} |\n")
    for h in ("better", "cannot tell"):
        assert holm_problems(row.format(ci="+0.05 [+0.00, +0.10]", v="better", h=h)) == []
    assert holm_problems(row.format(ci="+0.05 [+0.00, +0.10]", v="better", h="worse"))
    assert holm_problems(row.format(ci="+0.05 [+0.02, +0.08]", v="better", h="cannot tell"))


def test_a_table_the_holm_check_cannot_read_is_named_by_its_line():
    head = "| m | d [95 % CI] | seeds | {v}Holm (family of 1) |\n| --- | --- | --- | {s}--- |\n"
    ok = "| x | +0.05 [+0.02, +0.08] | 10 | better | better |\n"
    full = head.format(v="verdict | ", s="--- | ")
    assert holm_problems(full + ok) == []
    # a row that lost a cell, an estimate outside its interval, no verdict to correct
    assert holm_problems(full + "| x | +0.05 [+0.02, +0.08] | 10 | better |\n")[0] == \
        "line 3: 4 cells, the header has 5"
    assert holm_problems(full + ok.replace("+0.05 [", "+0.50 [")) == \
        ["line 3: '+0.50 [+0.02, +0.08]': the estimate is not within its interval",
         "line 1: 'Holm (family of 1)' but 0 rows have an interval in 'd [95 % CI]'"]
    assert holm_problems(head.format(v="", s="") + "| x | +0.05 [+0.02, +0.08] | 10 | b |\n") \
        == ["line 1: 'Holm (family of 1)' has no verdict column between it and "
            "'d [95 % CI]': nothing to correct"]
