"""The P4Runtime gRPC service for one softswitch device (what BMv2's PI server does).

Unary RPCs run under the device lock; each StreamChannel has a reader thread
(arbitration, packet-out) and a response generator fed by the connection's
outbox (arbitration notices, packet-in, stream errors).
"""

import logging
import threading

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from . import externs, packetio, replication, tables
from .arbitration import Arbitration, Connection
from .device import Device
from .pipeline import Prefix, build, id_prefix
from .readsink import ReadSink
from .status import P4RTError, from_switch_error, invalid

API_VERSION = "1.4.1"
PACKET_IN_BACKLOG = 1024   # per stream; packet-ins beyond it are dropped and counted
READ_CHUNK = 1000          # entities per ReadResponse message
ERROR_SPACE = "softswitch"
_END = object()

SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """`emit(outputs)` receives the engine's [(port, bytes)] for each packet-out."""

    def __init__(self, switch, device_id: int, *, emit=None, log: logging.Logger | None = None,
                 entry_type=None):
        self.device = Device(switch, device_id, entry_type)
        self.arbitration = Arbitration(device_id)
        self.log = log or logging.getLogger("softswitch.p4runtime")
        self.emit = emit or self._emit_cpu_only
        self._stats_lock = threading.Lock()
        self.stats = {"packet_out": 0, "packet_in": 0, "packet_in_dropped": 0}

    # ---- unary RPCs ---------------------------------------------------------------------------

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device_id(request.device_id)
            self.arbitration.check_writer(request)
            self._set_pipeline(request.action, request.config)
        except P4RTError as e:
            self.log.warning("SetForwardingPipelineConfig refused: %s", e)
            context.abort(e.grpc_code, e.message)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device_id(request.device_id)
            with self.device.lock:
                return p4runtime_pb2.GetForwardingPipelineConfigResponse(
                    config=self._saved_config(request.response_type))
        except P4RTError as e:
            context.abort(e.grpc_code, e.message)

    def Write(self, request, context):
        try:
            self._check_device_id(request.device_id)
            self.arbitration.check_writer(request)
            if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RTError("UNIMPLEMENTED", "only CONTINUE_ON_ERROR atomicity is supported")
            with self.device.lock:
                self._require_pipeline()
                errors = [self._apply(update) for update in request.updates]
                if self.device.staged is not None:
                    self.device.staged.extend(
                        u for u, e in zip(request.updates, errors, strict=True) if e is None)
        except P4RTError as e:
            context.abort(e.grpc_code, e.message)
        failed = [e for e in errors if e is not None]
        if failed:
            self.log.info("Write: %d of %d updates failed, first: %s", len(failed), len(errors),
                          failed[0])
            context.set_trailing_metadata(
                (("grpc-status-details-bin", _batch_status(errors).SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, _batch_summary(errors))
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        try:
            self._check_device_id(request.device_id)
            with self.device.lock:
                self._require_pipeline()
                found = ReadSink(READ_CHUNK)
                for entity in request.entities:
                    self._read(entity, found)
        except P4RTError as e:
            context.abort(e.grpc_code, e.message)
        yield from found.responses

    # ---- stream channel -----------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context):
        conn = Connection(peer=context.peer())
        context.add_callback(lambda: conn.outbox.put(_END))
        reader = threading.Thread(target=self._read_stream, args=(conn, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.outbox.get()
                if item is _END:
                    return
                if isinstance(item, P4RTError):
                    context.abort(item.grpc_code, item.message)
                yield item
        finally:
            self.arbitration.remove(conn)

    def _read_stream(self, conn: Connection, request_iterator) -> None:
        try:
            for request in request_iterator:
                which = request.WhichOneof("update")
                if which == "arbitration":
                    try:
                        self.arbitration.update(conn, request.arbitration)
                    except P4RTError as e:
                        self.log.info("stream from %s ended: %s", conn.peer, e)
                        conn.outbox.put(e)
                        return
                elif conn.device_id is None:
                    self.log.info("%s sent %s before arbitration; ignored", conn.peer, which)
                elif which == "packet":
                    self._packet_out(conn, request.packet)
                else:
                    self._stream_error(conn, "UNIMPLEMENTED", f"stream message {which} is not "
                                       f"supported", other=True)
        except Exception as exc:  # the client went away; grpc raises on a cancelled stream
            self.log.debug("stream from %s closed: %s", conn.peer, exc)
        finally:
            conn.outbox.put(_END)

    def _packet_out(self, conn: Connection, packet: p4runtime_pb2.PacketOut) -> None:
        if not self.arbitration.is_primary(conn):
            self._stream_error(conn, "PERMISSION_DENIED", "only the primary client may send "
                               "PacketOut", packet=packet)
            return
        switch = self.device.live
        pipeline = self.device.pipeline
        if pipeline is None:
            self._stream_error(conn, "FAILED_PRECONDITION", "no forwarding pipeline config set",
                               packet=packet)
            return
        if switch.cpu_port is None:
            self._stream_error(conn, "FAILED_PRECONDITION", "no CPU port configured "
                               "(--cpu-port): packet I/O is not available", packet=packet)
            return
        try:
            data = packetio.packet_out_bytes(pipeline, packet)
        except P4RTError as e:
            self._stream_error(conn, e.code, e.message, packet=packet)
            return
        with self._stats_lock:
            self.stats["packet_out"] += 1
        try:
            outputs = switch.process(switch.cpu_port, data)
        except Exception:
            self.log.exception("engine failed on a PacketOut")
            return
        self.emit(outputs)

    def _stream_error(self, conn, code: str, message: str, packet=None, other=False) -> None:
        self.log.info("stream error to %s: %s %s", conn.peer, code, message)
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.error.canonical_code = code_pb2.Code.Value(code)
        msg.error.message = message
        msg.error.space = ERROR_SPACE
        if packet is not None:
            msg.error.packet_out.packet_out.CopyFrom(packet)
        elif other:
            msg.error.other.SetInParent()
        conn.send(msg)

    # ---- packet-in (called from packet loop threads) ------------------------------------------

    def packet_in(self, data: bytes) -> None:
        pipeline = self.device.pipeline
        msg = packetio.packet_in(pipeline, data) if pipeline is not None else None
        targets = self.arbitration.primaries() if msg is not None else []
        if not targets:
            with self._stats_lock:
                self.stats["packet_in_dropped"] += 1
            return
        response = p4runtime_pb2.StreamMessageResponse(packet=msg)
        for conn in targets:
            if conn.outbox.qsize() >= PACKET_IN_BACKLOG:
                with self._stats_lock:
                    self.stats["packet_in_dropped"] += 1
                continue
            conn.send(response)
            with self._stats_lock:
                self.stats["packet_in"] += 1

    def _emit_cpu_only(self, outputs) -> None:
        for port, data in outputs:
            if port == self.device.live.cpu_port:
                self.packet_in(data)
            else:
                self.log.debug("packet-out result for port %s dropped: no ports attached", port)

    # ---- pipeline config ----------------------------------------------------------------------

    def _set_pipeline(self, action: int, config) -> None:
        device = self.device
        if action == SetAction.COMMIT:
            with device.lock:
                self._commit_staged()
            return
        if action == SetAction.RECONCILE_AND_COMMIT:
            raise P4RTError("UNIMPLEMENTED", "RECONCILE_AND_COMMIT is not supported")
        if action not in (SetAction.VERIFY, SetAction.VERIFY_AND_SAVE,
                          SetAction.VERIFY_AND_COMMIT):
            raise invalid("invalid SetForwardingPipelineConfig action")
        pipeline, scratch = self._verify(config)
        if action == SetAction.VERIFY:
            return
        with device.lock:
            if action == SetAction.VERIFY_AND_SAVE:
                # Reads and writes now refer to the saved config; packets still
                # run the old one until COMMIT.
                device.switch, device.pipeline = scratch, pipeline
                device.config, device.staged = _copy(config), []
                device.reset_side_state()
                self.log.info("pipeline saved: %d tables; COMMIT to realize it",
                              len(pipeline.tables))
            else:
                self._realize(config, scratch)

    def _verify(self, config):
        """Compile the config in a scratch engine and check the P4Info against it."""
        if not config.p4_device_config:
            raise invalid("p4_device_config is empty: it must hold the BMv2 JSON")
        switch = self.device.live
        try:
            if hasattr(switch, "scratch"):
                scratch = switch.scratch()
            else:
                scratch = type(switch)(device_id=self.device.device_id, cpu_port=switch.cpu_port,
                                       drop_port=getattr(switch, "drop_port", 511))
            scratch.load(config.p4_device_config)
        except Exception as exc:
            raise _config_error(exc) from exc
        return build(config.p4info, scratch), scratch

    def _realize(self, config, verified=None) -> None:
        """Load a config into the live engine; all state starts empty. verified: the
        scratch engine _verify() compiled this config in, whose program the live engine
        takes instead of compiling it again."""
        device = self.device
        try:
            if verified is not None and hasattr(device.live, "scratch"):  # it made verified
                device.live.adopt(verified)
            else:
                device.live.load(config.p4_device_config)
        except Exception as exc:
            raise _config_error(exc) from exc
        device.switch = device.live
        device.pipeline = build(config.p4info, device.live)
        device.config = _copy(config)
        device.staged = None
        device.reset_side_state()
        self.log.info("pipeline set: %d tables, %d actions", len(device.pipeline.tables),
                      len(device.pipeline.actions))

    def _commit_staged(self) -> None:
        device = self.device
        if device.staged is None:
            raise P4RTError("NOT_FOUND", "COMMIT without a config saved by VERIFY_AND_SAVE")
        updates = device.staged
        self._realize(device.config)
        for update in updates:  # they all succeeded on the same program, from the same start
            error = self._apply(update)
            if error is not None:
                self.log.error("replaying a saved write at COMMIT failed: %s", error)
                raise P4RTError("INTERNAL", f"replaying writes at COMMIT failed: {error}")

    def _saved_config(self, response_type: int):
        device = self.device
        if device.pipeline is None:
            raise P4RTError("FAILED_PRECONDITION", "no forwarding pipeline config set for this "
                            "device")
        saved = device.config
        out = p4runtime_pb2.ForwardingPipelineConfig()
        if response_type not in GetType.ResponseType.values():
            raise invalid("invalid response_type in GetForwardingPipelineConfigRequest")
        if response_type in (GetType.ALL, GetType.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(saved.p4info)
        if response_type in (GetType.ALL, GetType.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = saved.p4_device_config
        if saved.HasField("cookie"):
            out.cookie.CopyFrom(saved.cookie)
        return out

    # ---- per-entity dispatch ------------------------------------------------------------------

    def _apply(self, update) -> P4RTError | None:
        try:
            self._write_entity(update.type, update.entity)
            return None
        except P4RTError as e:
            return e
        except Exception as exc:
            mapped = from_switch_error(exc)
            if mapped is not None:
                return mapped
            self.log.exception("internal error on a write update")
            return P4RTError("INTERNAL", f"{type(exc).__name__}: {exc}")

    def _write_entity(self, kind: int, entity) -> None:
        device = self.device
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            tables.write(device, kind, entity.table_entry)
        elif which == "direct_counter_entry":
            tables.write_direct_counter(device, kind, entity.direct_counter_entry)
        elif which == "counter_entry":
            externs.write_counter(device, kind, entity.counter_entry)
        elif which == "register_entry":
            externs.write_register(device, kind, entity.register_entry)
        elif which == "packet_replication_engine_entry":
            replication.write(device, kind, entity.packet_replication_engine_entry)
        elif which is None:
            raise invalid("entity is not set")
        else:
            self._unsupported(which, getattr(entity, which))

    def _read(self, entity, out: ReadSink) -> None:
        device = self.device
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            tables.read(device, entity.table_entry, out)
        elif which == "direct_counter_entry":
            tables.read_direct_counter(device, entity.direct_counter_entry, out)
        elif which == "counter_entry":
            externs.read_counter(device, entity.counter_entry, out)
        elif which == "register_entry":
            externs.read_register(device, entity.register_entry, out)
        elif which == "packet_replication_engine_entry":
            replication.read(device, entity.packet_replication_engine_entry, out)
        elif which is None:
            raise invalid("entity is not set")
        else:
            self._unsupported(which, getattr(entity, which), reading=True)

    def _unsupported(self, which: str, msg, reading: bool = False) -> None:
        """Entities this target lacks: a bad id is still INVALID_ARGUMENT, as in BMv2;
        a wildcard read of a kind the program does not use is an empty answer."""
        pipeline = self.device.pipeline
        if which == "direct_meter_entry":
            table = pipeline.table(msg.table_entry.table_id)
            if not any(m.direct_table_id == table.id for m in pipeline.p4info.direct_meters):
                raise invalid(f"table {table.name} has no direct meters")
        else:
            attr, prefix, known = {
                "meter_entry": ("meter_id", Prefix.METER, pipeline.meters),
                "action_profile_member": ("action_profile_id", Prefix.ACTION_PROFILE,
                                          pipeline.action_profiles),
                "action_profile_group": ("action_profile_id", Prefix.ACTION_PROFILE,
                                         pipeline.action_profiles),
                "value_set_entry": ("value_set_id", Prefix.VALUE_SET, pipeline.value_sets),
                "digest_entry": ("digest_id", Prefix.DIGEST, pipeline.digests),
            }.get(which, (None, None, set()))
            p4_id = getattr(msg, attr) if attr else 0
            if reading and attr and p4_id == 0:
                if not known:
                    return
            elif attr and (id_prefix(p4_id) != prefix or p4_id not in known):
                raise invalid(f"Invalid P4 id {p4_id:#x} for {which}")
        raise P4RTError("UNIMPLEMENTED", f"{which} is not supported by this target")

    # ---- helpers ------------------------------------------------------------------------------

    def _check_device_id(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RTError("NOT_FOUND", f"unknown device id {device_id} (this switch is "
                            f"device {self.device.device_id})")

    def _require_pipeline(self) -> None:
        if self.device.pipeline is None:
            raise P4RTError("FAILED_PRECONDITION", "no forwarding pipeline config set for this "
                            "device")


def _copy(config):
    out = p4runtime_pb2.ForwardingPipelineConfig()
    out.CopyFrom(config)
    return out


def _config_error(exc: Exception) -> P4RTError:
    mapped = from_switch_error(exc)
    if mapped is not None:
        return P4RTError(mapped.code, f"device config rejected: {mapped.message}")
    return invalid(f"device config rejected: {type(exc).__name__}: {exc}")


def _batch_status(errors: list) -> status_pb2.Status:
    """google.rpc.Status with one p4.v1.Error per update, in order (P4Runtime 1.4 12.3)."""
    status = status_pb2.Status(code=code_pb2.UNKNOWN, message=_batch_summary(errors))
    for e in errors:
        error = p4runtime_pb2.Error()
        if e is not None:
            error.canonical_code = e.rpc_code
            error.message = e.message
            error.space = ERROR_SPACE
        detail = any_pb2.Any()
        detail.Pack(error)
        status.details.append(detail)
    return status


def _batch_summary(errors: list) -> str:
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    first_index, first = failed[0]
    return (f"{len(failed)} of {len(errors)} updates failed; first at index {first_index}: "
            f"{first.code}: {first.message}")
