"""``Session.validate()`` is the library's check; ``sessiontree validate`` prints exactly it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontree import Session, SessionFormatError
from sessiontree.cli import main

CORPUS = Path(__file__).parent.parent / "corpus"
FILES = sorted(CORPUS.rglob("*.jsonl"))


def _cli_json(capsys, path: Path) -> tuple[int, dict]:
    rc = main(["validate", "--json", str(path)])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_cli_validate_prints_what_session_validate_returns(capsys, path):
    try:
        s = Session.open(path)
    except SessionFormatError:
        pytest.skip("not a Pi session (validate exits 2)")
    want = s.validate()
    rc, doc = _cli_json(capsys, path)
    assert doc["problems"] == want
    assert rc == (1 if any(p["severity"] == "error" for p in want) else 0)
    # every line problem of Session.problems is among them, unchanged
    line_problems = [(p.line, p.offset, p.kind, p.message) for p in s.problems]
    assert [
        x for x in line_problems if x not in {(p["line"], p["offset"], p["kind"], p["message"]) for p in want}
    ] == []


def test_validate_reports_content_that_would_make_compaction_fail_naming_the_entry(tmp_path, capsys):
    s = Session.in_memory("/p")
    s.append_message({"role": "user", "content": "hi", "timestamp": 0})
    bad = s.append_message({"role": "assistant", "content": [{"type": "toolCall", "name": "read"}], "timestamp": 0})
    line = s.get_entry(bad).line
    (problem,) = s.validate()
    assert problem["kind"] == "content_error" and problem["line"] == line and problem["severity"] == "error"
    assert (
        repr(bad) in problem["message"]
        and "Cannot read properties of undefined (reading 'length')" in problem["message"]
    )
    assert s.validate(content=False) == []


def test_validate_content_errors_on_real_files_say_what_fails():
    s = Session.open(CORPUS / "real" / "whamp-compaction-v3.jsonl")
    errs = [p for p in s.validate() if p["kind"] == "content_error"]
    assert errs and all("msg.content.some is not a function" in p["message"] for p in errs)
    assert all("summarize" in p["message"] for p in errs)


def test_validate_notes_an_entry_too_deep_for_python_without_failing(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    p = tmp_path / "deep.jsonl"
    p.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":' + deep + ',"timestamp":1}}\n'
    )
    (problem,) = Session.open(p).validate()
    assert (problem["kind"], problem["severity"], problem["line"]) == ("too_deep", "note", 2)
    assert main(["validate", str(p)]) == 0


def _one_message_file(tmp_path: Path, message: dict) -> Path:
    p = tmp_path / "one.jsonl"
    p.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        + json.dumps(
            {
                "type": "message",
                "id": "a",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": message,
            }
        )
        + "\n"
    )
    return p


@pytest.mark.parametrize("length", ["x", None, [1], {"a": 1}])
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_validate_reads_a_text_whose_length_is_not_a_number_without_a_traceback(tmp_path, role, length):
    # JavaScript adds `text.length` whatever it is (`0 + "x"` is "0x"): Pi's estimateTokens does
    # not throw, so validate reports nothing; the Python check raised TypeError on `+=`.
    p = _one_message_file(tmp_path, {"role": role, "content": [{"type": "text", "text": {"length": length}}]})
    assert Session.open(p).validate() == []
    assert main(["validate", str(p)]) == 0
