#!/usr/bin/env python3
"""Layer-wise against entire-model compression on the workload that separates methods: six
compressors, five of them at two compression ratios, on the character-level language model
(worker/ddp/charlm.py), 4 DDP ranks, judged by validation loss; per compressor and ratio the
paired difference layer-wise - entire-model with its 95 % CI and a verdict (Dutta et al.,
AAAI'20, found that layer-wise "may or may not be better": this is their table, with CIs).

    .venv/bin/python bench/layerwise_charlm.py [--seeds 10] [--steps 100] [--only topk qsgd]

Every run of a seed shares data, initial model and batches (bench/torch_convergence.py's
runner, the compressor in the DDP hook); the two modes differ only in whether each layer has
its own compressor (and scale, norm, threshold, k) or one sees the whole model. A run whose
validation loss ends above log(VOCAB) (worse than guessing) or not finite has diverged; a
pair in which a mode diverged has no difference to average, so such a row gives the counts.
The adaptive threshold's two modes send different amounts (each keeps what its fraction
of its own largest lets through): every row gives the bits per element each mode sent, and
the adaptive rows come again with the entire-model fraction calibrated on seed 0 (calibrate)
to send layer-wise's bits per element, so that one comparison is at equal bits (--no-match:
not). The JSON is rewritten after every seed: an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from common import OUT, machine, markdown, quick, save, say, table
from paired import BETTER, CANNOT_TELL, EXPLAINED, HOLM_EXPLAINED, WORSE, holm, paired
from torch_convergence import run

MODES = ("layer", "model")
# (compressor, ratio as its parameter says, spec, lr): sparsifiers keep 1 % / 10 % (random-k
# unscaled, as in practice), the adaptive threshold keeps |x| >= 0.5 / 0.1 of the largest,
# QSGD has 4 / 16 levels (4 / 6 bits with sign, as its bits() counts: ceil(log2(s + 1)) for
# a level 0..s and one for the sign), Dryden's quantizer sends the top 1 % / 10 %
# of each sign; TernGrad has one ratio only (2 bits). Dryden's and TernGrad's runs diverge in
# both modes at the workload's lr of 0.3 (a pair of divergences tells nothing), so they take
# 0.1; the two modes of a row always share one lr.
CONFIGS = (("top-k", "1 %", "topk:0.01", 0.3), ("top-k", "10 %", "topk:0.1", 0.3),
           ("random-k", "1 %", "randk:0.01,scaled=0", 0.3),
           ("random-k", "10 %", "randk:0.1,scaled=0", 0.3),
           ("adaptive threshold", "0.5 max", "adaptive:0.5", 0.3),
           ("adaptive threshold", "0.1 max", "adaptive:0.1", 0.3),
           ("QSGD", "s=4", "qsgd:s=4", 0.3), ("QSGD", "s=16", "qsgd:s=16", 0.3),
           ("Dryden", "1 %", "dryden:0.01", 0.1), ("Dryden", "10 %", "dryden:0.1", 0.1),
           ("TernGrad", "2 bits", "terngrad", 0.1))
# The adaptive threshold keeps what its fraction of the largest lets through, per layer or
# over the whole model, so its two modes send different amounts: each also runs entire-model
# at a fraction calibrated (on seed 0) to send the bits per element layer-wise sends.
MATCHED = ("adaptive:0.5", "adaptive:0.1")
MATCH_TOL = 0.05        # calibrated when the bits per element are within 5 % of layer-wise's
MATCH_TRIES = 10
LAYER_BETTER, MODEL_BETTER = "layer-wise better", "entire-model better"
BASE_LR = 0.3     # charlm's lr (docs/results.md, the separating workload)


def diverged(loss: float) -> bool:
    from worker.ddp.charlm import VOCAB
    return not math.isfinite(loss) or loss > math.log(VOCAB)


def compare(layer: list[float], model: list[float]) -> dict:
    """One row's comparison: layer - model over seeds where neither diverged, or the
    divergence counts when any did."""
    if len(layer) != len(model):
        raise ValueError(f"one loss per seed in each mode: {len(layer)} layer-wise, "
                         f"{len(model)} entire-model")
    dl, dm = sum(map(diverged, layer)), sum(map(diverged, model))
    n = len(layer)
    if dl or dm:
        if dm == n and dl == 0:
            verdict = f"{LAYER_BETTER} (entire-model diverged on every seed)"
        elif dl == n and dm == 0:
            verdict = f"{MODEL_BETTER} (layer-wise diverged on every seed)"
        else:
            verdict = f"{CANNOT_TELL} (diverged: layer-wise {dl}/{n}, entire-model {dm}/{n})"
        return {"interval": f"diverged: layer-wise {dl}/{n}, entire-model {dm}/{n}", "n": n,
                "verdict": verdict, "paired": None}
    d = paired(layer, model, higher_is_better=False)
    verdict = {BETTER: LAYER_BETTER, WORSE: MODEL_BETTER}.get(d.verdict, d.label)
    return {"interval": d.interval(4), "n": d.n, "verdict": verdict, "paired": d.as_dict()}


def _mean(xs: list[float]) -> float | str:
    finite = [x for x in xs if not diverged(x)]
    return float(np.mean(finite)) if len(finite) == len(xs) else \
        f"{len(xs) - len(finite)}/{len(xs)} diverged"


def bits_per_element(result: dict) -> float:
    """What a run's compressor sent (its bits()) per gradient element, over all steps."""
    hooks = [s["hook"] for s in result["steps"] if s.get("hook")]
    elems = sum(h["elements"] for h in hooks)
    if not elems:
        raise ValueError("the run recorded no compressed elements")
    return sum(h["compressor_bits"] for h in hooks) / elems


def calibrate(target: float, bits_at, low: float = 1e-4, high: float = 1.0,
              tries: int = MATCH_TRIES, tol: float = MATCH_TOL) -> tuple[float, float, int]:
    """The adaptive fraction whose bits per element (`bits_at(fraction)`, fewer the higher
    the fraction) come closest to `target`, within `tol`: a bracket on log fraction, cut
    where log bits interpolates to the target once both its ends have been run (in the
    middle before; never within a tenth of an end). Returns (fraction, its bits per
    element, runs taken)."""
    if not target > 0:
        raise ValueError(f"target bits per element must be > 0, got {target}")
    lo, hi = math.log(low), math.log(high)
    b_lo = b_hi = None
    best = None
    for n in range(1, tries + 1):
        x = (lo + hi) / 2
        if b_lo and b_hi and b_lo != b_hi:
            t = (math.log(target) - math.log(b_lo)) / (math.log(b_hi) - math.log(b_lo))
            x = lo + min(0.9, max(0.1, t)) * (hi - lo)
        f = float(f"{math.exp(x):.4g}")        # a spec readers can type
        b = bits_at(f)
        if best is None or abs(b / target - 1) < abs(best[1] / target - 1):
            best = (f, b)
        if abs(b / target - 1) <= tol:
            return f, b, n
        if b > target:
            lo, b_lo = math.log(f), b
        else:
            hi, b_hi = math.log(f), b
    return best[0], best[1], tries


def matched_key(layer_spec: str, model_spec: str) -> str:
    """A matched row's name: both specs (no '|', which would cut its markdown row)."""
    return f"{layer_spec} / {model_spec}"


def report(losses: dict, base: list[float], seeds: int, base_lr: float = BASE_LR,
           extra: tuple = ()) -> tuple[list[str], list[list]]:
    """The table: a row per config measured (CONFIGS, then `extra` rows of the same shape,
    the matched ones), with the bits per element each mode sent where recorded."""
    done = [(name, ratio, spec, lr) for name, ratio, spec, lr in (*CONFIGS, *extra)
            if spec in losses]
    cmp = {spec: compare(losses[spec]["layer"][:seeds], losses[spec]["model"][:seeds])
           for _, _, spec, _ in done}
    # the family: the rows with a paired test (a row with divergences has none)
    tested = {s: paired(losses[s]["layer"][:seeds], losses[s]["model"][:seeds],
                        higher_is_better=False)
              for s, c in cmp.items() if c["paired"] is not None}
    corrected = {s: {BETTER: LAYER_BETTER, WORSE: MODEL_BETTER}.get(v, v)
                 for s, v in holm(tested).items()}
    header = ["compressor", "ratio", "spec", "lr", "layer-wise loss", "entire-model loss",
              "layer - entire [95 % CI]", "seeds", "verdict", f"Holm (family of {len(tested)})",
              "bits/element layer-wise", "entire-model"]
    rows = []
    for name, ratio, spec, lr in done:
        lay, mod = losses[spec]["layer"][:seeds], losses[spec]["model"][:seeds]
        c = cmp[spec]
        bits = losses[spec].get("bits", {})
        rows.append([name, ratio, spec, losses[spec].get("lr", lr), _mean(lay), _mean(mod),
                     c["interval"], c["n"], c["verdict"], corrected.get(spec, "-"),
                     *(float(np.mean(bits[m][:seeds])) if bits.get(m) else "-"
                       for m in MODES)])
    rows.append(["uncompressed (Gloo)", "-", "-", base_lr, _mean(base[:seeds]), "-", "-",
                 len(base[:seeds]), "baseline", "-", 32.0, "-"])
    return header, rows


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--seeds", type=int, default=2 if q else 10)
    ap.add_argument("--steps", type=int, default=5 if q else 100)
    ap.add_argument("--batch", type=int, default=16, help="windows per rank and step")
    ap.add_argument("--lr", type=float,
                    help="one lr for every run (default: each compressor's, the baseline 0.3)")
    names = sorted({c[0].split()[0].lower().replace("-", "") for c in CONFIGS})
    ap.add_argument("--only", nargs="*", metavar="NAME",
                    help=f"compressors whose spec starts with these ({', '.join(names)})")
    ap.add_argument("--match", action=argparse.BooleanOptionalAction, default=True,
                    help="run the adaptive threshold entire-model also at a fraction "
                    "calibrated to send layer-wise's bits per element (default: on)")
    ap.add_argument("--json", type=Path, default=OUT / "layerwise_charlm.json")
    args = ap.parse_args(argv)
    if args.seeds < 2 or args.steps < 1 or args.batch < 1 or \
            (args.lr is not None and not args.lr > 0):
        ap.error("need --seeds >= 2, --steps >= 1, --batch >= 1, --lr > 0")
    configs = [c for c in CONFIGS if not args.only or any(c[2].startswith(o) for o in args.only)]
    if not configs:
        ap.error(f"--only {args.only} matches no spec of {[c[2] for c in CONFIGS]}")
    args.workload, args.eval_every = "charlm", args.steps
    from worker.ddp import charlm
    from worker.ddp.workload import load_data

    data = load_data("charlm")

    ran: dict[tuple, dict] = {}     # a run asked again (calibration's on seed 0, a matched
                                    # row's layer-wise one) is the same run: it is not repeated

    def one(spec: str, mode: str, seed: int, lr: float) -> dict:
        if (spec, mode, seed, lr) in ran:
            return ran[spec, mode, seed, lr]
        at = argparse.Namespace(**{**vars(args), "mode": mode, "lr": args.lr or lr})
        t = time.monotonic()
        r = run("hook", spec, seed, at, data)
        r["bits_per_element"] = bits_per_element(r)
        say(f"seed {seed}: {spec:<20} {mode:<5} validation loss {r['final_test_loss']:.4f}, "
            f"{r['bits_per_element']:.3g} bits/element ({time.monotonic() - t:.0f} s)")
        ran[spec, mode, seed, lr] = {k: r[k] for k in ("final_test_loss", "bits_per_element")}
        return ran[spec, mode, seed, lr]

    t0 = time.monotonic()
    # (layer-wise spec, entire-model spec) per row; a matched row's entire-model fraction is
    # calibrated on seed 0 before any seed runs, so every seed runs the same two specs
    pairs = {spec: (spec, spec) for _, _, spec, _ in configs}
    extra, calibration = [], {}
    for name, ratio, spec, lr in configs:
        if spec not in MATCHED or not args.match:
            continue
        target = one(spec, "layer", 0, lr)["bits_per_element"]
        f, b, n = calibrate(target, lambda x, lr=lr: one(f"adaptive:{x}", "model", 0,
                                                         lr)["bits_per_element"])
        m = f"adaptive:{f}"
        key = matched_key(spec, m)
        pairs[key] = (spec, m)
        extra.append((name, f"{ratio}, entire-model {f} max at equal bits", key, lr))
        calibration[key] = {"layer_bits": target, "model_bits": b, "fraction": f, "runs": n}
        say(f"{key}: entire-model {b:.3g} bits/element against layer-wise {target:.3g} "
            f"(seed 0, {n} runs)")
    lrs = {spec: args.lr or lr for _, _, spec, lr in (*configs, *extra)}
    losses = {key: {"lr": lrs[key], **{m: [] for m in MODES}, "bits": {m: [] for m in MODES}}
              for key in pairs}
    base: list[float] = []
    for seed in range(args.seeds):
        at = argparse.Namespace(**{**vars(args), "mode": "layer", "lr": args.lr or BASE_LR})
        base.append(run("gloo", None, seed, at, data)["final_test_loss"])
        for key, specs in pairs.items():
            for mode, spec in zip(MODES, specs, strict=True):
                r = one(spec, mode, seed, lrs[key])
                losses[key][mode].append(r["final_test_loss"])
                losses[key]["bits"][mode].append(r["bits_per_element"])
        header, rows = report(losses, base, seed + 1, args.lr or BASE_LR, tuple(extra))
        save(args.json, {"machine": machine(), "seeds_done": seed + 1, "seeds": args.seeds,
                         "steps": args.steps, "batch": args.batch, "lr": args.lr,
                         "corpus_sha256": charlm.corpus_sha256(), "configs": configs,
                         "matched": extra, "calibration": calibration,
                         "losses": losses, "uncompressed": base,
                         "rows": rows, "table": markdown(header, rows),
                         "wall_seconds": time.monotonic() - t0})
    print(f"{args.seeds} seeds, {args.steps} steps, 4 workers x {args.batch} windows of "
          f"{charlm.CONTEXT} characters, lr as in the table, momentum 0.9; corpus sha256 "
          f"{charlm.corpus_sha256()[:16]}; {time.monotonic() - t0:.0f} s")
    print(table(header, rows))
    family = HOLM_EXPLAINED.replace("every method against the one baseline",
                                    "the rows with an interval")
    print(f"columns: {EXPLAINED.replace('method - baseline', 'layer-wise - entire-model')}; "
          f"{family}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
