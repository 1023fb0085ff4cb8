"""``sessiontree scrub`` and ``sessiontree scrub-all``.

Over the public :mod:`sessiontree.scrub` and :mod:`sessiontree.fleet` APIs; registered by
:mod:`.commands`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from .._progress import close_bar, progress_bar
from .args import _pos_int, documented_parser, progress_flags
from .render import progress_wanted

_SCRUB_EPILOG = """Every JSON string of every line is searched (keys too); each secret becomes
[REDACTED:<kind>:<hash6>] (hash6: SHA-256 of the value, 6 hex digits). Ids, parentIds, entry
count and order are unchanged: the output opens in Pi and in sessiontree with the same tree and
leaf. Provider replay fields (thinkingSignature, textSignature, thoughtSignature): --replay keep
(default; unchanged, so a provider replay still verifies) or drop (removed).

--report PATH|- writes JSON: per finding the line, entry id, JSON pointer, kind, offsets (code
points) and hash; never a value. It is never more readable than FILE. FILE, OUT and the report
must be three different files (compared by resolved path and by device/inode): a clash is
refused before anything is written. --check writes nothing but its report.

--in-place also copies, scrubbed, what another writer that takes no lock (Pi) appends while it
runs; it refuses a file with other hard links (the secrets would stay readable under the other
names) and a file that keeps growing. --json prints the report's summary (no findings) as one
JSON document. A progress bar on stderr when it is a terminal (--progress / --no-progress).

exit codes: 0 done (--check: nothing found); 1 --check found secrets; 2 bad options, unreadable
input, refused output (the input itself, a symlink, not a regular file, two roles on one file),
locked file"""

_SCRUB_ALL_EPILOG = """Scrubs every session of SOURCE (a directory, a glob or files) into DIR,
keeping the paths below SOURCE's directory. One JSON line per session on stdout as each is done
(path, output, found, kinds, error_kind, error), then a summary on stderr (sessions, scrubbed, failed, secrets replaced by
kind) and each failed session; with --json, one JSON document instead (the totals and the rows).
Existing outputs are replaced atomically. Nothing is written through a symbolic link inside
DIR (a folder or a file); a DIR inside SOURCE is not read as a source. A progress bar on stderr
when it is a terminal (--progress / --no-progress).

exit codes: 0 done; 1 some sessions failed (see their lines); 2 bad options"""


def add_parsers(sub: Any) -> None:
    """Register ``scrub`` and ``scrub-all`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "scrub",
        description="Scrub secrets from FILE (sessiontree.scrub.scrub_file).",
        epilog=_SCRUB_EPILOG,
    )
    p.add_argument("file", metavar="FILE")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("-o", "--output", metavar="OUT", help="write the scrubbed session to OUT")
    mode.add_argument("--in-place", action="store_true", help="rewrite FILE atomically under its writer lock")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 when anything is found")
    _common(p)
    p.add_argument("--report", metavar="PATH|-", help="write the JSON report to PATH (- for stdout)")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS", help="wait this long for the writer lock")

    p = documented_parser(
        sub,
        "scrub-all",
        description="Scrub every session of SOURCE into DIR (sessiontree.fleet.scrub_sessions).",
        epilog=_SCRUB_ALL_EPILOG,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="directory, glob or files (local)")
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="the directory to write into")
    p.add_argument(
        "--workers",
        type=_pos_int,
        metavar="N",
        help="processes scrubbing at once (default: one per CPU from 256 MiB of sessions, else 1)",
    )
    _common(p)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replay", choices=("keep", "drop"), default="keep", help="replay fields policy (default keep)")
    p.add_argument("--header", action="store_true", help="also search the header's cwd and parentSession")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    progress_flags(p)


def run(args: argparse.Namespace) -> int:
    """Run ``scrub`` or ``scrub-all``; returns the exit code."""
    from ..errors import SessionError
    from .render import print_failure as _fail

    try:
        if args.command == "scrub":
            return _scrub(args)
        return _scrub_all(args)
    except SessionError as exc:
        return _fail(str(exc), 2, args.json)
    except BrokenPipeError:  # the reader went away (`| head`): the CLI's main stops quietly
        raise
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        return _fail(f"{name}: {exc.strerror or exc}" if name else str(exc.strerror or exc), 2, args.json)


def _scrub(args: argparse.Namespace) -> int:
    from ..errors import SessionArgumentError
    from ..scrub import check_distinct_files, scrub_file

    if args.json and args.report == "-":
        raise SessionArgumentError("--json and --report - both write to standard output: give --report a PATH")
    # three different files, or nothing is written
    check_distinct_files({"input": args.file, "output": args.output, "report": args.report})
    try:
        source_st = os.stat(args.file)
    except OSError:
        source_st = None  # scrub_file says why
    bar = progress_bar(source_st.st_size if source_st is not None else 0, progress_wanted(args), "B", scale=True)
    try:
        report = scrub_file(
            args.file,
            args.output,
            in_place=args.in_place,
            check=args.check,
            header=args.header,
            replay=args.replay,
            record=args.report is not None or args.json,
            lock_timeout=args.lock_timeout,
            progress=bar,
        )
    finally:
        close_bar(bar)
    from .render import json_document

    fmt = _format_of(args.file)
    report_doc = _text_row(report.to_json(), ("source", "output"))
    report_doc["sourceFormat"] = fmt
    if args.report is not None:
        doc = (json_document(report_doc) + "\n").encode("utf-8")
        if args.report == "-":
            sys.stdout.buffer.write(doc)
            sys.stdout.flush()
        else:
            from ..session import atomic_write

            # never more readable than the session, never over it (checked again before the rename)
            atomic_write(Path(args.report), [doc], like=source_st, source=source_st)
    if args.json:
        summary = {k: v for k, v in report_doc.items() if k != "findings"}
        sys.stdout.write(json_document(summary) + "\n")
        sys.stdout.flush()
        return 1 if args.check and report.found else 0
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.kinds.items()))
    what = "found" if args.check else "replaced"
    summary_line = f"{report.found} secret(s) {what}" + (f" ({kinds})" if kinds else "")
    summary_line += f"; replay fields: {report.replay_fields} ({args.replay})"
    if fmt in ("claude-code", "codex"):
        summary_line += f"; a {fmt} file, scrubbed in its own format"
    print(summary_line, file=sys.stderr if args.report == "-" else sys.stdout)
    return 1 if args.check and report.found else 0


def _format_of(path: str) -> str | None:
    """The format of ``path`` from its first lines (``pi``, ``claude-code``, ``codex``), or None.
    The scrubber reads every JSON string of every line whatever the format, so a Claude Code
    transcript or a Codex rollout is scrubbed in its own format (the output opens in that
    agent's tools and converts to Pi as the source would)."""
    from ..convert import detect

    try:
        return detect(path)
    except (OSError, ValueError):
        return None


def _text_row(row: dict[str, Any], keys: tuple[str, ...] = ("path", "output")) -> dict[str, Any]:
    """A row with its paths as text (a name that is not UTF-8: ``\\xNN`` for each such byte)."""
    from ..fleet import path_text

    out = dict(row)
    for k in keys:
        if isinstance(out.get(k), str):
            out[k] = path_text(out[k])
    if isinstance(out.get("error"), str):
        out["error"] = out["error"].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return out


def _scrub_all(args: argparse.Namespace) -> int:
    from ..fleet import scrub_sessions

    rows: list[dict[str, Any]] = []
    state: dict[str, Any] = {"bar": None}
    wanted = progress_wanted(args)

    def progress(done: int, total: int) -> None:
        if state["bar"] is None:  # the total is known once the sources are listed
            state["bar"] = progress_bar(total, wanted, "sessions")
        state["bar"](1)

    def on_row(row: dict[str, Any]) -> None:  # each row as its session is done (streamed)
        row = _text_row(row)
        rows.append(row)
        if not args.json:
            sys.stdout.write(orjson.dumps(row).decode() + "\n")
            sys.stdout.flush()

    try:
        scrub_sessions(
            args.source,
            args.out,
            replay=args.replay,
            header=args.header,
            progress=progress,
            workers=args.workers,
            on_row=on_row,
        )
        failed = sum(row["error"] is not None for row in rows)
    finally:
        if state["bar"] is not None:
            close_bar(state["bar"])
    kinds: dict[str, int] = {}
    for r in rows:
        for k, n in (r.get("kinds") or {}).items():
            kinds[k] = kinds.get(k, 0) + n
    if not args.json:  # the summary on stderr, as convert-all's (--json has it in the document)
        from .render import safe_text

        found = sum(r["found"] or 0 for r in rows)
        shown = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        print(
            f"{len(rows)} sessions: {len(rows) - failed} scrubbed, {failed} failed; "
            f"{found} secret(s) replaced" + (f" ({shown})" if shown else ""),
            file=sys.stderr,
        )
        for r in rows:
            if r["error"] is not None:
                print(f"  {safe_text(r['path'])}: {safe_text(r['error'])}", file=sys.stderr)
    else:
        from .render import json_document

        doc = {
            "sessions": len(rows),
            "written": sum(r["error"] is None for r in rows),
            "failed": failed,
            "found": sum(r["found"] or 0 for r in rows),
            "kinds": kinds,
            "replayPolicy": args.replay,
            "rows": rows,
        }
        sys.stdout.write(json_document(doc) + "\n")
    sys.stdout.flush()
    return 1 if failed else 0
