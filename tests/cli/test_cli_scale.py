"""The CLI at scale: a readable ``tree`` at any depth (streamed, narrowed), ``branch``
``--limit``/``--since``, progress bars on a terminal, ``--summarizer`` in every command,
the unknown-id error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree.cli import main
from sessiontree.errors import EntryNotFoundError
from tests.support.peak_memory import peak_kb

HEAD = {"type": "session", "version": 3, "id": "scale", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"}


def _ts(k: int) -> str:
    return f"2025-01-01T{k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}.000Z"


def _msg(eid: str, parent: str | None, k: int, role: str = "user", text: str | None = None) -> dict:
    message: dict = {"role": role, "content": text or f"text of {eid}", "timestamp": 0}
    if role == "assistant":
        message = {"role": "assistant", "content": [{"type": "text", "text": text or f"answer {eid}"}], "timestamp": 0}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": _ts(k), "message": message}


def _write(path: Path, entries: list[dict]) -> Path:
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(HEAD) + b"\n")
        for e in entries:
            fh.write(orjson.dumps(e) + b"\n")
    return path


def forked(tmp_path: Path) -> Path:
    """r0 → a1 → a2, which forks: b1 → b2 [label "keep"] → b3 → l1 (the label entry), and
    c1 → c2 (a compaction) → c3 … c10 (the leaf, the last line)."""
    e = [_msg("r0", None, 0), _msg("a1", "r0", 1, "assistant"), _msg("a2", "a1", 2)]
    e += [_msg("b1", "a2", 3, "assistant"), _msg("b2", "b1", 4), _msg("b3", "b2", 5, "assistant")]
    e.append({"type": "label", "id": "l1", "parentId": "b3", "timestamp": _ts(6), "targetId": "b2", "label": "keep"})
    e.append(_msg("c1", "a2", 7, "assistant"))
    e.append(
        {
            "type": "compaction",
            "id": "c2",
            "parentId": "c1",
            "timestamp": _ts(8),
            "summary": "the story so far",
            "firstKeptEntryId": "c1",
            "tokensBefore": 100,
        }
    )
    prev = "c2"
    for k in range(3, 11):
        e.append(_msg(f"c{k}", prev, 6 + k, "user" if k % 2 else "assistant"))
        prev = f"c{k}"
    return _write(tmp_path / "forked.jsonl", e)


def chain(path: Path, n: int) -> Path:
    prev = None
    entries = []
    for k in range(n):
        entries.append(_msg(f"m{k}", prev, k, "user" if k % 2 == 0 else "assistant"))
        prev = f"m{k}"
    return _write(path, entries)


def tree_json(capsys, *argv: object) -> dict:
    assert main(["tree", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def ids(doc: dict) -> list[str]:
    return [n["id"] for n in doc["nodes"]]


# ==== tree: readable at any depth ====================================================


def test_tree_caps_deep_branching_with_a_depth_marker(tmp_path, capsys):
    # a comb: every node has a dead-end child and a continuing child, 300 forks deep
    entries, prev = [], None
    for i in range(300):
        entries += [_msg(f"x{i}", prev, 2 * i), _msg(f"c{i}", prev, 2 * i + 1)]
        prev = f"c{i}"
    path = _write(tmp_path / "comb.jsonl", entries)
    assert main(["tree", str(path), "--no-preview"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 600
    # the id never starts past the capped guides: "• " + "⋯NNN " + 8 guides + a connector
    assert max(re.search(r"[xc]\d+ user", line).start() for line in lines) <= 2 + 5 + 24 + 3
    # c_i sits below i forks: 8 guides drawn, i - 8 folded into the marker
    deepest = next(line for line in lines if " c299 user" in line)
    assert deepest.startswith("• ⋯291 ") and deepest.count("   ") >= 8
    assert next(line for line in lines if " c5 user" in line).startswith("• " + "   " * 5 + "└─ c5")


def test_tree_branches_only_keeps_roots_forks_leaves_labels_and_compactions(tmp_path, capsys):
    doc = tree_json(capsys, forked(tmp_path), "--branches-only")
    assert ids(doc) == ["r0", "a2", "b2", "l1", "c2", "c10"]
    assert main(["tree", str(forked(tmp_path)), "--branches-only", "--no-preview"]) == 0
    out = capsys.readouterr().out
    assert "├─ b2 user [keep]" in out and "└─ c2 compaction" in out and "← leaf" in out


def test_tree_depth_stops_below_n_forks_and_says_so(tmp_path, capsys):
    path = forked(tmp_path)
    assert ids(tree_json(capsys, path, "--depth", "0")) == ["r0", "a1", "a2"]
    assert main(["tree", str(path), "--depth", "0", "--no-preview"]) == 0
    assert "⋯ 2 branches below (deeper than --depth 0)" in capsys.readouterr().out
    assert len(ids(tree_json(capsys, path, "--depth", "1"))) == 17  # every entry


def test_tree_since_keeps_the_entries_appended_after_an_id(tmp_path, capsys):
    doc = tree_json(capsys, forked(tmp_path), "--since", "b3")
    assert ids(doc) == ["l1"] + [f"c{k}" for k in range(1, 11)]


def test_tree_around_shows_the_path_then_the_subtree(tmp_path, capsys):
    path = forked(tmp_path)
    doc = tree_json(capsys, path, "--around", "c9")
    # the root, the 5 entries above c9, c9 and its subtree
    assert ids(doc) == ["r0", "c4", "c5", "c6", "c7", "c8", "c9", "c10"]
    assert [n["depth"] for n in doc["nodes"]][-2:] == [11, 12]
    assert main(["tree", str(path), "--around", "c9", "--no-preview"]) == 0
    out = capsys.readouterr().out
    assert "⋮ 5 entries" in out
    assert ids(tree_json(capsys, path, "--around", "c2")) == ["r0", "a1", "a2", "c1", "c2"] + [
        f"c{k}" for k in range(3, 11)
    ]
    assert main(["tree", str(path), "--around", "c1", "--no-preview"]) == 0
    assert "• a2 user  (+1 other branch)" in capsys.readouterr().out.splitlines()
    assert main(["tree", str(path), "--around", "a2", "--no-preview", "--depth", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  └─ ⋯ 2 branches below (deeper than --depth 0)"
    # the subtree is the nearby part: AROUND_BELOW entries unless --limit says otherwise
    long = chain(tmp_path / "chain.jsonl", 100)
    assert ids(tree_json(capsys, long, "--around", "m50")) == ["m0"] + [f"m{k}" for k in range(45, 71)]
    assert len(ids(tree_json(capsys, long, "--around", "m50", "--limit", "40"))) == 40


def test_tree_limit_prints_n_lines_and_says_more_follow(tmp_path, capsys):
    path = forked(tmp_path)
    doc = tree_json(capsys, path, "--limit", "4")
    assert ids(doc) == ["r0", "a1", "a2", "b1"] and doc["truncated"] is True
    assert tree_json(capsys, path, "--limit", "100")["truncated"] is False
    assert main(["tree", str(path), "--limit", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[-1] == "-- more entries not shown (--limit 4) --"


def test_tree_narrowing_ids_must_exist(tmp_path, capsys):
    for flag in ("--around", "--since"):
        assert main(["tree", str(forked(tmp_path)), flag, "nosuch"]) == 2
        assert capsys.readouterr().err == "sessiontree: error: Entry not found: nosuch\n"


class _Counts:
    """Counts entry rows asked of the core and previews parsed, and what had been asked when
    the first output was written."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = self.previews = 0
        self.at_first_write: tuple[int, int] | None = None
        table, entry_at = Session.entry_table, Session.entry_at

        def counted_table(s: Session, indices=None):  # type: ignore[no-untyped-def]
            self.rows += len(s) if indices is None else len(indices)
            return table(s, indices)

        def counted_at(s: Session, i: int):  # type: ignore[no-untyped-def]
            self.previews += 1
            return entry_at(s, i)

        monkeypatch.setattr(Session, "entry_table", counted_table)
        monkeypatch.setattr(Session, "entry_at", counted_at)
        import sessiontree.cli.render as render
        import sessiontree.cli.tree as tree

        write = render._write_out

        def first_write(text: str, flush: bool = False) -> None:
            if self.at_first_write is None and text:
                self.at_first_write = (self.rows, self.previews)
            write(text, flush)

        monkeypatch.setattr(render, "_write_out", first_write)
        monkeypatch.setattr(tree, "_write_out", first_write)


@pytest.mark.slow
def test_tree_streams_and_reads_what_it_shows(tmp_path, capsys, monkeypatch):
    path = chain(tmp_path / "chain.jsonl", 3000)
    counts = _Counts(monkeypatch)
    assert main(["tree", str(path), "--limit", "5"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6
    assert counts.rows <= 16 and counts.previews == 5  # --limit 5 costs 5 lines, not a render
    counts.rows = counts.previews = 0
    counts.at_first_write = None
    assert main(["tree", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3000
    assert counts.previews == 3000
    assert counts.at_first_write is not None and counts.at_first_write[1] <= 8  # the first line at once
    counts.rows = counts.previews = 0
    counts.at_first_write = None
    assert main(["tree", str(path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["nodes"]) == 3000
    assert counts.at_first_write is not None and counts.at_first_write[1] <= 8


def test_tree_json_is_the_document_json_document_makes(tmp_path, capsys):
    from sessiontree.cli import json_document

    path = forked(tmp_path)
    assert main(["tree", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert out == json_document(json.loads(out)) + "\n"  # streamed, yet byte for byte the same text


# ==== branch --limit / --since ======================================================


def test_branch_since_and_limit(tmp_path, capsys):
    path = forked(tmp_path)
    assert main(["branch", str(path), "--since", "c2", "--limit", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in doc["entries"]] == ["c3", "c4", "c5"] and doc["truncated"] is True
    assert [r["depth"] for r in doc["entries"]] == [5, 6, 7]
    assert main(["branch", str(path), "--limit", "2", "--no-preview"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [" 0  r0  user", " 1  a1  assistant", "-- 11 more entries on the branch (--limit 2) --"]
    assert main(["branch", str(path), "--since", "b2"]) == 2  # not on the branch
    assert "Entry b2 is not on the branch (--since)" in capsys.readouterr().err
    assert main(["branch", str(path), "--since", "nosuch"]) == 2
    assert capsys.readouterr().err == "sessiontree: error: Entry not found: nosuch\n"


def test_branch_limit_reads_only_what_it_shows(tmp_path, capsys, monkeypatch):
    path = chain(tmp_path / "chain.jsonl", 3000)
    counts = _Counts(monkeypatch)
    assert main(["branch", str(path), "--since", "m100", "--limit", "5"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6 and counts.previews == 5


# ==== one error for an unknown id ===================================================


@pytest.mark.parametrize("bad", ["nosuch", "", 5, None, ["x"]])
def test_get_entry_and_branch_treat_an_unknown_id_alike(tmp_path, bad):
    s = Session.open(forked(tmp_path))
    assert s.get_entry(bad) is None
    for method in (s.branch, s.get_branch, s.get_children, s.branch_positions):
        if bad is None and method in (s.get_branch, s.branch_positions):
            continue  # None means the leaf there
        with pytest.raises(EntryNotFoundError) as info:
            method(bad)
        assert str(info.value) == f"Entry not found: {bad}" and info.value.entry_id == bad


def test_the_cli_says_the_same_for_every_unknown_id(tmp_path, capsys):
    path = str(forked(tmp_path))
    for argv in (
        ["branch", path, "--from", "nosuch"],
        ["branch", path, "--since", "nosuch"],
        ["tree", path, "--around", "nosuch"],
        ["tree", path, "--since", "nosuch"],
        ["entries", path, "--since", "nosuch"],
        ["navigate", path, "nosuch", "--dry-run"],
    ):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == "sessiontree: error: Entry not found: nosuch\n", argv


# ==== --summarizer: one list of names ================================================


def test_summarizer_takes_the_same_names_in_compact_compact_all_and_rpc():
    from sessiontree.cli import build_parser
    from sessiontree.providers import SUMMARIZER_NAMES
    from sessiontree.rpc.cli import build_parser as rpc_parser

    def choices(parser, command=None):  # type: ignore[no-untyped-def]
        if command is not None:
            parser = next(a for a in parser._actions if a.dest == "command").choices[command]
        return tuple(next(a for a in parser._actions if a.dest == "summarizer").choices)

    assert choices(build_parser(), "compact") == SUMMARIZER_NAMES
    assert choices(build_parser(), "compact-all") == SUMMARIZER_NAMES
    assert choices(rpc_parser()) == ("model", *SUMMARIZER_NAMES)  # plus its models file's model
    for name in SUMMARIZER_NAMES:
        assert rpc_parser().parse_args(["--summarizer", name]).summarizer == name


@pytest.mark.slow
def test_rpc_summarizer_misconfigured_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["PI_CODING_AGENT_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontree", "rpc", "--no-session", "--summarizer", "openai"],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("sessiontree: error: rpc: summarizer 'openai': ") and proc.stderr.count("\n") == 1


# ==== progress bars: on a terminal, never on a pipe ==================================


def _run_on_a_pty(argv: list[str]) -> tuple[int, str]:
    """Run ``python -m sessiontree ARGV`` with stderr on a pseudo-terminal (stdout a pipe);
    returns the exit code and what the terminal received."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sessiontree", *argv], stderr=slave, stdout=subprocess.PIPE, timeout=120
        )
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_progress_bars_on_a_terminal_and_none_on_a_pipe(tmp_path):
    path = str(chain(tmp_path / "chain.jsonl", 400))
    html = str(tmp_path / "out.html")
    for argv, done in (
        (["validate", path], "400/400"),
        (["tree", path], "400/400"),
        (["tree", path, "--json"], "400/400"),
        (["branch", path], "400/400"),
        (["export-html", path, "-o", html], "100%"),
    ):
        rc, err = _run_on_a_pty(argv)
        assert rc == 0 and done in err and "100%|" in err, (argv, err)
        piped = subprocess.run(
            [sys.executable, "-m", "sessiontree", *argv], capture_output=True, text=True, timeout=120
        )
        assert piped.returncode == 0 and piped.stderr == "", (argv, piped.stderr)
        quiet_rc, quiet = _run_on_a_pty([*argv, "--no-progress"])
        assert quiet_rc == 0 and "%|" not in quiet, argv


def test_export_html_bars_count_the_files_bytes_once_per_pass(tmp_path):
    # one bar of twice the file's size read as a file twice as big (419M for a 210 MB file)
    path = chain(tmp_path / "chain.jsonl", 400)
    size = os.path.getsize(path)
    rc, err = _run_on_a_pty(["export-html", str(path), "-o", str(tmp_path / "out.html")])
    assert rc == 0, err
    tqdm = pytest.importorskip("tqdm")
    shown, twice = tqdm.tqdm.format_sizeof(size), tqdm.tqdm.format_sizeof(2 * size)
    assert f"{shown}/{shown}" in err and "index:" in err and "pages:" in err, (size, err)
    assert twice not in err, err


# ==== tree --json: memory stays near the open's =======================================


#: run in a fresh interpreter: the code, then its peak resident memory (VmHWM: the new process's
#: own; ru_maxrss would count the test process's memory at the fork) on stderr


@pytest.mark.slow
def test_tree_json_peaks_at_most_twice_the_opens_memory(tmp_path):
    # 40,000 entries with forks: before streaming, the nodes' records alone took ~3x the open
    entries, prev = [], None
    for k in range(40_000):
        parent = prev if k % 50 else (f"m{k - 7}" if k > 7 else prev)
        entries.append(_msg(f"m{k}", parent, k, "user" if k % 2 == 0 else "assistant", f"message number {k}"))
        prev = f"m{k}"
    path = str(_write(tmp_path / "wide.jsonl", entries))
    del entries
    opened = peak_kb("from sessiontree import Session; Session.open(sys.argv[1]).leaf_id", path)
    tree = peak_kb("from sessiontree.cli import main; assert main(['tree', sys.argv[1], '--json']) == 0", path)
    assert tree <= 2 * opened, (tree, opened)


# ==== entries --limit, streamed ======================================================


def test_entries_limit_since_and_the_streamed_document(tmp_path, capsys):
    from sessiontree.cli import json_document

    path = forked(tmp_path)
    assert main(["entries", str(path), "--since", "c2", "--limit", "2", "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert [r["id"] for r in doc["entries"]] == ["c3", "c4"] and doc["truncated"] is True
    assert doc["count"] == 2 and doc["since"] == "c2"
    assert out == json_document(doc) + "\n"  # streamed, yet the text json_document gives
    assert main(["entries", str(path), "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["2  r0  null  user", "3  a1  r0  assistant", "-- 15 more entries (--limit 2) --"]
    assert main(["entries", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 17 and doc["truncated"] is False and len(doc["entries"]) == 17


def test_entries_streams_its_first_line_at_once(tmp_path, capsys, monkeypatch):
    path = chain(tmp_path / "chain.jsonl", 3000)
    counts = _Counts(monkeypatch)
    for json_flag in ([], ["--json"]):
        counts.rows = 0
        counts.at_first_write = None
        assert main(["entries", str(path), *json_flag]) == 0
        out = capsys.readouterr().out
        assert (len(json.loads(out)["entries"]) if json_flag else len(out.splitlines())) == 3000
        # the first line at once: the first batch (8 rows), and the last line's row for the text's column width
        assert counts.at_first_write is not None and counts.at_first_write[0] <= 9
