"""worker/main.py against a softswitch process programmed by controller/main.py over P4Runtime,
the workers on the far ends of its UDP tunnel ports: the whole path without root."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.network import softswitch_missing

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=softswitch_missing() or "")


def free_ports(count: int, kind=socket.SOCK_DGRAM) -> list[int]:
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(count)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def test_three_workers_train_through_a_softswitch_process(tmp_path):
    n = 3
    (grpc,) = free_ports(1, socket.SOCK_STREAM)
    sw_ports, host_ports = free_ports(n), free_ports(n)
    topo = tmp_path / "topo.json"
    subprocess.run([PY, "controller/main.py", "topology", "--topo", "star", "--hosts", str(n),
                    "--grpc-port", str(grpc), "--jobs", f"h1-h{n}:slots=16:enc=cnat8",
                    "-o", str(topo)], cwd=ROOT, check=True, capture_output=True, timeout=60)
    tunnels = []
    for i in range(n):
        tunnels += ["-i", f"{i + 1}@udp:127.0.0.1:{sw_ports[i]}>127.0.0.1:{host_ports[i]}"]
    switch = subprocess.Popen([PY, "-m", "softswitch", "--no-p4", "--device-id", "1",
                               "--grpc-server-addr", f"127.0.0.1:{grpc}", *tunnels],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        ctl = subprocess.run([PY, "controller/main.py", "--topology", str(topo)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert ctl.returncode == 0, ctl.stdout + ctl.stderr
        workers = [subprocess.Popen(
            [PY, str(ROOT / "worker" / "main.py"), "--topology", str(topo), "--host",
             f"h{i + 1}", "--port", f"udp:127.0.0.1:{host_ports[i]}>127.0.0.1:{sw_ports[i]}",
             "--steps", "10", "--eval-every", "5", "--quiet", "--result",
             str(tmp_path / f"h{i + 1}.json")], cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for i in range(n)]
        outs = [w.communicate(timeout=120) for w in workers]
        assert [w.returncode for w in workers] == [0] * n, outs
    finally:
        switch.terminate()
        try:
            switch.wait(timeout=10)
        except subprocess.TimeoutExpired:
            switch.kill()
            switch.wait()
    results = [json.loads((tmp_path / f"h{i + 1}.json").read_text()) for i in range(n)]
    assert len({r["params_sha256"] for r in results}) == 1
    for r in results:
        assert r["encoding"] == "CNAT8" and r["result_encoding"] == "CNAT8"
        assert r["aggregation"] == "switch" and len(r["steps"]) == 10
        assert r["comm"]["packets_received"] >= r["comm"]["chunks"]
    assert results[0]["final_test_accuracy"] > 0.3          # ten steps, above chance (0.1)
