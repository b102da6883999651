"""Errors the P4Runtime server reports, and their gRPC / google.rpc codes."""

import grpc
from google.rpc import code_pb2

# Codes an engine SwitchError may carry (docs/SOFTSWITCH.md, The engine's API) plus the ones the
# server itself raises; names are shared by grpc.StatusCode and google.rpc.Code.
KNOWN_CODES = frozenset({
    "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_RANGE", "FAILED_PRECONDITION",
    "UNIMPLEMENTED", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "UNKNOWN", "INTERNAL",
})


class P4RTError(Exception):
    """A request the server refuses; `code` is a google.rpc code name."""

    def __init__(self, code: str, message: str):
        if code not in KNOWN_CODES:
            code = "UNKNOWN"
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def grpc_code(self) -> grpc.StatusCode:
        return getattr(grpc.StatusCode, self.code)

    @property
    def rpc_code(self) -> int:
        return code_pb2.Code.Value(self.code)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def invalid(message: str) -> P4RTError:
    return P4RTError("INVALID_ARGUMENT", message)


def from_switch_error(exc: Exception) -> P4RTError | None:
    """The engine's SwitchError as a P4RTError; None for any other exception.

    Matched by shape (a str `code` among the known names) so the server does not
    depend on where the engine defines its exception class.
    """
    code = getattr(exc, "code", None)
    if isinstance(code, str) and code in KNOWN_CODES:
        message = getattr(exc, "message", None) or str(exc)
        return P4RTError(code, message)
    return None


def engine_call(fn, *args):
    """Call an engine method, turning its SwitchError into a P4RTError."""
    try:
        return fn(*args)
    except P4RTError:
        raise
    except Exception as exc:
        mapped = from_switch_error(exc)
        if mapped is None:
            raise
        raise mapped from exc
