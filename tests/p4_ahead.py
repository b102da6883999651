"""The recompiles tests/test_p4_build.py and tests/test_p4_tofino.py compare with the
committed builds, started in the background as soon as the session knows it will run them.

p4c takes minutes of one core for the default profile, about one for the Tofino variant and
most of one for the twins. Run inside the test, the test process only waits for it; started
when collection ends, beside the other tests, it uses the time the test processes leave, and
the test (run last, tests/conftest.py) finds the result ready. Exactly the same compile either
way: the tests' own commands, one compiler run each, one at a time.

The process that owns the session starts them (the xdist controller, or pytest itself
without xdist) into a folder named in NATSWITCH_P4C_AHEAD, which the test processes inherit;
a compile's folder holds the outputs, its log and, once the compiler ended, its exit code
(`rc`). The owner stops what is left and removes the folder when the session ends."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = "NATSWITCH_P4C_AHEAD"
TEST = "tests/test_p4_build.py::test_recompiling_"
# The Tofino variant tests/test_p4_tofino.py recompiles: the SwitchML-style FIXED32 profile
# on Tofino 1 (about a minute of one core); `make p4-tofino` recompiles them all.
TOFINO_VARIANT = "fixed32-t1"
TOFINO_TEST = "tests/test_p4_tofino.py::test_recompiling_gives_the_committed_summary"
TOFINO_KEY = f"tna-{TOFINO_VARIANT}"

_owned: dict = {}          # in the owning process: {"dir": Path, "proc": Popen | None}


# Recompiling a wide profile takes 10-15 minutes of one core and up to 19 GB of memory (p4c
# 1.2.4.8): its test runs (and so its compile starts) only when asked for.
WIDE_OPT_IN = "NATSWITCH_P4C_WIDE"
WIDE = ("wide", "wide4")


def is_ahead(nodeid: str) -> bool:
    """Whether the test compares a compile this module starts ahead."""
    return nodeid.startswith(TEST) or nodeid == TOFINO_TEST


def wanted(nodeids) -> list[str]:
    """The compiles whose test is among `nodeids` and runs, where the compiler is installed:
    profile names (and TOFINO_KEY), the longest first."""
    ids = list(nodeids)
    names = {i.split("[", 1)[1].rstrip("]") for i in ids if i.startswith(TEST) and "[" in i}
    if os.environ.get(WIDE_OPT_IN) != "1":
        names -= set(WIDE)
    if shutil.which("p4c-bm2-ss") is None:
        names = set()
    if TOFINO_TEST in ids and shutil.which("p4c-tofino") is not None:
        names.add(TOFINO_KEY)
    order = {"default": 0, TOFINO_KEY: 1}
    return sorted(names, key=lambda n: (order.get(n, 2), n))


def compile_args(name: str) -> list[str]:
    """p4src/build_tools.py's arguments that rebuild profile `name` (outputs: append the
    folder as the second argument)."""
    from controller.profiles import PROFILES

    prof = PROFILES[name]
    if prof.twin:
        return ["compile-twin", str(prof.elems // prof.passes), str(prof.passes)]
    return ["compile", str(prof.elems)]


def command(name: str, out: Path) -> list[str]:
    """The command that compiles `name` (a profile, or TOFINO_KEY) into folder `out`."""
    if name == TOFINO_KEY:
        return [sys.executable, str(REPO / "p4src" / "tna" / "build_tofino.py"), "compile",
                TOFINO_VARIANT, str(out)]
    verb, *rest = compile_args(name)
    return [sys.executable, str(REPO / "p4src" / "build_tools.py"), verb, str(out), *rest]


def configure(config) -> None:
    """In the owning process: the folder for the session's compiles, named for the test
    processes (xdist's workers inherit the environment)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    folder = Path(tempfile.mkdtemp(prefix="natswitch-p4c-"))
    _owned.update(dir=folder, proc=None, prev=os.environ.get(ENV))
    os.environ[ENV] = str(folder)


def start(nodeids) -> None:
    """Starts the compiles of the recompile tests among `nodeids` (once a session)."""
    if "dir" not in _owned or _owned["proc"] is not None:
        return
    names = wanted(nodeids)
    if not names:
        return
    folder = _owned["dir"]
    steps = []
    for name in names:
        d = folder / name
        d.mkdir()
        # the exit code lands in `rc` only once p4c's outputs are complete
        steps.append(f"{shlex.join(command(name, d / 'out'))} > {shlex.quote(str(d / 'log'))} "
                     f"2>&1; echo $? > {shlex.quote(str(d / 'rc.tmp'))}; "
                     f"mv {shlex.quote(str(d / 'rc.tmp'))} {shlex.quote(str(d / 'rc'))}")
    _owned["proc"] = subprocess.Popen(["/bin/sh", "-c", "; ".join(steps)], cwd=REPO,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
    # a waiting test tells a compile still running from a chain that died before writing rc
    (folder / "pid").write_text(str(_owned["proc"].pid))


def finish() -> None:
    """In the owning process at the end: stops what is left and removes the folder."""
    proc, folder = _owned.pop("proc", None), _owned.pop("dir", None)
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        prev = _owned.pop("prev", None)
        if prev is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = prev


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def result(name: str) -> Path | None:
    """The folder where `name` (a profile, or TOFINO_KEY) was compiled in the background,
    waiting for the compiler to end (the test's own timeout bounds the wait); None if the
    session did not start it."""
    folder = os.environ.get(ENV)
    d = Path(folder) / name if folder else None
    if d is None or not d.is_dir():
        return None
    while not (d / "rc").exists():
        if not _alive(d.parent / "pid") and not (d / "rc").exists():
            log = (d / "log").read_text() if (d / "log").exists() else "(no log)"
            raise AssertionError(f"the background compiles stopped before {name} ended:\n"
                                 f"{log[-3000:]}")
        time.sleep(0.5)
    rc = int((d / "rc").read_text())
    log = (d / "log").read_text() if (d / "log").exists() else ""
    assert rc == 0, f"compiling {name} failed (exit {rc}):\n{log[-3000:]}"
    return d / "out"
