#!/usr/bin/env python3
"""Packets/s of the embedded softswitch on the aggregation program, against BMv2, like for like.

Both targets run as switch processes behind the same kind of ports (harness.netns: veth pairs
in a network namespace; simple_switch_grpc and `python -m softswitch` started with the same
arguments), are programmed by the controller over P4Runtime, and get the same packets: W
workers on ports 1..W contribute full CNAT8 chunks (the
profile's elements per packet, 168 or 1456 codes, seeded) to S slots of one job,
round after round (round r: slot r mod S, the version alternating per pass), each worker's
frame from its own raw socket, opened once, by one sender thread that keeps R rounds in
flight (a round is in flight until every worker has its result). A receiver thread counts the
results on the hosts' sockets and keeps them. packets/s is contributions sent over the time
from the first send to the last result received. Each target runs --runs times, interleaved
(BMv2, softswitch, BMv2, ...), the median is reported and the ratio printed. The results are
compared per port and in order (run i of one target against run i of the other) and must be
equal, but for the switch's random rounding when it re-compresses a sum to CNAT8 (a code may
be one step from the other target's); --no-check skips that.

Needs root (namespaces); without it, or without BMv2, softswitch alone runs in process
(--no-bmv2 too), with no ratio.

    sudo .venv/bin/python bench/softswitch_pps.py [--workers 4] [--slots 64] [--packets 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from common import Reading, cpu_of, cpu_self, median, ratio

from controller.topology import JobSpec, star
from worker import codec, wire
from worker.frames import Framer

JOB = 1


# The contributions a run can stream: the job's results for each (JobSpec encoding).
ENCODINGS = {"cnat8": "cnat8", "uq4": "sum8"}


def payloads(rng, workers: int, elems: int, encoding: str):
    """One round's payloads: CNAT8 codes (random signs and codes 0..20), or UQ4 integers
    0..15 packed two per byte (their sums, at most 15 per worker, stay exact as SUM8)."""
    if encoding == "uq4":
        return [row.tobytes() for row in codec.pack4(rng.integers(0, 16, (workers, elems)))]
    return list(rng.integers(0, 21, (workers, elems)).astype(np.uint8)
                | (rng.integers(0, 2, (workers, elems)).astype(np.uint8) << 7))


def stream(topo, hosts: list[str], slots: int, rounds: int, session: int, seed: int,
           elems: int = wire.ELEMS, encoding: str = "cnat8", job: int = JOB):
    """rounds x [(host, frame)]: every worker's contribution to the round's slot, in host
    order (the last one, from the last host, completes the slot)."""
    rng = np.random.default_rng(seed)
    framers = {h: Framer((topo.host(h).mac, topo.host(h).ip),
                         (topo.service_mac, topo.service_ip), elems=elems) for h in hosts}
    enc = wire.ENCODING_BY_NAME[encoding]
    out = []
    for r in range(rounds):
        slot, version = r % slots, (r // slots) % 2
        data = payloads(rng, len(hosts), elems, encoding)
        out.append([(h, framers[h].build(wire.MSG_CONTRIB, enc, job, session, slot,
                                         version, 120, 1, r, data[i]))
                    for i, h in enumerate(hosts)])
    return out


def cpu_now(fab) -> tuple[Reading, Reading]:
    """(this process's CPU seconds: the bench's sender and receiver, the switches')."""
    switch = Reading(0.0, 0.0)
    for p in fab.procs:
        switch += cpu_of(p.pid)[0]
    return cpu_self(), switch


def run(fab, hosts: list[str], rounds_of, window: int, slots: int, timeout: float):
    """Sends the rounds with at most `window` in flight, each once the round before it on its
    slot is answered, as workers do (the switch drops a slot's next use sent earlier as
    EARLY); (packets/s, results/s, outputs per host in arrival order, (bench, switch) CPU
    seconds of the run, its wall time)."""
    rounds = rounds_of(fab.session())
    socks = {fab.socks[h].fileno(): h for h in hosts}
    got = {h: [] for h in hosts}
    seen = [0] * len(rounds)
    answered = [threading.Event() for _ in rounds]
    done = threading.Semaphore(window)
    stop = threading.Event()
    last = [0.0]
    errors = []

    def receive() -> None:
        left = len(rounds) * len(hosts)
        while left and not stop.is_set():
            ready, _, _ = select.select(list(socks), [], [], 0.2)
            for fd in ready:
                host = socks[fd]
                while (frame := fab.recv(host, 0.0)) is not None:
                    if len(frame) < 58 or frame[42] != wire.MSG_RESULT:
                        errors.append(f"{host}: not a result: {frame[:64].hex()}")
                        continue
                    got[host].append(frame)
                    r = int.from_bytes(frame[54:58], "big")
                    seen[r] += 1
                    left -= 1
                    if seen[r] == len(hosts):
                        answered[r].set()
                        done.release()
                    last[0] = time.perf_counter()

    rx = threading.Thread(target=receive, daemon=True)
    rx.start()
    cpu0 = cpu_now(fab)
    t0 = time.perf_counter()
    for r, frames in enumerate(rounds):
        if not done.acquire(timeout=timeout):
            break
        if r >= slots and not answered[r - slots].wait(timeout):
            break
        for host, frame in frames:
            fab.socks[host].send(frame)
    rx.join(timeout)
    stop.set()
    cpu1 = cpu_now(fab)
    n = sum(len(v) for v in got.values())
    if errors or n != len(rounds) * len(hosts):
        raise SystemExit(f"{fab.name}: {n} of {len(rounds) * len(hosts)} results in "
                         f"{timeout:.0f} s; {errors[:3]}")
    dt = last[0] - t0
    wall = time.perf_counter() - t0
    cpu = tuple(b - a for a, b in zip(cpu0, cpu1, strict=True))
    return len(rounds) * len(hosts) / dt, n / dt, got, cpu, wall


def compare(a: dict, b: dict) -> int:
    """Results compared, every one equal byte for byte; exits on a difference."""
    frames = 0
    for host in a:
        if len(a[host]) != len(b[host]):
            raise SystemExit(f"{host}: {len(a[host])} results against {len(b[host])}")
        for i, (x, y) in enumerate(zip(a[host], b[host], strict=True)):
            if x != y:
                raise SystemExit(f"{host}, result {i} differs:\n{x.hex()}\n{y.hex()}")
            frames += 1
    return frames


def bmv2_build() -> list[str]:
    """What the installed simple_switch_grpc says of itself: version, compiler, the optional
    parts it was built with (the options its --help offers, the libraries it links)."""
    exe = shutil.which("simple_switch_grpc")
    out = []

    def cmd(*args) -> str:
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=30)
            return r.stdout + r.stderr
        except (OSError, subprocess.TimeoutExpired):
            return ""
    out.append(f"BMv2: {exe}, version {cmd(exe, '--version').strip() or '?'}")
    comment = re.findall(r"GCC: \(.*", cmd("readelf", "-p", ".comment", exe))
    if comment:
        out.append(f"BMv2 compiler (ELF .comment): {comment[0].strip()}")
    helptext = cmd(exe, "--help")
    libs = cmd("ldd", exe)
    parts = [name for name, there in (
        ("Thrift runtime (--thrift-port)", "--thrift-port" in helptext),
        ("nanomsg log socket (--nanolog)", "--nanolog" in helptext),
        ("debugger (--debugger)", "--debugger " in helptext),
        ("PI/P4Runtime (libpi)", "libpi.so" in libs)) if there]
    out.append("BMv2 built with: " + ", ".join(parts))
    # Per-packet log messages are compiled out with --disable-logging-macros: their format
    # strings are then absent from the binary. They cost time even at --log-level warn.
    try:
        logging_in = b"Pipeline '{}': start" in open(exe, "rb").read()
        out.append("BMv2 per-packet logging macros: "
                   + ("compiled in" if logging_in else "compiled out"))
    except OSError:
        pass
    out.append("BMv2 compiler flags (-O level): not recorded in the binary (no debug info)")
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" ({os.cpu_count()} cores)"


def in_process(args) -> int:
    """No root or no BMv2: softswitch alone, in process, frames handed to Switch.process."""
    from harness.fabric import SoftFabric

    topo = star(args.workers)
    fab = SoftFabric(topo, **args.build)
    try:
        hosts = [h.name for h in topo.hosts]
        fab.program([JobSpec(JOB + k, tuple(hosts), slots=args.slots,
                             encoding=ENCODINGS[enc]) for k, enc in enumerate(args.encodings)])
        rounds = args.packets // args.workers
        rates = {enc: [] for enc in args.encodings}
        for _ in range(args.runs):
            for k, enc in enumerate(args.encodings):
                frames = stream(fab.topo, hosts, args.slots, rounds, fab.session(), args.seed,
                                args.elems, enc, JOB + k)
                t = time.perf_counter()
                for batch in frames:
                    for host, frame in batch:
                        fab.send(host, frame)
                rates[enc].append(rounds * args.workers / (time.perf_counter() - t))
                fab.quiet(hosts)
    finally:
        fab.close()
    for enc in args.encodings:
        r = median(rates[enc])
        name = "softswitch" if len(args.encodings) == 1 else f"softswitch, {enc}"
        print(f"{name}: {r:,.0f} packets/s, {r * args.elems:,.0f} elements/s (in "
              f"process, frames handed to the switch; median of {args.runs}); no BMv2 "
              "baseline this run")
    first = args.encodings[0]
    for enc in args.encodings[1:]:
        print(f"softswitch (in process): {enc} aggregates "
              f"{median(rates[enc]) / median(rates[first]):.2f}x the elements/s of {first} "
              f"(the same packets per run, {args.elems} elements each; medians of "
              f"{args.runs})")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--packets", type=int, default=2000, help="contributions per run")
    ap.add_argument("--window", type=int, default=16, help="rounds in flight")
    ap.add_argument("--runs", type=int, default=3, help="runs per target, interleaved")
    ap.add_argument("--no-bmv2", action="store_true", help="softswitch alone, in process")
    ap.add_argument("--no-check", action="store_true", help="do not compare the outputs")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--encodings", nargs="+", choices=sorted(ENCODINGS), default=["cnat8"],
                    help="contributions to stream, one job each, runs interleaved (default "
                         "cnat8; 'cnat8 uq4' also prints each target's elements/s of uq4 "
                         "against cnat8)")
    ap.add_argument("--profile", default="default",
                    help="compiled profile of the program (controller/profiles.py): default "
                         "168 elements per packet, wide 1456")
    # the old flag: outputs are now compared by default
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.elems, args.build = wire.ELEMS, {}
    if args.profile != "default":
        # Only then: speed_targets.py runs this script on old checkouts without profiles.
        from controller.profiles import profile
        try:
            prof = profile(args.profile)
        except ValueError as e:
            ap.error(str(e))
        args.elems, args.build = prof.elems, {"build": prof.build}
        if "uq4" in args.encodings and "uq4" not in prof.four_bit:
            ap.error(f"--encodings uq4: profile {prof.name} has no 4-bit encodings (its "
                     f"{prof.elems}-element packets cannot grow into a byte per element)")
    if args.repeat is not None:
        args.runs = args.repeat
    if args.workers < 1 or args.slots < 1 or args.window < 1 or args.runs < 1:
        raise SystemExit("--workers, --slots, --window and --runs must be >= 1")
    if args.window > args.slots:
        raise SystemExit("--window must not exceed --slots: a slot is reused only once its "
                         "result is in")
    from harness.netns import NetnsFabric, bmv2_missing

    why = "--no-bmv2" if args.no_bmv2 else bmv2_missing()
    rounds = max(1, args.packets // args.workers)
    elems = args.elems
    results = {"cnat8": "results re-compressed to CNAT8", "uq4": "results SUM8 (exact sums)"}
    for enc in args.encodings:
        print(f"stream: {rounds * args.workers} {enc.upper()} contributions of {elems} elements "
              f"per run ({args.profile} profile), {args.workers} workers, {args.slots} slots, "
              f"{args.window} rounds in flight; {results[enc]}")
    if why:
        print(f"BMv2 not run: {why}")
        return in_process(args)
    for line in bmv2_build():
        print(line)
    print(f"load average before: {load()}")
    topo = star(args.workers)
    hosts = [h.name for h in topo.hosts]
    jobs = [JobSpec(JOB + k, tuple(hosts), slots=args.slots, encoding=ENCODINGS[enc])
            for k, enc in enumerate(args.encodings)]
    fabs = {}
    rates = {enc: {"bmv2": [], "soft": []} for enc in args.encodings}
    outs = {enc: {"bmv2": [], "soft": []} for enc in args.encodings}
    cpu = {enc: {"bmv2": [], "soft": []} for enc in args.encodings}
    packets = rounds * args.workers
    with tempfile.TemporaryDirectory(prefix="natswitch-pps-") as tmp:
        try:
            for target in ("bmv2", "soft"):
                os.makedirs(f"{tmp}/{target}")
                fabs[target] = NetnsFabric(f"{tmp}/{target}", target, topo,
                                           prefix=f"natsw-pps{target[0]}", **args.build)
                fabs[target].program(jobs)
            for i in range(args.runs):
                for k, enc in enumerate(args.encodings):
                    for target in ("bmv2", "soft"):
                        pps, rps, got, (bench, switch), wall = run(
                            fabs[target], hosts, lambda s, enc=enc, k=k: stream(
                                topo, hosts, args.slots, rounds, s, args.seed, elems, enc,
                                JOB + k),
                            args.window, args.slots, args.timeout)
                        rates[enc][target].append(pps)
                        outs[enc][target].append(got)
                        cpu[enc][target].append(switch)
                        label = f" ({enc})" if len(args.encodings) > 1 else ""
                        print(run_line(i, target, pps, rps, bench, switch, wall, packets,
                                       label), flush=True)
        finally:
            for fab in fabs.values():
                fab.close()
    print(f"load average after: {load()}")
    for enc in args.encodings:
        if len(args.encodings) > 1:
            print(f"-- {enc}")
        report(args, elems, packets, rates[enc], cpu[enc], outs[enc])
    first = args.encodings[0]
    for enc in args.encodings[1:]:
        for target in ("bmv2", "soft"):
            r = median(rates[enc][target]) / median(rates[first][target])
            print(f"{NAMES[target]}: {enc} aggregates {r:.2f}x the elements/s of {first} "
                  f"(the same packets per run, {elems} elements each; medians of "
                  f"{args.runs})")
    return 0


NAMES = {"bmv2": "BMv2", "soft": "softswitch"}


def run_line(i: int, target: str, pps: float, rps: float, bench: Reading, switch: Reading,
             wall: float, packets: int, label: str = "") -> str:
    """One run: its rates; CPU over wall time (a process near 1.0 on one core is what
    bounds), and the switch's CPU time per packet, which other load does not change."""
    return (f"run {i + 1} {NAMES[target]}{label}: {pps:,.0f} packets/s, {rps:,.0f} results/s; CPU: "
            f"switch {(switch / wall).text('.2f')}, bench sender+receiver "
            f"{(bench / wall).text('.2f')} (of {os.cpu_count()} cores); switch CPU "
            f"{(switch / packets).text('.3g', ' us', 1e6)} per packet")


def report(args, elems: int, packets: int, rates: dict[str, list[float]],
           cpu: dict[str, list[Reading]], outs: dict[str, list[dict]]) -> int:
    """The medians, the ratios and the comparison of the outputs; the exit code. The switch's
    CPU per packet is taken over all runs together (the runs' CPU times summed, so their
    clock's steps too, over all their packets): a figure, or a bound where even that is
    below what the clock can measure, and then no ratio."""
    soft, bmv2 = median(rates["soft"]), median(rates["bmv2"])
    print(f"softswitch: {soft:,.0f} packets/s, {soft * elems:,.0f} elements/s "
          f"(median of {args.runs})")
    print(f"BMv2 simple_switch_grpc: {bmv2:,.0f} packets/s, {bmv2 * elems:,.0f} "
          f"elements/s (median of {args.runs})")
    print(f"ratio softswitch/BMv2: {soft / bmv2:.2f}x")
    per = {}
    for target, readings in cpu.items():
        total = Reading(0.0, 0.0)
        for r in readings:
            total += r
        per[target] = total / (packets * len(readings))
    print(f"switch CPU per packet (all {args.runs} runs together): softswitch "
          f"{per['soft'].text('.3g', ' us', 1e6)}, BMv2 {per['bmv2'].text('.3g', ' us', 1e6)}"
          f"; ratio BMv2/softswitch "
          f"{ratio(per['bmv2'], per['soft'], ('BMv2', 'softswitch'))}")
    if args.no_check:
        print("outputs not compared (--no-check)")
        return 0
    frames = sum(compare(a, b) for a, b in zip(outs["bmv2"], outs["soft"], strict=True))
    print(f"outputs identical per port and in order: yes, {frames} results in {args.runs} "
          f"run pairs, byte for byte (the rounding bits of re-compressed sums are a hash of "
          f"the packet's identity on both targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
