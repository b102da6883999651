"""Packet replication engine: multicast groups and clone (mirroring) sessions.

As simple_switch_grpc does, a clone session replicates through its own list
of (port, instance) replicas, so clones carry egress_rid like multicast copies.
"""

from __future__ import annotations

import threading

from .errors import SwitchError

MAX_PORT = (1 << 32) - 1
MAX_RID = (1 << 16) - 1
MAX_SESSION = (1 << 15) - 1  # BMv2's MAX_MIRROR_SESSION_ID


def _replicas(what: str, replicas) -> list[tuple[int, int]]:
    out = []
    if not isinstance(replicas, (list, tuple)):
        raise SwitchError("INVALID_ARGUMENT", f"{what}: replicas must be a list")
    for r in replicas:
        if not isinstance(r, (list, tuple)) or len(r) != 2:
            raise SwitchError("INVALID_ARGUMENT", f"{what}: replica {r!r} is not (port, rid)")
        port, rid = r
        for v, hi in ((port, MAX_PORT), (rid, MAX_RID)):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= hi:
                raise SwitchError("INVALID_ARGUMENT", f"{what}: bad replica {r!r}")
        out.append((port, rid))
    if len(set(out)) != len(out):
        raise SwitchError("INVALID_ARGUMENT", f"{what}: duplicate replicas")
    return out


def _gid(gid) -> int:
    if not isinstance(gid, int) or isinstance(gid, bool) or not 0 < gid <= 0xFFFF:
        raise SwitchError("INVALID_ARGUMENT", f"multicast group id {gid!r} outside [1, 65535]")
    return gid


class PRE:
    def __init__(self, lock: threading.RLock):
        self.groups: dict[int, list[tuple[int, int]]] = {}
        self._lock = lock
        self.version = 0  # bumped by every change (the native tier mirrors the groups)

    def create(self, gid: int, replicas) -> None:
        with self._lock:
            gid = _gid(gid)
            reps = _replicas(f"group {gid}", replicas)
            if gid in self.groups:
                raise SwitchError("ALREADY_EXISTS", f"multicast group {gid} exists")
            self.groups[gid] = reps
            self.version += 1

    def modify(self, gid: int, replicas) -> None:
        with self._lock:
            gid = _gid(gid)
            reps = _replicas(f"group {gid}", replicas)
            if gid not in self.groups:
                raise SwitchError("NOT_FOUND", f"multicast group {gid} does not exist")
            self.groups[gid] = reps
            self.version += 1

    def delete(self, gid: int) -> None:
        with self._lock:
            gid = _gid(gid)
            if gid not in self.groups:
                raise SwitchError("NOT_FOUND", f"multicast group {gid} does not exist")
            del self.groups[gid]
            self.version += 1

    def reset(self) -> None:
        with self._lock:
            self.groups.clear()
            self.version += 1


class CloneSessions:
    def __init__(self, lock: threading.RLock):
        self.sessions: dict[int, dict] = {}
        self._lock = lock

    @staticmethod
    def _sid(sid) -> int:
        if not isinstance(sid, int) or isinstance(sid, bool) or not 0 < sid <= MAX_SESSION:
            raise SwitchError("INVALID_ARGUMENT", f"clone session id {sid!r} outside [1, 32767]")
        return sid

    def set(self, sid: int, replicas, class_of_service: int = 0,
            packet_length_bytes: int = 0) -> None:
        with self._lock:
            sid = self._sid(sid)
            reps = _replicas(f"clone session {sid}", replicas)
            for v in (class_of_service, packet_length_bytes):
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise SwitchError("INVALID_ARGUMENT", f"clone session {sid}: bad value {v!r}")
            self.sessions[sid] = {
                "replicas": reps,
                "class_of_service": class_of_service,
                "packet_length_bytes": packet_length_bytes,
            }

    def delete(self, sid: int) -> None:
        with self._lock:
            sid = self._sid(sid)
            if sid not in self.sessions:
                raise SwitchError("NOT_FOUND", f"clone session {sid} does not exist")
            del self.sessions[sid]

    def get(self, sid: int) -> dict | None:
        with self._lock:
            return self.sessions.get(sid)

    def reset(self) -> None:
        with self._lock:
            self.sessions.clear()
