"""Claude Code and Codex files read directly by the read commands, ``stats`` and ``scrub``:
converted to Pi in memory in the core (no temporary file, nothing written), each saying so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.convert import UnrecognisedFormatError, open_as_pi, to_pi, to_pi_bytes

from ._helpers import CC, CODEX, cc_mains, codex_files

CC_FILE = CC / "inspect_swe__tool_call_conversation.jsonl"
CODEX_FILE = CODEX / "agentsview__function_calls.jsonl"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


@pytest.mark.parametrize("src", [*cc_mains(), *codex_files()[:6]], ids=lambda p: p.stem[:40])
def test_the_bytes_conversion_writes_what_the_file_conversion_writes(src, tmp_path):
    out = tmp_path / src.name  # the same name: the header's sidechain names agree
    r_file = to_pi(src, out)
    pi, r_mem = to_pi_bytes(src.read_bytes(), name=src.name)
    assert r_mem.source_format == r_file.source_format != "pi"
    if not list(CC.glob(src.stem + "__subagents__*.jsonl")):
        assert pi == out.read_bytes()
    assert (r_mem.lines, r_mem.written, r_mem.messages) <= (r_file.lines, r_file.written, r_file.messages)
    assert [Path(f).name for f in r_mem.files] == [Path(f).name for f in r_file.files if ".subagent-" not in f]


def test_open_as_pi_gives_the_converted_session_and_refuses_what_is_no_format(tmp_path):
    s, r = open_as_pi(CODEX_FILE)
    with s:
        assert r.source_format == "codex" and s.path is None and s.source_name == str(CODEX_FILE)
        out = tmp_path / "x.jsonl"
        to_pi(CODEX_FILE, out)
        with Session.open(out) as disk:
            assert [e.id for e in s.entries()] == [e.id for e in disk.entries()]
            assert s.leaf_id == disk.leaf_id
    (tmp_path / "prose.jsonl").write_text("hello\n")
    with pytest.raises(UnrecognisedFormatError):
        open_as_pi(tmp_path / "prose.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(UnrecognisedFormatError):
        open_as_pi(tmp_path / "fifo.jsonl")  # never blocks waiting for a writer
    assert list(tmp_path.iterdir()) and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


@pytest.mark.parametrize("src", [CC_FILE, CODEX_FILE], ids=["claude-code", "codex"])
def test_read_commands_take_the_file_and_say_it_was_converted(src, tmp_path):
    fmt = "claude-code" if src == CC_FILE else "codex"
    copy = tmp_path / src.name
    shutil.copyfile(src, copy)
    before = copy.read_bytes()
    out = tmp_path / "pi.jsonl"
    to_pi(src, out)
    for cmd in ("info", "tree", "context", "validate", "entries"):
        r = _cli(cmd, str(copy))
        assert r.returncode == 0, (cmd, r.stderr)
        assert f"is a {fmt} file, read as a Pi session converted in memory" in r.stderr
    r = _cli("context", str(copy), "--json")
    assert r.returncode == 0
    direct = json.loads(r.stdout)
    converted = json.loads(_cli("context", str(out), "--json").stdout)
    assert direct["messages"] == converted["messages"]
    r = _cli("info", str(copy), "--json")
    assert json.loads(r.stdout)["path"] == str(copy)
    html = tmp_path / "view.html"
    r = _cli("export-html", str(copy), "-o", str(html))
    assert r.returncode == 0 and html.stat().st_size > 1000 and "converted in memory" in r.stderr
    # a writing command refuses: the file is never rewritten as a Pi session
    r = _cli("navigate", str(copy), "--to", "x")
    assert r.returncode == 2
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([copy.name, "pi.jsonl", "view.html"])


def test_stats_reads_claude_code_and_codex_files_and_names_the_format(tmp_path):
    pytest.importorskip("pyarrow")
    from sessiontree.fleet import session_stats

    store = tmp_path / "store"
    store.mkdir()
    shutil.copyfile(CC_FILE, store / "cc.jsonl")
    shutil.copyfile(CODEX_FILE, store / "codex.jsonl")
    to_pi(CODEX_FILE, store / "pi.jsonl")
    table = session_stats(store)
    rows = {Path(r["path"]).name: r for r in table.to_pylist()}
    assert {k: r["source_format"] for k, r in rows.items()} == {
        "cc.jsonl": "claude-code",
        "codex.jsonl": "codex",
        "pi.jsonl": "pi",
    }
    assert all(r["error_kind"] is None for r in rows.values())
    # the converted-in-memory row counts what the Pi file converted on disk counts
    for key in ("entries", "messages", "messages_user", "messages_assistant", "tool_calls", "leaf_id", "output_tokens"):
        assert rows["codex.jsonl"][key] == rows["pi.jsonl"][key], key
    assert rows["cc.jsonl"]["messages"] > 0
    r = _cli("stats", str(store), "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["formats"] == {"claude-code": 1, "codex": 1, "pi": 1}
    r = _cli("stats", str(store))
    assert "claude-code 1, codex 1, pi 1" in r.stdout
    assert sorted(p.name for p in store.iterdir()) == ["cc.jsonl", "codex.jsonl", "pi.jsonl"]


def test_scrub_takes_a_claude_code_file_and_keeps_its_format(tmp_path):
    lines = CC_FILE.read_text().splitlines()
    obj = json.loads(lines[0])
    obj.setdefault("message", {})["content"] = f"my token is {SECRET}"
    src = tmp_path / "t.jsonl"
    src.write_text("\n".join([json.dumps(obj), *lines[1:]]) + "\n")
    out = tmp_path / "clean.jsonl"
    r = _cli("scrub", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "a claude-code file, scrubbed in its own format" in r.stdout
    text = out.read_text()
    assert SECRET not in text and "[REDACTED:" in text
    first = json.loads(text.splitlines()[0])
    assert first["type"] == obj["type"] and first["uuid"] == obj["uuid"]
    # still converts, and the Pi session carries no secret
    to_pi(out, tmp_path / "pi.jsonl")
    assert SECRET not in (tmp_path / "pi.jsonl").read_text()
    r = _cli("scrub", str(src), "--check", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["sourceFormat"] == "claude-code"
    store = tmp_path / "store"
    store.mkdir()
    shutil.copyfile(src, store / "a.jsonl")
    shutil.copyfile(CODEX_FILE, store / "b.jsonl")
    r = _cli("scrub-all", str(store), "--out", str(tmp_path / "scrubbed"), "--json")
    doc = json.loads(r.stdout)
    assert [x["source_format"] for x in doc["rows"]] == ["claude-code", "codex"] and doc["found"] == 1


@pytest.mark.parametrize("src", [CC_FILE, CODEX / "agent-sessions__small.jsonl"], ids=["claude-code", "codex"])
def test_search_finds_the_text_of_a_claude_code_or_codex_file(src, tmp_path):
    from sessiontree import search

    store = tmp_path / "store"
    store.mkdir()
    shutil.copyfile(src, store / src.name)
    pi = tmp_path / "pi.jsonl"
    to_pi(src, pi)
    import re

    from ._helpers import pi_entries, pi_texts

    word = sorted(w for t in pi_texts(pi_entries(pi)) for w in re.findall(r"\b[a-z]{5,}\b", t))[0]
    assert search(word, pi, index_cache=False).total > 0  # the converted file has it
    assert search(word, store, index_cache=False).total > 0
