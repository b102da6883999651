"""Fuzzing the compiled aggregation program on softswitch with hypothesis.

Random bytes and mutations of valid frames (truncated, extended, bit-flipped,
fields rewritten) go into the parser and pipeline. Nothing may escape as an
exception, and with no entries installed every frame must be dropped and
counted under exactly one reason: the program has nowhere to send anything.
With a job installed, every frame is either accepted by the aggregation,
forwarded, or dropped and counted: nothing vanishes uncounted.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller import topology
from controller.topology import JobSpec
from harness.network import PROGRAM, SwitchNetwork, softswitch_missing
from worker import wire
from worker.frames import Framer

pytestmark = pytest.mark.skipif(softswitch_missing() is not None,
                                reason=str(softswitch_missing()))

SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

TOPO = topology.star(hosts=3).with_jobs([JobSpec(1, ("h1", "h2", "h3"), slots=8)])


def valid_frames() -> list[bytes]:
    h = TOPO.host("h1")
    f = Framer((h.mac, h.ip), (TOPO.service_mac, TOPO.service_ip))
    codes = np.arange(wire.ELEMS, dtype=np.uint8)
    ints = np.arange(wire.ELEMS, dtype=np.int32) - 80
    return [
        f.build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 1, 7, 2, 0, 120, 1, 5, codes),
        f.build(wire.MSG_CONTRIB, wire.ENC_FIXED32, 1, 7, 3, 1, 121, 1, 6, ints),
        f.build(wire.MSG_RESULT, wire.ENC_CNAT8, 1, 7, 2, 0, 120, 3, 5, codes),
    ]


@st.composite
def frames(draw) -> bytes:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=1200))
    data = bytearray(draw(st.sampled_from(valid_frames())))
    if kind == 1:                                   # truncated
        return bytes(data[:draw(st.integers(0, len(data)))])
    if kind == 2:                                   # extended
        return bytes(data + draw(st.binary(min_size=1, max_size=64)))
    if kind == 3:                                   # bits flipped anywhere
        for pos in draw(st.lists(st.integers(0, len(data) * 8 - 1), min_size=1, max_size=6)):
            data[pos // 8] ^= 1 << (pos % 8)
        return bytes(data)
    # a header byte of IPv4/UDP/AGG rewritten (offsets 14..57)
    for pos, value in draw(st.lists(st.tuples(st.integers(14, 57), st.integers(0, 255)),
                                    min_size=1, max_size=4)):
        data[pos] = value
    return bytes(data)


def drops(sw) -> int:
    return sum(sw.counters[name].read(i)[0] for name in ("NatIngress.drops", "NatEgress.drops")
               for i in range(32))      # DROP_REASONS (p4src/include/constants.p4)


def accepted(sw) -> int:
    return sum(sw.counters["NatIngress.agg.events"].read(i)[0] for i in range(16))


@pytest.fixture(scope="module")
def bare():
    from softswitch import Switch

    sw = Switch(seed=1)
    sw.load(PROGRAM.read_bytes())
    return sw


@SETTINGS
@given(frame=frames(), port=st.integers(0, 510))
def test_without_entries_every_frame_is_dropped_and_counted_once(bare, frame, port):
    before, errors = drops(bare), bare.stats["errors"]
    assert bare.process(port, frame) == []
    assert bare.stats["errors"] == errors
    assert drops(bare) == before + 1


@pytest.fixture(scope="module")
def programmed():
    return SwitchNetwork(TOPO).switches["s1"]


@SETTINGS
@given(frame=frames(), port=st.integers(1, 4))
def test_with_a_job_every_frame_is_accepted_forwarded_or_counted(programmed, frame, port):
    sw = programmed
    before = (drops(sw), accepted(sw), sw.stats["errors"])
    out = sw.process(port, frame)
    assert sw.stats["errors"] == before[2]
    counted = (drops(sw) - before[0]) + (accepted(sw) - before[1])
    assert out or counted >= 1, "a frame vanished without a counter"
    for egress, data in out:
        assert 1 <= egress <= 3 and isinstance(data, bytes)
