"""Client arbitration: one primary per (device, role), as in P4Runtime 1.4 section 5.

The primary of a role is its live client with the highest election id, as in
BMv2's server (when the primary leaves, the next highest takes over). A client
without an election id is never primary (spec, "Unset Election ID").
Notifications follow BMv2: everyone in the role when the primary changes,
otherwise only the client that sent the update.
"""

import queue
import threading
from dataclasses import dataclass, field

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .status import P4RTError

MAX_CONNECTIONS = 16  # per role, as BMv2's DeviceState::max_connections per device


@dataclass(eq=False)
class Connection:
    """One StreamChannel. `outbox` feeds the stream's response generator."""
    peer: str = ""
    device_id: int | None = None
    role: str = ""
    election_id: int | None = None
    outbox: queue.Queue = field(default_factory=queue.Queue)

    def send(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        self.outbox.put(msg)


def election_id_of(msg) -> int | None:
    if not msg.HasField("election_id"):
        return None
    return (msg.election_id.high << 64) | msg.election_id.low


class Arbitration:
    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._roles: dict[str, list[Connection]] = {}
        self._highest: dict[str, int] = {}

    # ---- stream side --------------------------------------------------------------------------

    def update(self, conn: Connection, msg: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        """Apply a MasterArbitrationUpdate; a P4RTError ends the stream with its code."""
        role = msg.role.name if msg.HasField("role") else ""
        election_id = election_id_of(msg)
        if msg.HasField("role") and msg.role.HasField("config"):
            raise P4RTError("INVALID_ARGUMENT", "role config is not supported by this target: "
                            "leave role.config unset for full pipeline access")
        with self._lock:
            if conn.device_id is None:
                if msg.device_id != self.device_id:
                    raise P4RTError("NOT_FOUND", f"unknown device id {msg.device_id}")
                members = self._roles.get(role, [])
                self._check_unique(members, conn, election_id)
                if len(members) >= MAX_CONNECTIONS:
                    raise P4RTError("RESOURCE_EXHAUSTED", "too many connections")
                before = self._primary(members)
                conn.device_id, conn.role, conn.election_id = msg.device_id, role, election_id
                members.append(conn)
                self._roles[role] = members
            else:
                if msg.device_id != conn.device_id:
                    raise P4RTError("FAILED_PRECONDITION", "invalid device id: a stream serves "
                                    "one device")
                if role != conn.role:
                    raise P4RTError("FAILED_PRECONDITION", "a stream cannot change its role")
                members = self._roles[role]
                self._check_unique(members, conn, election_id)
                before = self._primary(members)
                conn.election_id = election_id
            if election_id is not None:
                self._highest[role] = max(self._highest.get(role, 0), election_id)
            after = self._primary(members)
            self._notify(role, members if after is not before else [conn])

    def remove(self, conn: Connection) -> None:
        with self._lock:
            members = self._roles.get(conn.role, [])
            if conn not in members:
                return
            was_primary = self._primary(members) is conn
            members.remove(conn)
            if not members:
                del self._roles[conn.role]
            elif was_primary:
                self._notify(conn.role, members)

    # ---- request side -------------------------------------------------------------------------

    def check_writer(self, request) -> None:
        """Write / SetForwardingPipelineConfig: only the primary of the role may write."""
        role = request.role
        election_id = election_id_of(request)
        with self._lock:
            members = self._roles.get(role)
            if not members:
                if role:
                    raise P4RTError("NOT_FOUND", f"no client holds role '{role}'")
                if election_id is not None:
                    raise P4RTError("PERMISSION_DENIED", "not primary: no client has sent a "
                                    "MasterArbitrationUpdate for this device")
                return  # BMv2 accepts writes from anyone while no client is connected
            primary = self._primary(members)
            if primary is None or election_id is None or primary.election_id != election_id:
                raise P4RTError("PERMISSION_DENIED", "not primary")

    def is_primary(self, conn: Connection) -> bool:
        with self._lock:
            return self._primary(self._roles.get(conn.role, [])) is conn

    def primaries(self) -> list[Connection]:
        with self._lock:
            found = (self._primary(m) for m in self._roles.values())
            return [c for c in found if c is not None]

    # ---- helpers (lock held) ------------------------------------------------------------------

    @staticmethod
    def _primary(members: list[Connection]) -> Connection | None:
        best = None
        for c in members:
            if c.election_id is not None and (best is None or c.election_id > best.election_id):
                best = c
        return best

    @staticmethod
    def _check_unique(members, conn, election_id) -> None:
        if election_id is None:
            return
        for other in members:
            if other is not conn and other.election_id == election_id:
                raise P4RTError("INVALID_ARGUMENT", "election id already in use by another "
                                "client")

    def _notify(self, role: str, targets: list[Connection]) -> None:
        members = self._roles.get(role, [])
        primary = self._primary(members)
        for conn in targets:
            msg = p4runtime_pb2.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if role:
                arb.role.name = role
            top = primary.election_id if primary else self._highest.get(role)
            if top is not None:
                arb.election_id.high, arb.election_id.low = top >> 64, top & ((1 << 64) - 1)
            if conn is primary:
                arb.status.code, arb.status.message = code_pb2.OK, "Is primary"
            elif primary is not None:
                arb.status.code, arb.status.message = code_pb2.ALREADY_EXISTS, "Is backup"
            else:
                arb.status.code, arb.status.message = code_pb2.NOT_FOUND, "No primary"
            conn.send(msg)
