"""tests/conftest.py's split of `make test`: the Mininet and shaped-veth tests run alone
(`serial`), the data-plane fabrics (their own namespaces) and the rest in parallel."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# A plugin for the one collection below: writes every item collected with whether it
# carries the `serial` marker, which is all `-m serial` and `-m "not serial"` select on.
PLUGIN = '''
import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    with open(os.environ["SPLIT_OUT"], "w") as out:
        for item in items:
            part = "serial" if item.get_closest_marker("serial") else "parallel"
            out.write(f"{part} {item.nodeid}\\n")
'''


def collected(tmp_path) -> tuple[set[str], set[str]]:
    """The suite collected once, as `make test` collects it: (serial ids, parallel ids)."""
    (tmp_path / "split_plugin.py").write_text(PLUGIN)
    out = tmp_path / "split.txt"
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "-p", "split_plugin"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=dict(os.environ, PYTHONPATH=path, SPLIT_OUT=str(out)))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    parts = {"serial": set(), "parallel": set()}
    for line in out.read_text().splitlines():
        part, nodeid = line.split(" ", 1)
        parts[part].add(nodeid)
    return parts["serial"], parts["parallel"]


def files(ids: set[str]) -> set[str]:
    return {i.split("::")[0] for i in ids}


def test_emulations_and_root_tests_are_serial_and_the_dataplane_is_not(tmp_path):
    """The whole suite as `make test` collects it, in its two parts."""
    serial_ids, parallel_ids = collected(tmp_path)
    assert serial_ids and parallel_ids and not serial_ids & parallel_ids
    serial, parallel = files(serial_ids), files(parallel_ids)
    assert {"tests/e2e/test_mininet_star.py", "tests/e2e/test_run_mininet.py",
            "tests/softswitch/test_ports_raw.py", "tests/worker/test_ports_backlog.py"} <= serial
    assert not any(p.startswith("tests/dataplane/") for p in serial)
    assert {"tests/dataplane/test_dp_wire.py", "tests/test_codec.py",
            "tests/e2e/test_real_machines.py"} <= parallel
    # a Mininet file's `isolated` tests (refusals that build nothing) run in parallel, the
    # rest of it alone
    run_mininet = "tests/e2e/test_run_mininet.py::"
    assert {i.split("::")[1] for i in parallel_ids if i.startswith(run_mininet)} == {
        "test_a_refused_option_builds_nothing_and_leaves_no_folder",
        "test_the_tofino_profile_refuses_what_it_has_not"}
