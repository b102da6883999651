"""The host parameter server follows the switch's slot rules (docs/PROTOCOL.md)."""

import numpy as np
import pytest

from worker import wire
from worker.baseline import ParameterServer
from worker.frames import Framer

F = Framer()


def contrib(values, enc=wire.ENC_FLOAT32, slot=0, version=0, session=1, exp=0, chunk=0):
    return F.build(wire.MSG_CONTRIB, enc, 1, session, slot, version, exp, 1, chunk,
                   np.asarray(values))


def test_sums_answers_retransmissions_and_ignores_duplicates():
    ps = ParameterServer(2, slots=4)
    a = np.arange(wire.ELEMS, dtype=np.float32)
    assert ps.handle(contrib(a, exp=3), "A") == []
    assert ps.handle(contrib(a, exp=3), "A") == []                  # duplicate, slot open
    out = ps.handle(contrib(2 * a, exp=9), "B")
    assert [dest for dest, _ in out] == ["A", "B"]
    hdr, values = F.parse(out[0][1])
    assert (hdr.msg_type, hdr.exp, hdr.count, hdr.encoding) == (wire.MSG_RESULT, 9, 2,
                                                                wire.ENC_FLOAT32)
    assert np.array_equal(values, 3 * a)
    assert ps.handle(contrib(a), "A") == [("A", out[0][1])]        # answered from storage
    assert (ps.stats.duplicates, ps.stats.answered, ps.stats.completed) == (1, 1, 1)
    # The other version is fresh; a third sender is not a member.
    assert ps.handle(contrib(a, version=1), "C") == []
    assert ps.stats.dropped == {"foreign_sender": 1}


def test_integer_encodings_add_like_the_switch():
    ps = ParameterServer(2, slots=4)
    codes = np.full(wire.ELEMS, 0x80 | 3, np.uint8)                 # -4 each
    ints = np.full(wire.ELEMS, 2**31 - 1, np.int32)
    ps.handle(contrib(codes, enc=wire.ENC_CNAT8), "A")
    (_, data), _ = ps.handle(contrib(ints, enc=wire.ENC_FIXED32), "B")
    hdr, values = F.parse(data)
    assert hdr.encoding == wire.ENC_FIXED32
    assert np.all(values == 2**31 - 5)


def test_new_session_starts_clean_and_bad_datagrams_are_counted():
    ps = ParameterServer(2, slots=4)
    a = np.ones(wire.ELEMS, np.float32)
    ps.handle(contrib(a), "A")
    assert ps.handle(contrib(a, session=2), "A") == []               # not a duplicate
    assert ps.handle(contrib(a, session=2), "B") != []
    assert ps.handle(b"junk", "A") == []
    assert ps.handle(contrib(a, slot=9), "A") == []
    assert ps.stats.dropped == {"bad_length_or_encoding": 1, "bad_slot": 1}


@pytest.mark.parametrize("module", ["worker.baseline", "worker.block_aggregator"])
def test_host_server_cli_refuses_a_bad_worker_count_in_one_line(module):
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", module, "--workers", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "workers must be within 1..64" in p.stderr
    assert "Traceback" not in p.stderr


def test_results_do_not_depend_on_arrival_order():
    """A rerun of a seed gets the same results (DESIGN.md contract 10): float32 sums added in
    one order whatever order the contributions came in, and CNAT8 re-compression keyed by
    the use it answers, not drawn in the order uses complete."""
    g = np.random.default_rng(4)
    vals = [(g.standard_normal(wire.ELEMS) * 10.0 ** g.integers(-6, 6, wire.ELEMS))
            .astype(np.float32) for _ in range(4)]
    ints = [g.integers(-1000, 1000, wire.ELEMS).astype(np.int32) for _ in range(4)]

    def results(order, enc, rows, result_encoding=wire.ENC_FIXED32, first_slot=0):
        ps = ParameterServer(4, slots=4, result_encoding=result_encoding, seed=7)
        got = {}
        for slot in (first_slot, 1 - first_slot):   # the other use completes first or second
            for r in order:
                out = ps.handle(contrib(rows[r], enc=enc, slot=slot, chunk=slot), f"w{r}")
            got[slot] = F.parse(out[0][1])[1].copy()
        return got

    a = results([0, 1, 2, 3], wire.ENC_FLOAT32, vals)
    b = results([3, 1, 0, 2], wire.ENC_FLOAT32, vals)
    assert all(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)) for k in a)
    a = results([0, 1, 2, 3], wire.ENC_FIXED32, ints, wire.ENC_CNAT8)
    b = results([2, 0, 3, 1], wire.ENC_FIXED32, ints, wire.ENC_CNAT8, first_slot=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
