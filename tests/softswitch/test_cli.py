"""`python -m softswitch`: simple_switch_grpc's arguments, startup line, clean SIGTERM."""

import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from p4rt_client import Client
from test_ports import free_udp_ports

from softswitch.__main__ import parse_args

REPO = Path(__file__).resolve().parents[2]
STOP_TIMEOUT = 15  # seconds a stopped switch may take to exit (a loaded 2-core machine)


def start_switch(*args: str) -> tuple[subprocess.Popen, str]:
    """Start the CLI; returns the process and the gRPC address from its startup line."""
    proc = subprocess.Popen([sys.executable, "-m", "softswitch", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("Server listening on "):
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"no startup line: {line!r}\n{err}")
    return proc, line.split()[-1]


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=STOP_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_help_lists_the_simple_switch_options():
    out = subprocess.run([sys.executable, "-m", "softswitch", "--help"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for option in ("--device-id", "--interface", "--grpc-server-addr", "--cpu-port", "--no-p4",
                   "--pcap", "--log-level", "--log-file"):
        assert option in out.stdout


def test_target_options_before_or_after_double_dash():
    common = ["--device-id", "3", "-i", "1@s1-eth1", "-i", "2@s1-eth2", "prog.json"]
    target = ["--grpc-server-addr", "127.0.0.1:50051", "--cpu-port", "255"]
    for argv in (common + ["--"] + target, common + target, target + common):
        args = parse_args(argv)
        assert args.device_id == 3 and args.config == "prog.json"
        assert [(p.number, p.name) for p in args.ports] == [(1, "s1-eth1"), (2, "s1-eth2")]
        assert args.grpc_server_addr == "127.0.0.1:50051" and args.cpu_port == 255


def test_mininet_style_arguments_are_accepted(tmp_path):
    args = parse_args(["-i", "1@s1-eth1", "--pcap", str(tmp_path), "--log-console",
                       "--thrift-port", "9090", "--nanolog", "ipc:///tmp/bm-0-log.ipc",
                       "--device-id", "0", "--no-p4", "--", "--grpc-server-addr",
                       "0.0.0.0:50051", "--cpu-port", "511", "--drop-port", "510"])
    assert args.pcap_dir == str(tmp_path) and args.no_p4 and args.config is None
    assert (args.cpu_port, args.drop_port) == (511, 510)


@pytest.mark.parametrize("argv,message", [
    ([], "no program"),
    (["--no-p4", "-i", "eth0"], "port spec"),
    (["--no-p4", "-i", "1@a", "-i", "1@b"], "same port number"),
    (["--no-p4", "--cpu-port", "1", "-i", "1@a"], "CPU port"),
    (["--no-p4", "--cpu-port", "0"], "not a valid CPU port"),
    (["--no-p4", "--pcap-dir", "/nonexistent/dir"], "does not exist"),
    # gRPC would take the port modulo 65536 and listen on 34463.
    (["--no-p4", "--grpc-server-addr", "127.0.0.1:99999"], "within 0..65535"),
    (["--no-p4", "--grpc-server-addr", "127.0.0.1:"], "HOST:PORT"),
    (["--no-p4", "--grpc-server-addr", "50051"], "HOST:PORT"),
])
def test_bad_arguments_are_clear_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as excinfo:
        parse_args(argv)
    assert excinfo.value.code != 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_starts_serves_and_exits_cleanly_on_signal(sig):
    udp = free_udp_ports(2)
    proc, address = start_switch("--device-id", "1", "--no-p4",
                                 "-i", f"1@udp:127.0.0.1:{udp[0]}>127.0.0.1:{udp[1]}",
                                 "--grpc-server-addr", "127.0.0.1:0", "--cpu-port", "255")
    client = Client(address, device_id=1)
    try:
        with grpc.insecure_channel(address) as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            rep = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=30)
            assert rep.p4runtime_api_version == "1.4.1"
        # A client keeps its stream open across the shutdown: it must not hold the switch up.
        assert client.arbitrate((0, 1), timeout=30).arbitration.status.code == 0
    finally:
        code = stop(proc, sig)
        client.close()
    assert code == 0, proc.stderr.read()
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the tunnel socket was released
    probe.bind(("127.0.0.1", udp[0]))
    probe.close()
    port = int(address.rsplit(":", 1)[1])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine,
    listener.bind(("127.0.0.1", port))  # a listener left behind is not
    listener.close()


def test_unloadable_program_exits_with_an_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = subprocess.run([sys.executable, "-m", "softswitch", str(bad),
                          "--grpc-server-addr", "127.0.0.1:0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "cannot load" in out.stderr


def test_busy_grpc_port_exits_with_an_error():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        out = subprocess.run([sys.executable, "-m", "softswitch", "--no-p4",
                              "--grpc-server-addr", f"127.0.0.1:{port}"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    finally:
        holder.close()
    assert out.returncode == 1
    assert "cannot bind" in out.stderr


def test_log_file_records_startup(tmp_path):
    log = tmp_path / "switch.log"
    proc, _ = start_switch("--no-p4", "--grpc-server-addr", "127.0.0.1:0", "--log-file",
                           str(log), "--log-level", "info")
    assert stop(proc) == 0
    text = log.read_text()
    assert "device 0" in text and "shutting down" in text


@pytest.mark.parametrize("fault", ["raise", "segfault"])
def test_a_crash_in_the_packet_path_is_logged_and_exits_non_zero(fault, tmp_path):
    """The switch started as `python -m softswitch` is (faulty_switch.py), a fault injected
    where it handles the first frame: it must not go on serving P4Runtime without
    forwarding, nor die without a word. It exits by itself, non-zero, and its log says
    why (an exception: an error with the traceback; a fatal signal: faulthandler's report
    with the packet loop's stack)."""
    udp = free_udp_ports(2)
    log = tmp_path / "switch.log"
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "softswitch" / "faulty_switch.py"), fault,
         "--no-p4", "-i", f"1@udp:127.0.0.1:{udp[0]}>127.0.0.1:{udp[1]}",
         "--grpc-server-addr", "127.0.0.1:0", "--log-file", str(log)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert proc.stdout.readline().startswith("Server listening on ")
        host.bind(("127.0.0.1", udp[1]))
        host.sendto(bytes(64), ("127.0.0.1", udp[0]))
        code = proc.wait(timeout=STOP_TIMEOUT)
    finally:
        host.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    if fault == "raise":
        assert code == 1, text
        assert "[ERROR] softswitch: packet loop failed" in text
        assert "RuntimeError: injected fault in the packet loop" in text
        assert "exit status 1" in text
    else:
        assert code == -signal.SIGSEGV, text
        assert "Fatal Python error: Segmentation fault" in text
        assert "in _drain" in text  # the stack of the packet loop that crashed


def test_program_frames_packet_in_through_the_cli(basic_program, tmp_path):
    """Push p4rt_basic over P4Runtime, forward a frame between UDP tunnels, get a PacketIn."""
    from test_p4rt_engine import ETYPE_TO_CPU, MAC1, MAC2, eth

    udp = free_udp_ports(4)
    proc, address = start_switch(
        "--device-id", "1", str(basic_program.json_path),
        "-i", f"1@udp:127.0.0.1:{udp[0]}>127.0.0.1:{udp[1]}",
        "-i", f"2@udp:127.0.0.1:{udp[2]}>127.0.0.1:{udp[3]}", "--pcap", str(tmp_path),
        "--", "--grpc-server-addr", "127.0.0.1:0", "--cpu-port", "255")
    host1, host2 = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
    client = Client(address, device_id=1)
    try:
        host1.bind(("127.0.0.1", udp[1]))
        host2.bind(("127.0.0.1", udp[3]))
        host2.settimeout(10)
        assert client.arbitrate((0, 1)).arbitration.status.code == 0
        client.set_pipeline(basic_program.p4info, basic_program.config)
        client.insert(basic_program.names.table_entry("I.l2", {"hdr.ethernet.dst": MAC2},
                                                      "I.fwd", port=2))
        frame = eth(MAC2, MAC1, 0x0800) + bytes(46)
        host1.sendto(frame, ("127.0.0.1", udp[0]))
        assert host2.recvfrom(70000)[0] == frame
        to_cpu = eth(MAC2, MAC1, ETYPE_TO_CPU) + bytes(46)
        host1.sendto(to_cpu, ("127.0.0.1", udp[0]))
        msg = client.next_message("packet", timeout=10)
        assert msg is not None and msg.packet.payload == to_cpu
    finally:
        client.close()
        host1.close()
        host2.close()
        code = stop(proc)
    assert code == 0
    assert (tmp_path / "udp1_in.pcap").stat().st_size > 24
    assert (tmp_path / "udp2_out.pcap").stat().st_size > 24
