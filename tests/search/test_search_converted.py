"""Claude Code and Codex files searched directly: through their conversion to Pi, in memory.

A hit in such a file is the hit the converted Pi session gives (entry id, type, role, text,
branch state, score), names its source format, and leads back to its source line (``line``,
``offset``, ``source_id``); appends and rewrites are seen; hostile lines never raise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiontree import _core, search
from sessiontree.convert import to_pi

from ..convert._helpers import CC, CODEX, FIXTURES, cc_mains, codex_files

PI_FILE = FIXTURES / "pi-real" / "agent-sessions__pi_small.jsonl"
CC_FILE = CC / "inspect_swe__tool_call_conversation.jsonl"
CODEX_FILE = CODEX / "agentsview__function_calls.jsonl"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


def _words(pi: Path, k: int = 6) -> list[str]:
    """Up to ``k`` words of the searchable text of the Pi file ``pi``, spread over its vocabulary."""
    import re

    vocab: set[str] = set()
    for line in pi.read_bytes().split(b"\n")[1:]:
        t = _core.search_extract(line)
        if t:
            vocab.update(w.lower() for w in re.findall(r"[A-Za-z]{4,}", t))
    words = sorted(vocab)
    if len(words) <= k:
        return words
    return [words[i * len(words) // k] for i in range(k)]


def _same(h: Any) -> tuple:
    return (
        h.session_id,
        h.entry_id,
        h.type,
        h.role,
        h.tool,
        h.timestamp_ms,
        h.snippet,
        tuple(h.spans),
        h.score,
        h.branch_state,
        h.fork_point,
        h.summary_id,
        h.labels,
    )


def _pi_entry(pi: Path, entry_id: str) -> dict:
    for line in pi.read_bytes().split(b"\n")[1:]:
        if line.strip():
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if isinstance(o, dict) and o.get("id") == entry_id:
                return o
    raise AssertionError(entry_id)


def _check_parity(src: Path, tmp: Path, fmt: str) -> int:
    """Searches a store holding ``src`` and one holding its conversion; the hits must agree."""
    store, conv = tmp / "store", tmp / "conv"
    store.mkdir(parents=True)
    conv.mkdir()
    shutil.copyfile(src, store / src.name)
    out = conv / src.name
    to_pi(store / src.name, out)
    data = (store / src.name).read_bytes()
    words = _words(out)
    queries = [*words, " OR ".join(words)] if words else []
    found = 0
    for q in queries:
        a = search(q, store / src.name, limit=10_000, index_cache=False)
        b = search(q, out, limit=10_000, index_cache=False)
        assert a.total == b.total, q
        assert [_same(h) for h in a.hits] == [_same(h) for h in b.hits], q
        for h in a.hits:
            assert h.source_format == fmt and h.path == str(store / src.name)
            side = _pi_entry(out, h.entry_id)["source"]
            assert h.line == side["n"] + 1 and h.source_id == side.get("id")
            # the offset is the start of that source line in the file
            assert data.count(b"\n", 0, h.offset) == side["n"]
            assert h.offset == 0 or data[h.offset - 1 : h.offset] == b"\n"
        for h in b.hits:
            assert h.source_format == "pi" and h.source_id is None
        found += a.total
    return found


@pytest.mark.parametrize("src", cc_mains(), ids=lambda p: p.stem[:50])
def test_hits_in_a_claude_code_file_are_those_of_its_conversion(src, tmp_path):
    _check_parity(src, tmp_path, "claude-code")


@pytest.mark.parametrize("src", codex_files(), ids=lambda p: p.stem[:50])
def test_hits_in_a_codex_file_are_those_of_its_conversion(src, tmp_path):
    _check_parity(src, tmp_path, "codex")


def test_the_fixtures_give_hits_at_all(tmp_path):
    # the parity above is not vacuous: both formats' files are found by words of their text
    assert _check_parity(CC_FILE, tmp_path / "a", "claude-code") > 0
    assert _check_parity(CODEX_FILE, tmp_path / "b", "codex") > 0


def _store(tmp: Path) -> Path:
    store = tmp / "store"
    store.mkdir()
    shutil.copyfile(PI_FILE, store / "pi.jsonl")
    shutil.copyfile(CC_FILE, store / "cc.jsonl")
    shutil.copyfile(CODEX_FILE, store / "codex.jsonl")
    return store


def test_a_mixed_store_names_each_hits_format(tmp_path):
    store = _store(tmp_path)
    want = {}
    for name in ("pi", "cc", "codex"):
        src = store / f"{name}.jsonl"
        pi = tmp_path / f"{name}.pi.jsonl"
        to_pi(src, pi)
        want[name] = _words(pi, 3)
    fmt = {"pi": "pi", "cc": "claude-code", "codex": "codex"}
    cache = tmp_path / "cache"
    for name, words in want.items():
        for w in words:
            r = search(w, store, limit=1000, index_cache=cache)
            mine = [h for h in r.hits if Path(h.path).name == f"{name}.jsonl"]
            assert mine, (name, w)
            assert {h.source_format for h in mine} == {fmt[name]}
            assert all(h.branch_state in ("active", "compacted", "abandoned") for h in r.hits)
    # the CLI's JSON and text name the format
    w = want["cc"][0]
    r = _cli("search", w, str(store), "--json", "--limit", "1000")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)["hits"]
    assert "claude-code" in {h["source_format"] for h in hits}
    assert all({"source_format", "source_id"} <= h.keys() for h in hits)


def _cc_line(uuid: str, parent: str | None, text: str, session: str) -> bytes:
    o = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": text},
    }
    return json.dumps(o).encode() + b"\n"


def _last_uuid_and_session(path: Path) -> tuple[str, str]:
    last, sid = "", ""
    for line in path.read_bytes().split(b"\n"):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if isinstance(o, dict) and isinstance(o.get("uuid"), str):
            last = o["uuid"]
            sid = o.get("sessionId") or sid
    return last, sid


@pytest.mark.parametrize("same_process", [True, False], ids=["warm", "cli"])
def test_an_append_to_a_claude_code_file_is_found_on_the_next_search(tmp_path, same_process):
    store = _store(tmp_path)
    cache = tmp_path / "cache"
    cc = store / "cc.jsonl"
    assert search("zebracorn", store, index_cache=cache).total == 0
    last, sid = _last_uuid_and_session(cc)
    with open(cc, "ab") as f:
        f.write(_cc_line("u-appended-1", last, "the zebracorn appended", sid))
    if same_process:
        r = search("zebracorn", store, index_cache=cache)
        assert r.total == 1
        (h,) = r.hits
    else:
        env = {**os.environ, "SESSIONTREE_INDEX_CACHE": str(cache)}
        p = subprocess.run(
            [sys.executable, "-m", "sessiontree", "search", "zebracorn", str(store), "--json"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert p.returncode == 0, p.stderr
        (d,) = json.loads(p.stdout)["hits"]
        assert d["source_format"] == "claude-code" and d["source_id"] == "u-appended-1"
        r = search("zebracorn", store, index_cache=cache)
        (h,) = r.hits
    assert h.source_format == "claude-code" and h.source_id == "u-appended-1"
    assert h.branch_state == "active" and "[zebracorn]" in h.marked()
    assert cc.read_bytes()[h.offset :].startswith(b'{"type": "user", "uuid": "u-appended-1"')
    # the file's earlier text is still found, once
    pi = tmp_path / "cc.pi.jsonl"
    to_pi(cc, pi)
    w = _words(pi, 1)[0]
    a = search(w, store / "cc.jsonl", limit=1000, index_cache=cache)
    b = search(w, pi, limit=1000, index_cache=False)
    assert [_same(x) for x in a.hits] == [_same(x) for x in b.hits]


def test_a_rewritten_claude_code_file_is_indexed_again(tmp_path):
    store = _store(tmp_path)
    cache = tmp_path / "cache"
    cc = store / "cc.jsonl"
    last, sid = _last_uuid_and_session(cc)
    with open(cc, "ab") as f:
        f.write(_cc_line("u-x", last, "quokkaword here", sid))
    assert search("quokkaword", store, index_cache=cache).total == 1
    st = cc.stat()
    # the same size, a word changed in place: never the stale hit
    data = cc.read_bytes().replace(b"quokkaword", b"wombatword")
    cc.write_bytes(data)
    os.utime(cc, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert search("quokkaword", store, index_cache=cache).total == 0
    r = search("wombatword", store, index_cache=cache)
    assert r.total == 1 and r.hits[0].source_id == "u-x"
    # replaced by a rename, shorter
    tmp = store / "cc.tmp"
    tmp.write_bytes(CC_FILE.read_bytes())
    os.replace(tmp, cc)
    assert search("wombatword", store, index_cache=cache).total == 0


def test_a_file_changed_after_indexing_gives_no_stale_hit(tmp_path):
    # the hit is checked against the source line at its offset: a change between the index's
    # check and the read (simulated: the index committed, then the file rewritten) is no hit
    store = _store(tmp_path)
    cache = tmp_path / "cache"
    cc = store / "cc.jsonl"
    last, sid = _last_uuid_and_session(cc)
    with open(cc, "ab") as f:
        f.write(_cc_line("u-y", last, "platypusword", sid))
    assert search("platypusword", store, index_cache=cache).total == 1
    cc.write_bytes(cc.read_bytes().replace(b"platypusword", b"echidnaaword"))
    r = search("platypusword", store, index_cache=cache)
    assert r.total == 0 and r.hits == ()


HOSTILE_CC = [
    b'{"type":"user","uuid":"a","parentUuid":"b","sessionId":"s","message":{"role":"user","content":"loopword one"}}\n',
    b'{"type":"user","uuid":"b","parentUuid":"a","sessionId":"s","message":{"role":"user","content":"loopword two"}}\n',
    b"{not json at all loopword\n",
    b"[1,2,3]\n",
    b'{"type":"assistant","uuid":"c","parentUuid":"c","sessionId":"s","message":{"role":"assistant",'
    b'"content":[{"type":"text","text":"loopword self"}]}}\n',
    b"\xff\xfe bad utf8 loopword\n",
    b'{"type":"user","uuid":"d","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"loopword torn',
]

HOSTILE_CODEX = [
    b'{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x","cwd":"/w"}}\n',
    b'{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":{"type":"message","role":"user",'
    b'"content":[{"type":"input_text","text":"loopword hello"}]}}\n',
    b"{bad json loopword\n",
    b'{"timestamp":"x","type":"response_item","payload":null}\n',
    b'{"timestamp":"2026-01-01T00:00:02Z","type":"response_item","payload":{"type":"message","role":"assistant",'
    b'"content":[{"type":"output_text","text":"loopword torn',
]


@pytest.mark.parametrize("lines", [HOSTILE_CC, HOSTILE_CODEX], ids=["claude-code", "codex"])
def test_hostile_lines_give_no_traceback(tmp_path, lines):
    store = tmp_path / "store"
    store.mkdir()
    f = store / "h.jsonl"
    f.write_bytes(b"".join(lines))
    r = search("loopword", store, limit=1000, index_cache=tmp_path / "cache")
    for h in r.hits:
        assert h.source_format in ("claude-code", "codex")
        assert h.branch_state in ("active", "compacted", "abandoned")
    p = _cli("search", "loopword", str(store), "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    # every prefix of the file, torn anywhere
    data = f.read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 40)):
        f.write_bytes(data[:cut])
        search("loopword", store, limit=1000, index_cache=tmp_path / "cache")
