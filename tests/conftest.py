"""Splits the suite in two: most tests run spread over the machine's cores (pytest-xdist);
the `serial` ones run after them with the machine to themselves.

Serial are the root tests outside tests/dataplane: Mininet emulations (switch interfaces
named s1-eth1 in the root namespace: two at once would collide), shaped veths and the
runs whose verdict (link, switch or CPU bound) depends on the CPU they are given.
The dataplane fabrics live in namespaces named by their process and run side by side, and
so do the root tests marked `isolated` (their own namespaces, or none, and no Mininet)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before -m deselects; tests/e2e by its path
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.fspath)
        root = item.get_closest_marker("root") or "tests/e2e/" in path
        if root and "tests/dataplane/" not in path and not item.get_closest_marker("isolated"):
            item.add_marker(pytest.mark.serial)
    # The P4 recompile tests last: their compiles, started when collection ends, are done by
    # then (tests/p4_ahead.py).
    from tests import p4_ahead

    last = [i for i in items if p4_ahead.is_ahead(i.nodeid)]
    items[:] = [i for i in items if not p4_ahead.is_ahead(i.nodeid)] + last


# ---- the P4 recompiles, started in the background (tests/p4_ahead.py) ----

def pytest_configure(config):
    from tests import p4_ahead

    p4_ahead.configure(config)


def pytest_collection_finish(session):
    """Without xdist: this process runs the tests and owns the compiles."""
    from tests import p4_ahead

    p4_ahead.start(item.nodeid for item in session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """With xdist: the controller owns them, started when the first worker has collected."""
    from tests import p4_ahead

    p4_ahead.start(ids)


def pytest_unconfigure(config):
    from tests import p4_ahead

    p4_ahead.finish()
