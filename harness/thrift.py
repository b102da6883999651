"""BMv2's Thrift runtime interface, for what its P4Runtime server does not serve: register
arrays are read (and written back) here, as simple_switch_CLI's register_read does.

The Thrift client modules (bm_runtime) come with BMv2; the simple_switch_CLI wrapper names
the folder it put them in, and the `thrift` package is Debian's python3-thrift."""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import time
from pathlib import Path


def _client_modules() -> str | None:
    """Makes bm_runtime importable; why not, or None."""
    try:
        import bm_runtime  # noqa: F401
        return None
    except ImportError:
        pass
    cli = shutil.which("simple_switch_CLI")
    dirs = []
    if cli:
        dirs += re.findall(r'sys\.path\.append\("([^"]+)"\)', Path(cli).read_text(errors="replace"))
    dirs += [str(p) for p in Path("/usr/local/lib").glob("python3*/site-packages")]
    for d in dirs:
        if (Path(d) / "bm_runtime").is_dir():
            sys.path.append(d)
            break
    try:
        import bm_runtime  # noqa: F401, F811
        import thrift  # noqa: F401
    except ImportError as e:
        return f"BMv2's Thrift client modules are not importable ({e})"
    return None


def thrift_missing() -> str | None:
    """Why registers cannot be read from BMv2 here, or None."""
    return _client_modules()


class Bmv2Thrift:
    """One connection to a switch's Thrift server (context 0). `enter` is a context manager
    the socket is opened in (harness.netns.inside(ns) for a switch in a namespace)."""

    def __init__(self, port: int, host: str = "127.0.0.1", enter=contextlib.nullcontext,
                 timeout: float = 20.0):
        why = _client_modules()
        if why:
            raise RuntimeError(why)
        from bm_runtime.standard import Standard
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport

        deadline = time.monotonic() + timeout
        while True:
            self.transport = TTransport.TBufferedTransport(TSocket.TSocket(host, port))
            try:
                with enter():
                    self.transport.open()
                break
            except TTransport.TTransportException:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no Thrift server on {host}:{port}") from None
                time.sleep(0.1)
        proto = TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(self.transport), "standard")
        self.client = Standard.Client(proto)

    def register(self, name: str) -> list[int]:
        return list(self.client.bm_register_read_all(0, name))

    def write_register(self, name: str, index: int, value: int) -> None:
        self.client.bm_register_write(0, name, index, value)

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of an indirect counter."""
        v = self.client.bm_counter_read(0, name, index)
        return v.packets, v.bytes

    def close(self) -> None:
        self.transport.close()
