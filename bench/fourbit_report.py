#!/usr/bin/env python3
"""The side-by-side table and plot of the 4-bit encodings in docs/results.md.

Reads bench/torch_convergence.py's JSON (one per mode: layer-wise and entire-model) and
bench/fourbit.py's (one per switch target), and prints the markdown section; the plot of
test accuracy against step goes to docs/results/fourbit.png.

    python bench/fourbit_report.py --convergence layer.json model.json \\
        --speed soft.json bmv2.json [--plot docs/results/fourbit.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import REPO, fmt

# row name -> (torch_convergence's method, bench/fourbit.py's encoding or None)
METHODS = [("uncompressed (Gloo, float32)", "uncompressed (Gloo)", None),
           ("int32 INA", "int32 INA (switch)", "fixed32"),
           ("C_nat INA (CNAT8)", "C_nat INA (switch)", "cnat8"),
           ("natural dithering INA (NAT4, CNAT8 down)", "natural dithering INA (switch)",
            "nat4"),
           ("uniform THC INA (UQ4, SUM8 down)", "uniform (THC) INA (switch)", "uq4")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--convergence", nargs=2, type=Path, metavar=("LAYER", "MODEL"),
                    required=True)
    ap.add_argument("--speed", nargs="*", type=Path, default=[])
    ap.add_argument("--plot", type=Path, default=REPO / "docs" / "results" / "fourbit.png")
    args = ap.parse_args(argv)
    conv = {m: json.loads(p.read_text()) for m, p in zip(("layer", "model"), args.convergence,
                                                          strict=True)}
    speed = {}
    for p in args.speed:
        speed.update(json.loads(p.read_text())["results"])
    targets = sorted({k.split("/")[0] for k in speed})
    head = ["method", "bytes/element up", "bytes/element down",
            "accuracy layer-wise", "vs uncompressed (pp)", "accuracy entire model",
            "vs uncompressed (pp)"]
    for t in targets:
        head += [f"steps/s {t}", f"elements/s {t}"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row, method, enc in METHODS:
        cells = [row]
        first = speed.get(f"{targets[0]}/{enc}") if targets and enc else None
        cells += ["4 (float32 payload)" if enc is None else fmt(first["up"]) if first else "-",
                  "4 (float32 payload)" if enc is None else fmt(first["down"]) if first else "-"]
        for mode in ("layer", "model"):
            c = conv[mode]
            finals = c["finals"].get(method)
            base = c["finals"]["uncompressed (Gloo)"]
            if finals is None:
                cells += ["-", "-"]
                continue
            diff = [100 * (a - b) for a, b in zip(finals, base, strict=True)]
            cells += [f"{sum(finals) / len(finals):.3f}", f"{sum(diff) / len(diff):+.2f}"]
        for t in targets:
            r = speed.get(f"{t}/{enc}") if enc else None
            cells += [fmt(r["steps_per_s"]) if r else "-",
                      f"{r['elements_per_s']:.3g}" if r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))
    c = conv["layer"]
    print(f"\n{c['seeds']} seeds, {c['steps']} steps, {c['workers']} workers, batch "
          f"{c['batch']}, lr {c['lr']}; accuracy: the mean final test accuracy over the seeds.")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, mode in zip(axes, ("layer", "model"), strict=True):
        c = conv[mode]
        for row, method, _ in METHODS:
            if method in c["curves"]:
                ax.plot(c["eval_steps"], c["curves"][method], label=row)
        ax.set_title(f"MNIST-1D CNN, DDP, {'layer-wise' if mode == 'layer' else 'entire model'}")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"test accuracy (mean of {conv['layer']['seeds']} seeds)")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
