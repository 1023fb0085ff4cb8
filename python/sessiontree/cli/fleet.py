"""The fleet commands of the CLI (``sessiontree stats``, ``sessiontree compact-all``), over the
public :mod:`sessiontree.fleet` API. Registered by :mod:`sessiontree.cli`; they take a SOURCE
(directory, glob or URL), not one FILE."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Any

from ..providers import SUMMARIZER_NAMES, names_text
from .args import _nonneg_float, documented_parser, progress_flags, ray_flags
from .args import _pos_int as _cli_pos_int

_STATS_EPILOG = """SOURCE: a directory (Pi's layout, e.g. ~/.pi/agent/sessions), a glob ('dir/**/*.jsonl'),
or a URL (s3://bucket/prefix; credentials and endpoint from the environment or the URL's query,
as pyarrow.fs reads them). Files that cannot be read become rows with error_kind set.

Without --parquet: a summary table (sessions, entries, tokens, cost, the biggest sessions, the
errors). With --parquet OUT: the full table (one row per session, sessiontree.fleet.stats_schema)
written to OUT and a one-line summary. --json prints the summary as one JSON object on stdout.
On stderr, the files that could not be read, each with its error. A progress bar on stderr when
it is a terminal (--progress / --no-progress to choose).

exit codes: 0 written; 2 bad options, a SOURCE that does not exist or cannot be listed
("cannot read"), missing extra (pip install 'sessiontree[fleet]'), or the output could not be
written ("cannot write")"""

_COMPACT_ALL_EPILOG = """Compacts each session whose context is over the threshold (tokens > --context-window minus
--reserve-tokens) and not already compacted at its leaf: one compaction entry per session,
appended under the session's writer lock. --outcomes FILE records one JSON line per session as
it finishes; rerunning with the same FILE skips what is done (a killed run resumes).

A rerun with the same FILE skips only the sessions an earlier run compacted (and says how many);
every other session is decided again under the rerun's options.

Summarizers: offline (default), openai, anthropic (as `sessiontree compact`). The output-budget
rules (the summarizing model's window) apply to model summarizers, not to the offline one.

SIGINT/SIGTERM: no new summary request is sent; the sessions in flight finish and every
appended compaction is recorded (FILE, --parquet) with its cost; then exit 130.

exit codes: 0 done (see the outcomes; sessions that failed are listed); 2 bad options, a SOURCE
that does not exist, or summarizer misconfigured; 130 interrupted"""


#: argparse type for an integer > 0: the one home is ``cli._pos_int``; this CLI says
#: ``must be > 0`` for a negative value too (``sessiontree`` itself says ``must be >= 0, not -3``).
_pos_int = functools.partial(_cli_pos_int, negative="must be > 0")


def add_parsers(sub: Any) -> None:
    """Register ``stats`` and ``compact-all`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "stats",
        description="Stats of every session of SOURCE (sessiontree.fleet.session_stats).",
        epilog=_STATS_EPILOG,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="directory, glob, file or URL (several allowed)")
    p.add_argument(
        "--parquet",
        metavar="OUT",
        help="write the full table (one row per session) here; without it, a summary table is printed",
    )
    p.add_argument("--entries-parquet", metavar="OUT", help="also write the entries table (one row per entry)")
    ray_flags(p, "local: a process pool here (default); ray: Ray tasks (ray.init, or --address)")
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
    progress_flags(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")

    p = documented_parser(
        sub,
        "compact-all",
        description="Bulk compaction of SOURCE (sessiontree.fleet.compact_sessions).",
        epilog=_COMPACT_ALL_EPILOG,
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
    ray_flags(p)
    p.add_argument("--summarizer", choices=SUMMARIZER_NAMES, default=None)
    p.add_argument("--model", metavar="M", help=f"model id for {names_text('/')}")
    p.add_argument("--base-url", metavar="URL", help=f"API base URL for {names_text('/')}")
    p.add_argument("--max-tokens", type=_pos_int, metavar="N", help="the summarizing model's output limit")
    p.add_argument("--instructions", metavar="TEXT", help="extra focus for the summaries")
    p.add_argument(
        "--lock-timeout",
        type=_nonneg_float,
        metavar="SECONDS",
        default=None,
        help="wait this long for a session's writer lock (default: record it as locked)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    progress_flags(p)


def _settings(args: argparse.Namespace) -> Any:
    from ..settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings

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
    from ..cli import safe_text

    from .render import bytes_shown

    print(f"sessiontree: error: {safe_text(bytes_shown(message))}", file=sys.stderr)
    return 2


def _missing_source(sources: list[str]) -> str | None:
    """The first local SOURCE that does not exist (a glob matching nothing is not missing: it
    names no sessions; URLs are checked by listing them)."""
    from ..fleet._sources import is_url

    for src in sources:
        text = src[len("file://") :] if src.startswith("file://") else src
        if is_url(text) or any(c in text for c in "*?["):
            continue
        if not os.path.lexists(text):
            return text
    return None


#: at most this many unreadable files are named on stderr (the Parquet has every one)
_NAMED = 20


def _name_errors(rows: list[tuple[str, str, str]], what: str) -> None:
    """``(path, kind, error)`` of the files that could not be read, on stderr."""
    from ..cli import safe_text
    from .render import bytes_shown, path_shown

    for path, kind, err in rows[:_NAMED]:
        print(f"  {kind}: {path_shown(path)}: {safe_text(bytes_shown(err))}", file=sys.stderr)
    if len(rows) > _NAMED:
        print(f"  ... and {len(rows) - _NAMED} more {what} (see error_kind in the output)", file=sys.stderr)


def _count(values: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        if v is not None:
            out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def _stats(args: argparse.Namespace, fleet: Any, source: Any) -> int:
    from ..cli import safe_text

    progress = (args.progress or _tty()) and not args.no_progress
    # the rows as Python lists: pyarrow (and numpy) imported only to write --parquet
    table = fleet.stats_columns(
        source,
        engine=args.engine,
        address=args.address,
        workers=args.workers,
        context_window=args.context_window,
        settings=_settings(args),
        max_bytes=args.max_bytes,
        progress=progress,
        arrow_soon=bool(args.parquet),  # pyarrow imported while the workers run
    )
    if args.parquet:
        table.write_parquet(args.parquet)
    entry_rows = None
    if args.entries_parquet:
        entry_rows = fleet.entries_table(
            source,
            parquet=args.entries_parquet,
            engine=args.engine,
            address=args.address,
            workers=args.workers,
            max_bytes=args.max_bytes,
            progress=progress,
        ).num_rows
    kinds = table.column("error_kind")
    errors = _count(kinds)
    over = sum(1 for v in table.column("should_compact") if v)
    costs = [c for c in table.column("cost") if c is not None]
    cost = sum(costs) if costs else None
    summary = {
        "sessions": table.num_rows,
        "readable": table.num_rows - sum(errors.values()),
        "errors": errors,
        # Claude Code / Codex files are read as Pi sessions converted in memory
        "formats": _count(table.column("source_format")),
        "over_threshold": over,
        "entries": sum(e or 0 for e in table.column("entries")),
        "entry_rows": entry_rows,
        "cost": cost,
        "parquet": str(args.parquet) if args.parquet else None,
        "entries_parquet": str(args.entries_parquet) if args.entries_parquet else None,
    }
    summary.update(_totals(table))
    bad = [(p, k, e) for p, k, e in zip(table.column("path"), kinds, table.column("error")) if k is not None]
    if args.json:
        from .render import json_document

        print(json_document(summary))
    elif not args.parquet:
        _print_summary(summary, bad)
    else:
        shown = ", ".join(f"{k} {v}" for k, v in errors.items())
        print(
            f"{table.num_rows} sessions ({sum(errors.values())} unreadable{': ' + shown if shown else ''}, "
            f"{over} over the compaction threshold), {summary['entries']} entries"
            + (f", ${cost:.4f}" if cost is not None else "")
            + f" -> {safe_text(str(args.parquet))}"
            + (
                f" ({entry_rows} entry rows -> {safe_text(str(args.entries_parquet))})"
                if entry_rows is not None
                else ""
            )
        )
    if bad:
        print(f"sessiontree: {len(bad)} {'file' if len(bad) == 1 else 'files'} could not be read:", file=sys.stderr)
        _name_errors(bad, "files")
    return 0


#: sessions named in the summary's "biggest sessions"
_BIGGEST = 5


def _totals(table: Any) -> dict[str, Any]:
    """The summary's token totals (``tokens``: input, output, cache read/write, total; None
    where no session has a value) and its ``biggest`` sessions by bytes (path, bytes, entries,
    total tokens, cost), from the stats table."""
    col = {
        name: table.column(name)
        for name in (
            "path",
            "bytes",
            "entries",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "total_tokens",
            "cost",
            "error_kind",
        )
    }

    from .._jsjson import js_whole_numbers

    def total(name: str) -> int | float | None:
        """The column's sum: an int when whole (token counts print as 12, not 12.0)."""
        values = [v for v in col[name] if v is not None]
        return js_whole_numbers(sum(values)) if values else None

    tokens = {
        "input": total("input_tokens"),
        "output": total("output_tokens"),
        "cache_read": total("cache_read_tokens"),
        "cache_write": total("cache_write_tokens"),
        "total": total("total_tokens"),
    }
    readable = [k for k, kind in enumerate(col["error_kind"]) if kind is None]
    readable.sort(key=lambda k: (-(col["bytes"][k] or 0), col["path"][k]))
    biggest = [
        {
            "path": col["path"][k],
            "bytes": col["bytes"][k],
            "entries": col["entries"][k],
            "total_tokens": js_whole_numbers(col["total_tokens"][k]),
            "cost": col["cost"][k],
        }
        for k in readable[:_BIGGEST]
    ]
    return {"tokens": tokens, "biggest": biggest}


def _human_bytes(n: Any) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return "-"  # pragma: no cover


def _num(n: Any) -> str:
    if n is None:
        return "-"
    if isinstance(n, float) and n.is_integer():  # token columns are JSON numbers (float64)
        n = int(n)
    return f"{n:,}"


def _print_summary(summary: dict[str, Any], bad: list[tuple[str, str, str]]) -> None:
    """The readable summary of ``stats`` without ``--parquet``: totals, the biggest sessions
    and the errors, as an aligned table on stdout."""
    from ..cli import safe_text

    t = summary["tokens"]
    cost = summary["cost"]
    lines = [
        f"sessions        {summary['sessions']:,} ({summary['readable']:,} readable, "
        f"{summary['sessions'] - summary['readable']:,} with errors, "
        f"{summary['over_threshold']:,} over the compaction threshold)",
        f"entries         {summary['entries']:,}",
        *(
            [
                "formats         "
                + ", ".join(f"{safe_text(k)} {n:,}" for k, n in summary["formats"].items())
                + " (Claude Code / Codex files converted to Pi in memory)"
            ]
            if set(summary.get("formats", {})) - {"pi"}
            else []
        ),
        f"tokens          {_num(t['total'])} total (input {_num(t['input'])}, output {_num(t['output'])}, "
        f"cache read {_num(t['cache_read'])}, cache write {_num(t['cache_write'])})",
        f"cost            {'-' if cost is None else f'${cost:,.4f}'}",
    ]
    if summary["biggest"]:
        lines += ["", f"biggest sessions (by size, top {_BIGGEST}):"]
        lines.append(f"  {'size':>9}  {'entries':>9}  {'tokens':>13}  {'cost':>10}  path")
        for row in summary["biggest"]:
            c = row["cost"]
            lines.append(
                f"  {_human_bytes(row['bytes']):>9}  {_num(row['entries']):>9}  {_num(row['total_tokens']):>13}  "
                f"{'-' if c is None else f'${c:,.4f}':>10}  {safe_text(row['path'])}"
            )
    lines += ["", "errors:" + ("" if bad else " none")]
    for kind, n in summary["errors"].items():
        lines.append(f"  {safe_text(kind)}: {n:,}")
    if bad:
        lines.append("  (the files are named on stderr)")
    print("\n".join(lines))


def _compact_all(args: argparse.Namespace, fleet: Any, source: Any) -> int:
    import signal
    import threading

    from ..fleet._compact import RunInterrupted
    from ..summarizers import get_summarizer

    name = args.summarizer or "offline"
    kw: dict[str, Any] = {}
    if name != "offline":
        if args.model:
            kw["model"] = args.model
        if args.base_url:
            kw["base_url"] = args.base_url
        kw["context_window"] = args.context_window
        if args.max_tokens is not None:
            kw["max_output_tokens"] = args.max_tokens
    elif args.model or args.base_url:
        return _fail(f"--model and --base-url need --summarizer {names_text()}")
    try:
        summarizer = get_summarizer(name, **kw)
    except (ImportError, ValueError) as exc:
        return _fail(f"summarizer {name!r}: {exc}")
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {}

    def on_signal(signum: int, frame: Any) -> None:
        if not stop.is_set():
            print(
                f"sessiontree: {signal.Signals(signum).name}: stopping (no new summary requests; "
                "waiting for those in flight)",
                file=sys.stderr,
            )
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in signals:
            previous[sig] = signal.signal(sig, on_signal)
    interrupted = False
    try:
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
            progress=(args.progress or _tty()) and not args.no_progress,
            stop=stop,
        )
    except RunInterrupted as exc:
        out = exc.table
        interrupted = True
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    _report_outcomes(args, out, interrupted)
    return 130 if interrupted else 0


def _report_outcomes(args: argparse.Namespace, out: Any, interrupted: bool) -> None:
    import json

    from .render import json_document

    rows = out.to_pylist()
    counts = _count([r["outcome"] for r in rows])
    skipped = json.loads((out.schema.metadata or {}).get(b"sessiontree.skipped", b"{}"))
    costs = [r["cost"] for r in rows if r["outcome"] == "compacted" and r["cost"] is not None]
    cost = sum(costs)
    failed = {k: v for k, v in counts.items() if k in _FAILED}
    if args.json:
        print(
            json_document(
                {
                    "sessions": len(rows),
                    "outcomes": counts,
                    "errors": failed,
                    "skipped": skipped,
                    "summary_cost": cost,
                    "interrupted": interrupted,
                }
            )
        )
    else:
        shown = ", ".join(f"{k} {v}" for k, v in counts.items()) or "nothing to do"
        skip = "; skipped " + ", ".join(f"{v} {k} in an earlier run" for k, v in skipped.items()) if skipped else ""
        print(
            f"{len(rows)} sessions: {shown}{skip}; summary cost ${cost:.4f}" + ("; interrupted" if interrupted else "")
        )
    bad = [(r["path"], r["outcome"], str(r["detail"])) for r in rows if r["outcome"] in _FAILED]
    if bad:
        print(f"sessiontree: {len(bad)} sessions failed:", file=sys.stderr)
        _name_errors(bad, "sessions")
    if interrupted:
        print("sessiontree: interrupted", file=sys.stderr)


#: the outcomes that are failures (named on stderr)
_FAILED = ("error", "summarizer_error", "locked", "not_a_session", "not_a_file", "empty")


def run(args: argparse.Namespace) -> int:
    try:
        from .. import fleet
    except ImportError as exc:  # pragma: no cover - depends on the environment
        return _fail(f"{exc}")
    from ..errors import SessionTreeError
    from ..fleet._sources import SourceError

    missing = _missing_source(args.source)
    if missing is not None:
        return _fail(f"cannot read {missing}: no such file or directory")
    source = args.source[0] if len(args.source) == 1 else args.source
    try:
        if args.command == "stats":
            return _stats(args, fleet, source)
        return _compact_all(args, fleet, source)
    except ImportError as exc:  # the fleet extra (pyarrow, ray[data]) is not installed
        return _fail(str(exc))
    except SourceError as exc:  # listing the source failed: a read failure
        return _fail(str(exc))
    except BrokenPipeError:  # the reader went away (`| head`): the CLI's main stops quietly
        raise
    except OSError as exc:
        where = getattr(exc, "filename", None)
        return _fail(f"cannot write{' ' + str(where) if where else ''}: {exc.strerror or exc}")
    except (ValueError, SessionTreeError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("sessiontree: interrupted", file=sys.stderr)
        return 130
