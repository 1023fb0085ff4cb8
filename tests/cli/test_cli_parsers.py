"""The subcommands with a written help text (an epilog of exit codes and rules) are made by one
helper, ``cli.args.documented_parser``, which shows the text as written; no command module builds
that parser shape itself (``duplicates`` found the same six argparse lines in three modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sessiontree.cli
from sessiontree.cli import build_parser

CLI = Path(sessiontree.cli.__file__).parent
DOCUMENTED = ("compact", "navigate", "stats", "compact-all", "scrub", "scrub-all")


def _sub(command: str):
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices[command]


@pytest.mark.parametrize("command", DOCUMENTED)
def test_the_epilog_is_shown_as_written(command):
    p = _sub(command)
    assert p.epilog
    text = p.format_help()
    for line in (p.epilog or "").splitlines():
        assert line.rstrip() in text  # RawDescriptionHelpFormatter: the lines are not re-wrapped


def test_one_helper_makes_them():
    makers = sorted(f.name for f in CLI.glob("*.py") if "RawDescriptionHelpFormatter" in f.read_text())
    assert makers == ["args.py"]


def test_an_unknown_option_shows_the_commands_usage(tmp_path, capsys):
    """`sessiontree entries FILE --bogus`: the usage line printed is the entries command's, with
    its options, not the top-level `sessiontree [-h] [--version] COMMAND ...`."""
    from sessiontree.cli import main

    path = tmp_path / "s.jsonl"
    path.write_text('{"type":"session","version":3,"id":"x","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}\n')
    assert main(["entries", str(path), "--bogus", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sessiontree entries ") and "--since ID" in err
    assert err.rstrip().endswith("sessiontree entries: error: unrecognized arguments: --bogus 3")
    assert main(["entries", str(path), "--bogus", "--json"]) == 2
    out = capsys.readouterr().out
    assert '"exit_code": 2' in out


@pytest.mark.parametrize("command", ["scrub-all", "convert-all"])
def test_store_commands_take_dash_o_like_the_single_file_ones(command):
    """scrub, convert and otel write to -o; their store forms take -o for their --out DIR too."""
    from sessiontree.cli import build_parser

    args = build_parser().parse_args([command, "src", "-o", "dest"])
    assert args.out == "dest"
