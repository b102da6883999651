"""Layer-wise or entire-model compression? Data-parallel SGD simulated in one process.

n workers each take a batch of their shard of scikit-learn's digits, compute the
gradient of a small MLP, compress it (each worker with its own compressor and
error-feedback memory), and the mean of the decompressed gradients updates the
shared model. Every compressor runs in both modes, plus an uncompressed run; all
runs of one seed see the same initial model and the same batches, so modes are
compared pairwise. Writes <out>/layerwise.csv, .png and .md.

    python -m worker.experiments.layerwise --workers 4 --steps 300 --out results/layerwise
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worker.compression.modes import MODES, ModelCompressor
from worker.compression.registry import describe, parse
from worker.model import MLP, Batches, load_digits_split, shard

DEFAULT_COMPRESSORS = ["topk:0.001", "topk:0.01", "topk:0.1", "ef:topk:0.01",
                       "randk:0.1,scaled=0", "adaptive", "qsgd:s=1", "terngrad", "dnat:s=2",
                       "onebit", "cnat"]
TARGET = 0.9  # accuracy for the "steps to" column


@dataclass
class Run:
    compressor: str
    mode: str
    seed: int
    steps: list[int] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    bits: list[float] = field(default_factory=list)  # per element, per worker, per step
    seconds: float = 0.0

    @property
    def final(self) -> float:
        return self.accuracy[-1]

    @property
    def bits_per_element(self) -> float:
        return float(np.mean(self.bits))

    def steps_to(self, target: float) -> int | None:
        hit = [s for s, a in zip(self.steps, self.accuracy, strict=True) if a >= target]
        return hit[0] if hit else None


def train(spec: str | None, mode: str, seed: int, args, data) -> Run:
    """One run: `spec` None is the uncompressed baseline."""
    model = MLP(args.sizes, seed=seed)
    d = model.num_params
    shards = [shard(data.x_train, data.y_train, r, args.workers) for r in range(args.workers)]
    batches = [Batches(x, y, args.batch, seed=seed * 1000 + r) for r, (x, y) in enumerate(shards)]
    comps = None
    if spec is not None:
        factory = parse(spec)
        comps = []
        for r in range(args.workers):
            g = np.random.default_rng([seed, r])
            comps.append(ModelCompressor(lambda g=g: factory(g), model.layer_sizes, mode))
    run = Run(spec or "none", mode if spec else "-", seed)
    t0 = time.perf_counter()
    bits_window, loss_window = [], []
    for step in range(1, args.steps + 1):
        total = np.zeros(d, np.float64)
        bits = 0
        losses = []
        for r in range(args.workers):
            loss, grad = model.loss_and_grad(*batches[r].next())
            losses.append(loss)
            if comps is None:
                total += grad
                bits += 32 * d
            else:
                seen, b = comps[r].roundtrip(grad)
                total += seen
                bits += b
        model.step(total / args.workers, args.lr)
        bits_window.append(bits / (args.workers * d))
        loss_window.append(float(np.mean(losses)))
        if step % args.eval_every == 0 or step == args.steps:
            run.steps.append(step)
            run.accuracy.append(model.accuracy(data.x_test, data.y_test))
            run.loss.append(float(np.mean(loss_window)))
            run.bits.append(float(np.mean(bits_window)))
            bits_window, loss_window = [], []
    run.seconds = time.perf_counter() - t0
    return run


# ------------------------------------------------------------------ outputs


def write_csv(runs: list[Run], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["compressor", "mode", "seed", "step", "test_accuracy", "train_loss",
                    "bits_per_element"])
        for r in runs:
            for s, a, lo, b in zip(r.steps, r.accuracy, r.loss, r.bits, strict=True):
                w.writerow([r.compressor, r.mode, r.seed, s, f"{a:.4f}", f"{lo:.5f}", f"{b:.4f}"])


def _group(runs: list[Run]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        out.setdefault((r.compressor, r.mode), []).append(r)
    return out


def summary(runs: list[Run]) -> list[dict]:
    """One row per (compressor, mode): means over seeds, and the paired mode difference."""
    groups = _group(runs)
    rows = []
    for (comp, mode), rs in groups.items():
        finals = np.array([r.final for r in rs])
        reach = [r.steps_to(TARGET) for r in rs]
        row = {"compressor": comp, "mode": mode, "bits": np.mean([r.bits_per_element for r in rs]),
               "final": finals.mean(), "std": finals.std(ddof=1) if len(rs) > 1 else 0.0,
               "reach": None if None in reach else float(np.mean(reach)),
               "verdict": ""}
        if mode == "layer" and (comp, "model") in groups:
            other = {r.seed: r.final for r in groups[(comp, "model")]}
            diff = np.array([r.final - other[r.seed] for r in rs if r.seed in other])
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else 0.0
            if len(diff) > 1 and abs(diff.mean()) > 2 * se and abs(diff.mean()) >= 0.005:
                row["verdict"] = f"layer {'+' if diff.mean() > 0 else '-'}{abs(diff.mean()):.3f}"
            else:
                row["verdict"] = f"tie ({diff.mean():+.3f})"
        rows.append(row)
    return rows


def write_markdown(rows: list[dict], args, path: Path) -> None:
    lines = [
        f"Data-parallel SGD on digits, MLP {'-'.join(map(str, args.sizes))}, "
        f"{args.workers} workers, batch {args.batch} each, lr {args.lr}, {args.steps} steps, "
        f"seeds {args.seeds}. Final test accuracy: mean +- std over seeds. Layer vs model: "
        "paired difference of final accuracy (layer - model), called a tie unless it exceeds "
        "2 standard errors and 0.005.",
        "",
        f"| compressor | mode | bits/element | final accuracy | steps to {TARGET:.0%} | "
        "layer vs model |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        reach = "-" if r["reach"] is None else f"{r['reach']:.0f}"
        lines.append(f"| {r['compressor']} | {r['mode']} | {r['bits']:.3f} | "
                     f"{r['final']:.3f} +- {r['std']:.3f} | {reach} | {r['verdict']} |")
    path.write_text("\n".join(lines) + "\n")


def plot(runs: list[Run], rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _group(runs)
    comps = [c for c in dict.fromkeys(r.compressor for r in runs) if c != "none"]
    panels = len(comps) + 1
    cols = min(4, panels)
    nrows = -(-panels // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.3 * nrows), squeeze=False)
    axes = axes.reshape(-1)

    def curve(rs):
        return rs[0].steps, np.mean([r.accuracy for r in rs], axis=0)

    bits = {(r["compressor"], r["mode"]): r["bits"] for r in rows}
    for ax, comp in zip(axes, comps, strict=False):
        if ("none", "-") in groups:
            ax.plot(*curve(groups[("none", "-")]), color="0.6", lw=1, label="uncompressed")
        for mode, style in (("layer", "-"), ("model", "--")):
            if (comp, mode) in groups:
                ax.plot(*curve(groups[(comp, mode)]), style,
                        label=f"{mode} ({bits[(comp, mode)]:.2f} bits/el)")
        ax.set_title(comp, fontsize=10)
        ax.set_ylim(0, 1)
        ax.set_xlabel("step")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    ax = axes[len(comps)]
    for mode, marker in (("layer", "o"), ("model", "s"), ("-", "*")):
        pts = [r for r in rows if r["mode"] == mode]
        if pts:
            ax.scatter([r["bits"] for r in pts], [r["final"] for r in pts], marker=marker,
                       label=mode if mode != "-" else "uncompressed")
            for r in pts:
                ax.annotate(r["compressor"], (r["bits"], r["final"]), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("bits per element (log)")
    ax.set_ylabel("final test accuracy")
    ax.set_title("accuracy against bits", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    for ax in axes[panels:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ command line


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="python -m worker.experiments.layerwise",
        description=__doc__.split("\n\n")[0] + " Every compressor runs layer-wise and "
        "entire-model; see docs/EXPERIMENTS.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="compressor specs (worker/compression/registry.py):\n" + describe())
    ap.add_argument("--workers", type=int, default=4, help="simulated workers (default 4)")
    ap.add_argument("--steps", type=int, default=300, help="SGD steps (default 300)")
    ap.add_argument("--batch", type=int, default=32, help="batch per worker (default 32)")
    ap.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    ap.add_argument("--hidden", default="64",
                    help="hidden layer sizes, comma separated (default 64: a 64-64-10 MLP)")
    ap.add_argument("--seeds", type=int, default=5,
                    help="repetitions with different seeds (default 5)")
    ap.add_argument("--eval-every", type=int, default=10, help="steps between test evaluations")
    ap.add_argument("--compressors", nargs="+", default=DEFAULT_COMPRESSORS, metavar="SPEC",
                    help="compressor specs, space separated (default: %(default)s)")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES,
                    help="which modes to run (default: both)")
    ap.add_argument("--out", type=Path, default=Path("results/layerwise"),
                    help="output directory (default results/layerwise)")
    args = ap.parse_args(argv)
    for name in ("workers", "steps", "batch", "seeds", "eval_every"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if not args.lr > 0:
        ap.error("--lr must be > 0")
    try:
        hidden = [int(h) for h in args.hidden.split(",") if h.strip()]
    except ValueError:
        ap.error(f"--hidden: expected comma-separated integers, got {args.hidden!r}")
    if any(h < 1 for h in hidden):
        ap.error("--hidden sizes must be >= 1")
    args.sizes = (64, *hidden, 10)
    for spec in args.compressors:
        try:
            parse(spec)
        except ValueError as e:
            ap.error(f"--compressors: {e}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    data = load_digits_split(seed=0)
    plan = [(None, "-", s) for s in range(args.seeds)]
    plan += [(c, m, s) for c in args.compressors for m in args.modes for s in range(args.seeds)]
    runs = []
    t0 = time.perf_counter()
    for i, (spec, mode, seed) in enumerate(plan, start=1):
        run = train(spec, mode, seed, args, data)
        runs.append(run)
        print(f"[{i}/{len(plan)}] {run.compressor:<22} {run.mode:<5} seed {seed}: "
              f"accuracy {run.final:.3f}, {run.bits_per_element:7.3f} bits/element, "
              f"{run.seconds:.1f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = summary(runs)
    write_csv(runs, args.out / "layerwise.csv")
    write_markdown(rows, args, args.out / "layerwise.md")
    plot(runs, rows, args.out / "layerwise.png")
    print(f"\n{(args.out / 'layerwise.md').read_text()}")
    print(f"wrote {args.out}/layerwise.csv, .md, .png in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(main())
