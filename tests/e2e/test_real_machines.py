"""docs/TORCH.md "On real machines", followed literally.

The section's ```sh blocks are read from the document and run as they are written, in order,
each on the machine its first line names, with the <placeholders> filled in: one network
namespace per machine (harness/machines.py), veths for the cables, BMv2 as its own process
on the switch server (with its own /tmp), the controller on a machine that reaches the
server's gRPC port over a management link, and one torchrun per worker launching
examples/ddp_switch.py. Each machine's folder is a checkout of this tree (links to it) that
holds its own topo.json and sessions.json. So the documented multi-machine path, and a
user's own DDP script under torchrun, cannot drift from the code.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

from harness.machines import Machines  # noqa: E402
from harness.netns import netns_missing  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "TORCH.md"
WORKERS = ("h1", "h2")
ROLES = {"the controller machine": ["ctl"], "the switch server": ["sw"],
         "each worker": list(WORKERS)}
# The section's steps: topology, switch, program, workers, counters, baseline.
STEPS = ["the controller machine", "the switch server", "the controller machine",
         "each worker", "the controller machine", "each worker"]
LONG_RUNNING = re.compile(r"(^|\s)(torchrun|simple_switch_grpc)\s")
GRPC = "203.0.113.10"
EXAMPLE_PARAMS = 64 * 64 + 64 + 64 * 10 + 10       # examples/ddp_switch.py's MLP
ELEMS = 168                                        # per packet, the default profile

# Its machines are namespaces named by this process (harness/machines.py), cabled inside
# them, and no Mininet: it runs beside the parallel part (tests/conftest.py).
pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.isolated]


def switch_command() -> str | None:
    """What starts the switch: BMv2 as documented, or softswitch with the same arguments
    where BMv2 is absent (NATSWITCH_SWITCH=auto) or chosen (soft); None if neither may."""
    kind = os.environ.get("NATSWITCH_SWITCH", "auto")
    if kind != "soft" and shutil.which("simple_switch_grpc"):
        return "simple_switch_grpc"
    return None if kind == "bmv2" else "python -m softswitch"


@pytest.fixture(autouse=True)
def runnable():
    reason = netns_missing()
    if reason:
        pytest.skip(reason)
    if switch_command() is None:
        pytest.skip("NATSWITCH_SWITCH=bmv2 but simple_switch_grpc is not on PATH")


def doc_blocks() -> list[tuple[str, list[str]]]:
    """(machine, shell lines) of every ```sh block of the section, in order."""
    text = DOC.read_text()
    start = text.index("\n## On real machines")
    section = text[start:text.index("\n## ", start + 1)]
    blocks = []
    for m in re.finditer(r"^( *)```sh\n(.*?)^\1```", section, re.M | re.S):
        body = re.sub(r"\\\n\s*", " ", textwrap.dedent(m.group(2)))
        first, *lines = body.strip().splitlines()
        where = re.fullmatch(r"# on (.+)", first.strip())
        assert where, f"a block of the section does not start with '# on MACHINE': {first!r}"
        blocks.append((where.group(1), [ln for ln in lines if ln.strip()]))
    return blocks


def expand(line: str, fill: dict[str, str], peers: list[dict[str, str]]) -> list[str]:
    """The line with its placeholders filled; a line about <peer-...> once per peer."""
    def filled(values: dict[str, str]) -> str:
        def value(m: re.Match) -> str:
            assert m.group(1) in values, f"placeholder <{m.group(1)}> the test does not fill"
            return values[m.group(1)]
        return re.sub(r"<([a-z0-9-]+)>", value, line)

    return [filled({**fill, **extra}) for extra in (peers if "<peer-" in line else [{}])]


def checkout(folder: Path) -> Path:
    """A machine's checkout: links to this tree's files, and room for its own."""
    folder.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name not in ("results", "topo.json",
                                                                  "sessions.json"):
            (folder / entry.name).symlink_to(entry)
    return folder


def counter(stats: str, event: str) -> int:
    m = re.search(rf"^\s+{event}\s+(\d+)$", stats, re.M)
    assert m, f"no {event} in the switch's counters:\n{stats}"
    return int(m.group(1))


def rx_packets(stats: str) -> int:
    """Frames the switch received on its worker ports (the port table's rx pkts)."""
    total = 0
    for h in WORKERS:
        m = re.search(rf"^\s+\d+\s+{h}\s+(\d+)\s", stats, re.M)
        assert m, f"no port of {h} in the switch's counters:\n{stats}"
        total += int(m.group(1))
    return total


def test_the_documented_steps_train_a_users_script_through_the_switch(tmp_path):
    blocks = doc_blocks()
    assert [where for where, _ in blocks] == STEPS, "the section's steps changed: update " \
        "this test with them"
    env = dict(os.environ, PYTHONPATH=str(REPO),     # the project installed, as this tree
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    env.pop("NATSWITCH_HOST", None)
    env.pop("NATSWITCH_JOB", None)
    dirs = {name: checkout(tmp_path / name) for name in ("ctl", "sw", *WORKERS)}
    logs = tmp_path / "logs"
    logs.mkdir()
    with Machines(["ctl", "sw", *WORKERS]) as m:
        # The machines: a management link from the controller to the switch server, and
        # one cable from each worker's NIC to a port of the switch server.
        m.cable("ctl", "mgmt0", "sw", "mgmt0")
        m.address("ctl", "mgmt0", "203.0.113.1/24")
        m.address("sw", "mgmt0", f"{GRPC}/24")
        ip = {}
        for i, h in enumerate(WORKERS, 1):
            m.cable(h, "eth0", "sw", f"swp{i}")
            ip[h] = f"198.51.100.{i}"
            m.address(h, "eth0", f"{ip[h]}/24")
        mac = {h: m.mac(h, "eth0") for h in WORKERS}
        common = {"switch-ip": GRPC, "len": "24", "switch-nic1": "swp1", "switch-nic2": "swp2",
                  **{f"{h}-ip": ip[h] for h in WORKERS}, **{f"{h}-mac": mac[h] for h in WORKERS}}
        fill = {"ctl": common, "sw": common,
                **{h: {**common, "nic": "eth0", "rank": str(r)} for r, h in enumerate(WORKERS)}}
        peers = {h: [{"peer-ip": ip[p], "peer-mac": mac[p]} for p in WORKERS if p != h]
                 for h in WORKERS}
        peers["ctl"] = peers["sw"] = []

        def step(n: int) -> tuple[list[tuple[str, object]], dict[str, str]]:
            """Block n, run on its machines: (long-running processes, outputs by machine)."""
            where, lines = blocks[n]
            started, outputs = [], {}
            for machine in ROLES[where]:
                for line in lines:
                    for cmd in expand(line, fill[machine], peers[machine]):
                        long_running = LONG_RUNNING.search(cmd)
                        if machine == "sw":
                            cmd = cmd.replace("simple_switch_grpc", switch_command(), 1)
                        if long_running:
                            log = logs / f"step{n + 1}-{machine}.log"
                            started.append((machine, log, m.start(
                                machine, cmd, dirs[machine], env, log,
                                private_tmp=machine == "sw")))
                            continue
                        r = m.run(machine, cmd, dirs[machine], env)
                        assert r.returncode == 0, \
                            f"step {n + 1} on {machine}: {cmd}\n{r.stdout}{r.stderr}"
                        outputs[machine] = outputs.get(machine, "") + r.stdout
            return started, outputs

        def finish(started, timeout: float = 300) -> dict[str, str]:
            """Waits for the processes; the first to fail, or one still running at the
            deadline, fails the test with its output."""
            deadline = time.monotonic() + timeout
            while any(proc.poll() is None for _, _, proc in started):
                for machine, log, proc in started:
                    assert proc.poll() in (None, 0), \
                        f"{machine} exited {proc.returncode}:\n" + log.read_text()[-4000:]
                    assert time.monotonic() < deadline, \
                        f"{machine} still running after {timeout:.0f} s:\n" \
                        + log.read_text()[-3000:]
                time.sleep(0.5)
            for machine, log, proc in started:
                assert proc.returncode == 0, \
                    f"{machine} exited {proc.returncode}:\n" + log.read_text()[-4000:]
            return {machine: log.read_text() for machine, log, _ in started}

        # 1. The topology, with the machines' addresses.
        step(0)
        # 2. The switch.
        (switch,), _ = step(1)
        deadline = time.monotonic() + 60
        while not m.run("sw", "ss -Hltn 'sport = :50051'", dirs["sw"], env).stdout.strip():
            assert switch[2].poll() is None, "the switch exited:\n" + switch[1].read_text()
            assert time.monotonic() < deadline, "the switch never listened on :50051"
            time.sleep(0.5)
        # 3. Programmed from the controller machine; its files copied to the workers.
        step(2)
        for h in WORKERS:
            for name in ("topo.json", "sessions.json"):
                shutil.copy(dirs["ctl"] / name, dirs[h] / name)
        session = json.loads((dirs["ctl"] / "sessions.json").read_text())["jobs"]["1"][
            "session"]
        # 4. The ranks, launched by torchrun on each worker.
        started, _ = step(3)
        out = finish(started)
        digests = []
        for rank, h in enumerate(WORKERS):
            text = out[h]
            steps = [int(s) for s in re.findall(rf"^rank {rank} step (\d+) loss", text, re.M)]
            assert steps and steps == list(range(1, len(steps) + 1)), text[-3000:]
            final = re.search(rf"^rank {rank} test accuracy ([\d.]+) parameters (\w+)$", text,
                              re.M)
            assert final, text[-3000:]
            digests.append(final.group(2))
            # It found its host by the IP on its NIC, the job, the controller's session,
            # and its raw socket on that NIC.
            assert re.search(rf"^rank {rank} {h} rank {rank} of 2, job 1 session {session}, "
                             rf"CNAT8 to the switch via raw:eth0: ", text, re.M), text[-3000:]
        assert digests[0] == digests[1], "the ranks' parameters differ"
        # 5. The switch's counters: every chunk of every step completed on the switch.
        _, stats = step(4)
        complete = counter(stats["ctl"], "COMPLETE")
        assert complete >= len(steps) * math.ceil(EXAMPLE_PARAMS / ELEMS), stats["ctl"]
        rx = rx_packets(stats["ctl"])
        # 6. The Gloo baseline: the same ranks, their TCP routed by the switch.
        started, _ = step(5)
        out = finish(started)
        gloo = []
        for rank, h in enumerate(WORKERS):
            final = re.search(rf"^rank {rank} test accuracy [\d.]+ parameters (\w+)$", out[h],
                              re.M)
            assert final and "to the switch via" not in out[h], out[h][-3000:]
            gloo.append(final.group(1))
        assert gloo[0] == gloo[1]
        _, again = step(4)
        assert counter(again["ctl"], "COMPLETE") == complete      # nothing aggregated
        assert rx_packets(again["ctl"]) > rx                      # but it all went through
