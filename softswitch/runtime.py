"""One running switch: the engine, its ports, one packet loop over all ports, the P4Runtime
server.

One thread waits on every port's socket at once (epoll through selectors) and drains each
readable port up to BURST frames per wake-up before it looks at the next: one wake-up and one
lock round per burst instead of per frame, and no port threads contending for the GIL. Frames
of one port are processed in arrival order, as before. Where the program runs natively and a
port reads a receive ring, a burst is one call into native code that also sends the outputs
(native/loop.py; NATSWITCH_NATIVE_LOOP=0 keeps the frame-by-frame loop).
SOFTSWITCH_PROFILE=PATH writes a cProfile of the packet loop to PATH.<pid> when the switch
stops.
"""

import logging
import os
import selectors
import threading
import time
from collections.abc import Callable

from .native.loop import NativePorts, fold_tx
from .native.loop import drain as drain_native
from .p4runtime import P4RuntimeServer, P4RuntimeService, SslFiles
from .ports import Port

POLL = 0.2  # seconds the packet loop blocks before checking for shutdown and lost ports
BURST = 64  # frames read from one port per wake-up before the next ready port's turn


class Runtime:
    def __init__(self, switch, ports: list[Port], *, device_id: int, grpc_addr: str,
                 ssl: SslFiles | None = None, log: logging.Logger | None = None,
                 on_failure: Callable[[BaseException], None] | None = None):
        self.switch = switch
        # an exception that ends the packet loop is logged, kept here and handed to
        # on_failure (python -m softswitch then exits non-zero): the switch must not go on
        # serving P4Runtime without forwarding
        self.on_failure = on_failure
        self.failure: BaseException | None = None
        self.log = log or logging.getLogger("softswitch")
        self.ports = {p.number: p for p in ports}
        if len(self.ports) != len(ports):
            raise ValueError("two ports share a port number")
        if switch.cpu_port is not None and switch.cpu_port in self.ports:
            raise ValueError(f"port {switch.cpu_port} is the CPU port; attach no interface to it")
        self.service = P4RuntimeService(switch, device_id, emit=self.emit,
                                        log=self.log.getChild("p4runtime"))
        self.server = P4RuntimeServer(self.service, grpc_addr, ssl, self.log)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._resting: dict[int, float] = {}   # port number -> when to read it again
        self.stats = {"no_port": 0, "engine_errors": 0}
        # a compiled program drains whole bursts of a ring in one call (native/loop.py)
        self._native = NativePorts(self.ports) if os.environ.get(
            "NATSWITCH_NATIVE_LOOP", "1") != "0" else None

    def start(self) -> int:
        """Start the gRPC server and the packet loops; returns the gRPC port."""
        port = self.server.start()
        t = threading.Thread(target=self._serve, name="packets", daemon=True)
        t.start()
        self._threads.append(t)
        return port

    def emit(self, outputs) -> None:
        """Send the engine's output packets: to ports, or as PacketIn for the CPU port."""
        cpu = self.switch.cpu_port
        for number, frame in outputs:
            if number == cpu:
                self.service.packet_in(frame)
                continue
            port = self.ports.get(number)
            if port is None:
                with self._lock:
                    self.stats["no_port"] += 1
                self.log.debug("output on port %s dropped: no interface attached", number)
                continue
            port.send(frame)

    def _serve(self) -> None:
        try:
            self._profiled()
        except Exception as exc:  # a bug of the loop (per-packet engine errors are caught)
            self.failure = exc
            self.log.error("packet loop failed: the switch no longer forwards", exc_info=True)
            if self.on_failure is not None:
                self.on_failure(exc)

    def _profiled(self) -> None:
        path = os.environ.get("SOFTSWITCH_PROFILE")
        if not path:
            self._loop()
            return
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        try:
            self._loop()
        finally:
            prof.disable()
            prof.dump_stats(f"{path}.{os.getpid()}")

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        watched: dict[int, object] = {}     # port number -> the socket registered for it
        try:
            while not self._stop.is_set():
                self._watch(sel, watched)
                if not watched:
                    self._stop.wait(POLL)
                    continue
                try:
                    ready = sel.select(POLL)
                except OSError:             # a socket closed under us: re-register and retry
                    self._stop.wait(0.01)
                    continue
                for key, mask in ready:
                    port = key.data
                    if mask & selectors.EVENT_WRITE and getattr(port, "failed", None) \
                            and port.failed():  # an error, not a frame: the port is lost
                        continue
                    if self._native is None or not drain_native(self, port, self._native):
                        self._drain(port)
        finally:
            sel.close()

    def _watch(self, sel, watched: dict) -> None:
        """Registers each port's current socket: a raw port's changes when its interface
        vanishes and returns."""
        now = time.monotonic()
        for port in self.ports.values():
            sock = getattr(port, "sock", None)
            if sock is None and hasattr(port, "reopen_due"):
                port.reopen_due()
                sock = port.sock
            if self._resting.get(port.number, 0.0) > now:
                sock = None                 # its receive failed: left alone for POLL seconds
            old = watched.get(port.number)
            if old is sock:
                continue
            if old is not None:
                try:
                    sel.unregister(old)
                except (KeyError, ValueError, OSError):
                    pass
                del watched[port.number]
            if sock is not None and sock.fileno() >= 0:
                sel.register(sock, selectors.EVENT_READ, port)
                watched[port.number] = sock

    def _drain(self, port: Port) -> None:
        process, emit = self.switch.process, self.emit
        for _ in range(BURST):
            try:
                frame = port.poll()
            except Exception:
                if not self._stop.is_set():
                    self.log.exception("port %d: receive failed", port.number)
                    self._resting[port.number] = time.monotonic() + POLL
                return
            if frame is None:
                return
            try:
                outputs = process(port.number, frame)
            except Exception:
                with self._lock:
                    self.stats["engine_errors"] += 1
                    errors = self.stats["engine_errors"]
                if errors in (1, 10, 100) or errors % 1000 == 0:
                    self.log.exception("engine failed on a packet from port %d (%d so far)",
                                       port.number, errors)
                continue
            if outputs:
                emit(outputs)

    def stop(self) -> None:
        self._stop.set()
        self.server.stop(grace=0.5)
        for t in self._threads:
            t.join(timeout=2 * POLL + 1)
        if self._native is not None:
            fold_tx(self._native)
        for p in self.ports.values():
            p.close()
        ports = ", ".join(f"{p.number}:{p.name} rx {p.rx} tx {p.tx}"
                          + (f" foreign {p.foreign}" if getattr(p, "foreign", 0) else "")
                          for p in self.ports.values())
        self.log.info("stopped; ports %s; engine %s; p4runtime %s; no port %d", ports or "none",
                      getattr(self.switch, "stats", {}), self.service.stats,
                      self.stats["no_port"])
