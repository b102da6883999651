"""Programming switches: the desired state of every switch, and bringing a switch to it.

Each switch is read first and only the difference is written, so a second run writes nothing;
entries of the controller's tables that are not wanted any more are deleted. `reset` wants
nothing: it deletes every entry of those tables and every multicast group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from controller import addressing, aggregation, forwarding, impairment, twin
from controller.entities import Entity, MulticastGroupEntry, TableEntry
from controller.jobs import plan_trees
from controller.p4info import P4Info, P4InfoError, Pipeline
from controller.session import ControllerError, Session, Update
from controller.topology import Switch, Topology

MANAGED_TABLES = (forwarding.TABLES + aggregation.TABLES + addressing.TABLES + impairment.TABLES
                  + twin.TABLES)
MAX_THREADS = 16


def desired_state(topo: Topology, sessions: Mapping[int, int],
                  p4info: P4Info | None = None) -> dict[str, list[Entity]]:
    """switch name -> every entry and multicast group the switch should hold, the jobs in
    the sessions given (job id -> session). `p4info`: the program's, when it may be the
    Tofino profile's twin (controller/twin.py), whose jobs have other tables."""
    trees = plan_trees(topo)
    out: dict[str, list[Entity]] = {s.name: [] for s in topo.switches}
    if twin.is_twin(p4info):
        if any(link.loss for link in topo.links):
            raise ControllerError("the Tofino profile has no egress impairment to drop "
                                  "packets with (docs/PROTOCOL.md \"Tofino profile\"): run "
                                  "it without link loss")
        parts = (twin.entries(topo, trees, sessions, twin.elems_of(p4info),
                              twin.passes_of(p4info)),)
    else:
        parts = (impairment.entries(topo), aggregation.entries(topo, trees, sessions))
    for part in (forwarding.entries(topo), addressing.entries(topo), *parts):
        for switch, rows in part.items():
            out[switch].extend(rows)
    return out


def canonical_state(state: dict[str, list[Entity]], p4info: P4Info) -> dict[str, list[Entity]]:
    """The entities as the switches will report them under the program's P4Info, so a read
    compares equal; an entity the P4Info cannot express fails here, before any switch."""
    out = {}
    for switch, rows in state.items():
        out[switch] = []
        for e in rows:
            try:
                out[switch].append(p4info.canonical(e))
            except P4InfoError as err:
                raise ControllerError(f"{switch}: cannot express {e!r}: {err}") from None
    return out


@dataclass
class SyncResult:
    switch: Switch
    pushed: bool = False
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    kept: int = 0
    note: str = ""

    @property
    def written(self) -> int:
        return self.inserted + self.modified + self.deleted


@dataclass
class Diff:
    deletes: list[Entity]
    inserts: list[Entity]
    modifies: list[Entity]
    kept: int


def diff(current: list[Entity], desired: list[Entity]) -> Diff:
    have = {e.key: e for e in current}
    want: dict[tuple, Entity] = {}
    for e in desired:
        if e.key in want and want[e.key] != e:
            raise ControllerError(f"two different entries for one key: {want[e.key]!r} and {e!r}")
        want[e.key] = e
    return Diff(deletes=[e for k, e in have.items() if k not in want],
                inserts=[e for k, e in want.items() if k not in have],
                modifies=[e for k, e in want.items() if k in have and have[k] != e],
                kept=sum(1 for k, e in want.items() if have.get(k) == e))


def read_state(p4rt: Session) -> list[Entity]:
    """The entries of the controller's tables and the multicast groups on the switch."""
    if p4rt.p4info is None:
        raise ControllerError(f"{p4rt.switch.name}: runs no program, nothing to read")
    tables = MANAGED_TABLES + tuple(twin.element_tables(p4rt.p4info))
    rows: list[Entity] = p4rt.read_tables([t for t in tables if p4rt.p4info.has_table(t)])
    rows.extend(p4rt.read_multicast_groups())
    return rows


def sync(p4rt: Session, desired: list[Entity], pipeline: Pipeline | None) -> SyncResult:
    """Bring one switch to `desired`; pipeline None means reset (no push, delete all)."""
    result = SyncResult(p4rt.switch)
    if pipeline is None:
        if not p4rt.use_running_pipeline():
            result.note = "runs no program, nothing to reset"
            return result
        desired = []
    else:
        result.pushed = p4rt.ensure_pipeline(pipeline)
    have = p4rt.held()
    d = diff(read_state(p4rt) if have is None else have, desired)

    def tables(rows):
        return [e for e in rows if isinstance(e, TableEntry)]

    def groups(rows):
        return [e for e in rows if isinstance(e, MulticastGroupEntry)]

    # Job entries name their multicast group: remove entries before groups, add groups first.
    for kind, rows in ((Update.DELETE, tables(d.deletes)), (Update.DELETE, groups(d.deletes)),
                       (Update.INSERT, groups(d.inserts)), (Update.MODIFY, groups(d.modifies)),
                       (Update.INSERT, tables(d.inserts)), (Update.MODIFY, tables(d.modifies))):
        if rows:
            p4rt.write([(kind, e) for e in rows])
    p4rt.remember(desired)
    result.inserted, result.modified, result.deleted = (len(d.inserts), len(d.modifies),
                                                         len(d.deletes))
    result.kept = d.kept
    return result


def for_each_switch(topo: Topology, names: list[str] | None,
                    work: Callable[[Switch], object]) -> list[tuple[Switch, object]]:
    """Run `work` on the switches concurrently; results (or the ControllerError) in order."""
    switches = [topo.switch(n) for n in names] if names else list(topo.switches)

    def run(switch: Switch):
        try:
            return work(switch)
        except ControllerError as e:
            return e

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(switches)))) as pool:
        results = list(pool.map(run, switches))
    return list(zip(switches, results, strict=True))


def program(topo: Topology, pipeline: Pipeline | None, sessions: Mapping[int, int],
            names: list[str] | None = None, connect_timeout: float = 10.0,
            election_id: tuple[int, int] = (0, 1)) -> list[tuple[Switch, object]]:
    """Program the switches with the jobs in these sessions (job id -> session), or, with
    pipeline None, reset them; SyncResult or error per switch."""
    state = (canonical_state(desired_state(topo, sessions, pipeline.p4info), pipeline.p4info)
             if pipeline is not None else {})

    def work(switch: Switch) -> SyncResult:
        with Session(switch, election_id, connect_timeout) as p4rt:
            return sync(p4rt, state.get(switch.name, []), pipeline)

    return for_each_switch(topo, names, work)
