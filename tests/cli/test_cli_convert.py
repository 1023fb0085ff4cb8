"""``sessiontree convert``: exit 0 when written, 2 with one line for an unrecognised SRC; --json
prints the result document; --from pi --to claude-code|codex converts back."""

from __future__ import annotations

import json
import shutil

from sessiontree.cli.app import main

from tests.convert._helpers import CC, CODEX


def test_convert_to_pi_and_back(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    shutil.copyfile(CC / "inspect_swe__compaction_session.jsonl", src)
    assert main(["convert", str(src), "-o", str(tmp_path / "pi.jsonl")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("claude-code -> pi: 6 lines, 6 written to ")
    assert (
        main(
            ["convert", str(tmp_path / "pi.jsonl"), "-o", str(tmp_path / "back.jsonl"), "--to", "claude-code", "--json"]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["source_format"] == "pi" and doc["target_format"] == "claude-code" and doc["problems"] == []
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()


def test_convert_codex_json_and_the_active_branch(tmp_path, capsys):
    src = CODEX / "agentsview__function_calls.jsonl"
    assert main(["convert", str(src), "-o", str(tmp_path / "pi.jsonl"), "--from", "codex", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source_format"] == "codex" and doc["files"] == [str(tmp_path / "pi.jsonl")]
    assert main(["convert", str(tmp_path / "pi.jsonl"), "-o", str(tmp_path / "r.jsonl"), "--to", "codex"]) == 0
    assert (tmp_path / "r.jsonl").read_bytes() == src.read_bytes()


def test_an_unrecognised_source_exits_2_with_one_line(tmp_path, capsys):
    src = tmp_path / "x.jsonl"
    src.write_text('{"hello": 1}\n')
    assert main(["convert", str(src), "-o", str(tmp_path / "o.jsonl")]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1
    assert "not a Claude Code transcript, a Codex rollout or a Pi session" in cap.err
    assert not (tmp_path / "o.jsonl").exists()
    assert main(["convert", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl"), "--json"]) == 2
    cap = capsys.readouterr()
    assert json.loads(cap.out)["exit_code"] == 2 and len(cap.err.strip().splitlines()) == 1


def test_claude_code_to_codex_is_refused_with_one_line(tmp_path, capsys):
    src = CC / "inspect_swe__simple_conversation.jsonl"
    assert main(["convert", str(src), "-o", str(tmp_path / "o.jsonl"), "--to", "codex"]) == 2
    assert "convert to pi first" in capsys.readouterr().err


def test_dash_as_the_output_is_refused_not_a_file_named_dash(tmp_path, capsys, monkeypatch):
    """``-o -`` reads as standard output (as in ``scrub`` and ``otel``), but convert writes files
    (a sidechain's beside OUT): it is refused in one line, and no file named ``-`` appears."""
    monkeypatch.chdir(tmp_path)
    src = CC / "inspect_swe__simple_conversation.jsonl"
    for argv in (["-o", "-"], ["--output", "-", "--json"]):
        rc = main(["convert", str(src), *argv])
        cap = capsys.readouterr()
        assert rc == 2 and not (tmp_path / "-").exists()
        assert len(cap.err.strip().splitlines()) == 1 and "standard output" in cap.err
    assert json.loads(cap.out)["exit_code"] == 2
