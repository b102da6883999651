#!/usr/bin/env python3
"""The claims of the work this testbed comes from, measured on the gradients of its own
workloads (docs/results.md "The seeds' claims, measured"):

(a) C_nat raises the second moment by at most 9/8: E||C(g)||^2 / ||g||^2 per layer and for
    the entire model, exactly (each element's two roundings and their probabilities), and
    by sampling the codec itself;
(b) natural dithering against random dithering (QSGD-style) at equal bits per element: the
    variance omega = E||D(g) - g||^2 / ||g||^2, exactly, per layer and for the entire model.

    .venv/bin/python bench/claims.py [--steps 0 100 300] [--draws 32]

Gradients: each workload's model trained by SGD with momentum 0.9 in one process (no DDP:
the claims are about the compressors) from its seed; at each of --steps, one batch's
gradient.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from common import OUT, Target, machine, markdown, save, say, table

BOUND = 9 / 8
WORKLOADS = {"charlm": (0.3, 64), "mnist1d": (0.1, 128)}     # lr, batch


def cnat_second_moment(g: np.ndarray) -> float:
    """E||C_nat(g)||^2, exactly: |x| in [2^k, 2^(k+1)) goes up with p = |x|/2^k - 1."""
    a = np.abs(g.astype(np.float64)).reshape(-1)
    a = a[a > 0]
    lo = np.exp2(np.floor(np.log2(a)))
    p = a / lo - 1
    return float(np.sum(p * (2 * lo) ** 2 + (1 - p) * lo**2))


def dither_omega(g: np.ndarray, levels: np.ndarray) -> float:
    """omega of unbiased dithering of t = |g_i| / ||g||_2 between neighbouring `levels`
    (sorted, 0 and 1 included): each t in [l, u] costs (t - l)(u - t) of variance."""
    x = g.astype(np.float64).reshape(-1)
    norm2 = float(np.dot(x, x))
    if norm2 == 0:
        return 0.0
    t = np.abs(x) / np.sqrt(norm2)
    i = np.clip(np.searchsorted(levels, t, side="right") - 1, 0, len(levels) - 2)
    lo, up = levels[i], levels[i + 1]
    return float(np.sum((t - lo) * (up - t)))       # the norm^2 cancels


def natural_levels(s: int) -> np.ndarray:
    return np.concatenate([[0.0], np.exp2(-np.arange(s - 1, -1, -1, dtype=np.float64))])


def uniform_levels(s: int) -> np.ndarray:
    return np.arange(s + 1, dtype=np.float64) / s


def gradients(workload: str, steps: list[int], seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    """{step: {parameter name: gradient}} of one batch at each step of SGD (momentum 0.9)."""
    import torch

    from worker.ddp.workload import load_data, make_model

    torch.set_num_threads(1)
    lr, batch = WORKLOADS[workload]
    data = load_data(workload)
    model = make_model(seed, workload)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    rng = np.random.default_rng(seed)
    out = {}
    for step in range(max(steps) + 1):
        idx = torch.from_numpy(rng.integers(0, len(data.x_train), batch))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx]).backward()
        if step in steps:
            out[step] = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}
        opt.step()
    return out


def sampled_ratio(g: np.ndarray, draws: int, seed: int) -> float:
    """E||C(g)||^2 / ||g||^2 by sampling worker/compression's C_nat `draws` times."""
    from worker.compression.natural import cnat

    rng = np.random.default_rng(seed)
    x = g.astype(np.float32)
    num = np.mean([float(np.sum(cnat(x, rng).astype(np.float64) ** 2)) for _ in range(draws)])
    return num / float(np.sum(x.astype(np.float64) ** 2))


GROWTH_HEADER = ["workload", "step", "scope", "random / natural at 3, 4, 5 bits",
                 "x from 3 to 4 bits", "x from 4 to 5 bits",
                 "fitted x per bit (least squares of log ratio on bits)"]


def gap_growth(rows_b: list[list]) -> list[list]:
    """Per workload, step and scope, how random / natural dithering's variance ratio grows
    with the bits: the ratio at each width, its factor from one width to the next, and the
    factor per bit of a least-squares line through log(ratio) against bits (with three
    widths a fit of three points: it describes them, it tests no law)."""
    series: dict[tuple, dict[int, float]] = {}
    for workload, step, bits, scope, _, _, ratio in rows_b:
        kind = "model" if scope == "model" else f"layer {scope}"
        series.setdefault((workload, step, kind), {})[int(bits)] = float(ratio)
    out = []
    for (workload, step, kind), by in series.items():
        b = sorted(by)
        x, y = np.array(b, float), np.log([by[k] for k in b])
        slope = float(np.polyfit(x, y, 1)[0]) if len(b) >= 2 else float("nan")
        steps = [f"{by[q] / by[p]:.3g}" for p, q in zip(b, b[1:], strict=False)]
        out.append([workload, step, kind, ", ".join(f"{by[k]:.3g}" for k in b),
                    *(steps + ["-"] * (2 - len(steps)))[:2], f"{math.exp(slope):.3g}"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--steps", type=int, nargs="+", default=[0, 100, 300])
    ap.add_argument("--draws", type=int, default=32, help="samples of the codec per layer")
    ap.add_argument("--json", type=Path, default=OUT / "claims.json")
    args = ap.parse_args(argv)
    if min(args.steps) < 0 or args.draws < 1:
        ap.error("--steps must be >= 0 and --draws >= 1")
    rows_a, rows_b, worst = [], [], 0.0
    level_bits = (2, 3, 4)          # bits of a level's index, a sign bit beside each
    for workload in WORKLOADS:
        say(f"{workload}: gradients at steps {args.steps}")
        for step, grads in gradients(workload, args.steps).items():
            names = list(grads)
            ratios = {n: cnat_second_moment(g) / float(np.sum(g.astype(np.float64) ** 2))
                      for n, g in grads.items() if np.any(g)}
            flat = np.concatenate([g.reshape(-1) for g in grads.values()])
            whole = cnat_second_moment(flat) / float(np.sum(flat.astype(np.float64) ** 2))
            top = max(ratios, key=ratios.get)
            sampled = sampled_ratio(flat, args.draws, step)
            worst = max(worst, whole, *ratios.values())
            rows_a.append([workload, step, len(names), whole, sampled, ratios[top], top,
                           min(ratios.values())])
            big = [n for n in names if grads[n].size > 1000][:1]   # and one large layer
            for b in level_bits:
                # 2^b - 1 nonzero levels and 0: 1, 1/2, 1/4 ... or 1, (s-1)/s, ... 1/s
                nat, uni = natural_levels(2**b - 1), uniform_levels(2**b - 1)
                for scope, vec in (("model", flat), *[(n, grads[n]) for n in big]):
                    on, ou = dither_omega(vec, nat), dither_omega(vec, uni)
                    rows_b.append([workload, step, 1 + b, scope, on, ou, ou / on])
    header_a = ["workload", "step", "layers", "E||C(g)||^2/||g||^2 model (exact)",
                "sampled", "largest layer", "(layer)", "smallest layer"]
    header_b = ["workload", "step", "bits/element", "scope", "omega natural", "omega random",
                "random / natural"]
    print("(a) C_nat's second moment against ||g||^2 (bound 9/8 = 1.125)")
    print(table(header_a, rows_a))
    print("(b) variance of natural against random (uniform) dithering at equal bits, "
          "levels of the L2 norm, one bucket")
    print(table(header_b, rows_b))
    growth = gap_growth(rows_b)
    print("how the ratio grows with the bits")
    print(table(GROWTH_HEADER, growth))
    t = Target("C_nat: largest E||C(g)||^2/||g||^2 over layers, models and steps", worst,
               BOUND, "max", "")
    print(f"claim {t.text()}")
    save(args.json, {"machine": machine(), "steps": args.steps, "rows_a": rows_a,
                     "rows_b": rows_b, "table_a": markdown(header_a, rows_a),
                     "table_b": markdown(header_b, rows_b),
                     "table_growth": markdown(GROWTH_HEADER, growth), "targets": [t.as_dict()]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
