"""``Session.get_tree`` without a Python object per entry (issue 18): nodes and entries are
made on access from the core's tree table, and the tree equals the eager oracle's
(tests/support/tree_oracle.py) on every corpus file."""

from __future__ import annotations

import copy
import dataclasses
import gc
from pathlib import Path

import pytest

from sessiontree import Entry, Session, SessionFormatError, TreeNode
from tests.support.tree_oracle import assert_same_tree, eager_tree

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
FILES = sorted(p for p in CORPUS.rglob("*.jsonl"))


def _open(p: Path) -> Session | None:
    try:
        return Session.open(p)
    except SessionFormatError:  # files Pi refuses are covered elsewhere
        return None


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tree_equals_eager_oracle(path):
    s = _open(path)
    if s is None:
        pytest.skip("does not open")
    try:
        want = eager_tree(s)
    except Exception as exc:  # the same error from both
        with pytest.raises(type(exc)):
            s.get_tree()
        return
    assert_same_tree(s.get_tree(), want)


def test_corpus_has_trees():
    assert len(FILES) >= 30


def _branched(tmp_path) -> Session:
    s = Session.create(str(tmp_path), session_dir=str(tmp_path))
    a = s.append_message({"role": "user", "content": "a", "timestamp": 1})
    b = s.append_message({"role": "user", "content": "b", "timestamp": 2})
    s.branch(a)
    c = s.append_message({"role": "user", "content": "c", "timestamp": 3})
    s.append_label_change(b, "mark")
    s.branch(c)
    return s


def test_get_tree_makes_no_object_per_entry(tmp_path):
    s = _branched(tmp_path)
    for i in range(2000):
        s.append_message({"role": "user", "content": f"m{i}", "timestamp": 10 + i})
    gc.collect()
    before = sum(1 for o in gc.get_objects() if isinstance(o, (TreeNode, Entry)))
    roots = s.get_tree()
    made = sum(1 for o in gc.get_objects() if isinstance(o, (TreeNode, Entry)))
    assert made - before <= len(roots) + 1, made - before  # the roots, not the 2,000 entries
    assert len(s) > 2000


def test_lazy_nodes_keep_the_treenode_shape(tmp_path):
    s = _branched(tmp_path)
    (root,) = s.get_tree()
    assert isinstance(root, TreeNode) and dataclasses.is_dataclass(root)
    assert {f.name for f in dataclasses.fields(root)} == {"entry", "children", "label"}
    assert isinstance(root.entry, Entry)
    assert root.entry.raw["message"]["content"] == "a"
    b, c = root.children
    assert [b.label, c.label] == ["mark", None]
    assert root.children is root.children  # made once, then kept
    assert b.entry is b.entry
    assert repr(b) == f"TreeNode(id={b.entry.id!r}, children=0, label='mark')"
    # callers may rewrite nodes as they could the dataclass
    b.label = "other"
    c.children.append(TreeNode(b.entry))
    root.children = [c]
    assert root.children == [c] and b.label == "other" and len(c.children) == 2
    new = TreeNode(root.entry)
    assert new.children == [] and new.label is None and new.entry is root.entry
    assert root != TreeNode(root.entry, root.children, root.label)  # identity, as before
    # dataclasses.replace and copies work as on the dataclass
    r = dataclasses.replace(c, label="x")
    assert isinstance(r, TreeNode) and r.entry is c.entry and r.children is c.children and r.label == "x"
    k = copy.copy(b)
    assert k is not b and k.entry is b.entry and k.label == b.label and k.children == b.children


def test_tree_is_a_snapshot(tmp_path):
    s = _branched(tmp_path)
    roots = s.get_tree()
    s.append_message({"role": "user", "content": "later", "timestamp": 99})
    want = eager_tree(s)
    # the old tree (accessed only now) still shows the session as it was
    assert sum(1 for _ in _walk(roots)) == sum(1 for _ in _walk(want)) - 1
    assert_same_tree(s.get_tree(), want)


def _walk(roots):
    stack = list(roots)
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)
