"""What Pi (and agents that copy its format) write in files newer than our goldens: UUIDv7
session ids, ``session_info`` as the first entry, ``usage`` on ``compaction``,
``branch_summary`` and ``toolResult`` entries, unknown entry types, extra header fields
(``branchedFrom``), and harness-written ``leaf`` entries. Each is read without a problem,
counted in the session's and the fleet's totals as Pi's footer counts it, and kept byte for
byte through every rewrite. Files: ``tests/fixtures/pi-real/`` (see its SOURCE.md) and lines
written after Pi's session-format docs."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from sessiontree import Session, list_sessions

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "pi-real"
SMALL = REAL / "agent-sessions__pi_small.jsonl"  # a UUIDv7 session id, two compactions
VIEW = REAL / "agentsview__pi_session.jsonl"  # branchedFrom, an unknown type, a malformed line

U = {"cacheRead": 0, "cacheWrite": 0}


def _usage(i: int, o: int, cost: float) -> dict:
    return {"input": i, "output": o, **U, "totalTokens": i + o, "cost": {"input": 0, "output": 0, **U, "total": cost}}


def _line(v: dict) -> bytes:
    return orjson.dumps(v) + b"\n"


HEADER = {
    "type": "session",
    "version": 3,
    "id": "019e19b4-eb48-746a-aa6b-8dfcfa37954b",
    "timestamp": "2026-05-12T01:02:27.657Z",
    "cwd": "/tmp/p",
    "branchedFrom": "/x/parent.jsonl",
}
# an unknown type, spelt as a later version might (escapes, spacing, a float): kept byte for byte
FUTURE = (
    b'{"type":"future_thing","id":"aa000005","parentId":"aa000004","timestamp":"2026-05-12T01:02:31.000Z",'
    b'"payload":{"x":"\\u0041\\ud83d\\ude00","n":1.0e2},"weird":  true}\n'
)


def _newer_session() -> bytes:
    """Hand-made after Pi's session-format docs: session_info first, usage on a tool result,
    a compaction and a branch summary, an unknown entry type and an extra message field."""
    t = "2026-05-12T01:02:{:02d}.000Z"
    lines = [
        _line(HEADER),
        _line({"type": "session_info", "id": "aa000001", "parentId": None, "timestamp": t.format(27), "name": "First"}),
        _line(
            {
                "type": "message",
                "id": "aa000002",
                "parentId": "aa000001",
                "timestamp": t.format(28),
                "message": {"role": "user", "content": "hi", "timestamp": 1},
            }
        ),
        _line(
            {
                "type": "message",
                "id": "aa000003",
                "parentId": "aa000002",
                "timestamp": t.format(29),
                "message": {
                    "role": "assistant",
                    "content": [{"type": "toolCall", "id": "t1", "name": "task", "arguments": {}}],
                    "usage": _usage(10, 5, 0.25),
                    "stopReason": "toolUse",
                    "timestamp": 2,
                },
            }
        ),
        _line(
            {
                "type": "message",
                "id": "aa000004",
                "parentId": "aa000003",
                "timestamp": t.format(30),
                "message": {
                    "role": "toolResult",
                    "toolCallId": "t1",
                    "toolName": "task",
                    "content": [{"type": "text", "text": "done"}],
                    "isError": False,
                    "usage": _usage(100, 50, 2.0),
                    "timestamp": 3,
                },
            }
        ),
        FUTURE,
        _line(
            {
                "type": "compaction",
                "id": "aa000006",
                "parentId": "aa000005",
                "timestamp": t.format(32),
                "summary": "sum",
                "firstKeptEntryId": "aa000004",
                "tokensBefore": 200,
                "usage": _usage(1000, 100, 1.0),
            }
        ),
        _line(
            {
                "type": "branch_summary",
                "id": "aa000007",
                "parentId": "aa000002",
                "timestamp": t.format(33),
                "fromId": "aa000006",
                "summary": "b",
                "usage": _usage(7, 3, 0.5),
            }
        ),
        _line(
            {
                "type": "message",
                "id": "aa000008",
                "parentId": "aa000007",
                "timestamp": t.format(34),
                "message": {"role": "user", "content": "again", "timestamp": 4},
                "extraField": {"keep": "me"},
            }
        ),
    ]
    return b"".join(lines)


@pytest.fixture
def newer(tmp_path) -> Path:
    p = tmp_path / "2026-05-12T01-02-27-657Z_019e19b4-eb48-746a-aa6b-8dfcfa37954b.jsonl"
    p.write_bytes(_newer_session())
    return p


# ---------------------------------------------------------------- read without a problem


def test_a_uuidv7_session_id_is_read_and_listed(tmp_path):
    d = tmp_path / "sessions"
    d.mkdir()
    sid = orjson.loads(SMALL.read_bytes().splitlines()[0])["id"]
    assert sid[14] == "7"  # the version nibble: a UUIDv7
    target = d / f"2026-05-12T01-02-27-657Z_{sid}.jsonl"
    shutil.copyfile(SMALL, target)
    s = Session.open(target, index_cache=False)
    assert s.session_id == sid and not s.problems and s.validate() == []
    assert s.leaf_id == "2c19d326" and len(s.build_context().messages) == 5
    assert [i.id for i in list_sessions(session_dir=d)] == [sid]


def test_session_info_as_the_first_entry_is_read_without_a_problem(newer):
    s = Session.open(newer, index_cache=False)
    assert not s.problems and s.validate() == []
    assert s.session_name == "First"
    assert s.get_branch()[0].type == "session_info"
    assert [m["role"] for m in s.build_context().messages] == ["user", "branchSummary", "user"]


def test_extra_header_fields_and_unknown_types_are_read_without_a_problem():
    s = Session.open(VIEW, index_cache=False)
    assert [p.kind for p in s.problems] == ["malformed_json"]  # the fixture's one bad line
    assert s.file_header["branchedFrom"].endswith("_parent-uuid.jsonl")
    assert s.header["branchedFrom"] == s.file_header["branchedFrom"]
    assert s.leaf_id == "entry-9" and s.get_entry("entry-9").type == "unknown_future_entry_type"
    assert [p["kind"] for p in s.validate()] == ["malformed_json"]
    assert [m["role"] for m in s.build_context().messages][-2:] == ["user", "assistant"]


# ---------------------------------------------------------------- usage, as Pi's footer counts it


def test_usage_on_tool_results_compactions_and_branch_summaries_counts_in_the_totals(newer):
    s = Session.open(newer, index_cache=False)
    got = s.usage_totals().to_pi()
    assert got["tokens"] == {"input": 1117, "output": 158, "cacheRead": 0, "cacheWrite": 0, "total": 1275}
    assert got["cost"] == pytest.approx(3.75)


@pytest.mark.slow  # a server or a process pool starts (seconds)
def test_the_fleet_rows_count_the_same_usage(newer):
    pytest.importorskip("pyarrow")
    from sessiontree.fleet import session_stats

    row = session_stats(str(newer), workers=1).to_pylist()[0]
    assert row["session_id"] == HEADER["id"] and row["name"] == "First" and row["problems"] == 0
    assert (row["input_tokens"], row["output_tokens"], row["total_tokens"]) == (1117, 158, 1275)
    assert row["cost"] == pytest.approx(3.75)
    assert (row["summary_tokens"], row["summary_cost"]) == (1110, pytest.approx(1.5))
    real = session_stats(str(SMALL), workers=1).to_pylist()[0]
    assert (real["input_tokens"], real["output_tokens"]) == (24, 14)


# ---------------------------------------------------------------- kept byte for byte


def _kept(before: bytes, after: bytes, *lines: bytes) -> None:
    for line in lines:
        assert line in before.splitlines(keepends=True)
        assert line in after.splitlines(keepends=True), line


def test_unknown_types_and_fields_survive_a_migration_byte_for_byte(tmp_path):
    """A v2 file migrated to v3: only the lines the migration changes are rewritten."""
    data = _newer_session().replace(b'"version":3', b'"version":2', 1)
    hook = _line(
        {
            "type": "message",
            "id": "hk000001",
            "parentId": "aa000008",
            "timestamp": "2026-05-12T01:03:00.000Z",
            "message": {"role": "hookMessage", "customType": "x", "content": "h", "display": True, "timestamp": 5},
        }
    )
    header = b'{"type":"session","version":2,"id":"019e19b4-eb48-746a-aa6b-8dfcfa37954b","branchedFrom":"/x/p.jsonl","x":[1.50,"\\u00e9"] }\n'
    data = header + data.split(b"\n", 1)[1] + hook
    p = tmp_path / "v2.jsonl"
    p.write_bytes(data)
    s = Session.open(p, index_cache=False)
    assert s.migrate()
    after = p.read_bytes()
    lines, old = after.splitlines(keepends=True), data.splitlines(keepends=True)
    assert lines[0] == header.replace(b'"version":2', b'"version":3')
    assert lines[1:-1] == old[1:-1]  # every entry line but the migrated one, byte for byte
    assert b'"role":"custom"' in lines[-1]
    _kept(data, after, FUTURE)


def test_unknown_types_and_fields_survive_scrub_fork_and_clone(newer, tmp_path):
    data = newer.read_bytes()
    extra = data.splitlines(keepends=True)[-1]
    s = Session.open(newer, index_cache=False)
    s.scrub(in_place=True)
    assert newer.read_bytes() == data  # nothing to scrub: the same bytes
    out = tmp_path / "scrubbed.jsonl"
    s.scrub(out)
    _kept(data, out.read_bytes(), FUTURE, extra, data.splitlines(keepends=True)[0])
    forked = Session.fork_from(newer, "/tmp/q", session_dir=tmp_path / "forks")
    _kept(data, Path(forked.path).read_bytes(), FUTURE, extra)
    s.close()
    s = Session.open(newer, index_cache=False)
    clone = s.create_branched_session("aa000006")  # the path through the unknown entry
    _kept(data, Path(clone.path).read_bytes(), FUTURE)


# ---------------------------------------------------------------- leaf entries


def test_a_harness_leaf_entry_is_read_as_pi_16_reads_it_and_reported(tmp_path):
    """``{"type":"leaf","targetId":...}`` (appended by a harness to move the leaf): Pi 1.6 reads
    it as an ordinary entry without an id, so it is the leaf and the active branch is empty (the
    golden ``real/whamp-branch-summary-leaf``). We read it the same way and ``validate`` reports
    it as ``leaf_entry`` until its rule is pinned."""
    p = tmp_path / "s.jsonl"
    head = _newer_session().splitlines(keepends=True)[:3]
    p.write_bytes(b"".join(head) + b'{"type":"leaf","targetId":"aa000001"}\n')
    s = Session.open(p, index_cache=False)
    assert not s.problems  # the line is read (as Pi reads it), not skipped
    assert s.leaf_id is None and s.get_branch() == [] and s.build_context().messages == []
    kinds = [(x["kind"], x["line"]) for x in s.validate()]
    assert kinds == [("leaf_entry", 4)]
    corpus = Path(__file__).resolve().parent.parent / "corpus" / "real" / "whamp-branch-summary-leaf.jsonl"
    kinds = [x["kind"] for x in Session.open(corpus, index_cache=False).validate()]
    assert kinds.count("leaf_entry") == 1 and "missing_id" not in kinds


@pytest.mark.parametrize("target", ["claude-code", "codex"])
def test_unknown_types_and_fields_survive_a_convert_round_trip(tmp_path, target):
    """Pi -> Claude Code / Codex -> Pi: an entry of a type Pi 1.6 does not know (a later
    version's, a harness ``leaf``) comes back with its own type and fields, not as a ``custom``
    entry without a ``customType``; extra fields on known entries come back too."""
    from sessiontree import convert

    t = "2026-05-12T01:02:{:02d}.000Z"
    lines = [
        _line(HEADER),
        _line({"type": "session_info", "id": "aa000001", "parentId": None, "timestamp": t.format(27), "name": "n"}),
        _line(
            {
                "type": "message",
                "id": "aa000002",
                "parentId": "aa000001",
                "timestamp": t.format(28),
                "message": {"role": "user", "content": "hi", "timestamp": 1},
                "extraField": {"keep": "me"},
            }
        ),
        FUTURE.replace(b'"parentId":"aa000004"', b'"parentId":"aa000002"'),
        b'{"type":"leaf","id":"aa000006","parentId":"aa000005","timestamp":"2026-05-12T01:02:32.000Z","targetId":"aa000002"}\n',
    ]
    src = tmp_path / "src.jsonl"
    src.write_bytes(b"".join(lines))
    there, back = tmp_path / f"there.{target}.jsonl", tmp_path / "back.jsonl"
    convert.from_pi(src, there, to=target)
    convert.to_pi(there, back)
    got = {e["id"]: e for e in map(orjson.loads, back.read_bytes().splitlines()[1:])}
    for line in lines[1:]:
        want = orjson.loads(line)
        e = got[want["id"]]
        assert e["type"] == want["type"], (want["type"], e)
        assert {k: v for k, v in e.items() if k != "source"} == want
