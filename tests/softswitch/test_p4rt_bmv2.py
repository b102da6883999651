"""softswitch answers P4Runtime as simple_switch_grpc does: one request sequence, both targets.

Every outcome of tests/softswitch/p4rt_scenario.py must be equal on the two
targets, except the few listed in DELIBERATE, where softswitch gives the code
the P4Runtime 1.4 spec asks for and BMv2 gives a generic or accidental one.
"""

import os
import shutil
import socket
import subprocess
import time

import pytest
from p4.v1 import p4runtime_pb2
from p4rt_scenario import run

pytestmark = pytest.mark.bmv2

BM_STARTUP = 30  # seconds simple_switch_grpc may take to listen on a loaded machine

# step -> (BMv2 outcome, softswitch outcome), with the reason.
DELIBERATE = {
    # P4Runtime 1.4 "Constant Tables": PERMISSION_DENIED. BMv2's target refuses (UNKNOWN), and
    # it reports const entries NOT_FOUND for DELETE/MODIFY as they are not in its entry store.
    "const table insert": (("UNKNOWN", ("UNKNOWN",)), ("UNKNOWN", ("PERMISSION_DENIED",))),
    "const table delete": (("UNKNOWN", ("NOT_FOUND",)), ("UNKNOWN", ("PERMISSION_DENIED",))),
    "const table modify": (("UNKNOWN", ("NOT_FOUND",)), ("UNKNOWN", ("PERMISSION_DENIED",))),
    # The spec: is_const set in a write is INVALID_ARGUMENT; BMv2 (P4Runtime 1.3) ignores it.
    "write is_const": (("OK", None), ("UNKNOWN", ("INVALID_ARGUMENT",))),
    "delete is_const": (("OK", None), ("UNKNOWN", ("NOT_FOUND",))),
    # Index past the array: the spec's OUT_OF_RANGE instead of BMv2's target failure.
    "counter read out of range": (("UNKNOWN", ()), ("OUT_OF_RANGE",)),
    "counter write out of range": (("UNKNOWN", ("UNKNOWN",)), ("UNKNOWN", ("OUT_OF_RANGE",))),
    # An Entity with nothing set: the spec's INVALID_ARGUMENT.
    "unset entity": (("UNKNOWN", ("UNKNOWN",)), ("UNKNOWN", ("INVALID_ARGUMENT",))),
    # A device id the server does not serve: the spec's NOT_FOUND.
    "other device read": (("FAILED_PRECONDITION",), ("NOT_FOUND",)),
    # Neither target truncates clones; softswitch says so with UNIMPLEMENTED.
    "clone truncating": (("UNKNOWN", ("UNKNOWN",)), ("UNKNOWN", ("UNIMPLEMENTED",))),
    # A malformed PacketOut is dropped by both; softswitch also reports a StreamError.
    "packet-out unknown metadata": (("OK", None), ("OK", ("INVALID_ARGUMENT", True))),
}


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def bmv2_address():
    if shutil.which("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc is not on PATH: no BMv2 to compare with")
    grpc_port, thrift_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        ["simple_switch_grpc", "--no-p4", "--device-id", "1", "--thrift-port",
         str(thrift_port), "--notifications-addr",
         f"ipc:///tmp/natswitch-p4rt-bmv2-{os.getpid()}.ipc", "--",
         "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
         "--cpu-port", "255"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + BM_STARTUP
        while True:
            assert proc.poll() is None, "simple_switch_grpc exited at startup"
            try:
                socket.create_connection(("127.0.0.1", grpc_port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "simple_switch_grpc did not listen"
                time.sleep(0.1)
        yield f"127.0.0.1:{grpc_port}"
    finally:
        proc.terminate()  # by its own pid
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _normalize(outcome):
    """Read results without what the spec leaves free: replica order, and is_const (set
    by softswitch as P4Runtime 1.4 asks, never by BMv2's 1.3 server)."""
    if outcome[0] != "OK" or not isinstance(outcome[1], tuple) or \
            not all(isinstance(x, bytes) for x in outcome[1]):
        return outcome
    out = []
    for raw in outcome[1]:
        e = p4runtime_pb2.Entity.FromString(raw)
        if e.HasField("table_entry"):
            e.table_entry.is_const = False
        pre = e.packet_replication_engine_entry
        for group in (pre.multicast_group_entry, pre.clone_session_entry):
            replicas = sorted(group.replicas, key=lambda r: (r.instance, r.egress_port, r.port))
            copies = [type(r)() for r in replicas]
            for c, r in zip(copies, replicas, strict=True):
                c.CopyFrom(r)
            del group.replicas[:]
            group.replicas.extend(copies)
        out.append(e.SerializeToString(deterministic=True))
    return ("OK", tuple(sorted(out)))


def test_same_answers_as_simple_switch_grpc(bmv2_address, serve, basic_program):
    from softswitch import Switch

    bm = run(bmv2_address, basic_program)
    address, _ = serve(Switch(device_id=1, cpu_port=255))
    ours = run(address, basic_program)
    assert [name for name, _ in bm] == [name for name, _ in ours]
    differences = {}
    for (name, b), (_, s) in zip(bm, ours, strict=True):
        if name in DELIBERATE:
            assert (b, s) == DELIBERATE[name], name
        elif _normalize(b) != _normalize(s):
            differences[name] = (b, s)
    assert differences == {}
    assert len(bm) > 80  # the sequence ran to its end on both targets
