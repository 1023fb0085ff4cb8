"""The CLI's one command registry: every ``sessiontree`` command is one row of :data:`COMMANDS`.

A row names the command, the module that runs it (imported only when the command runs), its
handler, what it writes, whether it takes ``--json`` and its one-line help (the line
``sessiontree --help`` lists). :func:`sessiontree.cli.app.main` dispatches through it and
:func:`~sessiontree.cli.app.build_parser` takes every subcommand's help from it, so a command
without a row cannot be added (``tests/cli/test_cli_registry.py``). This module imports no
command module: ``import sessiontree.cli`` stays as light as the commands it runs.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal, cast

#: What a command writes: ``"nothing"`` (it only reads), ``"files"`` (new files of its own:
#: an HTML page, a scrubbed copy, a trace file; never over what it reads), ``"sessions"`` (it
#: may append to or rewrite the sessions it is given: under their writer lock), ``"cache"`` (our
#: own index cache only).
Writes = Literal["nothing", "files", "sessions", "cache"]

#: How :func:`~sessiontree.cli.app.main` calls the handler: ``"file"``, ``handler(session, args)``
#: on FILE opened as a :class:`~sessiontree.Session` (``main`` maps the open's errors and closes
#: it); ``"args"``, ``handler(args) -> exit code`` (it reads its own inputs and maps its own
#: errors); ``"argv"``, ``handler(argv) -> exit code`` on the words after the command, unparsed
#: (``rpc``: Pi's launch flags).
Calls = Literal["file", "args", "argv"]


@dataclass(frozen=True)
class Command:
    """One ``sessiontree`` command: its name, who runs it, what it writes and its help line.

    ``module`` and ``handler`` name the function that runs it (``module`` absolute, imported on
    first use); ``calls`` says how it is called (:data:`Calls`); ``writes`` what it may write
    (:data:`Writes`); ``json`` that it takes ``--json`` (one JSON document on stdout, failures
    included); ``help`` the line of ``sessiontree --help``. ``parser``: the module whose
    ``add_parsers(sub)`` adds its subparser, or None when :func:`~sessiontree.cli.app.build_parser`
    does (the FILE commands share its option groups).
    """

    name: str
    module: str
    handler: str
    calls: Calls
    writes: Writes
    json: bool
    help: str
    parser: str | None = None

    def load(self) -> Callable[..., int]:
        """The handler function, importing its module (the first call of the command)."""
        return cast(Callable[..., int], getattr(importlib.import_module(self.module), self.handler))


_CLI = "sessiontree.cli"

COMMANDS: tuple[Command, ...] = (
    Command("info", f"{_CLI}.read", "cmd_info", "file", "nothing", True, "header, counts, leaf, context size"),
    Command("tree", f"{_CLI}.tree", "cmd_tree", "file", "nothing", True, "the whole tree, like Pi's /tree"),
    Command("branch", f"{_CLI}.read", "cmd_branch", "file", "nothing", True, "the active branch, root to leaf"),
    Command("context", f"{_CLI}.read", "cmd_context", "file", "nothing", True, "the messages the model sees"),
    Command("entries", f"{_CLI}.read", "cmd_entries", "file", "nothing", True, "entries in file order"),
    Command(
        "validate",
        f"{_CLI}.read",
        "cmd_validate",
        "file",
        "nothing",
        True,
        "list damaged lines and structural problems",
    ),
    Command(
        "rpc",
        "sessiontree.rpc",
        "main",
        "argv",
        "sessions",
        False,
        "serve a session over Pi's RPC (JSON lines); see rpc --help",
    ),
    Command(
        "compact",
        f"{_CLI}.compact",
        "cmd_compact",
        "file",
        "sessions",
        True,
        "summarize old history into a compaction entry",
    ),
    Command("navigate", f"{_CLI}.write", "cmd_navigate", "file", "sessions", True, "move the leaf like Pi's /tree"),
    Command(
        "export-html",
        f"{_CLI}.write",
        "cmd_export_html",
        "file",
        "files",
        True,
        "a self-contained HTML view of the session",
    ),
    Command(
        "cache",
        f"{_CLI}.app",
        "cmd_cache",
        "args",
        "cache",
        True,
        "the saved-index cache (sessiontree.index_cache): info shows it, clear empties it",
    ),
    Command(
        "stats",
        f"{_CLI}.fleet",
        "run",
        "args",
        "files",
        True,
        "a summary of a whole store (--parquet OUT: one row per session)",
        parser=f"{_CLI}.fleet",
    ),
    Command(
        "compact-all",
        f"{_CLI}.fleet",
        "run",
        "args",
        "sessions",
        True,
        "compact every session over the threshold, in bulk",
        parser=f"{_CLI}.fleet",
    ),
    Command(
        "scrub",
        f"{_CLI}.scrub",
        "run",
        "args",
        "sessions",
        True,
        "replace secrets in a session, keeping it a valid session",
        parser=f"{_CLI}.scrub",
    ),
    Command(
        "scrub-all",
        f"{_CLI}.scrub",
        "run",
        "args",
        "files",
        True,
        "scrub every session of a store into a directory",
        parser=f"{_CLI}.scrub",
    ),
    Command(
        "otel",
        f"{_CLI}.otel",
        "run",
        "args",
        "files",
        True,
        "export sessions as OpenTelemetry GenAI traces (OTLP/JSON lines)",
        parser=f"{_CLI}.otel",
    ),
    Command(
        "convert",
        f"{_CLI}.convert",
        "run",
        "args",
        "files",
        True,
        "convert Claude Code / Codex files to Pi sessions and back",
        parser=f"{_CLI}.convert",
    ),
    Command(
        "convert-all",
        f"{_CLI}.convert",
        "run",
        "args",
        "files",
        True,
        "convert every Claude Code / Codex session of a store to Pi sessions",
        parser=f"{_CLI}.convert",
    ),
    Command(
        "search",
        f"{_CLI}.search",
        "run",
        "args",
        "cache",
        True,
        "full-text search over a store, each hit's branch state (active/compacted/abandoned)",
        parser=f"{_CLI}.search",
    ),
)

#: The rows by name.
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}

#: The commands that may append to or rewrite the sessions they are given.
WRITING_COMMANDS = frozenset(c.name for c in COMMANDS if c.writes == "sessions")


def summary() -> str:
    """``sessiontree --help``'s description: what the commands write, from the rows."""

    def names(writes: str) -> str:
        return ", ".join(c.name for c in COMMANDS if c.writes == writes)

    return (
        "Inspect Pi coding-agent session files (JSONL v3). "
        f"Only {names('sessions')} write to the sessions they are given (appending entries under the "
        "writer lock; scrub only with --in-place, which rewrites one); "
        f"{names('files')} write new files, never over what they read; the others only read "
        "the sessions. Besides, every command may save a large session's index, and search its "
        "full-text index, in the index cache folder (sessiontree cache info; "
        "SESSIONTREE_INDEX_CACHE=off turns it off)."
    )


class RegisteredSubparsers:
    """The ``add_subparsers()`` action seen through the registry: ``add_parser(name, ...)``.

    Refuses a name without a row (:class:`KeyError`) and a ``help=`` of its own (:class:`TypeError`:
    the help line lives in the row), and gives each subparser its row's help. Command modules'
    ``add_parsers(sub)`` receive this object.
    """

    def __init__(self, action: Any, only: str | None = None) -> None:
        self._action = action
        self._only = only

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """``action.add_parser(name, help=<the row's help>, **kwargs)``; see the class. With
        ``only``, the other commands' subparsers are not built: a stand-in that takes and
        ignores every call is returned for them."""
        row = BY_NAME.get(name)
        if row is None:
            raise KeyError(f"sessiontree {name}: no row in sessiontree.cli.commands.COMMANDS")
        if "help" in kwargs:
            raise TypeError(f"sessiontree {name}: its help line is the row's (sessiontree.cli.commands.COMMANDS)")
        if self._only is not None and name != self._only:
            return cast(argparse.ArgumentParser, _NotBuilt())
        parser = cast(argparse.ArgumentParser, self._action.add_parser(name, help=row.help, **kwargs))
        parser.set_defaults(command_parser=parser)  # main() reports an unknown option with this usage
        return parser


class _NotBuilt:
    """A subparser left out, standing in for it: every method call is ignored.

    :class:`RegisteredSubparsers` with ``only`` returns it for the other commands; each call
    (``add_argument``, ``add_argument_group``, ``set_defaults``, ...) returns it again."""

    def __getattr__(self, name: str) -> Callable[..., _NotBuilt]:
        return self._ignore

    def _ignore(self, *args: Any, **kwargs: Any) -> _NotBuilt:
        return self
