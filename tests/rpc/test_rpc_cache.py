"""Cached answers (issue 18): the answers that depend only on the session's bytes and leaf are
computed once per state (``sessiontree.rpc.sessions.AnswerCache``, keyed by
``Session.state_key``), never stale: another process appending, a leaf moved away and back, a
write through another connection all give the fresh answer; warm answers equal cold ones; the
transports' JSON text equals the encoded answer."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS

from sessiontree import Session
from sessiontree._jsjson import JS_UNDEFINED
from sessiontree.rpc import RpcServer, SessionRegistry, encode

MODEL = {
    "id": "m",
    "name": "m",
    "api": "openai-completions",
    "provider": "p",
    "baseUrl": "",
    "reasoning": True,
    "input": ["text"],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 200000,
    "maxTokens": 1000,
}
#: the commands whose answers are cached
CACHED = [
    {"type": "get_messages"},
    {"type": "get_state"},
    {"type": "get_session_stats"},
    {"type": "get_tree"},
    {"type": "get_fork_messages"},
    {"type": "get_last_assistant_text"},
]
FILES = sorted(p for p in CORPUS.rglob("*.jsonl") if p.stat().st_size < 4 << 20)


def _copy(tmp_path: Path, name: str = "labels.jsonl") -> Path:
    dst = tmp_path / name
    shutil.copyfile(CORPUS / "pi-generated" / name, dst)
    return dst


def _answers(server: RpcServer) -> list[bytes]:
    return [encode(server.handle(dict(c))) for c in CACHED]


def _cold(path: Path) -> list[bytes]:
    server = RpcServer(Session.open(path), model=MODEL)
    try:
        return _answers(server)
    finally:
        server.close()


def _append_from_another_process(path: Path, text: str) -> None:
    code = (
        "import sys\nfrom sessiontree import Session\n"
        "s = Session.open(sys.argv[1])\n"
        "s.append_message({'role': 'user', 'content': sys.argv[2], 'timestamp': 1})\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), text], check=True, timeout=120)


def test_a_second_call_is_answered_from_the_cache(tmp_path: Path):
    server = RpcServer(Session.open(_copy(tmp_path)), model=MODEL)
    try:
        first = _answers(server)
        cache = server._cur.cache
        misses = cache.misses
        assert _answers(server) == first
        assert cache.misses == misses and cache.hits > 0  # nothing computed again
    finally:
        server.close()


def test_an_append_by_another_process_is_seen_at_once(tmp_path: Path):
    path = _copy(tmp_path)
    server = RpcServer(Session.open(path), model=MODEL)
    try:
        before = _answers(server)
        _append_from_another_process(path, "appended elsewhere")
        after = _answers(server)
        assert after != before
        assert after == _cold(path)  # warm == cold
        msgs = server.handle({"type": "get_messages"})["data"]["messages"]
        assert msgs[-1]["content"] == "appended elsewhere"
        forks = server.handle({"type": "get_fork_messages"})["data"]["messages"]
        assert forks[-1]["text"] == "appended elsewhere"
    finally:
        server.close()


def test_a_write_through_another_connection_is_seen(tmp_path: Path):
    path = _copy(tmp_path)
    registry = SessionRegistry()
    a = RpcServer(None, model=MODEL, registry=registry, session_ref=registry.open(path))
    b = RpcServer(None, model=MODEL, registry=registry, session_ref=registry.open(path))
    try:
        assert a.session is b.session  # one index, one cache
        _answers(a)
        assert b.handle({"type": "set_session_name", "name": "renamed"})["success"]
        assert a.handle({"type": "get_state"})["data"]["sessionName"] == "renamed"
        b.handle({"type": "hello"})
        leaf = b.session.leaf_id
        target = b.handle({"type": "get_fork_messages"})["data"]["messages"][0]["entryId"]
        assert b.handle({"type": "set_label", "entryId": target, "label": "here"})["success"]
        tree = a.handle({"type": "get_tree"})["data"]["tree"]
        assert any(n.get("label") == "here" for n in _walk(tree))
        assert a.handle({"type": "get_tree"})["data"]["leafId"] == b.session.leaf_id != leaf
    finally:
        a.close()
        b.close()


def test_a_leaf_moved_away_and_back_answers_fresh_each_time(tmp_path: Path):
    path = _copy(tmp_path, "deep_branching.jsonl")
    server = RpcServer(Session.open(path), model=MODEL)
    try:
        server.handle({"type": "hello"})
        home = server.session.leaf_id
        at_home = _answers(server)
        other = next(e.id for e in server.session.iter_entries() if e.id not in _branch_ids(server.session))
        assert server.handle({"type": "navigate_tree", "targetId": other})["success"]
        away = _answers(server)
        assert away != at_home
        assert server.handle({"type": "navigate_tree", "targetId": home})["success"]
        assert _answers(server) == at_home
        assert server.handle({"type": "navigate_tree", "targetId": other})["success"]
        assert _answers(server) == away
    finally:
        server.close()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_transport_text_equals_the_encoded_answer(path: Path):
    try:
        server = RpcServer(Session.open(path), model=MODEL)
    except Exception:
        pytest.skip("not a session the server opens")
    try:
        for c in [*CACHED, {"type": "get_entries"}]:
            for _ in range(2):  # cold, then cached
                want = encode(server.handle(dict(c)))
                got = server.handle_line(json.dumps(c), text_ok=True)
                assert (got.text if hasattr(got, "text") else encode(got)) == want, c
    finally:
        server.close()


def _branch_ids(s: Session) -> set:
    return {e.id for e in s.get_branch()}


def _walk(tree: list) -> list:
    out, stack = [], list(tree)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n["children"])
    return out


def test_a_rewrite_in_place_the_refresh_cannot_see_is_never_answered_from_the_cache(tmp_path: Path):
    """A file read from disk (over 64 KiB) rewritten in place between two calls, with its size and
    mtime kept and only bytes between the header's first 4 KiB and the last 4 KiB changed (what
    the refresh check cannot see): the answers are the ones the session computes from the file
    now (here: a cold open's), not the answers cached before (the cache key did not change)."""
    import os

    lines = ['{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}']
    parent = None
    for k in range(400):
        role = "user" if k % 2 == 0 else "assistant"
        body = '{"role":"%s","content":"%s %04d","timestamp":1}' % (role, "x" * 300, k)
        pid = "null" if parent is None else f'"{parent}"'
        lines.append(
            f'{{"type":"message","id":"m{k:04d}","parentId":{pid},'
            f'"timestamp":"2026-01-01T00:00:01.000Z","message":{body}}}'
        )
        parent = f"m{k:04d}"
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    assert len(data) > 64 << 10
    server = RpcServer(Session.open(path, index_cache="off"), model=MODEL)
    try:
        before = _answers(server)
        st = os.stat(path)
        at = data.index(b"x 0200")
        with open(path, "r+b") as f:
            f.seek(at)
            f.write(b"y 0200")
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = _answers(server)
        assert after != before
        assert after == _cold(path)
    finally:
        server.close()


# ==== the Session methods the cache and the tree rely on ====


def test_state_key_changes_with_every_append_and_leaf_move(tmp_path: Path):
    path = _copy(tmp_path)
    s = Session.open(path)
    k0 = s.state_key
    assert s.state_key == k0  # cheap and stable
    leaf = s.leaf_id
    first = next(iter(s.iter_entries())).id
    s.branch(first)
    k1 = s.state_key
    s.branch(leaf)
    k2 = s.state_key
    assert len({k0, k1, k2}) == 3  # away and back is a new key (the leaf version moved)
    s.append_message({"role": "user", "content": "x", "timestamp": 1})
    assert s.state_key != k2
    s.close()  # let the other process write
    k3 = s.state_key
    _append_from_another_process(path, "y")
    assert s.state_key == k3  # not yet indexed
    s.refresh()
    assert s.state_key != k3


@pytest.mark.parametrize(
    "name", ["labels.jsonl", "deep_branching.jsonl", "edge_duplicate_ids.jsonl", "edge_v1_legacy.jsonl"]
)
def test_raw_values_and_tree_labels_equal_the_per_entry_views(name: str):
    s = Session.open(CORPUS / "pi-generated" / name)
    idx = list(range(len(s)))
    assert s.raw_values(idx) == [s.entry_at(i).raw for i in idx]
    with pytest.warns(DeprecationWarning, match="raw_values"):
        assert s.raw_entries(idx) == s.raw_values(idx)  # the deprecated alias: the same values
    try:
        roots = s.get_tree()
    except Exception:
        return  # a tree Pi's walk refuses: no labels to compare
    want = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.label is not None:
            want[n.entry.index] = n.label
        stack.extend(n.children)
    got = s.tree_labels()
    assert {i: lab for i, (lab, _ts) in got.items()} == want
    for _lab, ts in got.values():
        assert ts is JS_UNDEFINED or ts is None or isinstance(ts, str)


def test_paging_the_flat_tree_walks_it_once_per_state(tmp_path: Path):
    # each page used to walk the whole tree again: paging a tree of n nodes cost n * n / limit
    server = RpcServer(Session.open(_copy(tmp_path, "deep_branching.jsonl")))
    try:
        server.handle({"type": "hello"})
        s = server.session
        walks = []
        table = s.tree_table
        s.tree_table = lambda: walks.append(1) or table()  # type: ignore[method-assign]
        whole = server.handle({"type": "get_tree", "format": "flat", "limit": 10**6})["data"]
        pages, offset = [], 0
        while True:
            d = server.handle({"type": "get_tree", "format": "flat", "offset": offset, "limit": 3})["data"]
            pages += d["nodes"]
            if not d["hasMore"]:
                break
            offset = d["nextOffset"]
        assert len(walks) == 1  # no page walked the tree again
        assert pages == whole["nodes"] and len(pages) == whole["total"] > 3
    finally:
        server.close()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_entry_texts_are_the_stringify_text_of_each_entry(path: Path):
    from sessiontree.session import dumps_entry

    try:
        s = Session.open(path)
    except Exception:
        pytest.skip("not a session that opens")
    idx = list(range(len(s)))
    texts = s.entry_texts(idx)
    raws = s.raw_values(idx)
    for i, text, raw in zip(idx, texts, raws):
        if text is not None:
            assert text == dumps_entry(raw), i


def test_lines_pi_writes_are_copied_and_the_others_rewritten(tmp_path: Path):
    from sessiontree.session import dumps_entry

    head = '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    body = [
        '{"type":"custom","customType":"x","data":{"n":[1,0.5,1e+21,0.000009]},"id":"a","parentId":null,'
        '"timestamp":"2026-01-01T00:00:01.000Z"}',
        '{"type": "custom", "customType": "x", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:02.000Z"}',
        '{"type":"custom","customType":"\\u00e9\\/","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z"}',
        '{"type":"custom","customType":"x","data":1.0,"id":"d","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z"}',
        '{"type":"custom","customType":"x","data":{"k":1,"k":2},"id":"e","parentId":"d","timestamp":"2026-01-01T00:00:05.000Z"}',
        '{"type":"custom","customType":"x","data":{"1":1,"a":2},"id":"f","parentId":"e","timestamp":"2026-01-01T00:00:06.000Z"}',
        '{"type":"custom","customType":"\\t\\u001f\\ud83d\\ude00","id":"g","parentId":"f","timestamp":"2026-01-01T00:00:07.000Z"}',
        '{"type":"custom","customType":"x","data":-0,"id":"h","parentId":"g","timestamp":"2026-01-01T00:00:08.000Z"}',
    ]
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([head, *body]) + "\n", encoding="utf-8")
    s = Session.open(p)
    texts = s.entry_texts(range(len(s)))
    assert [t is not None for t in texts] == [True, False, False, False, False, False, False, False]
    assert texts[0] == dumps_entry(s.entry_at(0).raw)
    server = RpcServer(s)
    try:
        got = server.handle_line(b'{"type":"get_tree"}', text_ok=True)
        assert got.text == encode(server.handle({"type": "get_tree"}))
    finally:
        server.close()
