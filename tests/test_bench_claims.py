"""bench/claims.py's exact expectations against sampling the compressors themselves: C_nat's
second moment (at most 9/8 of ||x||^2, reached at (4/3) 2^k) and the variance of natural and
random dithering between their levels."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from claims import (  # noqa: E402  (bench/ is on the path from here)
    BOUND,
    cnat_second_moment,
    dither_omega,
    natural_levels,
    uniform_levels,
)

from worker.compression.dithering import RandomDithering  # noqa: E402
from worker.compression.natural import NaturalDithering, cnat  # noqa: E402

DRAWS = 2000


def test_cnat_second_moment_is_exact_and_within_nine_eighths():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(500) * np.exp2(rng.integers(-20, 20, 500))).astype(np.float32)
    exact = cnat_second_moment(x)
    sampled = np.mean([np.sum(cnat(x, rng).astype(np.float64) ** 2) for _ in range(DRAWS)])
    # each element's C_nat^2 has a spread below its own mean: 5 standard errors
    assert abs(sampled - exact) < 5 * exact / np.sqrt(DRAWS), (sampled, exact)
    ratio = exact / np.sum(x.astype(np.float64) ** 2)
    assert 1 <= ratio <= BOUND
    worst = np.float32([4 / 3, -8 / 3, 1 / 3])         # (4/3) 2^k: 9/8 (p = 1/3 up)
    assert np.isclose(cnat_second_moment(worst) / np.sum(worst.astype(np.float64) ** 2), BOUND)
    powers = np.float32([1, 2, -0.25])                 # powers of two are kept as they are
    assert cnat_second_moment(powers) == np.sum(powers.astype(np.float64) ** 2)


def test_dithering_omega_is_exact_against_the_compressors():
    rng = np.random.default_rng(6)
    x = rng.standard_normal(64).astype(np.float32)
    norm2 = np.sum(x.astype(np.float64) ** 2)
    for comp, levels in ((NaturalDithering(rng, s=7), natural_levels(7)),
                         (RandomDithering(rng, s=7), uniform_levels(7))):
        err = [np.sum((comp.decompress(comp.compress(x)).astype(np.float64) - x) ** 2)
               for _ in range(DRAWS)]
        sampled = np.mean(err) / norm2
        exact = dither_omega(x, levels)
        tol = 5 * np.std(err) / norm2 / np.sqrt(DRAWS)
        assert abs(sampled - exact) < tol, (type(comp).__name__, sampled, exact, tol)
    assert natural_levels(3).tolist() == [0, 0.25, 0.5, 1]
    assert uniform_levels(3).tolist() == [0, 1 / 3, 2 / 3, 1]
    assert dither_omega(np.zeros(4), natural_levels(3)) == 0


def test_gap_growth_reads_an_exponential_gap_and_a_gap_that_stops_growing():
    from claims import gap_growth
    rows = [["w", 0, b, "model", 1.0, 3.0 ** (b - 2), 3.0 ** (b - 2)] for b in (3, 4, 5)]
    rows += [["w", 0, 3, "big", 1.0, 1.4, 1.4], ["w", 0, 4, "big", 1.0, 31.0, 31.0],
             ["w", 0, 5, "big", 1.0, 27.0, 27.0]]
    (model, layer) = gap_growth(rows)
    # exactly 3x a bit: each step and the fit say 3
    assert model[:3] == ["w", 0, "model"] and model[3] == "3, 9, 27"
    assert model[4:] == ["3", "3", "3"]
    # a layer's gap that grows, then shrinks from 4 to 5 bits
    assert layer[2] == "layer big" and float(layer[4]) > 20 and float(layer[5]) < 1
