"""Random Pi trees under random headers: Pi -> Claude Code -> Pi keeps the header (an equal JSON
value: every field, known or not), the tree (every entry, its type, its parent among the
original entries, the leaf) and ``build_context()``; Pi -> Codex -> Pi keeps the header and
the active branch's ``build_context()`` and names the entries off it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session
from sessiontree import convert

TS = "2025-01-01T00:00:00.000Z"
USAGE = {
    "input": 3,
    "output": 4,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 7,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


@st.composite
def pi_trees(draw):
    n = draw(st.integers(1, 14))
    entries: list[dict] = []
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    for i in range(n):
        eid = f"{i:08x}"
        parent = None if i == 0 else entries[draw(st.integers(max(0, i - 3), i - 1))]["id"]
        kind = draw(
            st.sampled_from(["user", "assistant", "tool", "model", "thinking", "label", "custom", "compaction", "info"])
        )
        e: dict = {"type": "message", "id": eid, "parentId": parent, "timestamp": TS}
        if kind == "user":
            e["message"] = {
                "role": "user",
                "content": draw(st.one_of(text, st.lists(text.map(lambda t: {"type": "text", "text": t}), max_size=2))),
                "timestamp": 1,
            }
        elif kind == "assistant":
            blocks = draw(
                st.lists(
                    st.one_of(
                        text.map(lambda t: {"type": "text", "text": t}),
                        text.map(lambda t: {"type": "thinking", "thinking": t}),
                        text.map(
                            lambda t: {
                                "type": "toolCall",
                                "id": "call_" + t.encode().hex()[:8],
                                "name": "bash",
                                "arguments": {"cmd": t},
                            }
                        ),
                    ),
                    max_size=3,
                )
            )
            e["message"] = {
                "role": "assistant",
                "content": blocks,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-x",
                "usage": USAGE,
                "stopReason": "stop",
                "timestamp": 2,
            }
        elif kind == "tool":
            e["message"] = {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "bash",
                "content": [{"type": "text", "text": draw(text)}],
                "isError": draw(st.booleans()),
                "timestamp": 3,
            }
        elif kind == "model":
            e = {
                "type": "model_change",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "provider": "openai",
                "modelId": draw(st.sampled_from(["a", "b"])),
            }
        elif kind == "thinking":
            e = {
                "type": "thinking_level_change",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "thinkingLevel": draw(st.sampled_from(["off", "low", "high"])),
            }
        elif kind == "label":
            e = {
                "type": "label",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "targetId": entries[draw(st.integers(0, i - 1))]["id"] if i else eid,
                "label": draw(text),
            }
        elif kind == "custom":
            e = {
                "type": "custom",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "customType": "ext",
                "data": {"k": draw(text)},
            }
        elif kind == "info":
            e = {"type": "session_info", "id": eid, "parentId": parent, "timestamp": TS, "name": draw(text)}
        else:
            path, p = [], parent
            by = {x["id"]: x for x in entries}
            while p is not None:
                path.append(p)
                p = by[p]["parentId"]
            kept = draw(st.sampled_from(path)) if path else eid
            e = {
                "type": "compaction",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "summary": draw(text),
                "firstKeptEntryId": kept,
                "tokensBefore": 10,
            }
        entries.append(e)
    return entries


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT, kids, max_size=3),
    max_leaves=8,
)


@st.composite
def pi_headers(draw):
    """A Pi header: the fields Pi 1.6 writes (the timestamp with or without milliseconds), and
    any of ``parentSession``, ``branchedFrom`` and fields of a later version."""
    ms = draw(st.one_of(st.just(""), st.integers(0, 999).map(lambda m: f".{m:03d}")))
    head = {"type": "session", "version": 3, "id": draw(st.uuids()).hex, "timestamp": f"2025-01-01T00:00:00{ms}Z"}
    head["cwd"] = draw(_TEXT)
    for k in ("parentSession", "branchedFrom"):
        if draw(st.booleans()):
            head[k] = "/s/" + draw(_TEXT) + ".jsonl"
    reserved = {"type", "version", "id", "timestamp", "cwd", "parentSession", "branchedFrom", "source"}
    head.update(draw(st.dictionaries(_TEXT.filter(lambda k: k not in reserved), _JSON, max_size=3)))
    return head


def _write(path: Path, head: dict, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [head, *entries]))


def _header(path: Path) -> object:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])


def _ctx(path: Path):
    c = Session.open(path).build_context()
    return c.messages, c.thinking_level, c.model


@pytest.mark.slow  # about a minute: 40 trees, four conversions and two opens each
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pi_trees(), pi_headers())
def test_pi_to_claude_code_to_pi_keeps_the_tree_and_the_context(entries, head):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        a, cc, b = d / "a.jsonl", d / "cc.jsonl", d / "b.jsonl"
        _write(a, head, entries)
        convert.from_pi(a, cc, to="claude-code")
        assert convert.detect(cc) == "claude-code"
        convert.to_pi(cc, b)
        assert _header(b) == head
        assert Session.open(b).validate() == []
        got = {e["id"]: e for e in (json.loads(x) for x in b.read_text().split("\n")[1:] if x)}
        orig = {e["id"] for e in entries}
        for e in entries:
            g = got[e["id"]]
            assert g["type"] == e["type"]
            p = g["parentId"]
            while p is not None and p not in orig:  # a compaction's summary line sits between
                p = got[p]["parentId"]
            assert p == e["parentId"]
            same = {k: v for k, v in g.items() if k not in ("source", "parentId")}
            assert same == {k: v for k, v in e.items() if k != "parentId"}
        assert Session.open(b).leaf_id == entries[-1]["id"]
        assert _ctx(b) == _ctx(a)


@pytest.mark.slow  # about a minute: 40 trees, four conversions and two opens each
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pi_trees(), pi_headers())
def test_pi_to_codex_to_pi_keeps_the_active_branch_context(entries, head):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        a, cx, b = d / "a.jsonl", d / "cx.jsonl", d / "b.jsonl"
        _write(a, head, entries)
        r = convert.from_pi(a, cx, to="codex")
        assert convert.detect(cx) == "codex"
        convert.to_pi(cx, b)
        assert _header(b) == head
        assert Session.open(b).validate() == []
        assert _ctx(b) == _ctx(a)
        on_branch = {e.id for e in Session.open(a).get_branch()}
        off = len(entries) - len(on_branch)
        assert (r.not_carried != ()) == (off > 0)
        if off:
            assert r.not_carried[0].startswith(f"{off} entries off the active branch")


def _m(i: int, parent: int | None, role: str) -> dict:
    e = {"type": "message", "id": f"{i:08x}", "parentId": None if parent is None else f"{parent:08x}",
         "timestamp": "2025-01-01T00:00:00.000Z"}  # fmt: skip
    if role == "user":
        e["message"] = {"role": "user", "content": f"u{i}", "timestamp": 1}
    else:
        e["message"] = {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}], "api": "x",
                        "provider": "anthropic", "model": "claude-x", "stopReason": "stop", "timestamp": 2,
                        "usage": {"input": 3, "output": 4, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7}}  # fmt: skip
    return e


def _label(i: int, parent: int, target: int) -> dict:
    return {"type": "label", "id": f"{i:08x}", "parentId": f"{parent:08x}",
            "timestamp": "2025-01-01T00:00:00.000Z", "targetId": f"{target:08x}", "label": "x"}  # fmt: skip


# Found by Hypothesis (the test above): a label on the active branch whose target is off it is not
# carried to Codex; what named that label must not name nothing after the round trip
@pytest.mark.parametrize(
    "entries",
    [
        # a label on the dropped label: dropped too (it would target no entry)
        [_m(0, None, "user"), _m(1, 0, "assistant"), _m(2, 0, "assistant"), _label(3, 1, 2), _label(4, 3, 3),
         _m(5, 4, "user")],
        # a compaction keeping from the dropped label: kept from the next entry carried (the same context)
        [_m(0, None, "user"), _m(1, 0, "assistant"), _m(2, 0, "assistant"), _label(3, 1, 2), _m(4, 3, "user"),
         _m(5, 4, "user"), {"type": "compaction", "id": "00000006", "parentId": "00000005",
                            "timestamp": "2025-01-01T00:00:00.000Z", "summary": "s",
                            "firstKeptEntryId": "00000003", "tokensBefore": 10}],
    ],
    ids=["label-on-a-dropped-label", "compaction-kept-from-a-dropped-label"],
)  # fmt: skip
def test_pi_to_codex_drops_what_names_a_label_it_drops(tmp_path, entries):
    head = {"type": "session", "version": 3, "id": "e3e70682c2094cac629f6fbed82c07cd",
            "timestamp": "2025-01-01T00:00:00Z", "cwd": ""}  # fmt: skip
    a, cx, b = tmp_path / "a.jsonl", tmp_path / "cx.jsonl", tmp_path / "b.jsonl"
    _write(a, head, entries)
    r = convert.from_pi(a, cx, to="codex")
    convert.to_pi(cx, b)
    assert Session.open(b).validate() == []
    assert _ctx(b) == _ctx(a)
    assert any("label '00000003'" in n or 'label "00000003"' in n for n in r.not_carried), r.not_carried
