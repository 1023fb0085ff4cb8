"""The eager ``Session.get_tree`` as it was before issue 18 (a ``TreeNode`` and an ``Entry`` per
entry, built at once), kept as the test oracle for the lazy tree (tests/session/test_lazy_tree.py).
"""

from __future__ import annotations

from typing import Any

from sessiontree import Entry, Session, TreeNode


def eager_tree(s: Session) -> list[TreeNode]:
    s._core.check_tree()
    roots, start, kids = s._core.tree_table()
    label_of: dict[int, Any] = {}
    for target, e in s._core.labels():
        if target is not None:
            t = s._core.index_of(target)
            if t is not None:
                label_of[t] = s._load_raw(e).get("label")
    nodes: dict[int, TreeNode] = {}

    def node(i: int) -> TreeNode:
        n = nodes.get(i)
        if n is None:
            n = nodes[i] = TreeNode(Entry(s._view, i), [], label_of.get(i))
        return n

    for p in range(len(start) - 1):
        b, e = start[p], start[p + 1]
        if e > b:
            node(p).children = [node(c) for c in kids[b:e]]
    return [node(r) for r in roots]


def assert_same_tree(got: list[TreeNode], want: list[TreeNode]) -> int:
    """Walk both forests (no recursion) and assert the same shape: entries (index, id, parsed
    value), labels, children in order, and the same sharing (a node reached twice in one is
    one object reached twice in the other). Returns the number of node visits."""
    pairs: dict[int, int] = {}  # id(want node) -> id(got node)
    stack = [(list(got), list(want))]
    visits = 0
    while stack:
        g, w = stack.pop()
        assert len(g) == len(w)
        for gn, wn in zip(g, w):
            assert isinstance(gn, TreeNode)
            visits += 1
            seen = pairs.get(id(wn))
            if seen is not None:
                assert seen == id(gn), "sharing differs"
                continue
            pairs[id(wn)] = id(gn)
            assert gn.entry.index == wn.entry.index
            assert gn.entry.id == wn.entry.id
            assert gn.entry == wn.entry  # Mapping equality: the parsed values
            assert gn.label == wn.label
            assert repr(gn) == repr(wn)
            stack.append((list(gn.children), list(wn.children)))
    assert len(set(pairs.values())) == len(pairs), "two nodes of the oracle became one"
    return visits
