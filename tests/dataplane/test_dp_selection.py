"""tests/dataplane/selection.py: a softswitch case is skipped only beside its own BMv2 case,
never when marked uncompared, and a test that stops comparing without the mark fails."""

from types import SimpleNamespace

from tests.dataplane.selection import UNMARKED, covered_soft_cases, stopped_comparing

F = "tests/dataplane/test_dp_x.py::"


def test_a_soft_case_is_covered_only_by_its_own_selected_bmv2_sibling():
    ids = [F + "t[soft]", F + "t[bmv2]", F + "u[soft-one-switch-1]", F + "u[bmv2-one-switch-1]",
           F + "u[soft-two-level-1]", F + "v[soft]", F + "w", F + "softly[a-b]"]
    # u[soft-two-level-1]'s sibling was not selected (-k, a failed-first rerun); v has none
    assert covered_soft_cases(ids, set()) == {F + "t[soft]", F + "u[soft-one-switch-1]"}


def test_a_case_marked_uncompared_keeps_its_soft_run():
    ids = [F + "t[soft]", F + "t[bmv2]"]
    assert covered_soft_cases(ids, {F + "t[soft]"}) == set()


def test_stopping_to_compare_without_the_mark_is_named():
    went = SimpleNamespace(went_uncompared=True)
    assert stopped_comparing(went, marked=False) == UNMARKED
    assert stopped_comparing(went, marked=True) is None
    assert stopped_comparing(SimpleNamespace(went_uncompared=False), marked=False) is None
    assert stopped_comparing(None, marked=False) is None     # a soft-only fabric
