"""Jobs: parsing job specs from the command line, job ids, and register regions per switch.

A CLI job spec is `HOSTS[:key=value...]`: HOSTS is `all`, or a comma-separated list of host
names and ranges like `h1-h8`; keys are `id`, `slots` (the job's window, its region size on
every switch of its tree), `enc` (the results' encoding: fixed32, cnat8 or sum8), `partials` (what
switches below the root send up: fixed32, exact, or cnat8, re-compressed) and `max_exp` (the
largest exponent a contribution may carry, a biased float32 exponent; default 158) and `mode`
(dense, the default, or sparse: block-sparse aggregation on one switch). Jobs
without an id get the smallest free ids from 1 on.

Regions are allocated first-fit per switch in job-id order, so two jobs on one switch never
share a slot and the plan is the same on every run for the same jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from controller.topology import ENCODINGS, MODES, POOL_SIZE, JobSpec, Topology, TopologyError
from controller.topology_check import parse_job
from controller.tree import JobTree, build_tree

DEFAULT_SLOTS = 64
ENCODING_KEYS = {"enc": "encoding", "partials": "partials"}  # spec key -> JobSpec field
_RANGE_RE = re.compile(r"^([A-Za-z_]+)(\d+)-(?:\1)?(\d+)$")


class JobError(TopologyError):
    """A job spec that does not parse or a set of jobs that does not fit the switches."""


@dataclass(frozen=True)
class Region:
    base: int
    num_slots: int

    @property
    def end(self) -> int:
        return self.base + self.num_slots


def _expand_hosts(text: str, topo: Topology) -> list[str]:
    if text == "all":
        return [h.name for h in topo.hosts]
    names: list[str] = []
    for part in text.split(","):
        part = part.strip()
        m = _RANGE_RE.match(part)
        if m:
            prefix, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
            if lo > hi:
                raise JobError(f"host range {part!r} runs backwards")
            names.extend(f"{prefix}{i}" for i in range(lo, hi + 1))
        elif part:
            names.append(part)
    for n in names:
        if not topo.is_host(n):
            raise JobError(f"job spec {text!r}: {n!r} is not a host of the topology")
    if not names:
        raise JobError("job spec names no hosts")
    return names


def parse_job_spec(spec: str, topo: Topology) -> dict:
    """One CLI job spec -> the job's fields; 'id' is None when not given."""
    hosts, *opts = spec.split(":")
    fields: dict = {"id": None, "workers": _expand_hosts(hosts, topo), "slots": DEFAULT_SLOTS,
                    "encoding": "fixed32"}
    for opt in opts:
        key, sep, value = opt.partition("=")
        if not sep:
            raise JobError(f"job spec {spec!r}: expected key=value, got {opt!r}")
        if key in ENCODING_KEYS:
            if value not in ENCODINGS:
                raise JobError(f"job spec {spec!r}: {key} must be one of {ENCODINGS}")
            fields[ENCODING_KEYS[key]] = value
        elif key == "mode":
            if value not in MODES:
                raise JobError(f"job spec {spec!r}: mode must be one of {MODES}")
            fields["mode"] = value
        elif key in ("id", "slots", "max_exp"):
            try:
                fields[key] = int(value)
            except ValueError:
                raise JobError(f"job spec {spec!r}: {key} must be an integer") from None
        else:
            raise JobError(f"job spec {spec!r}: unknown key {key!r} "
                           "(id, slots, enc, partials, max_exp, mode)")
    return fields


def make_jobs(specs: Iterable[str], topo: Topology) -> list[JobSpec]:
    """CLI job specs -> validated jobs with ids."""
    parsed = [parse_job_spec(s, topo) for s in specs]
    used = {f["id"] for f in parsed if f["id"] is not None}
    next_id = 1
    jobs = []
    for i, f in enumerate(parsed):
        if f["id"] is None:
            while next_id in used:
                next_id += 1
            f["id"] = next_id
            used.add(next_id)
        try:
            jobs.append(parse_job(i, f))
        except TopologyError as e:
            raise JobError(f"job spec {i + 1}: {e}") from None
    ids = [j.id for j in jobs]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise JobError(f"job id {min(dup)} given twice")
    return jobs


def allocate_regions(trees: Iterable[JobTree]) -> dict[tuple[str, int], Region]:
    """(switch, job id) -> the job's slots on that switch, first-fit in job-id order."""
    taken: dict[str, list[tuple[Region, int]]] = {}
    regions: dict[tuple[str, int], Region] = {}
    for tree in sorted(trees, key=lambda t: t.job.id):
        size = tree.job.slots
        for switch in sorted(tree.nodes):
            used = sorted(taken.get(switch, []), key=lambda rj: rj[0].base)
            base = 0
            for region, _ in used:
                if base + size <= region.base:
                    break
                base = max(base, region.end)
            if base + size > POOL_SIZE:
                have = ", ".join(f"job {j}: {r.base}..{r.end - 1}" for r, j in used)
                raise JobError(f"switch {switch}: no room for job {tree.job.id}'s {size} slots "
                               f"(pool of {POOL_SIZE}; {have})")
            region = Region(base, size)
            taken.setdefault(switch, []).append((region, tree.job.id))
            regions[switch, tree.job.id] = region
    return regions


def plan_trees(topo: Topology) -> list[JobTree]:
    return [build_tree(topo, job) for job in sorted(topo.jobs, key=lambda j: j.id)]
