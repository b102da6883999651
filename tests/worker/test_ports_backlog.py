"""RawPort.backlog() on a shaped veth, as in Mininet (root only): frames a worker sent that
still wait in its interface's queue show as a backlog until they leave, which is what the
uplink pacer (worker/allreduce/pacing.py UplinkPacer) reads."""

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from worker.transport import RawPort

    port = RawPort("vA")
    frames = [bytes(range(256)) * 4] * 20          # 1 kB each
    assert port.backlog() == 0
    port.send_many(frames)
    queued = port.backlog()
    print("queued", queued)
    # 1 Mbit/s: 8 ms a frame; right after the burst nearly all of it still waits
    assert queued >= 15 * 1024, queued
    time.sleep(0.05)
    later = port.backlog()
    assert 0 < later < queued, (queued, later)
    end = time.monotonic() + 3
    while port.backlog() and time.monotonic() < end:
        time.sleep(0.02)
    assert port.backlog() == 0, "the queue never drained"
    port.close()
    print("ok")
""")


def test_a_shaped_uplinks_queue_shows_as_the_ports_backlog_until_it_drains():
    a, b = f"nsbA{uuid.uuid4().hex[:6]}", f"nsbB{uuid.uuid4().hex[:6]}"

    def run(*cmd, ns=None):
        pre = ["ip", "netns", "exec", ns] if ns else []
        return subprocess.run(pre + list(cmd), check=True, capture_output=True, text=True)

    run("ip", "netns", "add", a)
    run("ip", "netns", "add", b)
    try:
        run("ip", "link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "vB",
            "netns", b)
        run("ip", "link", "set", "vA", "up", ns=a)
        run("ip", "link", "set", "vB", "up", ns=b)
        run("tc", "qdisc", "add", "dev", "vA", "root", "handle", "5:", "htb", "default", "1",
            ns=a)
        run("tc", "class", "add", "dev", "vA", "parent", "5:", "classid", "5:1", "htb",
            "rate", "1mbit", "burst", "2k", ns=a)
        result = subprocess.run(["ip", "netns", "exec", a, sys.executable, "-c",
                                 SCRIPT.format(repo=str(REPO))],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip().endswith("ok")
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False)
