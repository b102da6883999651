"""In-process networks: hosts' queue ports wired to a parameter server or to
softswitch.Switch objects running the compiled program (worker tests, benches without root).

SwitchNetwork builds one softswitch.Switch per switch of a topology, loads
p4src/build/agg.json and installs the entries the controller computes for the
topology's jobs (controller.aggregation, .addressing, .impairment), written directly
through the Switch API. A frame a host sends is processed in the sender's thread;
what a switch emits goes to the peer of the egress port: a host's inbox, or the next
switch (multi-switch trees). route() is that forwarding, shared with harness.fabric's
SoftFabric.
"""

from __future__ import annotations

import heapq
import json
import os
import socket
import threading
from collections import deque
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from worker import wire
from worker.baseline import ParameterServer
from worker.frames import Framer
from worker.transport import Port, QueuePort

ROOT = Path(__file__).resolve().parents[1]
# NATSWITCH_PROGRAM points the tests at another build of p4src/ (e.g. a trial compile).
PROGRAM = Path(os.environ.get("NATSWITCH_PROGRAM", ROOT / "p4src" / "build" / "agg.json"))


@contextmanager
def udp_ps(ps):
    """`ps` (anything with serve(sock, stop)) serving UDP on a free loopback port while the
    block runs; yields "ip:port"."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=ps.serve, args=(sock, stop), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        sock.close()


class PsNetwork:
    """n workers' ports wired to one in-process parameter server (identity = rank)."""

    def __init__(self, workers: int, ps: ParameterServer | None = None, slots: int = 64):
        self.ps = ps or ParameterServer(workers, slots=slots)
        self.lock = threading.Lock()
        self.ports = [QueuePort(self._deliverer(rank)) for rank in range(workers)]

    def _deliverer(self, rank: int):
        def deliver(frame: bytes) -> None:
            with self.lock:
                outs = self.ps.handle(frame, rank)
            for dest, data in outs:
                self.ports[dest].put(data)
        return deliver

    def framer(self, rank: int) -> Framer:
        return Framer()


class SlowSwitchPort(Port):
    """One worker facing a slow software switch, in virtual time (pass `clock` to the client).

    The switch handles packets one at a time in arrival order: a contribution costs
    `service` seconds for each of the job's `peers` workers (the others' copies arrive with
    it, so a single client sees the queue a whole job builds), completing a slot costs
    `finish` more (re-compressing the result), answering a retransmission from the stored
    result costs `finish`, dropping a duplicate `service`. Results arrive `latency` after
    the switch is done with them, or are lost with probability `loss` (seeded).
    recv(timeout) advances the clock to the next result or by `timeout`: a test runs at
    once and the same every time.

    With `ring`, frames reach the switch through a receive ring of that many frames, which
    the switch's receive thread empties one frame per `take` seconds; a frame that finds
    the ring full is lost (`ring_lost`). That is BMv2 in the Mininet star: it reads a port
    through libpcap, whose ring holds 32 frames per port there (2 MB of 64 KB frames, sized
    for the aggregates of the veths' offloads), and its receive thread shares two cores with
    its pipeline and the workers, so the frames a worker sends back to back arrive together.
    `server` is what answers (default: a one-worker parameter server; a sparse job's
    client needs a one-worker worker.block_aggregator.BlockAggregator).
    """

    def __init__(self, peers: int, service: float, finish: float, latency: float = 1e-4,
                 loss: float = 0.0, seed: int = 0, ring: int | None = None,
                 take: float = 0.0, server=None):
        super().__init__()
        self.ps = server or ParameterServer(1, result_encoding=wire.ENC_CNAT8)
        self.peers, self.service, self.finish, self.latency = peers, service, finish, latency
        self.loss, self.rng = loss, np.random.default_rng(seed)
        self.ring, self.take = ring, take
        self.now = 0.0
        self.busy_until = 0.0
        self.taken: deque[float] = deque()   # when each frame in the ring leaves it
        self.inbox: list[tuple[float, int, bytes]] = []
        self.sent = 0
        self.lost = 0           # results dropped on the way back (probability `loss`)
        self.ring_lost = 0      # frames that found the receive ring full

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def send(self, frame: bytes) -> None:
        arrives = self.now
        if self.ring is not None:
            taken = self.taken
            while taken and taken[0] <= self.now:
                taken.popleft()
            if len(taken) >= self.ring:
                self.ring_lost += 1
                return
            arrives = max(self.now, taken[-1] if taken else self.now) + self.take
            taken.append(arrives)
        st = self.ps.stats
        before = (st.completed, st.answered)
        outs = self.ps.handle(frame, 0)
        if st.completed > before[0]:
            cost = self.peers * self.service + self.finish
        elif st.answered > before[1]:
            cost = self.finish
        else:
            cost = self.service
        self.busy_until = max(arrives, self.busy_until) + cost
        for _dest, data in outs:
            self.sent += 1
            if self.loss and self.rng.random() < self.loss:
                self.lost += 1
                continue
            heapq.heappush(self.inbox, (self.busy_until + self.latency, self.sent, data))

    def recv(self, timeout: float | None) -> bytes | None:
        if timeout is None:
            if not self.inbox:
                raise AssertionError("recv(None) with nothing in flight would wait forever")
            timeout = float("inf")
        if self.inbox and self.inbox[0][0] <= self.now + timeout:
            at, _, data = heapq.heappop(self.inbox)
            self.now = max(self.now, at)
            return data
        self.now += timeout
        return None


def softswitch_missing() -> str | None:
    """Why the softswitch network cannot be built here, or None if it can."""
    try:
        import softswitch  # noqa: F401
        from softswitch import Switch  # noqa: F401
    except ImportError as e:
        return f"softswitch is not importable yet ({e})"
    if not PROGRAM.exists():
        return f"{PROGRAM} is not built yet (needs p4c)"
    return None


def to_softswitch_entry(sw, te):
    """A controller.entities.TableEntry as a softswitch Entry of the Switch API."""
    from controller.entities import Exact, Lpm, Ternary
    from softswitch.tables import Entry

    table = sw.tables[te.table]
    given = dict(te.match)
    key = []
    for name, kind, _width in table.match_fields:
        if name not in given:
            # P4Info may spell a parameter's field differently from the controller
            # ("sm.ingress_port" vs "standard_metadata.ingress_port"): match the last part.
            same = [g for g in given if g.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]]
            if len(same) == 1:
                name = same[0]
        m = given.pop(name, None)
        if kind == "exact":
            if not isinstance(m, Exact):
                raise ValueError(f"{te!r}: no exact value for {name}")
            key.append(m.value)
        elif kind == "lpm":
            key.append((m.value, m.prefix_len) if isinstance(m, Lpm) else (0, 0))
        elif kind == "ternary":
            key.append((m.value, m.mask) if isinstance(m, Ternary) else (0, 0))
        else:
            raise ValueError(f"{te.table}: match kind {kind} not used by this program")
    if given:
        raise ValueError(f"{te!r}: fields {sorted(given)} are not keys of {te.table} "
                         f"({[f[0] for f in table.match_fields]})")
    params = dict(te.params)
    values = [params.pop(name) for name, _ in sw.action_params(te.action)]
    if params:
        raise ValueError(f"{te!r}: unknown parameters {sorted(params)}")
    return table, Entry(key=tuple(key), action=te.action, params=values,
                        priority=te.priority)


def route(topo, switches: dict, node: str, port: int, frame: bytes, deliver) -> int:
    """Processes `frame` arriving at (node, port) of in-process switches and everything it
    causes, one link hop at a time in the order the frames were sent (a FIFO per link);
    deliver(host, frame) gets what reaches a host. Returns how many frames left a port with
    nothing attached."""
    unattached = 0
    work = deque([(node, port, bytes(frame))])
    while work:
        name, in_port, data = work.popleft()
        for out_port, out in switches[name].process(in_port, data):
            try:
                peer = topo.port(name, out_port)
            except KeyError:
                unattached += 1
                continue
            if topo.is_host(peer.peer):
                deliver(peer.peer, out)
            else:
                work.append((peer.peer, peer.peer_port, out))
    return unattached


class _Pool:
    """Compiled switches, reused across networks: compiling the program takes seconds per
    switch, resetting its runtime state does not. One network at a time owns them."""

    def __init__(self) -> None:
        self.switches: dict[str, list] = {}
        self.generation = 0

    def acquire(self, program: str, count: int) -> list:
        from softswitch import Switch

        have = self.switches.setdefault(program, [])
        while len(have) < count:
            config = json.loads(Path(program).read_text()) if not have else have[0].program_json
            sw = Switch(device_id=len(have) + 1, seed=len(have) + 1)
            sw.load(config)
            have.append(sw)
        self.generation += 1
        for sw in have[:count]:
            _reset(sw)
        return have[:count]


def _reset(sw) -> None:
    """Everything load() would reset, through the Switch API."""
    for table in sw.tables.values():
        if not table.has_const_entries:
            table.clear()
        if not table.has_const_default:
            table.reset_default()
    for reg in sw.registers.values():
        reg.reset()
    for counter in sw.counters.values():
        counter.reset()
    sw.pre.reset()
    sw.clones.reset()


_POOL = _Pool()


class SwitchNetwork:
    """The topology's switches as softswitch.Switch objects, hosts as queue ports; every job
    in `session` (the controller's choice: the switches drop every other) until
    set_session() moves one."""

    def __init__(self, topo, program: Path = PROGRAM, session: int = 1):
        from controller import addressing, impairment
        from controller.entities import MulticastGroupEntry
        from controller.profiles import elems_in

        self.topo = topo
        pooled = _POOL.acquire(str(program), len(topo.switches))
        # The program's elements per packet (p4src/build/wide/ holds 1456).
        self.elems = elems_in(pooled[0].program_json) or wire.ELEMS
        self.generation = _POOL.generation
        self.switches = {s.name: sw for s, sw in zip(topo.switches, pooled, strict=True)}
        self.sessions = {j.id: session for j in topo.jobs}
        rows: dict[str, list] = {s.name: [] for s in topo.switches}
        for part in (self._aggregation(), addressing.entries(topo), impairment.entries(topo)):
            for name, entities in part.items():
                rows[name].extend(entities)
        for name, entities in rows.items():
            sw = self.switches[name]
            for e in entities:
                if isinstance(e, MulticastGroupEntry):
                    sw.pre.create(e.group_id, list(e.replicas))
                else:
                    table, entry = to_softswitch_entry(sw, e)
                    table.insert(entry)
        self.ports = {h.name: QueuePort(self._deliverer(h.name)) for h in topo.hosts}
        self.unrouted = 0       # frames sent out of a switch port with nothing attached

    def _aggregation(self) -> dict[str, list]:
        from controller import aggregation
        from controller.jobs import plan_trees

        return aggregation.entries(self.topo, plan_trees(self.topo), self.sessions)

    def set_session(self, job_id: int, session: int) -> None:
        """Moves a job to another session, as the controller does: its jobs entries change
        on every switch of its tree."""
        from controller.aggregation import JOBS
        from controller.entities import TableEntry

        self.sessions[job_id] = session
        for name, entities in self._aggregation().items():
            for e in entities:
                if isinstance(e, TableEntry) and e.table == JOBS:
                    table, entry = to_softswitch_entry(self.switches[name], e)
                    table.modify(entry)

    def job_params(self, job_id: int, encoding: int, window: int | None = None):
        """The JobParams of a worker of `job_id` (worker.allreduce.job_params: the one
        construction every entry point uses), in the job's session on these switches."""
        from worker.allreduce import job_params

        return job_params(self.topo, job_id, self.sessions[job_id], encoding, self.elems,
                          window=window)

    def _deliverer(self, host: str):
        att = self.topo.attachment(host)

        def deliver(frame: bytes) -> None:
            self.inject(att.node, att.port, frame)
        return deliver

    def inject(self, switch: str, port: int, frame: bytes) -> None:
        """Processes `frame` arriving at (switch, port) and everything it causes."""
        if self.generation != _POOL.generation:
            return              # a later network owns the switches now
        self.unrouted += route(self.topo, self.switches, switch, port, frame,
                               lambda host, out: self.ports[host].put(out))

    def framer(self, host: str) -> Framer:
        h = self.topo.host(host)
        return Framer((h.mac, h.ip), (self.topo.service_mac, self.topo.service_ip),
                      elems=self.elems)

    def counter(self, switch: str, name: str, index: int) -> int:
        """Packets of an indirect counter, e.g. ("s1", "NatIngress.agg.events", 1)."""
        return self.switches[switch].counters[name].read(index)[0]
