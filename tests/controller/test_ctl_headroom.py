"""The headroom of a job's tree (docs/PROTOCOL.md "Scaling"): with every worker at the top code
its headroom allows, all of the same sign, and every re-compression rounding up (the switch's
arithmetic, worker/codec's model of it), no sum in the tree leaves 2^30, no code exceeds 31,
whatever the tree's shape and depth, for every topology builder and up to the largest job;
and no child's worst case passes the bound its port is held to ("Bounds")."""

import numpy as np
import pytest

from controller import topology as T
from controller.tree import build_tree
from worker import codec

ELEMS = 8
ROUND_UP = np.zeros(ELEMS, np.uint32)   # random words that round every non-power up


def worst_case(tree, h: int) -> tuple[np.ndarray, int]:
    """The root's result (int32 sums, or CNAT8 codes) with every worker sending +2^(30-h)
    units as CNAT8, and the largest magnitude any switch held on the way (int64)."""
    top = np.full(ELEMS, 31 - h, np.uint8)
    peak = 0

    def up(name):
        nonlocal peak
        node = tree.nodes[name]
        parts = [up(c.node) if c.node in tree.nodes else codec.switch_decode_cnat8(top)
                 for c in node.children]
        if h == tree.headroom():
            # what an honest child sends at worst is within the bound the switch holds it
            # to ("Bounds": more is refused), and the bounds add up to 2^30 at most
            for c, part in zip(node.children, parts, strict=True):
                assert np.abs(part.astype(np.int64)).max() <= tree.max_magnitude(c), (name, c)
            assert sum(tree.max_magnitude(c) for c in node.children) <= 1 << 30, name
        total = np.sum([p.astype(np.int64) for p in parts], axis=0)
        peak = max(peak, int(np.abs(total).max()))
        if total.max() > codec.INT32_MAX:
            return total                  # wrapped in the switch: the caller sees it
        total = total.astype(np.int32)
        last = node.parent is None
        if (tree.job.partials == "cnat8" and not last) or (last and tree.job.encoding == "cnat8"):
            codes = codec.recompress_with(total, ROUND_UP)
            return codes if last else codec.switch_decode_cnat8(codes)
        return total
    return up(tree.root), peak


def jobs():
    """Unbalanced worker sets on every builder: star, leaf-spine (2 levels), fat-tree (3),
    and the largest job the controller allows (255 workers)."""
    rng = np.random.default_rng(2030)
    topos = [T.star(32), T.leaf_spine(leaves=4, spines=2, hosts=8), T.fat_tree(4),
             T.fat_tree(6), T.leaf_spine(leaves=8, spines=2, hosts=32)]
    for topo in topos:
        names = [h.name for h in topo.hosts]
        sizes = {2, 3, 5, 8, len(names) // 2 + 1, min(len(names), T.MAX_JOB_WORKERS)}
        for size in sorted(s for s in sizes if s <= len(names)):
            # skewed: most workers under the first switch, a few elsewhere
            weights = np.linspace(4, 1, len(names)) ** 3
            pick = rng.choice(len(names), size, replace=False, p=weights / weights.sum())
            workers = tuple(names[i] for i in sorted(pick))
            for partials in ("fixed32", "cnat8"):
                for enc in ("fixed32", "cnat8"):
                    yield topo, T.JobSpec(1, workers, 4, enc, partials)


@pytest.mark.parametrize("topo, job", list(jobs()),
                         ids=lambda x: getattr(x, "kind", None) or
                         f"{len(x.workers)}w-{x.encoding}-{x.partials}")
def test_the_worst_case_stays_within_2_30(topo, job):
    tree = build_tree(topo, job)
    h = tree.headroom()
    result, peak = worst_case(tree, h)
    assert peak <= 1 << 30, f"a switch held {peak} > 2^30 (depth {tree.depth()}, h {h})"
    if job.encoding == "cnat8":
        assert ((result & 0x7F) <= 31).all() and not (result & 0x80).any()
    else:
        assert (result > 0).all() and result.max() <= 1 << 30
    if job.partials == "fixed32":
        assert h == codec.headroom(len(job.workers)), "an exact tree needs no more"


def test_the_worker_count_alone_is_not_enough_for_recompressed_partials():
    """The configurations where ceil(log2 n) overflowed: a 3 + 1 job on a two-level tree
    (code 32, decoded as -2^31), 8 workers on a k = 6 fat-tree with FIXED32 results."""
    topo = T.leaf_spine(leaves=2, spines=1, hosts=3)
    tree = build_tree(topo, T.JobSpec(1, ("h1", "h2", "h3", "h4"), 4, "cnat8", "cnat8"))
    codes, _ = worst_case(tree, codec.headroom(4))
    assert ((codes & 0x7F) == 32).all() and tree.headroom() == 3
    # pod 1: edges of 3, 3 and 1 workers (4 + 4 + 1 = 9, rounded up to 16 x top = 2^31 by
    # its aggregation switch), and one worker in pod 2
    workers = ("h1", "h2", "h3", "h4", "h5", "h6", "h7", "h10")
    tree = build_tree(T.fat_tree(6), T.JobSpec(1, workers, 4, "fixed32", "cnat8"))
    sums, peak = worst_case(tree, codec.headroom(8))
    assert peak > 1 << 30 and (sums < 0).all(), "no overflow to show"
    assert tree.depth() == 2 and tree.headroom() == 5
