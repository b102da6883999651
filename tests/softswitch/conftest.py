"""Fixtures for the P4Runtime server, port and CLI tests (no root needed)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import p4rt_synthetic  # noqa: E402
from fakes import FakeEntry, FakeSwitch  # noqa: E402
from p4rt_build import Names  # noqa: E402
from p4rt_client import Client  # noqa: E402

from softswitch.p4runtime import P4RuntimeServer, P4RuntimeService  # noqa: E402

DEVICE_ID = 1
CPU_PORT = 255


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
    """A fake engine behind a real server, pipeline set by a primary client."""
    switch = FakeSwitch(device_id=DEVICE_ID, cpu_port=CPU_PORT)
    address, service = serve(switch, entry_type=FakeEntry)
    client = connect(address)
    reply = client.arbitrate((0, 1))
    assert reply.arbitration.status.code == 0
    client.set_pipeline(synthetic.p4info, synthetic.config)
    return SimpleNamespace(address=address, service=service, switch=switch, client=client,
                           names=synthetic.names, p4info=synthetic.p4info,
                           config=synthetic.config)
