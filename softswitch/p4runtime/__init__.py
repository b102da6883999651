"""P4Runtime 1.4 server for the softswitch engine (see docs in service.py)."""

from .server import P4RuntimeServer, SslFiles
from .service import API_VERSION, P4RuntimeService
from .status import P4RTError

__all__ = ["API_VERSION", "P4RTError", "P4RuntimeServer", "P4RuntimeService", "SslFiles"]
