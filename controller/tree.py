"""The aggregation tree of a job over the topology.

The root is the top tier (a fat-tree core, a leaf-spine spine, the star's switch); a job whose
workers all hang off one switch is aggregated on that switch alone. Among equally good roots
the job id picks one, so jobs spread over the top tier. The tree is the shortest-path tree
from the root, pruned to the switches on the workers' paths: edge -> aggregation -> core in a
fat-tree. Every switch of the tree numbers its children (worker ports and child-switch ports)
by port order: bit 0..n-1 of the job's bitmap on that switch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from controller.topology_data import MAX_CHILDREN, JobSpec, TopologyData, TopologyError

MAX_HEADROOM = 24      # workers keep at least 6 bits of magnitude (30 - h)


class TreeError(TopologyError):
    """A job whose aggregation tree does not fit the switches."""


@dataclass(frozen=True)
class Child:
    port: int       # port of this switch towards the child
    node: str       # a worker host or a child switch
    bit: int        # the child's bit in the job's bitmap on this switch


@dataclass(frozen=True)
class TreeNode:
    switch: str
    parent: str | None          # None at the root
    parent_port: int | None     # port of this switch towards its parent
    children: tuple[Child, ...]
    workers: int                # workers in this switch's subtree


@dataclass(frozen=True)
class JobTree:
    job: JobSpec
    root: str
    nodes: dict[str, TreeNode]

    def passes(self, name: str) -> int:
        """The largest sum a node of the tree sends up, in units of the largest worker value:
        a worker 1; a switch the sum of its children's, rounded up to the next power of two
        when it re-compresses its partial sum (partials: cnat8, a rounding may go up)."""
        node = self.nodes.get(name)
        if node is None:
            return 1
        s = sum(self.passes(c.node) for c in node.children)
        if node.parent is not None and self.job.partials == "cnat8":
            s = 1 << (s - 1).bit_length()
        return s

    def worst_sum(self) -> int:
        """The largest sum the root can see, in units of the largest worker value."""
        return self.passes(self.root)

    def max_magnitude(self, child: Child) -> int:
        """The largest |element| `child` may send, in the job's fixed-point units: what it
        passes up times a worker's largest value, 2^(30-h). The switch refuses more
        (docs/PROTOCOL.md "Bounds"); these bounds add up to at most 2^30 at every switch."""
        return self.passes(child.node) << (30 - self.headroom())

    def headroom(self) -> int:
        """h: workers scale their values to at most 2^(30-h) units, so that every sum in
        the tree, re-compressed partial sums and the root's CNAT8 rounding included, stays
        within 2^30 (docs/PROTOCOL.md "Scaling"). ceil(log2 n) when nothing is
        re-compressed below the root."""
        return (self.worst_sum() - 1).bit_length()

    def depth(self) -> int:
        """Switch hops from the deepest tree switch to the root."""
        def up(name: str) -> int:
            parent = self.nodes[name].parent
            return 0 if parent is None else 1 + up(parent)
        return max(up(n) for n in self.nodes)


def _bfs(topo: TopologyData,
         root: str) -> dict[str, tuple[int, str | None, int | None, int | None]]:
    """Switch -> (distance, parent, parent's port towards it, its port towards parent)."""
    found = {root: (0, None, None, None)}
    todo = deque([root])
    while todo:
        node = todo.popleft()
        dist = found[node][0]
        for p in topo.ports(node):
            if topo.is_switch(p.peer) and p.peer not in found:
                found[p.peer] = (dist + 1, node, p.port, p.peer_port)
                todo.append(p.peer)
    return found


def choose_root(topo: TopologyData, job: JobSpec) -> str:
    attached = sorted({topo.attachment(w).node for w in job.workers},
                      key=lambda s: topo.switch(s).device_id)
    if len(attached) == 1:
        return attached[0]
    top = max(s.tier for s in topo.switches)
    scored = []
    for s in topo.switches:
        if s.tier != top:
            continue
        dist = _bfs(topo, s.name)
        d = [dist[a][0] for a in attached]
        scored.append(((max(d), sum(d)), s.name))
    best = min(score for score, _ in scored)
    ties = [name for score, name in scored if score == best]
    return ties[(job.id - 1) % len(ties)]


def build_tree(topo: TopologyData, job: JobSpec) -> JobTree:
    for w in job.workers:
        topo.host(w)
    root = choose_root(topo, job)
    bfs = _bfs(topo, root)
    children: dict[str, list[tuple[int, str]]] = {}
    workers: dict[str, int] = {}
    parents: dict[str, tuple[str | None, int | None]] = {root: (None, None)}
    for w in job.workers:
        att = topo.attachment(w)
        children.setdefault(att.node, []).append((att.port, w))
        node = att.node
        workers[node] = workers.get(node, 0) + 1
        # Walk up to the root, adding each switch once and counting the worker on each.
        while node != root:
            _, parent, parent_port, my_port = bfs[node]
            if node not in parents:
                parents[node] = (parent, my_port)
                children.setdefault(parent, []).append((parent_port, node))
            workers[parent] = workers.get(parent, 0) + 1
            node = parent
    nodes = {}
    for switch, (parent, parent_port) in parents.items():
        kids = sorted(children.get(switch, []))
        if len(kids) > MAX_CHILDREN:
            raise TreeError(f"job {job.id}: switch {switch} would have {len(kids)} children, "
                            f"at most {MAX_CHILDREN} (the width of the bitmap)")
        nodes[switch] = TreeNode(switch, parent, parent_port,
                                 tuple(Child(port, node, bit) for bit, (port, node)
                                       in enumerate(kids)),
                                 workers[switch])
    tree = JobTree(job, root, nodes)
    if job.mode == "sparse" and len(nodes) > 1:
        raise TreeError(f"job {job.id}: a sparse job runs on one switch, but its workers hang "
                        f"off {len(nodes) - 1} switches below {root} ({len(nodes)} switches "
                        "in its tree); choose workers on one switch or mode dense")
    if tree.headroom() > MAX_HEADROOM:
        raise TreeError(f"job {job.id}: its tree needs {tree.headroom()} bits of headroom, at "
                        f"most {MAX_HEADROOM} leave the workers room for their values")
    return tree
