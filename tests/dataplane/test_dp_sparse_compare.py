"""The differential comparison (harness/diff.py) on sparse frames: where a job re-compresses
to CNAT8 the payload's codes may be one rounding step apart between the targets, but never
the BLOCK header in front of it."""

import numpy as np

from controller.topology import JobSpec
from harness import fabric as F
from harness.diff import CODES, same_frame
from tests.dataplane.packets import ELEMS, sparse_pkt
from worker import frames, wire


def result(block: int, nxt: int, codes) -> bytes:
    topo = F.testbed_topology().with_jobs([JobSpec(1, ("h1", "h2"), mode="sparse")])
    p = sparse_pkt(topo, "h1", 1, 1, 0, block, nxt, np.asarray(codes, np.uint8),
                   msg_type=wire.MSG_SPARSE_RESULT)
    return frames.with_udp_checksum(bytes(p))


def test_codes_may_differ_by_a_rounding_step_the_block_header_may_not():
    codes = np.full(ELEMS, 5, np.uint8)
    near = codes.copy()
    near[7] = 6
    assert same_frame(result(2, 9, codes), result(2, 9, near), CODES)
    assert not same_frame(result(2, 9, codes), result(2, 9, near), None)
    # block 2 -> 3 and next 9 -> 8 look like one rounding step each
    assert not same_frame(result(2, 9, codes), result(3, 9, codes), CODES)
    assert not same_frame(result(2, 9, codes), result(2, 8, codes), CODES)
