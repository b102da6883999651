"""Runs inside an emulated host: allreduce calls of seeded tensors, traced and pickled.

    python tests/e2e/probe.py --topology T --host h1 --session S --out probe-h1.pkl [--calls 2]

The end-to-end tests start one probe per worker, then check every chunk against
the integer sum of what the workers sent (harness/workers.py's check_exact).
"""

import argparse
import pickle
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from harness.workers import Trace  # noqa: E402
from worker import main as worker_main  # noqa: E402
from worker.allreduce import AllReduceClient, AllReduceError  # noqa: E402


def tensors(rank: int, calls: int, size: int) -> list[np.ndarray]:
    rng = np.random.default_rng([7, rank])
    # magnitudes over many octaves, as gradients have
    return [(rng.standard_normal(size) * 2.0 ** rng.integers(-12, 4, size)).astype(np.float32)
            for _ in range(calls)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--job", type=int, default=1)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--size", type=int, default=3000)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--encoding", default="cnat8")
    ap.add_argument("--session", type=int, required=True)
    ap.add_argument("--progress", action="store_true",
                    help="print 'call N' after each call, flushed (a test waits for it)")
    args = ap.parse_args()
    wargs = worker_main.build_parser().parse_args(
        ["--topology", args.topology, "--host", args.host, "--job", str(args.job),
         "--encoding", args.encoding, "--timeout", str(args.timeout),
         "--session", str(args.session)])
    r = worker_main.resolve(wargs)
    port, framer, encoding, _ = worker_main.open_transport(wargs, r)
    trace = Trace()
    job = worker_main.worker_job(wargs, r, encoding, framer)
    client = AllReduceClient(port, framer, job, seed=r["rank"], timeout=args.timeout,
                             rto=0.5, rto_max=1.0, trace=trace)
    xs = tensors(r["rank"], args.calls, args.size)
    record = {"rank": r["rank"], "workers": r["workers"], "tensors": xs, "outputs": [],
              "error": None}
    start = time.monotonic()
    try:
        for i, x in enumerate(xs, 1):
            record["outputs"].append(client.allreduce(x))
            if args.progress:
                print(f"call {i}", flush=True)
    except AllReduceError as e:
        record["error"] = str(e)
    finally:
        port.close()
    record.update(seconds=time.monotonic() - start, rows=trace.rows,
                  stats=client.stats.as_dict())
    args.out.write_bytes(pickle.dumps(record))
    print(f"{args.host}: {'error: ' + record['error'] if record['error'] else 'ok'}")
    return 1 if record["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
