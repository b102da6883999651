"""tests/conftest.py's split of `make test`: the Mininet and shaped-veth tests run alone
(`serial`), the data-plane fabrics (their own namespaces) and the rest in parallel."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collected(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *args], capture_output=True, text=True,
                         cwd=REPO, timeout=300).stdout
    return {line for line in out.splitlines() if "::" in line}


def files(ids: set[str]) -> set[str]:
    return {i.split("::")[0] for i in ids}


def test_emulations_and_root_tests_are_serial_and_the_dataplane_is_not():
    """The whole suite as `make test` collects it, in its two parts."""
    serial_ids, parallel_ids = collected("-m", "serial"), collected("-m", "not serial")
    assert serial_ids and parallel_ids and not serial_ids & parallel_ids
    serial, parallel = files(serial_ids), files(parallel_ids)
    assert {"tests/e2e/test_mininet_star.py", "tests/e2e/test_run_mininet.py",
            "tests/softswitch/test_ports_raw.py", "tests/worker/test_ports_backlog.py"} <= serial
    assert not any(p.startswith("tests/dataplane/") for p in serial)
    assert {"tests/dataplane/test_dp_wire.py", "tests/test_codec.py"} <= parallel
