"""NAT4's variance against the natural dithering bound, and UQ4's, on gradient-like chunks.

For each kind of chunk (168 elements at its own exponent: the scale a single worker's chunk
gets), omega = E||D(x) - x||^2 / ||x||^2 over many draws, next to the bound of Horvath et
al. for natural dithering (codec.nat4_omega_bound) and, for comparison, C_nat's 1/8 and
UQ4's (after no rotation, and after the rotation of its tensor).

    python bench/fourbit_variance.py [--draws 2000] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from worker import codec, hadamard, wire

ELEMS = wire.ELEMS


def kinds(rng, rows: int) -> dict[str, np.ndarray]:
    g = rng.standard_normal((rows, ELEMS))
    heavy = rng.laplace(size=(rows, ELEMS)) ** 3
    spike = np.full((rows, ELEMS), 1e-4) * rng.choice([-1, 1], (rows, ELEMS))
    spike[:, 7] = 3.0
    octaves = rng.standard_normal((rows, ELEMS)) * 2.0 ** rng.integers(-20, 0, (rows, ELEMS))
    return {k: v.astype(np.float32) for k, v in
            (("gaussian", g), ("heavy-tailed", heavy), ("spike", spike), ("20 octaves", octaves))}


def omega(x, exps, encode, decode, draws, rng) -> float:
    num = 0.0
    for _ in range(draws):
        err = decode(encode(x, exps, rng), exps).astype(np.float64) - x
        num += float((err ** 2).sum())
    return num / draws / float((x.astype(np.float64) ** 2).sum())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("| chunk | NAT4 omega measured | natural dithering bound (s = 7) | UQ4 omega | "
          "UQ4 omega, rotated |")
    print("| --- | --- | --- | --- | --- |")
    for name, x in kinds(rng, args.rows).items():
        exps = codec.chunk_exponents(x)
        nat = omega(x, exps, codec.encode_nat4, codec.decode_nat4, args.draws, rng)
        bound = float(np.mean([codec.nat4_omega_bound(r, e) for r, e in zip(x, exps,
                                                                          strict=True)]))
        uq = omega(x, exps, codec.encode_uq4, codec.decode_uq4, args.draws, rng)
        rot = codec.chunk(hadamard.rotate(x, hadamard.seed_of(args.seed)))
        rexp = codec.chunk_exponents(rot)
        uqr = omega(rot, rexp, codec.encode_uq4, codec.decode_uq4, args.draws, rng)
        print(f"| {name} | {nat:.4f} | {bound:.4f} | {uq:.4f} | {uqr:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
