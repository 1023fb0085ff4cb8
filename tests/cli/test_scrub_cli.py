"""``sessiontree scrub``, ``scrub-all``, ``export-html --scrub`` and the fleet's
``entries_table(scrub=True)`` (issue 20)."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from sessiontree import Session
from sessiontree.cli import main
from sessiontree.fleet import scrub_sessions

from tests.support.secrets import GITHUB_TOKEN as TOK, SESSION_HEAD as HEAD, user_entry as _line


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "s.jsonl"
    label = (
        b'{"type":"label","id":"l1","parentId":"b","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a","label":"%s"}'
        % (TOK.encode())
    )
    p.write_bytes(HEAD + _line("a", None, f"my token {TOK}") + b"\n" + _line("b", "a", "hi") + b"\n" + label + b"\n")
    p.chmod(0o600)
    return p


def test_scrub_to_output_with_a_report(src, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    report = tmp_path / "r.json"
    assert main(["scrub", str(src), "-o", str(out), "--report", str(report)]) == 0
    text = out.read_bytes()
    assert TOK.encode() not in text and text.count(b"[REDACTED:github_token:") == 2
    assert (out.stat().st_mode & 0o777) == 0o600
    doc = json.loads(report.read_text())
    assert TOK not in report.read_text()
    assert doc["replayPolicy"] == "keep" and doc["found"] == 2 and doc["kinds"] == {"github_token": 2}
    assert [(f["entryId"], f["pointer"], f["kind"]) for f in doc["findings"]] == [
        ("a", "/message/content", "github_token"),
        ("l1", "/label", "github_token"),
    ]
    assert "2 secret(s) replaced" in capsys.readouterr().out
    a, b = Session.open(src), Session.open(out)
    assert a.entry_table().id == b.entry_table().id and a.leaf_id == b.leaf_id
    assert list(b.labels) == ["a"]


def test_check_exit_codes_and_report_to_stdout(src, tmp_path, capsys):
    before = src.read_bytes()
    assert main(["scrub", str(src), "--check", "--report", "-"]) == 1
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["found"] == 2 and doc["written"] is False and TOK not in cap.out + cap.err
    assert src.read_bytes() == before
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(HEAD + _line("a", None, "nothing here") + b"\n")
    assert main(["scrub", str(clean), "--check"]) == 0


def test_in_place_keeps_mode_and_refuses_a_locked_file(src, capsys):
    fd = os.open(src, os.O_WRONLY | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert main(["scrub", str(src), "--in-place"]) == 2
        assert TOK.encode() in src.read_bytes()
        assert "lock" in capsys.readouterr().err
    finally:
        os.close(fd)
    assert main(["scrub", str(src), "--in-place"]) == 0
    assert TOK.encode() not in src.read_bytes() and (src.stat().st_mode & 0o777) == 0o600
    assert Session.open(src).leaf_id == "l1"


def test_modes_are_exclusive_and_required(src):
    assert main(["scrub", str(src)]) == 2  # argparse: one of -o, --in-place, --check is required
    assert main(["scrub", str(src), "--check", "--in-place"]) == 2


def test_replay_drop_is_stated(src, tmp_path, capsys):
    assert main(["scrub", str(src), "-o", str(tmp_path / "o.jsonl"), "--replay", "drop"]) == 0
    assert "replay fields: 0 (drop)" in capsys.readouterr().out


def test_export_html_scrub(src, tmp_path):
    out = tmp_path / "v.html"
    assert main(["export-html", str(src), "-o", str(out), "--scrub"]) == 0
    html = out.read_text()
    assert TOK not in html and "[REDACTED:github_token:" in html
    plain = tmp_path / "p.html"
    assert main(["export-html", str(src), "-o", str(plain)]) == 0
    assert TOK in plain.read_text()


def test_scrub_all(tmp_path, capsys):
    store = tmp_path / "store" / "--w--"
    store.mkdir(parents=True)
    for n in range(3):
        (store / f"{n}.jsonl").write_bytes(HEAD + _line("a", None, f"t {TOK}" if n else "clean") + b"\n")
    (store / "bad.jsonl").mkdir()
    out = tmp_path / "out"
    assert main(["scrub-all", str(tmp_path / "store"), "--out", str(out)]) == 1  # bad.jsonl is a directory
    cap = capsys.readouterr()
    rows = [json.loads(x) for x in cap.out.splitlines()]
    assert [r["found"] for r in rows if r["error"] is None] == [0, 1, 1]
    # a summary on stderr, as convert-all prints one, then each failed session
    err = cap.err.splitlines()
    assert err[0] == "4 sessions: 3 scrubbed, 1 failed; 2 secret(s) replaced (github_token 2)", cap.err
    assert len(err) == 2 and err[1].startswith("  ") and "bad.jsonl" in err[1]
    assert main(["scrub-all", str(tmp_path / "store"), "--out", str(out), "--json"]) == 1
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert (doc["sessions"], doc["written"], doc["failed"], doc["found"]) == (4, 3, 1, 2)
    assert cap.err == ""  # --json: the totals are in the document
    assert [r for r in rows if r["error"]][0]["path"].endswith("bad.jsonl")
    for n in range(3):
        data = (out / "--w--" / f"{n}.jsonl").read_bytes()
        assert TOK.encode() not in data
    rows = scrub_sessions(str(store / "1.jsonl"), out / "single")
    assert rows[0]["found"] == 1 and (out / "single" / "1.jsonl").exists()


def test_entries_table_scrub(src):
    pytest.importorskip("pyarrow")
    from sessiontree.fleet import entries_table

    t = entries_table(str(src), scrub=True)
    assert "secrets" in t.column_names
    assert t.column("secrets").to_pylist() == [1, 0, 1]
    labels = t.column("label").to_pylist()
    assert labels[0].startswith("[REDACTED:github_token:") and labels[1:] == [None, None]
    assert entries_table(str(src)).column("label").to_pylist()[0] == TOK
    plain = entries_table(str(src))
    assert "secrets" not in plain.column_names
    assert plain.column("entry_id").to_pylist() == t.column("entry_id").to_pylist()


def test_scrub_all_rows_say_why_a_session_failed_as_the_other_fleet_rows_do(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "ok.jsonl").write_bytes(HEAD + _line("a", None, f"t {TOK}") + b"\n")
    (store / "dir.jsonl").mkdir()
    os.mkfifo(store / "fifo.jsonl")
    gone = tmp_path / "gone.jsonl"
    out = tmp_path / "out"
    rows = scrub_sessions([str(store / "ok.jsonl"), str(store / "dir.jsonl"), str(store / "fifo.jsonl")], out)
    kinds = {os.path.basename(r["path"]): r["error_kind"] for r in rows}
    assert kinds == {"ok.jsonl": None, "dir.jsonl": "not_a_file", "fifo.jsonl": "not_a_file"}
    rows = scrub_sessions([str(store / "ok.jsonl"), str(gone)], out / "2")
    assert {os.path.basename(r["path"]): r["error_kind"] for r in rows} == {"ok.jsonl": None, "gone.jsonl": "not_found"}
    # the CLI's rows and its --json document carry it too
    assert main(["scrub-all", str(store), "--out", str(out / "3")]) == 1
    text_rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted((os.path.basename(r["path"]), r["error_kind"]) for r in text_rows) == [
        ("dir.jsonl", "not_a_file"),
        ("fifo.jsonl", "not_a_file"),
        ("ok.jsonl", None),
    ]
    assert main(["scrub-all", str(store), "--out", str(out / "4"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert sorted(r["error_kind"] or "" for r in doc["rows"]) == ["", "not_a_file", "not_a_file"]
