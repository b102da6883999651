"""Raw AF_PACKET ports on a veth pair inside a private network namespace (root only)."""

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

SCRIPT = textwrap.dedent("""
    import logging, socket, subprocess, time
    from softswitch.ports import open_port, parse_port_spec

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ETYPE = b"\\x88\\xb5"

    def veth():
        subprocess.run(["ip", "link", "add", "vA", "type", "veth", "peer", "name", "vB"],
                       check=True)
        for dev in ("vA", "vB"):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)

    def probe_socket():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind(("vB", 0))
        s.settimeout(0.2)
        return s

    def frame(tag):
        return b"\\xff" * 6 + b"\\x02\\x00\\x00\\x00\\x00\\x01" + ETYPE + tag * 50

    def recv_tagged(recv, deadline=3.0):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            try:
                f = recv()
            except socket.timeout:
                continue
            if f is not None and f[12:14] == ETYPE:
                return f
        return None

    veth()
    port = open_port(parse_port_spec("1@vA"), None, logging.getLogger("port"))
    peer = probe_socket()
    peer.send(frame(b"a"))
    assert recv_tagged(lambda: port.recv(0.2)) == frame(b"a"), "no frame from the peer"
    assert port.send(frame(b"b"))
    assert recv_tagged(lambda: peer.recv(4096)) == frame(b"b"), "sent frame not on the wire"
    assert recv_tagged(lambda: port.recv(0.2), 0.5) is None, "own frame read back"
    peer.close()

    subprocess.run(["ip", "link", "del", "vA"], check=True)
    for _ in range(5):
        assert port.recv(0.2) is None
        port.send(frame(b"c"))  # to a missing interface: dropped, no exception
    veth()
    time.sleep(1.5)  # the port retries once a second
    peer = probe_socket()
    end = time.monotonic() + 5
    got = None
    while got is None and time.monotonic() < end:
        peer.send(frame(b"d"))
        got = recv_tagged(lambda: port.recv(0.2), 0.5)
    assert got == frame(b"d"), "port did not come back with the interface"
    port.close()
    print("RAW PORT OK")
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def run_in_netns(script: str) -> subprocess.CompletedProcess:
    """`script` run by this Python in a network namespace of its own, deleted after."""
    ns = f"ssw-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", script],
                              capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parents[2])
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_raw_port_in_netns_survives_interface_loss():
    result = run_in_netns(SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "RAW PORT OK" in result.stdout
    assert "lost" in result.stderr and "is back" in result.stderr


VLAN_SCRIPT = textwrap.dedent("""
    import logging, socket, subprocess, time
    from softswitch.ports import open_port, parse_port_spec

    subprocess.run(["ip", "link", "add", "vA", "type", "veth", "peer", "name", "vB"],
                   check=True)
    for dev in ("vA", "vB"):
        subprocess.run(["ip", "link", "set", dev, "up"], check=True)
    port = open_port(parse_port_spec("1@vA"), None, logging.getLogger("port"))
    peer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    peer.bind(("vB", 0))
    macs = b"\\x02\\x00\\x00\\x00\\x00\\x02" + b"\\x02\\x00\\x00\\x00\\x00\\x01"
    ipv4 = b"\\x08\\x00" + b"\\x45" + bytes(45)
    # 802.1Q (PCP 1, VID 100); 802.1ad over 802.1Q; untagged
    frames = [macs + b"\\x81\\x00\\x20\\x64" + ipv4,
              macs + b"\\x88\\xa8\\x00\\x0a" + b"\\x81\\x00\\x00\\x14" + ipv4,
              macs + ipv4]
    for f in frames:
        peer.send(f)
    got, end = [], time.monotonic() + 5
    while len(got) < len(frames) and time.monotonic() < end:
        f = port.recv(0.2)
        if f is not None and f[:12] == macs:
            got.append(f)
    for want, have in zip(frames, got):
        print("SENT", want.hex())
        print("READ", have.hex())
    assert got == frames, "tagged frames not read as sent"
    print("VLAN OK")
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_raw_port_reads_vlan_tags_the_kernel_strips():
    # the kernel moves the outer tag into PACKET_AUXDATA; the port must put it back
    result = run_in_netns(VLAN_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "VLAN OK" in result.stdout


RUNTIME_SCRIPT = textwrap.dedent("""
    import logging, socket, subprocess, sys, time
    sys.path.insert(0, "tests/softswitch")
    from fakes import FakeSwitch
    from softswitch.ports import (CMSG_SPACE, PACKET_AUXDATA, SOL_PACKET, open_port,
                                  parse_port_spec, restore_vlan)
    from softswitch.runtime import Runtime

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ETYPE = b"\\x88\\xb5"
    MACS = b"\\x02\\x00\\x00\\x00\\x00\\x02" + b"\\x02\\x00\\x00\\x00\\x00\\x01"

    def veth(a, b):
        subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
        for dev in (a, b):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)

    def host(dev):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((dev, 0))
        s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)     # SO_RCVBUFFORCE
        s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)      # the host's end strips tags too
        s.settimeout(0.2)
        return s

    def ours(s, want, deadline=5.0):
        got, end = [], time.monotonic() + deadline
        while len(got) < want and time.monotonic() < end:
            try:
                f, anc, _, _ = s.recvmsg(4096, CMSG_SPACE)
            except socket.timeout:
                continue
            f = restore_vlan(f, anc)
            if f[:12] == MACS:
                got.append(f)
        return got

    veth("vA", "vB")
    veth("vC", "vD")
    switch = FakeSwitch(device_id=1, cpu_port=255)
    switch.behaviour = lambda port, data: [(3 - port, data)]
    runtime = Runtime(switch, [open_port(parse_port_spec(s), None, logging.getLogger("port"))
                               for s in ("1@vA", "2@vC")],
                      device_id=1, grpc_addr="127.0.0.1:0")
    runtime.start()
    b, d = host("vB"), host("vD")
    # a burst from each side: every frame, in order, with its VLAN tag back in place
    tagged = MACS + b"\\x81\\x00\\x20\\x64" + ETYPE + bytes(50)
    burst = [MACS + ETYPE + i.to_bytes(2, "big") + bytes(48) for i in range(300)]
    for f in [tagged] + burst:
        b.send(f)
    got = ours(d, 301)
    assert got == [tagged] + burst, f"port 1 -> 2: {len(got)} of 301 frames, or reordered"
    for f in burst:
        d.send(f)
    got = ours(b, 300)
    assert got == burst, f"port 2 -> 1: {len(got)} of 300 frames, or reordered"

    subprocess.run(["ip", "link", "del", "vA"], check=True)
    d.send(burst[0])                  # out of a missing interface: dropped, the loop goes on
    veth("vA", "vB")
    b.close()
    b = host("vB")
    end, got = time.monotonic() + 8, []
    while not got and time.monotonic() < end:
        b.send(burst[1])
        got = ours(d, 1, 0.5)
    assert got == [burst[1]], "the loop did not read the interface once it came back"
    d.send(burst[2])
    assert ours(b, 1) == [burst[2]], "the loop did not send on the interface once it came back"
    runtime.stop()
    print("RUNTIME RAW OK")
""")


def test_runtime_loop_forwards_raw_ports_in_order_and_survives_interface_loss():
    result = run_in_netns(RUNTIME_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "RUNTIME RAW OK" in result.stdout
    assert "lost" in result.stderr and "is back" in result.stderr


NATIVE_SCRIPT = textwrap.dedent("""
    import collections, json, logging, socket, subprocess, sys, time
    from bench.softswitch_vector import stream
    from softswitch import Switch
    from softswitch.ports import open_port, parse_port_spec
    from softswitch.runtime import Runtime
    from softswitch.tables import Entry
    from worker import wire
    from worker.frames import L2_LEN

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    J = json.load(open("p4src/build/agg.json"))
    N = 4

    def job(session):
        return Entry((1,), "NatIngress.agg.job_root",
                     [0, 64, N, 1, wire.ENC_FIXED32, 255, session, 0x5EED])

    def switch(native):
        sw = Switch(seed=1, native=native)
        sw.load(J)
        sw.tables["NatIngress.agg.jobs"].insert(job(1))
        for w in range(N):
            sw.tables["NatIngress.agg.children"].insert(Entry(
                (1, w + 1), "NatIngress.agg.set_child", [w, 1, 1 << 30]))
        return sw

    def group(sw, extra):
        reps = [(w + 1, 0) for w in range(N)] + [(10 + k, k) for k in range(extra)]
        (sw.pre.modify if 1 in sw.pre.groups else sw.pre.create)(1, reps)

    for i in range(1, N + 1):
        subprocess.run(["ip", "link", "add", f"vA{i}", "type", "veth", "peer", "name",
                        f"vB{i}"], check=True)
        for dev in (f"vA{i}", f"vB{i}"):
            subprocess.run(["ip", "link", "set", dev, "up"], check=True)
    live, ref = switch(True), switch(False)
    assert live.tier == "native"
    runtime = Runtime(live, [open_port(parse_port_spec(f"{i}@vA{i}"), None,
                                       logging.getLogger("port")) for i in range(1, N + 1)],
                      device_id=1, grpc_addr="127.0.0.1:0")
    assert all(p.ring is not None for p in runtime.ports.values())
    runtime.start()
    hosts = {}
    for i in range(1, N + 1):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((f"vB{i}", 0))
        s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)
        s.settimeout(0.2)
        hosts[i] = s

    def round_trip(session, extra):
        # one more port in the group has no interface: its copies go back to Python (-2);
        # 65 replicas and more are more than the mirror holds: Python replicates (-1)
        group(live, extra)
        group(ref, extra)
        for sw in (live, ref):      # the control plane moves the job to the stream's session
            sw.tables["NatIngress.agg.jobs"].modify(job(session))
        pkts = stream(N, 64, 4 * 64 * 2, 168, session, 7)
        want = collections.defaultdict(list)
        got = collections.defaultdict(list)
        # every slot's use 0, then its use 1 once use 0 is answered, as workers send them
        # (the four ports' frames reach the switch in any order; a use 1 before its use 0
        # completed would be one no correct worker sends: dropped as EARLY)
        half = len(pkts) // 2
        for part in (pkts[:half], pkts[half:]):
            for port, frame in part:
                for p, out in ref.process(port, frame):
                    if p <= N:
                        want[p].append(out)
            for port, frame in part:
                hosts[port].send(frame)
            end = time.monotonic() + 20
            while sum(map(len, got.values())) < sum(map(len, want.values())) and \\
                    time.monotonic() < end:
                for p, s in hosts.items():
                    try:
                        f = s.recv(4096)
                    except socket.timeout:
                        continue
                    if len(f) > L2_LEN and f[L2_LEN] == wire.MSG_RESULT:
                        got[p].append(f)
        for p in want:
            assert sorted(got[p]) == sorted(want[p]), f"port {p}: {len(got[p])} of " \\
                f"{len(want[p])} results, or others"
        return sum(map(len, want.values()))

    n1 = round_trip(1, 1)
    n2 = round_trip(2, 70)
    assert n1 == n2 == 4 * 2 * 64, (n1, n2)
    assert runtime.stats["no_port"] > 0
    rx = sum(p.rx for p in runtime.ports.values())
    natively = sum(int(p.ring.rec[5]) for p in runtime.ports.values())  # ring.RX
    runtime.stop()
    assert rx >= 2 * 4 * 64 * 2, rx
    assert natively >= 2 * 4 * 64 * 2, natively  # every frame taken by ns_rx
    # the kernel's own frames on the veths (IPv6 neighbour discovery) come in and are dropped
    extra = live.stats["packets_in"] - ref.stats["packets_in"]
    assert extra >= 0 and live.stats["dropped"] - ref.stats["dropped"] == extra, \
        (live.stats, ref.stats)
    assert live.stats["packets_out"] == ref.stats["packets_out"], (live.stats, ref.stats)
    assert live.stats["errors"] == 0
    print("NATIVE LOOP OK", live.stats)
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")
def test_native_loop_runs_the_program_on_rings_and_hands_python_what_it_cannot():
    result = run_in_netns(NATIVE_SCRIPT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NATIVE LOOP OK" in result.stdout
