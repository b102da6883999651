"""Which softswitch cases the differential BMv2 cases already cover (tests/dataplane/
conftest.py), and the check that keeps a test's own softswitch case when it stops
comparing."""

from __future__ import annotations

from collections.abc import Iterable

SOFT_COVERED = ("its bmv2 case runs softswitch beside BMv2 and compares every frame, counter "
                "and register")
UNMARKED = ("this test stopped comparing softswitch with BMv2 (loss or fabric.uncompared()): "
            "mark it @pytest.mark.uncompared, so its softswitch case runs beside the BMv2 one")


def covered_soft_cases(nodeids: Iterable[str], keep: set[str]) -> set[str]:
    """The ids among `nodeids` of a `soft` case whose `bmv2` sibling (the same id with that
    parameter swapped) is among them too, less those in `keep` (marked uncompared)."""
    ids = set(nodeids)
    out = set()
    for nodeid in ids - keep:
        name, bracket, params = nodeid.partition("[")
        parts = params.rstrip("]").split("-")
        if bracket and "soft" in parts:
            sibling = "-".join("bmv2" if p == "soft" else p for p in parts)
            if f"{name}[{sibling}]" in ids:
                out.add(nodeid)
    return out


def stopped_comparing(fabric, marked: bool) -> str | None:
    """The failure for a test that left `fabric` uncompared without the mark, else None."""
    return UNMARKED if getattr(fabric, "went_uncompared", False) and not marked else None
