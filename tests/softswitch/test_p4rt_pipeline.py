"""SetForwardingPipelineConfig / GetForwardingPipelineConfig / Capabilities."""

import json

import grpc
import pytest
from fakes import FakeEntry, FakeSwitch
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from p4rt_build import Names
from p4rt_client import batch_errors

Set = p4runtime_pb2.SetForwardingPipelineConfigRequest
Get = p4runtime_pb2.GetForwardingPipelineConfigRequest


@pytest.fixture
def bare(serve, connect):
    switch = FakeSwitch(device_id=1, cpu_port=255)
    address, service = serve(switch, entry_type=FakeEntry)
    return switch, connect(address), service


def test_capabilities(bare):
    _, client, _ = bare
    rep = client.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
    assert rep.p4runtime_api_version == "1.4.1"


def test_requests_before_a_pipeline_fail_precondition(bare, synthetic):
    _, client, _ = bare
    entity = synthetic.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    for call in (lambda: client.insert(entity), lambda: client.read(entity),
                 lambda: client.get_pipeline()):
        with pytest.raises(grpc.RpcError) as excinfo:
            call()
        assert excinfo.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_verify_and_commit_then_get_all_response_types(bare, synthetic):
    switch, client, _ = bare
    client.set_pipeline(synthetic.p4info, synthetic.config, cookie=77)
    assert switch.loads == 1
    full = client.get_pipeline(Get.ALL)
    assert full.p4info == synthetic.p4info and full.p4_device_config == synthetic.config
    assert full.cookie.cookie == 77
    only_cookie = client.get_pipeline(Get.COOKIE_ONLY)
    assert not only_cookie.HasField("p4info") and not only_cookie.p4_device_config
    assert only_cookie.cookie.cookie == 77
    p4info = client.get_pipeline(Get.P4INFO_AND_COOKIE)
    assert p4info.p4info == synthetic.p4info and not p4info.p4_device_config
    device = client.get_pipeline(Get.DEVICE_CONFIG_AND_COOKIE)
    assert device.p4_device_config == synthetic.config and not device.HasField("p4info")


def test_verify_changes_nothing(bare, synthetic):
    switch, client, _ = bare
    client.set_pipeline(synthetic.p4info, synthetic.config, action=Set.VERIFY)
    assert switch.loads == 0
    with pytest.raises(grpc.RpcError) as excinfo:
        client.get_pipeline()
    assert excinfo.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_verify_and_save_stages_writes_until_commit(bare, synthetic):
    switch, client, _ = bare
    client.set_pipeline(synthetic.p4info, synthetic.config)
    old = synthetic.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1)
    client.insert(old)
    client.set_pipeline(synthetic.p4info, synthetic.config, action=Set.VERIFY_AND_SAVE)
    assert switch.loads == 1  # the data plane still runs the old config, with its state
    assert len(switch.tables["I.l2"].entries()) == 1
    assert client.read(synthetic.names.table_entry("I.l2")) == []  # reads see the saved one
    new = synthetic.names.table_entry("I.l2", {"hdr.ethernet.dst": 2}, "I.fwd", port=2)
    client.insert(new)
    assert [e.key for e in switch.tables["I.l2"].entries()] == [(1,)]
    client.set_pipeline(synthetic.p4info, b"", action=Set.COMMIT)
    assert switch.loads == 2
    assert [e.key for e in switch.tables["I.l2"].entries()] == [(2,)]  # writes replayed
    assert [e.table_entry for e in client.read(synthetic.names.table_entry("I.l2"))] == \
        [new.table_entry]
    with pytest.raises(grpc.RpcError) as excinfo:  # nothing saved any more
        client.set_pipeline(synthetic.p4info, b"", action=Set.COMMIT)
    assert excinfo.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("mutate,why", [
    (lambda info, js: (info, b"not json"), "device config is not JSON"),
    (lambda info, js: (info, b""), "empty device config"),
    (lambda info, js: (_range_key(info), js), "P4Info match kind disagrees"),
    (lambda info, js: (_widen_param(info), js), "param width disagrees"),
    (lambda info, js: (info, _drop_register(js)), "register missing from JSON"),
])
def test_bad_config_is_rejected_and_old_pipeline_stays(bare, synthetic, mutate, why):
    switch, client, _ = bare
    client.set_pipeline(synthetic.p4info, synthetic.config)
    client.insert(synthetic.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1))
    info = type(synthetic.p4info)()
    info.CopyFrom(synthetic.p4info)
    bad_info, bad_json = mutate(info, synthetic.config)
    with pytest.raises(grpc.RpcError) as excinfo:
        client.set_pipeline(bad_info, bad_json)
    assert excinfo.value.code() == grpc.StatusCode.INVALID_ARGUMENT, why
    assert switch.loads == 1, why
    assert len(switch.tables["I.l2"].entries()) == 1, why
    assert client.get_pipeline().p4info == synthetic.p4info, why


def test_unspecified_action_and_reconcile(bare, synthetic):
    _, client, _ = bare
    for action, code in ((Set.UNSPECIFIED, grpc.StatusCode.INVALID_ARGUMENT),
                         (Set.RECONCILE_AND_COMMIT, grpc.StatusCode.UNIMPLEMENTED)):
        with pytest.raises(grpc.RpcError) as excinfo:
            client.set_pipeline(synthetic.p4info, synthetic.config, action=action)
        assert excinfo.value.code() == code


def test_new_pipeline_resets_state(device):
    dev = device
    dev.client.insert(dev.names.table_entry("I.l2", {"hdr.ethernet.dst": 1}, "I.fwd", port=1))
    dev.client.set_pipeline(dev.p4info, dev.config)
    entity = p4runtime_pb2.Entity()
    entity.table_entry.table_id = dev.names.table_id("I.l2")
    assert dev.client.read(entity) == []


def test_wrong_device_id_is_not_found(device, connect):
    other = connect(device.address, device_id=9)
    with pytest.raises(grpc.RpcError) as excinfo:
        other.read(device.names.table_entry("I.l2"))
    assert excinfo.value.code() == grpc.StatusCode.NOT_FOUND


def _rename_table(info):
    info.tables[0].preamble.name = "I.nope"
    return info


def _range_key(info):
    info.tables[0].match_fields[0].match_type = p4info_pb2.MatchField.RANGE
    return info


def test_a_p4info_table_the_json_lacks_loads_and_takes_no_entries(bare, synthetic):
    """p4c keeps a table it compiled away (never applied) in the P4Info: BMv2 loads such a
    pipeline and fails requests naming the table (UNKNOWN, a wildcard read too). Here it
    has no entries to read, and a write says why it fails."""
    switch, client, _ = bare
    info = type(synthetic.p4info)()
    info.CopyFrom(synthetic.p4info)
    client.set_pipeline(_rename_table(info), synthetic.config)
    assert switch.loads == 1
    names = Names(info)
    assert client.read(names.table_entry("I.nope")) == []
    wildcard = p4runtime_pb2.Entity()
    wildcard.table_entry.SetInParent()
    others = {e.table_entry.table_id for e in client.read(wildcard)}
    assert names.table_id("I.nope") not in others
    with pytest.raises(grpc.RpcError) as excinfo:
        client.insert(names.table_entry("I.nope", {"hdr.ethernet.dst": 1}, "I.fwd", port=1))
    [error] = batch_errors(excinfo.value)
    assert error.canonical_code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    assert "I.nope is not in the device config" in error.message


def _widen_param(info):
    for a in info.actions:
        for p in a.params:
            p.bitwidth += 1
    return info


def _drop_register(config: bytes) -> bytes:
    program = json.loads(config)
    program["register_arrays"] = []
    return json.dumps(program).encode()
