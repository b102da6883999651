"""The packet loop's native path: whole bursts of a port's frames in one call (ns_rx).

Used by softswitch.runtime when the program runs natively with the whole-packet call and
the port reads a PACKET_MMAP ring; everything else (pcap capture, UDP tunnels, the CPU
port, packets that need the Python orchestration) stays with the Python loop, frame by
frame. Counters are folded back into the ports and the switch after each call.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..ports import Port, RawPort
from .rx import DROPPED, EVENT, EVENTS, IN, MAX_TX_PORT, OUT_, TOO_BIG

BURST = 64
_SEND = ctypes.cast(ctypes.CDLL(None, use_errno=True).send, ctypes.c_void_p).value


class NativePorts:
    """The socket table ns_rx sends on, and its counters, for one set of ports."""

    def __init__(self, ports: dict):
        self.ports = ports
        self.txfd = np.full(MAX_TX_PORT + 1, -1, dtype=np.int64)
        self.txn = np.zeros(2 * (MAX_TX_PORT + 1), dtype=np.int64)  # sent, then errors
        self.st = np.zeros(8, dtype=np.int64)
        self.slow = np.zeros(1 << 18, dtype=np.uint8)  # a frame for Python, a tagged frame
        self.slow_ptr, self.txfd_ptr = self.slow.ctypes.data, self.txfd.ctypes.data
        self.txn_ptr, self.st_ptr = self.txn.ctypes.data, self.st.ctypes.data
        self.send = _SEND
        self.refresh()

    def refresh(self) -> None:
        """The current sockets (a raw port's changes when its interface comes back)."""
        self.changes = Port.changes
        self.txfd[:] = -1
        for number, p in self.ports.items():
            sock = getattr(p, "sock", None)
            if 0 <= number <= MAX_TX_PORT and sock is not None and not p.pcap_out and \
                    isinstance(p, RawPort):
                self.txfd[number] = sock.fileno()


def drain(runtime, port, nports: NativePorts) -> bool:
    """One port's ready frames through ns_rx; False when this port or program cannot take
    the native path (the caller then drains it in Python). Kept short: it runs once per
    wake-up of the packet loop."""
    sw = runtime.switch
    ring = port.ring
    native = getattr(sw, "native_program", None)  # an engine without a native tier: None
    if ring is None or port.pcap_in is not None or native is None:
        return False
    with sw._lock:
        nat = native()
        if nat is None:
            return False
        if nports.changes != Port.changes:  # a socket opened or lost since
            nports.refresh()
        r = nat.rx(ring, sw._now(), nports, sw.pre, BURST)
        st = nports.st.tolist()
        if any(st):
            fold(sw, st, nat)
            nports.st.fill(0)
        outputs = None
        if r == -1:  # the Python orchestration goes on from what ingress left
            n = int(nports.slow[:8].view(np.int64)[0])
            outputs = sw.resume_native(port.number, bytes(nports.slow[8:8 + n]))
        elif r == -2:
            outputs = nat.leftover()
            sw.count_native_leftover(len(outputs))
    if outputs:
        runtime.emit(outputs)
    return True


def fold(sw, st: list, nat) -> None:
    """ns_rx's counts into the switch's statistics (and its failed asserts into the log)."""
    if st[EVENTS]:
        ev = st[EVENT]
        sw.log.error("%s%s", nat.events[ev] if ev < len(nat.events) else "assert failed",
                     f" ({st[EVENTS]} packets)" if st[EVENTS] > 1 else "")
    s = sw.stats
    s["packets_in"] += st[IN]
    s["packets_out"] += st[OUT_]
    s["dropped"] += st[DROPPED]
    s["too_big"] += st[TOO_BIG]


def fold_tx(nports: NativePorts) -> None:
    """The frames ns_rx sent (and failed to) into the ports' counters; read when they are
    reported, not per burst."""
    txn = nports.txn
    half = MAX_TX_PORT + 1
    for k in np.flatnonzero(txn):
        p = nports.ports.get(int(k) % half)
        if p is not None:
            if k < half:
                p.tx += int(txn[k])
            else:
                p.tx_errors += int(txn[k])
    txn[:] = 0
