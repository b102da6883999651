"""The 4-bit encodings' worker side (worker/codec.py, worker/hadamard.py): packing, NAT4's
natural dithering (unbiased, within the variance bound of Horvath et al.), UQ4's uniform
stochastic quantization (unbiased, within half a level squared), the rotation UQ4 applies,
and the switch's reference for bad codes and sums a byte cannot carry. Statistical checks
use a fixed seed, enough samples for the stated tolerance, and z-scores of 5."""

import numpy as np
import pytest

from worker import codec, hadamard, wire
from worker.frames import Framer

ELEMS = wire.ELEMS
SAMPLES = 3000


def chunks_of_kinds(rng):
    """Gradient-like chunks: Gaussian, heavy-tailed (Laplace cubed), one spike over tiny
    values, and values spread over 20 octaves."""
    g = rng.standard_normal(ELEMS)
    heavy = rng.laplace(size=ELEMS) ** 3
    spike = np.full(ELEMS, 1e-4) * rng.choice([-1, 1], ELEMS)
    spike[7] = 3.0
    octaves = rng.standard_normal(ELEMS) * 2.0 ** rng.integers(-20, 0, ELEMS)
    return [np.asarray(c, np.float32)[None] for c in (g, heavy, spike, octaves)]


def test_pack4_is_the_wire_layers_byte_order():
    rng = np.random.default_rng(1)
    nib = rng.integers(0, 16, ELEMS).astype(np.uint8)
    packed = codec.pack4(nib[None])[0]
    assert packed.size == ELEMS // 2
    assert np.array_equal(codec.unpack4(packed[None])[0], nib)
    assert bytes(wire.Nat4(codes=nib.tolist())) == packed.tobytes()
    assert bytes(wire.Uq4(values=nib.tolist())) == packed.tobytes()
    frame = Framer().build(wire.MSG_CONTRIB, wire.ENC_NAT4, 1, 1, 0, 0, 127, 1, 0, packed)
    assert frame[16:] == packed.tobytes() and len(frame) == 16 + ELEMS // 2
    with pytest.raises(ValueError):
        codec.pack4(np.zeros((1, 3), np.uint8))


@pytest.mark.parametrize("kind", range(4))
def test_nat4_is_unbiased_and_within_the_natural_dithering_bound(kind):
    rng = np.random.default_rng(31 + kind)
    x = chunks_of_kinds(rng)[kind]
    exp = int(codec.chunk_exponents(x)[0])
    draws = np.stack([codec.decode_nat4(codec.encode_nat4(x, [exp], rng), [exp])[0]
                      for _ in range(SAMPLES)]).astype(np.float64)
    nib = codec.encode_nat4(np.repeat(x, 4, 0), [exp] * 4, rng)
    assert nib.max() <= 15 and codec.nat4_valid(nib) and (nib & 7).max() <= codec.NAT4_LEVELS
    err = draws - x[0]
    sd = err.std(axis=0) / np.sqrt(SAMPLES)
    z = np.abs(err.mean(axis=0)) / np.where(sd > 0, sd, 1)
    assert z.max() < 5, f"biased: z = {z.max():.1f}"
    omega = (err ** 2).sum(axis=1).mean() / (x[0].astype(np.float64) ** 2).sum()
    bound = codec.nat4_omega_bound(x[0], exp)
    # the sampled omega's relative standard error is below 5% here
    assert omega <= bound, (omega, bound)
    assert 0.125 <= bound < 0.35, bound             # 7 levels: close to C_nat's 1/8


@pytest.mark.parametrize("kind", range(4))
def test_uq4_is_unbiased_within_half_a_level(kind):
    rng = np.random.default_rng(71 + kind)
    x = chunks_of_kinds(rng)[kind]
    exp = int(codec.chunk_exponents(x)[0])
    scale = float(codec.uq4_scale([exp])[0])
    draws = np.stack([codec.decode_uq4(codec.encode_uq4(x, [exp], rng), [exp])[0]
                      for _ in range(SAMPLES)]).astype(np.float64)
    err = draws - x[0]
    sd = err.std(axis=0) / np.sqrt(SAMPLES)
    z = np.abs(err.mean(axis=0)) / np.where(sd > 0, sd, 1)
    assert z.max() < 5, f"biased: z = {z.max():.1f}"
    step = 2 * scale / codec.UQ4_MAX
    # per element the variance of rounding between two levels is at most step^2 / 4
    assert (err ** 2).mean(axis=0).max() <= step ** 2 / 4 * 1.15
    assert np.abs(err).max() <= step * (1 + 1e-6)


def test_nat4_and_uq4_refuse_values_above_the_scale():
    x = np.full((1, ELEMS), 3.0, np.float32)           # exponent 128
    rng = np.random.default_rng(0)
    for enc in (codec.encode_nat4, codec.encode_uq4):
        with pytest.raises(ValueError, match="exponent"):
            enc(x, [127], rng)


def test_the_switch_reference_refuses_bad_codes_and_byte_overflows():
    nib = np.zeros(ELEMS, np.uint8)
    nib[3] = codec.NAT4_BAD
    with pytest.raises(ValueError, match="0x8"):
        codec.aggregate([nib, np.zeros(ELEMS, np.uint8)], codec.NAT4)
    assert not codec.nat4_valid(nib)
    fifteen = np.full(ELEMS, 15, np.uint8)
    assert codec.to_sum8(codec.aggregate([fifteen] * 17, codec.UQ4)).max() == 255
    with pytest.raises(OverflowError):
        codec.to_sum8(codec.aggregate([fifteen] * 18, codec.UQ4))
    signs = np.array([0x8 | 7, 7, 0x8 | 1, 1, 0], np.uint8)
    assert codec.switch_decode(signs, codec.NAT4).tolist() == [-64, 64, -1, 1, 0]


def test_rotation_is_orthogonal_shared_by_seed_and_inverted():
    rng = np.random.default_rng(5)
    for n in (1, 5, 168, 1000, 5000):
        x = rng.standard_normal(n).astype(np.float32)
        seed = hadamard.seed_of(3, 7, 2)
        y = hadamard.rotate(x, seed)
        assert y.size == hadamard.padded_size(n) and y.size % hadamard.block_size(n) == 0
        assert np.isclose(np.linalg.norm(y), np.linalg.norm(x), rtol=1e-5)
        assert np.array_equal(y, hadamard.rotate(x, hadamard.seed_of(3, 7, 2)))
        if n > 1:
            assert not np.array_equal(y, hadamard.rotate(x, hadamard.seed_of(3, 7, 3)))
        assert np.allclose(hadamard.unrotate(y, n, seed), x, atol=1e-5 * np.abs(x).max())
    # a spike is spread over its block: the rotated chunk's scale follows its norm
    spike = np.zeros(1024, np.float32)
    spike[0] = 1.0
    assert np.allclose(np.abs(hadamard.rotate(spike, hadamard.seed_of(1))), 1 / 32)


def test_the_4_bit_entry_points_take_4_bit_encodings_and_name_any_other():
    encode4, decode_mean4 = codec.encode4, codec.decode_mean4
    ENC_CNAT8, ENC_NAT4, ENC_UQ4 = wire.ENC_CNAT8, wire.ENC_NAT4, wire.ENC_UQ4
    rng = np.random.default_rng(0)
    chunks = rng.normal(size=(2, 168)).astype(np.float32)
    exps = np.array([130, 130])
    for enc in (ENC_NAT4, ENC_UQ4):
        assert encode4(enc, chunks, exps, np.random.default_rng(1)).shape == (2, 84)
    with pytest.raises(ValueError, match=f"encoding {ENC_CNAT8} is not a 4-bit encoding"):
        encode4(ENC_CNAT8, chunks, exps, rng)
    with pytest.raises(ValueError, match=f"encoding {ENC_CNAT8} is not a 4-bit encoding"):
        decode_mean4(ENC_CNAT8, ENC_CNAT8, np.zeros((2, 168), np.uint8), exps, 4)
