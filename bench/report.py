#!/usr/bin/env python3
"""docs/results.md from the benches' outputs: tables, plots, targets, the machine.

    .venv/bin/python bench/report.py [--dir results/bench] [--out docs/results.md]

Reads <dir>/{wire,allreduce,convergence,torch_*,speed_targets,steptime}.json and
<dir>/{codec,softswitch_pps}.txt (what bench/all.py leaves there); a bench without output
is listed as not run. Plots go to the folder named like the report without .md
(docs/results/*.png).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import tofino_report
from common import OUT, REPO, Target, fmt, machine
from paired import EXPLAINED, HOLM_EXPLAINED

os.environ.setdefault("MPLBACKEND", "Agg")


def load(d: Path, name: str) -> dict | None:
    try:
        data = json.loads((d / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return None if "skipped" in data and len(data) == 1 else data


def text(d: Path, name: str) -> str | None:
    try:
        return (d / f"{name}.txt").read_text().rstrip()
    except OSError:
        return None


# ---------------------------------------------------------------- plots


def plot_star(rows: list[dict], path: Path) -> bool:
    import matplotlib.pyplot as plt

    parts = list(dict.fromkeys(r["part"] for r in rows if r["part"].startswith("star")))
    if not parts:
        return False
    fig, axes = plt.subplots(1, len(parts), figsize=(4.2 * len(parts), 3.6), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        mine = [r for r in rows if r["part"] == part]
        x = range(len(mine))
        ax.bar([i - 0.2 for i in x], [r["median_s"] for r in mine], 0.4, label="measured")
        ax.bar([i + 0.2 for i in x], [r["bound_s"] for r in mine], 0.4, label="link bound")
        ax.set_xticks(list(x), [r["variant"].replace(" ", "\n", 1) for r in mine], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("seconds per allreduce (log)")
        ax.set_title(f"{part}: {mine[0]['switch']}, {mine[0]['bw_mbit']:g} Mbit/s", fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_fat(rows: list[dict], path: Path) -> bool:
    """One panel per fat-tree part; per variant its measured times and its link bounds."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    parts = list(dict.fromkeys(r["part"] for r in rows if r["part"].startswith("fat")))
    if not parts:
        return False
    fig, axes = plt.subplots(1, len(parts), figsize=(5.2 * len(parts), 3.8), squeeze=False)
    for ax, part in zip(axes[0], parts, strict=True):
        mine = [r for r in rows if r["part"] == part]
        for variant in dict.fromkeys(r["variant"] for r in mine):
            pts = sorted((r for r in mine if r["variant"] == variant), key=lambda r: r["workers"])
            n = [r["workers"] for r in pts]
            line, = ax.plot(n, [r["median_s"] for r in pts], "o-", label=f"{variant}: measured")
            ax.plot(n, [r["bound_s"] for r in pts], "x--", color=line.get_color(), ms=9,
                    label=f"{variant}: link bound")
        ax.set_title(f"{part}, {mine[0]['bw_mbit']:g} Mbit/s links", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ys = [r[k] for r in mine for k in ("median_s", "bound_s")]
        # within one decade there are no major ticks to read: label the minor ones
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g") if max(ys) < 10 * min(ys)
                                     else NullFormatter())
        ax.set_xticks([2, 4, 8, 16], ["2", "4", "8", "16"])
        ax.set_xlabel("workers (k=4 fat-tree)")
        ax.set_ylabel("seconds per allreduce (log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_convergence(conv: dict, path: Path) -> bool:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    steps = conv["eval_steps"]
    late = [i for i, s in enumerate(steps) if s >= steps[-1] // 3]
    for name, curve in conv["curves"].items():
        sim = name.endswith("(sim.)")
        style = {"lw": 1 if sim else 2, "ls": ":" if sim else "-", "label": name}
        line, = axes[0].plot(steps, curve, **style)
        if curve[-1] >= conv["curves"]["uncompressed"][-1] - 0.02:
            style["color"] = line.get_color()
            axes[1].plot([steps[i] for i in late], [curve[i] for i in late], **style)
    axes[0].set_ylim(0, 1)
    axes[0].set_title("all methods", fontsize=9)
    axes[1].set_title("within 2 points of uncompressed at the end (zoom)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel(f"test accuracy (mean of {conv['seeds']} seeds)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_torch(conv: dict, path: Path) -> bool:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, curve in conv["curves"].items():
        ina = "INA" in name or "uncompressed" in name
        ax.plot(conv["eval_steps"], curve, lw=2 if ina else 1, ls="-" if ina else ":",
                label=name)
    ax.set_ylim(0, 1)
    ax.set_xlabel("step")
    ax.set_ylabel(f"test accuracy (mean of {conv['seeds']} seeds)")
    ax.set_title("DDP, MNIST-1D CNN, 4 workers", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def overlap_section(ov: dict | None) -> list[str]:
    out = ["## PyTorch DDP: overlap of communication with the backward pass "
           "(bench/torch_overlap.py)", ""]
    if not ov:
        return out + ["Not run (needs root and Mininet).", ""]
    most = (ov["compute"] + ov["comm"]) / max(ov["compute"], ov["comm"])
    return out + [
        f"A star of 4 workers, one {ov['switch']} switch, C_nat INA on the {ov['profile']} "
        f"profile, links at {ov['bw']:g} Mbit/s, batch {ov['batch']} per worker, "
        f"{ov['steps']} steps per run, {ov['reps']} repetition(s) each way, interleaved. "
        "*overlap*: the hook's futures completed by the rank's communication thread while "
        "the backward pass goes on; *no overlap*: each bucket reduced on the autograd "
        f"thread. Without overlap a step was {ov['compute']:.3f} s of computation and "
        f"{ov['comm']:.3f} s of communication; overlap gained {ov['gain']:.2f}x over no "
        f"overlap (at most {most:.2f}x, the table below).", "",
        "| no overlap, median per step | computation s | communication s | overlap's most: "
        "(computation + communication) / the larger |", "| --- | ---: | ---: | ---: |",
        f"| measured | {ov['compute']:.3f} | {ov['comm']:.3f} | {most:.2f}x |", "",
        ov["table"], ""]


def torch_sections(tconv: dict | None, tta: dict | None, figs: Path, rel: str) -> list[str]:
    out = ["## PyTorch DDP on MNIST-1D: convergence (bench/torch_convergence.py)", ""]
    if tconv:
        out += [f"{tconv['workers']} workers, {tconv['steps']} steps, batch {tconv['batch']} "
                f"per worker, SGD lr {tconv['lr']} momentum 0.9, the 1-D CNN of "
                "docs/TORCH.md (134,922 parameters), compressors applied "
                f"{tconv['mode']}-wise in the DDP hook, {tconv['seeds']} seed(s); every method "
                "runs the same DDP loop from the same model and batches per seed, and a rerun "
                "of a seed gives the same models bit for bit (the rounding bits are keyed by "
                "the seed and what they round, docs/WORKER.md). *vs uncompressed*: test "
                "accuracy in percentage points at the last evaluation and over the last "
                f"evaluations (constant-rate SGD ends noisy), {EXPLAINED}; {HOLM_EXPLAINED}.", "",
                tconv["table"], ""]
        if plot_torch(tconv, figs / "torch_convergence.png"):
            out += [f"![DDP: test accuracy against step]({rel}/torch_convergence.png)", ""]
    else:
        out += ["Not run.", ""]
    out += ["## PyTorch DDP: time to accuracy (bench/torch_tta.py, bench/tta_seeds.py)", ""]
    if tta:
        out += [f"A star of 4 workers around one {tta.get('switch', 'P4')} switch, links "
                f"shaped with HTB at each row's rate; {tta['steps']} steps "
                "per run. *s/step*: the median step time after the first step. *busiest "
                "link*: the most any worker's interface sent or received in one step.", "",
                tta["table"], ""]
        a = tta.get("seeds_analysis")
        if a:
            import tta_seeds
            out += [f"Time to {a['target']:.0%} test accuracy per seed ({a['seeds']} seeds of "
                    "bench/torch_convergence.py, the same batches for every method); "
                    f"{tta_seeds.EXPLAINED}. Seconds per step measured in Mininet where a link "
                    "bound the run, else projected (`mininet/steptime.py project`, "
                    f"{a['workers']} workers, compute {a['compute_seconds'] * 1e3:.1f} ms a "
                    "step as measured here).",
                    "", a["steps_table"], "", a["time_table"], ""]
            if tta_seeds.plot(a, figs / "torch_tta.png", tta_seeds.PANELS):
                out += [f"![time to accuracy per seed]({rel}/torch_tta.png)", ""]
    else:
        out += ["Not run (needs root and Mininet).", ""]
    return out


def steptime_section(st: dict | None, figs: Path, rel: str) -> list[str]:
    """bench/steptime.py: the step-time model against runs it was not calibrated on, and its
    projections (docs/STEPTIME.md)."""
    out = ["## Step-time model and projections (bench/steptime.py)", ""]
    if not st:
        return out + ["Not run (needs root and Mininet).", ""]
    # by its path: mininet/steptime.py, the model, is `steptime` too where mininet/ is on
    # the path (tests)
    spec = importlib.util.spec_from_file_location("steptime_bench",
                                                  Path(__file__).with_name("steptime.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model, plot = bench.model, bench.plot

    errs = [r["error"] for r in st["rows"] if not r["calibration"]]
    rates = sorted({r["bw"] for r in st["runs"] if r["switch"] == "soft"}, reverse=True)
    out += ["`mininet/steptime.py` predicts seconds per step from a run's own figures "
            "(docs/STEPTIME.md): compute not hidden + the largest of the busiest link's "
            "bytes over its rate, the switch's CPU per step, a worker's CPU for communication "
            "and the window's round trips, + one packet's fill; in the emulation, joined "
            "with all the job's CPU per step over the cores free for it as a smooth maximum "
            "((a^3 + b^3)^(1/3)). A star of 4 "
            f"workers, softswitch at {', '.join(f'{b:g}' for b in rates)} Mbit/s"
            + (", BMv2 at " + ", ".join(f"{b:g}" for b in sorted(
                {r['bw'] for r in st['runs'] if r['switch'] == 'bmv2'}, reverse=True))
               + " Mbit/s" if any(r["switch"] == "bmv2" for r in st["runs"]) else "")
            + ". Per method and switch the fastest run gives the CPU figures, and the "
            "slowest the share of the link's rate the protocol gets and the CPU per step "
            "the job grows to as a slower link spreads its packets (on BMv2, with two rates, "
            "softswitch's slowest gives the share and the CPU stays the fastest run's); every "
            "other run is predicted from its link rate and the cores other work on the "
            "machine left it, never from its own time."
            + (f" Median error {100 * statistics.median(errs):.1f} %, largest "
               f"{100 * max(errs):.1f} %, over {len(errs)} predicted runs." if errs else ""),
            "", st["table"], ""]
    if plot(st["rows"], figs / "steptime.png"):
        out += [f"![step-time model: predicted against measured steps/s]({rel}/steptime.png)",
                ""]
    out += ["### Projections (not measurements)", "",
            "The same model on a cluster: a worker per machine (no shared-CPU term), one "
            "switch aggregating at line rate, a round trip of 10 us, the window sized to "
            "fill rate x round trip (the *slots* column), no overlap of communication with "
            "the backward pass, 8 workers. Bytes per element are this testbed's measured "
            "wire figures (C_nat 1.35 up, the default profile; int32 4.35); the ring "
            "allreduce moves 2(n-1)/n x 4 bytes per element per worker plus TCP/IP headers. "
            "Compute per step and steps to accuracy are assumptions, given with their "
            "sources in docs/STEPTIME.md; time to accuracy assumes every method needs the "
            "same steps (bench/torch_convergence.py measures C_nat INA within a fraction "
            "of a point of uncompressed at equal steps on MNIST-1D). This switch is the "
            "v1model profile (168 C_nat elements per packet) summed at line rate; on a "
            "Tofino, with the elements per packet and passes its compiler placed and their "
            "cost to the pipes, \"On Tofino\", *Projections from what fits*, has the same "
            "models side by side.", "",
            *projection_table(model), ""]
    return out


# the projections' models (tofino_report.MODELS: both sections project the same ones)
MODELS = tofino_report.MODELS


def projection_table(model) -> list[str]:
    lines = ["| model | Gbit/s | method | s/step | bound | time to accuracy (h) | "
             "vs ring |", "| --- | ---: | --- | ---: | --- | ---: | ---: |"]
    for name, params, ms, steps in MODELS:
        for gbit in (10.0, 25.0, 100.0):
            ring = model.project(params, ms / 1e3, gbit, 8, "ring")
            for method, label in (("cnat", "C_nat INA"), ("int32", "int32 INA"),
                                  ("ring", "ring allreduce")):
                p = model.project(params, ms / 1e3, gbit, 8, method)
                lines.append(f"| {name} | {gbit:g} | {label} | {p.step_s:.3f} | {p.bound} | "
                             f"{p.step_s * steps / 3600:.1f} | "
                             f"{ring.step_s / p.step_s:.2f}x |")
    return lines


# ---------------------------------------------------------------- sections


def speed_section(sp: dict | None, figs: Path, rel: str) -> list[str]:
    """bench/speed_targets.py: every speed target with its verdict, the rows behind them."""
    out = ["## Speed targets (bench/speed_targets.py)", ""]
    if not sp:
        return out + ["Not run.", ""]
    from speed_targets import plot

    m = sp["machine"]
    base = sp["baseline"]
    out += [f"`{sp['command']}`: this code against "
            + (f"the baseline revision `{base[:12]}` (checked out in a worktree, measured by "
               "the same scripts in the same run)" if base else "no baseline")
            + f". {sp['elements']} float32 per worker, {sp['reps']} timed calls (pps: runs) "
            "per row; the figure is the median, *min..max* the spread. Switch-bound rows at "
            f"{sp['fast_bw']:g} Mbit/s, link-bound at {sp['link_bw']:g} Mbit/s, softswitch. "
            f"Each row's load average, at its start and its end, is in its *load* column "
            f"({m['cores']} cores, shared).", ""]
    code = sp.get("code") or {}
    if base and code.get("changed") is not None:
        n = len(code["changed"])
        out += [f"The code measured (*new*, `{(code.get('revision') or '?')[:12]}` and its "
                f"working tree) differs from the baseline in {n} file(s) outside bench/, docs/ "
                "and tests/" + (": old and new are the same code, so the *this code / "
                                "baseline* ratios show how much the machine's noise alone "
                                "moves a figure." if n == 0 else
                                ": " + ", ".join(code["changed"][:12])
                                + (", ..." if n > 12 else "") + "."), ""]
    out += [sp["targets_table"], "", sp["table"], ""]
    if sp.get("soft_to_bmv2"):
        out += ["| pps, this code | elements/s |", "| --- | ---: |",
                f"| softswitch / BMv2 simple_switch_grpc | {sp['soft_to_bmv2']:.2f}x |", ""]
    if sp.get("skipped"):
        out += ["Not run: " + "; ".join(f"{k} ({v})" for k, v in sp["skipped"].items()) + ".",
                ""]
    ts = [Target(t["name"], t["value"], t["limit"], t["kind"], t["unit"], t["why"])
          for t in sp["targets"]]
    if plot(ts, figs / "speed_targets.png"):
        out += [f"![speed targets: measured over target]({rel}/speed_targets.png)", ""]
    return out


def machine_section(m: dict, switches: list[str]) -> list[str]:
    rows = [("cores", m.get("cores")), ("CPU", m.get("cpu")),
            ("memory", f"{m.get('memory_gib')} GiB"), ("kernel", m.get("kernel")),
            ("OS", m.get("os")), ("Python / numpy", f"{m.get('python')} / {m.get('numpy')}"),
            ("BMv2 (simple_switch_grpc)", m.get("bmv2") or "not installed"),
            ("p4c", m.get("p4c") or "not installed"), ("Mininet", m.get("mininet") or "-"),
            ("switch targets used", ", ".join(switches) or "-"),
            ("load average (1, 5, 15 min) before the benches started",
             " / ".join(str(x) for x in m.get("load_average", [])))]
    return ["| | |", "| --- | --- |"] + [f"| {k} | {fmt(v)} |" for k, v in rows]


def targets_section(all_targets: list[tuple[str, dict]]) -> list[str]:
    lines = ["| bench | target | measured | verdict |", "| --- | --- | ---: | --- |"]
    for bench, t in all_targets:
        sign = "<=" if t["kind"] == "max" else ">="
        if t["met"] is None:
            verdict = "not measured"
        elif t["met"]:
            verdict = "met"
        else:
            miss = (t["value"] / t["limit"] if t["kind"] == "max" else t["limit"] / t["value"])
            verdict = f"**missed by {miss:.2f}x**" + (f": {t['why']}" if t["why"] else "")
        # a gap between methods over seeds carries its paired 95 % CI (bench/paired.py)
        ci = f" ({t['ci']})" if t.get("ci") else ""
        lines.append(f"| {bench} | {t['name']} {sign} {t['limit']}{t['unit']} | "
                     f"{fmt(t['value'])}{t['unit']}{ci} | {verdict} |")
    return lines


def observations(rows: list[dict], cores) -> list[str]:
    """What the allreduce table says, in sentences built from its figures."""
    def get(part, variant):
        return next((r for r in rows if r["part"] == part and r["variant"] == variant), None)

    out = []
    link = [r for r in rows if r["regime"] == "link"]
    if link:
        worst = max(link, key=lambda r: r["x_bound"])
        bws = " and ".join(f"{b:g}" for b in sorted({r["bw_mbit"] for r in link}, reverse=True))
        out.append(f"- **Link-bound** ({bws} Mbit/s), every row took at most "
                   f"{worst['x_bound']:.2f}x its bound ({worst['part']}, {worst['variant']}, "
                   f"{worst['workers']} workers): the time is the busiest link's bytes over its "
                   "bandwidth, so the ratios between variants are the ratios of their bytes.")
    said, fast, slower = [], None, False
    for part in dict.fromkeys(r["part"] for r in rows if r["regime"] == "switch"):
        c, i, p = (get(part, v) for v in ("C_nat INA", "int32 INA", "parameter server"))
        if c and i and p:
            fast = c["bw_mbit"]
            g = get(part, "Gloo ring")
            slower |= c["median_s"] > min(i["median_s"], p["median_s"])
            said.append(f"on {c['switch']} ({part}) C_nat INA took "
                        f"{c['median_s'] / i['median_s']:.2f}x the time of int32 INA, "
                        f"{c['median_s'] / p['median_s']:.2f}x the parameter server's"
                        + (f" and {c['median_s'] / g['median_s']:.2f}x Gloo ring's"
                           if g else ""))
    if said:
        # Which way the order goes depends on the switch's per-packet cost: say it from the
        # figures, not as a rule.
        out.append(f"- **Switch-bound** ({fast:g} Mbit/s): " + "; ".join(said) + "."
                   + (" Where C_nat INA is the slower, the switch's per-packet work decides: "
                      "the CNAT8 path decodes 168 codes and re-compresses 168 sums, the "
                      "FIXED32 path only adds, and the parameter server's packets are only "
                      "routed. A hardware switch does all of it at line rate, which is what "
                      "the link-bound rows stand for." if slower else ""))
    fat = sorted((r for r in rows if r["part"].startswith("fat") and r["regime"] == "switch"),
                 key=lambda r: r["workers"])
    if len(fat) >= 2:
        lo, hi = fat[0], fat[-1]
        out.append(f"- On the switch-bound fat-tree ({hi['switch']}) time grows "
                   f"{hi['median_s'] / lo['median_s']:.1f}x from {lo['workers']} to "
                   f"{hi['workers']} workers: every switch is a process on the same "
                   f"{cores} cores, so the time follows the total packet work of the "
                   "tree, which grows with the workers.")
    lost = [r for r in rows if r["lost_before_switch"] > 0]
    if lost:
        out.append("- Packets the kernel delivered to a switch's interface that the switch "
                   "program never received (its input overflowed; the workers retransmitted "
                   "them): " + "; ".join(f"{r['part']} {r['variant']}: {r['lost_before_switch']}"
                                         for r in lost) + ".")
    return out + [""] if out else []


def sparse_section(sp: dict | None) -> list[str]:
    out = ["## Block-sparse aggregation (bench/sparse.py)", ""]
    if not sp:
        return out + ["Not run (needs root and Mininet).", ""]
    return out + [
        f"`{sp['command']}` (as root): a star of 4 workers and a fifth host, links shaped at "
        f"{sp['bw']:g} Mbit/s (link-bound), the {sp['switch']} target; {sp['elements']} "
        f"float32 per worker in blocks of 168, {sp['reps']} timed calls per row after a "
        "warm-up call (a call's time is its slowest worker's; the median is shown). *density* "
        "is the fraction of blocks each worker holds non-zero; *random*: each worker draws "
        "its blocks independently, so the *union* over the 4 workers, the blocks a sparse "
        "job aggregates, is about 1 - (1 - density)^4; *clustered*: all workers hold the same "
        "contiguous run, the union is the density. Every result goes to every worker, so "
        "bytes follow the union. *Bound*: bytes on the busiest link direction per call (the "
        "kernel's counters) over the bandwidth; *x dense bytes*: those bytes against dense "
        "C_nat INA's in the same placement and density. The host aggregator runs the same "
        "block protocol on the fifth host (worker/block_aggregator.py): its own link carries "
        "every worker's traffic.", "", sp["table"], ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=OUT)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "results.md")
    args = ap.parse_args(argv)
    wire, ar, conv = (load(args.dir, n) for n in ("wire", "allreduce", "convergence"))
    tconv, tta = (load(args.dir, n) for n in ("torch_convergence", "torch_tta"))
    overlap = load(args.dir, "torch_overlap")
    sp = load(args.dir, "speed_targets")
    st = load(args.dir, "steptime")
    tconv_model, fourbit = (load(args.dir, n) for n in ("torch_convergence_model", "fourbit"))
    sparse = load(args.dir, "sparse")
    figs = args.out.with_suffix("")
    figs.mkdir(parents=True, exist_ok=True)
    rel = figs.name
    start = load(args.dir, "start")
    m = start["machine"] if start else machine()
    switches = []
    if wire:
        switches.append(f"wire: {wire['where']}")
    if ar:
        switches.append("allreduce: " + ", ".join(sorted({f"{r['part']} {r['switch']}"
                                                           for r in ar["rows"]})))
    if conv:
        switches.append("convergence: in-process softswitch")
    all_targets = [(b, t) for b, d in (("wire", wire), ("allreduce", ar), ("convergence", conv),
                                       ("sparse", sparse), ("torch_convergence", tconv),
                                       ("torch_tta", tta), ("torch_overlap", overlap),
                                       ("speed_targets", sp), ("steptime", st))
                   if d for t in d["targets"]]
    out = [
        "# Benchmark results",
        "",
        f"Written by `bench/report.py` from the outputs of `make bench` (`bench/all.py`) on "
        f"{time.strftime('%Y-%m-%d')}. Every ratio compares figures measured in the same run. "
        "How to run the benches and what each one does: [bench/README.md](../bench/README.md).",
        "",
        "## Machine",
        "",
        *machine_section(m, switches),
        "",
        "## Targets",
        "",
        *(targets_section(all_targets) if all_targets else ["No bench with targets ran."]),
        "",
    ]
    out += ["## Bytes per gradient element (bench/wire.py)", ""]
    if wire:
        out += [f"{wire['where']}; a star of {wire['workers']} workers and a parameter-server "
                f"host; one allreduce of {wire['elements']} float32 per worker. Bytes are "
                "whole Ethernet frames (no FCS) that crossed the workers' links, counted by "
                "the kernel on the switch's interfaces (Mininet) or by taps on the hosts' "
                "ports (in process), per worker and element. The switch's own port counters "
                "agree on the packets, but for a few frames (IPv6 neighbour discovery) the "
                "root namespace sends on the switch's interfaces. *Busiest* is the most "
                "loaded link direction per element of one worker's gradient (for the "
                "parameter server, its own link).", "",
                wire["table"], ""]
        odd = [r for r in wire["rows"]
               if abs(r["switch_down_bytes_per_element"] - r["down_bytes_per_element"]) > 0.01]
        if odd:
            out += ["| variant | B/elem down, on the links | B/elem down, the switch's "
                    "`NatEgress.port_tx` counter |", "| --- | ---: | ---: |"]
            out += [f"| {r['variant']} | {r['down_bytes_per_element']:.3f} | "
                    f"{r['switch_down_bytes_per_element']:.3f} |" for r in odd] + [""]
        for r in odd:
            out += [f"The switch's `NatEgress.port_tx` counter gave "
                    f"{r['switch_down_bytes_per_element']:.3f} B/element down for "
                    f"*{r['variant']}*, where the links carried "
                    f"{r['down_bytes_per_element']:.3f}: a v1model counter counts the length "
                    "a packet entered the switch with, not the length it leaves with.", ""]
    else:
        out += ["Not run.", ""]
    out += ["## Time to allreduce (bench/allreduce.py)", ""]
    if ar:
        out += [f"{ar['elements']} float32 per worker, {ar['reps']} timed calls per row after "
                "one warm-up call; a call's time is its slowest worker's, the table shows the "
                "median. Links are shaped with HTB at the row's bandwidth: "
                f"{ar['link_bw']:g} Mbit/s for the link-bound star, "
                f"{ar.get('fat_link_bw', ar['link_bw']):g} Mbit/s for the link-bound fat-tree "
                "(its 16 workers and 20 switch processes share the same cores), "
                f"{ar['fast_bw']:g} Mbit/s for the switch-bound parts. The *bound* is the "
                "bytes that crossed the busiest link direction during a call (kernel "
                "counters) over the link's bandwidth; "
                "*x bound* near 1 means the links limited the call, far above 1 the switch or "
                "the hosts did.", "", ar["table"], "",
                "Each row against its part's baseline (star: the parameter server; fat-tree: "
                "the fewest workers):", "", ar["ratios"], ""]
        if plot_star(ar["rows"], figs / "allreduce_star.png"):
            out += [f"![star: measured time and link bound]({rel}/allreduce_star.png)", ""]
        if plot_fat(ar["rows"], figs / "allreduce_fattree.png"):
            out += [f"![fat-tree: time against workers]({rel}/allreduce_fattree.png)", ""]
        out += observations(ar["rows"], ar["machine"]["cores"])
        rates = [r for r in ar["rows"] if r["regime"] == "switch"]
        if rates:
            out += ["Switch-bound rows, elements allreduced per second (workers x elements / "
                    "time):", "", "| part | variant | workers | M elements/s |",
                    "| --- | --- | ---: | ---: |"]
            out += [f"| {r['part']} | {r['variant']} | {r['workers']} | "
                    f"{r['switch_elements_per_s'] / 1e6:.2f} |" for r in rates] + [""]
    else:
        out += ["Not run (needs root and Mininet).", ""]
    out += speed_section(sp, figs, rel)
    out += sparse_section(sparse)
    out += ["## Convergence (bench/convergence.py)", ""]
    if conv:
        out += [f"{conv['workers']} workers, {conv['steps']} steps, batch {conv['batch']} per "
                f"worker, lr {conv['lr']}, MLP 64-{'-'.join(map(str, conv['hidden']))}-10 on "
                f"digits, {conv['seeds']} seed(s); every method sees the same data split, "
                "initial model and batches per seed. *vs uncompressed*: final test "
                f"accuracy in percentage points, {EXPLAINED}; {HOLM_EXPLAINED}.", "",
                conv["table"], ""]
        if plot_convergence(conv, figs / "convergence.png"):
            out += [f"![test accuracy against step]({rel}/convergence.png)", ""]
    else:
        out += ["Not run.", ""]
    out += torch_sections(tconv, tta, figs, rel)
    out += overlap_section(overlap)
    out += steptime_section(st, figs, rel)
    from fourbit_report import section as fourbit_section
    variance = text(args.dir, "fourbit_variance")
    wide4 = load(args.dir, "fourbit_wide4")
    out += fourbit_section(tconv, tconv_model, fourbit and fourbit["results"],
                           variance and "\n".join(ln for ln in variance.splitlines()
                                                   if ln.startswith("|")),
                           figs / "fourbit.png", rel, wide4 and wide4["results"],
                           text(args.dir, "fourbit_pps"))
    for name, title in (("codec", "C_nat codec against a numpy copy (bench/codec.py)"),
                        ("softswitch_pps", "softswitch against BMv2 (bench/softswitch_pps.py)")):
        body = text(args.dir, name)
        out += [f"## {title}", ""]
        out += (["```", body, "```", ""] if body else ["Not run.", ""])
    out += tofino_report.section()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(out).rstrip() + "\n")
    print(f"wrote {args.out} and its plots in {figs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
