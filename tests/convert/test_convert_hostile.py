"""Hostile and damaged input: each case becomes a recorded problem (the line still carried, so
the round trip stays exact) or a typed error; never a traceback, never a hang; Pi files
written validate with 0 problems."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessiontree import OutputPathError, Session, SessionTreeError
from sessiontree import convert
from sessiontree.errors import ConvertError, UnrecognisedFormatError


def _cc(uuid, parent, text="x", **kw):
    d = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s",
        "timestamp": "2025-01-01T00:00:00Z",
        "message": {"role": "user", "content": text},
    }
    d.update(kw)
    return json.dumps(d)


def _round_trip(tmp_path: Path, data: bytes, fmt: str = "claude-code"):
    src = tmp_path / "src.jsonl"
    src.write_bytes(data)
    out = tmp_path / "pi.jsonl"
    r = convert.to_pi(src, out, source_format=fmt)
    for f in r.files:
        assert Session.open(f).validate() == [], Path(f).read_text()[:2000]
    back = tmp_path / "back.jsonl"
    convert.from_pi(out, back, to=fmt)
    assert back.read_bytes() == data
    return r


def _kinds(r) -> set[str]:
    return {p.kind for p in r.problems}


def test_torn_last_line_and_bad_json_are_carried(tmp_path):
    data = (_cc("u1", None) + "\n{not json\n" + _cc("u2", "u1")[:-9]).encode()
    r = _round_trip(tmp_path, data)
    assert {"malformed_json", "torn_last_line"} <= _kinds(r)


def test_non_utf8_bytes_are_carried_exactly(tmp_path):
    data = _cc("u1", None).encode() + b"\n\xff\xfe garbage \x80\n" + _cc("u2", "u1", "caf\u00e9").encode() + b"\n"
    r = _round_trip(tmp_path, data)
    assert "malformed_json" in _kinds(r)


def test_non_utf8_bytes_inside_a_json_line_are_never_copied_into_the_pi_file(tmp_path):
    # a valid JSON object apart from bytes that are not UTF-8 inside a field no rule reads
    # (a progress line: a custom entry), and inside a message line's unread field
    progress = b'{"type":"progress","uuid":"u2","parentUuid":"u1","data":"\xff\xfe"}'
    message = _cc("u3", "u2")[:-1].encode() + b',"extra":"\x80"}'
    data = _cc("u1", None).encode() + b"\n" + progress + b"\n" + message + b"\n"
    r = _round_trip(tmp_path, data)  # every Pi file validates with 0 problems
    (tmp_path / "pi.jsonl").read_bytes().decode("utf-8")  # the Pi file is UTF-8
    assert [p.line for p in r.problems if p.kind == "invalid_utf8"] == [2, 3]
    # the lines keep their place in the tree (their uuid and parent)
    entries = [json.loads(x) for x in (tmp_path / "pi.jsonl").read_text().splitlines()[1:]]
    assert [(e["id"], e["parentId"]) for e in entries] == [("u1", None), ("u2", "u1"), ("u3", "u2")]


def test_unknown_types_and_non_objects_become_custom_entries(tmp_path):
    data = "\n".join(
        [_cc("u1", None), json.dumps({"type": "brand-new", "uuid": "z", "parentUuid": "u1"}), "[1,2]", "42", ""]
    ).encode()
    r = _round_trip(tmp_path, data)
    es = [json.loads(x) for x in (tmp_path / "pi.jsonl").read_text().splitlines()[1:]]
    assert {e.get("customType") for e in es if e["type"] == "custom"} >= {
        "claude-code:brand-new",
        "claude-code:unparsed",
    }
    assert "not_an_object" in _kinds(r)


def test_duplicate_and_missing_uuids(tmp_path):
    data = (
        "\n".join(
            [
                _cc("u1", None),
                _cc("u1", "u1", "again"),
                _cc("u3", "nowhere"),
                json.dumps({"type": "user", "message": {"role": "user", "content": "no ids"}}),
            ]
        ).encode()
        + b"\n"
    )
    r = _round_trip(tmp_path, data)
    assert {"duplicate_id", "orphan"} <= _kinds(r)


def test_a_parent_cycle_is_cut(tmp_path):
    data = "\n".join([_cc("a", "c"), _cc("b", "a"), _cc("c", "b"), _cc("d", "c")]).encode() + b"\n"
    r = _round_trip(tmp_path, data)
    assert "parent_cycle" in _kinds(r)


def test_a_boundary_pointing_under_itself_links_to_the_last_preserved_message(tmp_path):
    # the boundary's logicalParentUuid names a later line under the boundary (a cycle)
    lines = [
        _cc("u1", None),
        _cc("u2", "u1"),
        json.dumps(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "uuid": "cb",
                "parentUuid": None,
                "logicalParentUuid": "late",
                "content": "Conversation compacted",
                "compactMetadata": {
                    "preTokens": 5,
                    "preservedMessages": {"uuids": ["u2", "late"]},
                    "preservedSegment": {"headUuid": "u2"},
                },
            }
        ),
        _cc("cs", "cb", "the summary", isCompactSummary=True),
        _cc("late", "cs", "preserved tail"),
        _cc("after", "late"),
    ]
    r = _round_trip(tmp_path, ("\n".join(lines) + "\n").encode())
    assert "boundary_cycle" in _kinds(r)
    es = {e["id"]: e for e in (json.loads(x) for x in (tmp_path / "pi.jsonl").read_text().splitlines()[1:])}
    assert es["cb"]["type"] == "compaction" and es["cb"]["parentId"] == "u2"
    assert es["cb"]["firstKeptEntryId"] == "u2" and es["cb"]["summary"] == "the summary"
    roots = [e for e in es.values() if e["parentId"] is None]
    assert [e["id"] for e in roots] == ["u1"]
    ctx = Session.open(tmp_path / "pi.jsonl").build_context()
    assert [m["role"] for m in ctx.messages] == ["compactionSummary", "user", "user", "user"]


def test_a_huge_line_is_carried(tmp_path):
    big = "y" * (8 << 20)
    data = (_cc("u1", None) + "\n" + _cc("u2", "u1", big) + "\n").encode()
    _round_trip(tmp_path, data)


def test_empty_and_unrecognised_sources_are_typed_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": "world"}\n')
    for p in (empty, other):
        with pytest.raises(UnrecognisedFormatError):
            convert.detect(p)
        with pytest.raises(UnrecognisedFormatError):
            convert.to_pi(p, tmp_path / "o.jsonl")
    assert issubclass(UnrecognisedFormatError, ConvertError) and issubclass(ConvertError, SessionTreeError)
    assert not (tmp_path / "o.jsonl").exists()


def test_detection_reads_content_not_names(tmp_path):
    a = tmp_path / "rollout-2025-01-01-abc.jsonl"  # a Codex-like name holding a Claude Code transcript
    a.write_text(_cc("u1", None) + "\n")
    assert convert.detect(a) == "claude-code"
    b = tmp_path / "session.jsonl"
    b.write_text(
        json.dumps({"type": "session", "version": 3, "id": "x", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/"}) + "\n"
    )
    assert convert.detect(b) == "pi"


def test_outputs_never_go_through_a_link_or_over_the_source(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text(_cc("u1", None) + "\n")
    target = tmp_path / "target.jsonl"
    target.write_text("keep")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(OutputPathError):
        convert.to_pi(src, link)
    assert target.read_text() == "keep"
    with pytest.raises(OutputPathError):
        convert.to_pi(src, src)
    os.link(src, tmp_path / "hard.jsonl")
    with pytest.raises(OutputPathError):
        convert.to_pi(src, tmp_path / "hard.jsonl")
    assert src.read_text() == _cc("u1", None) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.jsonl", "link.jsonl", "src.jsonl", "target.jsonl"]


def test_output_is_never_more_readable_than_the_source(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text(_cc("u1", None) + "\n")
    src.chmod(0o600)
    r = convert.to_pi(src, tmp_path / "o.jsonl")
    assert os.stat(r.files[0]).st_mode & 0o077 == 0


def test_bad_arguments_are_typed(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text(_cc("u1", None) + "\n")
    with pytest.raises(SessionTreeError):
        convert.to_pi(src, tmp_path / "o.jsonl", source_format="nope")
    with pytest.raises(SessionTreeError):
        convert.from_pi(src, tmp_path / "o.jsonl", to="nope")
    with pytest.raises(UnrecognisedFormatError):
        convert.from_pi(src, tmp_path / "o.jsonl", to="codex")  # not a Pi session


def test_a_fifo_source_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UnrecognisedFormatError):
        convert.detect(fifo)
    with pytest.raises(UnrecognisedFormatError):
        convert.to_pi(fifo, tmp_path / "o.jsonl", source_format="claude-code")
    with pytest.raises(UnrecognisedFormatError):
        convert.from_pi(fifo, tmp_path / "o.jsonl", to="codex")


def _sidechain_groups(tmp_path: Path, n: int) -> Path:
    """A Claude Code file with a main line and ``n`` sidechain groups whose names agree in their
    first 80 characters (a file name keeps only those)."""
    lines = [_cc("m", None)] + [_cc("u" * 90 + str(k), None, isSidechain=True) for k in range(n)]
    src = tmp_path / f"groups{n}.jsonl"
    src.write_text("\n".join(lines) + "\n")
    return src


def test_many_sidechain_groups_with_one_name_convert_in_linear_time(tmp_path):
    """Hostile review: each group's file name was told apart by adding ``x`` until unused,
    looked up in a list: cubic time (4,000 groups: 11 s of CPU) and, past about 170 groups,
    a name over 255 bytes (the whole file failed with ENAMETOOLONG)."""
    import time

    def cpu(n: int) -> float:
        src = _sidechain_groups(tmp_path, n)
        best = float("inf")
        for i in range(2):
            t = time.process_time()
            r = convert.to_pi(src, tmp_path / f"o{n}-{i}" / "out.jsonl")
            best = min(best, time.process_time() - t)
            assert len(r.files) == n + 1 and len(set(r.files)) == n + 1
            assert all(len(Path(f).name.encode()) <= 255 for f in r.files)
        return best

    small, large = cpu(200), cpu(800)
    assert large < 10 * max(small, 1e-3), (small, large)  # linear: ~4x; the cubic time was ~64x
