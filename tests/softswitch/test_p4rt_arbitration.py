"""Client arbitration: primary and backups per (device, role), write permission."""

import grpc
import pytest
from fakes import FakeEntry, FakeSwitch

OK, ALREADY_EXISTS, NOT_FOUND = 0, 6, 5


@pytest.fixture
def device(serve, synthetic):
    switch = FakeSwitch(device_id=1, cpu_port=255)
    address, _ = serve(switch, entry_type=FakeEntry)
    return address, switch


def _entry(synthetic, mac=1, port=1):
    return synthetic.names.table_entry("I.l2", {"hdr.ethernet.dst": mac}, "I.fwd", port=port)


def test_highest_election_id_is_primary_backup_cannot_write(device, connect, synthetic):
    address, switch = device
    primary = connect(address)
    assert primary.arbitrate((0, 10)).arbitration.status.code == OK
    backup = connect(address)
    reply = backup.arbitrate((0, 5))
    assert reply.arbitration.status.code == ALREADY_EXISTS
    assert reply.arbitration.election_id.low == 10  # the primary's id
    primary.set_pipeline(synthetic.p4info, synthetic.config)
    with pytest.raises(grpc.RpcError) as excinfo:
        backup.insert(_entry(synthetic))
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as excinfo:
        backup.set_pipeline(synthetic.p4info, synthetic.config)
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert switch.loads == 1 and switch.tables["I.l2"].entries() == []
    assert backup.read(synthetic.names.table_entry("I.l2")) == []  # reads need no arbitration
    primary.insert(_entry(synthetic))
    assert len(switch.tables["I.l2"].entries()) == 1


def test_higher_id_takes_over_and_everyone_is_told(device, connect, synthetic):
    address, _ = device
    first = connect(address)
    first.arbitrate((0, 1))
    second = connect(address)
    assert second.arbitrate((0, 2)).arbitration.status.code == OK
    demoted = first.next_message("arbitration")
    assert demoted.arbitration.status.code == ALREADY_EXISTS
    assert demoted.arbitration.election_id.low == 2
    with pytest.raises(grpc.RpcError) as excinfo:
        first.set_pipeline(synthetic.p4info, synthetic.config)
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_primary_leaving_promotes_the_next_highest(device, connect, synthetic):
    address, _ = device
    primary = connect(address)
    primary.arbitrate((0, 9))
    backup = connect(address)
    backup.arbitrate((0, 3))
    primary.close()
    promoted = backup.next_message("arbitration")
    assert promoted is not None and promoted.arbitration.status.code == OK
    backup.set_pipeline(synthetic.p4info, synthetic.config)


def test_duplicate_election_id_ends_the_stream(device, connect):
    address, _ = device
    connect(address).arbitrate((0, 4))
    dup = connect(address)
    assert dup.arbitrate((0, 4)) is None
    assert dup.stream_error.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_device_ends_the_stream(device, connect):
    address, _ = device
    client = connect(address)
    assert client.arbitrate((0, 1), device_id=7) is None
    assert client.stream_error.code() == grpc.StatusCode.NOT_FOUND


def test_no_election_id_is_never_primary(device, connect, synthetic):
    address, _ = device
    watcher = connect(address)
    reply = watcher.arbitrate(None)
    assert reply.arbitration.status.code == NOT_FOUND  # no primary at all
    with pytest.raises(grpc.RpcError) as excinfo:
        watcher.set_pipeline(synthetic.p4info, synthetic.config)
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_without_any_stream_writes_need_no_election_id(device, connect, synthetic):
    address, switch = device
    client = connect(address)
    client.set_pipeline(synthetic.p4info, synthetic.config)  # no stream, no election id: BMv2
    client.insert(_entry(synthetic))
    client.election_id = (0, 1)
    with pytest.raises(grpc.RpcError) as excinfo:  # an election id but nobody arbitrated
        client.insert(_entry(synthetic, mac=2))
    assert excinfo.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert len(switch.tables["I.l2"].entries()) == 1


def test_roles_have_their_own_primary(device, connect, synthetic):
    address, switch = device
    default = connect(address)
    default.arbitrate((0, 5))
    default.set_pipeline(synthetic.p4info, synthetic.config)
    other = connect(address)
    assert other.arbitrate((0, 1), role="stats").arbitration.status.code == OK
    other.insert(_entry(synthetic))  # primary of its own role
    stranger = connect(address)
    stranger.election_id, stranger.role = (0, 1), "nobody"
    with pytest.raises(grpc.RpcError) as excinfo:
        stranger.insert(_entry(synthetic, mac=2))
    assert excinfo.value.code() == grpc.StatusCode.NOT_FOUND
    assert len(switch.tables["I.l2"].entries()) == 1
