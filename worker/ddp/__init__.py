"""PyTorch DDP through the switch: `from worker.ddp import natswitch_hook` (worker/ddp/attach.py).

The names load on first use, so `worker.ddp.main` starts without importing torch."""

_ATTACH = ("natswitch_hook", "SwitchComm", "AttachError")
__all__ = list(_ATTACH)


def __getattr__(name: str):
    if name in _ATTACH:
        from worker.ddp import attach
        return getattr(attach, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
