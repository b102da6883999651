"""Runs packets through BMv2 simple_switch with pcap files as ports (no root).

simple_switch's --use-files mode reads port X's input from X_in.pcap and
writes what it sends on X to X_out.pcap, without interfaces. Input packets
are replayed in timestamp order, as fast as the switch takes them, after a
wait during which we configure the switch with simple_switch_CLI (Thrift).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PCAP_HDR = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


def available() -> str | None:
    """Path of simple_switch when it and its CLI are on PATH."""
    ss = shutil.which("simple_switch")
    return ss if ss and shutil.which("simple_switch_CLI") else None


def write_pcap(path: Path, packets: list[tuple[float, bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(PCAP_HDR)
        for ts, data in packets:
            sec = int(ts)
            usec = int(round((ts - sec) * 1e6))
            f.write(struct.pack("<IIII", sec, usec, len(data), len(data)))
            f.write(data)


def read_pcap(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    raw = path.read_bytes()
    out, pos = [], 24
    while pos + 16 <= len(raw):
        _, _, incl, _ = struct.unpack_from("<IIII", raw, pos)
        pos += 16
        if pos + incl > len(raw):
            break
        out.append(raw[pos : pos + incl])
        pos += incl
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, deadline: float, proc: subprocess.Popen) -> bool:
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class SimpleSwitch:
    """One simple_switch process with pcap-file ports; use as a context manager."""

    def __init__(self, json_path: Path, ports: set[int], inputs: list[tuple[int, bytes]],
                 wait: int = 3, workdir: Path | None = None, start_timeout: float = 10.0):
        self.json_path = Path(json_path)
        self.ports = sorted(set(ports) | {p for p, _ in inputs})
        self.inputs = inputs
        self.wait = wait
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="natswitch-bmv2-")
        self.dir = Path(workdir or self._tmp.name)
        self.thrift = free_port()
        self.proc: subprocess.Popen | None = None
        self.start_timeout = start_timeout
        self.started_at = 0.0  # when the Thrift port answered (the program is loaded)

    def __enter__(self):
        per_port: dict[int, list] = {p: [] for p in self.ports}
        for i, (port, data) in enumerate(self.inputs):
            per_port[port].append((1.0 + i * 1e-3, data))  # timestamps give the order
        for p in self.ports:
            write_pcap(self.dir / f"p{p}_in.pcap", per_port[p])
        cmd = [available() or "simple_switch", "--use-files", str(self.wait),
               "--thrift-port", str(self.thrift)]
        for p in self.ports:
            cmd += ["-i", f"{p}@{self.dir / f'p{p}'}"]
        # BMv2's notification socket is named after the device id in /tmp by default;
        # a path of our own lets several switches run at once.
        cmd += ["--notifications-addr", f"ipc://{self.dir / 'notifications.ipc'}"]
        cmd.append(str(self.json_path))
        self.log = open(self.dir / "switch.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        t0 = time.monotonic()
        if not _wait_listening(self.thrift, t0 + self.start_timeout, self.proc):
            log = (self.dir / "switch.log").read_bytes().decode(errors="replace")[-2000:]
            self.close()
            raise RuntimeError(f"simple_switch did not start:\n{log}")
        self.started_at = time.monotonic()
        return self

    def cli(self, commands: list[str], setup: bool = True) -> str:
        """Runs simple_switch_CLI commands; setup must finish within the start wait."""
        if not commands:
            return ""
        # run the CLI script with our interpreter: it has the thrift module
        cli = shutil.which("simple_switch_CLI")
        # --json: read the program locally instead of fetching it over Thrift
        r = subprocess.run([sys.executable, cli, "--thrift-port", str(self.thrift),
                            "--json", str(self.json_path)],
                           input="\n".join(commands) + "\n", capture_output=True, text=True,
                           timeout=max(30, 30 + self.wait))
        if r.returncode != 0 or "Error" in r.stdout or "Invalid" in r.stdout:
            raise RuntimeError(f"simple_switch_CLI failed: {r.stdout}\n{r.stderr}")
        if setup and time.monotonic() - self.started_at > self.wait:
            raise RuntimeError("switch configuration took longer than the start wait")
        return r.stdout

    def outputs(self) -> dict[int, list[bytes]]:
        return {p: read_pcap(self.dir / f"p{p}_out.pcap") for p in self.ports}

    def count(self) -> int:
        return sum(len(v) for v in self.outputs().values())

    def settle(self, expected: int | None = None, idle: float = 1.0,
               timeout: float = 60.0) -> dict[int, list[bytes]]:
        """Waits for `expected` outputs, or for output to stop growing for `idle` s."""
        deadline = self.started_at + self.wait + timeout
        time.sleep(max(0.0, self.started_at + self.wait - time.monotonic()))
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.count()
            if expected is not None and n >= expected:
                break
            if n != last:
                last, last_change = n, time.monotonic()
            elif time.monotonic() - last_change >= idle:
                break
            time.sleep(0.05)
        return self.outputs()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)
        if getattr(self, "log", None):
            self.log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __exit__(self, *exc):
        self.close()
