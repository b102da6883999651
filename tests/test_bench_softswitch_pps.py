"""bench/softswitch_pps.py reports a switch CPU time it cannot measure (0 ticks over a short
run, or a few steps of a fine clock) as a bound, leaves the ratio out with the reason, and
exits 0; a measured one gives its figure and the ratio. The runs are faked (no root, no BMv2
needed): only the bench's reporting runs, with the readings given here."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import harness.netns

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
_spec = importlib.util.spec_from_file_location("bench_softswitch_pps", BENCH / "softswitch_pps.py")
pps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pps)
from common import Reading  # noqa: E402  (bench/ is on the path from here)

TICK = 0.01
RUNS = 3
PACKETS = 2000


class FakeFabric:
    """NetnsFabric's place: no namespace, no switch process."""

    def __init__(self, tmp, target, *args, **kwargs):
        self.target, self.procs = target, []

    def program(self, jobs):
        pass

    def close(self):
        pass


def run_bench(monkeypatch, capsys, switch_cpu: dict[str, Reading]) -> tuple[int, str]:
    """main() with every run faked: 100k packets/s softswitch, 500 BMv2, the switch CPU
    readings given per target, 0.05 s of wall time per run."""
    def fake_run(fab, hosts, rounds_of, window, slots, timeout):
        target = fab.target
        rate = 100_000.0 if target == "soft" else 500.0
        return rate, rate, {}, (Reading(0.04, 1e-9), switch_cpu[target]), 0.05

    monkeypatch.setattr(harness.netns, "bmv2_missing", lambda: None)
    monkeypatch.setattr(harness.netns, "NetnsFabric", FakeFabric)
    monkeypatch.setattr(pps, "bmv2_build", lambda: [])
    monkeypatch.setattr(pps, "run", fake_run)
    code = pps.main(["--runs", str(RUNS), "--packets", str(PACKETS), "--no-check"])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("soft", [
    Reading(0.0, 2 * TICK),          # no tick went by: the crash
    Reading(3e-9, 1e-9),             # a tiny time, a few steps of a fine clock
], ids=["zero", "tiny"])
def test_a_switch_cpu_below_its_clock_is_a_bound_and_no_ratio(monkeypatch, capsys, soft):
    code, out = run_bench(monkeypatch, capsys, {"soft": soft, "bmv2": Reading(1.2, 1e-9)})
    assert code == 0
    runs = [ln for ln in out.splitlines() if ln.startswith("run ")]
    assert len(runs) == 2 * RUNS
    bound = (soft.value + soft.step) / PACKETS * 1e6
    for ln in runs:
        if "softswitch" in ln:
            assert f"switch CPU < {bound:.3g} us per packet" in ln
            assert "CPU: switch < " in ln
        else:
            assert "switch CPU 600 us per packet" in ln and "CPU: switch 24.00" in ln
    (line,) = [ln for ln in out.splitlines() if ln.startswith("switch CPU per packet")]
    assert f"softswitch < {bound:.3g} us, BMv2 600 us" in line
    assert line.endswith("ratio BMv2/softswitch not given: softswitch below what its clock "
                         "can measure")
    assert "ratio softswitch/BMv2: 200.00x" in out


def test_a_measured_switch_cpu_gives_its_figure_and_the_ratio(monkeypatch, capsys):
    code, out = run_bench(monkeypatch, capsys,
                          {"soft": Reading(0.006, 1e-9), "bmv2": Reading(1.2, 2 * TICK)})
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if ln.startswith("switch CPU per packet")]
    assert line == ("switch CPU per packet (all 3 runs together): softswitch 3 us, BMv2 "
                    "600 us; ratio BMv2/softswitch 200.00x")


def test_uq4_stream_sums_exactly_and_the_in_process_run_reports_both(capsys):
    """The bench's UQ4 stream (--encodings uq4): each round's SUM8 results are the exact
    sums of what it sent (no rounding for the comparison to forgive); and softswitch in
    process streams both encodings and prints each one's rate."""
    from controller.topology import JobSpec, star
    from harness.fabric import SoftFabric
    from worker import codec, wire
    from worker.frames import Framer

    topo = star(3)
    hosts = [h.name for h in topo.hosts]
    fab = SoftFabric(topo)
    try:
        fab.program([JobSpec(pps.JOB, tuple(hosts), slots=4, encoding="sum8")])
        rounds = pps.stream(fab.topo, hosts, 4, 4, fab.session(), 3, encoding="uq4")
        framer = Framer((topo.host("h1").mac, topo.host("h1").ip),
                        (topo.service_mac, topo.service_ip))
        for frames in rounds:
            sent = []
            for host, frame in frames:
                fab.send(host, frame)
                sent.append(codec.unpack4(framer.parse(frame)[1]))
            out = fab.expect(hosts)
            hdr, payload = framer.parse(out["h1"])
            assert hdr.encoding == wire.ENC_SUM8
            assert np.array_equal(np.asarray(payload, np.int64),
                                  codec.aggregate(sent, wire.ENC_UQ4))
    finally:
        fab.close()
    assert pps.main(["--no-bmv2", "--encodings", "cnat8", "uq4", "--packets", "24",
                     "--runs", "1", "--slots", "4", "--window", "2"]) == 0
    out = capsys.readouterr().out
    assert "softswitch, cnat8:" in out and "softswitch, uq4:" in out
    assert "uq4 aggregates" in out and "x the elements/s of cnat8" in out


def test_uq4_on_a_profile_without_4_bit_encodings_is_refused_before_any_run(capsys):
    with pytest.raises(SystemExit) as e:
        pps.main(["--no-bmv2", "--encodings", "cnat8", "uq4", "--profile", "wide"])
    assert e.value.code == 2
    assert "profile wide has no 4-bit encodings" in capsys.readouterr().err
