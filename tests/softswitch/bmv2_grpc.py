"""simple_switch_grpc with pcap-file ports (no root), for P4Runtime checks that need traffic.

Like tests/p4/bmv2.py: --use-files WAIT replays each port's input pcap once WAIT
seconds have passed, so the pipeline and entries must be written over
P4Runtime within that wait; what goes out on port X lands in pX_out.pcap.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from p4rt_client import Client

from tests.p4 import bmv2


def available() -> bool:
    return shutil.which("simple_switch_grpc") is not None


class GrpcSwitch:
    """One simple_switch_grpc --no-p4 process; `client` is primary once entered."""

    def __init__(self, ports: set[int], inputs: list[tuple[int, bytes]], wait: int = 8,
                 start_timeout: float = 30.0):
        self.ports = sorted(set(ports) | {p for p, _ in inputs})
        self.inputs = inputs
        self.wait = wait
        self.start_timeout = start_timeout
        self._tmp = tempfile.TemporaryDirectory(prefix="natswitch-bmv2-grpc-")
        self.dir = Path(self._tmp.name)
        self.proc: subprocess.Popen | None = None
        self.client: Client | None = None
        self.started_at = 0.0

    def __enter__(self):
        per_port: dict[int, list] = {p: [] for p in self.ports}
        for i, (port, data) in enumerate(self.inputs):
            per_port[port].append((1.0 + i * 1e-3, data))
        for p in self.ports:
            bmv2.write_pcap(self.dir / f"p{p}_in.pcap", per_port[p])
        # free_port() only asks the kernel for a port that was free a moment ago: a switch
        # that exits at start (its port taken meanwhile) is retried on fresh ports.
        for _ in range(3):
            grpc_port = self._start()
            if self._wait_started(grpc_port):
                break
        else:
            tail = (self.dir / "switch.log").read_bytes()[-2000:].decode(errors="replace")
            self.close()
            raise RuntimeError(f"simple_switch_grpc did not start (3 tries); log:\n{tail}")
        self.started_at = time.monotonic()
        self.client = Client(f"127.0.0.1:{grpc_port}")
        assert self.client.arbitrate((0, 1)).arbitration.status.code == 0
        return self

    def _start(self) -> int:
        grpc_port = bmv2.free_port()
        cmd = ["simple_switch_grpc", "--use-files", str(self.wait), "--no-p4", "--device-id",
               "1", "--thrift-port", str(bmv2.free_port()),
               "--notifications-addr", f"ipc://{self.dir / 'notifications.ipc'}"]
        for p in self.ports:
            cmd += ["-i", f"{p}@{self.dir / f'p{p}'}"]
        cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--cpu-port", "255"]
        if getattr(self, "log", None):
            self.log.close()
        self.log = open(self.dir / "switch.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return grpc_port

    def _wait_started(self, grpc_port: int) -> bool:
        """True once gRPC accepts; False if the switch exited (it is reaped)."""
        deadline = time.monotonic() + self.start_timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", grpc_port), timeout=0.2).close()
                return True
            except OSError:
                time.sleep(0.05)
        if self.proc.poll() is None:          # alive but silent past the timeout: give up
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return False

    def settle(self, expected: int, timeout: float = 30.0) -> dict[int, list[bytes]]:
        """Waits for `expected` packets out (the configuration must be done by now)."""
        if time.monotonic() - self.started_at > self.wait:
            raise RuntimeError("configuration took longer than the --use-files wait")
        deadline = self.started_at + self.wait + timeout
        while time.monotonic() < deadline:
            outs = {p: bmv2.read_pcap(self.dir / f"p{p}_out.pcap") for p in self.ports}
            if sum(len(v) for v in outs.values()) >= expected and \
                    time.monotonic() > self.started_at + self.wait:
                return outs
            time.sleep(0.05)
        return outs

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
        self._tmp.cleanup()

    def __exit__(self, *exc):
        self.close()
