"""Both targets at once: the same frames go to BMv2 and to softswitch, and what comes out is
compared, so every data-plane test run on BMv2 also proves softswitch behaves the same.

DiffFabric drives a Bmv2Fabric (simple_switch_grpc behind veths) and a SoftFabric
(in-process softswitch) programmed with the same jobs by the same controller code. Tests
see BMv2's frames and counters; on the way every one is checked against softswitch's:
- frames, in order per host port (recv, expect, quiet): each send() waits until BMv2 has
  taken in what the frame caused, so BMv2 sees frames in the order softswitch does;
- counters, each time they are read (BMv2 lags: the read waits until both agree, and
  fails with the difference if they do not within COUNTER_WAIT);
- registers (check(), after each test), read from BMv2 over Thrift since its P4Runtime
  server cannot read register arrays.
There is no legitimate difference: the switch's rounding bits when it re-compresses sums to
CNAT8 are a hash of what it rounds (docs/PROTOCOL.md "Rounding bits"), so both targets give
the same codes, and every frame and register must be equal.
With loss (random drops, drawn differently by each target) nothing is compared until the
next program(); check() then realigns registers and counters.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.fabric import BUILD, Counters, Fabric, SoftFabric
from harness.netns import Bmv2Fabric, inside
from harness.thrift import Bmv2Thrift

PORT_RX = "NatIngress.port_rx"
INT64_MAX = (1 << 63) - 1


class Mismatch(AssertionError):
    """softswitch and BMv2 disagree."""


class DiffFabric(Fabric):
    name = "bmv2"
    COUNTER_WAIT = 10.0     # how long BMv2's counters may lag softswitch's

    def __init__(self, workdir, topo=None, build: Path = BUILD, **netns) -> None:
        """topo, build: as Fabric's; netns: Bmv2Fabric's options (prefix, mtu)."""
        self.soft = SoftFabric(topo, build)
        try:
            self.bmv2 = Bmv2Fabric(workdir, topo, build=build, **netns)
        except BaseException:
            self.soft.close()
            raise
        self.thrift = {}
        self.sending = threading.Lock()
        try:
            for s in self.bmv2.base.switches:
                self.thrift[s.name] = Bmv2Thrift(s.thrift_port,
                                                 enter=lambda: inside(self.bmv2.ns))
        except BaseException:
            self.close()
            raise
        self.base = self.bmv2.base
        self.topo = self.bmv2.topo
        self.pipeline = self.bmv2.pipeline
        self.p4rt = self.bmv2.p4rt
        self.compared = True
        self.went_uncompared = False    # since the test began (tests/dataplane/conftest.py)
        self.skew = Counters()      # BMv2 less softswitch, left by loss tests
        self.frames = 0             # frames compared

    # ---- control plane ----
    def program(self, jobs=(), loss: float = 0.0):
        topo = self.bmv2.program(jobs, loss)
        self.soft.program(jobs, loss)
        self.topo = topo
        self.compared = not loss
        self.went_uncompared |= bool(loss)
        return topo

    def uncompared(self) -> None:
        self.compared = False       # check() realigns softswitch afterwards, as after loss
        self.went_uncompared = True

    def session(self) -> int:
        self.soft.session()
        return self.bmv2.session()

    @property
    def current(self) -> int:
        """The session the programmed jobs are in (the same on both targets)."""
        assert self.soft.current == self.bmv2.current
        return self.bmv2.current

    def set_sessions(self, sessions: dict[int, int]) -> None:
        self.soft.set_sessions(sessions)
        self.bmv2.set_sessions(sessions)

    # ---- data plane ----
    def send(self, host: str, frame: bytes) -> None:
        """Sends to both and returns once BMv2 has taken into ingress every frame this one
        made each switch receive (softswitch's port_rx says which), so the next frame, from
        whichever host, reaches each switch after them as on softswitch: BMv2 reads its
        ports independently, and frames sent from different hosts could otherwise reach it,
        and leave it, in another order. With loss (the targets' drops differ) only the
        frame itself is waited for, which also keeps a burst within what BMv2 takes in.
        Senders in several threads (real clients) take turns: the counts before and after
        must be their own, and one Thrift connection serves one request at a time."""
        with self.sending:
            self._send(host, frame)

    def _send(self, host: str, frame: bytes) -> None:
        if not self.compared:
            att = self.topo.attachment(host)
            before = self.thrift[att.node].counter(PORT_RX, att.port)[0]
            self.bmv2.send(host, frame)
            self.soft.send(host, frame)
            self._wait(att.node, att.port, before + 1)
            return
        before = self._soft_rx()
        self.bmv2.send(host, frame)
        self.soft.send(host, frame)
        for (switch, port), n in self._soft_rx().items():
            if n != before[switch, port]:
                key = (switch, "port_rx", port)
                self._wait(switch, port, n + self.skew.get(key, 0) + self.bmv2.own.get(key, 0))

    def _soft_rx(self) -> dict[tuple[str, int], int]:
        """softswitch's port_rx of every port of every switch, and of port 0, where a
        recirculated packet comes in (simple_switch resets its metadata): a program that
        walks a packet through several passes is waited for pass by pass."""
        out = {}
        for name, sw in self.soft.switches.items():
            rx = sw.counters[PORT_RX]
            for port in {0, *(p.port for p in self.base.ports(name))}:
                out[name, port] = rx.read(port)[0]
        return out

    def _wait(self, switch: str, port: int, want: int) -> None:
        """Waits for BMv2's port_rx[port] of `switch` to reach `want`: softswitch's count
        plus what the fabric's own barrier frames and earlier loss added."""
        deadline = time.monotonic() + self.COUNTER_WAIT
        while (got := self.thrift[switch].counter(PORT_RX, port)[0]) < want:
            if time.monotonic() > deadline:
                raise Mismatch(f"{switch} port {port}: BMv2 received {got} frames, "
                               f"softswitch {want} (counting the fabric's own)")
            time.sleep(0.001)

    def _compare(self, host: str, soft: list[bytes], bmv2: list[bytes]) -> None:
        if len(soft) != len(bmv2):
            raise Mismatch(f"{host} got {len(bmv2)} frame(s) from BMv2, {len(soft)} from "
                           f"softswitch:\nBMv2: {[f.hex() for f in bmv2]}\n"
                           f"softswitch: {[f.hex() for f in soft]}")
        for i, (s, b) in enumerate(zip(soft, bmv2, strict=True)):
            if s != b:
                raise Mismatch(f"{host}, frame {i}: BMv2 and softswitch differ\n"
                               f"BMv2:       {b.hex()}\nsoftswitch: {s.hex()}")
            self.frames += 1

    def recv(self, host: str, timeout: float | None = None) -> bytes | None:
        b = self.bmv2.recv(host, timeout)
        s = self.soft.recv(host)
        if self.compared:
            self._compare(host, [] if s is None else [s], [] if b is None else [b])
        return b

    def quiet(self, hosts) -> dict[str, list[bytes]]:
        hosts = list(hosts)
        b = self.bmv2.quiet(hosts)
        s = self.soft.quiet(hosts)
        if self.compared:
            for h in hosts:
                self._compare(h, s[h], b[h])
        return b

    def barrier_frame(self, host: str) -> tuple[bytes, bytes]:
        return self.bmv2.barrier_frame(host)

    def counters(self, *switches: str) -> Counters:
        """BMv2's counters, once softswitch's agree with them."""
        deadline = time.monotonic() + self.COUNTER_WAIT
        while True:
            b = self.bmv2.counters(*switches)
            if not self.compared:
                return b
            s = self.soft.counters(*switches)
            names = switches or tuple(x.name for x in self.base.switches)
            skew = Counters({k: v for k, v in self.skew.items() if k[0] in names})
            if b - s == skew:
                return b
            if time.monotonic() > deadline:
                diff = {k: (b.get(k, 0), s.get(k, 0) + skew.get(k, 0))
                        for k in set(b) | set(s) | set(skew)
                        if b.get(k, 0) != s.get(k, 0) + skew.get(k, 0)}
                raise Mismatch("counters (BMv2, softswitch): "
                               + ", ".join(f"{k}: {v}" for k, v in sorted(diff.items())))
            time.sleep(0.05)

    # ---- state ----
    def registers(self) -> dict[tuple[str, str], tuple[list[int], list[int]]]:
        """(switch, register) -> (BMv2's values, softswitch's values)."""
        out = {}
        for name, sw in self.soft.switches.items():
            for reg_name, reg in sw.registers.items():
                mask = (1 << reg.bitwidth) - 1
                theirs = [v & mask for v in self.thrift[name].register(reg_name)]
                out[name, reg_name] = (theirs, [int(v) & mask for v in reg.values])
        return out

    def check(self) -> None:
        """After a test: counters and registers compared (unless the test had loss), then
        softswitch's registers and the counter skew aligned with BMv2 for the next."""
        bad = []
        realign = not self.compared
        try:
            if self.compared:
                self.counters()
            else:
                self._settle()
        except Mismatch as e:
            bad.append(str(e))      # registers are still compared, and all realigned
            realign = True
            self._settle()
        self._drain()
        for (switch, reg_name), (theirs, mine) in self.registers().items():
            if theirs == mine:
                continue
            reg = self.soft.switches[switch].registers[reg_name]
            for i, (t, m) in enumerate(zip(theirs, mine, strict=True)):
                if t == m:
                    continue
                if reg.bitwidth > 63 and t == INT64_MAX and m >= t:
                    continue    # (BMv2's Thrift reads a cell as int64, saturated above)
                if self.compared:
                    bad.append(f"{switch} {reg_name}[{i}]: BMv2 {t}, softswitch {m}")
                reg.write(i, t)
        if realign:
            self.skew = self.bmv2.counters() - self.soft.counters()
        if bad:
            raise Mismatch(f"{len(bad)} difference(s): " + "; ".join(bad[:20]))

    def _drain(self) -> None:
        """Drops what reached the hosts and no test took (after a failure, or a test with
        loss), on both targets alike."""
        for h in self.soft.inbox:
            self.soft.inbox[h].clear()
            self.bmv2.pending[h].clear()
            while self.bmv2.recv(h, 0.0) is not None:
                pass

    def _settle(self) -> None:
        """Waits until BMv2's counters stop moving (after a test whose drops are random)."""
        last = None
        deadline = time.monotonic() + self.COUNTER_WAIT
        while time.monotonic() < deadline:
            now = self.bmv2.counters()
            if now == last:
                break
            last = now
            time.sleep(0.3)

    def close(self) -> None:
        for t in getattr(self, "thrift", {}).values():
            t.close()
        if getattr(self, "bmv2", None) is not None:
            self.bmv2.close()
        self.soft.close()
