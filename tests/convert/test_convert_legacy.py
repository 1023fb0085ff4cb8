"""Pi sessions of version 1 and 2 through Claude Code and Codex: their entries travel in their
own version and come back under the header as it was; lines the agent appends when it resumes
such a session come back in a version 3 file (the old entries migrated as Pi migrates them),
never under the old header, which would make Pi and our reader migrate them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import Session
from sessiontree import convert

TARGETS = ("claude-code", "codex")
T = "2025-03-04T05:06:{:02d}.000Z"
USAGE = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}  # fmt: skip


def _assistant(blocks: list[dict], ts: int) -> dict:
    return {"role": "assistant", "content": blocks, "api": "anthropic-messages", "provider": "anthropic",
            "model": "m", "stopReason": "stop", "timestamp": ts, "usage": USAGE}  # fmt: skip


def _v1_entries(multipart: bool) -> list[dict]:
    """A v1 session: no ids; a compaction keeping the second entry when ``multipart``
    (a compaction and a thinking + text message each make more than one target line)."""
    text = [{"type": "text", "text": "answer"}]
    out = [
        {"type": "message", "timestamp": T.format(1), "message": {"role": "user", "content": "first", "timestamp": 1}},
        {"type": "message", "timestamp": T.format(2),
         "message": _assistant([{"type": "thinking", "thinking": "hm", "thinkingSignature": "s"}, *text] if multipart else text, 2)},
        {"type": "message", "timestamp": T.format(3),
         "message": {"role": "hookMessage", "customType": "h", "content": "hook", "display": True, "timestamp": 3}},
        {"type": "thinking_level_change", "timestamp": T.format(4), "thinkingLevel": "high"},
        {"type": "message", "timestamp": T.format(5), "message": {"role": "user", "content": "second", "timestamp": 5}},
    ]  # fmt: skip
    if multipart:
        out.append(
            {
                "type": "compaction",
                "timestamp": T.format(6),
                "summary": "sum",
                "firstKeptEntryIndex": 2,
                "tokensBefore": 9,
            }
        )
        out.append(
            {
                "type": "message",
                "timestamp": T.format(7),
                "message": {"role": "user", "content": "after", "timestamp": 7},
            }
        )
    return out


def _v2_entries() -> list[dict]:
    """A v2 session: a tree (two branches off the root), a ``hookMessage`` on the active one."""
    return [
        {"type": "message", "id": "r1", "parentId": None, "timestamp": T.format(1),
         "message": {"role": "user", "content": "root", "timestamp": 1}},
        {"type": "message", "id": "b1", "parentId": "r1", "timestamp": T.format(2),
         "message": {"role": "user", "content": "old branch", "timestamp": 2}},
        {"type": "message", "id": "a1", "parentId": "r1", "timestamp": T.format(3),
         "message": _assistant([{"type": "text", "text": "answer"}], 3)},
        {"type": "message", "id": "h1", "parentId": "a1", "timestamp": T.format(4),
         "message": {"role": "hookMessage", "customType": "h", "content": "hook", "display": True, "timestamp": 4}},
    ]  # fmt: skip


def _header(version: object) -> dict:
    h: dict = {"type": "session", "id": "0f9c2a52-5c1e-4a8e-9a0b-0d3c0e6f1a77", "timestamp": T.format(0),
               "cwd": "/work/p", "parentSession": "/s/parent.jsonl", "later": [1.5, "é"]}  # fmt: skip
    if version is not None:
        h["version"] = version
    return h


def _write(path: Path, header: dict, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [header, *entries]))


def _first(path: Path) -> dict:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])


def _messages(path: Path) -> list[tuple[object, object]]:
    return [(m.get("role"), m.get("content")) for m in Session.open(path).build_context().messages]


def _append_own_lines(x: Path, to: str) -> tuple[str | None, list[str]]:
    """Lines the agent appends when it resumes ``x``, under its last line (Claude Code: under
    the last line's uuid, as its resume does; Codex: one chain). Returns the uuid they hang
    under (Claude Code) and the texts appended."""
    lines = x.read_text().splitlines()
    if to == "claude-code":
        last = json.loads(lines[-1])
        base = {
            "isSidechain": False,
            "userType": "external",
            "cwd": "/work/p",
            "sessionId": last["sessionId"],
            "version": "2.0.1",
        }
        new = [
            {**base, "parentUuid": last["uuid"], "type": "user", "uuid": "cc-own-1", "timestamp": "2025-04-01T00:00:00.000Z",
             "message": {"role": "user", "content": "resumed"}},
            {**base, "parentUuid": "cc-own-1", "type": "assistant", "uuid": "cc-own-2", "timestamp": "2025-04-01T00:00:01.000Z",
             "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": [{"type": "text", "text": "resumed too"}],
                         "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}},
        ]  # fmt: skip
        under = last["uuid"]
    else:
        new = [
            {"timestamp": "2025-04-01T00:00:00.000Z", "type": "response_item",
             "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "resumed"}]}},
            {"timestamp": "2025-04-01T00:00:01.000Z", "type": "response_item",
             "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "resumed too"}]}},
        ]  # fmt: skip
        under = None
    x.write_text("\n".join(lines + [json.dumps(o) for o in new]) + "\n")
    return under, ["resumed", "resumed too"]


def _text(content: object) -> object:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content


CASES = [("v1", 1, False), ("v1-none", None, False), ("v2", 2, False)]


def _source(tmp_path: Path, name: str, version: object, multipart: bool) -> Path:
    a = tmp_path / f"{name}.jsonl"
    entries = _v2_entries() if version == 2 else _v1_entries(multipart)
    _write(a, _header(version), entries)
    return a


@pytest.mark.parametrize("to", TARGETS)
@pytest.mark.parametrize(("name", "version", "multipart"), CASES)
def test_a_v1_or_v2_session_comes_back_under_its_header_as_it_was(tmp_path, to, name, version, multipart):
    """Every line carries an entry in its own version: the header comes back as it was, the
    reader migrates the entries as it migrates the source (the same ids: the same positions),
    and the target file goes through Pi unchanged."""
    a = _source(tmp_path, name, version, multipart)
    x, b, x2 = tmp_path / f"x.{to}.jsonl", tmp_path / "b.jsonl", tmp_path / f"x2.{to}.jsonl"
    convert.from_pi(a, x, to=to)
    convert.to_pi(x, b)
    assert _first(b) == _first(a)
    src, back = Session.open(a), Session.open(b)
    assert back.needs_migration and back.legacy_version == src.legacy_version
    want = [(e.id, e.parent_id) for e in src.entries()]
    if to == "codex" and version == 2:  # one chain: the active branch (root, answer, hook)
        want = [w for w in want if w[0] != "b1"]
    assert [(e.id, e.parent_id) for e in back.entries()] == want
    assert _messages(b) == _messages(a)
    convert.from_pi(b, x2, to=to)
    assert x2.read_bytes() == x.read_bytes()


@pytest.mark.parametrize("to", TARGETS)
@pytest.mark.parametrize(("name", "version", "multipart"), [*CASES, ("v1-compacted", 1, True)])
def test_lines_the_agent_appends_to_a_v1_or_v2_session_come_back_in_a_v3_tree(tmp_path, to, name, version, multipart):
    """The agent resumes the converted session and appends lines of its own under the last
    one: converting back gives a v3 file (the header's version alone changed), every entry with
    an id, the old entries migrated as Pi migrates them (a v1 session's ids the ones our reader
    gives the source), the appended lines under the right entry, and the reader opens it
    without migrating. The target file still goes through Pi unchanged."""
    a = _source(tmp_path, name, version, multipart)
    x, b, x2 = tmp_path / f"x.{to}.jsonl", tmp_path / "b.jsonl", tmp_path / f"x2.{to}.jsonl"
    convert.from_pi(a, x, to=to)
    under, texts = _append_own_lines(x, to)
    convert.to_pi(x, b)
    head = _first(b)
    assert isinstance(head, dict) and head["version"] == 3 and head["source"]["format"] == to
    assert {k: v for k, v in head.items() if k not in ("version", "source")} == {
        k: v for k, v in _header(version).items() if k != "version"
    }
    back = Session.open(b)
    assert not back.needs_migration and back.validate() == []
    entries = back.entries()
    ids = [e.id for e in entries]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)
    # the appended lines: the last two entries, the first under the line before them
    own = entries[-2:]
    assert [_text(e.raw["message"]["content"]) for e in own] == texts
    assert own[1].parent_id == own[0].id
    if to == "claude-code":
        assert own[0].parent_id == under
    else:
        assert own[0].parent_id == entries[-3].id
    # the old entries, migrated: no hookMessage, no firstKeptEntryIndex
    raws = [e.raw for e in entries]
    assert not any(r.get("message", {}).get("role") == "hookMessage" for r in raws)
    assert not any("firstKeptEntryIndex" in r for r in raws)
    src = Session.open(a)
    if to == "claude-code":  # the source's ids (a v1 session's: those our reader derives)
        got = {e.id: e.parent_id for e in entries}
        for e in src.entries():
            assert e.id in got
    # the context: the source's (as Pi reads it, migrated), then the appended messages
    want = [(r, _text(c)) for r, c in _messages(a)] + [("user", "resumed"), ("assistant", "resumed too")]
    assert [(r, _text(c)) for r, c in _messages(b)] == want
    convert.from_pi(b, x2, to=to)
    assert x2.read_bytes() == x.read_bytes()


@pytest.mark.parametrize("to", TARGETS)
def test_a_v1_compactions_kept_entry_is_the_one_pi_keeps(tmp_path, to):
    """``firstKeptEntryIndex`` (an index into the v1 file, the header being 0) becomes the id
    of the entry at that index, not of the entry at that position in the converted file (where
    parts of multi-line entries come between)."""
    a = _source(tmp_path, "v1", 1, True)
    x, b = tmp_path / f"x.{to}.jsonl", tmp_path / "b.jsonl"
    convert.from_pi(a, x, to=to)
    _append_own_lines(x, to)
    convert.to_pi(x, b)
    comp = next(e for e in Session.open(b).entries() if e.type == "compaction")
    kept = Session.open(b).get_entry(comp.raw["firstKeptEntryId"])
    assert kept is not None and kept.raw["message"]["role"] == "assistant"  # the v1 file's entries[2]


VERSIONS = st.sampled_from([None, 1, 2, 1.5, "2", "", True, "abc", 3, 4, 3.5])


@pytest.mark.slow  # about 3 s: 40 sessions, two conversions and three opens each
@settings(max_examples=40, deadline=None)
@given(version=VERSIONS, to=st.sampled_from(TARGETS), appended=st.booleans(),
       extra=st.dictionaries(st.sampled_from(["x", "branchedFrom", "é", "n"]), st.one_of(st.integers(), st.text(max_size=5)), max_size=3))  # fmt: skip
def test_any_carried_header_version_is_kept_or_raised_to_3_by_pis_rule(tmp_path_factory, version, to, appended, extra):
    """Over lines that all carry entries in their own version the header comes back as it was;
    with a line of the target's own, a header Pi would migrate (``version ?? 1`` below 3)
    comes back at version 3, any other as it was, and the reader never migrates the result."""
    tmp = tmp_path_factory.mktemp("v")
    head = {**_header(version), **extra}
    a = tmp / "a.jsonl"
    _write(a, head, _v2_entries())  # entries with ids: the header's version alone decides
    x, b = tmp / f"x.{to}.jsonl", tmp / "b.jsonl"
    convert.from_pi(a, x, to=to)
    if appended:
        _append_own_lines(x, to)
    convert.to_pi(x, b)
    got = _first(b)
    legacy = Session.open(a).needs_migration
    if appended and legacy:
        assert {k: v for k, v in got.items() if k != "source"} == {**head, "version": 3}
        assert not Session.open(b).needs_migration
    else:
        assert got == head
        assert Session.open(b).needs_migration == legacy


@pytest.mark.parametrize("to", TARGETS)
def test_id_less_entries_under_a_version_3_header_keep_their_chain(tmp_path, to):
    """A v3 header over entries with neither ``id`` nor ``parentId`` (what Pi's ``forkFrom``
    writes for a v1 session; our reader reads them as v1, docs/divergences.md row 22): the
    target's lines get the reader's ids (Codex wrote none of them before), so the session comes
    back as one chain with the source's context."""
    a = tmp_path / "a.jsonl"
    _write(a, _header(3), _v1_entries(False))
    x, b = tmp_path / f"x.{to}.jsonl", tmp_path / "b.jsonl"
    r = convert.from_pi(a, x, to=to)
    assert r.problems == ()
    convert.to_pi(x, b)
    back = Session.open(b)
    entries = back.entries()
    assert len(entries) == len(Session.open(a).entries()) and back.validate() == []
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]
    assert _messages(b) == _messages(a)
