"""The command lines mininet/p4switch.py starts both targets with (no root needed)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mininet"))

from p4switch import switch_command  # noqa: E402


def test_both_targets_get_the_same_ports_device_and_addresses():
    ports = {2: "s1-eth2", 1: "s1-eth1"}
    bmv2 = switch_command("bmv2", 3, "127.0.0.1:50053", ports, thrift_port=9092)
    soft = switch_command("soft", 3, "127.0.0.1:50053", ports, thrift_port=9092)
    for cmd in (bmv2, soft):
        assert cmd[cmd.index("--device-id") + 1] == "3"
        assert cmd[cmd.index("--thrift-port") + 1] == "9092"     # BMv2 defaults to 9090
        assert cmd[cmd.index("--grpc-server-addr") + 1] == "127.0.0.1:50053"
        assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "-i"] == ["1@s1-eth1",
                                                                        "2@s1-eth2"]
        assert "--no-p4" in cmd
    assert bmv2[0] == "simple_switch_grpc" and bmv2.index("--") < bmv2.index("--grpc-server-addr")
    assert soft[1:3] == ["-m", "softswitch"]
    # BMv2's notification socket must not be the per-device default shared machine-wide
    assert bmv2[bmv2.index("--notifications-addr") + 1].startswith("ipc:///tmp/natswitch-")
