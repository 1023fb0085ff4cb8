"""The batch views the CLI reads (``entry_table``, ``branch_table``, ``tree_roots``,
``tree_table``) say what the per-entry views say, on every corpus file."""
from __future__ import annotations

from pathlib import Path

import pytest

from sessiontree import Session, SessionCycleError, SessionFormatError

CORPUS = Path(__file__).parent / "corpus"
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
    p.write_text('{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
                 '{"type":"message","timestamp":"2026-01-01T00:00:01.000Z",'
                 '"message":{"role":"user","content":"hi","timestamp":1}}\n')
    s = Session.open(p)
    assert "version" not in s.file_header and s.header["version"] == 3  # migrated in memory only
    assert Session.in_memory().entry_table([]).index == []
