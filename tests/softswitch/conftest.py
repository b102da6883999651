"""Fixtures for the P4Runtime server, port and CLI tests (no root needed)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

sys.path.insert(0, str(Path(__file__).parent))

import p4rt_synthetic  # noqa: E402
from fakes import FakeEntry, FakeSwitch  # noqa: E402
from p4rt_build import Names  # noqa: E402
from p4rt_client import Client  # noqa: E402

from softswitch.p4runtime import P4RuntimeServer, P4RuntimeService  # noqa: E402

DEVICE_ID = 1
CPU_PORT = 255
# Engine tests run on both tiers: the compiled packet path (softswitch/native/), where the
# program compiles, and the Python tier (its fallback, and the reference). These modules
# test the Python tier's own code generation and pin it themselves.
PYTHON_TIER_ONLY = {"test_engine_vector", "test_engine_lazy", "test_engine_fuse",
                    "test_engine_codegen", "test_engine_wide", "test_engine_native"}


# ... and these run no engine (BMv2, p4c or the builds alone): once is enough.
NO_ENGINE = {"test_bmv2_conformance", "test_recompiled_build_is_identical",
             "test_build_comes_from_source", "test_all_conformance_programs_are_present"}


def pytest_generate_tests(metafunc):
    mod = metafunc.module.__name__.rsplit(".", 1)[-1]
    if mod.startswith("test_engine_") and mod not in PYTHON_TIER_ONLY and \
            metafunc.function.__name__ not in NO_ENGINE:
        metafunc.fixturenames.append("tier")
        metafunc.parametrize("tier", ["native", "python"])


@pytest.fixture
def tier(request, monkeypatch):
    """The tier Switch() picks by default in this test."""
    monkeypatch.setenv("NATSWITCH_NATIVE", "1" if request.param == "native" else "0")
    return request.param
BASIC = Path(__file__).resolve().parents[1] / "p4" / "build" / "p4rt_basic"


@pytest.fixture
def serve():
    """serve(switch, **service_kwargs) -> (address, service); stopped at teardown."""
    servers = []

    def start(switch, device_id=DEVICE_ID, **kwargs):
        service = P4RuntimeService(switch, device_id, **kwargs)
        server = P4RuntimeServer(service, "127.0.0.1:0")
        port = server.start()
        servers.append(server)
        return f"127.0.0.1:{port}", service

    yield start
    for server in servers:
        server.stop(0)


@pytest.fixture
def connect():
    """connect(address, device_id=1) -> Client; closed at teardown."""
    clients = []

    def make(address, device_id=DEVICE_ID):
        client = Client(address, device_id)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def synthetic():
    info, config = p4rt_synthetic.build()
    return SimpleNamespace(p4info=info, config=config, names=Names(info))


@pytest.fixture
def fake_device(serve, connect, synthetic):
    """The contract fake behind a real server (synthetic program), set by a primary client."""
    switch = FakeSwitch(device_id=DEVICE_ID, cpu_port=CPU_PORT)
    address, service = serve(switch, entry_type=FakeEntry)
    client = connect(address)
    reply = client.arbitrate((0, 1))
    assert reply.arbitration.status.code == 0
    client.set_pipeline(synthetic.p4info, synthetic.config)
    return SimpleNamespace(address=address, service=service, switch=switch, client=client,
                           names=synthetic.names, p4info=synthetic.p4info,
                           config=synthetic.config)


@pytest.fixture(params=["engine", "fake"])
def device(request):
    """Server tests run on the real engine (compiled p4rt_basic) and on the contract fake
    (synthetic program with the same names): the first catches drift between server and
    engine, the second pins the server to the engine's API of docs/SOFTSWITCH.md alone."""
    return request.getfixturevalue("real_device" if request.param == "engine" else "fake_device")


@pytest.fixture(scope="session")
def basic_program():
    """tests/p4/p4rt_basic.p4 as compiled by p4c-bm2-ss (committed under tests/p4/build/)."""
    json_path, p4info_path = BASIC.with_suffix(".json"), BASIC.with_suffix(".p4info.txt")
    if not json_path.exists() or not p4info_path.exists():
        pytest.skip(f"{json_path.name} / {p4info_path.name} are not built: compile "
                    f"tests/p4/p4rt_basic.p4 with p4c-bm2-ss")
    info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
    return SimpleNamespace(p4info=info, config=json_path.read_bytes(), names=Names(info),
                           json_path=json_path, p4info_path=p4info_path)


@pytest.fixture
def real_device(serve, connect, basic_program):
    """The real engine behind the server, running p4rt_basic, set by a primary client."""
    from softswitch import Switch

    switch = Switch(device_id=DEVICE_ID, cpu_port=CPU_PORT)
    address, service = serve(switch)
    client = connect(address)
    assert client.arbitrate((0, 1)).arbitration.status.code == 0
    client.set_pipeline(basic_program.p4info, basic_program.config)
    return SimpleNamespace(address=address, service=service, switch=switch, client=client,
                           names=basic_program.names, p4info=basic_program.p4info,
                           config=basic_program.config)
