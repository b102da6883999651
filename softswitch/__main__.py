"""`python -m softswitch`: start the switch as simple_switch_grpc is started.

    python -m softswitch --device-id 1 -i 1@s1-eth1 -i 2@s1-eth2 \\
        [--no-p4 | program.json] -- --grpc-server-addr 127.0.0.1:50051 --cpu-port 255

simple_switch_grpc wants its target options after `--`; here they may come
before or after it. Options of simple_switch_grpc that have no meaning here
(thrift, nanomsg, debugger, queues) are accepted and ignored, so a Mininet
switch class can start either binary with the same arguments.
"""

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading

from .p4runtime.server import check_address
from .ports import open_port, parse_port_spec

LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
          "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 10}
VERSION = "softswitch 0.1 (BMv2 JSON 2.x, P4Runtime 1.4.1)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m softswitch",
        description="Pure-Python BMv2-compatible switch serving P4Runtime (started like "
                    "simple_switch_grpc).",
        epilog="Port specs: N@IFNAME attaches interface IFNAME (needs root); "
               "N@udp:LHOST:LPORT>RHOST:RPORT is a UDP tunnel, one Ethernet frame per "
               "datagram. Target options may also follow a `--`.")
    p.add_argument("config", nargs="?", metavar="program.json",
                   help="BMv2 JSON to run at start (P4Runtime clients still need "
                        "SetForwardingPipelineConfig)")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="N@IFACE",
                   help="attach a port; may repeat")
    p.add_argument("--no-p4", action="store_true", help="start without a program")
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    p.add_argument("--grpc-server-addr", default="127.0.0.1:9559",
                   help="gRPC server address (default 127.0.0.1:9559, loopback only, unlike "
                        "BMv2; port 0 picks one)")
    p.add_argument("--cpu-port", type=int, default=None,
                   help="port number for packet-in / packet-out (no packet I/O without it)")
    p.add_argument("--drop-port", type=int, default=511, help="drop port (default 511)")
    p.add_argument("--no-vectorize", action="store_true",
                   help="run every action as scalar Python code (no numpy fast path)")
    p.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR",
                   help="write <iface>_in.pcap / <iface>_out.pcap per port into DIR (default .)")
    p.add_argument("--pcap-dir", default=None, metavar="DIR", help="same as --pcap DIR")
    p.add_argument("-L", "--log-level", choices=sorted(LEVELS), default=None,
                   help="log level (default: warn, or info with --log-console/--log-file)")
    p.add_argument("--log-file", default=None, help="log to this file")
    p.add_argument("--log-console", action="store_true", help="log to stdout")
    p.add_argument("--grpc-server-ssl", action="store_true", help="serve gRPC over TLS")
    p.add_argument("--grpc-server-cert", default=None, help="PEM server certificate")
    p.add_argument("--grpc-server-key", default=None, help="PEM server key")
    p.add_argument("--grpc-server-cacert", default=None, help="PEM CA to verify clients")
    p.add_argument("--grpc-server-with-client-auth", action="store_true",
                   help="require client certificates")
    p.add_argument("-v", "--version", action="version", version=VERSION)
    ignored = p.add_argument_group("accepted for compatibility, ignored")
    for name in ("--thrift-port", "--nanolog", "--notifications-addr", "--debugger-addr",
                 "--max-port-count", "--log-file-max-size", "--log-file-max-files",
                 "--dump-packet-data", "--priority-queues", "--max-mc-groups",
                 "--max-l1-entries", "--max-l2-entries", "--dp-grpc-server-addr"):
        ignored.add_argument(name, default=None, help=argparse.SUPPRESS)
    for name in ("--log-flush", "--debugger", "--disable-swap"):
        ignored.add_argument(name, action="store_true", help=argparse.SUPPRESS)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args([a for a in argv if a != "--"])
    if args.cpu_port is not None and not 0 < args.cpu_port:
        parser.error("--cpu-port: 0 is not a valid CPU port")
    if args.no_p4 and args.config:
        args.config = None  # as BMv2: --no-p4 wins, the JSON is ignored
    if not args.no_p4 and not args.config:
        parser.error("no program given: pass program.json or --no-p4")
    try:
        args.ports = [parse_port_spec(s) for s in args.interface]
    except ValueError as exc:
        parser.error(str(exc))
    numbers = [s.number for s in args.ports]
    if len(set(numbers)) != len(numbers):
        parser.error("two -i options use the same port number")
    if args.cpu_port is not None and args.cpu_port in numbers:
        parser.error(f"port {args.cpu_port} is the CPU port; attach no interface to it")
    args.pcap_dir = args.pcap_dir or args.pcap
    if args.pcap_dir is not None and not os.path.isdir(args.pcap_dir):
        parser.error(f"pcap directory {args.pcap_dir!r} does not exist")
    try:
        check_address(args.grpc_server_addr)
    except ValueError as exc:
        parser.error(str(exc))
    if args.grpc_server_ssl and not (args.grpc_server_cert and args.grpc_server_key):
        parser.error("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    return args


def setup_logging(args) -> logging.Logger:
    log = logging.getLogger("softswitch")
    quiet_default = not (args.log_console or args.log_file)
    level = LEVELS[args.log_level] if args.log_level else (
        logging.WARNING if quiet_default else logging.INFO)
    log.setLevel(level)
    fmt = logging.Formatter("[%(asctime)s] [%(levelname)s] %(name)s: %(message)s")
    if args.log_file:
        handler = logging.FileHandler(args.log_file)
    else:
        handler = logging.StreamHandler(sys.stdout if args.log_console else sys.stderr)
    handler.setFormatter(fmt)
    log.addHandler(handler)
    log.propagate = False
    return log


def report_crashes(log: logging.Logger, failed: threading.Event, stop: threading.Event) -> None:
    """A crash anywhere must leave its trace in the switch's log and end the process with
    a non-zero status. A fatal signal in native code (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
    SIGABRT) is written there by faulthandler, every thread's Python stack with it, and
    the process then dies of that signal. An exception that ends any thread (the packet
    loop reports its own through Runtime.on_failure) is logged as an error and stops the
    switch, which then exits 1: serving P4Runtime without a packet path would be silent."""
    stream = next((h.stream for h in log.handlers if getattr(h, "stream", None)), sys.stderr)
    try:
        faulthandler.enable(file=stream, all_threads=True)
    except (AttributeError, ValueError, OSError):  # a stream without a file descriptor
        faulthandler.enable(all_threads=True)

    def on_thread_error(args) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        log.error("thread %s failed", name,
                  exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
        failed.set()
        stop.set()

    threading.excepthook = on_thread_error


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = setup_logging(args)
    stop, failed = threading.Event(), threading.Event()
    report_crashes(log, failed, stop)
    from . import Switch  # the engine; imported late so --help works without it
    from .p4runtime import SslFiles
    from .runtime import Runtime

    switch = Switch(device_id=args.device_id, cpu_port=args.cpu_port, drop_port=args.drop_port,
                    log=log.getChild("engine"), vectorize=not args.no_vectorize)
    if args.config:
        try:
            with open(args.config, "rb") as f:
                switch.load(f.read())
        except Exception as exc:
            log.error("cannot load %s: %s", args.config, exc)
            print(f"error: cannot load {args.config}: {exc}", file=sys.stderr)
            return 1
    ports = []
    try:
        for spec in args.ports:
            ports.append(open_port(spec, args.pcap_dir, log.getChild("ports")))
    except OSError as exc:
        print(f"error: cannot open port: {exc}", file=sys.stderr)
        for p in ports:
            p.close()
        return 1
    ssl = None
    if args.grpc_server_ssl:
        ssl = SslFiles(args.grpc_server_cert, args.grpc_server_key, args.grpc_server_cacert,
                       args.grpc_server_with_client_auth)

    def on_failure(_exc: BaseException) -> None:
        failed.set()
        stop.set()

    runtime = Runtime(switch, ports, device_id=args.device_id, grpc_addr=args.grpc_server_addr,
                      ssl=ssl, log=log, on_failure=on_failure)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        runtime.start()
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        for p in ports:
            p.close()
        return 1
    print(f"Server listening on {runtime.server.bound_address}", flush=True)
    log.info("device %d: %d ports, cpu port %s, program %s", args.device_id, len(ports),
             args.cpu_port, args.config or "none")
    while not stop.wait(1.0):
        pass
    log.info("shutting down")
    runtime.stop()
    if failed.is_set():
        log.error("stopped after a failure (above): exit status 1")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
