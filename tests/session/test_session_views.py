"""The batch views the CLI reads (``entry_table``, ``branch_table``, ``tree_roots``,
``tree_table``) say what the per-entry views say, on every corpus file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiontree import Session, SessionCycleError, SessionFormatError

CORPUS = Path(__file__).parent.parent / "corpus"
FILES = sorted(CORPUS.rglob("*.jsonl"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_batch_views_agree_with_entries(path):
    try:
        s = Session.open(path)
    except SessionFormatError:
        pytest.skip("not a Pi session")
    table = s.entry_table()
    assert table.index == list(range(len(s)))
    for row, e in zip(zip(*table), s.entries()):
        assert row == (e.index, e.id, e.parent_id, e.parent_is_null, e.type, e.role, e.line, e.offset)
        assert s.entry_at(e.index) == e
    assert s.tree_roots() == s.tree_table().roots
    assert [s.entry_at(r).id for r in s.tree_roots()] == [n.entry.id for n in s.get_tree()]
    try:
        branch = s.get_branch()
    except SessionCycleError:
        with pytest.raises(SessionCycleError):
            s.branch_table()
        return
    assert s.branch_table().index == [e.index for e in branch]
    leaf = s.leaf_entry
    assert (leaf.index if leaf else None) == (branch[-1].index if branch else None)


def test_file_header_is_the_header_as_written(tmp_path):
    p = tmp_path / "v1.jsonl"
    p.write_text(
        '{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    s = Session.open(p)
    assert "version" not in s.file_header and s.header["version"] == 3  # migrated in memory only
    assert Session.in_memory().entry_table([]).index == []


def _tokens_oracle(raw):
    from sessiontree.compaction import entry_context_messages
    from sessiontree.errors import SessionError
    from sessiontree.tokens import estimate_tokens

    try:
        return sum(estimate_tokens(m) for m in entry_context_messages(raw))
    except (SessionError, ValueError):
        return None


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fleet_views_agree_with_entries(path):
    """``entry_metrics``, ``context_table``, ``tree_leaves`` and ``indexed_bytes`` (the views the
    fleet reads) against the per-entry views and the Python rules, on every corpus file."""
    from sessiontree._jsjson import js_date_parse

    try:
        s = Session.open(path)
    except SessionFormatError:
        pytest.skip("not a Pi session")
    data = path.read_bytes()
    assert s.indexed_bytes == len(data)
    m = s.entry_metrics()
    assert m.index == list(range(len(s)))
    for e, size, ms, tokens in zip(s.entries(), m.bytes, m.timestamp_ms, m.tokens):
        text = data[e.offset : e.offset + size]
        assert size > 0 and text == text.strip() and b"\n" not in text
        t = js_date_parse(e.raw["timestamp"]) if isinstance(e.raw, dict) and "timestamp" in e.raw else None
        assert ms == (t if t == t else None)  # new Date(undefined) is NaN: None
        assert tokens == _tokens_oracle(e.raw), e
    assert s.entry_metrics([0] if len(s) else []).index == ([0] if len(s) else [])
    with pytest.raises(IndexError):
        s.entry_metrics([len(s)])
    with pytest.raises(IndexError):
        s.entry_metrics([-1])
    # the tree's leaves: with unique ids, entries no other entry names as its (other) parent
    if s.entry_count() == len(s):
        parents = {e.parent_id for e in s.entries() if e.parent_id is not None and e.parent_id != e.id}
        assert s.tree_leaves() == [e.index for e in s.entries() if e.id is None or e.id not in parents]
    # the context path: the branch to the leaf, or to the last entry when the leaf names none
    try:
        ctx = s.context_table()
    except SessionCycleError:
        return
    if s.leaf_entry is not None:
        assert ctx == s.branch_table()
    elif ctx.index:
        assert ctx.index[-1] == len(s) - 1
    assert len(ctx.index) == len(set(ctx.index))


def test_context_table_follows_an_unknown_leaf_to_the_last_entry(tmp_path):
    s = Session.in_memory()
    a = s.append_message({"role": "user", "content": "hi", "timestamp": 0})
    b = s.append_message({"role": "user", "content": "again", "timestamp": 1})
    assert s.context_table().id == [a, b]
    assert s.tree_leaves() == [1]
    s.reset_leaf()
    assert s.context_table().index == [] and s.branch_table().index == []
    # the last entry has no id: the leaf names no entry, the context still ends there
    p = tmp_path / "s.jsonl"
    p.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}\n'
        '{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"hi","timestamp":0}}\n'
        '{"type":"message","parentId":"a","timestamp":"2025-01-01T00:00:01Z",'
        '"message":{"role":"user","content":"again","timestamp":1}}\n'
    )
    s = Session.open(p)
    assert s.leaf_entry is None and s.branch_table().index == []
    assert s.context_table().index == [0, 1]
    assert s.tree_leaves() == [1]
    assert s.indexed_bytes == p.stat().st_size
