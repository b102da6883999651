#!/usr/bin/env python3
"""The side-by-side table and plot of the 4-bit encodings in docs/results.md.

Reads bench/torch_convergence.py's JSON (one per mode: layer-wise and entire-model) and
bench/fourbit.py's (one per switch target), and prints the markdown section; the plot of
test accuracy against step goes to docs/results/fourbit.png.

    python bench/fourbit_report.py --convergence layer.json model.json \\
        --speed soft.json bmv2.json [--wide4 fourbit_wide4.json] [--pps fourbit_pps.txt]
        [--plot docs/results/fourbit.png]

--wide4: bench/fourbit.py --profile wide4 (bytes per element at 1024 elements per packet);
--pps: the output of bench/softswitch_pps.py --encodings cnat8 uq4 (the switch's own rate).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import REPO, fmt
from paired import EXPLAINED, HOLM_EXPLAINED, holm, paired

VS = "vs uncompressed, pp [95 % CI], seeds"

# row name -> (torch_convergence's method, bench/fourbit.py's encoding or None)
METHODS = [("uncompressed (Gloo, float32)", "uncompressed (Gloo)", None),
           ("int32 INA", "int32 INA (switch)", "fixed32"),
           ("C_nat INA (CNAT8)", "C_nat INA (switch)", "cnat8"),
           ("natural dithering INA (NAT4, CNAT8 down)", "natural dithering INA (switch)",
            "nat4"),
           ("uniform THC INA (UQ4, SUM8 down)", "uniform (THC) INA (switch)", "uq4")]


# the same through the wide4 profile (torch_convergence's method names)
WIDE4_METHODS = [("natural dithering INA (NAT4), wide4", "natural dithering INA wide4 (switch)"),
                 ("uniform THC INA (UQ4), wide4", "uniform (THC) INA wide4 (switch)")]


def section(layer: dict | None, model: dict | None, speed: dict | None,
            variance: str | None, plot: Path | None, rel: str = "results",
            wide4: dict | None = None, pps: str | None = None) -> list[str]:
    """The markdown of the side by side (and its plot, where matplotlib is installed)."""
    out = ["## Four bits per element: natural dithering and THC-style INA "
           "(bench/fourbit.py, bench/torch_convergence.py)", ""]
    if not (layer and model) and not speed:
        return out + ["Not run.", ""]
    conv = {"layer": layer, "model": model}
    base_name = METHODS[0][1]
    speed = speed or {}
    targets = sorted({k.split("/")[0] for k in speed})
    head = ["method", "bytes/element up", "bytes/element down", "accuracy layer-wise",
            VS, "verdict", "Holm", "accuracy entire model", VS, "verdict", "Holm"]
    for t in targets:
        head += [f"steps/s {t}", f"elements/s {t}"]
    wide4 = wide4 or {}
    w4 = sorted({k.split("/")[0] for k in wide4})[:1]
    if w4:
        head[3:3] = ["up, wide4", "down, wide4"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    def family(c: dict | None, methods: list[str]) -> dict[str, str]:
        """Holm's verdicts over `methods` against the baseline, of those `c` ran (one
        column of the table: one mode)."""
        if not c:
            return {}
        fam = {m: paired(c["finals"][m], c["finals"][base_name], scale=100)
               for m in methods if m != base_name and c["finals"].get(m)}
        return holm(fam)

    def versus(c: dict | None, method: str, corrected: dict[str, str]) -> list[str]:
        """Mean final accuracy, the paired difference from uncompressed (pp) with its 95 % CI
        and seeds, the verdict and Holm's over the table's family."""
        finals = c["finals"].get(method) if c else None
        if not finals:
            return ["-", "-", "-", "-"]
        acc = f"{sum(finals) / len(finals):.3f}"
        if method == base_name:
            return [acc, "-", "baseline", "-"]
        d = paired(finals, c["finals"][base_name], scale=100)
        return [acc, d.text(verdict=False), d.label, corrected.get(method, "-")]

    main_holm = {mode: family(conv[mode], [m for _, m, _ in METHODS])
                 for mode in ("layer", "model")}

    for row, method, enc in METHODS:
        first = speed.get(f"{targets[0]}/{enc}") if targets and enc else None
        cells = [row, "4 (float32)" if enc is None else fmt(first["up"]) if first else "-",
                 "4 (float32)" if enc is None else fmt(first["down"]) if first else "-"]
        if w4:
            r = wide4.get(f"{w4[0]}/{enc}") if enc else None
            cells += ["4 (float32)" if enc is None else fmt(r["up"]) if r else "-",
                      "4 (float32)" if enc is None else fmt(r["down"]) if r else "-"]
        for mode in ("layer", "model"):
            cells += versus(conv[mode], method, main_holm[mode])
        for t in targets:
            r = speed.get(f"{t}/{enc}") if enc else None
            cells += [fmt(r["steps_per_s"]) if r else "-",
                      f"{r['elements_per_s']:.3g}" if r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    c = layer or model
    profiles = "default profile (168 elements per packet)" + (
        " and wide4 (1024; no int32 INA there)" if w4 else "")
    # the speed rows stand without a convergence run (one that failed, say)
    accuracy = ("*Accuracy*: not run. " if c is None else
                f"*Accuracy*: DDP on MNIST-1D (the 1-D CNN, "
                f"{c['steps']} steps, batch {c['batch']} per worker, lr {c['lr']}), the mean "
                f"final test accuracy over {c['seeds']} seeds and its difference from "
                f"uncompressed in percentage points, {EXPLAINED}; {HOLM_EXPLAINED}, the "
                f"family: the methods of the table against uncompressed, one per mode; "
                f"compressors applied per layer (layer-wise) or to the whole model; "
                f"ranks are threads through in-process softswitch. ")
    out += [f"4 workers on one switch. *Bytes per element*: whole frames (Ethernet header on) "
            f"per element of a worker's tensor, priming rounds included, {profiles}. "
            f"{accuracy}*steps/s*: allreduce calls of "
            f"the CNN's 134,922 parameters per second (communication only, default profile); "
            f"*elements/s*: per "
            f"worker.", "", *lines, ""]
    # the wide4 table's family is its rows, both modes: one Holm column over all of them
    w4_fam = {(mode, m): paired(conv[mode]["finals"][m], conv[mode]["finals"][base_name],
                                scale=100)
              for mode in ("layer", "model") for _, m in WIDE4_METHODS
              if conv[mode] and conv[mode]["finals"].get(m)}
    w4_holm = {mode: {m: v for (md, m), v in holm(w4_fam).items() if md == mode}
               for mode in ("layer", "model")}
    wide4_rows = [[f"{row}, {'layer-wise' if mode == 'layer' else 'entire model'}",
                   *versus(conv[mode], method, w4_holm[mode])]
                  for mode in ("layer", "model") for row, method in WIDE4_METHODS
                  if conv[mode] and method in conv[mode]["finals"]]
    if wide4_rows:
        out += ["The 4-bit encodings through wide4 (one scale per 1024 elements instead of 168), "
                "the same runs otherwise:", "",
                f"| method | accuracy | {VS} | verdict | Holm |",
                "| --- | --- | --- | --- | --- |",
                *("| " + " | ".join(r) + " |" for r in wide4_rows),
                ""]
    ratios = [ln for ln in (pps or "").splitlines() if " the elements/s of " in ln]
    if ratios:
        out += ["The switch's own rate (`bench/softswitch_pps.py --encodings cnat8 uq4`: the "
                "same number of full packets of each encoding from 4 workers on the same "
                "ports, runs interleaved, every result compared between the targets; UQ4 "
                "is added four elements per register add, CNAT8 decoded and re-compressed "
                "per element):", "", "```", *ratios, "```", ""]
    if plot is not None and layer and model and _plot(conv, plot):
        out += [f"![4-bit INA: test accuracy against step]({rel}/{plot.name})", ""]
    if variance:
        out += ["NAT4's variance against the natural dithering bound (bench/fourbit_variance.py; "
                "omega = E||D(x) - x||^2 / ||x||^2 per 168-element chunk at its own exponent; "
                "the bound of Horvath et al. with the lowest level as NAT4's unit):", "",
                variance.strip(), ""]
    return out


def _plot(conv: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
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
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--convergence", nargs=2, type=Path, metavar=("LAYER", "MODEL"),
                    required=True)
    ap.add_argument("--speed", nargs="*", type=Path, default=[])
    ap.add_argument("--variance", type=Path, help="bench/fourbit_variance.py's output")
    ap.add_argument("--wide4", type=Path, help="bench/fourbit.py --profile wide4's JSON")
    ap.add_argument("--pps", type=Path,
                    help="bench/softswitch_pps.py --encodings cnat8 uq4's output")
    ap.add_argument("--plot", type=Path, default=REPO / "docs" / "results" / "fourbit.png")
    args = ap.parse_args(argv)
    layer, model = (json.loads(p.read_text()) for p in args.convergence)
    speed = {}
    for p in args.speed:
        speed.update(json.loads(p.read_text())["results"])
    variance = args.variance.read_text() if args.variance else None
    wide4 = json.loads(args.wide4.read_text())["results"] if args.wide4 else None
    pps = args.pps.read_text() if args.pps else None
    print("\n".join(section(layer, model, speed, variance, args.plot, "results", wide4, pps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
