#!/usr/bin/env python3
"""The workers' per-packet path: frames and elements per second, before/after and 168/wide.

    python bench/worker_path.py [--elements 2097152] [--repeat 5] [--softswitch]

Rows, each the best of --repeat runs, the two sides of a ratio interleaved so that both
see the same machine load (framing and client: the thread's CPU time):
  build          a burst of 64 CNAT8 frames: Framer.build per frame (the path before)
                 vs Framer.build_many (numpy over the burst, checksums vectorised)
  parse          Framer.parse per frame: header, UDP checksum, payload view
  client         one AllReduceClient, CNAT8 both ways, against a reflector that turns each
                 contribution into its result (one byte and the checksum changed): the
                 worker's whole path (encode, frame, send, receive, parse, verify, decode,
                 protocol) with no switch work; frames built per frame (BATCH_FRAMES off)
                 vs in bursts
  profile        the same client at 168 elements per packet (p4src/build/) and at 1456
                 (the wide profile, p4src/build/wide/): elements/s and bytes per element on
                 the wire (Ethernet frames without FCS, both directions, priming included)
  --softswitch   a star of 4 workers in process through the compiled program on
                 softswitch (harness/network.py), CNAT8 both ways, 168 vs wide: elements/s
                 of the job (workers x elements / time)
  --mininet K    (root, under the shared lock) a star of 4 workers in Mininet at
                 --bw Mbit/s on switch K (soft, bmv2), C_nat INA with each profile in turn:
                 elements/s of the job (workers x elements / the slowest worker's call,
                 median of --reps) and bytes per element on the workers' links (kernel
                 counters), 168 vs wide
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np

from worker import wire
from worker.allreduce import client as client_mod
from worker.allreduce.client import AllReduceClient, JobParams
from worker.frames import L2_LEN, Framer
from worker.transport import Port

SRC = ("02:00:0a:00:01:01", "10.0.1.1")
DST = ("02:4e:41:ff:ff:fe", "10.255.255.254")
WIDE = 1456
BURST = 64
# The framing and client rows run in one thread with nothing to wait for: timed by the
# thread's CPU time, so the other work on a shared machine does not skew the ratios.
CLOCK = time.thread_time


class ReflectPort(Port):
    """Each CNAT8 contribution comes back as the result of a one-worker job: its own codes.
    msg_type 1 -> 2 changes one 16-bit word of the UDP checksum's sum by 0x0100 (RFC 1624)."""

    def __init__(self):
        super().__init__()
        self.inbox: deque[bytes] = deque()
        self.bytes = 0

    def send(self, frame: bytes) -> None:
        b = bytearray(frame)
        b[L2_LEN] = wire.MSG_RESULT
        c = (~(b[40] << 8 | b[41]) & 0xFFFF) + 0x0100
        c = (c & 0xFFFF) + (c >> 16)
        c = ~c & 0xFFFF
        b[40], b[41] = c >> 8, c & 0xFF
        self.bytes += 2 * len(frame)
        self.inbox.append(bytes(b))

    def recv(self, timeout):
        return self.inbox.popleft() if self.inbox else None


def best(fn, repeat: int) -> float:
    """The shortest of `repeat` runs of fn(), seconds."""
    out = []
    for _ in range(repeat):
        t = CLOCK()
        fn()
        out.append(CLOCK() - t)
    return min(out)


def framing(repeat: int) -> list[tuple]:
    f = Framer(SRC, DST)
    rng = np.random.default_rng(0)
    pay = rng.integers(0, 256, (BURST, wire.ELEMS)).astype(np.uint8)
    slots = np.arange(BURST)
    zeros = np.zeros(BURST, np.int64)
    rounds = 300

    def scalar():
        for r in range(rounds):
            for i in range(BURST):
                f.build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 1, 1, i, 0, 0, 1, r, pay[i])

    def batch():
        for r in range(rounds):
            f.build_many(wire.MSG_CONTRIB, wire.ENC_CNAT8, 1, 1, slots, zeros, zeros, 1,
                         zeros + r, pay)

    frames = f.build_many(wire.MSG_RESULT, wire.ENC_CNAT8, 1, 1, slots, zeros, zeros, 1,
                          zeros, pay)

    def parse():
        for _ in range(rounds):
            for x in frames:
                f.parse(x)

    rows = []
    t_s, t_b = [], []
    for _ in range(repeat):
        t_s.append(best(scalar, 1))
        t_b.append(best(batch, 1))
    n = rounds * BURST
    rows.append(("build CNAT8, per frame", n / min(t_s), None))
    rows.append(("build CNAT8, burst of 64", n / min(t_b), min(t_s) / min(t_b)))
    rows.append(("parse + verify CNAT8", n / best(parse, repeat), None))
    return rows


def run_client(x, elems: int, batch: bool) -> tuple[float, AllReduceClient, ReflectPort]:
    old = getattr(client_mod, "BATCH_FRAMES", None)      # None: a tree without bursts
    if old is not None:
        client_mod.BATCH_FRAMES = old if batch else 1 << 30
    try:
        port = ReflectPort()
        c = AllReduceClient(port, Framer(SRC, DST, elems=elems),
                            JobParams(1, 1, 1, 64, wire.ENC_CNAT8, elems))
        c.allreduce(x[: 64 * elems])                  # warm up
        port.bytes = 0
        t = CLOCK()
        c.allreduce(x)
        return CLOCK() - t, c, port
    finally:
        if old is not None:
            client_mod.BATCH_FRAMES = old


def baseline_client(tree: str, size: int) -> float:
    """Seconds of the 168-element client call with the worker package of checkout `tree`
    (this one, or e.g. a worktree of main), in a fresh process."""
    here = str(Path(__file__).resolve().parent)
    code = (f"import sys; sys.path.insert(0, {tree!r}); sys.path.append({str(common.REPO)!r});"
            f"sys.path.insert(1, {here!r}); import numpy as np, worker, worker_path as wp;"
            f"assert worker.__file__.startswith({tree!r}), worker.__file__;"
            f"x = np.random.default_rng(1).standard_normal({size}).astype(np.float32);"
            f"print(wp.run_client(x, 168, True)[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/")
    return float(out.stdout.split()[-1])


def clients(x, repeat: int) -> tuple[list, dict]:
    times: dict[tuple, list] = {}
    last = {}
    for _ in range(repeat):
        for key in ((wire.ELEMS, False), (wire.ELEMS, True), (WIDE, True)):
            dt, c, port = run_client(x, *key)
            times.setdefault(key, []).append(dt)
            last[key] = (c, port)
    rows = []
    base = min(times[wire.ELEMS, False])
    for (elems, batch), ts in times.items():
        c, port = last[elems, batch]
        dt = min(ts)
        rows.append((f"client {elems} elements, {'bursts' if batch else 'per frame'}",
                     c.last.packets_sent / dt, x.size / dt, base / dt,
                     port.bytes / (2 * x.size)))
    return rows, times


def softswitch(elements: int, repeat: int) -> list[tuple]:
    from controller.profiles import PROFILES
    from controller.topology import JobSpec, star
    from harness.network import SwitchNetwork, softswitch_missing
    from harness.workers import run_workers

    if why := softswitch_missing():
        print(f"softswitch: skipped ({why})")
        return []
    n = 4
    hosts = [f"h{i + 1}" for i in range(n)]
    topo = star(n).with_jobs([JobSpec(1, tuple(hosts), slots=64, encoding="cnat8")])
    rng = np.random.default_rng(3)
    tensors = [[rng.standard_normal(elements).astype(np.float32)] for _ in range(n)]
    rows, session = [], 1
    for name in ("default", "wide"):
        prof = PROFILES[name]
        t0 = time.perf_counter()
        net = SwitchNetwork(topo, prof.bmv2_json)
        load = time.perf_counter() - t0
        best_dt = None
        for _ in range(repeat):
            session += 1
            net = SwitchNetwork(topo, prof.bmv2_json, session=session)
            job = net.job_params(1, wire.ENC_CNAT8)

            def make(rank, net=net, job=job):
                return AllReduceClient(net.ports[hosts[rank]], net.framer(hosts[rank]), job,
                                       seed=rank, timeout=30)
            t = time.perf_counter()
            _, _, errors = run_workers(make, tensors)
            dt = time.perf_counter() - t
            if any(errors):
                raise SystemExit(f"softswitch {name}: {errors}")
            best_dt = dt if best_dt is None else min(best_dt, dt)
        rows.append((f"softswitch star of 4, {prof.elems} elements", n * elements / best_dt,
                     load))
    return rows


def mininet(kind: str, elements: int, reps: int, bw: float) -> list[tuple]:
    import emu

    from controller import topology as topology_mod
    from controller.profiles import PROFILES
    from controller.topology import JobSpec

    if why := emu.why_not_runnable():
        print(f"mininet: skipped ({why})")
        return []
    topo = topology_mod.star(hosts=4, bw_mbit=bw)
    hosts = [h.name for h in topo.hosts]
    topo = topo.with_jobs([JobSpec(1, tuple(hosts), 64, "cnat8")])
    work = common.OUT / "worker_path"
    work.mkdir(parents=True, exist_ok=True)
    topo_path = work / "topo.json"
    topo.save(str(topo_path))
    rows = []
    for i, name in enumerate(("default", "wide")):
        prof = PROFILES[name]
        with emu.started(topo, kind, work, profile=name) as e:
            records, loads, _ = emu.run_probes(
                e, topo_path, hosts, work, job=1, session=100 + i + int(time.time()) % 1000,
                encoding="cnat8", elements=elements, reps=reps, topo=topo,
                extra=("--elems", str(prof.elems)),
                timeout=120.0)
        calls = [max(r["calls"][k]["seconds"] for r in records) for k in range(reps)]
        dt = float(np.median(calls))
        up = sum(x.bytes for x in loads if x.src in hosts)
        down = sum(x.bytes for x in loads if x.dst in hosts)
        per = len(hosts) * elements * reps
        rows.append((f"{kind} star of 4 at {bw:g} Mbit/s, {prof.elems} elements",
                     len(hosts) * elements / dt, up / per, down / per))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 21, help="float32 per allreduce")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--softswitch", action="store_true",
                    help="also the in-process star of 4 through the compiled programs")
    ap.add_argument("--softswitch-elements", type=int, default=1 << 18)
    ap.add_argument("--mininet", action="append", choices=("soft", "bmv2"), default=[],
                    help="also the Mininet star of 4 on this switch (root; repeatable)")
    ap.add_argument("--bw", type=float, default=1000.0, help="Mininet links, Mbit/s")
    ap.add_argument("--mininet-elements", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=3, help="timed calls per Mininet variant")
    ap.add_argument("--baseline", metavar="TREE",
                    help="also the client of another checkout (e.g. `git worktree add "
                    "/tmp/main main`), 168 elements, interleaved with this one's")
    ap.add_argument("--skip-local", action="store_true",
                    help="only the Mininet parts (no framing and client rows)")
    args = ap.parse_args(argv)
    x = np.random.default_rng(1).standard_normal(args.elements).astype(np.float32)

    if not args.skip_local:
        print("framing (frames/s; ratio: burst / per frame)")
        for name, rate, ratio in framing(args.repeat):
            print(f"  {name:28s} {rate:12,.0f}" + (f"   x{ratio:.2f}" if ratio else ""))
        print(f"client against a reflector, {args.elements:,} elements, CNAT8 both ways "
              "(ratio: elements/s over the per-frame 168 path)")
        rows, _ = clients(x, args.repeat)
        for name, pps, eps, ratio, bpe in rows:
            print(f"  {name:34s} {pps:10,.0f} packets/s {eps / 1e6:7.2f} M elements/s   "
                  f"x{ratio:.2f}   {bpe:.3f} B/element on the wire")
    if args.baseline:
        mine, theirs = [], []
        for _ in range(args.repeat):
            mine.append(baseline_client(str(common.REPO), x.size))    # alike: a fresh process
            theirs.append(baseline_client(args.baseline, x.size))
        print(f"client 168 elements, this checkout vs {args.baseline}: "
              f"{x.size / min(mine) / 1e6:.2f} vs {x.size / min(theirs) / 1e6:.2f} M elements/s"
              f"   x{min(theirs) / min(mine):.2f}")
    if args.softswitch:
        print(f"in process through softswitch, {args.softswitch_elements:,} elements per "
              "worker, CNAT8 both ways")
        rows = softswitch(args.softswitch_elements, max(1, args.repeat // 2))
        for name, eps, load in rows:
            print(f"  {name:40s} {eps / 1e6:7.2f} M elements/s  (program loaded in "
                  f"{load:.1f} s)")
        if len(rows) == 2:
            print(f"  wide / default: x{rows[1][1] / rows[0][1]:.2f}")
    for kind in args.mininet:
        print(f"Mininet, {args.mininet_elements:,} elements per worker, C_nat INA, "
              f"{args.reps} timed calls")
        rows = mininet(kind, args.mininet_elements, args.reps, args.bw)
        for name, eps, up, down in rows:
            print(f"  {name:44s} {eps / 1e6:7.3f} M elements/s   {up:.3f} B/element up "
                  f"{down:.3f} down")
        if len(rows) == 2:
            print(f"  wide / default: x{rows[1][1] / rows[0][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
