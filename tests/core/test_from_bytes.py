"""Session.from_bytes: the same index and answers as Session.open on the same bytes, over every
corpus file (globbed), from bytes, memoryview, bytearray and mmap; read-only."""

from __future__ import annotations

import math
import mmap
from pathlib import Path

import pytest

from sessiontree import Session, SessionReadOnlyError
from sessiontree.errors import SessionError

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
FILES = sorted(p for p in CORPUS.rglob("*.jsonl") if p.is_file())


def _answer(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # the same error class and text is part of the answer
        return ("err", type(exc).__name__, str(exc).replace("<bytes>", "<src>"))


def _nan_safe(v):
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def _answers(s: Session) -> dict:
    core = s._core
    n = len(s)
    idx = list(range(n))
    return {
        "len": n,
        "entry_count": s.entry_count(),
        "header": s.header,
        "leaf": s.leaf_id,
        "ids": core.ids(idx),
        "types": core.types(idx),
        "parents": [core.record(i).parent_id for i in idx],
        "records": [core.record(i) for i in idx],
        "metrics": core.metrics(idx),
        "lines": [core.line(i) for i in idx],
        "estimates": core.estimate_tokens(idx),
        "problems": [(p.line, p.offset, p.kind, p.message) for p in s.problems],
        "labels": s.labels,
        "name": _answer(lambda: s.session_name),
        "tree": _answer(lambda: core.tree_table()),
        "branch": _answer(lambda: [e.id for e in s.get_branch()]),
        "context": _answer(lambda: [m for m in s.build_context().messages]),
        "usage": _answer(lambda: {k: _nan_safe(v) for k, v in vars(s.usage_totals()).items()}),
        "cut": _answer(lambda: s.find_cut_point(2000)),
        "needs_migration": s.needs_migration,
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_from_bytes_answers_like_open(path: Path):
    data = path.read_bytes()
    opened = _answer(lambda: Session.open(path))
    made = _answer(lambda: Session.from_bytes(data, name=str(path)))
    if opened[0] == "err":
        assert made[0] == "err" and made[1] == opened[1], (opened, made)
        return
    assert made[0] == "ok", made
    a, b = opened[1], made[1]
    if not a._header_on_disk:  # an empty file: each gets a fresh header in memory
        assert not b._header_on_disk and len(b) == len(a)
        return
    assert _answers(b) == _answers(a)
    assert b.read_only and not a.read_only and b.path is None and b.source_name == str(path)


def test_from_bytes_takes_any_buffer(tmp_path):
    path = (
        next(p for p in FILES if p.stat().st_size > 200 and p.name == "bash_exec.jsonl")
        if any(p.name == "bash_exec.jsonl" for p in FILES)
        else FILES[0]
    )
    data = path.read_bytes()
    want = _answers(Session.open(path))
    assert _answers(Session.from_bytes(memoryview(data))) == want
    assert _answers(Session.from_bytes(bytearray(data))) == want
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        s = Session.from_bytes(mm)
    # the mmap is closed: the session owns its copy
    assert _answers(s) == want
    with pytest.raises(TypeError):
        Session.from_bytes("not bytes")  # type: ignore[arg-type]


def test_from_bytes_is_read_only():
    data = (
        b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
        b'{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    s = Session.from_bytes(data, name="s3://bucket/x.jsonl")
    writes = [
        lambda: s.append_message({"role": "user", "content": "more", "timestamp": 2}),
        lambda: s.append_session_info("n"),
        lambda: s.append_label_change("a1", "x"),
        lambda: s.append_custom_entry("t", {}),
        lambda: s.branch_with_summary("a1", "summary"),
    ]
    for w in writes:
        with pytest.raises(SessionReadOnlyError, match="read-only"):
            w()
    assert issubclass(SessionReadOnlyError, SessionError)
    assert len(s) == 1 and s.leaf_id == "a1"
    # the core refuses too (not only the Python layer)
    with pytest.raises(SessionReadOnlyError):
        s._core.append(s._core.end, b'{"type":"custom","id":"b","parentId":"a1","timestamp":"x"}\n')
    assert s.refresh() == 0
    s.branch("a1")  # moving the leaf in memory is fine
    assert "s3://bucket/x.jsonl" in repr(s)
