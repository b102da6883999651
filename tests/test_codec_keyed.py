"""Encoders' random bits keyed by the chunk's identity (DESIGN.md contract 10, worker/keyed.py):
a chunk's codes do not depend on the order chunks are encoded in, how many are encoded
together, or what was encoded before; they do depend on every part of the identity."""

import numpy as np
import pytest

from worker import codec, keyed, wire
from worker.allreduce.coding import ChunkCoder

ENCODINGS = {"cnat8": wire.ENC_CNAT8, "fixed32": wire.ENC_FIXED32, "nat4": wire.ENC_NAT4,
             "uq4": wire.ENC_UQ4}


def chunks(rows, elems=wire.ELEMS, seed=0):
    """Rows spanning octaves, with zeros, values below one unit and ties to draw for."""
    g = np.random.default_rng(seed)
    x = (g.standard_normal((rows, elems)) * 2.0 ** g.integers(-30, 10, (rows, 1)))
    x = x.astype(np.float32)
    x[g.random((rows, elems)) < 0.05] = 0
    x[:, 0] = np.float32(2.0 ** -40)       # far below the row's unit: Bernoulli draws
    return x, codec.chunk_exponents(x)


def coder(enc, seed=5, job=3, rank=1, session=0, call=2, elems=wire.ELEMS):
    c = ChunkCoder(enc, 4, seed, elems, job=job, rank=rank)
    c.begin(session, call)
    return c


@pytest.fixture(params=[False, True], ids=["compiled", "numpy"])
def path(request, monkeypatch):
    """Both implementations: numba's loops, and the numpy passes alone."""
    if request.param:
        monkeypatch.setattr(codec, "_kernels", None)
        monkeypatch.setattr(keyed, "_kernels", None)
    elif codec._kernels is None:
        pytest.skip("numba is not installed")
    return request.param


@pytest.mark.parametrize("name", list(ENCODINGS))
@pytest.mark.parametrize("rows", [9, 420])     # 420 rows: encode_cnat8's numpy passes
def test_a_chunks_codes_do_not_depend_on_order_batching_or_history(name, rows, path):
    enc = ENCODINGS[name]
    x, e = chunks(rows)
    ids = np.arange(rows)
    whole = coder(enc).encode(x, e, ids)
    # one chunk at a time, in a shuffled order, after encoding unrelated chunks
    c = coder(enc)
    other, oe = chunks(7, seed=9)
    c.encode(other, oe, np.arange(100, 107))
    order = np.random.default_rng(1).permutation(rows)
    one = np.empty_like(whole)
    for i in order[:5]:
        one[i] = c.encode(x[i:i + 1], e[i:i + 1], ids[i:i + 1])[0]
    # the rest in bursts of uneven sizes, as results release them
    rest, k = order[5:], 0
    for size in (1, 3, 2, 17, 64, 1000):
        part = np.sort(rest[k:k + size])[::-1]
        if part.size:
            one[part] = c.encode(x[part], e[part], ids[part])
        k += size
    assert np.array_equal(one, whole)


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_both_implementations_draw_the_same_bits(name, monkeypatch):
    if codec._kernels is None:
        pytest.skip("numba is not installed")
    enc = ENCODINGS[name]
    for rows in (3, 420):
        x, e = chunks(rows, seed=rows)
        got = coder(enc).encode(x, e, np.arange(rows))
        with monkeypatch.context() as m:
            m.setattr(codec, "_kernels", None)
            m.setattr(keyed, "_kernels", None)
            want = coder(enc).encode(x, e, np.arange(rows))
        assert np.array_equal(got, want), rows


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_part_of_the_identity_changes_the_draws(name):
    enc = ENCODINGS[name]
    x, e = chunks(4)
    x = np.abs(x) + np.float32(2.0 ** -20)   # every element rounds at random
    e = codec.chunk_exponents(x)
    base = coder(enc).encode(x, e, np.arange(4))
    for change in ({"seed": 6}, {"job": 4}, {"rank": 2}, {"session": 1}, {"call": 3}):
        assert not np.array_equal(coder(enc, **change).encode(x, e, np.arange(4)), base), \
            change
    assert not np.array_equal(coder(enc).encode(x, e, np.arange(1, 5)), base)   # chunk


def test_the_bits_are_uniform_and_rows_independent():
    """Bytes of neighbouring chunks of one call: each value equally often, and a row's byte
    uncorrelated with the next row's at the same element (5 standard deviations)."""
    bits = keyed.RowBits(keyed.row_keys(keyed.call_key(0, 0, 1, 0, 1), np.arange(20000)), 128)
    b = bits.bytes().reshape(20000, 128)
    counts = np.bincount(b.reshape(-1), minlength=256)
    mean = b.size / 256
    assert np.abs(counts - mean).max() < 5 * np.sqrt(mean)
    a = b[:-1].astype(np.float64) - 127.5
    c = b[1:].astype(np.float64) - 127.5
    corr = (a * c).mean() / (a.std() * c.std())
    assert abs(corr) < 5 / np.sqrt(a.size)
    ties = bits.at(keyed.TIES, np.arange(0, 20000 * 128, 7)) & np.uint64(0xFFFF)
    assert abs(ties.astype(np.float64).mean() / 65535 - 0.5) < 5 * 0.29 / np.sqrt(ties.size)


def test_keyed_codes_stay_unbiased():
    """C_nat through keyed bits: the mean of one chunk's decoded codes over many chunk numbers
    is the chunk (within 5 standard errors), as with a generator's bits."""
    g = np.random.default_rng(3)
    x = (g.standard_normal(wire.ELEMS) * 2.0 ** -8).astype(np.float32)
    x[0] = 1.0
    reps = np.tile(x, (4000, 1))
    e = codec.chunk_exponents(reps)
    for enc, decode in ((wire.ENC_CNAT8, codec.decode_cnat8),
                        (wire.ENC_FIXED32, codec.decode_fixed32)):
        codes = coder(enc).encode(reps, e, np.arange(4000))
        y = decode(codes, e, 4).astype(np.float64)
        se = y.std(axis=0) / np.sqrt(y.shape[0])
        assert np.all(np.abs(y.mean(axis=0) - x) <= 5 * se + 1e-12), enc


def test_keys_for_other_rows_are_refused():
    bits = keyed.RowBits(np.arange(3, dtype=np.uint64), wire.ELEMS)
    x, e = chunks(2)
    with pytest.raises(ValueError, match="random keys for 3 rows"):
        codec.encode_cnat8(x, e, 4, bits)


@pytest.mark.parametrize("elems", [1, 7, 100, 168, 1456])
def test_compiled_and_numpy_bits_agree(elems, monkeypatch):
    if keyed._kernels is None:
        pytest.skip("numba is not installed")
    bits = keyed.RowBits(keyed.row_keys(keyed.call_key(1, 2, 3, 4, 5), np.arange(5)), elems)
    idx = np.arange(0, 5 * elems, 3)

    def draw():
        return (keyed.row_keys(keyed.call_key(1, 2, 3, 4, 5), np.arange(5)), bits.bytes(),
                bits.bytes(keyed.BYTES, 1), bits.words(keyed.UNIFORM, elems),
                bits.at(keyed.SUBUNIT, idx), bits.u16(keyed.TIES, idx),
                keyed.bernoulli_pow2(bits, idx, (idx % 90) + 1))
    got = draw()
    monkeypatch.setattr(keyed, "_kernels", None)
    for a, b in zip(got, draw(), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
