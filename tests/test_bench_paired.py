"""bench/paired.py: the paired difference, its 95 % CI from Student's t, the verdict."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from paired import (  # noqa: E402  (bench/ is on the path from here)
    BETTER,
    CANNOT_TELL,
    EQUAL,
    WORSE,
    paired,
    seeds_needed,
    t975,
)


@pytest.mark.parametrize("df, t", [(1, 12.706), (4, 2.7764), (9, 2.2622), (30, 2.0423)])
def test_t_quantiles_are_the_printed_tables(df, t):
    assert t975(df) == pytest.approx(t, abs=5e-4)


def test_t_quantiles_beyond_the_table_approach_the_normal_one():
    assert t975(31) < t975(30)
    assert t975(60) == pytest.approx(2.0003, abs=1e-4)
    assert t975(120) == pytest.approx(1.9799, abs=1e-4)
    assert t975(10**7) == pytest.approx(1.95996, abs=1e-5)


def test_t_quantiles_agree_with_scipy_where_it_is_installed():
    stats = pytest.importorskip("scipy.stats")
    for df in [*range(1, 31), 31, 35, 50, 100, 1000]:
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=6e-5), df


def test_known_intervals_by_hand():
    # differences 1..5: mean 3, sd sqrt(2.5), half-width t_{.975,4} sd / sqrt(5)
    d = paired([1, 2, 3, 4, 5], [0] * 5)
    h = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert (d.n, d.diff, d.sd) == (5, 3.0, pytest.approx(math.sqrt(2.5)))
    assert d.low == pytest.approx(3 - h) and d.high == pytest.approx(3 + h)
    assert d.verdict == BETTER
    # 1..10 against 0.5 each: mean 5, sd of 1..10, t_{.975,9}
    d = paired(range(1, 11), [0.5] * 10)
    h = 2.2622 * np.std(np.arange(1, 11), ddof=1) / math.sqrt(10)
    assert d.diff == pytest.approx(5.0) and d.half_width == pytest.approx(h)


def test_scale_and_text_in_percentage_points():
    d = paired([0.93, 0.91, 0.92, 0.95, 0.90], [0.92, 0.915, 0.91, 0.94, 0.90], scale=100)
    assert d.diff == pytest.approx(0.5)
    assert d.text(" pp") == "+0.50 pp [-0.38, +1.38], n=5: cannot tell"
    assert d.cells() == ["+0.50 [-0.38, +1.38]", 5, CANNOT_TELL]


@pytest.mark.parametrize("mean, verdict", [(12.72, BETTER), (12.69, CANNOT_TELL),
                                           (-12.72, WORSE), (-12.69, CANNOT_TELL)])
def test_the_verdict_turns_where_the_interval_leaves_zero(mean, verdict):
    # two seeds at mean -+ 1: sd sqrt(2), half-width t_{.975,1} sqrt(2) / sqrt(2) = 12.706
    d = paired([mean - 1, mean + 1], [0, 0])
    assert d.half_width == pytest.approx(12.7062)
    assert d.verdict == verdict


def test_lower_is_better_swaps_the_verdict():
    loss_up = paired([2.1, 2.2, 2.3], [1.0, 1.1, 1.2], higher_is_better=False)
    assert loss_up.verdict == WORSE
    loss_down = paired([1.0, 1.1, 1.2], [2.1, 2.2, 2.3], higher_is_better=False)
    assert loss_down.verdict == BETTER
    assert paired([2.1, 2.2, 2.3], [1.0, 1.1, 1.2]).verdict == BETTER


def test_identical_runs_are_equal_not_better():
    d = paired([0.9, 0.8, 0.95], [0.9, 0.8, 0.95])
    assert (d.diff, d.low, d.high, d.verdict) == (0.0, 0.0, 0.0, EQUAL)
    assert d.text() == "+0.00 [+0.00, +0.00], n=3: equal on every seed"
    # a constant non-zero difference is a zero-width interval off zero
    assert paired([1.0, 2.0], [0.5, 1.5]).verdict == BETTER


def test_one_seed_gives_no_interval():
    d = paired([0.91], [0.90], scale=100)
    assert (d.n, d.low, d.high, d.sd, d.half_width) == (1, None, None, None, None)
    assert d.diff == pytest.approx(1.0)
    assert d.label == "cannot tell (1 seed)"
    assert d.text(" pp") == "+1.00 pp [no CI], n=1: cannot tell (1 seed)"
    assert d.as_dict()["low"] is None


@pytest.mark.parametrize("n, tol", [(2, 0.015), (5, 0.015), (40, 0.015)])
def test_the_interval_covers_the_mean_95_percent_of_the_time(n, tol):
    # 2000 simulated paired experiments: binomial sd of the coverage is 0.0049
    rng = np.random.default_rng(20261204 + n)
    covered = 0
    for _ in range(2000):
        method = rng.normal(0.3, 1.0, n)
        base = rng.normal(0.0, 0.5, n)
        d = paired(method, base)
        covered += d.low <= 0.3 <= d.high
    assert abs(covered / 2000 - 0.95) <= tol, covered / 2000


def test_bad_input_is_refused_with_the_cause():
    with pytest.raises(ValueError, match="method has 3, baseline 2"):
        paired([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"method: seed\(s\) \[1\] are not finite"):
        paired([1, float("nan"), 3], [1, 2, 3])
    with pytest.raises(ValueError, match=r"baseline: seed\(s\) \[0\]"):
        paired([1, 2], [float("inf"), 2])
    with pytest.raises(ValueError, match="no seeds"):
        paired([], [])
    with pytest.raises(ValueError, match="not a sequence of numbers"):
        paired(["a", 1], [1, 2])
    with pytest.raises(ValueError, match="degrees of freedom"):
        t975(0)


def test_seeds_needed_for_a_half_width():
    # sd 1, half-width 1: n = 6 gives 2.5706 / sqrt(6) = 1.05, n = 7 2.4469 / sqrt(7) = 0.92
    assert seeds_needed(1.0, 1.0) == 7
    assert seeds_needed(0.0, 0.3) == 2
    for sd, hw in [(0.45 * math.sqrt(10), 0.3), (0.004, 0.005), (2.0, 0.3)]:
        n = seeds_needed(sd, hw)
        assert t975(n - 1) * sd / math.sqrt(n) <= hw
        assert n == 2 or t975(n - 2) * sd / math.sqrt(n - 1) > hw
    with pytest.raises(ValueError, match="half-width"):
        seeds_needed(1.0, 0.0)
    with pytest.raises(ValueError, match="standard deviation"):
        seeds_needed(float("nan"), 0.3)


def test_the_plan_line_names_each_comparisons_seeds():
    from paired import plan_line

    base = [0.90, 0.92, 0.91]
    versus = {"base": paired(base, base), "a": paired([0.91, 0.93, 0.92], base, scale=100),
              "b": paired([0.905, 0.91, 0.92], base, scale=100)}
    # a: the same +1 pp on every seed, 2 seeds; b: sd 1.041 pp, t sd / sqrt(n) <= 0.3
    assert versus["b"].seeds_for(0.3) == seeds_needed(versus["b"].sd, 0.3) > 40
    assert plan_line(versus, "base") == ("seeds for a 95 % CI half-width of 0.3 pp at these "
                                         f"spreads: a 2, b {versus['b'].seeds_for(0.3)}")
    assert plan_line({"base": versus["base"], "c": paired([1.0], [0.9])}, "base") is None


# ---------------------------------------------------------------- Holm's correction

def test_t_test_p_values_agree_with_scipy_where_it_is_installed():
    stats = pytest.importorskip("scipy.stats")
    from paired import t_two_sided_p
    for t in (0.0, 0.3, 1.0, 2.2622, 3.1, 8.95, 40.0):
        for df in (1, 2, 4, 9, 19, 100):
            assert t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9,
                                                         abs=1e-12), (t, df)


def test_p_below_005_exactly_where_the_interval_excludes_zero():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 12))
        d = paired(rng.normal(0.4, 1.0, n), np.zeros(n))
        # t975 has 4 decimals: a p within 1e-4 of 0.05 may fall either side
        if abs(d.p - 0.05) > 1e-4:
            assert (d.p < 0.05) == (d.verdict != CANNOT_TELL), (d, d.p)


def test_holm_textbook_example():
    # Holm-Bonferroni's usual worked example: four hypotheses at a family-wise 5 %;
    # sorted 0.005 <= 0.05/4 and 0.01 <= 0.05/3 are rejected, 0.03 > 0.05/2 stops the steps
    from paired import holm_adjusted
    adj = holm_adjusted([0.01, 0.04, 0.03, 0.005])
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert [a <= 0.05 for a in adj] == [True, False, False, True]
    # an untested comparison (one seed) keeps None and does not count in m
    assert holm_adjusted([0.02, None, 0.04]) == [pytest.approx(0.04), None,
                                                 pytest.approx(0.04)]


def _with_p(p: float, sign: float = 1.0, n: int = 10):
    """A comparison of n seeds whose two-sided t test gives p, on the side of `sign`."""
    from paired import Paired, t975, t_two_sided_p
    lo, hi = 0.0, 50.0          # bisect t so that the p-value is p
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, n - 1) > p else (lo, mid)
    t = (lo + hi) / 2
    sd, mean = 1.0, sign * t / math.sqrt(n)
    h = t975(n - 1) * sd / math.sqrt(n)
    verdict = CANNOT_TELL if mean - h <= 0 <= mean + h else (BETTER if mean > 0 else WORSE)
    return Paired(mean, mean - h, mean + h, n, sd, verdict, True)


def test_holm_verdicts_of_a_family():
    from paired import holm
    fam = {"a": _with_p(0.01), "b": _with_p(0.04, -1), "c": _with_p(0.03), "d": _with_p(0.005, -1)}
    assert {k: round(v.p, 6) for k, v in fam.items()} == {"a": 0.01, "b": 0.04, "c": 0.03,
                                                           "d": 0.005}
    # uncorrected, all four exclude zero; Holm keeps a (better) and d (worse) only
    assert all(v.verdict != CANNOT_TELL for v in fam.values())
    assert holm(fam) == {"a": BETTER, "b": CANNOT_TELL, "c": CANNOT_TELL, "d": WORSE}


@pytest.mark.parametrize("p", [0.001, 0.049, 0.051, 0.5])
def test_holm_of_one_comparison_is_its_own_verdict(p):
    from paired import holm
    for sign in (1, -1):
        d = _with_p(p, sign)
        assert holm({"x": d}) == {"x": d.label}


def test_holm_keeps_equal_and_one_seed_comparisons():
    from paired import holm
    fam = {"eq": paired([1, 2, 3], [1, 2, 3]), "one": paired([1.0], [0.0]),
           "big": paired([5.1, 5.0, 4.9, 5.2], [0, 0, 0, 0])}
    assert holm(fam) == {"eq": EQUAL, "one": f"{CANNOT_TELL} (1 seed)", "big": BETTER}


def test_from_interval_gives_back_the_comparisons_test():
    from paired import from_interval
    d = paired([0.3, -0.1, 0.5, 0.2, 0.4, 0.0, 0.6], [0.0] * 7)
    r = from_interval(d.diff, d.low, d.high, d.n)
    assert r.p == pytest.approx(d.p, rel=1e-9) and r.verdict == d.verdict


# ---------------------------------------------------------------- equivalence (TOST)

def test_t_quantiles_by_bisection_agree_with_the_table_and_scipy():
    from paired import t_quantile
    for df in (1, 4, 9, 30):
        assert t_quantile(0.975, df) == pytest.approx(t975(df), abs=6e-5)
    stats = pytest.importorskip("scipy.stats")
    for q in (0.9, 0.95, 0.99):
        for df in (2, 9, 19, 100):
            assert t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9)


def test_tost_against_a_hand_computed_case():
    # differences 0.1, 0.2, 0.0, 0.1, 0.1: mean 0.1, sd 0.0707, se 0.0316, df 4;
    # margin 0.25: t = (0.25 - 0.1) / se = 4.743, one-sided p = 0.0045 (scipy: t.sf)
    from paired import EQUIVALENT, tost
    r = tost([0.1, 0.2, 0.0, 0.1, 0.1], [0.0] * 5, margin=0.25)
    assert r.verdict == EQUIVALENT and r.p == pytest.approx(0.004507, abs=2e-6)
    h = 2.1318 * math.sqrt(0.005) / math.sqrt(5)        # t_{0.95, 4}
    assert r.low90 == pytest.approx(0.1 - h, abs=1e-4) and r.high90 == pytest.approx(0.1 + h,
                                                                                      abs=1e-4)


def test_tost_verdicts_and_its_error_rate_at_the_margin():
    from paired import EQUIVALENT, NOT_EQUIVALENT, UNDECIDED, tost
    assert tost([5.0, 5.1, 4.9], [0, 0, 0], margin=1).verdict == NOT_EQUIVALENT
    assert tost([0.5, -0.5, 0.9, -0.9], [0] * 4, margin=0.3).verdict == UNDECIDED
    assert tost([1.0], [0.0], margin=2).verdict == UNDECIDED
    # at a true difference exactly on the margin, equivalence is declared at most 5 % of
    # the time: 4000 experiments of 10 seeds (fixed seed), 5 % + 1 % allowed for sampling
    rng = np.random.default_rng(11)
    hits = sum(tost(list(rng.normal(0.01, 0.01, 10)), [0.0] * 10, margin=0.01).verdict
               == EQUIVALENT for _ in range(4000))
    assert hits / 4000 <= 0.06
    # far inside the margin with little noise it is declared nearly always
    hits = sum(tost(list(rng.normal(0.0, 0.005, 10)), [0.0] * 10, margin=0.01).verdict
               == EQUIVALENT for _ in range(500))
    assert hits / 500 >= 0.95
    with pytest.raises(ValueError):
        tost([1, 2], [1, 2], margin=0)
