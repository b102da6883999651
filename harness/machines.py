"""Network namespaces standing for machines: commands run in one as on that machine.

Machines makes one namespace per machine (loopback up, no IPv6: the kernel would send
router and neighbour solicitations into the switch), cables them with veth pairs whose ends
get the names the machines' NICs have, and runs shell lines in a machine's namespace, in
the foreground or as long-running processes it ends on close(). Namespaces of an earlier run
that died before its cleanup are removed (they are named by its pid). Needs root.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path


class Machines:
    def __init__(self, names: list[str], prefix: str = "natsw-m") -> None:
        self.prefix = f"{prefix}{os.getpid()}"
        self.ns = {name: f"{self.prefix}-{name}" for name in names}
        self.procs: list[subprocess.Popen] = []
        self._remove_stale(prefix)
        try:
            for ns in self.ns.values():
                self._ip("netns", "add", ns)
                self._ip("-n", ns, "link", "set", "lo", "up")
                self.run_argv(ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                                   "net.ipv6.conf.default.disable_ipv6=1"])
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _remove_stale(prefix: str) -> None:
        netns = Path("/run/netns")
        for stale in netns.glob(f"{prefix}*-*") if netns.is_dir() else []:
            pid = stale.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                subprocess.run(["ip", "netns", "del", stale.name], capture_output=True,
                               timeout=60)

    @staticmethod
    def _ip(*args: str) -> str:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
        return r.stdout

    def run_argv(self, ns: str, argv: list[str]) -> None:
        r = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {ns} failed: {r.stderr.strip()}")

    def cable(self, a: str, a_nic: str, b: str, b_nic: str) -> None:
        """A veth pair: NIC `a_nic` of machine `a` to NIC `b_nic` of machine `b`, both up."""
        self._ip("link", "add", a_nic, "netns", self.ns[a], "type", "veth", "peer", "name",
                 b_nic, "netns", self.ns[b])
        self._ip("-n", self.ns[a], "link", "set", a_nic, "up")
        self._ip("-n", self.ns[b], "link", "set", b_nic, "up")

    def address(self, machine: str, nic: str, cidr: str) -> None:
        self._ip("-n", self.ns[machine], "addr", "add", cidr, "dev", nic)

    def mac(self, machine: str, nic: str) -> str:
        (link,) = json.loads(self._ip("-n", self.ns[machine], "-j", "link", "show", nic))
        return link["address"]

    def _argv(self, machine: str, line: str, private_tmp: bool) -> list[str]:
        # Killed with the test process even when that dies without cleaning up.
        head = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
        if private_tmp:    # `ip netns exec` gives the command a mount namespace of its own
            line = f"mount -t tmpfs tmpfs /tmp && {line}"
        return [*head, "ip", "netns", "exec", self.ns[machine], "sh", "-c", line]

    def run(self, machine: str, line: str, cwd: Path, env: dict,
            timeout: float = 120) -> subprocess.CompletedProcess:
        """A shell line on `machine`, to its end."""
        return subprocess.run(self._argv(machine, line, False), cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, machine: str, line: str, cwd: Path, env: dict, log: Path,
              private_tmp: bool = False) -> subprocess.Popen:
        """A long-running shell line on `machine` (its own process group), output to `log`;
        ended by close() if still running. private_tmp: the machine's own /tmp."""
        with open(log, "wb") as f:
            proc = subprocess.Popen(self._argv(machine, line, private_tmp), cwd=cwd, env=env,
                                    stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        # The whole group: a launcher that ended may have left its children.
        for proc in self.procs:
            self._signal(proc, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._signal(proc, signal.SIGKILL)
            proc.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)

    @staticmethod
    def _signal(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> Machines:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
