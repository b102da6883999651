"""bench/common.py's CPU readings: another process's CPU time read finer than clock ticks,
a reading under what its clock can measure given as a bound and never divided by, and the
speed targets' switch CPU per call printed so."""

import importlib.util
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
from common import Reading, cpu_of, ratio  # noqa: E402  (bench/ is on the path from here)

_spec = importlib.util.spec_from_file_location("bench_speed_targets",
                                               BENCH / "speed_targets.py")
speed_targets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(speed_targets)

TICK = 0.01


def test_ratio_names_every_side_it_cannot_divide_by():
    zero = Reading(0.0, TICK)
    assert ratio(Reading(1.0, TICK), Reading(0.5, TICK), ("a", "b")) == "2.00x"
    assert ratio(zero, zero, ("a", "b")) == \
        "not given: a and b below what their clocks can measure"
    assert ratio(Reading(float("nan"), float("nan")), Reading(1.0, TICK), ("a", "b")) == \
        "not given: a below what its clock can measure"


def test_another_process_cpu_is_read_finer_than_its_ticks():
    """The switch's CPU is read from its own CPU-time clock: a few ms of work are a figure,
    not a count of 10 ms ticks."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sum(range(300000)); "
                              "print(flush=True); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        total, system = cpu_of(child.pid)
        assert total.step < 1e-6 and total.measured
        assert system.step >= 1e-3       # the system part only in ticks
    finally:
        child.stdin.close()
        child.stdout.close()
        child.wait()
    total, _ = cpu_of(child.pid)
    assert not total.known and total.text() == "not read"


def test_a_switch_cpu_per_call_below_its_ticks_is_printed_as_a_bound():
    row = {"workers_cpu_s": 0.5, "workers_sys_s": 0.1, "switch_cpu_s": 0.25,
           "switch_cpu_step_s": 1e-9, "switch_sys_s": 0.0, "switch_sys_step_s": 2 * TICK}
    assert speed_targets.cpu_note(row) == \
        "; CPU per call: workers 0.500 s (0.100 system), switch 0.250 s (< 0.020 system)"
    row.update(switch_cpu_s=0.0, switch_cpu_step_s=2 * TICK)
    assert "switch < 0.020 s (< 0.020 system)" in speed_targets.cpu_note(row)
    assert speed_targets.row_table([{
        **row, "part": "star", "variant": "C_nat INA", "code": "new", "eps": 1e6,
        "eps_min": 1e6, "eps_max": 1e6, "load": [0.5, 0.6]}])[1][0][9] == "0.5+< 0.02"


def test_the_machine_record_names_torch_s_cpu_dispatch_where_a_bench_imported_torch(
        monkeypatch):
    # the same seed trains differently under another dispatch: a run's JSON must say which
    import common
    import torch

    got = common.machine()
    assert got["torch"] == torch.__version__
    assert got["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    monkeypatch.delitem(sys.modules, "torch")
    assert "torch_cpu_capability" not in common.machine()     # no torch import for it
    assert "torch" not in sys.modules
