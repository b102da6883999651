"""Ports move frames unchanged; the impairment wrapper is seeded and bounded as documented."""

import socket

import numpy as np
import pytest

from worker.impair import ImpairedPort
from worker.transport import PortError, QueuePort, open_port


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_queue_pair_carries_frames_both_ways():
    a, b = QueuePort.pair()
    a.send(b"one")
    b.send(b"two")
    assert b.recv(1.0) == b"one" and a.recv(1.0) == b"two"
    assert a.recv(0.0) is None and a.recv(0.01) is None


def test_udp_tunnel_ports_exchange_frames():
    pa, pb = free_udp_port(), free_udp_port()
    with open_port(f"udp:127.0.0.1:{pa}>127.0.0.1:{pb}") as a, \
            open_port(f"udp:127.0.0.1:{pb}>127.0.0.1:{pa}") as b:
        frame = bytes(range(256)) * 5
        a.send(frame)
        assert b.recv(2.0) == frame
        b.send(b"x" * 60)
        assert a.recv(2.0) == b"x" * 60
        assert a.recv(0.01) is None


def test_udp_tunnel_send_to_absent_peer_is_a_loss_not_an_error():
    pa, pb = free_udp_port(), free_udp_port()
    with open_port(f"udp:127.0.0.1:{pa}>127.0.0.1:{pb}") as a:
        a.send(b"nobody")
        assert a.recv(0.05) is None
        a.send(b"nobody again")


@pytest.mark.parametrize("spec", ["eth0", "raw:", "udp:1.2.3.4:5", "udp:a>b", "tcp:x"])
def test_bad_port_specs_are_clear_errors(spec):
    with pytest.raises(PortError, match="expected raw:IFNAME|HOST:PORT"):
        open_port(spec)


def run_impaired(seed, n=4000, **p):
    a, b = QueuePort.pair()
    imp = ImpairedPort(a, seed=seed, recv_loss=0.0, recv_dup=0.0, recv_reorder=0.0, **p)
    for i in range(n):
        imp.send(i.to_bytes(4, "big"))
        if i % 8 == 7:
            imp.recv(0.0)              # the sender waits for input: held frames go out
    imp.recv(0.0)
    got = []
    while (f := b.recv(0.0)) is not None:
        got.append(int.from_bytes(f, "big"))
    return got, imp.stats


def test_send_impairments_rates_and_bounds():
    got, st = run_impaired(7, loss=0.2, dup=0.1, reorder=0.1)
    n = 4000
    # Binomial(4000, p): 5 standard deviations is at most 0.032 for p = 0.2 (fixed seed).
    assert abs(st.sent_dropped / n - 0.2) < 0.032
    assert abs(st.sent_duplicated / (n - st.sent_dropped) - 0.1) < 0.03
    assert len(got) == n - st.sent_dropped + st.sent_duplicated
    assert len(set(got)) == n - st.sent_dropped
    assert got != sorted(got)
    # Reordering never crosses a point where the sender waited for input (every 8 sends).
    batches = [v // 8 for v in got]
    assert batches == sorted(batches)


def test_same_seed_same_decisions():
    assert run_impaired(3, loss=0.2, dup=0.2, reorder=0.3)[0] == \
        run_impaired(3, loss=0.2, dup=0.2, reorder=0.3)[0]
    assert run_impaired(3, loss=0.2)[0] != run_impaired(4, loss=0.2)[0]


def test_receive_side_loss_and_duplication():
    a, b = QueuePort.pair()
    imp = ImpairedPort(a, seed=5, loss=0.0, recv_loss=0.25, recv_dup=0.25)
    n = 4000
    for i in range(n):
        b.send(i.to_bytes(4, "big"))
    got = []
    while (f := imp.recv(0.0)) is not None:
        got.append(f)
    # Binomial(4000, 0.25): 5 sd = 0.034.
    assert abs(imp.stats.recv_dropped / n - 0.25) < 0.034
    assert len(got) == n - imp.stats.recv_dropped + imp.stats.recv_duplicated


def test_probabilities_are_checked():
    a, _ = QueuePort.pair()
    with pytest.raises(ValueError, match="probability"):
        ImpairedPort(a, loss=1.5)
    with pytest.raises(ValueError, match="cut the port off"):
        ImpairedPort(a, loss=1.0)
    assert np.isclose(ImpairedPort(a, loss=0.3).recv_p[0], 0.3)
