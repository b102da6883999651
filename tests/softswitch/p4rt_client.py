"""A small P4Runtime client over the plain generated stubs, for the server tests."""

import queue
import threading

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

Update = p4runtime_pb2.Update


class Client:
    def __init__(self, address: str, device_id: int = 1):
        self.device_id = device_id
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.election_id: tuple[int, int] | None = None
        self.role = ""
        self._out: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.stream = None
        self.stream_error: grpc.RpcError | None = None

    # ---- stream -------------------------------------------------------------------------------

    def open_stream(self) -> None:
        def requests():
            while (msg := self._out.get()) is not None:
                yield msg

        self.stream = self.stub.StreamChannel(requests())

        def pump():
            try:
                for msg in self.stream:
                    self.inbox.put(msg)
            except grpc.RpcError as exc:
                self.stream_error = exc
            self.inbox.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def arbitrate(self, election_id=(0, 1), role: str = "", device_id: int | None = None,
                  timeout: float = 5.0):
        """Send a MasterArbitrationUpdate; returns the server's reply (or None if it ended)."""
        if self.stream is None:
            self.open_stream()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id if device_id is None else device_id
        if election_id is not None:
            req.arbitration.election_id.high, req.arbitration.election_id.low = election_id
        if role:
            req.arbitration.role.name = role
        self.election_id, self.role = election_id, role
        self._out.put(req)
        return self.next_message("arbitration", timeout)

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def packet_out(self, payload: bytes, metadata: dict[int, bytes]) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in metadata.items():
            req.packet.metadata.add(metadata_id=mid, value=value)
        self._out.put(req)

    def next_message(self, kind: str | None = None, timeout: float = 5.0):
        """The next stream message (of `kind` if given); None on timeout or stream end."""
        while True:
            try:
                msg = self.inbox.get(timeout=timeout)
            except queue.Empty:
                return None
            if msg is None:
                self.inbox.put(None)
                return None
            if kind is None or msg.WhichOneof("update") == kind:
                return msg

    # ---- unary --------------------------------------------------------------------------------

    def _stamp(self, req) -> None:
        req.device_id = self.device_id
        if self.election_id is not None:
            req.election_id.high, req.election_id.low = self.election_id
        if self.role:
            req.role = self.role

    def set_pipeline(self, p4info, device_config: bytes, action=None, cookie: int | None = None):
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        self._stamp(req)
        req.action = (p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
                      if action is None else action)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(req)

    def get_pipeline(self, response_type=0):
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=response_type)
        return self.stub.GetForwardingPipelineConfig(req).config

    def write(self, *updates: tuple[int, p4runtime_pb2.Entity]) -> None:
        req = p4runtime_pb2.WriteRequest()
        self._stamp(req)
        for kind, entity in updates:
            req.updates.add(type=kind).entity.CopyFrom(entity)
        self.stub.Write(req)

    def insert(self, entity) -> None:
        self.write((Update.INSERT, entity))

    def modify(self, entity) -> None:
        self.write((Update.MODIFY, entity))

    def delete(self, entity) -> None:
        self.write((Update.DELETE, entity))

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        for e in entities:
            req.entities.add().CopyFrom(e)
        out = []
        for rep in self.stub.Read(req):
            out.extend(rep.entities)
        return out

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


def batch_errors(exc: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The per-update p4.v1.Error list carried by a failed batch Write."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for detail in status.details:
                error = p4runtime_pb2.Error()
                assert detail.Unpack(error)
                errors.append(error)
            return errors
    raise AssertionError("no grpc-status-details-bin in the error")
