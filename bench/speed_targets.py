#!/usr/bin/env python3
"""Every speed target of the data plane, measured in one run and printed with its verdict.

    flock /tmp/natswitch-root.lock .venv/bin/python bench/speed_targets.py \\
        [--baseline REV] [--parts star link fat pps] [--quick] [--wide]

Parts (the Mininet ones on the embedded softswitch; links shaped with HTB):
  star  switch-bound star of 4 workers at --fast-bw (1000 Mbit/s): elements allreduced per
        second (workers x elements / time) of C_nat INA, int32 INA, the host parameter
        server and Gloo's ring allreduce (torch.distributed among the 4 hosts, TCP through
        the switch, the DDP job's rendezvous), the same tensor of --elements float32
  link  link-bound star at --link-bw (50 Mbit/s): C_nat INA time against bytes over the
        bandwidth of the busiest link; its time per step for a model of --elements
        parameters (2^20: the allreduce of one step's gradient)
  fat   switch-bound k=4 fat-tree, 16 workers, 20 switch processes: C_nat INA with FIXED32
        partial sums, workers x elements / time
  pps   bench/softswitch_pps.py's like-for-like stream (veths, the same packets to
        softswitch and BMv2 simple_switch_grpc, outputs compared): elements/s
--wide adds to star and link a row of C_nat INA on the wide profile (p4src/build/wide/, 1456
elements per packet, CNAT8 results; this code only) with the same targets; to fat one with
CNAT8 partial sums (the only kind the wide profile sends up a tree; re-compressed at each
level, so not the exact sums of the baseline's row); to pps the wide program on both
targets, its elements/s against the baseline's 168-element one.
Every part but link also runs on the code of --baseline (default: the revision the targets
were set against), checked out in a git worktree under /tmp with this bench/ copied in, so
the same scripts measure old and new code on the same machine in the same run, part by
part (new, then old). So bench/ must keep running on the baseline's code: a worker option
the old code lacks is passed only when used. A part the old code cannot run is reported and
its ratios left unmeasured. Each row is --reps timed calls (pps: --reps interleaved runs); the
figure is the median, the spread min..max. Every row records the load average.
Outputs: every rank's result must be the same (digest) in every Mininet row, its error
against the exact mean is shown (int32 INA, the parameter server and Gloo are exact up to
float32 or fixed-point rounding; C_nat is not exact); pps compares softswitch's results
with BMv2's. The exit code is 1 if an output check failed, whatever the verdicts.
Results: --json (results/bench/speed_targets.json), a plot next to it, the table printed.
Without root (or --no-root) only pps runs, in process, without BMv2.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, REPO, Reading, Target, machine, markdown, median, quick, save, say, table

# The code the targets of the data-plane speed work are measured against: main when they
# were set (star switch-bound C_nat INA 0.96 M elements/s, fat-tree 16 workers 1.17 M/s).
BASELINE_REV = "fabbb15dac764af3137725d063a3c911b5274282"
PARTS = ("star", "link", "fat", "pps")
LINK_WINDOW = 128  # slots of the link part's jobs (the others': allreduce.WINDOW)
MININET_PARTS = ("star", "link", "fat")
STAR_VARIANTS = (("C_nat INA", 1, "cnat8"), ("int32 INA", 2, "fixed32"),
                 ("parameter server", 9, "float32"), ("Gloo ring", 0, "float32"))
GLOO_PORT = 29600
EXACT_TOL = {"int32 INA": 1e-4, "parameter server": 1e-6, "Gloo ring": 1e-6}


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def spread(values: list[float]) -> tuple[float, float, float]:
    return median(values), min(values), max(values)


# ---------------------------------------------------------------- Mininet parts


def probe_row(name: str, topo, records, loads, counted, bw, elements, reps, load0,
              **extra) -> dict:
    """allreduce.summarize's row, with elements/s per call, the output checks and the load."""
    import allreduce

    row = allreduce.summarize(name, topo, records, loads, counted, bw, elements, reps, **extra)
    n = row["workers"]
    row["eps_calls"] = [n * elements / s for s in row["seconds"]]
    row["eps"], row["eps_min"], row["eps_max"] = spread(row["eps_calls"])
    row["identical"] = len({r.get("result_sha256") for r in records}) == 1
    row["max_rel_err"] = next((r["max_rel_err"] for r in records if "max_rel_err" in r), None)
    tol = EXACT_TOL.get(name)
    row["exact"] = None if tol is None or row["max_rel_err"] is None else \
        row["max_rel_err"] <= tol
    row["load"] = [load0, load_avg()]
    # where the CPU went, per call: all workers' (their process time in the call) and the
    # switches' (over the timed calls); absent from a baseline's probe
    cpus = [[c.get("cpu_s") for c in r["calls"]] for r in records]
    row["workers_cpu_s"] = None if any(None in c for c in cpus) else \
        median(sum(col) for col in zip(*cpus, strict=True))
    sw = records[0].get("switch_cpu_s") if records else None
    row["switch_cpu_s"] = None if not sw else sum(v[0] for v in sw.values()) / reps
    row["switch_sys_s"] = None if not sw else sum(v[1] for v in sw.values()) / reps
    # the steps of the clocks read (the system part's are 10 ms ticks): less is no figure
    steps = records[0].get("switch_cpu_step_s") or {} if records else {}
    for i, key in enumerate(("switch_cpu_step_s", "switch_sys_step_s")):
        row[key] = None if not sw else sum(v[i] for v in steps.values()) / reps
    row["workers_sys_s"] = None if row["workers_cpu_s"] is None else \
        median(sum(c["sys_s"] for c in col)
               for col in zip(*[r["calls"] for r in records], strict=True))
    return row


def switch_cpu(row: dict) -> tuple[Reading, Reading]:
    """The switches' CPU seconds per call and their system part, each with its clock's step
    (0 in rows from before the steps were kept)."""
    return tuple(Reading(row[k], row.get(f"{k[:-2]}_step_s") or 0.0)
                 for k in ("switch_cpu_s", "switch_sys_s"))


def cpu_note(row: dict) -> str:
    w, s = row.get("workers_cpu_s"), row.get("switch_cpu_s")
    if w is None or s is None:
        return ""
    total, system = switch_cpu(row)
    return f"; CPU per call: workers {w:.3f} s ({row['workers_sys_s']:.3f} system), switch " \
        f"{total.text('.3f', ' s')} ({system.text('.3f')} system)"


def part_star(args, part: str, bw: float, variants, profile: str = "default") -> list[dict]:
    """profile: the compiled program the switch runs (controller/profiles.py); off the
    default, one C_nat job with CNAT8 results (all the wide profile aggregates) whose
    workers send the profile's elements per packet."""
    import allreduce
    import emu

    # At 50 Mbit/s a worker's slots in flight must cover a round trip's worth of the link
    # (its queue in both directions and the switch): 64 slots of 1456 elements do not.
    window = LINK_WINDOW if part == "link" else allreduce.WINDOW
    topo, workers, ps_host = allreduce.topo_star(bw, window)
    extra, opts, tag = (), {}, ""
    if profile != "default":
        from controller.profiles import PROFILES
        from controller.topology import JobSpec
        elems = PROFILES[profile].elems
        topo = topo.with_jobs([JobSpec(1, tuple(workers), window, "cnat8")])
        extra, opts = ("--elems", str(elems)), {"profile": profile}
        tag, part_dir = f", {profile} ({elems}/packet)", f"{part}-{profile}"
    workdir = args.workdir / (part if not tag else part_dir)
    workdir.mkdir(parents=True, exist_ok=True)
    topo_path = workdir / "topology.json"
    topo.save(str(topo_path))
    rows = []
    say(f"{part}: star, 4 workers, {bw:g} Mbit/s links, softswitch{tag} ({args.label} code)")
    with emu.started(topo, "soft", workdir, **opts) as net:
        session = int(time.time()) % 20000 + 1
        for k, (name, job, enc) in enumerate(variants):
            ps = (ps_host.name, ps_host.ip) if name == "parameter server" else None
            gloo = (f"{topo.host(workers[0]).ip}:{GLOO_PORT + session % 1000 + k}"
                    if name == "Gloo ring" else None)
            say(f"  {name}: {args.reps} x {args.elements} elements ...")
            load0 = load_avg()
            records, loads, counted = emu.run_probes(
                net, topo_path, workers, workdir, job=job or 1, session=session + k,
                encoding=enc, elements=args.elements, reps=args.reps, topo=topo, ps=ps,
                gloo=gloo, timeout=args.timeout, budget=args.budget, extra=extra)
            name += tag
            row = probe_row(name, topo, records, loads, counted, bw, args.elements, args.reps,
                            load0, part=part, regime="switch" if part == "star" else "link",
                            switch="soft", code=args.label)
            rows.append(row)
            say(f"  {name}: median {row['median_s']:.3f} s = {row['eps'] / 1e6:.2f} M "
                f"elements/s ({row['eps_min'] / 1e6:.2f}..{row['eps_max'] / 1e6:.2f}), bound "
                f"{row['bound_s']:.3f} s, identical on every rank: {row['identical']}, "
                f"load {row['load'][0]}{cpu_note(row)}")
    return rows


def part_fat(args, profile: str = "default") -> list[dict]:
    """profile wide: the switches below the root send CNAT8 partial sums (re-compressed, not
    exact), the only kind that profile can send up a tree."""
    import dataclasses

    import allreduce
    import emu

    topo = allreduce.topo_fat(args.fast_bw, [16])
    job = topo.job(16)            # FIXED32 partial sums below the root (the default)
    name, opts, extra, sub = "C_nat INA", {}, (), "fat"
    if profile != "default":
        from controller.profiles import PROFILES
        elems = PROFILES[profile].elems
        job = dataclasses.replace(job, partials="cnat8")
        topo = topo.with_jobs([job])
        name = f"C_nat INA, {profile} ({elems}/packet), CNAT8 partial sums"
        opts, extra, sub = {"profile": profile}, ("--elems", str(elems)), f"fat-{profile}"
    workdir = args.workdir / sub
    workdir.mkdir(parents=True, exist_ok=True)
    topo_path = workdir / "topology.json"
    topo.save(str(topo_path))
    say(f"fat: k=4 fat-tree, 16 workers, {args.fast_bw:g} Mbit/s, softswitch "
        f"({args.label} code), {name}")
    with emu.started(topo, "soft", workdir, **opts) as net:
        load0 = load_avg()
        records, loads, counted = emu.run_probes(
            net, topo_path, list(job.workers), workdir, job=job.id,
            session=int(time.time()) % 20000 + 101, encoding="cnat8", elements=args.elements,
            reps=args.reps, topo=topo, timeout=args.timeout, budget=args.budget, extra=extra)
    row = probe_row(name, topo, records, loads, counted, args.fast_bw, args.elements,
                    args.reps, load0, part="fat", regime="switch", switch="soft",
                    code=args.label)
    say(f"  {name}, 16 workers: median {row['median_s']:.2f} s = {row['eps'] / 1e6:.2f} M "
        f"elements/s, identical on every rank: {row['identical']}, load {row['load'][0]}")
    return [row]


# ---------------------------------------------------------------- pps


PPS_SOFT = re.compile(r"^softswitch: ([\d,]+) packets/s, ([\d,]+) elements/s", re.M)
PPS_BMV2 = re.compile(r"^BMv2 simple_switch_grpc: ([\d,]+) packets/s, ([\d,]+) elements/s", re.M)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def part_pps(args, profile: str = "default") -> list[dict]:
    """Runs bench/softswitch_pps.py of this checkout once per rep: softswitch elements/s (and
    BMv2's, behind the same veths, with the outputs compared, when root and BMv2 allow)."""
    tag = "" if profile == "default" else f", {profile} profile"
    say(f"pps: bench/softswitch_pps.py, {args.pps_packets} contributions, {args.reps} runs "
        f"({args.label} code){tag}")
    cmd = [sys.executable, str(REPO / "bench" / "softswitch_pps.py"), "--packets",
           str(args.pps_packets), "--runs", "1"] + (["--no-bmv2"] if args.no_root else [])
    if profile != "default":          # the old code has no profiles: pass it only when used
        cmd += ["--profile", profile]
    soft, bmv2, loads, compared = [], [], [], True
    for i in range(args.reps):
        load0 = load_avg()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO),
                           timeout=args.budget)
        if p.returncode != 0:
            raise RuntimeError(f"softswitch_pps.py failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        m = PPS_SOFT.search(p.stdout)
        if not m:
            raise RuntimeError(f"no softswitch figure in softswitch_pps.py's output:\n{p.stdout}")
        soft.append(_num(m.group(2)))
        b = PPS_BMV2.search(p.stdout)
        if b:
            bmv2.append(_num(b.group(2)))
            compared = compared and "outputs identical per port and in order: yes" in p.stdout
        loads.append(load0)
        say(f"  run {i + 1}: softswitch {soft[-1] / 1e6:.3f} M elements/s"
            + (f", BMv2 {bmv2[-1] / 1e6:.3f} M" if b else "") + f", load {load0}")
    row = {"part": "pps", "variant": f"softswitch{tag}", "code": args.label, "eps_calls": soft,
           "load": [min(loads), max(loads)], "identical": compared if bmv2 else None,
           "in_process": not bmv2}
    row["eps"], row["eps_min"], row["eps_max"] = spread(soft)
    rows = [row]
    if bmv2:
        b = {"part": "pps", "variant": f"BMv2{tag}", "code": args.label, "eps_calls": bmv2,
             "load": row["load"], "identical": compared, "in_process": False}
        b["eps"], b["eps_min"], b["eps_max"] = spread(bmv2)
        rows.append(b)
    return rows


# ---------------------------------------------------------------- the baseline


def baseline_tree(rev: str) -> Path:
    """A worktree of `rev` under /tmp with this checkout's bench/ copied over its own."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"natswitch-baseline-{sha[:12]}"
    if not (tree / ".git").exists():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--force",
                        str(tree), sha], check=True, capture_output=True, text=True)
    for f in (REPO / "bench").glob("*.py"):
        shutil.copy2(f, tree / "bench" / f.name)
    return tree


def code_diff(rev: str | None) -> dict:
    """This checkout's revision and the files outside bench/, docs/ and tests/ in which its
    working tree differs from `rev`: none means old and new code are the same (the ratios
    then show the noise of the machine)."""
    def git(*a):
        r = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    out = {"revision": git("rev-parse", "HEAD"), "changed": None}
    if rev:
        names = git("diff", "--name-only", rev, "--", ".", ":!bench", ":!docs", ":!tests")
        out["changed"] = None if names is None else [n for n in names.splitlines() if n]
    return out


def remove_tree(tree: Path) -> None:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                   capture_output=True)
    shutil.rmtree(tree, ignore_errors=True)


def run_baseline(args, tree: Path, part: str) -> list[dict]:
    """This bench, copied into the baseline's tree, runs `part` there as its own process."""
    import json

    out = args.workdir / f"baseline-{part}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, str(tree / "bench" / "speed_targets.py"), "--parts", part,
           "--no-baseline", "--label", "baseline", "--elements", str(args.elements),
           "--reps", str(args.reps), "--fast-bw", str(args.fast_bw), "--pps-packets",
           str(args.pps_packets), "--timeout", str(args.timeout), "--budget",
           str(args.budget), "--rows-only", "--json", str(out)]
    if args.no_root:
        cmd.append("--no-root")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=str(tree), env=dict(os.environ, PYTHONUNBUFFERED="1"))
    for line in proc.stdout:
        print(f"  [baseline] {line}", end="", flush=True)
    if proc.wait() != 0 or not out.exists():
        raise RuntimeError(f"the baseline's {part} part failed (exit {proc.returncode}; its "
                           "output above)")
    return json.loads(out.read_text())["rows"]


# ---------------------------------------------------------------- targets


def targets(rows: list[dict], args) -> list[Target]:
    """The targets, each with the figures it came from (its `why` when it is missed)."""
    def find(part, variant, code="new"):
        return next((r for r in rows if r["part"] == part and r["variant"] == variant
                     and r["code"] == code), None)

    def ratio(name, a, b, limit, what):
        t = Target(name, None if a is None or b is None else a["eps"] / b["eps"], limit, "min")
        if t.value is not None:
            t.why = (f"{what[0]} {a['eps'] / 1e6:.2f} M elements/s, {what[1]} "
                     f"{b['eps'] / 1e6:.2f} M")
        return t

    cnat = find("star", "C_nat INA")
    out = [ratio(f"star {args.fast_bw:g} Mbit/s: C_nat INA / host parameter server, "
                 "elements/s", cnat, find("star", "parameter server"), 2.0,
                 ("C_nat INA", "parameter server")),
           ratio("star: C_nat INA / int32 INA, elements/s", cnat, find("star", "int32 INA"),
                 1.0, ("C_nat INA", "int32 INA")),
           ratio("star: C_nat INA / Gloo ring allreduce, elements/s", cnat,
                 find("star", "Gloo ring"), 1.0, ("C_nat INA", "Gloo")),
           Target("star: C_nat INA elements/s", None if cnat is None else cnat["eps"] / 1e6,
                  5.0, "min", " M/s")]
    out.append(ratio("pps: softswitch elements/s, this code / baseline",
                     find("pps", "softswitch"), find("pps", "softswitch", "baseline"), 10.0,
                     ("this code", "baseline")))
    link = find("link", "C_nat INA")
    t = Target(f"link {args.link_bw:g} Mbit/s: C_nat INA time / bytes over bandwidth",
               None if link is None else link["x_bound"], 1.3, "max")
    if link:
        t.why = f"{link['median_s']:.3f} s against {link['bound_s']:.3f} s"
    out.append(t)
    out.append(Target(f"link {args.link_bw:g} Mbit/s: seconds per step (allreduce of "
                      f"{args.elements} parameters)",
                      None if link is None else link["median_s"], 1.0, "max", " s"))
    out.append(ratio("fat-tree 16 workers: C_nat INA elements/s, this code / baseline",
                     find("fat", "C_nat INA"), find("fat", "C_nat INA", "baseline"), 5.0,
                     ("this code", "baseline")))
    # --wide: the same targets on the wide profile (this code only). pps: the wide profile's
    # elements/s against the baseline's (which has the 168-element program only).
    wide_pps = find("pps", "softswitch, wide profile")
    if wide_pps:
        out.append(ratio("pps: softswitch elements/s, this code on the wide profile / baseline",
                         wide_pps, find("pps", "softswitch", "baseline"), 10.0,
                         ("this code, wide profile", "baseline")))
    for w in [r for r in rows if r["code"] == "new" and r["variant"].startswith("C_nat INA, ")]:
        tag = w["variant"]
        if w["part"] == "fat":
            out.append(ratio(f"fat-tree 16 workers: {tag}, this code / baseline", w,
                             find("fat", "C_nat INA", "baseline"), 5.0,
                             (f"this code, {tag}", "baseline")))
        elif w["part"] == "star":
            out += [ratio(f"star: {tag} / host parameter server, elements/s", w,
                          find("star", "parameter server"), 2.0, (tag, "parameter server")),
                    ratio(f"star: {tag} / int32 INA, elements/s", w, find("star", "int32 INA"),
                          1.0, (tag, "int32 INA")),
                    ratio(f"star: {tag} / Gloo ring allreduce, elements/s", w,
                          find("star", "Gloo ring"), 1.0, (tag, "Gloo")),
                    Target(f"star: {tag} elements/s", w["eps"] / 1e6, 5.0, "min", " M/s")]
        else:
            out += [Target(f"link {args.link_bw:g} Mbit/s: {tag} time / bytes over bandwidth",
                           w["x_bound"], 1.3, "max"),
                    Target(f"link {args.link_bw:g} Mbit/s: {tag} seconds per step",
                           w["median_s"], 1.0, "max", " s")]
    return out


def verdict(t: Target) -> str:
    return "-" if t.met is None else "PASS" if t.met else "FAIL"


def threshold(t: Target) -> str:
    return f"{'>=' if t.kind == 'min' else '<='} {t.limit:g}{t.unit}"


def measured(t: Target) -> str:
    return "not measured" if t.value is None else f"{t.value:.3g}{t.unit}"


def row_table(rows: list[dict]) -> tuple[list[str], list[list]]:
    header = ["part", "variant", "code", "M elem/s", "min..max", "median s", "x bound",
              "same on all ranks", "max rel err", "CPU s/call workers+switch", "load"]
    body = []
    for r in rows:
        w, sw = r.get("workers_cpu_s"), r.get("switch_cpu_s")
        body.append([r["part"], r["variant"], r["code"], r["eps"] / 1e6,
                     f"{r['eps_min'] / 1e6:.3g}..{r['eps_max'] / 1e6:.3g}", r.get("median_s"),
                     r.get("x_bound"),
                     {True: "yes", False: "NO", None: "-"}[r.get("identical")],
                     None if r.get("max_rel_err") is None else f"{r['max_rel_err']:.2g}",
                     "-" if w is None or sw is None else f"{w:.3g}+{switch_cpu(r)[0].text()}",
                     "..".join(f"{x:g}" for x in r["load"])])
    return header, body


def plot(ts: list[Target], path: Path) -> bool:
    """Each target's measured value over its threshold (>= 1: met), log scale."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    got = [t for t in ts if t.value is not None and t.value > 0]
    if not got:
        return False
    score = [t.value / t.limit if t.kind == "min" else t.limit / t.value for t in got]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(got) + 1.2))
    y = range(len(got))
    ax.barh(list(y), score, color=["tab:green" if s >= 1 else "tab:red" for s in score])
    ax.axvline(1.0, color="k", lw=1)
    ax.set_yticks(list(y), [f"{t.name} ({threshold(t)})" for t in got], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("measured / target (>= 1: met)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--baseline", default=BASELINE_REV,
                    help="git revision of the code to compare with (default: %(default).12s)")
    ap.add_argument("--no-baseline", action="store_true", help="this code only")
    ap.add_argument("--quick", action="store_true", help="smoke run (also BENCH_QUICK=1)")
    ap.add_argument("--no-root", action="store_true",
                    help="no Mininet, no BMv2: pps alone, in process")
    ap.add_argument("--elements", type=int, help="float32 per worker (default 2^20)")
    ap.add_argument("--reps", type=int, help="timed calls or runs per row (default 3)")
    ap.add_argument("--fast-bw", type=float, default=1000.0, help="switch-bound, Mbit/s")
    ap.add_argument("--link-bw", type=float, default=50.0, help="link-bound star, Mbit/s")
    ap.add_argument("--pps-packets", type=int, help="contributions per pps run (default 4000)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds without progress before a worker gives up")
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds per row at most")
    ap.add_argument("--keep-baseline", action="store_true",
                    help="keep the baseline's worktree in /tmp for the next run")
    ap.add_argument("--wide", action="store_true",
                    help="also the wide profile (star, link, fat, pps rows; this code only)")
    ap.add_argument("--json", type=Path, default=OUT / "speed_targets.json")
    ap.add_argument("--label", default="new", help=argparse.SUPPRESS)
    ap.add_argument("--rows-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    q = q or args.quick
    args.elements = args.elements or (16384 if q else 1 << 20)
    args.reps = args.reps or (1 if q else 3)
    args.pps_packets = args.pps_packets or (400 if q else 4000)
    if args.elements < 1 or args.reps < 1 or args.pps_packets < 4:
        raise SystemExit("--elements and --reps must be >= 1, --pps-packets >= 4")
    args.workdir = args.json.parent / "speed_targets"
    args.workdir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        args.no_root = True
    parts = [p for p in PARTS if p in args.parts]
    skipped = {}
    if args.no_root:
        skipped = {p: "needs root and Mininet" for p in parts if p in MININET_PARTS}
    else:
        import emu
        why = emu.why_not_runnable()
        if why:
            skipped = {p: why for p in parts if p in MININET_PARTS}
    parts = [p for p in parts if p not in skipped]
    for p, why in skipped.items():
        say(f"{p}: not run ({why})")
    baseline = None if args.no_baseline else args.baseline
    say(f"speed targets: parts {', '.join(parts) or '-'}; {args.elements} elements, "
        f"{args.reps} reps; baseline {baseline or 'none'}; load {load_avg()}")
    tree = baseline_tree(baseline) if baseline and set(parts) - {"link"} else None
    if tree:
        say(f"baseline code: {tree}")
    start = machine()
    rows = []
    try:
        for part in parts:
            if part == "star":
                rows += part_star(args, "star", args.fast_bw, STAR_VARIANTS)
            elif part == "link":
                rows += part_star(args, "link", args.link_bw, STAR_VARIANTS[:1])
            elif part == "fat":
                rows += part_fat(args)
            else:
                rows += part_pps(args)
            if part in ("star", "link") and args.wide and args.label == "new":
                bw = args.fast_bw if part == "star" else args.link_bw
                rows += part_star(args, part, bw, STAR_VARIANTS[:1], "wide")
            if part == "pps" and args.wide and args.label == "new":
                rows += part_pps(args, "wide")
            if part == "fat" and args.wide and args.label == "new":
                rows += part_fat(args, "wide")
            if tree and part != "link":
                try:
                    rows += run_baseline(args, tree, part)
                except RuntimeError as e:      # the old code could not run it: say so, go on
                    skipped[f"{part} on the baseline"] = str(e)
                    say(f"{part}: {e}; its ratios to the baseline are not measured")
    finally:
        if tree and not args.keep_baseline:
            remove_tree(tree)
    if args.rows_only:
        save(args.json, {"rows": rows})
        return 0
    ts = targets(rows, args)
    header, body = row_table(rows)
    print()
    print(table(header, body))
    soft = next((r for r in rows if r["variant"] == "softswitch" and r["code"] == "new"), None)
    bmv2 = [r for r in rows if r["variant"] == "BMv2"]
    to_bmv2 = None
    if soft and bmv2:
        to_bmv2 = soft["eps"] / median([x for r in bmv2 for x in r["eps_calls"]])
        print(f"\npps: softswitch / BMv2 simple_switch_grpc, elements/s: {to_bmv2:.2f}x")
    soft_w = next((r for r in rows if r["variant"] == "softswitch, wide profile"), None)
    bmv2_w = next((r for r in rows if r["variant"] == "BMv2, wide profile"), None)
    if soft_w and bmv2_w:
        print(f"pps, wide profile: softswitch / BMv2 simple_switch_grpc, elements/s: "
              f"{soft_w['eps'] / bmv2_w['eps']:.2f}x")
    print()
    theader = ["verdict", "target", "measured", "threshold"]
    tbody = [[verdict(t), t.name, measured(t), threshold(t)] for t in ts]
    print(table(theader, tbody))
    bad = [f"{r['part']} {r['variant']} ({r['code']})" for r in rows
           if r.get("identical") is False or r.get("exact") is False]
    print("\noutputs: " + ("every rank's result the same, exact paths exact, softswitch "
                           "equal to BMv2 where compared" if not bad else
                           "CHECK FAILED: " + ", ".join(bad)))
    png = args.json.with_suffix(".png")
    if plot(ts, png):
        print(f"plot: {png}")
    save(args.json, {
        "machine": start, "load_after": load_avg(), "baseline": baseline,
        "code": code_diff(baseline),
        "command": " ".join(["bench/speed_targets.py", *(argv if argv is not None
                                                           else sys.argv[1:])]),
        "elements": args.elements, "reps": args.reps, "fast_bw": args.fast_bw,
        "link_bw": args.link_bw, "pps_packets": args.pps_packets, "skipped": skipped,
        "rows": rows, "soft_to_bmv2": to_bmv2, "outputs_ok": not bad,
        "table": markdown(header, body),
        "targets": [{**t.as_dict(), "verdict": verdict(t), "threshold": threshold(t),
                     "measured": measured(t)} for t in ts],
        "targets_table": markdown(theader, tbody)})
    print(f"results: {args.json}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
