"""One running switch: the engine, its ports, one packet loop per port, the P4Runtime server."""

import logging
import threading

from .p4runtime import P4RuntimeServer, P4RuntimeService, SslFiles
from .ports import Port

POLL = 0.2  # seconds a packet loop blocks before checking for shutdown


class Runtime:
    def __init__(self, switch, ports: list[Port], *, device_id: int, grpc_addr: str,
                 ssl: SslFiles | None = None, log: logging.Logger | None = None):
        self.switch = switch
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
        self.stats = {"no_port": 0, "engine_errors": 0}

    def start(self) -> int:
        """Start the gRPC server and the packet loops; returns the gRPC port."""
        port = self.server.start()
        for p in self.ports.values():
            t = threading.Thread(target=self._loop, args=(p,), name=f"port-{p.number}",
                                 daemon=True)
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

    def _loop(self, port: Port) -> None:
        while not self._stop.is_set():
            try:
                frame = port.recv(POLL)
            except Exception:
                if self._stop.is_set():
                    return
                self.log.exception("port %d: receive failed", port.number)
                self._stop.wait(POLL)
                continue
            if frame is None:
                continue
            try:
                outputs = self.switch.process(port.number, frame)
            except Exception:
                with self._lock:
                    self.stats["engine_errors"] += 1
                    errors = self.stats["engine_errors"]
                if errors in (1, 10, 100) or errors % 1000 == 0:
                    self.log.exception("engine failed on a packet from port %d (%d so far)",
                                       port.number, errors)
                continue
            self.emit(outputs)

    def stop(self) -> None:
        self._stop.set()
        self.server.stop(grace=0.5)
        for t in self._threads:
            t.join(timeout=2 * POLL + 1)
        for p in self.ports.values():
            p.close()
        ports = ", ".join(f"{p.number}:{p.name} rx {p.rx} tx {p.tx}"
                          + (f" foreign {p.foreign}" if getattr(p, "foreign", 0) else "")
                          for p in self.ports.values())
        self.log.info("stopped; ports %s; engine %s; p4runtime %s; no port %d", ports or "none",
                      getattr(self.switch, "stats", {}), self.service.stats,
                      self.stats["no_port"])
