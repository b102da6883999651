"""`shell SWITCH`: p4runtime-shell on one switch.

p4runtime-shell pushes a pipeline given with --config, and a push clears the switch's tables;
so the config is passed only when the switch does not already run this program.
"""

from __future__ import annotations

import sys

from controller.p4info import Pipeline
from controller.session import Session
from controller.topology import Switch


def shell_argv(switch: Switch, pipeline: Pipeline, connect_timeout: float,
               election_id: tuple[int, int]) -> list[str]:
    with Session(switch, election_id, connect_timeout) as p4rt:
        same = pipeline.is_running(*p4rt.running_pipeline())
    argv = [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", switch.grpc_addr,
            "--device-id", str(switch.device_id),
            "--election-id", f"{election_id[0]},{election_id[1]}"]
    if not same:
        argv += ["--config", f"{pipeline.p4info_path},{pipeline.json_path}"]
    return argv
