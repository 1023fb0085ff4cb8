"""The ``sessiontree`` entry point: the argparse parser and :func:`main`, over the registry.

Every command is a row of :data:`sessiontree.cli.commands.COMMANDS`; :func:`main` imports a
command's module only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TYPE_CHECKING, Sequence

from ..errors import (
    EntryNotFoundError,
    SessionCycleError,
    SessionError,
    SessionFormatError,
    SessionLockedError,
    SessionTreeError,
)
from ..providers import SUMMARIZER_NAMES, names_text
from .args import _COMPACT_EPILOG, _NAVIGATE_EPILOG, _nonneg_float, _nonneg_int, _pos_int, documented_parser
from .commands import BY_NAME, COMMANDS, WRITING_COMMANDS, RegisteredSubparsers, summary
from .render import (
    DEFAULT_PREVIEW,
    _CliFailure,
    _OutputError,
    _silence_stdout,
    _write_out,
    json_document,
    print_failure,
    safe_text,
)

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["COMMANDS", "WRITING_COMMANDS", "build_parser", "cmd_cache", "main"]

#: What the read-only commands' --help says about the saved index they leave behind.
_SAVED_INDEX_EPILOG = (
    "Saved index: on a file of 1 MiB or more (SESSIONTREE_INDEX_CACHE_MIN_BYTES), the first run saves "
    "the file's index, about 45 bytes per entry (some 7 MB for a 200 MB session of 170,000 entries) in the index cache "
    "(sessiontree cache info), so that later runs skip the scan. The cache keeps at most 1 GiB "
    "(SESSIONTREE_INDEX_CACHE_MAX_BYTES) and drops indexes of files gone or rewritten. "
    "SESSIONTREE_INDEX_CACHE=off turns it off; sessiontree cache clear empties it."
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser for ``sessiontree`` (one subparser per command).

    ``only``: a command's name: its subparser is the only one built (what :func:`main` parses
    a command's words with: building every command's parser, and importing the modules that
    add theirs, costs a one-shot process more than some commands' work)."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="sessiontree",
        description=summary(),
    )
    parser.add_argument("--version", action="version", version=f"sessiontree {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("file", metavar="FILE", help="a Pi session file (.jsonl)")
    common.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    previews = argparse.ArgumentParser(add_help=False)
    previews.add_argument(
        "--max-preview",
        type=int,
        default=DEFAULT_PREVIEW,
        metavar="N",
        help=f"characters of text shown per line (default {DEFAULT_PREVIEW})",
    )
    previews.add_argument("--no-preview", action="store_true", help="show no text previews")
    action = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub = RegisteredSubparsers(action, only)  # each subparser's help line is its registry row's
    sub.add_parser("info", parents=[common])
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument(
        "--progress",
        action="store_true",
        help="a progress bar on stderr even when it is not a terminal (default: when stderr is a terminal;"
        " for tree and branch, when their output is not on that terminal too)",
    )
    progress.add_argument("--no-progress", action="store_true", help="no progress bar")
    limits = argparse.ArgumentParser(add_help=False)
    limits.add_argument("--since", metavar="ID", help="only entries after this one")
    limits.add_argument("--limit", type=_nonneg_int, metavar="N", help="at most N entry lines")
    p = sub.add_parser(
        "tree",
        parents=[common, previews, limits, progress],
        description="The tree, drawn like Pi's /tree and printed as it is walked: a run without forks "
        "stays at one indentation, only forks indent, and deep branching folds into ⋯N (N levels). "
        "--since ID keeps the entries appended after ID (file order). --json is written node by node "
        '("truncated": true when --limit cut it).',
    )
    p.add_argument(
        "--around",
        metavar="ID",
        help="the root, the 5 entries above ID, ID and 20 entries of its subtree "
        "(--limit and --depth, default 1, change that)",
    )
    p.add_argument(
        "--depth", type=_nonneg_int, metavar="N", help="at most N levels of forks (branches deeper are one line each)"
    )
    p.add_argument(
        "--branches-only",
        action="store_true",
        help="only roots, forks, leaves, labelled entries, compactions and the leaf",
    )
    p = sub.add_parser(
        "branch",
        parents=[common, previews, limits, progress],
        description="The branch root → leaf (or root → --from ID), printed as it is read. --since ID "
        "keeps the entries of the branch after ID (ID must be on it); --limit N the first N of them.",
    )
    p.add_argument("--from", dest="from_id", metavar="ID", help="end the branch at this entry instead of the leaf")
    p = sub.add_parser("context", parents=[common, previews])
    p.add_argument("--llm", action="store_true", help="show convert_to_llm output (what a provider receives)")
    p = sub.add_parser(
        "entries",
        parents=[common],
        description="Entries in file order (line, id, parentId, role or type), printed as they are read. "
        '--since ID keeps the entries after ID in the file; --limit N the first N of them ("truncated": '
        "true in --json when it cut the list).",
    )
    p.add_argument("--since", metavar="ID", help="only entries after this one in the file")
    p.add_argument("--limit", type=_nonneg_int, metavar="N", help="at most N entry lines")
    sub.add_parser("validate", parents=[common, progress])
    sub.add_parser("rpc", add_help=False)  # main() hands its words to sessiontree.rpc unparsed

    summ = argparse.ArgumentParser(add_help=False)
    g = summ.add_argument_group("summarizer")
    g.add_argument(
        "--summarizer",
        choices=SUMMARIZER_NAMES,
        default=None,
        help="who writes the summary (default offline: extractive, no model, no network)",
    )
    g.add_argument(
        "--model",
        metavar="M",
        help=f"model id for {names_text('/')} (default {names_text(' / ', '${env}_MODEL')})",
    )
    g.add_argument(
        "--base-url",
        metavar="URL",
        help=f"API base URL for {names_text('/')} (default {names_text(' / ', '${env}_BASE_URL')})",
    )
    g.add_argument("--instructions", metavar="TEXT", help="extra focus for the summary (Pi's custom instructions)")
    g.add_argument(
        "--context-window",
        type=_pos_int,
        metavar="N",
        help="the summarizing model's context window in tokens (limits the output budget)",
    )
    g.add_argument(
        "--max-tokens",
        type=_pos_int,
        metavar="N",
        help="the summarizing model's output limit in tokens (default 16384)",
    )
    w = summ.add_argument_group("writing")
    w.add_argument("--dry-run", action="store_true", help="show what would happen; write nothing")
    w.add_argument(
        "--progress", action="store_true", help="print progress lines to stderr even when it is not a terminal"
    )
    w.add_argument(
        "--lock-timeout",
        type=_nonneg_float,
        metavar="SECONDS",
        default=None,
        help="wait this long for another writer's lock (default: fail at once, exit 2)",
    )
    p = documented_parser(
        sub,
        "compact",
        parents=[common, summ],
        description="Compact the active branch like Pi's /compact.",
        epilog=_COMPACT_EPILOG,
    )
    p.add_argument(
        "--keep-recent-tokens",
        type=_nonneg_int,
        metavar="N",
        help="tokens of recent context kept verbatim (default 20000)",
    )
    p.add_argument(
        "--reserve-tokens",
        type=_nonneg_int,
        metavar="N",
        help="Pi's reserveTokens (default 16384): with --context-window, --dry-run reports whether "
        "Pi would auto-compact (tokens > window - reserve); it does not change where a manual "
        "compaction cuts",
    )
    p = documented_parser(
        sub,
        "navigate",
        parents=[common, summ],
        description="Move to another point of the tree like Pi's /tree.",
        epilog=_NAVIGATE_EPILOG,
    )
    p.add_argument("target_id", metavar="TARGET_ID", help="the entry to go to")
    p.add_argument(
        "--summarize", action="store_true", help="append a branch_summary of the abandoned branch at the new position"
    )
    p.add_argument(
        "--replace-instructions",
        action="store_true",
        help="--instructions replace the default summary prompt instead of adding to it",
    )
    p.add_argument("--label", metavar="TEXT", help="label the target (an empty TEXT clears its label)")
    p = sub.add_parser("export-html", parents=[common, progress])
    p.add_argument("-o", "--output", metavar="OUT.html", help="where to write (default: FILE with .html)")
    p.add_argument("--scrub", action="store_true", help="scrub secrets first (see sessiontree scrub --help)")
    p.add_argument("--replay", choices=("keep", "drop"), default="keep", help="with --scrub: replay fields policy")
    p.add_argument("--header", action="store_true", help="with --scrub: also scrub the header's cwd and parentSession")
    p = sub.add_parser(
        "cache",
        description="Saved indexes make a second open of a large session cheap. They live in "
        "$SESSIONTREE_INDEX_CACHE (a folder, or 'off'), else $XDG_CACHE_HOME/sessiontree, else "
        "~/.cache/sessiontree. Clearing only removes our own files; nothing is ever needed there.",
    )
    p.add_argument("action", choices=["info", "clear"])
    p.add_argument("--json", action="store_true", help="one JSON document")
    for name in ("info", "tree", "branch", "context", "entries", "validate", "export-html"):
        if name in action.choices:
            action.choices[name].epilog = _SAVED_INDEX_EPILOG
    # the commands whose parsers their own modules add (fleet, scrub, otel, convert, ...)
    for module in dict.fromkeys(c.parser for c in COMMANDS if c.parser is not None and only in (None, c.name)):
        importlib.import_module(module).add_parsers(sub)
    return parser


def cmd_cache(args: argparse.Namespace) -> int:
    """``sessiontree cache info|clear``: the folder, its saved indexes and rows; or remove them."""
    from .. import index_cache

    if args.action == "clear":
        n = index_cache.clear()
        folder = index_cache.resolve()
        if args.json:
            _write_out(json_document({"folder": str(folder) if folder else None, "removed": n}) + "\n", flush=True)
        else:
            _write_out(f"removed {n} files from {folder if folder else '(cache off)'}\n", flush=True)
        return 0
    inf = index_cache.info()
    doc = {
        "folder": str(inf.folder) if inf.folder else None,
        "enabled": inf.folder is not None,
        "exists": inf.exists,
        "files": inf.files,
        "bytes": inf.bytes,
        "temp_files": inf.temp_files,
        "min_bytes": index_cache.min_bytes(),
        "max_bytes": index_cache.max_bytes(),
    }
    if args.json:
        _write_out(json_document(doc) + "\n", flush=True)
    elif inf.folder is None:
        _write_out("index cache: off (SESSIONTREE_INDEX_CACHE=off)\n", flush=True)
    else:
        _write_out(
            f"index cache: {inf.folder}{'' if inf.exists else ' (not created yet)'}\n"
            f"files: {inf.files} ({inf.bytes} bytes){f', {inf.temp_files} temp' if inf.temp_files else ''}\n"
            f"saved for files of at least {doc['min_bytes']} bytes, at most {doc['max_bytes']} bytes kept\n",
            flush=True,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    0 success; 1 ``validate`` found problems, ``compact`` found nothing to compact, ``navigate``
    would write nothing; 2 usage error / missing, unreadable or non-Pi file / unknown id / a
    looping active branch where one is needed / locked file / summarizer misconfigured or
    failed / an append failed (disk full, file too large) / standard output full or closed;
    130 interrupted. Errors are one line on stderr, never a traceback; with ``--json`` every
    failure also prints ``{"error": true, "exit_code": N, "message": ...}`` on stdout (when
    stdout can be written).
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    rest = list(sys.argv[1:] if argv is None else argv)
    row = BY_NAME.get(rest[0]) if rest else None
    if row is not None and row.calls == "argv":  # rpc: Pi's launch flags, see sessiontree.rpc
        return row.load()(rest[1:])
    # a command named first: only its parser is built (any other first word, e.g. --help or a
    # misspelt command, needs them all for its answer)
    parser = build_parser(only=row.name if row is not None else None)
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's own usage line, not the top-level one argparse would print
            getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if code and "--json" in (sys.argv[1:] if argv is None else list(argv)):
            try:  # argparse already explained on stderr
                _write_out(
                    json_document({"error": True, "exit_code": code, "message": "usage error"}) + "\n", flush=True
                )
            except (_OutputError, BrokenPipeError):
                _silence_stdout()
        return code
    as_json = bool(getattr(args, "json", False))

    def fail(message: str, code: int = 2) -> int:
        return print_failure(message, code, as_json)

    if getattr(args, "max_preview", 0) < 0:
        return fail("--max-preview must be >= 0")
    if sys.stdout is None:  # started with fd 1 closed: refuse before doing anything
        return fail("standard output is closed; nothing done")
    command = BY_NAME[args.command]
    if command.calls == "args":  # it reads its own inputs (a SOURCE, an action) and maps its errors
        try:
            rc = int(command.load()(args))
            try:
                _write_out("", flush=True)  # surface a full or closed stdout here, not at exit
            except (_OutputError, BrokenPipeError):
                if rc == 0:
                    raise
                _silence_stdout()  # the command failed and said why already: one line, not two
            return rc
        except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
            _silence_stdout()
            return 0
        except _OutputError as exc:
            _silence_stdout()
            return print_failure(str(exc), 2, False)
        except OSError as exc:  # a write the command did not map: its own print to a full stdout?
            try:
                _write_out("", flush=True)  # stdout's pending bytes fail again if it was stdout
            except BrokenPipeError:
                _silence_stdout()
                return 0
            except _OutputError as out:
                _silence_stdout()
                return print_failure(str(out), 2, False)
            where = f" {exc.filename}" if exc.filename is not None else ""
            return fail(f"cannot write{where}: {exc.strerror or exc}")
    from ..session import Session  # here: commands that read a SOURCE (search, stats) never load it

    try:
        session = Session.open(args.file, lock_timeout=getattr(args, "lock_timeout", None))
    except FileNotFoundError:
        return fail(f"{args.file}: no such file")
    except SessionFormatError as exc:
        text = str(exc)
        converted = None if args.command in WRITING_COMMANDS else _open_converted(args.file)
        if converted is None:
            return fail(text if "not a valid pi session" in text else f"{args.file}: not a Pi session ({text})")
        session = converted
    except (OSError, SessionError) as exc:
        return fail(f"{args.file}: cannot read: {exc}")
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        return fail(f"{args.file}: cannot read: unexpected {type(exc).__name__}: {exc}")
    entries_before = len(session)
    run = command.load()
    try:
        rc = run(session, args)
        _write_out("", flush=True)  # surface a full or closed stdout here, not at exit
        return rc
    except SessionCycleError as exc:
        return fail(f"{args.file}: parentId cycle ({exc}); Pi cannot open this session")
    except EntryNotFoundError as exc:
        return fail(str(exc))
    except _CliFailure as exc:
        return fail(str(exc), exc.code)
    except SessionLockedError as exc:
        return fail(f"{exc}; nothing written (retry later, or wait with --lock-timeout SECONDS)")
    except _OutputError as exc:
        _silence_stdout()
        done = "; the session file was written" if len(session) != entries_before else ""
        return print_failure(f"{exc}{done}", 2, False)
    except KeyboardInterrupt:
        print("sessiontree: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except (SessionError, ValueError) as exc:  # ContextError, EstimateError are ValueErrors
        return fail(f"{args.file}: {exc}")
    except OSError as exc:  # an append failed: disk full, file too large, I/O error
        return fail(f"{args.file}: cannot write: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        return fail(f"{args.file}: unexpected {type(exc).__name__}: {exc}")
    finally:
        try:
            session.close()
        except Exception as exc:  # noqa: BLE001 - a failed final flush/close is an error, not a traceback
            print_failure(f"{args.file}: cannot close: {exc}", 2, False)


def _open_converted(path: str) -> Session | None:
    """A Claude Code transcript or Codex rollout opened for a read command, or None.

    Converted to Pi in memory (:func:`sessiontree.convert.open_as_pi`), with a note on stderr
    naming the format; None when the file is none of them (or a Pi file that does not open)."""
    from ..convert import open_as_pi

    try:
        session, result = open_as_pi(path)
    except (OSError, SessionTreeError):  # none of the formats, unreadable, not a regular file
        return None
    if result.source_format == "pi":
        session.close()
        return None
    try:
        print(
            f"sessiontree: note: {safe_text(path)} is a {result.source_format} file, read as a Pi session "
            f"converted in memory ({result.lines} lines, {len(result.problems)} problems; nothing written)",
            file=sys.stderr,
        )
    except (OSError, ValueError, AttributeError):
        pass
    return session


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
