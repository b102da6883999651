"""A write batch that partly fails is reported update by update, truthfully: against
softswitch's P4Runtime server in this process, and BMv2's simple_switch_grpc where installed.

500 routes are inserted in one batch; 150 of their keys already hold a route to another port,
so those 150 inserts fail (ALREADY_EXISTS) and the other 350 take effect."""

import logging
import shutil
import subprocess

import pytest
from test_ctl_switches import BMV2_JSON, P4INFO, free_ports

import controller.session as session_mod
from controller.entities import Lpm, TableEntry
from controller.p4info import Pipeline
from controller.session import BATCH, Session, Update, WriteRejected
from controller.topology import Switch

TOTAL, FAILING = 500, 150


def route(i: int, port: int) -> TableEntry:
    return TableEntry.make("NatIngress.fwd.routes",
                           {"hdr.ipv4.dst_addr": Lpm(0x0A000000 + i, 32)},
                           "NatIngress.fwd.route",
                           {"smac": 0x025300000001, "dmac": 0x020000000000 + i, "port": port})


def in_process_softswitch():
    from softswitch import Switch as Engine
    from softswitch.runtime import Runtime

    runtime = Runtime(Engine(device_id=1), [], device_id=1, grpc_addr="127.0.0.1:0",
                      log=logging.getLogger("test.batch"))
    port = runtime.start()
    return f"127.0.0.1:{port}", runtime.stop


def bmv2_process(tmp_path):
    grpc_port, thrift_port = free_ports(2)
    log = open(tmp_path / "bmv2.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        ["simple_switch_grpc", "--device-id", "1", "--no-p4", "--thrift-port", str(thrift_port),
         "--log-level", "warn", "--notifications-addr", f"ipc://{tmp_path}/notify.ipc", "--",
         "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
        stdout=log, stderr=subprocess.STDOUT)

    def stop():
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    return f"127.0.0.1:{grpc_port}", stop


@pytest.fixture(params=[
    "soft",
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.skipif(
        shutil.which("simple_switch_grpc") is None, reason="needs simple_switch_grpc on PATH")]),
])
def session(request, tmp_path):
    address, stop = (in_process_softswitch() if request.param == "soft"
                     else bmv2_process(tmp_path))
    switch = Switch(name="s1", device_id=1, grpc_addr=address, thrift_port=0, mac="",
                    role="", tier=0)
    try:
        with Session(switch, connect_timeout=60) as s:
            s.ensure_pipeline(Pipeline.load(P4INFO, BMV2_JSON))
            yield s
    finally:
        stop()


def held_routes(s: Session) -> set[TableEntry]:
    return set(s.read_table("NatIngress.fwd.routes"))


def partly_failing_batch(s: Session) -> tuple[list[TableEntry], list[TableEntry]]:
    """Pre-install FAILING conflicting routes; (the batch, its failing entries)."""
    assert TOTAL <= BATCH   # one Write carries them all
    wanted = [route(i, 1) for i in range(TOTAL)]
    taken = list(range(0, TOTAL, TOTAL // FAILING))[:FAILING]
    s.write([(Update.INSERT, route(i, 2)) for i in taken])
    return wanted, [wanted[i] for i in taken]


def test_partly_failed_batch_is_reported_per_update(session):
    wanted, failing = partly_failing_batch(session)
    with pytest.raises(WriteRejected) as err:
        session.write([(Update.INSERT, e) for e in wanted])
    assert {r.entity for r in err.value.rejected} == set(failing)
    assert {r.code for r in err.value.rejected} == {"ALREADY_EXISTS"}
    assert (err.value.applied, err.value.unknown) == (TOTAL - FAILING, [])
    assert f"{FAILING} of {TOTAL} update(s) rejected ({TOTAL - FAILING} applied)" \
        in str(err.value)
    held = held_routes(session)
    assert set(wanted) - set(failing) <= held and not set(failing) & held


def test_batch_without_per_update_errors_is_read_back(session, monkeypatch):
    """A client whose metadata limit drops the per-update errors (as grpcio's defaults did)
    still reports each update truthfully, from what the switch holds afterwards."""
    small = [o for o in session_mod._CHANNEL_OPTIONS if "metadata" not in o[0]]
    small += [("grpc.max_metadata_size", 4096), ("grpc.absolute_max_metadata_size", 4096)]
    monkeypatch.setattr(session_mod, "_CHANNEL_OPTIONS", small)
    wanted, failing = partly_failing_batch(session)
    with Session(session.switch, election_id=(0, 2), connect_timeout=30) as s:
        s.use_running_pipeline()
        with pytest.raises(WriteRejected) as err:
            s.write([(Update.INSERT, e) for e in wanted])
    assert {r.entity for r in err.value.rejected} == set(failing)
    assert all("read back" in r.message for r in err.value.rejected)
    assert err.value.applied == TOTAL - FAILING
