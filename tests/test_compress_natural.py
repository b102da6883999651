"""C_nat and natural dithering: the properties the papers prove, checked on our operators."""

from fractions import Fraction

import numpy as np
import pytest

from worker.compression.natural import (
    NaturalCompression,
    NaturalDithering,
    cnat,
    cnat_hi16,
    random_r7,
    random_u16,
    round_hi16,
    tie_carry,
)


def rng(seed=0):
    return np.random.default_rng(seed)


def f32(bits):
    return np.array(bits, np.uint32).view(np.float32)


# ------------------------------------------------------------------ exact carry probability


@pytest.mark.parametrize("mant", [0, 1, 0x7FFF, 0x10000, 0x2ABCDE, 0x400000, 0x7F0000, 0x7FFFFF])
def test_carry_probability_is_exactly_mantissa_over_2_23(mant):
    # Enumerate every 7-bit random value, and for the one tie every 16-bit draw:
    # the carry probability must equal mantissa / 2^23 as a fraction, not approximately.
    bits = np.full(128, (130 << 23) | mant, np.uint32)
    r7 = np.arange(128, dtype=np.uint8)
    drawn = []

    def never(k):
        drawn.append(k)
        return np.zeros(k, np.uint16)

    hi = round_hi16(bits, r7, never)
    carried = int(((hi >> 7) & 0xFF).astype(int).sum() - 130 * 128)
    assert drawn == [1], "exactly one of the 128 top-bit draws must be undecided"
    top7, low16 = mant >> 16, mant & 0xFFFF
    assert carried == top7
    all_draws = np.full(65536, (130 << 23) | mant, np.uint32)
    tie_hits = int(tie_carry(all_draws, np.arange(65536), lambda k: np.arange(k, dtype=np.uint16))
                   .sum())
    assert tie_hits == low16
    prob = Fraction(carried, 128) + Fraction(1, 128) * Fraction(tie_hits, 65536)
    assert prob == Fraction(mant, 2**23)


def test_the_random_draws_are_uniform():
    # the exact carry above assumes uniform r7 and 16-bit draws: 10000 expected per value,
    # each count within 5 standard deviations (about 100)
    r7 = random_r7(rng(30), 128 * 10000)
    assert r7.max() == 127
    counts = np.bincount(r7, minlength=128)
    assert np.all(np.abs(counts - 10000) < 500)
    hi = random_u16(rng(31), 256 * 10000) >> 8  # the top byte of the 16-bit draws
    counts = np.bincount(hi, minlength=256)
    assert np.all(np.abs(counts - 10000) < 500)


# ------------------------------------------------------------------ statistics of C_nat


def _values():
    g = rng(1)
    mags = np.ldexp(g.uniform(1, 2, 60), g.integers(-30, 30, 60))
    t = np.concatenate([mags, [1.0, 1.25, 1.5, 3.0, 4 / 3, 2**-20 * 1.7, 1e30, 123.456]])
    return (t * np.where(g.random(t.size) < 0.5, -1, 1)).astype(np.float32)


def _samples(t, n, seed=2):
    return cnat(np.tile(t, (n, 1)), rng(seed)).astype(np.float64)


def test_cnat_is_unbiased():
    t = _values().astype(np.float64)
    n = 20000
    out = _samples(t.astype(np.float32), n)
    a = np.floor(np.log2(np.abs(t)))
    lo = 2.0**a
    var = (np.abs(t) - lo) * (2 * lo - np.abs(t))  # exact variance of C_nat(t)
    # 5 standard errors of the mean (plus float slack for exact powers of two)
    tol = 5 * np.sqrt(var / n) + 1e-12 * np.abs(t)
    assert np.all(np.abs(out.mean(axis=0) - t) <= tol)


def test_cnat_second_moment_formula():
    t = _values().astype(np.float64)
    n = 20000
    out = _samples(t.astype(np.float32), n, seed=3)
    a = np.floor(np.log2(np.abs(t)))
    expect = 3 * 2**a * np.abs(t) - 2 ** (2 * a + 1)
    # C^2 takes the values 4^a and 4^(a+1): its std is at most 1.5 * 4^a
    tol = 5 * 1.5 * 4.0**a / np.sqrt(n) + 1e-12 * expect
    assert np.all(np.abs((out**2).mean(axis=0) - expect) <= tol)


def test_cnat_worst_ratio():
    n = 400000
    for a in (-3, 0, 5):
        t = np.float32(4 / 3 * 2.0**a)
        ratio = (_samples(np.array([t]), n, seed=4 + a)[:, 0] ** 2).mean() / float(t) ** 2
        # std of the ratio estimate is sqrt(0.633 / n) = 0.0013
        assert abs(ratio - 9 / 8) < 0.0065
    ratio3 = (_samples(np.array([3.0], np.float32), n, seed=9)[:, 0] ** 2).mean() / 9
    assert abs(ratio3 - 10 / 9) < 0.0065
    # and nowhere in a binade is it larger than 9/8 (exact formula, from the samples' law)
    grid = np.linspace(1, 2, 41, endpoint=False, dtype=np.float32)
    est = (_samples(grid, 20000, seed=10) ** 2).mean(axis=0) / grid.astype(np.float64) ** 2
    assert est.max() < 9 / 8 + 0.02


def test_powers_of_two_are_fixed():
    k = np.arange(-126, 128)
    x = np.concatenate([np.ldexp(1.0, k), -np.ldexp(1.0, k)]).astype(np.float32)
    assert np.array_equal(cnat(np.tile(x, (50, 1)), rng(5)), np.tile(x, (50, 1)))


def test_outputs_are_zero_or_signed_powers_of_two():
    g = rng(6)
    x = (g.standard_normal(100000) * np.exp(g.uniform(-40, 40, 100000))).astype(np.float32)
    x[:100] = 0
    y = cnat(x, rng(7))
    bits = y.view(np.uint32)
    assert np.all(bits & 0x7FFFFF == 0), "a mantissa bit is set"
    assert np.array_equal(np.signbit(y), np.signbit(x))
    assert np.all(y[:100] == 0)
    # neighbours: |y| is 2^e or 2^(e+1) for 2^e <= |x| < 2^(e+1)
    e = np.floor(np.log2(np.abs(x[100:].astype(np.float64))))
    r = np.log2(np.abs(y[100:].astype(np.float64))) - e
    assert np.all((r == 0) | (r == 1))


def test_two_and_a_half_becomes_two_with_probability_three_quarters():
    y = cnat(np.full(1_000_000, 2.5, np.float32), rng(8))
    assert set(np.unique(y)) == {2.0, 4.0}
    # std of the frequency is sqrt(3/16 / 1e6) = 0.00043
    assert abs((y == 2.0).mean() - 0.75) < 0.0022


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    y = cnat(np.tile(x, 1000), rng(9)).reshape(1000, 5)
    assert np.all(y[:, 0] == 0) and not np.signbit(y[:, 0]).any()
    assert np.all(y[:, 1] == 0) and np.signbit(y[:, 1]).all()
    assert np.all(y[:, 2] == np.inf) and np.all(y[:, 3] == -np.inf)
    assert np.isnan(y[:, 4]).all()
    # a float32 overflow: 1.5 * 2^127 becomes 2^127 or infinity
    big = cnat(np.full(1000, 1.5 * 2.0**127, np.float32), rng(10))
    assert set(np.unique(big)) == {np.float32(2.0**127), np.inf}


def test_subnormals_round_unbiasedly_to_zero_or_smallest_normal():
    t = f32([0x00100000])[0]  # 2^20 * 2^-149 = 2^-129 = 2^-126 / 8
    y = cnat(np.full(400000, t, np.float32), rng(11)).astype(np.float64)
    assert set(np.unique(y)) == {0.0, 2.0**-126}
    # frequency of 2^-126 is 1/8; its std is sqrt(7/64 / 4e5) = 0.00052
    assert abs((y > 0).mean() - 1 / 8) < 0.0026


def test_the_kernel_works_in_blocks_and_keeps_shapes():
    x = rng(12).standard_normal((3, 700001)).astype(np.float32)  # several kernel blocks
    hi = cnat_hi16(x, rng(13))
    assert hi.shape == (x.size,) and hi.dtype == np.uint16
    y = cnat(x, rng(13))
    assert y.shape == x.shape
    r = np.abs(y.astype(np.float64)) / np.abs(x)
    assert r.min() > 0.5 and r.max() < 2.0


def test_natural_compression_operator():
    c = NaturalCompression(rng(14))
    x = rng(15).standard_normal((10, 7)).astype(np.float32)
    p = c.compress(x)
    assert c.bits(p) == 9 * 70
    y = c.decompress(p)
    assert y.shape == x.shape and y.dtype == np.float32
    with pytest.raises(ValueError, match="Generator"):
        NaturalCompression()


# ------------------------------------------------------------------ natural dithering


def _theorem7(d, p, s):
    r = min(p, 2.0)
    q = d ** (1 / r) * 2.0 ** (1 - s)
    return 1 / 8 + q * min(1.0, q)


@pytest.mark.parametrize("p,s", [(2.0, 4), (np.inf, 3), (1.0, 6), (2.0, 1)])
def test_dnat_outputs_are_norm_times_powers_of_two(p, s):
    x = rng(16).standard_normal(300).astype(np.float32)
    op = NaturalDithering(rng(17), p=p, s=s)
    norm = np.linalg.norm(x.astype(np.float64), ord=p)
    y = np.stack([op.roundtrip(x) for _ in range(50)]).astype(np.float64)
    nz = y != 0
    assert np.all(np.signbit(y[nz]) == np.broadcast_to(np.signbit(x), y.shape)[nz])
    j = -np.log2(np.abs(y[nz]) / norm)
    assert np.allclose(j, np.round(j), atol=1e-6)  # the norm is sent as a float32
    assert np.round(j).min() >= 0 and np.round(j).max() <= s - 1


@pytest.mark.parametrize("d,p,s", [(9, 2.0, 8), (100, 2.0, 4), (100, np.inf, 3), (50, 1.0, 6),
                                   (1000, 2.0, 2)])
def test_dnat_variance_within_theorem_7(d, p, s):
    g = rng(18)
    # equal entries with p = 2, d = 9 put every t at (4/3) 2^-2: C_nat's worst case
    vectors = [np.ones(d), g.standard_normal(d), g.standard_t(2, d), np.eye(d)[0] + 0.01]
    bound = _theorem7(d, p, s)
    op = NaturalDithering(rng(19), p=p, s=s)
    n = 3000
    for x in vectors:
        x = x.astype(np.float32)
        sq = np.sum(x.astype(np.float64) ** 2)
        errs = np.array([np.sum((op.roundtrip(x) - x.astype(np.float64)) ** 2) / sq
                         for _ in range(n)])
        omega = errs.mean()
        # 5 standard errors of the estimate
        assert omega <= bound + 5 * errs.std() / np.sqrt(n), (x[:3], omega, bound)


def test_dnat_is_unbiased():
    x = rng(20).standard_normal(64).astype(np.float32)
    op = NaturalDithering(rng(21), p=2.0, s=3)
    y = np.stack([op.roundtrip(x) for _ in range(20000)]).astype(np.float64)
    se = y.std(axis=0) / np.sqrt(y.shape[0])
    assert np.all(np.abs(y.mean(axis=0) - x) <= 5 * se + 1e-9)


def test_dnat_bits_and_buckets():
    op = NaturalDithering(rng(22), p=2.0, s=8, bucket=100)
    x = rng(23).standard_normal(250).astype(np.float32)
    c = op.compress(x)
    assert c.payload["norm"].size == 3
    assert op.bits(c) == 3 * 32 + 250 * (1 + 4)  # sign + level index of 9 symbols
    assert op.roundtrip(x).shape == (250,)
    with pytest.raises(ValueError):
        NaturalDithering(rng(0), s=0)
