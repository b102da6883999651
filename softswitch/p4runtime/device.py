"""State the P4Runtime server keeps beside the engine for one device."""

import importlib
import threading
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from .pipeline import Pipeline


@dataclass
class EntryMeta:
    """Per-entry fields the engine does not store (read back for read-write symmetry)."""
    controller_metadata: int = 0
    metadata: bytes = b""
    idle_timeout_ns: int = 0


class Device:
    """One P4Runtime device: the engine, the pipeline's P4Info, and side state.

    `live` is the engine moving packets. `switch` is the engine P4Runtime reads
    and writes: the live one, except between VERIFY_AND_SAVE and COMMIT, when it
    is a staging engine holding the saved config, whose writes are logged in
    `staged` and replayed on the live engine at COMMIT (P4Runtime 1.4, 14.4).
    `lock` serialises every P4Runtime read and write (BMv2 allows concurrent
    reads; one lock is simpler and the engine serialises state access anyway).
    """

    def __init__(self, switch, device_id: int, entry_type=None):
        self.live = switch
        self.switch = switch
        self.device_id = device_id
        self.lock = threading.RLock()
        self.pipeline: Pipeline | None = None
        self.config = p4runtime_pb2.ForwardingPipelineConfig()
        self.staged: list[p4runtime_pb2.Update] | None = None
        self._entry_type = entry_type
        self.reset_side_state()

    def reset_side_state(self) -> None:
        self.entry_meta: dict[tuple, EntryMeta] = {}      # (table id, key, priority)
        self.default_meta: dict[int, EntryMeta] = {}      # table id
        self.replica_bytes: dict[tuple, dict] = {}        # ("mc"|"clone", id) -> {(port, rid): n}
        self.mc_metadata: dict[int, bytes] = {}

    @property
    def entry_type(self):
        """The engine's table Entry class (docs/SOFTSWITCH.md, The engine's API), resolved
        on first use."""
        if self._entry_type is None:
            self._entry_type = importlib.import_module("softswitch.tables").Entry
        return self._entry_type
