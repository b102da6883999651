#!/usr/bin/env python3
"""Test accuracy against step for the PyTorch DDP job: MNIST-1D, a 1-D CNN of 134,922
parameters, 4 workers, every method through the same DDP training loop (worker/ddp/train.py).

    .venv/bin/python bench/torch_convergence.py [--seeds 1] [--steps 600]

Ranks are threads with their own Gloo groups (worker/ddp/inproc.py); the same seeds
everywhere (initial model, each rank's batches; MNIST-1D's standard split), so the runs of
a seed differ only in how the gradients are reduced:
  uncompressed (Gloo)   DDP's own Gloo allreduce, no hook
  int32 INA (switch)    the hook, FIXED32 through the compiled program on in-process
                        softswitch
  C_nat INA (switch)    the hook, CNAT8 up and CNAT8 down, the same way
  C_nat INA wide        the same through the wide profile (1456 elements per packet, so
                        one exponent per 1456 elements instead of 168)
  natural dithering INA NAT4 up (4 bits: sign and 7 levels below the chunk's negotiated
                        scale), summed in the switch, CNAT8 down
  uniform (THC) INA     UQ4 up (4-bit stochastic quantization after a random rotation
                        shared per step), summed as integers in the switch, SUM8 down
  ... wide4             NAT4 and UQ4 through the wide4 profile (1024 elements per packet:
                        one scale per 1024 elements instead of 168)
  <compressor>          the hook with a worker/compression operator, layer-wise: dense
                        operators through Gloo's allreduce, the others gathered
Target: C_nat INA within 0.5 pp of uncompressed at equal steps; one-bit and top-k at 1%
without error feedback visibly behind.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from common import OUT, Target, machine, markdown, quick, save, say, table
from paired import holm, paired, plan_line

WORKERS = 4
COMPRESSORS = ["cnat", "onebit:ef=0", "onebit", "topk:0.01", "ef:topk:0.01", "terngrad"]
TARGET_PP = 0.5
LATE = 3            # evaluations averaged at the end


def run(how: str, what: str | None, seed: int, args, data) -> dict:
    import torch

    from worker.ddp.inproc import run_ranks
    from worker.ddp.train import DDPConfig, train

    torch.set_num_threads(1)
    cfg = DDPConfig(steps=args.steps, lr=args.lr, batch=args.batch, seed=seed,
                    eval_every=args.eval_every, mode=args.mode,
                    compressor=what if how == "hook" else "none",
                    workload=getattr(args, "workload", "mnist1d"))
    make_client = None
    if how == "switch":
        import inproc

        from controller.profiles import PROFILES
        from controller.topology import JobSpec, star
        from worker import wire
        from worker.allreduce import AllReduceClient
        from worker.allreduce.job import JOB_ENCODINGS

        what, _, prof = what.partition(":")
        topo = star(hosts=WORKERS)
        hosts = [h.name for h in topo.hosts]
        topo = topo.with_jobs([JobSpec(1, tuple(hosts), 64, *JOB_ENCODINGS[what])])
        net = inproc.network(topo, session=1 + seed,
                             program=PROFILES[prof or "default"].bmv2_json)

        def make_client(rank):
            framer = net.framer(hosts[rank])
            job = net.job_params(1, wire.ENCODING_BY_NAME[what])
            return AllReduceClient(net.ports[hosts[rank]], framer, job,
                                   seed=seed * 1000 + rank, timeout=60.0)

    def body(rank, group):
        client = make_client(rank) if make_client else None
        return train(group, cfg, allreduce=client.allreduce if client else None, data=data)

    out = run_ranks(WORKERS, body, timeout=120.0, join_timeout=7200.0)
    bad = [f"rank {r}: {o!r}" for r, o in enumerate(out) if isinstance(o, BaseException)]
    if bad:
        raise RuntimeError(f"{how} {what}, seed {seed}: " + "; ".join(bad))
    if len({o["params_sha256"] for o in out}) != 1:
        raise RuntimeError(f"{how} {what}, seed {seed}: the ranks' models differ")
    return out[0]


def main(argv=None) -> int:
    q = quick()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10 if q else 600)
    ap.add_argument("--eval-every", type=int, default=5 if q else 50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--mode", choices=("layer", "model"), default="layer")
    ap.add_argument("--compressors", nargs="*", default=COMPRESSORS[:2] if q else COMPRESSORS)
    ap.add_argument("--no-switch", action="store_true", help="skip the switch runs")
    ap.add_argument("--wide", action=argparse.BooleanOptionalAction, default=not q,
                    help="the runs through the wide and wide4 profiles (default: not in quick "
                    "runs, where softswitch compiling each, about 30 s, would be most of it)")
    ap.add_argument("--methods", nargs="*", help="run only the methods whose names contain "
                    "one of these (e.g. 'natural' 'THC'); the uncompressed run always")
    ap.add_argument("--json", type=Path, default=OUT / "torch_convergence.json")
    args = ap.parse_args(argv)
    from worker.ddp.workload import load_mnist1d

    data = load_mnist1d()
    plan = [("uncompressed (Gloo)", "gloo", None)]
    if not args.no_switch:
        plan += [("int32 INA (switch)", "switch", "fixed32"),
                 ("C_nat INA (switch)", "switch", "cnat8"),
                 ("C_nat INA wide (switch)", "switch", "cnat8:wide"),
                 ("natural dithering INA (switch)", "switch", "nat4"),
                 ("uniform (THC) INA (switch)", "switch", "uq4"),
                 ("natural dithering INA wide4 (switch)", "switch", "nat4:wide4"),
                 ("uniform (THC) INA wide4 (switch)", "switch", "uq4:wide4")]
        if not args.wide:
            plan = [p for p in plan if ":" not in (p[2] or "")]
    plan += [(c, "hook", c) for c in args.compressors]
    if args.methods is not None:
        plan = [p for p in plan if p[1] == "gloo" or any(m in p[0] for m in args.methods)]
    runs: dict[str, list] = {name: [] for name, _, _ in plan}
    steps: list[int] = []
    setting = {"steps": args.steps, "workers": WORKERS, "batch": args.batch, "lr": args.lr,
               "mode": args.mode}
    t0 = time.monotonic()
    for seed in range(args.seeds):
        for name, how, what in plan:
            t = time.monotonic()
            r = run(how, what, seed, args, data)
            evals = [s for s in r["steps"] if s["test_accuracy"] is not None]
            steps = [s["step"] for s in evals]
            runs[name].append([s["test_accuracy"] for s in evals])
            say(f"seed {seed}: {name:<22} final accuracy {r['final_test_accuracy']:.4f} "
                f"({time.monotonic() - t:.0f} s)")
        # what a long run has measured survives an interruption (bench/torch_tta.py reads it)
        save(args.json, {"partial": True, "seeds": seed + 1, **setting, "eval_steps": steps,
                         "per_seed": runs})
    curves = {name: np.mean(a, axis=0).tolist() for name, a in runs.items()}
    base = [a[-1] for a in runs["uncompressed (Gloo)"]]
    # SGD at a constant rate ends noisy: the mean of the last LATE evaluations is steadier
    # than the last one alone.
    late = min(LATE, len(steps))
    base_late = [float(np.mean(a[-late:])) for a in runs["uncompressed (Gloo)"]]
    fam = len(runs) - 1
    header = ["method", "final accuracy", "vs uncompressed, pp [95 % CI]", "verdict",
              f"Holm (family of {fam})", f"mean of last {late} evals",
              "vs uncompressed, pp [95 % CI]", "verdict", f"Holm (family of {fam})",
              "seeds", f"accuracy at step {steps[len(steps) // 2]}"]
    rows, versus, versus_late = [], {}, {}
    for name, accs in runs.items():
        versus[name] = paired([a[-1] for a in accs], base, scale=100)
        versus_late[name] = paired([float(np.mean(a[-late:])) for a in accs], base_late,
                                   scale=100)
    # one family per rule: every method against the one baseline
    holm_final = holm({k: d for k, d in versus.items() if k != "uncompressed (Gloo)"})
    holm_late = holm({k: d for k, d in versus_late.items() if k != "uncompressed (Gloo)"})
    for name, accs in runs.items():
        final = [a[-1] for a in accs]
        tail = [float(np.mean(a[-late:])) for a in accs]
        d, dl = versus[name], versus_late[name]
        mid = float(np.mean([a[len(steps) // 2] for a in accs]))
        if name == "uncompressed (Gloo)":
            rows.append([name, float(np.mean(final)), "-", "baseline", "-",
                         float(np.mean(tail)), "-", "baseline", "-", d.n, mid])
        else:
            rows.append([name, float(np.mean(final)), d.interval(), d.label, holm_final[name],
                         float(np.mean(tail)), dl.interval(), dl.label, holm_late[name], d.n,
                         mid])
    print(f"{args.seeds} seed(s), {args.steps} steps, {WORKERS} workers, batch {args.batch}, "
          f"lr {args.lr} momentum 0.9, {args.mode}-wise, MNIST-1D CNN; "
          f"{time.monotonic() - t0:.0f} s")
    print(table(header, rows))
    need = plan_line(versus, "uncompressed (Gloo)")
    if need:
        print(need)
    targets = []
    for name in ("C_nat INA (switch)", "C_nat INA wide (switch)"):
        if name in runs:
            # Accuracies are float32 counts over 1000 test examples: round off their noise
            # (a mean difference of exactly 0.5 pp over 10 seeds is 0.5000007 pp).
            t = Target(f"{name}: uncompressed - C_nat accuracy at equal steps",
                       round(0.0 - versus[name].diff, 4) + 0.0, TARGET_PP, "max", " pp")
            # the gap's own interval: uncompressed - C_nat, per seed
            gap = paired(base, [a[-1] for a in runs[name]], scale=100)
            targets.append({**t.as_dict(), "ci": gap.text(" pp", verdict=False)})
    for t in targets:
        print(f"target {t['text']} (the gap: {t['ci']})")
    save(args.json, {"machine": machine(), "seeds": args.seeds, **setting,
                     "eval_steps": steps, "curves": curves,
                     "finals": {k: [a[-1] for a in v] for k, v in runs.items()},
                     "per_seed": runs,
                     "paired": {k: d.as_dict() for k, d in versus.items()},
                     "paired_late": {k: d.as_dict() for k, d in versus_late.items()},
                     "rows": rows, "table": markdown(header, rows), "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
