"""C_nat encode and decode throughput, as a ratio to numpy copying the same array.

    python bench/codec.py [--elements 16777216] [--repeat 7] [--workers 4] [--bitgen sfc64]

Rows:
  CNAT8 encode   worker/codec.encode_cnat8: float32 chunks -> one-byte codes at the
                 negotiated exponents (C_nat, scaling, sub-unit rounding, checks)
  CNAT8 decode   worker/codec.decode_cnat8: codes -> float32
  C_nat compress worker/compression/natural.cnat_hi16: float32 -> sign and exponent
                 (the 9-bit natural compression, kept as 16-bit words)
  C_nat expand   natural.hi16_to_float32: back to float32
Each figure is the best of --repeat runs, interleaved with the copy so that both
see the same machine load; the ratio is (elements/s) / (copy elements/s). The
"cpu" columns use the thread's CPU time instead of the wall clock: on a busy
machine they show what the code costs when it has a core to itself.
Target: CNAT8 encode >= 0.25x the copy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import common  # noqa: F401  (puts this checkout first on sys.path)
import numpy as np

from worker import codec
from worker.compression.natural import cnat_hi16, hi16_to_float32

TARGET = 0.25
BITGENS = {"sfc64": np.random.SFC64, "pcg64": np.random.PCG64, "philox": np.random.Philox}


def gradient_like(n: int, seed: int) -> np.ndarray:
    """Gaussian values whose scale changes from chunk to chunk, a few exact zeros."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(n, dtype=np.float32)
    rows = -(-n // codec.ELEMS)
    scale = np.exp(g.uniform(-6, 0, rows)).astype(np.float32)
    x *= np.repeat(scale, codec.ELEMS)[:n]
    x[g.integers(0, n, n // 100)] = 0
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 24, help="float32 elements (16M)")
    ap.add_argument("--repeat", type=int, default=7, help="runs per figure; the best counts")
    ap.add_argument("--workers", type=int, default=4, help="n of the scaling (headroom)")
    ap.add_argument("--bitgen", choices=sorted(BITGENS), default="sfc64",
                    help="numpy bit generator behind the Generator (default sfc64)")
    args = ap.parse_args(argv)
    if args.elements < codec.ELEMS or args.repeat < 1:
        ap.error("need at least one chunk of elements and one repeat")

    x = gradient_like(args.elements, seed=1)
    chunks = codec.chunk(x)
    exps = codec.chunk_exponents(chunks)
    rng = np.random.Generator(BITGENS[args.bitgen](2))
    codes = codec.encode_cnat8(chunks, exps, args.workers, rng)
    hi = cnat_hi16(x, rng)

    cases = {
        "numpy copy": lambda: np.copy(x),
        "CNAT8 encode": lambda: codec.encode_cnat8(chunks, exps, args.workers, rng),
        "CNAT8 decode": lambda: codec.decode_cnat8(codes, exps, args.workers),
        "C_nat compress": lambda: cnat_hi16(x, rng),
        "C_nat expand": lambda: hi16_to_float32(hi),
    }
    best = dict.fromkeys(cases, float("inf"))
    cpu = dict.fromkeys(cases, float("inf"))
    for _ in range(args.repeat):
        for name, fn in cases.items():  # interleaved: every case sees the same load
            c, t = time.thread_time(), time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
            cpu[name] = min(cpu[name], time.thread_time() - c)

    n = args.elements
    copy_rate = n / best["numpy copy"]
    print(f"{n} float32 elements ({n * 4 / 2**20:.0f} MiB), n = {args.workers} workers, "
          f"bit generator {args.bitgen}, best of {args.repeat}, numpy {np.__version__}")
    print(f"{'':<16}{'ms':>9}{'Melem/s':>10}{'x copy':>9}{'cpu ms':>9}{'x copy':>9}")
    for name in cases:
        rate = n / best[name]
        print(f"{name:<16}{best[name] * 1e3:9.2f}{rate / 1e6:10.0f}{rate / copy_rate:9.2f}"
              f"{cpu[name] * 1e3:9.2f}{cpu['numpy copy'] / cpu[name]:9.2f}")
    ratio = best["numpy copy"] / best["CNAT8 encode"]
    verdict = "met" if ratio >= TARGET else "NOT met"
    print(f"target: CNAT8 encode >= {TARGET}x the copy (wall clock): {ratio:.2f}x, {verdict}; "
          f"on CPU time {cpu['numpy copy'] / cpu['CNAT8 encode']:.2f}x")
    busy = os.getloadavg()[0]
    if busy > 1.5:
        print(f"note: load average {busy:.1f} on {os.cpu_count()} cores: other work shares "
              "the CPU, which slows the compute-bound rows more than the memory-bound copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
