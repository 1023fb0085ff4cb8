"""Rewrites of a session file under an open Session are caught (issue 17, item 3).

A file rewritten in place (shorter, the same length with its mtime restored, or longer), renamed
over, or truncated and regrown gives ``SessionFileChangedError`` on ``refresh()``, never the new
bytes indexed as if they had been appended; and a later open never uses a saved index of the old
bytes (a cold scan). Each case failed before the check on refresh existed.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree.errors import SessionFileChangedError


def _lines(sid: str, n: int, word: str) -> bytes:
    out = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"},
    ]
    parent = None
    for i in range(n):
        eid = f"{word[:2]}{i:06d}"
        out.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": f"{word} {i}"},
            }
        )
        parent = eid
    return b"".join(orjson.dumps(x) + b"\n" for x in out)


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """Truncate-and-write, as an editor or `cat > file` does (same inode)."""
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(data)


def test_a_longer_rewrite_in_place_is_caught_on_refresh(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(_lines("s1", 50, "old"))
    s = Session.open(p)
    assert len(s.entries()) == 50
    _rewrite_in_place(p, _lines("s2", 80, "new-and-longer"))
    with pytest.raises(SessionFileChangedError):
        s.refresh()


def test_a_same_length_rewrite_with_mtime_restored_is_caught_on_refresh(tmp_path):
    p = tmp_path / "s.jsonl"
    old = _lines("s1", 50, "aaa")
    p.write_bytes(old)
    st = os.stat(p)
    s = Session.open(p)
    new = _lines("s9", 50, "bbb")
    assert len(new) == len(old) and new != old
    _rewrite_in_place(p, new)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(SessionFileChangedError):
        s.refresh()


def test_truncated_and_regrown_is_caught_on_refresh(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(_lines("s1", 50, "old"))
    s = Session.open(p)
    _rewrite_in_place(p, b"")
    with open(p, "ab") as f:
        f.write(_lines("s3", 120, "regrown"))
    with pytest.raises(SessionFileChangedError):
        s.refresh()


def test_a_shorter_rewrite_and_a_rename_over_are_caught_on_refresh(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(_lines("s1", 50, "old"))
    s = Session.open(p)
    _rewrite_in_place(p, _lines("s2", 10, "new"))
    with pytest.raises(SessionFileChangedError):
        s.refresh()
    q = tmp_path / "t.jsonl"
    q.write_bytes(_lines("s1", 50, "old"))
    t = Session.open(q)
    other = tmp_path / "other.jsonl"
    other.write_bytes(_lines("s1", 60, "old"))
    os.replace(other, q)
    with pytest.raises(SessionFileChangedError):
        t.refresh()


def test_appends_by_another_process_still_refresh(tmp_path):
    p = tmp_path / "s.jsonl"
    data = _lines("s1", 50, "old")
    p.write_bytes(data)
    s = Session.open(p)
    longer = _lines("s1", 70, "old")
    assert longer.startswith(data)
    with open(p, "ab") as f:
        f.write(longer[len(data) :])
    assert s.refresh() == 20
    assert len(s.entries()) == 70


def _middle_rewrite(path: Path, data: bytes, old: bytes, new: bytes) -> None:
    """Replaces ``old`` by ``new`` (same length) in the middle of the file, in place, with the
    mtime restored: the header's first 4 KiB and the last 4 KiB stay as they were."""
    st = os.stat(path)
    at = data.index(old, len(data) // 2 - 200)
    assert 8192 < at < len(data) - 8192
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_small_file_rewritten_between_its_ends_is_caught_on_refresh(tmp_path):
    """A file small enough to be held in memory (below 64 KiB) rewritten in place only between
    the spans the refresh check keeps: before, ``refresh()`` passed and every read answered from
    the old bytes held in memory, forever (a cold open answered otherwise)."""
    p = tmp_path / "s.jsonl"
    data = _lines("s1", 400, "middle")
    assert 20_000 < len(data) < 64 << 10
    p.write_bytes(data)
    s = Session.open(p, index_cache="off")
    assert s.entries()[200].raw["message"]["content"] == "middle 200"
    _middle_rewrite(p, data, b"middle 200", b"MIDDLE 200")
    with pytest.raises(SessionFileChangedError):
        s.refresh()


@pytest.mark.parametrize("same_length", [False, True])
def test_every_read_raises_after_refresh_caught_a_rewrite_until_reopened(tmp_path, same_length):
    """A refresh that caught a rewrite poisons the Session: no answer mixes the two files."""
    p = tmp_path / "s.jsonl"
    old = _lines("s1", 50, "old")
    p.write_bytes(old)
    st = os.stat(p)
    s = Session.open(p)
    assert len(s.build_context().messages) == 50
    new = _lines("s9", 50, "new") if same_length else _lines("s2", 80, "new-and-longer")
    _rewrite_in_place(p, new)
    if same_length:
        assert len(new) == len(old)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(SessionFileChangedError):
        s.refresh()
    for read in (
        s.build_context,
        s.entries,
        s.get_branch,
        s.get_tree,
        lambda: s.file_header,
        lambda: s.leaf_id,
        lambda: len(s),
        lambda: s.get_entry("ol000001"),
        s.refresh,
    ):
        with pytest.raises(SessionFileChangedError):
            read()
    again = Session.open(p)
    assert len(again.entries()) == (50 if same_length else 80)
