"""The one error type of the softswitch API; `code` names a gRPC status."""

CODES = frozenset(
    {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "OUT_OF_RANGE",
        "FAILED_PRECONDITION",
        "UNIMPLEMENTED",
        "RESOURCE_EXHAUSTED",
    }
)


class SwitchError(Exception):
    """A rejected request; the switch state is unchanged when it is raised."""

    def __init__(self, code: str, message: str):
        if code not in CODES:
            raise ValueError(f"unknown SwitchError code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
