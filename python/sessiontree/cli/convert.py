"""``sessiontree convert`` and ``sessiontree convert-all``: Claude Code and Codex files to Pi
sessions and back, over the public :mod:`sessiontree.convert` API. Registered by :mod:`.app`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import orjson

from .args import _pos_int, documented_parser, progress_flags, ray_flags

_CONVERT_EPILOG = """SRC's format is detected from the content of its first lines (--from auto, the default):
a Claude Code transcript, a Codex rollout (either layout) or a Pi session. --to pi (default)
writes a Pi session; Claude Code sidechains and subagent files become Pi sessions of their own
beside OUT (parentSession naming OUT). --from pi --to claude-code|codex converts back: lines
that came from that format come back exactly; Codex holds one chain, so only the active branch
is written (the rest is named in the summary). Every source line is kept: what Pi has no field
for travels in each entry's "source" side field. Outputs are written atomically (never through
a symlink, over the source, or more readable than it).

exit codes: 0 written; 2 SRC not recognised (one line), unreadable, bad options, refused output
(a symlink, not a regular file, the source)"""


_CONVERT_ALL_EPILOG = """SRC_DIR: a store (Claude Code's ~/.claude/projects, Codex's ~/.codex/sessions with its
YYYY/MM/DD folders, a Pi store, or a mix), a glob, or files: each *.jsonl file's format is
detected from its content (--from to force one). Each becomes a Pi session at the same path
below DIR; Claude Code sidechain and subagent sessions are written beside it (a session's
subagents/*.jsonl files convert with it). Runs on the fleet's engines: local (a process pool;
in this process for a small store) or --engine ray (--address of a running cluster; DIR must be
shared with the workers). SRC_DIR may be objects in storage (s3://bucket/prefix?endpoint_override=...,
as for stats): each object is read into memory and its Pi sessions written below DIR at its key's
path (no .. or absolute part: never outside DIR), mode 0600.

A file that cannot be converted (not recognised, unreadable, a refused output) is a failed row;
damaged lines are recorded problems and the file is still converted. Nothing is written through
a symbolic link inside DIR, over a source, or more readable than its source; a DIR inside
SRC_DIR is not read. One JSON line per session on stdout (path, output, source_format, files,
lines, problems, error); with --json, one JSON document instead (the totals and the rows). A
progress bar on stderr when it is a terminal (--progress / --no-progress).

exit codes: 0 every session converted; 1 some sessions failed (see their lines); 2 bad options,
SRC_DIR missing, DIR inside SRC_DIR, missing extra for --engine ray"""


def add_parsers(sub: Any) -> None:
    """Register ``convert`` and ``convert-all`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "convert",
        description="Convert SRC to OUT (sessiontree.convert.to_pi / from_pi).",
        epilog=_CONVERT_EPILOG,
    )
    p.add_argument("src", metavar="SRC")
    p.add_argument(
        "-o", "--output", metavar="OUT", required=True, help="the file to write (a file: - is refused, not stdout)"
    )
    p.add_argument("--from", dest="source", choices=("auto", "claude-code", "codex", "pi"), default="auto")
    p.add_argument("--to", dest="target", choices=("pi", "claude-code", "codex"), default="pi")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")

    p = documented_parser(
        sub,
        "convert-all",
        description="Convert every session of SRC_DIR to Pi sessions below DIR (sessiontree.convert.convert_all).",
        epilog=_CONVERT_ALL_EPILOG,
    )
    p.add_argument(
        "source", metavar="SRC_DIR", nargs="+", help="directory, glob, files, or s3://bucket/prefix (objects)"
    )
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="the directory to write into")
    p.add_argument("--from", dest="source_format", choices=("auto", "claude-code", "codex", "pi"), default="auto")
    ray_flags(p)
    p.add_argument("--workers", type=_pos_int, metavar="N", help="processes (local) or Ray concurrency")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    progress_flags(p)


def _doc(r: Any) -> dict[str, Any]:
    return {
        "source_format": r.source_format,
        "target_format": r.target_format,
        "lines": r.lines,
        "written": r.written,
        "messages": r.messages,
        "compactions": r.compactions,
        "custom": r.custom,
        "files": list(r.files),
        "problems": [{"file": p.file, "line": p.line, "kind": p.kind, "message": p.message} for p in r.problems],
        "not_carried": list(r.not_carried),
    }


def run(args: argparse.Namespace) -> int:
    """Run ``convert`` or ``convert-all``; returns the exit code."""
    if args.command == "convert-all":
        return _convert_all(args)
    from .. import convert
    from ..errors import SessionTreeError

    def fail(message: str) -> int:
        print(f"sessiontree: error: {message}", file=sys.stderr)
        if args.json:
            from .render import json_document

            sys.stdout.write(json_document({"error": True, "exit_code": 2, "message": message}) + "\n")
            sys.stdout.flush()
        return 2

    if args.output == "-":  # not standard output: the outputs are files (sidechains beside OUT)
        return fail("convert writes files, not standard output: give -o a file name (./- for a file named -)")
    try:
        source = args.source
        if source == "auto":
            source = convert.detect(args.src)
        if args.target == "pi":
            r = convert.to_pi(args.src, args.output, source_format=source)
        elif source == "pi":
            r = convert.from_pi(args.src, args.output, to=args.target)
        else:
            return fail(f"{args.src}: {source} -> {args.target}: convert to pi first (--to pi), then from pi")
    except FileNotFoundError:
        return fail(f"{args.src}: no such file")
    except SessionTreeError as exc:
        return fail(str(exc).replace("\n", " "))
    except OSError as exc:
        name = exc.filename if exc.filename is not None else args.src
        return fail(f"{name}: {exc.strerror or exc}")
    if args.json:
        from .render import json_document

        sys.stdout.write(json_document(_doc(r)) + "\n")
    else:
        extra = f" (+{len(r.files) - 1} sidechain/subagent files)" if len(r.files) > 1 else ""
        print(f"{r.source_format} -> {r.target_format}: {r.lines} lines, {r.written} written to {r.output}{extra}")
        for p in r.problems[:20]:
            print(f"  {p.file}:{p.line}: {p.kind}: {p.message}")
        if len(r.problems) > 20:
            print(f"  ... {len(r.problems) - 20} more problems (--json lists them all)")
        for n in r.not_carried:
            print(f"  not carried: {n}")
    sys.stdout.flush()
    return 0


def _convert_all(args: argparse.Namespace) -> int:
    from .. import convert
    from .._progress import close_bar, progress_bar, stderr_is_terminal
    from ..errors import SessionTreeError
    from .render import _OutputError, _write_out, json_document, print_failure, safe_text

    from ..fleet._sources import is_url

    for s in args.source:
        if not is_url(s) and not any(c in s for c in "*?[") and not os.path.exists(s):
            return print_failure(f"{s}: no such file or directory", 2, args.json)
    wanted = (args.progress or stderr_is_terminal()) and not args.no_progress
    state: dict[str, Any] = {"bar": None}

    def tick(n: int) -> None:
        if state["bar"] is not None:
            state["bar"](n)

    if wanted and args.engine == "local":
        from ..fleet import resolve_source

        try:
            total = len(resolve_source(args.source))
        except (OSError, ValueError):
            total = 0
        state["bar"] = progress_bar(total, True)
    from .scrub import _text_row

    def show(row: Any) -> None:  # each row as its session is done (the summary at the end)
        _write_out(orjson.dumps(_text_row(row.to_json())).decode() + "\n", flush=True)

    try:
        result = convert.convert_all(
            args.source,
            args.out,
            source_format=args.source_format,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            progress=tick if args.engine == "local" else wanted,
            on_row=None if args.json else show,
        )
    except (BrokenPipeError, _OutputError):
        raise  # standard output failed under a row: the CLI's main says so (or stops quietly)
    except ImportError as exc:
        return print_failure(str(exc), 2, args.json)
    except SessionTreeError as exc:
        return print_failure(str(exc), 2, args.json)
    except (OSError, ValueError) as exc:
        return print_failure(str(exc), 2, args.json)
    finally:
        if state["bar"] is not None:
            close_bar(state["bar"])
    if args.json:
        doc = result.summary()
        doc["rows"] = [_text_row(r.to_json()) for r in result.rows]
        sys.stdout.write(json_document(doc) + "\n")
    else:
        s = result.summary()
        formats = ", ".join(f"{k} {v}" for k, v in s["by_format"].items())
        print(
            f"{s['sessions']} sessions: {s['converted']} converted ({formats or 'none'}), {s['failed']} failed; "
            f"{s['files']} files written, {s['problems']} problems recorded",
            file=sys.stderr,
        )
        for r in result.rows:
            if r.error is not None:
                print(f"  {r.error_kind}: {safe_text(r.path)}: {safe_text(r.error)}", file=sys.stderr)
    sys.stdout.flush()
    return 1 if result.failed else 0
