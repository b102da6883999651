"""A user's own DDP script through the switch, in a few lines.

    dist.init_process_group("gloo")                    # torchrun's env://
    ddp = DDP(model)
    comm = natswitch_hook(ddp, topology="topo.json")   # finds host, job, session, switch
    ... train ...
    comm.close()

natswitch_hook() finds what the rank needs from the topology file the controller programmed
the switches from, checks it, and registers worker/ddp/hook.py's hook on the DDP model:

- the host: the topology host whose IP is assigned to an interface of this machine, unless
  `host=` (or the environment's NATSWITCH_HOST) names it;
- the job: the one whose workers hold the host, unless `job=` (or NATSWITCH_JOB) names it;
- the rank: torch's rank in the DDP's process group must be the host's position in the job's
  worker list, and its world size the job's worker count;
- the session: the controller's sessions file beside the topology (`session=`, `sessions=`);
- the port: a raw socket on the interface holding the host's IP (`port=` otherwise).

The client is built as worker/main.py builds it (resolve, open_transport, worker_job: the one
construction of the job's parameters, worker/allreduce/job.py); its other options
(`timeout=`, `window=`, `rto=`, ...) are worker/main.py's, by their argparse names. All of it
is checked before the hook is registered, and a problem is an AttachError saying what to give.
The discovery functions are also worker/ddp/main.py's (--host and --job optional under
torchrun); they need no torch.
"""

from __future__ import annotations

import ctypes
import os
import socket
from dataclasses import dataclass, field

from controller.topology import Topology, TopologyError
from worker import wire

HOST_ENV = "NATSWITCH_HOST"
JOB_ENV = "NATSWITCH_JOB"

# worker/main.py options the hook's caller does not set: the training loop is the caller's,
# and the host, job and rank come from the discovery.
_NOT_OPTIONS = {"topology", "host", "job", "rank", "workers", "steps", "batch", "lr", "model",
                "hidden", "eval_every", "result", "quiet", "compressor", "mode"}


class AttachError(RuntimeError):
    """The rank cannot be attached to the switch: what is wrong and what to give."""


# ---------------------------------------------------------------------- discovery


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [("next", ctypes.POINTER(_Ifaddrs)), ("name", ctypes.c_char_p),
                     ("flags", ctypes.c_uint), ("addr", ctypes.POINTER(_Sockaddr)),
                     ("netmask", ctypes.POINTER(_Sockaddr)), ("ifu", ctypes.c_void_p),
                     ("data", ctypes.c_void_p)]


def local_addresses() -> dict[str, str]:
    """Every IPv4 address assigned to an interface of this machine (its network namespace),
    secondary ones included: {ip: interface name}."""
    libc = ctypes.CDLL(None, use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"getifaddrs: {os.strerror(err)}")
    out: dict[str, str] = {}
    try:
        p = head
        while p:
            ifa = p.contents
            if ifa.addr and ifa.addr.contents.family == socket.AF_INET:
                # sockaddr_in: the port's two bytes, then the address
                ip = socket.inet_ntoa(bytes(ifa.addr.contents.data[2:6]))
                out.setdefault(ip, ifa.name.decode())
            p = ifa.next
    finally:
        libc.freeifaddrs(head)
    return out


def _listing(pairs, limit: int = 6) -> str:
    pairs = list(pairs)
    more = f", ... ({len(pairs)} in all)" if len(pairs) > limit else ""
    return ", ".join(f"{a} {b}" for a, b in pairs[:limit]) + more


def find_host(topo: Topology, host: str | None = None,
              addresses: dict[str, str] | None = None,
              where: str = "the topology") -> tuple[str, str | None]:
    """(the rank's host, the local interface holding its IP or None).

    `host` (else NATSWITCH_HOST) names it; otherwise it is the one host of the topology whose
    IP is on this machine. `addresses`: {ip: interface}, by default local_addresses()."""
    addresses = local_addresses() if addresses is None else addresses
    if host is None:
        host = os.environ.get(HOST_ENV) or None
    if host is not None:
        h = topo.host(host)           # TopologyError names the topology's hosts
        return h.name, addresses.get(h.ip)
    mine = [(h.name, addresses[h.ip]) for h in topo.hosts if h.ip in addresses]
    if len(mine) == 1:
        return mine[0]
    if not mine:
        here = [(ip, f"on {nic}") for ip, nic in addresses.items()
                if not ip.startswith("127.")]
        raise AttachError(
            f"no host of {where} has its IP on this machine (hosts: "
            f"{_listing((h.name, h.ip) for h in topo.hosts)}; this machine: "
            f"{_listing(here) or 'no IPv4 address but loopback'}): give the host "
            f"(host=, --host or {HOST_ENV}=NAME), or put the host's address on the NIC "
            f"cabled to the switch")
    raise AttachError(
        f"several hosts of {where} have their IPs on this machine "
        f"({_listing((name, f'on {nic}') for name, nic in mine)}): name this rank's "
        f"(host=, --host or {HOST_ENV}=NAME)")


def find_job(topo: Topology, host: str, job: int | None = None,
             where: str = "the topology") -> int:
    """The id of the job `host` works for: `job` (else NATSWITCH_JOB) if given, checked;
    otherwise the one job whose workers hold the host."""
    if job is None and os.environ.get(JOB_ENV):
        text = os.environ[JOB_ENV]
        try:
            job = int(text)
        except ValueError:
            raise AttachError(f"{JOB_ENV}={text!r}: expected a job id") from None
    if job is not None:
        spec = topo.job(job)          # TopologyError: no such job
        if host not in spec.workers:
            raise AttachError(f"{host} is not a worker of job {job} "
                              f"({', '.join(spec.workers)})")
        return job
    holding = [j for j in topo.jobs if host in j.workers]
    if len(holding) == 1:
        return holding[0].id
    if holding:
        raise AttachError(f"{host} is a worker of jobs "
                          f"{', '.join(str(j.id) for j in holding)}: name one (job=, --job or "
                          f"{JOB_ENV}=ID)")
    if not topo.jobs:
        raise AttachError(f"{where} holds no job: give the controller's `topology` command "
                          f"--jobs (e.g. --jobs h1-h4)")
    if len(topo.jobs) == 1:
        j = topo.jobs[0]
        raise AttachError(f"{host} is not a worker of job {j.id} ({', '.join(j.workers)})")
    raise AttachError(f"{host} is not a worker of any job of {where} ("
                      + "; ".join(f"job {j.id}: {', '.join(j.workers)}" for j in topo.jobs)
                      + ")")


def check_rank(host: str, job: int, workers: list[str] | tuple[str, ...], position: int,
               torch_rank: int, torch_world: int) -> None:
    """torch's rank and world size against the job's: the switch's bitmap and the result's
    count are the job's, and a rank that is not its host's position would be summed twice or
    never."""
    if torch_world != len(workers):
        raise AttachError(f"torch's world size is {torch_world} (WORLD_SIZE), but job {job} "
                          f"has {len(workers)} workers ({', '.join(workers)}): launch one "
                          f"rank per worker (torchrun --nnodes {len(workers)})")
    if torch_rank != position:
        raise AttachError(f"torch's rank is {torch_rank} (RANK), but {host} is worker "
                          f"{position} of job {job} ({', '.join(workers)}): on {host}, give "
                          f"torchrun --node-rank {position}")


# ---------------------------------------------------------------------- the hook


def worker_args(topology: str, host: str, job: int, **options):
    """worker/main.py's argparse namespace for the rank: its defaults, then `options` (by
    their argparse names; None leaves a default)."""
    from worker.main import build_parser

    args = build_parser().parse_args(["--topology", str(topology), "--host", host,
                                      "--job", str(job)])
    for key, value in options.items():
        if key in _NOT_OPTIONS or not hasattr(args, key):
            raise TypeError(f"natswitch_hook() got an unexpected option {key!r} (the "
                            f"options of worker/main.py apply, by their argparse names)")
        if value is not None:
            setattr(args, key, value)
    return args


@dataclass
class SwitchComm:
    """What natswitch_hook() attached: the host, the job and the client; close() it after
    the last step."""

    host: str
    job: int
    rank: int
    workers: int
    session: int
    encoding: str               # what this rank sends: CNAT8 or FIXED32
    where: str                  # the port, e.g. "switch via raw:enp1s0"
    state: object               # worker/ddp/hook.py's HookState
    client: object              # the allreduce client
    port: object
    closed: bool = field(default=False, repr=False)

    @property
    def stats(self):
        """The client's counters (chunks, bytes, retransmissions) since the start."""
        return self.client.stats

    @property
    def error(self):
        """What stopped a reduction (backward() raised it as a RuntimeError), or None."""
        return self.state.error

    def close(self) -> None:
        """Ends the communication thread and closes the port."""
        if not self.closed:
            self.closed = True
            self.state.close()
            self.port.close()

    def __enter__(self) -> SwitchComm:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __str__(self) -> str:
        return (f"{self.host} rank {self.rank} of {self.workers}, job {self.job} session "
                f"{self.session}, {self.encoding} to the {self.where}: "
                f"{self.client.stats.summary()}")


def natswitch_hook(ddp, topology: str, *, host: str | None = None, job: int | None = None,
                   compressor: str = "none", mode: str = "layer", overlap: bool = True,
                   encoding: str = "auto", elems: int = wire.ELEMS, port: str | None = None,
                   session: int | None = None, sessions: str | None = None, seed: int = 0,
                   **options) -> SwitchComm:
    """Sends the gradients of `ddp` (a DistributedDataParallel model whose process group is
    torch.distributed's, Gloo) through the switch of `topology`, the file the controller
    programmed the switches from; returns the SwitchComm to close after training.

    compressor: a worker/compression/registry.py spec applied before the switch encoding
    (dense ones ride the switch; sparsifiers go through a Gloo allgather); mode: "layer"
    (one compressor per parameter) or "model"; overlap: reduce the buckets on a
    communication thread while the backward pass goes on; encoding: "auto", "cnat8" or
    "fixed32" (what this rank sends); elems: elements per packet, the switches' profile's
    (168; 1456 for the wide one); seed: of the client and the compressors. Call it after
    init_process_group() and DDP(), before the first backward()."""
    from torch.nn.parallel import DistributedDataParallel

    from worker.compression.modes import MODES
    from worker.compression.registry import parse as parse_compressor
    from worker.ddp.hook import HookState, comm_hook
    from worker.main import UsageError, make_client, open_transport, resolve, worker_job
    from worker.transport import PortError

    if not isinstance(ddp, DistributedDataParallel):
        raise TypeError(f"natswitch_hook() needs the DistributedDataParallel model, got "
                        f"{type(ddp).__name__}")
    group = ddp.process_group
    rank, world = group.rank(), group.size()
    topology = str(topology)
    try:
        if mode not in MODES:
            raise AttachError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        parse_compressor(compressor)
        topo = Topology.load(topology)
        name, nic = find_host(topo, host, where=topology)
        job_id = find_job(topo, name, job, where=topology)
        if port is None and nic is not None:
            port = f"raw:{nic}"
        args = worker_args(topology, name, job_id, port=port, encoding=encoding, elems=elems,
                           session=session, sessions=sessions, seed=seed, **options)
        r = resolve(args)
        spec = r["job"]
        check_rank(name, job_id, spec.workers, r["rank"], rank, world)
        opened, framer, enc, where = open_transport(args, r)
    except (TopologyError, UsageError, PortError, ValueError) as e:
        raise AttachError(str(e)) from None
    try:
        client = make_client(args, r, opened, framer, worker_job(args, r, enc, framer))
        state = HookState(ddp.module, group, allreduce=client.allreduce, mode=mode,
                          compressor=compressor, seed=seed, overlap=overlap)
        try:
            ddp.register_comm_hook(state, comm_hook)
        except BaseException:
            state.close()
            raise
    except BaseException:
        opened.close()
        raise
    return SwitchComm(name, job_id, rank, world, r["session"], wire.ENCODINGS[enc], where,
                      state, client, opened)
