"""The `fabric` fixture: every data-plane test runs once on softswitch and once on BMv2.

One fabric per target for the whole folder (starting BMv2 and pushing the program takes
seconds; resetting nothing is needed because every test uses its own jobs and a fresh
session, and compares counter deltas)."""

import pytest

from harness.fabric import SoftFabric
from harness.netns import Bmv2Fabric, bmv2_missing


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


@pytest.fixture(scope="session", params=TARGETS)
def fabric(request, tmp_path_factory):
    if request.param == "bmv2":
        why = bmv2_missing()
        if why:
            pytest.skip(why)
        fab = Bmv2Fabric(tmp_path_factory.mktemp("bmv2"))
    else:
        fab = SoftFabric()
    try:
        yield fab
    finally:
        fab.close()
