"""natswitch's embedded target: a pure-Python, BMv2-compatible v1model switch."""

from .errors import SwitchError
from .switch import Switch
from .tables import Entry, Table

__all__ = ["Entry", "Switch", "SwitchError", "Table"]
