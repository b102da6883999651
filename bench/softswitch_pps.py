#!/usr/bin/env python3
"""Packets/s of the embedded softswitch on the aggregation program, vs BMv2.

Drives p4src/build/agg.json with a realistic stream: W workers on ports
1..W contribute full CNAT8 chunks (ELEMS codes each, docs/PROTOCOL.md) to S
slots of one job, round after round (versions alternating); every W-th
contribution to a slot completes it and the switch re-compresses the sum
and multicasts a CNAT8 RESULT to the W workers. Entries are installed with
the Switch API. Where simple_switch is on PATH the same stream goes
through BMv2 in the same run (pcap files as ports, simple_switch_CLI for
entries) and the ratio is printed.

    .venv/bin/python bench/softswitch_pps.py [--workers 4] [--slots 64] [--packets 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from softswitch import Entry, Switch, hashes  # noqa: E402
from tests.p4 import bmv2  # noqa: E402

AGG_PORT = 20033
JOB = 1
GROUP = 1
SERVICE_IP = 0x0A00FF01


def names(j: dict) -> dict:
    """Full JSON names of the tables and actions the bench programs, by their last part."""
    tables = [t["name"] for p in j["pipelines"] for t in p["tables"]]
    actions = [a["name"] for a in j["actions"]]

    def one(pool, suffix):
        hits = [n for n in pool if n == suffix or n.endswith("." + suffix)]
        if len(hits) != 1:
            raise SystemExit(f"expected one name ending in {suffix!r}, found {hits}")
        return hits[0]

    return {k: one(tables if k.startswith("t_") else actions, v) for k, v in {
        "t_jobs": "jobs", "t_children": "children", "t_hosts": "hosts",
        "job_root": "job_root", "set_child": "set_child", "to_host": "to_host"}.items()}


def elems_of(j: dict) -> int:
    for h in j["header_types"]:
        if h["name"].startswith("cnat"):
            return len(h["fields"])
    raise SystemExit("no cnat header type in the program")


def mac(i: int) -> int:
    return 0x020000000000 | i


def ip(i: int) -> int:
    return 0x0A000000 | i


def contribution(worker: int, slot: int, version: int, chunk: int, codes: bytes) -> bytes:
    """One CNAT8 contribution with its UDP checksum over the payload (docs/PROTOCOL.md)."""
    udp_len = 8 + 16 + len(codes)
    iph = bytearray(struct.pack(">BBHHHBBHII", 0x45, 0, 20 + udp_len, chunk & 0xFFFF, 0, 64,
                                17, 0, ip(worker), SERVICE_IP))
    struct.pack_into(">H", iph, 10, hashes.csum16(bytes(iph)))
    eth = struct.pack(">HIHIH", 0x0200, 0x00FF01, 0x0200, worker, 0x0800)
    agg = struct.pack(">BBHHHBBBBI", 1, 1, JOB, 1, slot, version, 120, 1, 0, chunk)
    pseudo = struct.pack(">IIBBH", ip(worker), SERVICE_IP, 0, 17, udp_len)
    udp = struct.pack(">HHHH", AGG_PORT, AGG_PORT, udp_len, 0)
    csum = hashes.csum16(pseudo + udp + agg + codes) or 0xFFFF
    udp = struct.pack(">HHHH", AGG_PORT, AGG_PORT, udp_len, csum)
    return eth + bytes(iph) + udp + agg + codes


def stream(workers: int, slots: int, npackets: int, elems: int, seed: int,
           same_codes: bool = False):
    """[(port, bytes)]: rounds over the slots, all workers per slot in a shuffled order.

    same_codes: all workers send the same codes for a slot, so with a power-of-two
    number of workers every sum is a power of two and its re-compression is exact
    (no random rounding): the results can then be compared byte for byte."""
    rng = random.Random(seed)
    out = []
    chunk = 0
    rnd = 0
    while len(out) < npackets:
        for slot in range(slots):
            order = list(range(1, workers + 1))
            rng.shuffle(order)
            shared = bytes(rng.choice((0, 0x80)) | rng.randrange(0, 21) for _ in range(elems))
            for w in order:
                codes = shared if same_codes else \
                    bytes(rng.choice((0, 0x80)) | rng.randrange(0, 21) for _ in range(elems))
                out.append((w, contribution(w, slot, rnd % 2, chunk, codes)))
            chunk += 1
        rnd += 1
    cut = (npackets // workers) * workers  # whole slots only
    return out[: max(cut, workers)]


def job_params(j: dict, n: dict, workers: int, slots: int) -> list[int]:
    """job_root's parameters as the program declares them (older builds have fewer)."""
    value = {"base": 0, "num_slots": slots, "num_children": workers, "mcast_grp": GROUP,
             "result_enc": 1, "max_exp": 254}
    return [value[p] for p in params_of(j, n["job_root"])]


def child_params(j: dict, n: dict, w: int) -> list[int]:
    value = {"index": w - 1, "weight": 1}
    return [value[p] for p in params_of(j, n["set_child"])]


def params_of(j: dict, action: str) -> list[str]:
    a = next(a for a in j["actions"] if a["name"] == action)
    return [p["name"] for p in a["runtime_data"]]


def program_engine(sw: Switch, j: dict, n: dict, workers: int, slots: int) -> None:
    sw.tables[n["t_jobs"]].insert(Entry((JOB,), n["job_root"], job_params(j, n, workers, slots)))
    for w in range(1, workers + 1):
        sw.tables[n["t_children"]].insert(Entry((JOB, w), n["set_child"],
                                                child_params(j, n, w)))
        sw.tables[n["t_hosts"]].insert(Entry((w,), n["to_host"],
                                              [mac(0xFF01), mac(w), SERVICE_IP, ip(w)]))
    sw.pre.create(GROUP, [(w, 0) for w in range(1, workers + 1)])


def cli_commands(j: dict, n: dict, workers: int, slots: int) -> list[str]:
    job = " ".join(map(str, job_params(j, n, workers, slots)))
    cmds = [f"table_add {n['t_jobs']} {n['job_root']} {JOB} => {job}"]
    for w in range(1, workers + 1):
        child = " ".join(map(str, child_params(j, n, w)))
        cmds.append(f"table_add {n['t_children']} {n['set_child']} {JOB} {w} => {child}")
        cmds.append(f"table_add {n['t_hosts']} {n['to_host']} {w} => "
                    f"{mac(0xFF01)} {mac(w)} {SERVICE_IP} {ip(w)}")
    cmds.append(f"mc_mgrp_create {GROUP}")
    for w in range(1, workers + 1):
        cmds += [f"mc_node_create 0 {w}", f"mc_node_associate {GROUP} {w - 1}"]
    return cmds


def run_engine(j: dict, n: dict, pkts, workers: int, slots: int, repeat: int):
    best = None
    outs = []
    for _ in range(repeat):
        sw = Switch(seed=1)
        sw.load(j)
        program_engine(sw, j, n, workers, slots)
        t = time.perf_counter()
        outs = [sw.process(port, data) for port, data in pkts]
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
        if sw.stats["errors"]:
            raise SystemExit(f"engine errors: {sw.stats}")
    return best, outs


def run_bmv2(json_path: Path, j: dict, n: dict, pkts, workers: int, slots: int, first_out: int,
             expected: int, timeout: float):
    """(steady-state packets/s, outputs per port): packets/s counts the inputs after
    the first output over the time until the last output."""
    ports = set(range(1, workers + 1))
    # the CLI parses the JSON too: give it time before the packets start
    wait = 3 + int(json_path.stat().st_size / 20e6)
    with bmv2.SimpleSwitch(json_path, ports, pkts, wait=wait, start_timeout=timeout) as ss:
        ss.cli(cli_commands(j, n, workers, slots))
        time.sleep(max(0.0, ss.started_at + ss.wait - time.monotonic()))
        t_first = t_last = None
        deadline = time.monotonic() + timeout
        count = 0
        while time.monotonic() < deadline:
            count = ss.count()
            now = time.monotonic()
            if count and t_first is None:
                t_first = now
            if count >= expected:
                t_last = now
                break
            time.sleep(0.01)
        if t_last is None:
            raise SystemExit(f"BMv2 sent {count} of {expected} packets in {timeout:.0f}s")
        outputs = ss.outputs()
    return (len(pkts) - first_out) / (t_last - t_first), outputs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=ROOT / "p4src/build/agg.json")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--packets", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3, help="engine runs (best is reported)")
    ap.add_argument("--no-bmv2", action="store_true", help="skip the BMv2 baseline")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--check", action="store_true",
                    help="workers send equal codes (exact results), compare packets with BMv2")
    args = ap.parse_args(argv)
    if not args.json.exists():
        raise SystemExit(f"{args.json} is missing: compile p4src/ first (make p4)")
    j = json.loads(args.json.read_text())
    n = names(j)
    elems = elems_of(j)
    if args.check and args.workers & (args.workers - 1):
        raise SystemExit("--check needs a power-of-two number of workers")
    pkts = stream(args.workers, args.slots, args.packets, elems, args.seed, args.check)
    dt, outs = run_engine(j, n, pkts, args.workers, args.slots, args.repeat)
    nout = sum(len(o) for o in outs)
    first_out = next(i for i, o in enumerate(outs) if o) + 1
    pps = len(pkts) / dt
    print(f"stream: {len(pkts)} CNAT8 contributions of {elems} elements, {args.workers} "
          f"workers, {args.slots} slots; {nout} results out")
    print(f"softswitch: {pps:,.0f} packets/s, {pps * elems:,.0f} elements/s "
          f"(best of {args.repeat})")
    if args.no_bmv2:
        return 0
    if bmv2.available() is None:
        print("BMv2: simple_switch/simple_switch_CLI not on PATH; no baseline this run")
        return 0
    bpps, bouts = run_bmv2(args.json, j, n, pkts, args.workers, args.slots, first_out, nout,
                           args.timeout)
    print(f"BMv2 simple_switch: {bpps:,.0f} packets/s, {bpps * elems:,.0f} elements/s")
    print(f"ratio softswitch/BMv2: {pps / bpps:.2f}x")
    if args.check:
        mine: dict = {}
        for o in outs:
            for port, data in o:
                mine.setdefault(port, []).append(data)
        same = all(sorted(mine.get(p, [])) == sorted(v) for p, v in bouts.items())
        print(f"results identical to BMv2's: {'yes' if same else 'NO'}")
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
