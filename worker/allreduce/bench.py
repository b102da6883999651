"""Micro-benchmark of the worker's hot path: `python -m worker.allreduce.bench`.

Prints frames built and parsed per second from the templates (no codec), and the
packets per second of one client doing a 1M-element allreduce against an in-process
parameter server with one worker (codec, framing and protocol included; the server's
own work is in the same thread, so the client alone is faster).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from worker import wire
from worker.allreduce.client import AllReduceClient, JobParams
from worker.baseline import ParameterServer
from worker.frames import Framer
from worker.transport import QueuePort


def rate(fn, n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t)


def framing(n: int) -> None:
    f = Framer(("02:00:0a:00:01:01", "10.0.1.1"), ("02:4e:41:ff:ff:fe", "10.255.255.254"))
    for name, enc, payload in (("CNAT8", wire.ENC_CNAT8, np.zeros(wire.ELEMS, np.uint8)),
                               ("FIXED32", wire.ENC_FIXED32, np.zeros(wire.ELEMS, np.int32))):
        built = rate(lambda i, enc=enc, payload=payload: f.build(
            wire.MSG_CONTRIB, enc, 1, 1, i & 63, i & 1, 0, 1, i, payload), n)
        frame = f.build(wire.MSG_RESULT, enc, 1, 1, 0, 0, 0, 1, 0, payload)
        parsed = rate(lambda i, frame=frame: f.parse(frame), n)
        print(f"framing {name:8s} build {built:12,.0f} frames/s   parse {parsed:12,.0f} frames/s")


def client(elements: int, window: int) -> None:
    x = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    for name in ("cnat8", "fixed32", "float32"):
        ps = ParameterServer(1, slots=window)
        port = QueuePort()
        port.deliver = lambda frame, port=port, ps=ps: [port.put(b) for _, b in
                                                        ps.handle(frame, 0)]
        c = AllReduceClient(port, Framer(), JobParams(1, 1, 1, window,
                                                      wire.ENCODING_BY_NAME[name]))
        c.allreduce(x)                     # warm up
        t = time.perf_counter()
        c.allreduce(x)
        dt = time.perf_counter() - t
        print(f"client  {name:8s} {c.last.packets_sent / dt:12,.0f} packets/s "
              f"({elements / dt / 1e6:.1f} M elements/s, {c.last.retransmissions} "
              "retransmissions) with the server in the same thread")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=200_000)
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--window", type=int, default=64)
    args = ap.parse_args()
    framing(args.frames)
    client(args.elements, args.window)


if __name__ == "__main__":
    main()
