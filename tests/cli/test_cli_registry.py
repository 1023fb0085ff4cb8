"""The CLI's command registry (``sessiontree.cli.commands.COMMANDS``): one row per command.

``sessiontree --help`` lists exactly the rows (names, order, help lines); every command but
``rpc`` takes ``--json`` and prints one JSON document with it; a subparser without a row, or
with a help line of its own, is refused; a command's module is imported only when it runs.
"""

from __future__ import annotations

import argparse
import inspect
import os
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree.cli import build_parser, json_document, main
from sessiontree.cli.commands import BY_NAME, COMMANDS, WRITING_COMMANDS, RegisteredSubparsers
from tests.support.cli_run import run_cli

GEN = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated"
CLAUDE = Path("/work/shared/fixtures/claude-code")


def _subparsers_action():
    parser = build_parser()
    return parser, next(a for a in parser._actions if a.dest == "command")


def test_help_lists_exactly_the_registry(capsys):
    parser, action = _subparsers_action()
    listed = [(a.dest, a.help) for a in action._choices_actions]
    assert listed == [(c.name, c.help) for c in COMMANDS]
    assert list(action.choices) == [c.name for c in COMMANDS]
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for c in COMMANDS:
        assert f"    {c.name}" in out and c.help[:40] in out


def test_every_command_takes_json_but_rpc_whose_stdout_is_the_protocol():
    _, action = _subparsers_action()
    assert sorted(c.name for c in COMMANDS if not c.json) == ["rpc"]
    for c in COMMANDS:
        options = action.choices[c.name]._option_string_actions
        assert ("--json" in options) == c.json, c.name


def test_every_row_names_a_handler_of_its_shape():
    for c in COMMANDS:
        handler = c.load()
        assert callable(handler) and handler.__name__ == c.handler, c.name
        n_params = len(inspect.signature(handler).parameters)
        assert n_params == (2 if c.calls == "file" else 1), c.name
        if c.parser is not None:
            assert callable(__import__(c.parser, fromlist=["add_parsers"]).add_parsers)
    assert len(BY_NAME) == len(COMMANDS)  # one row per name
    assert WRITING_COMMANDS == {"compact", "navigate", "rpc", "compact-all", "scrub"}


def test_a_subparser_without_a_row_or_with_its_own_help_is_refused():
    import argparse

    sub = RegisteredSubparsers(argparse.ArgumentParser().add_subparsers(dest="command"))
    with pytest.raises(KeyError, match="no row"):
        sub.add_parser("frobnicate")
    with pytest.raises(TypeError, match="row"):
        sub.add_parser("info", help="another help line")
    assert sub.add_parser("info").prog.endswith(" info")


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes((GEN / "linear_short.jsonl").read_bytes())
    return path


def _argv(name: str, tmp_path: Path) -> list[str]:
    """Words that run ``name`` on small inputs, writing nothing the test does not own."""
    session = _session(tmp_path)
    first_id = json.loads(session.read_text().splitlines()[1])["id"]
    files = {
        "navigate": [session, first_id, "--dry-run"],
        "compact": [session, "--dry-run"],
        "export-html": [session, "-o", tmp_path / "out.html"],
        "cache": ["info"],
        "scrub": [session, "-o", tmp_path / "scrubbed.jsonl"],
        "scrub-all": [tmp_path, "--out", tmp_path.parent / (tmp_path.name + "-scrubbed")],
        "convert": [session, "-o", tmp_path / "out.jsonl", "--to", "codex"],
        "convert-all": [tmp_path, "--out", tmp_path.parent / (tmp_path.name + "-converted")],
        "otel": [session, "-o", tmp_path / "trace.jsonl"],
        "stats": [session],
        "search": ["hello", session],
        "compact-all": [session, "--context-window", "10000000"],  # under the threshold: writes nothing
    }
    return [name, *map(str, files.get(name, [session]))]


SLOW = {"stats", "compact-all", "otel"}  # the fleet's engine and its extras


@pytest.mark.parametrize(
    "name",
    [pytest.param(c.name, marks=[pytest.mark.slow] if c.name in SLOW else []) for c in COMMANDS if c.json],
)
def test_json_prints_one_document(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    rc, out, err = run_cli(*_argv(name, work), "--json")
    assert rc in (0, 1), err
    doc = json.loads(out)  # one document: a second line would fail here
    assert isinstance(doc, dict) and doc.get("error") is not True
    # every command writes it the same way: indented by two, as json_document writes it
    assert out == json_document(doc) + "\n", out[:200]


@pytest.mark.parametrize("name", ["convert", "search", "info", "export-html"])
def test_a_json_failure_is_the_same_indented_document(name, tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    argv = {
        "convert": ["convert", missing, "-o", str(tmp_path / "o.jsonl"), "--to", "codex"],
        "search": ["search", "x", missing],
        "info": ["info", missing],
        "export-html": ["export-html", missing, "-o", str(tmp_path / "o.html")],
    }[name]
    rc, out, err = run_cli(*argv, "--json")
    doc = json.loads(out)
    assert rc == 2 and doc["error"] is True and out == json_document(doc) + "\n", out


def test_a_command_module_is_imported_only_when_it_runs(tmp_path):
    session = _session(tmp_path)
    code = (
        "import sys, json, sessiontree.cli as cli\n"
        "before = sorted(sys.modules)\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = cli.main(['info', {str(session)!r}])\n"
        "print(json.dumps([rc, before, sorted(sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    rc, before, after = json.loads(out.splitlines()[-1])
    assert rc == 0
    handlers = {c.module for c in COMMANDS} - {"sessiontree.cli.app"}
    assert sorted(m for m in handlers if m in before) == []
    assert "sessiontree.cli.read" in after
    # only the command's own parser is built: no module that adds another command's is imported
    assert sorted(m for m in handlers - {"sessiontree.cli.read", "sessiontree.cli.tree"} if m in after) == []
    assert "sessiontree.rpc" not in after and "sessiontree.fleet" not in after and "sessiontree.otel" not in after


def test_the_module_docstring_and_the_readme_name_every_command():
    import sessiontree.cli

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("## Command line", 1)[1].split("```", 2)[1]
    for c in COMMANDS:
        assert f"sessiontree {c.name} " in (sessiontree.cli.__doc__ or ""), c.name
        assert f"sessiontree {c.name} " in block, c.name


def test_a_source_command_on_a_full_device_says_so_once(tmp_path):
    """`stats STORE > /dev/full`: one line on stderr (the command's), exit 2, no traceback."""
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    pytest.importorskip("pyarrow")
    d = tmp_path / "store"
    d.mkdir()
    (d / "s.jsonl").write_text(
        '{"type":"session","version":3,"id":"x","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":0}}\n'
    )
    with open("/dev/full", "w") as full:
        p = subprocess.run(
            [sys.executable, "-m", "sessiontree", "stats", str(d)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1 and "No space left on device" in p.stderr


def test_the_top_level_help_names_the_cache_writes():
    """`sessiontree --help` says which commands write what; "the others only read" held only for
    the sessions: read commands and search also write to the index cache folder."""
    text = build_parser().format_help()
    assert "index cache folder" in text and "SESSIONTREE_INDEX_CACHE=off" in text


def _run_with_stdout(name: str, tmp_path: Path, stdout, monkeypatch, *extra: str):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontree", *_argv(name, work), *extra],
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize(
    "name",
    [pytest.param(c.name, marks=[pytest.mark.slow] if c.name in SLOW else []) for c in COMMANDS if c.json],
)
@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_every_command_on_a_full_device_says_so_in_one_line(name, json_flag, tmp_path, monkeypatch):
    """``sessiontree CMD ... > /dev/full``: exit 2, one line naming the full device, no traceback
    (``convert`` and ``convert-all`` printed a traceback)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = _run_with_stdout(name, tmp_path, full, monkeypatch, *json_flag)
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 2, err
    assert "Traceback" not in err and "No space left on device" in err, err
    assert err.count("No space left on device") == 1, err


@pytest.mark.parametrize(
    "name",
    [pytest.param(c.name, marks=[pytest.mark.slow] if c.name in SLOW else []) for c in COMMANDS if c.json],
)
def test_every_command_into_a_closed_pipe_is_quiet(name, tmp_path, monkeypatch):
    """``sessiontree CMD ... | head -0``: the reader went away, so no error line and no
    traceback (``stats`` said ``cannot write: Broken pipe`` and exited 2)."""
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write
    try:
        proc = _run_with_stdout(name, tmp_path, w, monkeypatch)
    finally:
        os.close(w)
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=120)
    assert "Traceback" not in err and "Broken pipe" not in err, err
    assert rc in (0, 1), err


def test_a_command_named_first_is_parsed_by_its_own_parser_alone():
    """``main`` builds only the named command's subparser (``build_parser(only=...)``): it is the
    one the full parser holds, option for option (its help text the same)."""
    full = build_parser()
    (everything,) = [a for a in full._actions if isinstance(a, argparse._SubParsersAction)]
    for c in COMMANDS:
        one = build_parser(only=c.name)
        (action,) = [a for a in one._actions if isinstance(a, argparse._SubParsersAction)]
        assert list(action.choices) == [c.name]
        assert action.choices[c.name].format_help() == everything.choices[c.name].format_help(), c.name
