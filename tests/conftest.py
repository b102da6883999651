"""Splits the suite in two: most tests run spread over the machine's cores (pytest-xdist);
the `serial` ones run after them with the machine to themselves.

Serial are the root tests outside tests/dataplane: Mininet emulations (switch interfaces
named s1-eth1 in the root namespace: two at once would collide), shaped veths and the
runs whose verdict (link, switch or CPU bound) depends on the CPU they are given.
The dataplane fabrics live in namespaces named by their process and run side by side."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before -m deselects; tests/e2e by its path
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.fspath)
        root = item.get_closest_marker("root") or "tests/e2e/" in path
        if root and "tests/dataplane/" not in path:
            item.add_marker(pytest.mark.serial)
