# ruff: noqa: F811  (the fixtures imported from test_ctl_switches are parameters here)
"""A session that synced trusts what it wrote (no read of thousands of rows per sync) only
while nothing else can have written: each way of breaking that makes the next sync read the
switch and repair it, or fail by name."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from controller import topology as T
from controller.program import canonical_state, desired_state, read_state, sync
from controller.session import Session, SwitchError, Update, WriteRejected
from tests.controller.test_ctl_switches import (  # noqa: F401  (fixtures)
    REPO,
    SESSIONS,
    command,
    free_ports,
    pipeline,
    switches,
    with_addresses,
)


def wanted(topo, pipeline, switch):
    return canonical_state(desired_state(topo, SESSIONS), pipeline.p4info)[switch.name]


def wait_untrusted(session: Session, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while session.held() is not None:
        assert time.monotonic() < deadline, "the session still trusts what it wrote"
        time.sleep(0.05)


def test_a_second_sync_trusts_what_the_first_wrote_until_the_session_writes_itself(
        switches, pipeline):
    s = switches.switches[0]
    want = wanted(switches, pipeline, s)
    with Session(s, connect_timeout=30) as a:
        sync(a, want, pipeline)
        assert set(a.held()) == set(want)
        again = sync(a, want, pipeline)
        assert (again.written, again.kept) == (0, len(want))
        # a write outside sync (here: removing a route) is not what sync left
        a.write([(Update.DELETE, want[0])])
        assert a.held() is None
        repaired = sync(a, want, pipeline)
        assert (repaired.inserted, repaired.kept) == (1, len(want) - 1)
        assert set(read_state(a)) == set(want)


def test_a_preempted_session_reads_the_switch_and_repairs_what_the_other_wrote(
        switches, pipeline):
    s = switches.switches[0]
    want = wanted(switches, pipeline, s)
    with Session(s, election_id=(0, 1), connect_timeout=30) as a:
        sync(a, want, pipeline)
        with Session(s, election_id=(0, 9), connect_timeout=30) as b:
            b.use_running_pipeline()
            wait_untrusted(a)            # the switch told a that b is primary now
            b.write([(Update.DELETE, want[0])])
        # b left and a becomes primary again: its sync must see the route b removed
        deadline = time.monotonic() + 10
        while True:
            try:
                repaired = sync(a, want, pipeline)
                break
            except WriteRejected:       # the switch has not taken in b's leaving yet
                assert time.monotonic() < deadline, "a never became primary again"
                time.sleep(0.1)
        assert repaired.inserted == 1
        assert set(read_state(a)) == set(want)


def test_a_restarted_switch_is_read_even_when_it_runs_the_same_program(pipeline):
    """softswitch only: a restart ends the session's stream; another controller pushes the
    same program, so the pipeline check alone would not notice."""
    pytest.importorskip("softswitch")
    (s,) = with_addresses(T.star(2), free_ports(1)).switches
    topo = with_addresses(T.star(2), [int(s.grpc_addr.rsplit(":", 1)[1])])
    want = canonical_state(desired_state(topo, {}), pipeline.p4info)[s.name]

    def start():
        return subprocess.Popen(command("soft", s), cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)

    proc = start()
    try:
        with Session(s, connect_timeout=60) as a:
            sync(a, want, pipeline)
            assert a.held() is not None
            proc.terminate()
            proc.wait(timeout=10)
            proc = start()
            with Session(s, election_id=(0, 5), connect_timeout=60) as b:
                b.ensure_pipeline(pipeline)            # the same program, no entries
            assert a.stream_ended.wait(10)
            assert a.held() is None
            # a is no session of the new switch: it must fail by name, not keep all
            with pytest.raises(SwitchError):
                sync(a, want, pipeline)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
