"""The Pi header through Claude Code and Codex: Pi -> X -> Pi gives back the header line as an
equal JSON value (every field: ``branchedFrom``, ``parentSession``, a later version's fields,
the timestamp's milliseconds), the files X's readers accept, and X -> Pi -> X stays exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree import convert

from ._helpers import FIXTURES

TARGETS = ("claude-code", "codex")
HEADER = {
    "type": "session",
    "version": 3,
    "id": "0f9c2a52-5c1e-4a8e-9a0b-0d3c0e6f1a77",
    "timestamp": "2025-03-04T05:06:07.891Z",
    "cwd": "/work/p",
    "parentSession": "/s/--work-p--/2025-03-04T05-00-00-000Z_parent.jsonl",
    "branchedFrom": "/s/--work-p--/2025-03-04T04-00-00-000Z_base.jsonl",
    "laterField": {"nested": [1, 2.5, None, True, "é\u2028"], "big": 123456789012345678901234567890},
}
ENTRIES = [
    {"type": "message", "id": "a1", "parentId": None, "timestamp": "2025-03-04T05:06:08.001Z",
     "message": {"role": "user", "content": "hello", "timestamp": 1741064768001}},
    {"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2025-03-04T05:06:09.002Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "api": "anthropic-messages",
                 "provider": "anthropic", "model": "m", "stopReason": "stop", "timestamp": 1741064769002,
                 "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
                           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}}},
]  # fmt: skip


def _write(path: Path, header: dict, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [header, *entries]))


def _header(path: Path) -> object:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])


def _ctx(path: Path):
    c = Session.open(path).build_context()
    return c.messages, c.thinking_level, c.model


@pytest.mark.parametrize("to", TARGETS)
def test_every_header_field_comes_back_through_the_target(tmp_path, to):
    a, x, b = tmp_path / "a.jsonl", tmp_path / "x.jsonl", tmp_path / "b.jsonl"
    _write(a, HEADER, ENTRIES)
    convert.from_pi(a, x, to=to)
    assert convert.detect(x) == to
    convert.to_pi(x, b)
    assert _header(b) == HEADER
    assert Session.open(b).validate() == []
    assert _ctx(b) == _ctx(a)


@pytest.mark.parametrize("to", TARGETS)
def test_the_timestamps_milliseconds_and_branched_from_come_back(tmp_path, to):
    """The two losses the docs named: ``branchedFrom`` and (through Claude Code) the header
    timestamp's milliseconds, here with an entry whose timestamp differs from the header's."""
    a, x, b = tmp_path / "a.jsonl", tmp_path / "x.jsonl", tmp_path / "b.jsonl"
    head = {k: HEADER[k] for k in ("type", "version", "id", "timestamp", "cwd", "branchedFrom")}
    _write(a, head, ENTRIES)
    convert.from_pi(a, x, to=to)
    convert.to_pi(x, b)
    got = _header(b)
    assert isinstance(got, dict)
    assert got["timestamp"] == "2025-03-04T05:06:07.891Z"
    assert got["branchedFrom"] == head["branchedFrom"]
    assert got == head


@pytest.mark.parametrize("to", TARGETS)
def test_a_session_with_no_entries_keeps_its_header(tmp_path, to):
    a, x, b = tmp_path / "a.jsonl", tmp_path / "x.jsonl", tmp_path / "b.jsonl"
    _write(a, HEADER, [])
    convert.from_pi(a, x, to=to)
    convert.to_pi(x, b)
    assert _header(b) == HEADER
    assert b.read_bytes().count(b"\n") == 1


@pytest.mark.parametrize("to", TARGETS)
def test_the_real_pi_file_with_branched_from_round_trips(tmp_path, to):
    src = FIXTURES / "pi-real" / "agentsview__pi_session.jsonl"
    x, b = tmp_path / "x.jsonl", tmp_path / "b.jsonl"
    convert.from_pi(src, x, to=to)
    convert.to_pi(x, b)
    assert _header(b) == _header(src)
    assert _ctx(b) == _ctx(src)


@pytest.mark.parametrize("to", TARGETS)
def test_the_target_file_round_trips_exactly_with_the_header_in_it(tmp_path, to):
    """X (written from Pi) -> Pi -> X gives back the same bytes."""
    a, x, b, x2 = (tmp_path / n for n in ("a.jsonl", "x.jsonl", "b.jsonl", "x2.jsonl"))
    _write(a, HEADER, ENTRIES)
    convert.from_pi(a, x, to=to)
    convert.to_pi(x, b)
    convert.from_pi(b, x2, to=to)
    assert x2.read_bytes() == x.read_bytes()


def test_claude_codes_header_line_is_shaped_like_its_system_lines(tmp_path):
    """The header rides on a ``system`` line with the fields every Claude Code line has (the
    fixtures' readers key on them) and is no message: it is not on the conversation's chain."""
    a, x = tmp_path / "a.jsonl", tmp_path / "x.jsonl"
    _write(a, HEADER, ENTRIES)
    convert.from_pi(a, x, to="claude-code")
    lines = [json.loads(s) for s in x.read_bytes().split(b"\n") if s]
    first = lines[0]
    assert first["type"] == "system" and first["subtype"] == "pi_header" and first["isMeta"] is True
    assert first["parentUuid"] is None and first["sessionId"] == HEADER["id"] and first["cwd"] == HEADER["cwd"]
    assert first["timestamp"] == HEADER["timestamp"] and isinstance(first["uuid"], str)
    assert first["piHeader"] == HEADER
    assert all(x.get("parentUuid") != first["uuid"] for x in lines[1:])
    assert [x["uuid"] for x in lines[1:]] == ["a1", "a2"]


def test_codexs_session_meta_holds_the_header(tmp_path):
    a, x = tmp_path / "a.jsonl", tmp_path / "x.jsonl"
    _write(a, HEADER, ENTRIES)
    convert.from_pi(a, x, to="codex")
    first = json.loads(x.read_bytes().split(b"\n")[0])
    assert first["type"] == "session_meta"
    p = first["payload"]
    assert (p["id"], p["cwd"], p["timestamp"]) == (HEADER["id"], HEADER["cwd"], HEADER["timestamp"])
    assert first["piHeader"] == HEADER


@pytest.mark.parametrize("to", TARGETS)
def test_a_header_line_edited_in_the_target_is_an_ordinary_line(tmp_path, to):
    """A header line that is not what ``from_pi`` writes for its ``piHeader`` (edited by hand or
    by the agent) is not trusted: the header is made from the target's lines as for any file, and
    the edited line still travels (X -> Pi -> X exact)."""
    a, x, b, x2 = (tmp_path / n for n in ("a.jsonl", "x.jsonl", "b.jsonl", "x2.jsonl"))
    _write(a, HEADER, ENTRIES)
    convert.from_pi(a, x, to=to)
    lines = x.read_bytes().split(b"\n")
    first = json.loads(lines[0])
    first["piHeader"]["branchedFrom"] = "/elsewhere.jsonl"
    first["cwd" if to == "claude-code" else "payload"] = (
        "/edited" if to == "claude-code" else {**first["payload"], "cwd": "/edited"}
    )
    lines[0] = json.dumps(first).encode()
    x.write_bytes(b"\n".join(lines))
    convert.to_pi(x, b)
    got = _header(b)
    assert isinstance(got, dict)
    assert got.get("branchedFrom") is None and got["cwd"] == "/edited"
    assert Session.open(b).validate() == []
    convert.from_pi(b, x2, to=to)
    assert x2.read_bytes() == x.read_bytes()


def test_a_header_converted_from_another_format_goes_through_whole(tmp_path):
    """Codex -> Pi -> Claude Code -> Pi keeps the Codex header (its side field with the
    ``session_meta`` line), so the session still goes back to the same rollout."""
    src = sorted((FIXTURES / "codex").glob("*.jsonl"))[0]
    p1, cc, p2, back = (tmp_path / n for n in ("p1.jsonl", "cc.jsonl", "p2.jsonl", "back.jsonl"))
    convert.to_pi(src, p1)
    convert.from_pi(p1, cc, to="claude-code")
    convert.to_pi(cc, p2)
    assert _header(p2) == _header(p1)
    convert.from_pi(p2, back, to="codex")
    assert back.read_bytes().split(b"\n", 1)[0] == src.read_bytes().split(b"\n", 1)[0]


BRANCHED = [
    {"type": "message", "id": "b1", "parentId": None, "timestamp": "2025-03-04T05:06:08.001Z",
     "message": {"role": "user", "content": "root", "timestamp": 1741064768001}},
    {"type": "message", "id": "b2", "parentId": "b1", "timestamp": "2025-03-04T05:06:08.002Z",
     "message": {"role": "user", "content": "left", "timestamp": 1741064768002}},
    {"type": "message", "id": "b3", "parentId": "b1", "timestamp": "2025-03-04T05:06:08.003Z",
     "message": {"role": "user", "content": "right", "timestamp": 1741064768003}},
]  # fmt: skip


@pytest.mark.parametrize("version", [1, None])
def test_a_carried_header_of_version_1_never_redoes_the_tree(tmp_path, version):
    """Hostile review: a Claude Code file whose first line is what ``from_pi`` writes, but for
    a header of version 1 (or none), gives that header back over the entries made from its own
    lines (the current version's): the reader (and Pi) migrate them, ids and parents redone,
    the branches made one chain."""
    a, x, b = (tmp_path / n for n in ("a.jsonl", "x.jsonl", "b.jsonl"))
    _write(a, HEADER, BRANCHED)
    convert.from_pi(a, x, to="claude-code")
    first, rest = x.read_bytes().split(b"\n", 1)
    # the entries as Claude Code's own lines (no piEntry), as another tool would write them
    own = []
    for line in rest.splitlines():
        o = json.loads(line)
        o.pop("piEntry", None)
        own.append(json.dumps(o).encode())
    at = first.index(b'"piHeader":') + len(b'"piHeader":')
    hostile = {k: v for k, v in HEADER.items() if k != "version"}
    if version is not None:
        hostile["version"] = version
    x.write_bytes(first[:at] + json.dumps(hostile).encode() + b"}\n" + b"\n".join(own) + b"\n")
    convert.to_pi(x, b)
    want = [(e.id, e.parent_id) for e in Session.open(a).entries()]
    assert [(e.id, e.parent_id) for e in Session.open(b).entries() if e.type == "message"] == want
