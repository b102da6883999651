"""Paired comparisons over seeds: the one way the benches compare a method with its baseline.

A method and its baseline run on the same seeds (same data split, model and batches), so
the per-seed differences carry the comparison: their mean, a 95 % confidence interval
from Student's t with n - 1 degrees of freedom, n, and a verdict.

    d = paired(cnat_finals, uncompressed_finals, scale=100)     # accuracies, in pp
    d.text(" pp")    # "+0.42 pp [-0.10, +0.94], n=5: cannot tell"

No scipy: it is not a dependency of the project, and one quantile is all this needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

LEVEL = 0.95
# t_{0.975, df} for df = 1..30, to 4 decimals (scipy.stats.t.ppf agrees: tests check it)
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)
_Z975 = 1.959963984540054

BETTER, WORSE, CANNOT_TELL, EQUAL = "better", "worse", "cannot tell", "equal on every seed"


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom."""
    if df < 1 or int(df) != df:
        raise ValueError(f"degrees of freedom must be a whole number >= 1, not {df!r}")
    if df <= len(_T975):
        return _T975[df - 1]
    # Cornish-Fisher expansion around the normal quantile: within 3e-8 of the exact
    # quantile from df = 31 on, where a table would have to stop.
    z, v = _Z975, float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4))


@dataclass(frozen=True)
class Paired:
    """method - baseline over paired seeds, in the unit the values were scaled to."""

    diff: float                 # mean of the per-seed differences
    low: float | None           # 95 % CI; None under 2 seeds
    high: float | None
    n: int
    sd: float | None            # standard deviation of the differences (n - 1)
    verdict: str                # BETTER, WORSE, CANNOT_TELL or EQUAL
    higher_is_better: bool

    @property
    def half_width(self) -> float | None:
        return None if self.low is None else (self.high - self.low) / 2

    @property
    def label(self) -> str:
        """The verdict as a table shows it."""
        return f"{CANNOT_TELL} (1 seed)" if self.n < 2 else self.verdict

    def interval(self, digits: int = 2, unit: str = "") -> str:
        """"+0.42 [-0.10, +0.94]"; from one seed "+0.42 [no CI]"."""
        ci = "no CI" if self.low is None else \
            f"{_signed(self.low, digits)}, {_signed(self.high, digits)}"
        return f"{_signed(self.diff, digits)}{unit} [{ci}]"

    def text(self, unit: str = "", digits: int = 2, verdict: bool = True) -> str:
        """"+0.42 pp [-0.10, +0.94], n=5: cannot tell", for prose and plain tables;
        without the verdict where the difference is not method - baseline (a target's gap)."""
        return f"{self.interval(digits, unit)}, n={self.n}" + (f": {self.label}" if verdict
                                                                else "")

    def cells(self, digits: int = 2) -> list:
        """Three table columns: difference [95 % CI], seeds, verdict."""
        return [self.interval(digits), self.n, self.label]

    def seeds_for(self, half_width: float) -> int | None:
        """Seeds for a 95 % CI of `half_width` at this comparison's spread (None: 1 seed)."""
        return None if self.sd is None else seeds_needed(self.sd, half_width)

    @property
    def p(self) -> float | None:
        """Two-sided p-value of Student's paired t test of a zero mean difference (None: one
        seed). Below 0.05 exactly where the 95 % CI excludes zero."""
        if self.n < 2:
            return None
        if self.sd == 0:
            return 1.0 if self.diff == 0 else 0.0
        return t_two_sided_p(self.diff / (self.sd / math.sqrt(self.n)), self.n - 1)

    def as_dict(self) -> dict:
        return {**asdict(self), "level": LEVEL, "p": self.p}


# the half-width accuracy comparisons aim at (issue 39), in percentage points
HALF_WIDTH_PP = 0.3
# what a report says once above a table of these columns
EXPLAINED = ("the mean over seeds of the per-seed difference (method - baseline, same seeds) "
             "with its 95 % confidence interval (Student's t, seeds - 1 degrees of freedom); "
             "*verdict*: better or worse where the interval excludes zero, *equal on every "
             "seed* where no seed differs, else *cannot tell* at this number of seeds "
             "(bench/paired.py)")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta: no convergence at a={a}, b={b}, x={x}")


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, not {df!r}")
    if not math.isfinite(t):
        return 0.0
    return _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(q: float, df: float) -> float:
    """The q quantile of Student's t with `df` degrees of freedom, 0.5 <= q < 1 (bisection
    on the two-sided p-value, to 1e-12)."""
    if not 0.5 <= q < 1:
        raise ValueError(f"q must be within [0.5, 1), not {q!r}")
    lo, hi, target = 0.0, 1.0, 2 * (1 - q)
    while t_two_sided_p(hi, df) > target:
        hi *= 2
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > target else (lo, mid)
    return (lo + hi) / 2


EQUIVALENT, NOT_EQUIVALENT, UNDECIDED = "equivalent", "not equivalent", "undecided"


@dataclass(frozen=True)
class Tost:
    """Two one-sided t tests of |method - baseline| < margin over paired seeds."""

    diff: float
    low90: float | None             # the 90 % CI whose inclusion in (-margin, margin) is TOST
    high90: float | None
    n: int
    margin: float
    p: float | None                 # the larger of the two one-sided p-values
    verdict: str                    # EQUIVALENT, NOT_EQUIVALENT (90 % CI wholly outside) or
                                    # UNDECIDED

    def text(self, digits: int = 4) -> str:
        if self.low90 is None:
            return f"{_signed(self.diff, digits)}, n={self.n}: {UNDECIDED} (1 seed)"
        return (f"{_signed(self.diff, digits)} [90 % CI {_signed(self.low90, digits)}, "
                f"{_signed(self.high90, digits)}] within +-{self.margin:g}: TOST p "
                f"{self.p:.3g}, n={self.n}: {self.verdict}")


def tost(method: Sequence[float], baseline: Sequence[float], margin: float,
         alpha: float = 0.05) -> Tost:
    """Equivalence of a method and its baseline within +-margin (in the values' unit): two
    one-sided paired t tests at `alpha` each, H0 diff <= -margin and H0 diff >= +margin;
    EQUIVALENT when both reject (the 1 - 2 alpha CI lies inside the margin). The margin is
    to be fixed before the values are seen."""
    if not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a finite number > 0, not {margin!r}")
    d = paired(method, baseline)
    if d.n < 2:
        return Tost(d.diff, None, None, d.n, margin, None, UNDECIDED)
    se = d.sd / math.sqrt(d.n)
    df = d.n - 1
    if se == 0:
        inside = abs(d.diff) < margin
        return Tost(d.diff, d.diff, d.diff, d.n, margin, 0.0 if inside else 1.0,
                    EQUIVALENT if inside else NOT_EQUIVALENT)

    def upper_tail(t: float) -> float:          # P(T >= t)
        p2 = t_two_sided_p(t, df) / 2
        return p2 if t >= 0 else 1 - p2

    p_low = upper_tail((d.diff + margin) / se)      # H0: diff <= -margin
    p_high = upper_tail((margin - d.diff) / se)     # H0: diff >= +margin
    h = t_quantile(1 - alpha, df) * se
    low, high = d.diff - h, d.diff + h
    p = max(p_low, p_high)
    verdict = (EQUIVALENT if p < alpha else
               NOT_EQUIVALENT if low >= margin or high <= -margin else UNDECIDED)
    return Tost(d.diff, low, high, d.n, margin, p, verdict)


def holm_adjusted(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m is
    multiplied by m - i + 1 and the running maximum taken, capped at 1. A None (a comparison
    with no test, e.g. one seed) stays None and does not count in m."""
    idx = sorted((i for i, p in enumerate(pvalues) if p is not None),
                 key=lambda i: pvalues[i])
    m, out, run = len(idx), [None] * len(pvalues), 0.0
    for rank, i in enumerate(idx):
        p = float(pvalues[i])
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must be within [0, 1], not {p!r}")
        run = max(run, min(1.0, (m - rank) * p))
        out[i] = run
    return out


def holm(family: dict[str, Paired], alpha: float = 1 - LEVEL) -> dict[str, str]:
    """Verdicts of a family of comparisons (several methods against one baseline) under
    Holm's step-down correction at family-wise error `alpha`: BETTER or WORSE (by the sign
    of the difference) where the adjusted p-value is at most alpha, EQUAL where every seed
    was equal, else CANNOT_TELL. With one comparison it is that comparison's own verdict."""
    names = list(family)
    adj = holm_adjusted([family[k].p for k in names])
    out = {}
    for k, a in zip(names, adj, strict=True):
        d = family[k]
        if d.verdict == EQUAL or a is None:
            out[k] = d.label
        elif a > alpha:
            out[k] = CANNOT_TELL
        else:
            out[k] = BETTER if (d.diff > 0) == d.higher_is_better else WORSE
    return out


def from_interval(diff: float, low: float, high: float, n: int,
                  higher_is_better: bool = True) -> Paired:
    """A comparison rebuilt from its printed mean and 95 % CI (for tables whose per-seed
    values were not kept): sd = half-width sqrt(n) / t_{n-1}."""
    sd = (high - low) / 2 * math.sqrt(n) / t975(n - 1)
    verdict = (CANNOT_TELL if low <= 0 <= high else
               BETTER if (low > 0) == higher_is_better else WORSE)
    return Paired(diff, low, high, n, sd, verdict, higher_is_better)


# what a report says beside a Holm column
HOLM_EXPLAINED = ("*Holm*: the verdict after Holm's step-down correction over the family "
                  "named (every method against the one baseline), at a family-wise error "
                  "of 5 %, from each comparison's paired t test (bench/paired.py `holm`)")


def _signed(x: float, digits: int) -> str:
    s = f"{x:+.{digits}f}"
    return s.replace("-", "+") if float(s) == 0 else s     # no "-0.00"


def _values(name: str, xs: Sequence[float]) -> list[float]:
    try:
        out = [float(x) for x in xs]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: not a sequence of numbers ({e})") from None
    bad = [i for i, x in enumerate(out) if not math.isfinite(x)]
    if bad:
        raise ValueError(f"{name}: seed(s) {bad} are not finite numbers "
                         f"({', '.join(str(out[i]) for i in bad[:5])})")
    return out


def paired(method: Sequence[float], baseline: Sequence[float], *,
           higher_is_better: bool = True, scale: float = 1.0) -> Paired:
    """Compare per-seed values of a method with its baseline's on the same seeds.

    method[i] and baseline[i] must come from seed i. `scale` multiplies the differences
    (100: fractions to percentage points). higher_is_better: accuracy True, loss False.
    The verdict is BETTER or WORSE when the 95 % CI lies wholly on one side of zero,
    EQUAL when every seed gave exactly the baseline's value, else CANNOT_TELL.
    """
    m, b = _values("method", method), _values("baseline", baseline)
    if len(m) != len(b):
        raise ValueError(f"paired values need one per seed on both sides: method has "
                         f"{len(m)}, baseline {len(b)}")
    if not m:
        raise ValueError("no seeds to compare")
    d = [scale * (x - y) for x, y in zip(m, b, strict=True)]
    n = len(d)
    mean = math.fsum(d) / n
    if n < 2:
        return Paired(mean, None, None, 1, None, CANNOT_TELL, higher_is_better)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    low, high = mean - h, mean + h
    if all(x == 0 for x in d):
        verdict = EQUAL
    elif low > 0 or high < 0:
        verdict = BETTER if (low > 0) == higher_is_better else WORSE
    else:
        verdict = CANNOT_TELL
    return Paired(mean, low, high, n, sd, verdict, higher_is_better)


def seeds_needed(sd: float, half_width: float, max_seeds: int = 100_000) -> int:
    """The fewest seeds (>= 2) whose 95 % CI half-width, t_{n-1} sd / sqrt(n), is at most
    `half_width`, for differences of standard deviation `sd` (a pilot run's Paired.sd).
    A plan, not a promise: the pilot's sd is itself an estimate."""
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"standard deviation must be a finite number >= 0, not {sd!r}")
    if not (math.isfinite(half_width) and half_width > 0):
        raise ValueError(f"half-width must be a finite number > 0, not {half_width!r}")
    for n in range(2, max_seeds + 1):
        if t975(n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    raise ValueError(f"more than {max_seeds} seeds for a half-width of {half_width} "
                     f"at sd {sd}")


def plan_line(versus: dict, baseline: str) -> str | None:
    """How many seeds each comparison would need for a CI of HALF_WIDTH_PP at its spread."""
    need = {k: d.seeds_for(HALF_WIDTH_PP) for k, d in versus.items() if k != baseline}
    if not need or None in need.values():
        return None
    return (f"seeds for a 95 % CI half-width of {HALF_WIDTH_PP} pp at these spreads: "
            + ", ".join(f"{k} {n}" for k, n in need.items()))
