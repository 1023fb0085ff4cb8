"""The fleet commands of the CLI (``sessiontree stats``, ``sessiontree compact-all``), over the
public :mod:`sessiontree.fleet` API. Registered by :mod:`sessiontree.cli`; they take a SOURCE
(directory, glob or URL), not one FILE."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from .cli import _pos_int as _cli_pos_int

COMMANDS = ("stats", "compact-all")

_STATS_EPILOG = """SOURCE: a directory (Pi's layout, e.g. ~/.pi/agent/sessions), a glob ('dir/**/*.jsonl'),
or a URL (s3://bucket/prefix; credentials and endpoint from the environment or the URL's query,
as pyarrow.fs reads them). Files that cannot be read become rows with error_kind set.

exit codes: 0 written; 2 bad options, missing extra (pip install 'sessiontree[fleet]'), or the
output could not be written"""

_COMPACT_ALL_EPILOG = """Compacts each session whose context is over the threshold (tokens > --context-window minus
--reserve-tokens) and not already compacted at its leaf: one compaction entry per session,
appended under the session's writer lock. --outcomes FILE records one JSON line per session as
it finishes; rerunning with the same FILE skips what is done (a killed run resumes).

Summarizers: offline (default), openai, anthropic (as `sessiontree compact`).

exit codes: 0 done (see the outcomes; sessions that failed are listed); 2 bad options or
summarizer misconfigured"""


#: argparse type for an integer > 0: the one home is ``cli._pos_int``; this CLI says
#: ``must be > 0`` for a negative value too (``sessiontree`` itself says ``must be >= 0, not -3``).
_pos_int = functools.partial(_cli_pos_int, negative="must be > 0")


def add_parsers(sub: Any) -> None:
    """Register ``stats`` and ``compact-all`` on the CLI's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "stats",
        help="one row per session of a whole store, to Parquet",
        description="Stats of every session of SOURCE (sessiontree.fleet.session_stats).",
        epilog=_STATS_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="directory, glob, file or URL (several allowed)")
    p.add_argument("--parquet", metavar="OUT", required=True, help="the Parquet file to write")
    p.add_argument("--entries-parquet", metavar="OUT", help="also write the entries table (one row per entry)")
    p.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: a process pool here (default); ray: Ray Data (ray.init, or --address)",
    )
    p.add_argument("--address", metavar="ADDR", help="a running Ray cluster's address (engine ray)")
    p.add_argument("--workers", type=_pos_int, metavar="N", help="processes (local) or Ray concurrency")
    p.add_argument(
        "--context-window",
        type=_pos_int,
        metavar="N",
        default=200_000,
        help="window for should_compact (default 200000)",
    )
    p.add_argument("--reserve-tokens", type=int, metavar="N", help="Pi's reserveTokens (default 16384)")
    p.add_argument("--max-bytes", type=_pos_int, metavar="N", help="files larger than this become too_large rows")
    p.add_argument("--progress", action="store_true", help="a progress bar even when stderr is not a terminal")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = sub.add_parser(
        "compact-all",
        help="compact every session over the threshold, in bulk",
        description="Bulk compaction of SOURCE (sessiontree.fleet.compact_sessions).",
        epilog=_COMPACT_ALL_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="directory, glob or files (local)")
    p.add_argument(
        "--context-window",
        type=_pos_int,
        metavar="N",
        required=True,
        help="the conversation model's context window (tokens)",
    )
    p.add_argument("--reserve-tokens", type=int, metavar="N", help="Pi's reserveTokens (default 16384)")
    p.add_argument("--keep-recent-tokens", type=int, metavar="N", help="tokens kept verbatim (default 20000)")
    p.add_argument("--concurrency", type=_pos_int, metavar="N", default=4, help="summary calls at once (default 4)")
    p.add_argument("--outcomes", metavar="FILE", help="JSON-lines outcomes file (resumable runs)")
    p.add_argument("--parquet", metavar="OUT", help="also write this run's outcomes table")
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    p.add_argument("--address", metavar="ADDR", help="a running Ray cluster's address (engine ray)")
    p.add_argument("--summarizer", choices=("offline", "openai", "anthropic"), default=None)
    p.add_argument("--model", metavar="M", help="model id for openai/anthropic")
    p.add_argument("--base-url", metavar="URL", help="API base URL for openai/anthropic")
    p.add_argument("--max-tokens", type=_pos_int, metavar="N", help="the summarizing model's output limit")
    p.add_argument("--instructions", metavar="TEXT", help="extra focus for the summaries")
    p.add_argument(
        "--lock-timeout",
        type=float,
        metavar="SECONDS",
        default=None,
        help="wait this long for a session's writer lock (default: record it as locked)",
    )
    p.add_argument("--json", action="store_true", help="print the outcome counts as JSON")
    p.add_argument("--progress", action="store_true", help="a progress bar even when stderr is not a terminal")


def _settings(args: argparse.Namespace) -> Any:
    from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings

    d = DEFAULT_COMPACTION_SETTINGS
    keep = getattr(args, "keep_recent_tokens", None)
    return CompactionSettings(
        enabled=True,
        reserve_tokens=d.reserve_tokens if args.reserve_tokens is None else args.reserve_tokens,
        keep_recent_tokens=d.keep_recent_tokens if keep is None else keep,
    )


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _fail(message: str) -> int:
    from .cli import safe_text

    print(f"sessiontree: error: {safe_text(message)}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    try:
        from . import fleet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return _fail(f"{exc}")
    source = args.source[0] if len(args.source) == 1 else args.source
    try:
        if args.command == "stats":
            progress = (args.progress or _tty()) and not args.no_progress
            table = fleet.session_stats(
                source,
                parquet=args.parquet,
                engine=args.engine,
                address=args.address,
                workers=args.workers,
                context_window=args.context_window,
                settings=_settings(args),
                max_bytes=args.max_bytes,
                progress=progress,
            )
            if args.entries_parquet:
                fleet.entries_table(
                    source,
                    parquet=args.entries_parquet,
                    engine=args.engine,
                    address=args.address,
                    workers=args.workers,
                    max_bytes=args.max_bytes,
                    progress=progress,
                )
            errors = sum(1 for k in table.column("error_kind").to_pylist() if k is not None)
            over = sum(1 for v in table.column("should_compact").to_pylist() if v)
            from .cli import safe_text

            print(
                f"{table.num_rows} sessions ({errors} unreadable, {over} over the compaction threshold) "
                f"-> {safe_text(str(args.parquet))}"
            )
            return 0
        from .summarizers import get_summarizer

        name = args.summarizer or "offline"
        kw: dict = {}
        if name != "offline":
            if args.model:
                kw["model"] = args.model
            if args.base_url:
                kw["base_url"] = args.base_url
            kw["context_window"] = args.context_window
            if args.max_tokens is not None:
                kw["max_output_tokens"] = args.max_tokens
        elif args.model or args.base_url:
            return _fail("--model and --base-url need --summarizer openai or anthropic")
        try:
            summarizer = get_summarizer(name, **kw)
        except (ImportError, ValueError) as exc:
            return _fail(f"summarizer {name!r}: {exc}")
        out = fleet.compact_sessions(
            source,
            summarizer,
            context_window=args.context_window,
            concurrency=args.concurrency,
            settings=_settings(args),
            outcomes=args.outcomes,
            engine=args.engine,
            address=args.address,
            lock_timeout=args.lock_timeout,
            max_tokens=args.max_tokens,
            custom_instructions=args.instructions,
            parquet=args.parquet,
            progress=args.progress or _tty(),
        )
        rows = out.to_pylist()
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        cost = sum(r["cost"] or 0 for r in rows if r["outcome"] == "compacted")
        if args.json:
            import json

            print(json.dumps({"sessions": len(rows), "outcomes": counts, "summary_cost": cost}))
        else:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing to do"
            print(f"{len(rows)} sessions: {shown}; summary cost ${cost:.4f}")
            from .cli import safe_text  # file names and error texts may hold terminal escapes

            for r in rows:
                if r["outcome"] in ("error", "summarizer_error", "locked"):
                    print(f"  {r['outcome']}: {safe_text(r['path'])}: {safe_text(str(r['detail']))}", file=sys.stderr)
        return 0
    except ImportError as exc:  # the fleet extra (pyarrow, ray[data]) is not installed
        return _fail(str(exc))
    except ValueError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write: {exc}")
    except KeyboardInterrupt:
        print("sessiontree: interrupted", file=sys.stderr)
        return 130
