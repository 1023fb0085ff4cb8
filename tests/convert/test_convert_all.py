"""``convert_all`` / ``sessiontree convert-all``: a whole store in Claude Code's layout, Codex's
``YYYY/MM/DD`` layout or a mix, converted to Pi sessions below an output folder; per-file
failures are rows, never the job's failure; nothing is written through a symbolic link inside
the output folder, over a source, or more readable than its source."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.convert import ConvertAllResult, ConvertAllRow, convert_all, to_pi
from sessiontree.errors import SessionArgumentError

from ._helpers import CC, CODEX, cc_mains, codex_files, pi_entries, stage_cc

SUB = "agent-sessions__subagent__0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f.jsonl"
PI_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "pi-real"


def _store(tmp: Path) -> dict[str, Path]:
    """A mixed store: Claude Code's projects/<cwd>/ (a session with a subagent file, a
    session with sidechains), Codex's sessions/YYYY/MM/DD/, a Pi session, a file no format
    recognises."""
    root = tmp / "store"
    proj = root / "claude" / "projects" / "-work-proj"
    proj.mkdir(parents=True)
    main, subs = stage_cc(CC / SUB, proj)
    side, _ = stage_cc(CC / "claude-code-log__sidechain_integrated.jsonl", proj)
    day = root / "codex" / "sessions" / "2025" / "10" / "31"
    day.mkdir(parents=True)
    rollout = day / "rollout-standard.jsonl"
    shutil.copyfile(CODEX / "agentsview__standard_session.jsonl", rollout)
    pi_src = next(iter(sorted(PI_FIXTURE.glob("*.jsonl"))), None)
    out = {"root": root, "main": main, "sub": subs[0], "side": side, "rollout": rollout}
    if pi_src is not None:
        pi = root / "pi" / "--work--" / "s.jsonl"
        pi.parent.mkdir(parents=True)
        shutil.copyfile(pi_src, pi)
        out["pi"] = pi
    bad = root / "notes.jsonl"
    bad.write_text("this is not JSON\n")
    out["bad"] = bad
    return out


def _by_path(result: ConvertAllResult) -> dict[str, ConvertAllRow]:
    return {r.path: r for r in result.rows}


def test_a_mixed_store_converts_file_by_file_keeping_paths(tmp_path):
    s = _store(tmp_path)
    out = tmp_path / "out"
    result = convert_all(s["root"], out)
    rows = _by_path(result)
    # the subagent file converts with its session, not on its own
    assert str(s["sub"]) not in rows
    assert set(rows) == {str(p) for k, p in s.items() if k not in ("root", "sub")}
    assert [r.path for r in result.rows] == sorted(rows)
    main = rows[str(s["main"])]
    assert main.error is None and main.source_format == "claude-code"
    assert main.output == str(out / "claude" / "projects" / "-work-proj" / SUB)
    assert len(main.files) == 2 and ".subagent-" in main.files[1]
    side = rows[str(s["side"])]
    assert side.source_format == "claude-code" and len(side.files) == 3
    assert side.problems == len(side.problem_list) and side.problem_kinds == {"orphan": side.problems}
    codex = rows[str(s["rollout"])]
    assert codex.source_format == "codex"
    assert codex.output == str(out / "codex" / "sessions" / "2025" / "10" / "31" / "rollout-standard.jsonl")
    bad = rows[str(s["bad"])]
    assert bad.error_kind == "unrecognised" and bad.output is None and bad.files == ()
    assert not (out / "notes.jsonl").exists()
    # totals
    assert result.failed == 1 and result.converted == len(rows) - 1
    assert result.by_format["claude-code"] == 2 and result.by_format["codex"] == 1
    assert result.files == sum(len(r.files) for r in result.rows)
    summary = result.summary()
    assert summary["errors"] == {"unrecognised": 1} and summary["sessions"] == len(rows)
    # each output is what to_pi writes for that file, and opens with no problem
    for r in result.rows:
        for f in r.files:
            with Session.open(f) as sess:
                assert sess.problems == [] or all(p.kind != "malformed_json" for p in sess.problems)
    alone = tmp_path / "alone" / "x.jsonl"
    to_pi(s["rollout"], alone)
    assert pi_entries(alone) == pi_entries(Path(codex.output))
    # sidechain headers name the real output path (never the folder descriptor written through)
    for f in side.files[1:] + main.files[1:]:
        header = json.loads(Path(f).read_text().split("\n", 1)[0])
        assert header["parentSession"] in (side.output, main.output)


def test_every_fixture_of_a_store_converts_as_to_pi_converts_it(tmp_path):
    root = tmp_path / "projects" / "-p"
    root.mkdir(parents=True)
    for p in cc_mains():
        stage_cc(p, root)
    day = tmp_path / "sessions" / "2026" / "01" / "02"
    day.mkdir(parents=True)
    for p in codex_files():
        shutil.copyfile(p, day / p.name)
    out = tmp_path / "out"
    result = convert_all([tmp_path / "projects", tmp_path / "sessions"], out)
    assert result.failed == 0, [(r.path, r.error) for r in result.rows if r.error]
    assert result.sessions == len(cc_mains()) + len(codex_files())
    for r in result.rows:
        again = tmp_path / "again" / Path(r.path).name
        single = to_pi(r.path, again)
        assert single.lines == r.lines and single.written == r.written
        assert pi_entries(Path(r.output)) == pi_entries(again)


def test_a_symlink_inside_the_output_is_never_written_through(tmp_path):
    s = _store(tmp_path)
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "codex" / "sessions" / "2025" / "10").mkdir(parents=True)
    os.symlink(elsewhere, out / "codex" / "sessions" / "2025" / "10" / "31")
    link_file = out / "claude" / "projects" / "-work-proj" / SUB
    link_file.parent.mkdir(parents=True)
    victim = tmp_path / "victim.jsonl"
    victim.write_text("keep me\n")
    os.symlink(victim, link_file)
    result = convert_all(s["root"], out)
    rows = _by_path(result)
    assert rows[str(s["rollout"])].error_kind == "refused_output"
    assert rows[str(s["main"])].error_kind == "refused_output"
    # the refusal names the output as the user knows it, not the folder handle it was opened by
    assert "/proc/self/fd" not in rows[str(s["main"])].error
    assert str(link_file) in rows[str(s["main"])].error
    assert list(elsewhere.iterdir()) == []
    assert victim.read_text() == "keep me\n"
    assert rows[str(s["side"])].error is None  # the others still converted
    assert result.failed == 3  # and the unrecognised file


def test_outputs_are_never_more_readable_than_their_source(tmp_path):
    s = _store(tmp_path)
    os.chmod(s["rollout"], 0o600)
    os.chmod(s["main"], 0o640)
    out = tmp_path / "out"
    rows = _by_path(convert_all(s["root"], out))
    assert stat.S_IMODE(os.stat(rows[str(s["rollout"])].output).st_mode) & 0o077 == 0
    for f in rows[str(s["main"])].files:
        assert stat.S_IMODE(os.stat(f).st_mode) & 0o007 == 0


def test_an_output_inside_the_source_is_not_read_and_a_source_folder_as_output_is_refused(tmp_path):
    s = _store(tmp_path)
    inner = s["root"] / "converted"
    first = convert_all(s["root"], inner)
    second = convert_all(s["root"], inner)
    assert [r.path for r in first.rows] == [r.path for r in second.rows]
    assert not any(r.path.startswith(str(inner)) for r in second.rows)
    with pytest.raises(SessionArgumentError):
        convert_all(s["root"] / "claude", s["root"])
    with pytest.raises(SessionArgumentError):
        convert_all(s["root"], tmp_path / "o", source_format="gemini")


def test_unreadable_and_odd_files_are_rows(tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    shutil.copyfile(CODEX / "agentsview__standard_session.jsonl", root / "ok.jsonl")
    os.mkfifo(root / "fifo.jsonl")
    (root / "dir.jsonl").mkdir()
    os.symlink(root / "missing", root / "dangling.jsonl")
    (root / "empty.jsonl").write_bytes(b"")
    result = convert_all(root, tmp_path / "out")
    rows = {Path(r.path).name: r for r in result.rows}
    assert rows["ok.jsonl"].error is None
    for name in ("fifo.jsonl", "dir.jsonl", "dangling.jsonl", "empty.jsonl"):
        assert rows[name].error is not None and rows[name].output is None, name
    assert result.failed == 4


def test_progress_counts_every_session(tmp_path):
    s = _store(tmp_path)
    seen: list[int] = []
    result = convert_all(s["root"], tmp_path / "out", progress=seen.append)
    assert sum(seen) == result.sessions


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True)


def test_cli_lines_json_and_exit_codes(tmp_path):
    s = _store(tmp_path)
    r = _cli("convert-all", str(s["root"]), "--out", str(tmp_path / "o1"))
    assert r.returncode == 1  # the unrecognised file
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert {x["path"] for x in lines} >= {str(s["main"]), str(s["rollout"])}
    assert "1 failed" in r.stderr and "unrecognised" in r.stderr
    s["bad"].unlink()
    r = _cli("convert-all", str(s["root"]), "--out", str(tmp_path / "o2"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["failed"] == 0 and doc["converted"] == doc["sessions"] == len(doc["rows"])
    assert doc["by_format"]["codex"] == 1
    r = _cli("convert-all", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o3"), "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["error"] is True
    r = _cli("convert-all", str(s["root"]), "--out", str(s["root"]))
    assert r.returncode == 2 and "nothing was written" in r.stderr
    r = _cli("convert-all", str(s["root"]), "--out", str(tmp_path / "o4"), "--engine", "spark")
    assert r.returncode == 2


def _rollout(path: Path, rid: str, forked_from: str | None = None) -> Path:
    """A small Codex rollout of id ``rid`` (a fork of ``forked_from`` when given)."""
    meta: dict = {"id": rid, "timestamp": "2025-10-30T09:00:00.000Z", "cwd": "/w", "originator": "codex_cli_rs"}
    if forked_from:
        meta["forked_from_id"] = forked_from
    lines = [
        {"timestamp": "2025-10-30T09:00:00.000Z", "type": "session_meta", "payload": meta},
        {
            "timestamp": "2025-10-30T09:00:01.000Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi " + rid}]},
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


PARENT_ID = "019a3a10-0000-7000-8000-000000000001"
FORK_ID = "019a3a10-0000-7000-8000-000000000002"


def _fork_store(tmp: Path) -> tuple[Path, Path, Path]:
    """Codex's sessions/YYYY/MM/DD/: a rollout, and a fork of it made the next day."""
    root = tmp / "sessions"
    parent = _rollout(root / "2025" / "10" / "30" / f"rollout-2025-10-30T09-00-00-{PARENT_ID}.jsonl", PARENT_ID)
    fork = _rollout(
        root / "2025" / "10" / "31" / f"rollout-2025-10-31T10-00-00-{FORK_ID}.jsonl", FORK_ID, forked_from=PARENT_ID
    )
    return root, parent, fork


def test_a_codex_fork_names_its_parent_rollout_in_another_day_folder(tmp_path):
    _root, parent, fork = _fork_store(tmp_path)
    r = to_pi(fork, tmp_path / "fork.pi.jsonl")
    header = json.loads((tmp_path / "fork.pi.jsonl").read_text().splitlines()[0])
    assert header["parentSession"] == str(parent)
    assert not r.not_carried


def test_convert_all_names_the_parent_sessions_pi_output(tmp_path):
    root, parent, fork = _fork_store(tmp_path)
    out = tmp_path / "out"
    res = convert_all(root, out)
    rows = {Path(r.path).name: r for r in res.rows}
    parent_out = rows[parent.name].output
    fork_out = rows[fork.name].output
    header = json.loads(Path(fork_out).read_text().splitlines()[0])
    assert header["parentSession"] == parent_out
    assert Path(parent_out).is_file()
    # the parent session opens, and its first user text is the parent's
    assert PARENT_ID in Path(parent_out).read_text()


def test_a_codex_fork_whose_parent_is_gone_says_so(tmp_path):
    fork = _rollout(tmp_path / "sessions" / "2025" / "10" / "31" / f"rollout-x-{FORK_ID}.jsonl", FORK_ID, PARENT_ID)
    r = to_pi(fork, tmp_path / "fork.pi.jsonl")
    header = json.loads((tmp_path / "fork.pi.jsonl").read_text().splitlines()[0])
    assert "parentSession" not in header
    assert any(PARENT_ID in x for x in r.not_carried)
