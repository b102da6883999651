"""A gRPC server carrying the P4Runtime service."""

import logging
from concurrent import futures

import grpc
from p4.v1 import p4runtime_pb2_grpc

from .service import P4RuntimeService

MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # as BMv2's server: large JSON configs and reads
WORKERS = 48  # each StreamChannel holds a worker for its lifetime (BMv2 allows 16 clients)


def check_address(address: str) -> None:
    """Refuse what gRPC would bind somewhere else: it takes a port modulo 65536."""
    if address.startswith("unix:"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"gRPC server address {address!r}: expected HOST:PORT with a port "
                         f"within 0..65535 (0 picks a free one)")


class SslFiles:
    """PEM files for a TLS server (simple_switch_grpc's --grpc-server-* options)."""

    def __init__(self, cert: str, key: str, cacert: str | None = None,
                 require_client_auth: bool = False):
        self.cert, self.key, self.cacert = cert, key, cacert
        self.require_client_auth = require_client_auth

    def credentials(self) -> grpc.ServerCredentials:
        def read(path):
            with open(path, "rb") as f:
                return f.read()
        return grpc.ssl_server_credentials(
            [(read(self.key), read(self.cert))],
            root_certificates=read(self.cacert) if self.cacert else None,
            require_client_auth=self.require_client_auth)


class P4RuntimeServer:
    """Serve `service` on `address` ("host:port"; port 0 picks a free port)."""

    def __init__(self, service: P4RuntimeService, address: str, ssl: SslFiles | None = None,
                 log: logging.Logger | None = None):
        check_address(address)
        self.service = service
        self.address = address
        self.ssl = ssl
        self.log = log or logging.getLogger("softswitch.p4runtime")
        self.port: int | None = None
        self._server: grpc.Server | None = None

    def start(self) -> int:
        """Bind and start; returns the bound port. Raises OSError if it cannot bind."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="p4rt"),
            options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.so_reuseport", 0)])
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.service, server)
        try:
            if self.ssl:
                port = server.add_secure_port(self.address, self.ssl.credentials())
            else:
                port = server.add_insecure_port(self.address)
        except RuntimeError as exc:  # grpcio raises RuntimeError when it cannot bind
            raise OSError(f"cannot bind gRPC server to {self.address}: {exc}") from exc
        if not port:
            raise OSError(f"cannot bind gRPC server to {self.address}")
        server.start()
        self._server, self.port = server, port
        return port

    @property
    def bound_address(self) -> str:
        host = self.address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
