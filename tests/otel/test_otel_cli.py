"""``sessiontree otel --json`` (one JSON document, as every command's --json) and the errors of
the command: each printed once, as a JSON error document with --json."""

from __future__ import annotations

import json

import pytest

import sessiontree.otel
from sessiontree.cli import main
from sessiontree.otel import trace_id_of

from .otlp_check import read_spans
from .test_otel import _small


def test_json_prints_one_document(tmp_path, capsys):
    src = _small(tmp_path)
    (tmp_path / "bad.jsonl").write_text("nope\n")
    out = tmp_path / "t.jsonl"
    assert main(["otel", str(src), "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # one document: json.loads refuses a second
    assert doc["output"] == str(out) and doc["content"] == "none"
    assert (doc["sessions"], doc["written"], doc["failed"]) == (1, 1, 0)
    assert doc["spans"] == len(read_spans(out)) == 5 and doc["requests"] == 1 and doc["problems"] == 0
    assert doc["rows"][0]["traceId"] == trace_id_of("s-1")
    # a source that is not a session: its row in the document, exit 1
    assert main(["otel", str(src), str(tmp_path / "bad.jsonl"), "-o", str(out), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["sessions"], doc["written"], doc["failed"]) == (2, 1, 1)
    bad = next(r for r in doc["rows"] if r["path"].endswith("bad.jsonl"))
    assert bad["error"] and bad["spans"] == 0


@pytest.mark.parametrize("as_json", [False, True])
def test_errors_are_printed_once(tmp_path, capsys, as_json):
    src = _small(tmp_path)
    flag = ["--json"] if as_json else []
    cases = [
        (["otel", str(src), "-o", str(src)], "is one of the sessions read"),  # never over a session read
        (["otel", str(tmp_path / "none*.jsonl"), "-o", str(tmp_path / "d.jsonl")], "no session found"),
        (["otel", str(src), "-o", str(tmp_path / "no" / "dir" / "t.jsonl")], "No such file or directory"),
    ]
    for argv, what in cases:
        assert main(argv + flag) == 2
        cap = capsys.readouterr()
        assert cap.err.count("sessiontree: error:") == 1 and what in cap.err
        if as_json:
            doc = json.loads(cap.out)
            assert doc["error"] is True and doc["exit_code"] == 2 and what in doc["message"]
        else:
            assert cap.out == ""


def test_an_os_error_names_its_file_once(tmp_path, capsys, monkeypatch):
    src = _small(tmp_path)

    def fail(*_a, **_k):
        exc = OSError("the store went away")
        exc.filename = "/mnt/store/x.jsonl"  # a file name but no errno/strerror (str(exc) names it too)
        raise exc

    monkeypatch.setattr(sessiontree.otel, "export", fail)
    assert main(["otel", str(src), "-o", str(tmp_path / "t.jsonl"), "--json"]) == 2
    cap = capsys.readouterr()
    assert cap.err.count("/mnt/store/x.jsonl") == 1 and "the store went away" in cap.err
    assert "None" not in cap.err
    assert json.loads(cap.out)["message"] == "/mnt/store/x.jsonl: the store went away"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_non_utf8_file_name_is_a_row_not_a_traceback(tmp_path, capsys, as_json):
    """A session whose file name is not UTF-8 (decoded with surrogateescape): its row's path is
    written as JSON.stringify writes a lone surrogate, in the text lines and in --json."""
    import os

    src = _small(tmp_path)
    d = tmp_path / "store"
    d.mkdir()
    odd = os.path.join(os.fsencode(d), b"name\xff.jsonl")
    with open(odd, "wb") as fh:
        fh.write(src.read_bytes())
    out = tmp_path / "t.jsonl"
    assert main(["otel", str(d), "-o", str(out), *(["--json"] if as_json else [])]) == 0
    text = capsys.readouterr().out
    rows = json.loads(text)["rows"] if as_json else [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 1 and rows[0]["error"] is None
    assert rows[0]["path"].endswith("name\udcff.jsonl")
