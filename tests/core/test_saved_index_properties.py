"""Property test: whatever happens to a session file between opens (appends, a torn tail,
truncation at or inside a line, rewrites in place of any length with the mtime restored,
another file renamed over it, a touch), a warm open (through the saved index) answers exactly
as a cold open, and a Session kept open either refreshes to the cold answers or raises
SessionFileChangedError — never indexes foreign bytes as appended."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session
from sessiontree.errors import SessionError, SessionFileChangedError
from tests.core.test_saved_index import answers

OPS = st.sampled_from(
    [
        "append",
        "torn",
        "truncate_line",
        "truncate_mid",
        "rewrite_same",
        "rewrite_longer",
        "rewrite_shorter",
        "replace",
        "touch",
    ]
)


def _entry(i: int, parent: str | None, word: str) -> bytes:
    e = {
        "type": "message",
        "id": f"{word[:3]}{i:05d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": f"{word} {i}"},
    }
    if i % 5 == 4:
        e = {
            "type": "label",
            "id": f"{word[:3]}{i:05d}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "targetId": parent,
            "label": word,
        }
    return orjson.dumps(e) + b"\n"


def _file(n: int, word: str, sid: str = "s1") -> bytes:
    out = [
        orjson.dumps({"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"})
        + b"\n"
    ]
    parent = None
    for i in range(n):
        out.append(_entry(i, parent, word))
        parent = f"{word[:3]}{i:05d}"
    return b"".join(out)


def _apply(p: Path, op: str, k: int) -> bool:
    """Changes the file; True when the change is an append (a live session may refresh)."""
    data = p.read_bytes()
    st = p.stat()
    if op == "append":
        n = data.count(b"\n")
        with open(p, "ab") as f:
            f.write(b"".join(_entry(1000 + n + j, None, "apx") for j in range(1 + k % 30)))
        return True
    if op == "torn":
        with open(p, "ab") as f:
            f.write(b'{"type":"message","id":"torn')
        return True
    if op in ("truncate_line", "truncate_mid"):
        lines = data.split(b"\n")
        keep = max(1, len(lines) - 1 - (k % max(1, len(lines) - 1)))
        cut = len(b"\n".join(lines[:keep])) + 1
        if op == "truncate_mid":
            cut = max(1, cut - 1 - k % 7)
        os.truncate(p, min(cut, len(data)))
        return False
    if op.startswith("rewrite"):
        n = data.count(b"\n")
        new = _file(
            max(1, {"rewrite_same": n - 1, "rewrite_longer": n + 10 + k % 40, "rewrite_shorter": max(1, n // 2)}[op]),
            "rew" + "abcdefgh"[k % 8],
        )
        if op == "rewrite_same":
            new = (new + b" " * len(data))[: len(data)] if len(new) <= len(data) else new[: len(data)]
        with open(p, "r+b") as f:
            f.truncate(0)
            f.write(new)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        return False
    if op == "replace":
        q = p.with_suffix(".new")
        q.write_bytes(_file(5 + k % 50, "rep"))
        os.replace(q, p)
        return False
    os.utime(p)  # touch
    return True


def _opened(p: Path, cache) -> Session | str:
    try:
        return Session.open(p, index_cache=cache)
    except SessionError as e:
        return f"raises {type(e).__name__}"


def _answers(s: Session | str):
    return answers(s) if isinstance(s, Session) else s


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(OPS, st.integers(0, 1000)), min_size=1, max_size=6), n=st.integers(1, 200))
def test_warm_equals_cold_whatever_happens_between_opens(ops, n):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        cache = Path(d) / "cache"
        p.write_bytes(_file(n, "base"))
        live = Session.open(p, index_cache=cache)
        live_ok = True
        for op, k in ops:
            appended = _apply(p, op, k)
            os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"] = "0"
            try:
                warm = _opened(p, cache)
            finally:
                del os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"]
            cold = _opened(p, False)
            assert _answers(warm) == _answers(cold), (op, k)
            if not isinstance(cold, Session):
                live_ok = False
                continue
            if live_ok:
                try:
                    live.refresh()
                except SessionFileChangedError:
                    assert not appended, (op, k)
                    live_ok = False
                else:
                    # refreshed (an append, or a change that left the indexed bytes as they
                    # were): the live session answers as a cold open does
                    assert [(e.id, e.line) for e in live.entries()] == [(e.id, e.line) for e in cold.entries()], (op, k)
                    assert live.leaf_id == cold.leaf_id and live.labels == cold.labels, (op, k)
