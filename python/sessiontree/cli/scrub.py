"""``sessiontree scrub`` and ``sessiontree scrub-all`` (issue 20), over the public
:mod:`sessiontree.scrub` and :mod:`sessiontree.fleet` APIs. Registered by :mod:`.app`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from .args import documented_parser

COMMANDS = ("scrub", "scrub-all")

_SCRUB_EPILOG = """Every JSON string of every line is searched (keys too); each secret becomes
[REDACTED:<kind>:<hash6>] (hash6: SHA-256 of the value, 6 hex digits). Ids, parentIds, entry
count and order are unchanged: the output opens in Pi and in sessiontree with the same tree and
leaf. Provider replay fields (thinkingSignature, textSignature, thoughtSignature): --replay keep
(default; unchanged, so a provider replay still verifies) or drop (removed).

--report PATH|- writes JSON: per finding the line, entry id, JSON pointer, kind, offsets (code
points) and hash; never a value.

exit codes: 0 done (--check: nothing found); 1 --check found secrets; 2 bad options, unreadable
input, refused output (the input itself, a symlink, not a regular file), locked file"""

_SCRUB_ALL_EPILOG = """Scrubs every session of SOURCE (a directory, a glob or files) into DIR,
keeping the paths below SOURCE's directory. One JSON line per session on stdout (path, output,
found, kinds, error). Existing outputs are replaced atomically.

exit codes: 0 done; 1 some sessions failed (see their lines); 2 bad options"""


def add_parsers(sub: Any) -> None:
    """Register ``scrub`` and ``scrub-all`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "scrub",
        help="replace secrets in a session, keeping it a valid session",
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
        help="scrub every session of a store into a directory",
        description="Scrub every session of SOURCE into DIR (sessiontree.fleet.scrub_sessions).",
        epilog=_SCRUB_ALL_EPILOG,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="directory, glob or files (local)")
    p.add_argument("--out", metavar="DIR", required=True, help="the directory to write into")
    _common(p)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replay", choices=("keep", "drop"), default="keep", help="replay fields policy (default keep)")
    p.add_argument("--header", action="store_true", help="also search the header's cwd and parentSession")


def _err(message: str) -> None:
    print(f"sessiontree: error: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Run ``scrub`` or ``scrub-all``; returns the exit code."""
    from ..errors import SessionError

    try:
        if args.command == "scrub":
            return _scrub(args)
        return _scrub_all(args)
    except SessionError as exc:
        _err(str(exc))
        return 2
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        _err(f"{name}: {exc.strerror or exc}" if name else str(exc.strerror or exc))
        return 2


def _scrub(args: argparse.Namespace) -> int:
    from ..scrub import scrub_file

    report = scrub_file(
        args.file,
        args.output,
        in_place=args.in_place,
        check=args.check,
        header=args.header,
        replay=args.replay,
        record=args.report is not None,
        lock_timeout=args.lock_timeout,
    )
    if args.report is not None:
        doc = orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
        if args.report == "-":
            sys.stdout.buffer.write(doc)
            sys.stdout.flush()
        else:
            from pathlib import Path

            from ..session import atomic_write

            atomic_write(Path(args.report), [doc])
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.kinds.items()))
    what = "found" if args.check else "replaced"
    summary = f"{report.found} secret(s) {what}" + (f" ({kinds})" if kinds else "")
    summary += f"; replay fields: {report.replay_fields} ({args.replay})"
    print(summary, file=sys.stderr if args.report == "-" else sys.stdout)
    return 1 if args.check and report.found else 0


def _scrub_all(args: argparse.Namespace) -> int:
    from ..fleet import scrub_sessions

    failed = 0
    for row in scrub_sessions(args.source, args.out, replay=args.replay, header=args.header):
        failed += row["error"] is not None
        sys.stdout.write(orjson.dumps(row).decode() + "\n")
    sys.stdout.flush()
    return 1 if failed else 0
