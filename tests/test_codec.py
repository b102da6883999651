"""worker/codec.py against docs/PROTOCOL.md: scaling, FIXED32, CNAT8, the switch's side."""

import numpy as np
import pytest

from worker import codec


def rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ scaling and chunking


def test_headroom_and_unit():
    assert [codec.headroom(n) for n in (1, 2, 3, 4, 5, 8, 9, 64, 65, 255)] == \
        [0, 1, 2, 2, 3, 3, 4, 6, 7, 8]
    with pytest.raises(ValueError):
        codec.headroom(0)
    # E = 127 (values in [1, 2)), n = 4: u = (127 - 127 + 1) - (30 - 2) = -27
    assert codec.unit_exponent(127, 4) == -27
    assert codec.max_code(4) == 29


def test_chunking_pads_and_restores():
    x = rng(1).standard_normal(1000).astype(np.float32)
    ch = codec.chunk(x, 256)
    assert ch.shape == (4, 256) and np.all(ch.reshape(-1)[1000:] == 0)
    assert np.array_equal(codec.unchunk(ch, 1000), x)
    assert codec.chunk(x, 100).shape == (10, 100)
    assert codec.chunk(np.zeros(0, np.float32)).shape == (0, codec.ELEMS)


def test_chunk_exponents():
    ch = np.zeros((5, 4), np.float32)
    ch[0] = [1.0, -1.5, 0.25, 0]
    ch[1] = [3.0, -0.5, 0, 0]
    ch[2] = [-7.9e37, 1, 0, 0]
    ch[4] = [1e-40, 0, 0, 0]  # subnormal: exponent field 0
    assert list(codec.chunk_exponents(ch)) == [127, 128, 252, 0, 0]
    bad = ch.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="chunk 3"):
        codec.chunk_exponents(bad)


# ------------------------------------------------------------------ FIXED32


def test_fixed32_exact_values_round_trip():
    n = 4
    # multiples of one unit (2^-27 at E = 127) encode deterministically
    x = (np.arange(-128, 128, dtype=np.float64) * 2.0**-20).astype(np.float32)[None]
    x[0, 0] = 1.5  # sets the exponent to 127
    q = codec.encode_fixed32(x, 127, n, rng(2))
    assert np.array_equal(q[0, 1:], np.arange(-127, 128) * 2**7)
    assert np.array_equal(codec.decode_fixed32(q, 127, n), x)


def test_fixed32_stochastic_rounding_is_unbiased():
    n = 8
    x = (rng(3).standard_normal(256) * 2.0**-25).astype(np.float32)
    x[0] = 1.0  # E = 127, unit 2^-26: most values are a few units with a fraction
    reps = np.tile(x, (4000, 1))
    q = codec.encode_fixed32(reps, 127, n, rng(4))
    y = codec.decode_fixed32(q, 127, n).astype(np.float64)
    assert np.all(np.abs(y - x) < 2.0**-26)  # within one unit
    se = y.std(axis=0) / np.sqrt(y.shape[0])
    assert np.all(np.abs(y.mean(axis=0) - x) <= 5 * se + 1e-15)


def test_fixed32_below_half_a_unit_and_tiny_rows():
    # E = 127, n = 2: unit 2^-28. Values of 0.375, 3e-5 and 2^-40 units, and rows whose
    # unit is below float32's range (E = 0: subnormals, unit 2^-155; E = 20, unit 2^-135)
    unit = 2.0**-28
    x = np.zeros((3, 4), np.float32)
    x[0] = [1.0, -0.375 * unit, 3e-5 * unit, 2.0**-40 * unit]
    x[1, :2] = [2.0**-130, -(2.0**-140)]
    x[2] = [2.0**-107, -(2.0**-110), -1.2345 * 2.0**-117, 0.7 * 2.0**-135]
    e = codec.chunk_exponents(x)
    assert list(e) == [127, 0, 20]
    reps = 200000
    q = codec.encode_fixed32(np.tile(x, (reps, 1)), np.tile(e, reps), 2, rng(13))
    q = q.reshape(reps, 3, 4).astype(np.int64)
    units = x.astype(np.float64) / np.ldexp(1.0, codec.unit_exponent(e, 2))[:, None]
    for r, c in [(0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3)]:
        v = q[:, r, c]
        lo = np.floor(units[r, c])
        assert set(np.unique(v)) <= {lo, lo + 1}
        se = max(v.std(), np.sqrt(abs(units[r, c]) / reps)) / np.sqrt(reps)
        assert abs(v.mean() - units[r, c]) <= 5 * se, (r, c, v.mean(), units[r, c])
    assert np.all(q[:, 0, 3] == 0)  # probability 2^-40 never shows in 2e5 draws


def test_fixed32_rejects_what_it_cannot_scale():
    with pytest.raises(ValueError, match="above the negotiated"):
        codec.encode_fixed32(np.array([[2.0]], np.float32), 127, 2, rng())
    with pytest.raises(ValueError, match="inf or NaN"):
        codec.encode_fixed32(np.array([[np.inf]], np.float32), 127, 2, rng())
    with pytest.raises(ValueError, match="exponents"):
        codec.encode_fixed32(np.zeros((2, 4), np.float32), [127], 2, rng())


# ------------------------------------------------------------------ CNAT8


def test_cnat8_codes_by_hand():
    # E = 127, n = 4: unit 2^-27, a value 2^k is code k + 28
    x = np.array([[1.0, -0.5, 0.0, -0.0, 2.0**-27, -(2.0**-26), 1.0, 0.0]], np.float32)
    x[0, 6] = 2.0**-20
    codes = codec.encode_cnat8(x, 127, 4, rng(5))
    assert list(codes[0]) == [28, 0x80 | 27, 0, 0, 1, 0x80 | 2, 8, 0]
    assert np.array_equal(codec.decode_cnat8(codes, 127, 4), x)
    # the switch adds the same values in units
    assert list(codec.switch_decode_cnat8(codes[0])) == [2**27, -(2**26), 0, 0, 1, -2, 2**7, 0]


def test_cnat8_codes_are_c_nat_roundings():
    g = rng(6)
    x = (g.standard_normal((64, 256)) * np.exp(g.uniform(-8, 0, (64, 1)))).astype(np.float32)
    e = codec.chunk_exponents(x)
    codes = codec.encode_cnat8(x, e, 16, rng(7))
    y = codec.decode_cnat8(codes, e, 16).astype(np.float64)
    unit = np.ldexp(1.0, codec.unit_exponent(e, 16))[:, None]
    big = np.abs(x) >= unit
    r = np.log2(np.abs(y[big])) - np.floor(np.log2(np.abs(x[big].astype(np.float64))))
    assert np.all((r == 0) | (r == 1))
    assert np.array_equal(np.signbit(y[big]), np.signbit(x[big]))
    assert (codes & 0x7F).max() <= codec.max_code(16)


def test_cnat8_below_one_unit():
    # E = 127, n = 2: unit 2^-28. 0.375 units -> C_nat gives 0.25 or 0.5 units, then
    # 0 or 1 unit: mean 0.375 units, only codes 0 and 1 (with the sign).
    unit = 2.0**-28
    x = np.zeros((20000, 4), np.float32)
    x[:, 0] = 1.0
    x[:, 1] = -0.375 * unit
    x[:, 2] = 2.0**-100
    x[:, 3] = -1e-45  # a negative subnormal: rounds to zero, whose code has no sign
    codes = codec.encode_cnat8(x, 127, 2, rng(8))
    assert set(np.unique(codes[:, 1])) == {0, 0x81}
    assert set(np.unique(codes[:, 2])) <= {0, 1}
    assert np.all(codes[:, 3] == 0)
    frac = (codes[:, 1] == 0x81).mean()
    assert abs(frac - 0.375) < 5 * np.sqrt(0.375 * 0.625 / 20000)


def test_cnat8_worst_case_never_overflows():
    # the largest float32 under exponent E rounds up to 2^(30-h) units; n of them,
    # of either sign, still fit in int32 for every n
    for n in range(2, 65):
        for e in (1, 60, 127, 200, 254):
            top = np.float32(np.ldexp(2 - 2.0**-23, e - 127))
            x = np.tile(np.array([top, -top], np.float32), (2, 128))
            codes = codec.encode_cnat8(x, e, n, rng(n))
            assert (codes & 0x7F).max() <= codec.max_code(n)
            total = codec.aggregate([codes] * n, codec.CNAT8)
            assert np.abs(total.astype(np.int64)).max() <= 2**30
            q = codec.encode_fixed32(x, e, n, rng(n))
            assert np.abs(codec.aggregate([q] * n).astype(np.int64)).max() <= 2**30
        # and the code that would overflow the sum is never produced: 2^(31-h) units
        assert n * 2 ** (codec.max_code(n) - 1) <= 2**30 < n * 2 ** codec.max_code(n)


def test_cnat8_end_to_end_is_unbiased():
    # n workers encode their own chunk, the switch adds integers, the result decodes
    # to the mean; averaged over many rounds it must equal the true mean
    n, rounds = 4, 3000
    g = rng(9)
    xs = [(g.standard_normal(256) * np.exp(g.uniform(-12, 0, 256))).astype(np.float32)
          for _ in range(n)]
    xs[0][:8] = 0
    e = max(int(codec.chunk_exponents(x[None])[0]) for x in xs)
    gens = [rng(100 + r) for r in range(n)]
    codes = [codec.encode_cnat8(np.tile(x, (rounds, 1)), e, n, gens[r])
             for r, x in enumerate(xs)]
    sums = codec.aggregate(codes, codec.CNAT8)
    means = codec.decode_fixed32(sums, np.full(rounds, e), n, mean=True).astype(np.float64)
    truth = np.mean(np.stack(xs).astype(np.float64), axis=0)
    se = means.std(axis=0) / np.sqrt(rounds)
    unit = 2.0 ** codec.unit_exponent(e, n)
    assert np.all(np.abs(means.mean(axis=0) - truth) <= 5 * se + 1e-3 * unit / n)


def test_cnat8_rows_with_their_own_exponents():
    # tiny and zero rows (unit below 2^-126) and large rows decode through the exact path
    x = np.zeros((4, 8), np.float32)
    x[0, :3] = [2.0**-140, -(2.0**-131), 2.0**-130]
    x[2, :2] = [3e38, -1e30]
    x[3, :2] = [1.0, -2.0**-20]
    e = codec.chunk_exponents(x)
    assert list(e) == [0, 0, 254, 127]
    codes = codec.encode_cnat8(np.tile(x, (2000, 1)), np.tile(e, 2000), 3, rng(10))
    y = codec.decode_cnat8(codes, np.tile(e, 2000), 3).astype(np.float64).reshape(2000, 4, 8)
    assert np.all(codes.reshape(2000, 4, 8)[:, 1] == 0)
    assert np.all(y[:, 3, 0] == 1.0) and np.all(y[:, 3, 1] == -(2.0**-20))
    vals = np.abs(y[:, 2, 0])
    assert set(np.unique(vals)) <= {2.0**127, np.inf}  # 2^128 is a float32 overflow
    for j in range(3):  # subnormal inputs: powers of two or zero, with mean x
        v = y[:, 0, j]
        assert np.all((v == 0) | (np.frexp(np.abs(v))[0] == 0.5))
        assert np.all(np.signbit(v[v != 0]) == np.signbit(x[0, j]))
    assert (y[:, 0, 1] < 0).any()  # the negative one did round up sometimes
    se = y[:, 0, 2].std() / np.sqrt(2000)
    assert abs(y[:, 0, 2].mean() - 2.0**-130) <= 5 * se


def test_cnat8_rejects_values_above_the_exponent():
    x = np.ones((3, 4), np.float32)
    x[1, 2] = 2.0
    with pytest.raises(ValueError, match="chunk 1 has exponent 128 above the negotiated 127"):
        codec.encode_cnat8(x, 127, 4, rng())
    x[1, 2] = np.nan
    with pytest.raises(ValueError, match="inf or NaN"):
        codec.encode_cnat8(x, 127, 4, rng())
    tiny = np.full((2, 4), 2.0**-100, np.float32)
    with pytest.raises(ValueError, match="above the negotiated 0"):
        codec.encode_cnat8(tiny, [0, 27], 4, rng())
    with pytest.raises(ValueError, match="above 32"):
        codec.decode_cnat8(np.array([[33]], np.uint8), 127, 4)


def test_cnat8_mean_and_sums_decode():
    codes = np.array([[28, 0x80 | 28, 0, 29]], np.uint8)
    assert list(codec.decode_cnat8(codes, 127, 4, mean=True)[0]) == [0.25, -0.25, 0, 0.5]
    sums = np.array([[2**27 * 3, -(2**26)]], np.int32)
    assert list(codec.decode_fixed32(sums, 127, 4)[0]) == [3.0, -0.5]
    assert list(codec.decode_fixed32(sums, 127, 4, mean=True)[0]) == [0.75, -0.125]


# ------------------------------------------------------------------ the switch's side


def _recompress_scalar(s: int, r: int) -> int:
    """docs/PROTOCOL.md step 4, one element at a time, in plain integers."""
    a = (-s) & 0xFFFFFFFF if s < 0 else s
    if a == 0:
        return 0
    p = a.bit_length() - 1
    mag = 1 << p
    up = (r & (mag - 1)) < ((a - mag) & 0xFFFFFFFF)
    return (0x80 if s < 0 else 0) | (p + 1 + int(up))


def test_recompress_is_bit_exact():
    g = rng(11)
    edge = [0, 1, -1, 2, -2, 3, -3, 2**30, -(2**30), 2**30 + 1, 2**31 - 1, -(2**31),
            -(2**31) + 1, 12345, -12345]
    sums = np.concatenate([edge, g.integers(-(2**31), 2**31, 3000),
                           g.integers(-1000, 1000, 3000)]).astype(np.int32)
    for r in (np.zeros(sums.size, np.uint32), np.full(sums.size, 0xFFFFFFFF, np.uint32),
              g.integers(0, 2**32, sums.size, dtype=np.uint32)):
        got = codec.recompress_with(sums, r)
        want = [_recompress_scalar(int(s), int(x)) for s, x in zip(sums, r, strict=True)]
        assert list(got) == want


def test_recompress_is_unbiased():
    sums = np.array([1, 3, -5, 6, 7, 1000, -123457, 2**29 + 2**27, 2**30], np.int64)
    reps = np.tile(sums, (40000, 1)).astype(np.int32)
    vals = codec.switch_decode_cnat8(codec.recompress(reps, rng(12))).astype(np.float64)
    se = vals.std(axis=0) / np.sqrt(vals.shape[0])
    assert np.all(np.abs(vals.mean(axis=0) - sums) <= 5 * se)
    # and each code is one of the two roundings
    assert np.all((np.abs(vals) >= np.abs(sums) / 2) & (np.abs(vals) <= 2 * np.abs(sums)))


def test_switch_decode():
    codes = np.array([0, 0x80, 1, 0x81, 31, 0x80 | 31, 32, 0x80 | 32, 33, 0x80 | 127], np.uint8)
    assert list(codec.switch_decode_cnat8(codes)) == \
        [0, 0, 1, -1, 2**30, -(2**30), -(2**31), -(2**31), 0, 0]


def test_aggregate():
    a = np.array([[1, -2], [3, 4]], np.int32)
    assert np.array_equal(codec.aggregate([a, a, -a]), a)
    assert np.array_equal(codec.aggregate(np.stack([a, a])), 2 * a)
    with pytest.raises(OverflowError):
        codec.aggregate([np.array([2**30], np.int32)] * 2)
    with pytest.raises(ValueError):
        codec.aggregate([a, a[0]])
    with pytest.raises(ValueError):
        codec.aggregate([a.astype(np.int64)])
    cn = np.array([3, 0x83, 1], np.uint8)
    assert list(codec.aggregate([cn, cn], codec.CNAT8)) == [8, -8, 2]


# ------------------------------------------------------------------ the compiled loops


def _numpy_encode(*args):
    kernels, codec._kernels = codec._kernels, None
    try:
        return codec.encode_cnat8(*args)
    finally:
        codec._kernels = kernels


@pytest.mark.skipif(codec._kernels is None, reason="numba is not installed")
def test_compiled_cnat8_encoder_gives_the_numpy_codes_and_draws():
    """Calls of a few chunks take codec_kernels' loops: the same codes, errors and random
    stream as the numpy passes, over zeros, subnormals, powers of two, ties, values below
    one unit and rows whose unit is below 2^-126."""
    g = rng(20)
    mismatched = []
    for trial in range(600):
        rows, elems = int(g.integers(1, 5)), int(g.choice([1, 7, 168, 1456]))
        kind = trial % 6
        x = (g.standard_normal((rows, elems)) * 10.0 ** g.integers(-40, 30)).astype(np.float32)
        if kind == 1:
            x[:, ::3] = 0
        elif kind == 2:
            x = (g.standard_normal((rows, elems)) * 1e-40).astype(np.float32)
        elif kind == 3:
            x[0] = 0
        elif kind == 4:
            x = np.ldexp(np.float32(1), g.integers(-140, 120, (rows, elems))).astype(np.float32)
        n = int(g.choice([1, 2, 4, 16, 100]))
        e = codec.chunk_exponents(x).astype(np.int64)
        if kind == 5:
            e = np.minimum(e + g.integers(0, 40, rows), 254)
        elif trial % 50 == 0:
            e[0] = max(e[0] - 1, 0)  # too small: both raise
        seed = int(g.integers(1 << 30))
        got = []
        for fn in (_numpy_encode, codec.encode_cnat8):
            r = np.random.default_rng(seed)
            try:
                got.append((fn(x, e, n, r).tobytes(), r.bit_generator.state))
            except ValueError as err:
                got.append((str(err), r.bit_generator.state))
        if got[0] != got[1]:
            mismatched.append(trial)
    assert mismatched == []


def _numpy_decode(*args, **kw):
    kernels, codec._kernels = codec._kernels, None
    try:
        return codec.decode_cnat8(*args, **kw)
    finally:
        codec._kernels = kernels


@pytest.mark.skipif(codec._kernels is None, reason="numba is not installed")
def test_compiled_cnat8_decoder_gives_the_numpy_values_bit_for_bit():
    """decode_cnat8 runs codec_kernels.decode: the same float32 bits as the numpy passes
    (-0.0 for a negative zero code, infinity and subnormals in rows whose unit lies outside
    the float32 exponents, means by any worker count), and the same error for a code
    above 32."""
    g = rng(21)
    for trial in range(1500):
        rows, elems = int(g.integers(1, 5)), int(g.choice([1, 7, 168, 1456]))
        c = g.integers(0, 256, (rows, elems)).astype(np.uint8)
        c[(c & 0x7F) > 32] &= 0x9F                   # valid codes: 0..31 with either sign
        c[0, 0] = 0x80 if trial % 3 == 0 else c[0, 0]
        e = g.integers(0, 255, rows)
        if trial % 4 == 1:
            e = g.integers(0, 30, rows)              # B < 0: values below 2^-126 or 0
        elif trial % 4 == 2:
            e = g.integers(226, 255, rows)           # B + 32 > 254: overflow to infinity
        n = int(g.choice([1, 2, 3, 4, 7, 16, 100, 255]))
        for mean in (False, True):
            want = _numpy_decode(c, e, n, mean=mean)
            got = codec.decode_cnat8(c, e, n, mean=mean)
            assert got.tobytes() == want.tobytes(), (trial, mean)
    assert np.isinf(codec.decode_cnat8(np.array([[31]], np.uint8), [254], 1)).all()
    bad = np.array([[1, 33]], np.uint8)
    for fn in (_numpy_decode, codec.decode_cnat8):
        with pytest.raises(ValueError, match="above 32"):
            fn(bad, [100], 4)


@pytest.mark.skipif(codec._kernels is None, reason="numba is not installed")
def test_compiled_exponents_equal_the_numpy_passes():
    """chunk_exponents and max_exponent by codec_kernels.exponents: the numpy passes' values
    over signs, zeros, subnormals, the largest finite values, inf and NaN (chunk_exponents
    then refuses the row holding it)."""
    g = rng(22)
    specials = np.array([0.0, -0.0, 1e-45, -1e-40, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan],
                        np.float32)
    for trial in range(400):
        rows, elems = int(g.integers(1, 6)), int(g.choice([1, 7, 168, 1456]))
        x = (g.standard_normal((rows, elems)) * 10.0 ** g.integers(-45, 38)).astype(np.float32)
        if trial % 3 == 0:
            x.reshape(-1)[g.integers(0, x.size, 3)] = g.choice(specials, 3)
        kernels, codec._kernels = codec._kernels, None
        try:
            want_max = codec.max_exponent(x)
            try:
                want = codec.chunk_exponents(x).tolist()
            except ValueError as e:
                want = str(e)
        finally:
            codec._kernels = kernels
        assert codec.max_exponent(x) == want_max
        try:
            got = codec.chunk_exponents(x).tolist()
        except ValueError as e:
            got = str(e)
        assert got == want
    assert codec.max_exponent(np.zeros(0, np.float32)) == 0


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_cnat8_valid_refuses_exactly_the_codes_decode_refuses(compiled, monkeypatch):
    """A code is part of CNAT8 when its magnitude is 0..32 (either sign): cnat8_valid says so
    for every byte value, alone, at any place of a row and in rows of a burst, as
    decode_cnat8 (which refuses the others) does."""
    if compiled and codec._kernels is None:
        pytest.skip("numba is not installed")
    if not compiled:
        monkeypatch.setattr(codec, "_kernels", None)
    good = np.tile(np.array([0, 1, 32, 0x80, 0x81, 0x80 | 32], np.uint8), 28)   # 168
    assert codec.cnat8_valid(good) and codec.cnat8_valid(good[:0])
    for v in range(256):
        ok = (v & 0x7F) <= codec.MAX_CODE
        rows = np.tile(good, (4, 1))
        rows[2, v % 168] = v
        assert codec.cnat8_valid(rows) is ok and codec.cnat8_valid(rows[2]) is ok, v
        decoded = True
        try:
            codec.decode_cnat8(rows, np.full(4, 120), 4)
        except ValueError:
            decoded = False
        assert decoded is ok
