"""A P4Runtime session with one switch: arbitration, pipeline, batched writes, reads.

p4runtime-shell keeps one process-global client; programming many switches at once needs one
session object per switch, so this is a small client on grpcio and the p4runtime protos.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller.entities import Entity, MulticastGroupEntry, TableEntry
from controller.p4info import P4Info, Pipeline
from controller.topology import Switch

BATCH = 500                      # updates per WriteRequest
RPC_TIMEOUT = 60.0               # seconds, for reads and writes
PUSH_TIMEOUT = 600.0             # a software target parses the whole BMv2 JSON on a push
# A push carries the whole BMv2 JSON (large with many elements per packet): a few at a time
# keep the controller's memory and the machine's cores from being swamped.
_PUSHES = threading.BoundedSemaphore(4)
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", 256 << 20),
    # Keep gRPC's own reconnect backoff short; connect() bounds the total wait.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # A failed Write carries one error per update in its trailing metadata; grpcio's default
    # limits (soft 8 KiB, hard 16 KiB) drop it past about 100 failures, and the call then
    # comes back as RESOURCE_EXHAUSTED with no per-update answer at all. A batch of BATCH
    # failing updates with long messages stays far below these.
    ("grpc.max_metadata_size", 16 << 20),
    ("grpc.absolute_max_metadata_size", 16 << 20),
]

Update = p4runtime_pb2.Update


class ControllerError(Exception):
    """An error the controller reports to the user (and exits non-zero)."""


class SwitchError(ControllerError):
    def __init__(self, switch: Switch, message: str):
        self.switch = switch
        super().__init__(f"{switch.name} (device {switch.device_id} at {switch.grpc_addr}): "
                         f"{message}")


class SwitchUnreachable(SwitchError):
    pass


class _ElectionIdInUse(Exception):
    pass


@dataclass(frozen=True)
class Rejected:
    kind: str            # INSERT, MODIFY, DELETE
    entity: Entity
    code: str            # canonical gRPC code name
    message: str


class WriteRejected(SwitchError):
    """Some updates of a write did not take effect. `rejected` are those the switch refused
    (or, read back, does not hold); `unknown` those whose fate could not be learned; `applied`
    counts the ones that did take effect."""

    def __init__(self, switch: Switch, rejected: Sequence[Rejected], applied: int = 0,
                 unknown: Sequence[Rejected] = ()):
        self.rejected, self.unknown, self.applied = list(rejected), list(unknown), applied
        total = len(self.rejected) + len(self.unknown) + applied
        shown = self.rejected[:10] + self.unknown[:max(0, 10 - len(self.rejected))]
        lines = [f"{r.kind} {r.entity!r}: {r.code}: {r.message}" for r in shown]
        more = len(self.rejected) + len(self.unknown) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        unknown = f", {len(self.unknown)} unknown" if self.unknown else ""
        super().__init__(switch, f"{len(self.rejected)} of {total} update(s) rejected "
                         f"({applied} applied{unknown}):\n  " + "\n  ".join(lines))


def _code_name(code: int) -> str:
    try:
        return code_pb2.Code.Name(code)
    except ValueError:
        return str(code)


def _rpc_details(e: grpc.RpcError) -> str:
    code = e.code().name if e.code() else "UNKNOWN"
    return f"{code}: {e.details()}"


def _update_errors(e: grpc.RpcError) -> list[p4runtime_pb2.Error] | None:
    """The per-update errors a P4Runtime server attaches to a failed Write, if any."""
    for key, value in e.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            errors = []
            for detail in status.details:
                err = p4runtime_pb2.Error()
                if detail.Unpack(err):
                    errors.append(err)
            return errors or None
    return None


def listening(switches: Sequence[Switch], within: float) -> list[Switch]:
    """The switches whose gRPC address accepts a TCP connection, tried until one does or
    `within` seconds pass: tells "nothing is running" apart from a slow switch."""
    deadline = time.monotonic() + within
    while True:
        found = []
        for s in switches:
            host, _, port = s.grpc_addr.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=0.5) as c:
                    # A port in the ephemeral range can be connected to by a socket the
                    # kernel bound to that very port (TCP simultaneous open): no listener.
                    if c.getsockname() != c.getpeername():
                        found.append(s)
            except (OSError, ValueError):
                pass
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


class Session:
    """One switch, one primary arbitration. Use as a context manager."""

    def __init__(self, switch: Switch, election_id: tuple[int, int] = (0, 1),
                 connect_timeout: float = 10.0):
        self.switch = switch
        self.election_id = p4runtime_pb2.Uint128(high=election_id[0], low=election_id[1])
        self.connect_timeout = connect_timeout
        self.p4info: P4Info | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue | None = None
        self._stream = None
        # Set when the stream channel ends: the switch went away (or closed it).
        self.stream_ended = threading.Event()
        # Set while this session is primary on an unbroken stream: then no other client can
        # have written, so what sync last wrote is what the switch holds (see held()).
        self._primary = threading.Event()
        self._held: list[Entity] | None = None

    # ---- connection ----
    def __enter__(self) -> Session:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self) -> None:
        """Connect and become primary; waits with growing intervals up to connect_timeout."""
        start = time.monotonic()
        deadline = start + self.connect_timeout
        self._channel = grpc.insecure_channel(self.switch.grpc_addr, options=_CHANNEL_OPTIONS)
        ready = grpc.channel_ready_future(self._channel)
        wait = 0.2
        while True:
            try:
                ready.result(timeout=max(0.01, min(wait, deadline - time.monotonic())))
                break
            except grpc.FutureTimeoutError:
                if time.monotonic() >= deadline:
                    ready.cancel()
                    self.close()
                    raise SwitchUnreachable(
                        self.switch, f"unreachable: no P4Runtime server answered within "
                        f"{time.monotonic() - start:.1f} s (retried with backoff)"
                    ) from None
                wait *= 2
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        while True:
            try:
                self._arbitrate(max(1.0, deadline - time.monotonic()))
                return
            except _ElectionIdInUse as e:
                # Most often our own previous session, whose stream the switch has not
                # closed yet; wait for it a little, within the connect deadline.
                self._end_stream()
                if time.monotonic() + 0.2 >= deadline:
                    self.close()
                    raise SwitchError(self.switch, f"election id {self._election_text()} is "
                                      f"in use by another client ({e})") from None
                time.sleep(0.2)
            except SwitchError:
                self.close()
                raise

    def _election_text(self) -> str:
        return f"{self.election_id.high},{self.election_id.low}"

    def _arbitrate(self, timeout: float) -> None:
        requests: queue.Queue = queue.Queue()
        responses: queue.Queue = queue.Queue()

        def request_iter():
            while (item := requests.get()) is not None:
                yield item

        stream = self._stub.StreamChannel(request_iter())
        self._stream, self._requests = stream, requests
        ended = self.stream_ended = threading.Event()
        self.forget()
        primary = self._primary = threading.Event()

        def read_stream():
            try:
                for msg in stream:
                    # Once primary, any arbitration notice means the primary changed (P4Runtime
                    # tells every client of the role): another client may write from now on.
                    if primary.is_set() and msg.WhichOneof("update") == "arbitration":
                        primary.clear()
                    responses.put(msg)
            except grpc.RpcError as e:
                responses.put(e)
            finally:
                primary.clear()
                ended.set()

        threading.Thread(target=read_stream, name=f"p4rt-{self.switch.name}",
                         daemon=True).start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.switch.device_id
        req.arbitration.election_id.CopyFrom(self.election_id)
        requests.put(req)
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = responses.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise SwitchError(self.switch, "no arbitration answer on the stream channel "
                                  f"within {timeout:.1f} s") from None
            if isinstance(msg, grpc.RpcError):
                if (msg.code() == grpc.StatusCode.INVALID_ARGUMENT
                        and "election" in (msg.details() or "").lower()):
                    raise _ElectionIdInUse(msg.details())
                raise SwitchError(self.switch, f"stream channel failed: {_rpc_details(msg)}")
            if msg.WhichOneof("update") != "arbitration":
                continue
            if msg.arbitration.status.code != code_pb2.OK:
                raise SwitchError(self.switch, "not primary: another controller holds a higher "
                                  f"election id than {self._election_text()} "
                                  f"({msg.arbitration.status.message})")
            primary.set()
            return

    def _end_stream(self) -> None:
        if self._requests is not None:
            self._requests.put(None)
            self._requests = None
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None

    def close(self) -> None:
        self.forget()
        self._end_stream()
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # ---- pipeline ----
    def running_pipeline(self) -> tuple[P4Info | None, int]:
        """The switch's P4Info (None if it runs no program) and its cookie (0 if none)."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.switch.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            resp = self._stub.GetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return None, 0
            raise SwitchError(self.switch, f"reading the pipeline failed: {_rpc_details(e)}") \
                from None
        cfg = resp.config
        if not cfg.HasField("p4info") or not cfg.p4info.tables:
            return None, 0
        return P4Info(cfg.p4info), cfg.cookie.cookie

    def ensure_pipeline(self, pipeline: Pipeline) -> bool:
        """Push the pipeline unless the switch already runs it; True when pushed.

        Pushing resets the switch's tables, so a second run must not push again.
        """
        if pipeline.is_running(*self.running_pipeline()):
            self.p4info = pipeline.p4info
            return False
        self.forget()
        with _PUSHES:
            req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
                device_id=self.switch.device_id, election_id=self.election_id,
                action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
            req.config.p4info.CopyFrom(pipeline.p4info.msg)
            req.config.p4_device_config = pipeline.device_config
            req.config.cookie.cookie = pipeline.cookie
            try:
                self._stub.SetForwardingPipelineConfig(req, timeout=PUSH_TIMEOUT)
            except grpc.RpcError as e:
                raise SwitchError(self.switch, f"pipeline push rejected: {_rpc_details(e)}") \
                    from None
            del req
        self.p4info = pipeline.p4info
        return True

    def use_running_pipeline(self) -> bool:
        """Take the names from the program the switch runs; False if it runs none."""
        running, _ = self.running_pipeline()
        self.p4info = running
        return running is not None

    # ---- what the switch holds ----
    def held(self) -> list[Entity] | None:
        """The managed entries as the last sync through this session left them, while that
        still holds: this session has been primary on one unbroken stream since, and wrote
        nothing else. None when the switch must be read."""
        return list(self._held) if self._held is not None and self._primary.is_set() else None

    def remember(self, entities: Iterable[Entity]) -> None:
        """What a complete sync wrote: the switch holds exactly these managed entries."""
        self._held = list(entities)

    def forget(self) -> None:
        self._held = None

    # ---- writes ----
    def write(self, updates: Iterable[tuple[int, Entity]]) -> int:
        """Apply (Update.INSERT|MODIFY|DELETE, entity) pairs in batches; returns the count.

        Every rejected update of a batch is reported with the switch's message and the entity.
        """
        self.forget()
        updates = list(updates)
        rejected: list[Rejected] = []
        unknown: list[Rejected] = []
        for start in range(0, len(updates), BATCH):
            batch = updates[start:start + BATCH]
            req = p4runtime_pb2.WriteRequest(device_id=self.switch.device_id,
                                             election_id=self.election_id)
            for kind, entity in batch:
                u = req.updates.add(type=kind)
                u.entity.CopyFrom(self.p4info.entity_proto(entity))
            try:
                self._stub.Write(req, timeout=RPC_TIMEOUT)
            except grpc.RpcError as e:
                errors = _update_errors(e)
                if errors is None or len(errors) != len(batch):
                    # No per-update answer (a transport error, a timeout): what the switch
                    # holds now says which updates took effect.
                    r, u = self._read_back(batch, _rpc_details(e))
                    rejected += r
                    unknown += u
                    continue
                for (kind, entity), err in zip(batch, errors, strict=True):
                    if err.canonical_code != code_pb2.OK:
                        rejected.append(Rejected(Update.Type.Name(kind), entity,
                                                 _code_name(err.canonical_code),
                                                 err.message or "(no message)"))
        if rejected or unknown:
            raise WriteRejected(self.switch, rejected,
                                len(updates) - len(rejected) - len(unknown), unknown)
        return len(updates)

    def _read_back(self, batch: list[tuple[int, Entity]], failure: str
                   ) -> tuple[list[Rejected], list[Rejected]]:
        """(not applied, unknown) updates of a batch whose Write failed without per-update
        errors, judged by reading the switch: an insert or modify took effect when the switch
        holds the entity as written, a delete when it holds nothing under that key."""
        try:
            held = self._read_keys({e for _, e in batch})
        except SwitchError as err:
            return [], [Rejected(Update.Type.Name(k), e, "UNKNOWN",
                                 f"write failed ({failure}) and reading back failed ({err})")
                        for k, e in batch]
        rejected = []
        for kind, entity in batch:
            now = held.get(entity.key)
            done = now is None if kind == Update.DELETE else now == entity
            if not done:
                what = "absent" if now is None else f"holds {now!r}"
                rejected.append(Rejected(Update.Type.Name(kind), entity, "NOT_APPLIED",
                                         f"read back after the write failed ({failure}): "
                                         f"{what}"))
        return rejected, []

    def _read_keys(self, entities: set[Entity]) -> dict[tuple, Entity]:
        """key -> entity held by the switch, for the tables (and groups) of `entities`."""
        held: list[Entity] = []
        for table in sorted({e.table for e in entities if isinstance(e, TableEntry)}):
            held += self.read_table(table)
        if any(isinstance(e, MulticastGroupEntry) for e in entities):
            held += self.read_multicast_groups()
        return {e.key: e for e in held}

    # ---- reads ----
    def _read(self, entities: list[p4runtime_pb2.Entity], what: str):
        req = p4runtime_pb2.ReadRequest(device_id=self.switch.device_id, entities=entities)
        try:
            for resp in self._stub.Read(req, timeout=RPC_TIMEOUT):
                yield from resp.entities
        except grpc.RpcError as e:
            raise SwitchError(self.switch, f"reading {what} failed: {_rpc_details(e)}") \
                from None

    def read_table(self, name: str) -> list[TableEntry]:
        table_id = self.p4info.table(name).preamble.id
        ent = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=table_id))
        return [self.p4info.table_entry(e.table_entry) for e in self._read([ent], name)
                if not e.table_entry.is_default_action]

    def read_tables(self, names: list[str]) -> list[TableEntry]:
        """read_table() of each, in one request (a program of many tables reads at once)."""
        if not names:
            return []
        ents = [p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
            table_id=self.p4info.table(n).preamble.id)) for n in names]
        return [self.p4info.table_entry(e.table_entry)
                for e in self._read(ents, f"{len(names)} tables")
                if not e.table_entry.is_default_action]

    def read_multicast_groups(self) -> list[MulticastGroupEntry]:
        ent = p4runtime_pb2.Entity()
        ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        return [P4Info.multicast_entry(e.packet_replication_engine_entry.multicast_group_entry)
                for e in self._read([ent], "multicast groups")
                if e.packet_replication_engine_entry.HasField("multicast_group_entry")]

    def read_counter(self, name: str) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of an indirect counter."""
        counter_id = self.p4info.counter(name).preamble.id
        ent = p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(counter_id=counter_id))
        out = {}
        for e in self._read([ent], f"counter {name}"):
            c = e.counter_entry
            out[c.index.index] = (c.data.packet_count, c.data.byte_count)
        return out
