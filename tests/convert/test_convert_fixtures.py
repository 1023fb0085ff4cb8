"""Every fixture converts to Pi and back: the round trip is equal byte for byte (so equal line by
line as JSON), the Pi files validate with 0 problems, the tree is kept (each resolvable
``parentUuid`` is the entry's ``parentId``; one root per source root; the leaf is the last
main-chain message) and every user and assistant text appears in a Pi message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree import convert

from ._helpers import cc_mains, codex_files, pi_entries, pi_texts, read_objects, stage_cc, texts_of


@pytest.mark.parametrize("src", cc_mains(), ids=lambda p: p.stem)
def test_claude_code_round_trips_exactly(src: Path, tmp_path: Path):
    staged, subs = stage_cc(src, tmp_path)
    out = tmp_path / "out" / "session.jsonl"
    r = convert.to_pi(staged, out)
    assert r.source_format == "claude-code" and r.target_format == "pi"
    assert r.files[0] == str(out)
    assert len([f for f in r.files if ".subagent-" in f]) == len(subs)
    back = tmp_path / "back" / staged.name
    rb = convert.from_pi(out, back, to="claude-code")
    assert back.read_bytes() == staged.read_bytes()
    for s in subs:
        again = back.parent / back.stem / "subagents" / s.name
        assert again.read_bytes() == s.read_bytes(), s.name
    assert len(rb.files) == 1 + len(subs)


@pytest.mark.parametrize("src", cc_mains(), ids=lambda p: p.stem)
def test_claude_code_pi_files_validate_and_keep_the_tree(src: Path, tmp_path: Path):
    staged, _ = stage_cc(src, tmp_path)
    out = tmp_path / "session.jsonl"
    r = convert.to_pi(staged, out)
    for f in r.files:
        s = Session.open(f)
        assert s.validate() == [], f
    lines = read_objects(staged)
    objs = [o for o in lines if isinstance(o, dict)]
    main_has = any(isinstance(o.get("uuid"), str) and o.get("isSidechain") is not True for o in objs)
    side = {o["uuid"] for o in objs if main_has and o.get("isSidechain") is True and isinstance(o.get("uuid"), str)}
    entries = pi_entries(out)
    by_id = {e["id"]: e for e in entries}
    seen: set[str] = set()
    # every resolvable parentUuid within the main chain is the entry's parentId (forks included)
    for o in objs:
        u, p = o.get("uuid"), o.get("parentUuid")
        if not isinstance(u, str) or u in seen or u in side:
            continue
        seen.add(u)
        e = by_id[u]
        if isinstance(p, str) and p in by_id and p not in side:
            assert e["parentId"] == p, u
        if (
            p is None
            and "parentUuid" in o
            and not (o.get("subtype") == "compact_boundary" and o.get("logicalParentUuid"))
        ):
            assert e["parentId"] is None, u
    # one root per source root: compact boundaries link through logicalParentUuid
    null_roots = sum(
        1
        for o in objs
        if "parentUuid" in o
        and o["parentUuid"] is None
        and o.get("uuid") not in side
        and not (o.get("subtype") == "compact_boundary" and o.get("logicalParentUuid"))
    )
    roots = [e for e in entries if e["parentId"] is None]
    assert len(roots) <= max(1, null_roots + 1)
    if any(o.get("subtype") == "compact_boundary" and o.get("logicalParentUuid") for o in objs):
        assert len(roots) == null_roots
    # the leaf: the last main-chain message of the transcript
    s = Session.open(out)
    cands = [
        i
        for i, o in enumerate(lines)
        if isinstance(o, dict)
        and o.get("uuid") not in side
        and (
            (o.get("type") in ("user", "assistant") and not o.get("isMeta") and not o.get("isCompactSummary"))
            or o.get("subtype") == "compact_boundary"
        )
    ]
    if cands:
        assert s.leaf_entry.raw["source"]["n"] == _line_number(staged, lines, cands[-1])


def _line_number(path: Path, objs: list, k: int) -> int:
    """The 0-based physical line of the k-th non-blank line."""
    n = -1
    for i, line in enumerate(path.read_bytes().split(b"\n")):
        if line.strip():
            n += 1
            if n == k:
                return i
    raise AssertionError(k)


@pytest.mark.parametrize("src", cc_mains(), ids=lambda p: p.stem)
def test_every_claude_code_text_is_in_a_pi_message(src: Path, tmp_path: Path):
    staged, subs = stage_cc(src, tmp_path)
    r = convert.to_pi(staged, tmp_path / "session.jsonl")
    found: set[str] = set()
    for f in r.files:
        found |= pi_texts(pi_entries(Path(f)))
    for f in [staged, *subs]:
        for o in read_objects(f):
            if not isinstance(o, dict) or o.get("type") not in ("user", "assistant") or o.get("isMeta"):
                continue
            m = o.get("message")
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            want = texts_of(content)
            if isinstance(content, list):  # tool results' texts too
                for b in content:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        want += texts_of(b.get("content"))
            for t in want:
                assert t in found, (f.name, t[:80])


@pytest.mark.parametrize("src", codex_files(), ids=lambda p: p.stem)
def test_codex_round_trips_and_validates(src: Path, tmp_path: Path):
    out = tmp_path / "session.jsonl"
    r = convert.to_pi(src, out)
    assert r.source_format == "codex"
    s = Session.open(out)
    assert s.validate() == []
    entries = pi_entries(out)
    assert [e for e in entries if e["parentId"] is None] == entries[:1]  # one chain, one root
    assert s.leaf_id == entries[-1]["id"]
    back = tmp_path / src.name
    rb = convert.from_pi(out, back, to="codex")
    assert rb.not_carried == ()
    assert back.read_bytes() == src.read_bytes()
    # every user and assistant text of a message item is in a Pi message
    found = pi_texts(entries)
    for o in read_objects(src):
        p = o.get("payload") if isinstance(o, dict) else None
        if (
            isinstance(p, dict)
            and o.get("type") == "response_item"
            and p.get("type") == "message"
            and p.get("role") in ("user", "assistant")
        ):
            for t in texts_of(p.get("content")):
                assert t in found, t[:80]


def test_codex_usage_lands_on_the_assistant_message_before_it(tmp_path: Path):
    src = tmp_path / "r.jsonl"
    lines = [
        {
            "timestamp": "2025-01-01T00:00:00Z",
            "type": "session_meta",
            "payload": {"id": "x", "cwd": "/w", "git": {"branch": "main"}},
        },
        {"timestamp": "2025-01-01T00:00:01Z", "type": "turn_context", "payload": {"model": "gpt-5", "effort": "high"}},
        {
            "timestamp": "2025-01-01T00:00:02Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        },
        {
            "timestamp": "2025-01-01T00:00:03Z",
            "type": "response_item",
            "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        },
        {
            "timestamp": "2025-01-01T00:00:04Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        },
        {
            "timestamp": "2025-01-01T00:00:05Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "last_token_usage": {
                        "input_tokens": 100,
                        "cached_input_tokens": 40,
                        "output_tokens": 7,
                        "total_tokens": 107,
                    }
                },
            },
        },
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "s.jsonl"
    convert.to_pi(src, out)
    head = read_objects(out)[0]
    assert head["id"] == "x" and head["cwd"] == "/w" and head["source"]["line"]["payload"]["git"] == {"branch": "main"}
    es = pi_entries(out)
    assert [e["type"] for e in es] == [
        "model_change",
        "thinking_level_change",
        "message",
        "message",
        "message",
        "custom",
    ]
    assert es[0]["modelId"] == "gpt-5" and es[1]["thinkingLevel"] == "high"
    think, hello = es[3]["message"], es[4]["message"]
    assert think["content"][0] == {"type": "thinking", "thinking": "think"}
    assert think["usage"]["totalTokens"] == 0
    assert hello["model"] == "gpt-5"
    assert hello["usage"]["input"] == 60 and hello["usage"]["cacheRead"] == 40 and hello["usage"]["output"] == 7
    assert es[5]["customType"] == "codex:event_msg:token_count"
    ctx = Session.open(out).build_context()
    assert ctx.thinking_level == "high"
