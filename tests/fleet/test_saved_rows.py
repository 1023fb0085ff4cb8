"""Whole-store jobs open through the saved index, and a rerun of ``stats`` over an unchanged
store reuses saved rows (issue 17, item 6): the same table, no session file read again; a
changed file gets a fresh row."""

from __future__ import annotations

import os

import orjson
import pytest

pytest.importorskip("pyarrow")

from sessiontree import Session  # noqa: E402
from sessiontree import index_cache as ic  # noqa: E402
from sessiontree.fleet import session_stats  # noqa: E402


def _write(p, n, sid):
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}]
    parent = None
    for i in range(n):
        eid = f"{sid}{i:05d}"
        msg = (
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"t{i}"}],
                "usage": {
                    "input": i,
                    "output": 2,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": i + 2,
                    "cost": {"total": 0.001},
                },
            }
            if i % 2
            else {"role": "user", "content": f"q{i}"}
        )
        lines.append(
            {"type": "message", "id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": msg}
        )
        parent = eid
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def test_a_stats_rerun_reuses_rows_only_while_files_are_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    store = tmp_path / "store"
    store.mkdir()
    for k in range(4):
        _write(store / f"s{k}.jsonl", 50 + k, f"a{k}")
    first = session_stats(str(store)).to_pylist()
    rows = sorted(p.name for p in ic.resolve().glob("*.row"))
    assert len(rows) == 4
    # the rerun reads saved rows: make the session files unreadable to prove none is opened
    # (chmod changes ctime, which invalidates rows: so instead, count opens)
    opened = []
    real_open = Session.open

    def counting_open(*a, **k):
        opened.append(a[0])
        return real_open(*a, **k)

    monkeypatch.setattr(Session, "open", staticmethod(counting_open))
    second = session_stats(str(store)).to_pylist()
    assert second == first and opened == []
    # one file appended to: only its row is computed again, and it is the cold answer
    with open(store / "s2.jsonl", "ab") as f:
        f.write(
            orjson.dumps(
                {
                    "type": "message",
                    "id": "zz",
                    "parentId": "a200051",
                    "timestamp": "2026-01-01T00:00:02.000Z",
                    "message": {"role": "user", "content": "more"},
                }
            )
            + b"\n"
        )
    third = session_stats(str(store)).to_pylist()
    assert [os.path.basename(p) for p in opened] == ["s2.jsonl"]
    monkeypatch.setattr(Session, "open", staticmethod(real_open))
    fresh = session_stats(str(store), index_cache=False).to_pylist()
    assert third == fresh
    assert third[2]["entries"] == first[2]["entries"] + 1


def test_rows_saved_under_another_column_list_are_not_reused(tmp_path, monkeypatch):
    # A column added to fleet/columns.py (CONTRIBUTING, "A fleet column") without a version bump,
    # as in a dev build: rows saved before it lack the column, so they must not be served (they
    # would give the new column as null where the cold row has a value).
    from sessiontree.fleet import columns

    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    store = tmp_path / "store"
    store.mkdir()
    for k in range(2):
        _write(store / f"s{k}.jsonl", 20 + k, f"c{k}")
    session_stats(str(store))
    assert len(list(ic.resolve().glob("*.row"))) == 2
    opened = []
    real_open = Session.open

    def counting_open(*a, **k):
        opened.append(os.path.basename(a[0]))
        return real_open(*a, **k)

    monkeypatch.setattr(Session, "open", staticmethod(counting_open))
    monkeypatch.setattr(columns, "STATS_COLUMNS", (*columns.STATS_COLUMNS, ("x_count", "int64")))
    from sessiontree.fleet._rows import Options, stats_rows
    from sessiontree.fleet._sources import resolve_source

    stats_rows(resolve_source(str(store)), Options())
    assert sorted(opened) == ["s0.jsonl", "s1.jsonl"]  # computed again, not the saved rows
