"""``sessiontree convert``: Claude Code and Codex files to Pi sessions and back, over the public
:mod:`sessiontree.convert` API. Registered by :mod:`.app`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from .args import documented_parser

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


def add_parsers(sub: Any) -> None:
    """Register ``convert`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "convert",
        description="Convert SRC to OUT (sessiontree.convert.to_pi / from_pi).",
        epilog=_CONVERT_EPILOG,
    )
    p.add_argument("src", metavar="SRC")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help="the file to write")
    p.add_argument("--from", dest="source", choices=("auto", "claude-code", "codex", "pi"), default="auto")
    p.add_argument("--to", dest="target", choices=("pi", "claude-code", "codex"), default="pi")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")


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
    """Run ``convert``; returns the exit code."""
    from .. import convert
    from ..errors import SessionTreeError

    def fail(message: str) -> int:
        print(f"sessiontree: error: {message}", file=sys.stderr)
        if args.json:
            sys.stdout.write(orjson.dumps({"error": True, "exit_code": 2, "message": message}).decode() + "\n")
            sys.stdout.flush()
        return 2

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
        sys.stdout.write(orjson.dumps(_doc(r)).decode() + "\n")
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
