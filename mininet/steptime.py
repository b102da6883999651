#!/usr/bin/env python3
"""Seconds per step from a run's own figures, at any link rate, switch rate and compute time.

    python mininet/steptime.py figures results/<run>                 # what a run measured
    python mininet/steptime.py predict results/<run> --bw 10 100     # that job at other rates
        [--slow results/<run at a slower link>]                      # its CPU growth too
    python mininet/steptime.py project --params 25.6e6 --compute-ms 100 --gbit 10 25 100 \\
        --workers 8                                                  # a model of your own

The model (docs/STEPTIME.md), per step:

    step = (compute - overlap) + max(comm, overlap)                       a worker
    comm = max(link, switch, host, window) + fill
      link   = bytes on the busiest link direction * 8 / rate
      switch = packets into the switches * switch CPU seconds per packet (or / its rate)
      host   = one worker's CPU for communication (its CPU per step less compute)
      window = rounds of the window (chunks / slots) * round trip
      fill   = one packet up and one down the busiest link (the pipeline's start)
    step = join(step, machine)                                            the emulation only
      machine = CPU of every worker and switch per step / the cores free for the job
      join(a, b) = (a^3 + b^3)^(1/3): the larger, and longer where the two are near
    with a slower run of the job (--slow): the CPU figures grow towards its own as the link
      slows, by ((t - t_fast) / (t_slow - t_fast))^0.5 of the gap, t the link's time per step

Every figure comes from the run (report.json's jobs[i]["bound"] and the workers' per-step
logs): `figures()` reads them, `predict()` applies them at another rate. The machine term
exists because all hosts and switches of an emulation share this machine's cores; on a
cluster each worker has its own, and `project` leaves it out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

TERMS = ("link", "switch", "host", "window")


@dataclass(frozen=True)
class Figures:
    """What one run measured, per step (after the first, which builds buffers)."""

    method: str
    workers: int
    bw_mbit: float              # the rate the run's links had
    step_s: float               # mean seconds per step: what a prediction is checked with
    compute_s: float            # a worker's forward, backward and optimizer (median)
    overlap_s: float            # of it, what ran while the reduction went on
    busiest_bytes: float        # on the busiest link direction
    busiest_packets: float | None
    switch_packets: float | None    # into the switches
    switch_cpu_s: float         # all switches' CPU
    host_cpu_s: float           # one worker's CPU (median over workers)
    hosts_cpu_s: float          # every worker's (and a parameter server's) CPU
    chunks: float | None        # slots used per step (None: no windowed protocol, Gloo)
    window: int | None
    rtt_s: float | None         # the smallest mean round trip of a step
    retransmissions: float      # all workers
    cores: int
    other_cores: float          # busy with processes outside the job
    kernel_cpu_s: float = 0.0   # the kernel's interrupt work (the job's packets, mostly)

    @property
    def switch_cost_s(self) -> float | None:
        """Switch CPU seconds per packet in."""
        return self.switch_cpu_s / self.switch_packets if self.switch_packets else None

    @property
    def host_comm_s(self) -> float:
        """A worker's CPU per step outside compute: sending, receiving, coding, waiting."""
        return max(0.0, self.host_cpu_s - self.compute_s)


def _median(values, default=None):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else default


def figures(run: Path, job: int = 1) -> Figures:
    """A run folder's figures (mininet/run.py's report.json and workers/*.json)."""
    report = json.loads((run / "report.json").read_text())
    summary = next(j for j in report["jobs"] if j["job"] == job)
    bound = summary.get("bound")
    if not bound or not bound.get("host_cores"):
        raise ValueError(f"{run}: no bound figures with the workers' CPU in report.json "
                         "(a run of an older mininet/run.py, or one that failed)")
    workers = [json.loads(p.read_text()) for p in sorted((run / "workers").glob("*.json"))]
    workers = [w for w in workers if w.get("job", 1) == job and w.get("steps")]
    lead = min(workers, key=lambda w: w.get("rank", 0))
    later = [s for w in workers for s in w["steps"][1:]]
    per = bound["seconds"] / max(1, bound["steps"])        # seconds per step -> per step
    # the mean, as every other per-step figure: bound's window over the steps after the first
    step_s = per
    compute = _median(s["compute_seconds"] for s in later)
    comm = _median(s.get("comm_seconds") for s in later)
    # overlap: compute and reduction together took longer than the step
    overlap = 0.0 if comm is None else min(compute, comm, max(
        0.0, _median(s["compute_seconds"] + (s.get("comm_seconds") or 0)
                     - s["step_seconds"] for s in later)))
    stats = [s.get("comm") or {} for s in later]
    chunks = _median(c.get("chunks") for c in stats)
    rtts = [c["rtt_seconds"] / c["rtt_samples"] for c in stats if c.get("rtt_samples")]
    retx = _median(sum((w["steps"][i].get("comm") or {}).get("retransmissions", 0)
                       for w in workers if len(w["steps"]) > i)
                   for i in range(1, len(lead["steps"])))
    hosts = bound["host_cores"]
    member = [c for h, c in hosts.items() if h in {w["host"] for w in workers}] or \
        list(hosts.values())
    busiest = bound["busiest_link"]
    method = (f"{report.get('framework', 'numpy')} {report['aggregation']} "
              f"{report['encoding']}/{report['result_encoding']}")
    return Figures(
        method=method, workers=len(workers), bw_mbit=report["bw_mbit"], step_s=step_s,
        compute_s=compute, overlap_s=overlap,
        busiest_bytes=busiest["bytes"] / bound["steps"],
        busiest_packets=(busiest.get("packets") or 0) / bound["steps"] or None,
        switch_packets=(bound.get("switch_packets") or 0) / bound["steps"] or None,
        switch_cpu_s=sum(bound["switch_cores"].values()) * per,
        host_cpu_s=statistics.median(member) * per, hosts_cpu_s=sum(hosts.values()) * per,
        kernel_cpu_s=(bound.get("kernel_cores") or 0.0) * per,
        chunks=chunks, window=lead.get("window") if chunks else None,
        rtt_s=min(rtts) if rtts else None, retransmissions=retx or 0.0,
        cores=bound["cores"], other_cores=bound.get("other_cores") or 0.0)


@dataclass(frozen=True)
class Prediction:
    step_s: float
    terms: dict                 # seconds of each term, and "bound": the one that set it

    @property
    def steps_per_s(self) -> float:
        return 1.0 / self.step_s


def link_seconds(f: Figures, bw_mbit: float) -> float:
    """The busiest link direction's bytes per step at bw_mbit: how far apart a step's
    packets arrive when the link paces them."""
    return f.busiest_bytes * 8 / (bw_mbit * 1e6)


def spread(f: Figures, slow: Figures, bw_mbit: float) -> Figures:
    """f's figures with the CPU per step of the workers' communication, the switches and
    the kernel taken between f's and slow's (the same job at a slower link) by how far
    apart the link spreads a step's packets at bw_mbit.

    A process handles what arrived since it last woke in one pass. Packets close together
    share a wake-up; a slower link spreads them until each wakes its receiver (a worker, the
    switch, the kernel's softirq), and each wake costs CPU of its own. The runs show the CPU
    per step growing concavely with the link's time per step, by about its square root
    (WAKE_P): a numpy worker's CPU per packet 46, 54, 67, 85, 136 and 169 us at 1000 down to
    1 Mbit/s (docs/STEPTIME.md)."""
    t0, t1 = link_seconds(f, f.bw_mbit), link_seconds(slow, slow.bw_mbit)
    if not t1 > t0:
        return f
    x = min(1.0, max(0.0, (link_seconds(f, bw_mbit) - t0) / (t1 - t0))) ** WAKE_P

    def between(a: float, b: float) -> float:
        return a + (b - a) * x if b > a else a      # a faster link never costs more

    def comm(g: Figures) -> float:                  # all workers' CPU outside compute
        return g.hosts_cpu_s - g.workers * g.compute_s

    host = between(f.host_comm_s, slow.host_comm_s)
    return replace(f, host_cpu_s=f.compute_s + host,
                   hosts_cpu_s=f.workers * f.compute_s + between(comm(f), comm(slow)),
                   switch_cpu_s=between(f.switch_cpu_s, slow.switch_cpu_s),
                   kernel_cpu_s=between(f.kernel_cpu_s, slow.kernel_cpu_s))


# How the CPU per step grows between a fast and a slow run's, against the link's time per
# step: (t - t_fast) / (t_slow - t_fast) to this power. 0.5 was chosen on the numpy runs of
# the first validation of 2026-12-04 (median error 15 % -> 6 %, largest 42 % -> 16 %; 1: 13
# and 34 %) and checked on a second one, made after: median 6.3 %, largest 23.0 %.
WAKE_P = 0.5


def predict(f: Figures, bw_mbit: float, compute_s: float | None = None,
            switch_pps: float | None = None, free_cores: float | None = None,
            machine: bool = True, efficiency: float = 1.0,
            slow: Figures | None = None) -> Prediction:
    """Seconds per step of the job `f` measured, at link rate bw_mbit; compute_s replaces its
    compute time, switch_pps its switch's measured CPU per packet (a line-rate switch:
    float("inf")); free_cores the cores it had (default: the run's own cores less the other
    load it met); machine=False leaves the emulation's shared-CPU term out; efficiency is the
    share of the link's rate the protocol gets where the link binds (link_efficiency());
    slow, the same job measured at a slower link: the CPU per step grows towards its figures
    as the link slows (spread())."""
    if slow is not None:
        f = spread(f, slow, bw_mbit)
    rate = bw_mbit * 1e6
    compute = f.compute_s if compute_s is None else compute_s
    overlap = min(f.overlap_s, compute)
    per_packet = f.busiest_bytes / f.busiest_packets if f.busiest_packets else 0.0
    if switch_pps is not None:
        switch = (f.switch_packets or 0.0) / switch_pps
    else:
        switch = f.switch_cpu_s
    window = (math.ceil(f.chunks / f.window) * f.rtt_s
              if f.chunks and f.window and f.rtt_s else 0.0)
    terms = {"link": f.busiest_bytes * 8 / (rate * efficiency), "switch": switch,
             "host": f.host_comm_s,
             "window": window, "fill": 2 * per_packet * 8 / rate}
    comm = max(terms[t] for t in TERMS) + terms["fill"]
    step = compute - overlap + max(comm, overlap)
    bound = max(TERMS, key=lambda t: terms[t])
    if machine:
        cores = free_cores if free_cores is not None else max(1.0, f.cores - f.other_cores)
        # every process's CPU per step; compute scaled to the compute asked for
        cpu = (f.hosts_cpu_s + f.workers * (compute - f.compute_s) + f.switch_cpu_s
               + f.kernel_cpu_s)
        terms["machine"] = cpu / cores
        if terms["machine"] > step:
            bound = "machine"
        step = join(step, terms["machine"])
    terms["compute"] = compute - overlap
    terms["bound"] = bound
    return Prediction(step, terms)


# How the emulation's shared CPU and the rest of a step combine. Where one is far ahead it
# alone sets the step; where they are near each other, the step is longer than either:
# the workers' CPU work and the links' transfers wait on each other on shared cores (the
# recorded runs of int32 INA at 3 Mbit/s and the parameter server at 30 took nearer the
# sum of the two than the larger). A smooth maximum, (a^p + b^p)^(1/p), with p = 3
# chosen on the runs in tests/data/steptime_runs.json (median error 13.5 % -> 8.2 %,
# largest 42.8 % -> 26.5 % there) and checked on runs it was not chosen on
# (docs/STEPTIME.md); it adds at most 26 % (2^(1/3)) where the two are equal.
JOIN_P = 3.0


def join(a: float, b: float, p: float = JOIN_P) -> float:
    """The smooth maximum of two times that share this machine's cores."""
    hi = max(a, b)
    if hi <= 0:
        return 0.0
    return hi * ((a / hi) ** p + (b / hi) ** p) ** (1 / p)


def link_efficiency(f: Figures) -> float:
    """The share of its link's rate a link-bound run got: the link's time at full rate over
    what the step spent outside compute (1 where the link did not bind the run: nothing to
    learn from it). A windowed UDP protocol comes near 1; TCP's ring less (slow start, its
    phases waiting on each other)."""
    p = predict(f, f.bw_mbit, machine=False)
    if p.terms["bound"] != "link":
        return 1.0
    comm = f.step_s - p.terms["compute"] - p.terms["fill"]
    full = f.busiest_bytes * 8 / (f.bw_mbit * 1e6)
    return min(1.0, full / comm) if comm > 0 else 1.0


def validate(runs: list[dict]) -> list[dict]:
    """Per method and switch, the fastest run gives the CPU figures and the slowest the link
    efficiency and the CPU it grows to as the link slows (spread()); on BMv2, with two rates
    only, the efficiency is softswitch's slowest of the method (it is the protocol's and the
    link's, not the switch's) and the CPU stays the fastest run's. Every other run is
    predicted from its link rate and the cores other work left it."""
    rows = []
    effs = {}
    for switch in ("soft", "bmv2"):
        for key in dict.fromkeys(r["method"] for r in runs if r["switch"] == switch):
            mine = sorted((r for r in runs if (r["switch"], r["method"]) == (switch, key)),
                          key=lambda r: -r["bw"])
            fast = Figures(**mine[0]["figures"])
            slow = mine[-1] if len(mine) > 2 or key not in effs else None
            slow_f = Figures(**slow["figures"]) if slow is not None else None
            if slow_f is not None:
                effs[key] = link_efficiency(slow_f)
            eff = effs.get(key, 1.0)
            grown = slow_f if len(mine) > 2 else None
            for r in mine:
                f = Figures(**r["figures"])
                p = predict(fast, r["bw"], efficiency=eff, slow=grown,
                            free_cores=max(1.0, f.cores - f.other_cores))
                measured = 1 / f.step_s
                role = ("calibration: CPU" if r is mine[0] else
                        "calibration: link" if r is slow else None)
                rows.append({"switch": switch, "method": key, "bw": r["bw"], "role": role,
                             "calibration": role is not None, "measured": measured,
                             "predicted": p.steps_per_s, "efficiency": eff,
                             "error": abs(p.steps_per_s - measured) / measured,
                             "predicted_bound": p.terms["bound"],
                             "terms_ms": {k: v * 1e3 for k, v in p.terms.items()
                                          if k != "bound"},
                             "measured_bound": r["bound"]})
    return rows


# ---------------------------------------------------------------- projections

# Bytes per element on a worker's link (up, down), as measured, headers and priming rounds
# included (docs/results.md "Bytes per gradient element" and "Four bits per element"): C_nat
# 1.35 (168 elements per packet) or 1.04 (1456, the wide profile), int32 4.35, NAT4 and UQ4
# half a byte up and a CNAT8 or SUM8 byte down; the ring's are its own, 2(n-1)/n x 4 plus TCP's.
BYTES = {"cnat": (1.35, 1.35), "cnat-wide": (1.04, 1.04), "int32": (4.35, 4.35),
         "nat4": (0.847, 1.35), "uq4": (0.848, 1.35)}
ELEMS = {"cnat": 168, "cnat-wide": 1456, "int32": 168, "nat4": 168, "uq4": 168}
RING_OVERHEAD = 1514 / 1448     # a full TCP frame (timestamps on) over its payload
# An extra pass's latency: a trip through a pipe and a loopback port. No published figure
# was found; 1 us is an assumption above the sub-microsecond port-to-port latencies switch
# vendors quote, so that a projection does not hide what the passes cost a window.
PASS_S = 1e-6


@dataclass(frozen=True)
class Projection:
    method: str
    gbit: float
    step_s: float
    comm_s: float
    bound: str
    bytes_per_step: float
    slots_to_fill: int | None
    switch: str = "line-rate"
    elements_per_packet: int | None = None  # None: the ring
    variant: str | None = None      # the compiled Tofino variant that carried it
    passes_per_packet: int | None = None    # passes a contribution takes (None: the ring)
    harvest_passes: int | None = None       # extra passes of the packet completing a use
    pipes: int | None = None        # pipes the passes spread over (None: no pipes modelled)


def _switch_wire():
    root = str(Path(__file__).resolve().parents[1])      # controller/ is the checkout's
    if root not in sys.path:
        sys.path.insert(0, root)
    from controller import switch_wire
    return switch_wire


def _switch_wires(switch: str, method: str) -> list:
    return _switch_wire().wires(switch, method)


def no_packets(switch: str, method: str) -> str | None:
    """Why `method` has no packets on `switch` to project (None: it has)."""
    if method == "ring" or (switch == "line-rate" and method in BYTES):
        return None
    return _switch_wire().no_packets(switch, method)


def pass_terms(w, workers: int, params: float) -> tuple[float, float]:
    """Seconds per step the pipes and their loopback ports take for `w`'s packets
    (docs/STEPTIME.md "Pipes and passes"): the busiest pipe's passes per use times the uses
    (packets a worker sends per step) over a pipe's packet rate; and the bytes that come
    back into a pipe through its loopback ports, every pass a full packet of the busier
    direction, over their rate, for the pipe where that takes longest."""
    if w.target is None:
        return 0.0, 0.0
    spec = _switch_wire().PIPES[w.target]
    ingress, loop = w.walk(workers)
    pipe = math.ceil(params / w.elems) * max(ingress) / spec.pps
    # as the link term: the step's bytes, so that one packet a use at a link's rate costs
    # exactly the link's time
    loopback = max(params * (n * w.busiest) * 8 / (spec.loopback_gbit(k) * 1e9)
                   for k, n in enumerate(loop))
    return pipe, loopback


def project(params: float, compute_s: float, gbit: float, workers: int, method: str,
            rtt_s: float = 10e-6, window: int | None = None, overlap: float = 0.0,
            switch_pps: float | None = None, switch: str = "line-rate",
            pass_s: float = PASS_S) -> Projection:
    """Seconds per step of a model of `params` parameters on a cluster: a worker per machine,
    one switch at line rate (or switch_pps packets/s), links of `gbit`; `window` slots
    (default: enough to fill rate x round trip); `overlap`: the share of compute that hides
    communication (0: none). `switch`: line-rate (the v1model profile's packets, as this
    testbed measured them) or tofino1 / tofino2 (the elements per packet, passes and slot
    pool as compiled for a Tofino, controller/switch_wire.py, with what the passes ask of
    its pipes and loopback ports); where several compiled variants carry the method, the
    fastest."""
    rate = gbit * 1e9
    hidden = overlap * compute_s
    if method == "ring":
        per_elem = 2 * (workers - 1) / workers * 4 * RING_OVERHEAD
        link = params * per_elem * 8 / rate
        # 2(n-1) phases, each a one-way latency before its data flows
        comm = link + 2 * (workers - 1) * rtt_s / 2
        step = compute_s - hidden + max(comm, hidden)
        return Projection(method, gbit, step, comm, "link", params * per_elem, None, switch)
    if switch == "line-rate" and method in BYTES:
        sw = _switch_wire()
        ws = [sw.Wire(switch, method, "default", ELEMS[method], *BYTES[method], 0, None,
                      elements_per_pass=ELEMS[method])]
        variant = False                                     # no compiled variant to name
    else:
        _switch_wire().fit(switch, workers, gbit)
        ws = _switch_wires(switch, method)
        variant = True
    best = None
    for w in ws:
        per_elem, elems = w.busiest, w.elems
        packets = math.ceil(params / elems)
        link = params * per_elem * 8 / rate
        # A slot's round trip: the link's, and each extra pass its result takes through a
        # pipe and a loopback port (docs/STEPTIME.md "Pipes and passes").
        rtt = rtt_s + w.extra_passes * pass_s if w.target else rtt_s
        slots = math.ceil(rate * rtt / 8 / w.packet_bytes)     # bandwidth x delay
        win = window or slots
        if w.pool:              # a compiled program's slot pool caps the window
            win = min(win, w.pool)
        pipe, loopback = pass_terms(w, workers, params)
        # a tie goes to the earlier term: the link before the passes that match it
        terms = {"link": link, "window": packets / win * rtt,
                 "switch": workers * packets / switch_pps if switch_pps else 0.0,
                 "pipe": pipe, "loopback": loopback}
        bound = max(terms, key=terms.get)
        comm = terms[bound] + rtt                           # the last result's round trip
        step = compute_s - hidden + max(comm, hidden)
        p = Projection(method, gbit, step, comm, bound, params * per_elem, slots, switch,
                       elems, w.variant if variant else None, w.passes, w.harvest,
                       w.pipes if w.target else None)
        if best is None or p.step_s < best.step_s:
            best = p
    return best


# ---------------------------------------------------------------- command line


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or math.isinf(v):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number above 0")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 2:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 2")
    return v


def _share(text: str) -> float:
    v = float(text) if text.replace(".", "", 1).isdigit() else -1.0
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"{text}: must be within [0, 1]")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mininet/steptime.py",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("figures", help="a run's figures and per-packet costs, as JSON")
    f.add_argument("run", type=Path, help="a mininet/run.py output folder")
    f.add_argument("--job", type=int, default=1, help="which job (default 1)")
    p = sub.add_parser("predict", help="a run's job at other link rates (and compute time)")
    p.add_argument("run", type=Path, help="a mininet/run.py output folder")
    p.add_argument("--job", type=int, default=1, help="which job (default 1)")
    p.add_argument("--bw", type=_positive, nargs="+", required=True,
                   help="link rates to predict at, Mbit/s")
    p.add_argument("--compute-ms", type=_positive,
                   help="a worker's compute per step, ms (default: the run's)")
    p.add_argument("--switch-pps", type=_positive,
                   help="the switch's packets/s (default: the run's CPU per packet)")
    p.add_argument("--cluster", action="store_true",
                   help="a worker per machine: leave out this machine's shared-CPU term")
    p.add_argument("--slow", type=Path, metavar="RUN",
                   help="the same job run at a slower link: the CPU per step grows towards "
                        "its figures as the link slows (default: the run's CPU at every rate)")
    j = sub.add_parser("project", help="seconds per step and time to accuracy of a model of "
                                       "your own on a cluster (a projection, not a run)")
    j.add_argument("--params", type=_positive, required=True, help="model parameters")
    j.add_argument("--compute-ms", type=_positive, required=True,
                   help="a worker's compute per step (forward, backward, optimizer), ms")
    j.add_argument("--gbit", type=_positive, nargs="+", default=[10.0, 25.0, 100.0],
                   help="link rates, Gbit/s (default 10 25 100)")
    j.add_argument("--workers", type=_count, default=8, help="workers (default 8)")
    j.add_argument("--methods", nargs="+", default=["cnat", "int32", "ring"],
                   choices=[*BYTES, "ring"],
                   help="cnat (C_nat INA, 1.35 B/element), cnat-wide (1.04), int32 (int32 "
                        "INA), nat4 and uq4 (the 4-bit INA codecs: 0.85 up, 1.35 down), ring "
                        "(host ring allreduce); default cnat int32 ring")
    j.add_argument("--pass-us", type=float, default=PASS_S * 1e6,
                   help="latency of one extra pass through a Tofino pipe and a loopback "
                        f"port, us (default {PASS_S * 1e6:g}: an assumption, "
                        "docs/STEPTIME.md)")
    j.add_argument("--rtt-us", type=_positive, default=10.0,
                   help="round trip worker-switch-worker, us (default 10)")
    j.add_argument("--window", type=int,
                   help="slots per job (default: enough to fill rate x round trip)")
    j.add_argument("--overlap", type=_share, default=0.0,
                   help="share of compute that hides communication, 0..1 (default 0)")
    j.add_argument("--steps", type=_positive,
                   help="steps to accuracy (the same for every method): adds time to accuracy")
    j.add_argument("--switch", choices=("line-rate", "tofino1", "tofino2"), default="line-rate",
                   help="the switch's packets: line-rate (the v1model profile, 168 elements "
                        "per packet, the default) or a Tofino's elements per packet and "
                        "passes as its compiler reported them (p4src/build/tofino/), with "
                        "what the passes ask of its pipes")
    j.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return ap


def pipes_line(switch: str) -> str:
    """The pipe rate and loopback ports a Tofino projection assumes (switch_wire.PIPES)."""
    sw = _switch_wire()
    spec = sw.PIPES[sw.SWITCHES[switch]]
    top = spec.port_gbit
    ports = ", ".join(f"{n} x {g:g}" for g, n in sorted(spec.ports.items(), reverse=True))
    return (f"{spec.name}: {spec.count} pipes of {spec.pps / 1e9:g}e9 passes/s each; the "
            f"workers' ports in pipe 0 ({ports} Gbit/s); passes loop back into pipe 0 "
            f"through its recirculation port ({spec.recirc_gbit:g} Gbit/s, assumed), into "
            f"pipes 1-{spec.count - 1} through their {spec.ports[top]} x {top:g} Gbit/s "
            "front-panel ports in loopback and theirs (SwitchML's layout)")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("figures", "predict"):
        try:
            f = figures(args.run, args.job)
        except (OSError, ValueError, KeyError, StopIteration) as e:
            print(f"error: {args.run}: cannot read the run's figures: {e}", file=sys.stderr)
            return 2
        slow = None
        if args.command == "predict" and args.slow is not None:
            try:
                slow = figures(args.slow, args.job)
            except (OSError, ValueError, KeyError, StopIteration) as e:
                print(f"error: {args.slow}: cannot read the run's figures: {e}",
                      file=sys.stderr)
                return 2
            if slow.method != f.method or not slow.bw_mbit < f.bw_mbit:
                print(f"error: --slow {args.slow}: must be the same job ({f.method}) at a "
                      f"slower link than {f.bw_mbit:g} Mbit/s (it is {slow.method} at "
                      f"{slow.bw_mbit:g})", file=sys.stderr)
                return 2
        if args.command == "figures":
            print(json.dumps({**asdict(f), "switch_cost_s": f.switch_cost_s,
                              "host_comm_s": f.host_comm_s}, indent=1))
            return 0
        print(f"{f.method}, {f.workers} workers, measured at {f.bw_mbit:g} Mbit/s: "
              f"{f.step_s * 1e3:.1f} ms/step")
        for bw in args.bw:
            p = predict(f, bw, None if args.compute_ms is None else args.compute_ms / 1e3,
                        args.switch_pps, machine=not args.cluster, slow=slow)
            print(f"  {bw:>8g} Mbit/s: {p.step_s * 1e3:8.1f} ms/step, {p.steps_per_s:7.2f} "
                  f"steps/s, bound by {p.terms['bound']}")
        return 0
    if args.window is not None and args.window < 1:
        print(f"error: --window {args.window}: must be at least 1", file=sys.stderr)
        return 2
    if not 0 <= args.pass_us < math.inf:
        print(f"error: --pass-us {args.pass_us:g}: must be a finite number of us, 0 or more",
              file=sys.stderr)
        return 2
    missing = {m: why for m in args.methods if (why := no_packets(args.switch, m))}
    methods = [m for m in args.methods if m not in missing]
    if not methods:
        print("error: " + "; ".join(f"method {m!r} has no packets on the {args.switch} "
                                    f"switch: {why}" for m, why in missing.items()),
              file=sys.stderr)
        return 2
    try:
        rows = [project(args.params, args.compute_ms / 1e3, g, args.workers, m,
                        args.rtt_us * 1e-6, args.window, args.overlap, switch=args.switch,
                        pass_s=args.pass_us * 1e-6)
                for g in args.gbit for m in methods]
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(r) | ({"time_to_accuracy_s": r.step_s * args.steps}
                                       if args.steps else {}) for r in rows], indent=1))
        return 0
    print(f"PROJECTION (not a measurement): {args.params:.4g} parameters, {args.workers} "
          f"workers, compute {args.compute_ms:g} ms/step, overlap {args.overlap:g}, round "
          f"trip {args.rtt_us:g} us, " + ("line-rate switch" if args.switch == "line-rate"
                                         else f"{args.switch} at its compiled elements per "
                                              "pass x passes per packet, the passes on "
                                              f"its pipes, {args.pass_us:g} us an extra pass"))
    if args.switch != "line-rate":
        print("  " + pipes_line(args.switch))
    for m, why in missing.items():
        print(f"  (left out) method {m!r} has no packets on the {args.switch} switch: {why}")
    for m in sorted({r.method for r in rows if r.variant}):
        for w in _switch_wires(args.switch, m):
            print(f"  {m}: {w.variant}, {w.elems} elements per packet ({w.passes} pass(es) "
                  f"of {w.elements_per_pass}, over {w.pipes} pipe(s)), {w.harvest} harvest "
                  f"pass(es), {w.up:.2f} B/element up, {w.down:.2f} down, a window of at "
                  f"most {w.pool} slots")
    head = f"{'Gbit/s':>7}  {'method':<10} {'ms/step':>9} {'comm ms':>9} {'bound':<8} " \
           f"{'MB/step':>8} {'slots':>6}" + ("  variant     " if args.switch != "line-rate"
                                             else "") + \
        ("  time to accuracy" if args.steps else "")
    print(head)
    base = {g: next((r.step_s for r in rows if r.gbit == g and r.method == "ring"), None)
            for g in args.gbit}
    for r in rows:
        tta = f"  {r.step_s * args.steps / 3600:15.1f} h" if args.steps else ""
        vs = f"  ({base[r.gbit] / r.step_s:.2f}x ring)" if base[r.gbit] and r.method != "ring" \
            else ""
        print(f"{r.gbit:>7g}  {r.method:<10} {r.step_s * 1e3:9.2f} {r.comm_s * 1e3:9.2f} "
              f"{r.bound:<8} {r.bytes_per_step / 1e6:8.1f} {r.slots_to_fill or '-':>6}"
              + (f"  {r.variant or '-':<12}" if args.switch != "line-rate" else "")
              + f"{tta}{vs}")
    if args.steps:
        print(f"time to accuracy = {args.steps:g} steps x s/step: equal steps to accuracy "
              "for every method is an assumption (docs/STEPTIME.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
