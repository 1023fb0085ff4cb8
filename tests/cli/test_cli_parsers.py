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
