"""`python tests/softswitch/faulty_switch.py FAULT ARGS...`: `python -m softswitch ARGS`,
started the same way (its main(), arguments and logging), with one fault injected into the
packet path for the first frame a port receives (tests only):

    raise     an exception escapes the packet loop (a bug outside the engine's own calls,
              which are caught per packet)
    segfault  a call to address 0 while the engine runs the frame (what native code calling
              a symbol MCJIT could not resolve did)
"""

import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from softswitch import runtime, switch  # noqa: E402
from softswitch.__main__ import main  # noqa: E402


def inject(fault: str) -> None:
    if fault == "raise":
        def drain(self, port):
            port.poll()
            raise RuntimeError("injected fault in the packet loop")

        runtime.Runtime._drain = drain
    elif fault == "segfault":
        def process(self, port, data):
            ctypes.CFUNCTYPE(None)(0)()
            return []

        switch.Switch.process = process
    else:
        raise SystemExit(f"unknown fault {fault!r}")


if __name__ == "__main__":
    inject(sys.argv.pop(1))
    sys.exit(main())
