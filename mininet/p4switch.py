"""A Mininet switch that runs the P4 program on BMv2 or on the embedded target.

Both targets take the same arguments (`-i PORT@INTF`, `--device-id`, a gRPC
address) and start without a program (`--no-p4`): the controller pushes
p4src/build over P4Runtime. The process is started and stopped by its PID,
never by name, so other switches and other runs are left alone.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from mininet.node import Switch

REPO = Path(__file__).resolve().parent.parent


def resolve_kind(kind: str) -> str:
    """'auto' means BMv2 where simple_switch_grpc is installed, else the embedded target."""
    if kind == "auto":
        return "bmv2" if shutil.which("simple_switch_grpc") else "soft"
    if kind == "bmv2" and not shutil.which("simple_switch_grpc"):
        raise RuntimeError("--switch bmv2: simple_switch_grpc is not on PATH")
    if kind not in ("bmv2", "soft"):
        raise ValueError(f"unknown switch kind {kind!r} (auto, bmv2 or soft)")
    return kind


def switch_command(kind: str, device_id: int, grpc_addr: str, ports: dict[int, str],
                   cpu_port: int | None = None, pcap_dir: str | None = None,
                   thrift_port: int | None = None) -> list[str]:
    """The command line that starts one switch; identical options for both targets."""
    intfs = [a for port, name in sorted(ports.items()) for a in ("-i", f"{port}@{name}")]
    common = ["--device-id", str(device_id), *intfs]
    if thrift_port is not None:          # BMv2 listens on 9090 unless told; softswitch ignores it
        common += ["--thrift-port", str(thrift_port)]
    if pcap_dir:
        common += ["--pcap", pcap_dir] if kind == "bmv2" else ["--pcap-dir", pcap_dir]
    target = ["--grpc-server-addr", grpc_addr]
    if cpu_port is not None:
        target += ["--cpu-port", str(cpu_port)]
    if kind == "bmv2":
        # BMv2 names its notification socket after the device id in /tmp; a name of
        # our own keeps other BMv2 processes on this machine out of the way.
        notify = f"ipc:///tmp/natswitch-{os.getpid()}-{device_id}.ipc"
        return ["simple_switch_grpc", *common, "--no-p4", "--notifications-addr", notify,
                "--", *target]
    return [sys.executable, "-m", "softswitch", *common, *target, "--no-p4"]


def wait_for_port(addr: str, proc: subprocess.Popen, timeout: float) -> None:
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"switch process exited with code {proc.returncode}")
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no gRPC server on {addr} after {timeout:.0f} s")


class P4Switch(Switch):
    """One P4 switch process on this node's interfaces."""

    def __init__(self, name, kind="soft", device_id=1, grpc_addr="127.0.0.1:50051",
                 thrift_port=None, log_dir="/tmp", pcap_dir=None, start_timeout=60.0, **params):
        super().__init__(name, **params)
        self.kind = kind
        self.device_id = device_id
        self.grpc_addr = grpc_addr
        self.thrift_port = thrift_port
        self.log_path = Path(log_dir) / f"{name}.log"
        self.pcap_dir = pcap_dir
        self.start_timeout = start_timeout
        self.proc = None

    def start(self, controllers):
        ports = {self.ports[i]: i.name for i in self.intfList() if i.name != "lo"}
        cmd = switch_command(self.kind, self.device_id, self.grpc_addr, ports,
                             pcap_dir=self.pcap_dir, thrift_port=self.thrift_port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir:
            Path(self.pcap_dir).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=REPO, start_new_session=True)

    def wait_ready(self):
        try:
            wait_for_port(self.grpc_addr, self.proc, self.start_timeout)
        except RuntimeError as exc:
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{self.name} ({self.kind}): {exc}; log {self.log_path}:\n"
                               + "\n".join(tail)) from None

    def stop(self, deleteIntfs=True):
        self.terminate_process()
        super().stop(deleteIntfs)

    def terminate_process(self, timeout=5.0):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
