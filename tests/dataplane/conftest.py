"""The `fabric` fixture: every data-plane test runs once on softswitch and once on BMv2,
where the BMv2 run is differential: softswitch gets the same frames alongside, and every
frame, counter and register is compared with BMv2's (harness/diff.py).

Where the BMv2 case runs, a test's softswitch case would repeat what the BMv2 case already
compared frame by frame, so it is skipped; a test that stops comparing (loss, real clients:
`fabric.uncompared()`) is marked `uncompared` and keeps its softswitch case, and a test that
stops comparing without the mark fails.

One fabric per target for the whole folder (starting BMv2 and pushing the program takes
seconds; resetting nothing is needed because every test uses its own jobs and a fresh
session, and compares counter deltas)."""

import contextlib
import os

import pytest

from harness.fabric import SoftFabric
from harness.netns import bmv2_missing
from harness.thrift import thrift_missing
from tests.dataplane.selection import SOFT_COVERED, covered_soft_cases, stopped_comparing


def _softswitch_missing() -> str | None:
    try:
        from softswitch import Switch  # noqa: F401
        from softswitch.p4runtime import P4RuntimeServer  # noqa: F401
    except ImportError as e:
        return f"softswitch is not importable ({e})"
    return None


TARGETS = [
    pytest.param("soft", marks=pytest.mark.skipif(_softswitch_missing() is not None,
                                                   reason=str(_softswitch_missing()))),
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.root]),
]


def _diff_missing() -> str | None:
    if os.geteuid() != 0:
        return "BMv2 runs in network namespaces: needs root"
    return bmv2_missing() or thrift_missing() or _softswitch_missing()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Skip a softswitch case whose differential BMv2 sibling was selected and can run."""
    if _diff_missing():
        return
    mine = [i for i in items if "tests/dataplane/" in i.nodeid]
    covered = covered_soft_cases((i.nodeid for i in mine),
                                 {i.nodeid for i in mine if i.get_closest_marker("uncompared")})
    for item in mine:
        if item.nodeid in covered:
            item.add_marker(pytest.mark.skip(reason=SOFT_COVERED))


@contextlib.contextmanager
def profile_fabric(target: str, tmp_path_factory, topo, build, prefix: str, mtu=None):
    """A module's own fabric on `target` for the compiled program in `build` (another
    profile than the folder's): softswitch, or BMv2 differential against it; closed after."""
    if target == "soft":
        fab = SoftFabric(topo, build)
    else:
        from harness.diff import DiffFabric

        why = _diff_missing()
        if why:
            pytest.skip(why)
        fab = DiffFabric(tmp_path_factory.mktemp(prefix), topo, build, prefix=prefix, mtu=mtu)
    try:
        yield fab
    finally:
        fab.close()


@pytest.fixture(scope="session")
def both(tmp_path_factory):
    """BMv2 and softswitch side by side (harness.diff.DiffFabric); one for the session."""
    from harness.diff import DiffFabric

    why = _diff_missing()
    if why:
        pytest.skip(why)
    fab = DiffFabric(tmp_path_factory.mktemp("bmv2"))
    try:
        yield fab
    finally:
        fab.close()


@pytest.fixture(scope="session", params=TARGETS)
def fabric(request):
    if request.param == "bmv2":
        yield request.getfixturevalue("both")
        return
    fab = SoftFabric()
    try:
        yield fab
    finally:
        fab.close()


@pytest.fixture(autouse=True)
def _compare_state(request):
    """After each test on both targets: their counters and registers compared."""
    names = request.fixturenames
    fab = next((request.getfixturevalue(n) for n in ("both", "fabric") if n in names), None)
    if hasattr(fab, "went_uncompared"):
        fab.went_uncompared = False
    yield
    if hasattr(fab, "check"):
        fab.check()
    if why := stopped_comparing(fab, request.node.get_closest_marker("uncompared") is not None):
        pytest.fail(why)
