"""``sessiontree scrub``/``scrub-all``/``export-html --scrub`` never write over one of their own
files: the session, ``-o`` and ``--report`` are three files (by path, symlink or hard link) or
nothing is written; the report is never more readable than the session; ``--json`` and the
progress bar."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re

import orjson
import pytest

from sessiontree.cli import main

from tests.support.secrets import GITHUB_TOKEN as TOK, SESSION_HEAD as HEAD, user_entry as _line


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(HEAD + _line("a", None, f"my token {TOK}") + b"\n" + _line("b", "a", "hi") + b"\n")
    p.chmod(0o600)
    return p


def _names(d):
    return sorted(p.name for p in d.iterdir())


# ---- three different files ----


def test_check_with_the_report_on_the_session_is_refused(src, tmp_path, capsys):
    before = src.read_bytes()
    assert main(["scrub", str(src), "--check", "--report", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "report" in err and TOK not in err
    assert src.read_bytes() == before and _names(tmp_path) == ["s.jsonl"]


def test_output_and_report_on_the_same_path_are_refused(src, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert main(["scrub", str(src), "-o", str(out), "--report", str(out)]) == 2
    assert not out.exists() and _names(tmp_path) == ["s.jsonl"]
    assert capsys.readouterr().err.count("\n") == 1


def test_in_place_with_the_report_on_the_session_is_refused(src, tmp_path):
    before = src.read_bytes()
    assert main(["scrub", str(src), "--in-place", "--report", str(src)]) == 2
    assert src.read_bytes() == before and _names(tmp_path) == ["s.jsonl"]


def test_clashes_through_symlinks_and_hard_links_are_refused(src, tmp_path):
    before = src.read_bytes()
    hard = tmp_path / "hard.jsonl"
    os.link(src, hard)
    sub = tmp_path / "sub"
    sub.mkdir()
    linkdir = tmp_path / "linkdir"
    linkdir.symlink_to(sub, target_is_directory=True)
    out = sub / "o.jsonl"
    cases = [
        ["--check", "--report", str(hard)],  # the session under another name
        ["--check", "--report", str(tmp_path / "linkdir" / ".." / "s.jsonl")],
        ["-o", str(out), "--report", str(linkdir / "o.jsonl")],  # the output through a symlinked folder
        ["-o", str(linkdir / "o.jsonl"), "--report", str(out)],
    ]
    for extra in cases:
        assert main(["scrub", str(src), *extra]) == 2, extra
        assert src.read_bytes() == before and hard.read_bytes() == before
        assert _names(sub) == [], extra
    out.write_bytes(b"old output")
    os.link(out, tmp_path / "out-hard.json")
    assert main(["scrub", str(src), "-o", str(out), "--report", str(tmp_path / "out-hard.json")]) == 2
    assert out.read_bytes() == b"old output"


def test_check_writes_nothing_but_its_report(src, tmp_path):
    report = tmp_path / "r.json"
    assert main(["scrub", str(src), "--check", "--report", str(report)]) == 1
    assert _names(tmp_path) == ["r.json", "s.jsonl"]
    assert json.loads(report.read_text())["written"] is False


# ---- modes ----


def test_the_report_is_never_more_readable_than_the_session(src, tmp_path):
    old = os.umask(0o022)
    try:
        for extra in (["--check"], ["-o", str(tmp_path / "o.jsonl")], ["--in-place"]):
            report = tmp_path / f"r{len(extra)}{extra[0]}.json"
            assert main(["scrub", str(src), *extra, "--report", str(report)]) in (0, 1)
            assert report.stat().st_mode & 0o077 == 0, extra  # the session is 0600
    finally:
        os.umask(old)


# ---- export-html --scrub ----


def test_export_html_scrub_refuses_to_write_over_the_session(src, tmp_path, capsys):
    before = src.read_bytes()
    assert main(["export-html", str(src), "--scrub", "-o", str(src)]) == 2
    assert src.read_bytes() == before
    hard = tmp_path / "hard.html"
    os.link(src, hard)
    assert main(["export-html", str(src), "--scrub", "-o", str(hard)]) == 2
    assert src.read_bytes() == before
    assert TOK not in capsys.readouterr().err


def _page_jsonl(html: bytes) -> bytes:
    blocks = re.findall(rb'<script type="text/plain"[^>]*st-seg[^>]*data-o="(\d+)"[^>]*>([^<]*)</script>', html)
    if not blocks:
        blocks = [
            (re.search(rb'data-o="(\d+)"', m.group(1)).group(1), m.group(2))
            for m in re.finditer(rb'<script type="text/plain"([^>]*st-seg[^>]*)>([^<]*)</script>', html)
        ]
    blocks.sort(key=lambda b: int(b[0]))
    return b"".join(gzip.decompress(base64.b64decode(body)) for _, body in blocks)


def test_export_html_scrub_header_scrubs_the_cwd(tmp_path):
    p = tmp_path / "h.jsonl"
    head = orjson.dumps(
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": f"/w/{TOK}"}
    )
    p.write_bytes(head + b"\n" + _line("a", None, "hi") + b"\n")
    out = tmp_path / "v.html"
    assert main(["export-html", str(p), "--scrub", "-o", str(out)]) == 0
    assert TOK.encode() in _page_jsonl(out.read_bytes())  # the header is kept without --header
    assert main(["export-html", str(p), "--scrub", "--header", "-o", str(out)]) == 0
    page = out.read_bytes()
    jsonl = _page_jsonl(page)
    assert b"[REDACTED:github_token:" in jsonl and TOK.encode() not in jsonl and TOK.encode() not in page
    assert main(["export-html", str(p), "--header", "-o", str(out)]) == 2  # --header needs --scrub


def test_in_place_on_a_hard_linked_file_is_refused_with_one_line(src, tmp_path, capsys):
    os.link(src, tmp_path / "other.jsonl")
    before = src.read_bytes()
    assert main(["scrub", str(src), "--in-place"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hard link" in err and src.read_bytes() == before


# ---- --json (like every other command) ----


def test_scrub_json_prints_one_document(src, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert main(["scrub", str(src), "-o", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["found"] == 1 and doc["kinds"] == {"github_token": 1} and doc["written"] is True
    assert doc["output"] == str(out) and doc["replayPolicy"] == "keep" and "findings" not in doc
    assert TOK not in cap.out + cap.err
    assert main(["scrub", str(src), "--check", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["found"] == 1 and doc["written"] is False
    # --report PATH with --json: the report in the file, the summary on stdout
    report = tmp_path / "r.json"
    assert main(["scrub", str(src), "--check", "--json", "--report", str(report)]) == 1
    assert json.loads(capsys.readouterr().out)["found"] == 1 and len(json.loads(report.read_text())["findings"]) == 1


def test_scrub_json_failures_are_json_documents(src, tmp_path, capsys):
    for argv in (
        ["scrub", str(tmp_path / "missing.jsonl"), "--check", "--json"],
        ["scrub", str(src), "--check", "--json", "--report", str(src)],
        ["scrub", str(src), "--check", "--json", "--report", "-"],
        ["scrub", str(src), "--json"],  # usage error
    ):
        assert main(argv) == 2, argv
        cap = capsys.readouterr()
        doc = json.loads(cap.out)
        assert doc["error"] is True and doc["exit_code"] == 2, argv


def test_scrub_all_json_prints_one_document(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    for n in range(3):
        (store / f"{n}.jsonl").write_bytes(HEAD + _line("a", None, f"t {TOK}" if n else "clean") + b"\n")
    (store / "bad.jsonl").mkdir()
    assert main(["scrub-all", str(store), "--out", str(tmp_path / "out"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["sessions"], doc["written"], doc["failed"], doc["found"]) == (4, 3, 1, 2)
    assert doc["kinds"] == {"github_token": 2} and doc["replayPolicy"] == "keep"
    assert [r["found"] for r in doc["rows"] if r["error"] is None] == [0, 1, 1]


# ---- progress ----


def test_scrub_progress_bar_on_stderr(src, tmp_path, capsys):
    pytest.importorskip("tqdm")
    assert main(["scrub", str(src), "-o", str(tmp_path / "o.jsonl"), "--progress"]) == 0
    cap = capsys.readouterr()
    assert "100%" in cap.err and "secret(s) replaced" in cap.out
    # not a terminal (as under pytest): no bar unless asked
    assert main(["scrub", str(src), "-o", str(tmp_path / "o2.jsonl")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["scrub", str(src), "--check", "--progress", "--no-progress"]) == 1
    assert capsys.readouterr().err == ""


def test_scrub_all_progress_bar_on_stderr(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tqdm")
    store = tmp_path / "store"
    store.mkdir()
    for n in range(3):
        (store / f"{n}.jsonl").write_bytes(HEAD + _line("a", None, "clean") + b"\n")
    assert main(["scrub-all", str(store), "--out", str(tmp_path / "out"), "--progress"]) == 0
    cap = capsys.readouterr()
    assert "3/3" in cap.err and len(cap.out.splitlines()) == 3
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: a bar by default
    assert main(["scrub-all", str(store), "--out", str(tmp_path / "out")]) == 0
    assert "3/3" in capsys.readouterr().err


def test_a_report_path_that_is_never_written_is_refused_before_the_output(src, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "r.json").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.json")
    out = tmp_path / "o.jsonl"
    for report in ("r.json", "fifo.json"):
        assert main(["scrub", str(src), "-o", str(out), "--report", str(tmp_path / report)]) == 2
        assert not out.exists() and victim.read_bytes() == b"keep"


def test_a_non_utf8_name_gets_a_report_and_a_json_document(tmp_path, capsys):
    name = os.path.join(os.fsencode(tmp_path), b"caf\xe9.jsonl")
    with open(name, "wb") as fh:
        fh.write(HEAD + _line("a", None, f"k {TOK}") + b"\n")
    src = os.fsdecode(name)
    report = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"r\xe9.json"))
    assert main(["scrub", src, "--check", "--json", "--report", report]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["found"] == 1 and doc["source"].endswith("caf\\xe9.jsonl")
    assert json.loads(open(report, "rb").read())["findings"][0]["kind"] == "github_token"
