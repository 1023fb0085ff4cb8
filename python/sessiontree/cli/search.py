"""``sessiontree search``: full-text search over a store, each hit placed in its session's tree,
over the public :func:`sessiontree.search` API. Registered by :mod:`.app`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


from .args import documented_parser

_SEARCH_EPILOG = """QUERY: words (all required), "exact phrases", a OR b, -excluded, prefix*. Ids, paths,
hashes and identifiers (bd-q3fy, src/foo_bar.rs, a1b2c3d4, snake_case_name, CamelCase) are
found as typed and by their words. Case-insensitive; ranked by BM25, ties to the newer entry.

SOURCE: a session file, a directory (Pi's layout), a glob, or an object-store URL
(s3://bucket/prefix, as for stats: searched through copies kept in the cache folder); several
allowed (default: Pi's session folder, ~/.pi/agent/sessions). The index lives in the
saved-index cache folder (`sessiontree cache info`; `sessiontree cache clear` removes it) and
is brought up to date with the files before every query. --engine ray: one index per shard,
each on the node holding its files; the query fans out and the pages merge to the same hits as
the local engine. docs/search.md has the details.

Each hit: the session file and line, the entry, its branch state (active: in the context;
compacted: on the active path before the latest compaction's kept entries; abandoned: on a
branch the leaf left, with its fork point and covering branch summary), the labels on its
path, and a snippet with the matches in [brackets].

exit codes: 0 searched (hits or none); 2 a bad query (one line), a missing SOURCE, bad options"""


def add_parsers(sub: Any) -> None:
    """Register ``search`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "search",
        description="Search the sessions of SOURCE for QUERY (sessiontree.search).",
        epilog=_SEARCH_EPILOG,
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("source", metavar="SOURCE", nargs="*", help="file, directory or glob (default: Pi's sessions)")
    p.add_argument("--limit", type=_nonneg, default=20, metavar="N", help="hits per page (default 20)")
    p.add_argument("--offset", type=_nonneg, default=0, metavar="N", help="skip this many hits (paging)")
    p.add_argument("--json", action="store_true", help="one JSON object: hits, total, next_offset, took_ms")
    p.add_argument("--role", help="message role (user, assistant, toolResult, bashExecution, ...)")
    p.add_argument("--type", dest="etype", metavar="TYPE", help="entry type (message, compaction, label, ...)")
    p.add_argument("--branch-state", choices=("active", "compacted", "abandoned"))
    p.add_argument("--session", metavar="ID", help="the session id (its header's)")
    p.add_argument("--cwd", help="the session's working directory (its header's)")
    p.add_argument("--label", help="a label on the hit's path")
    p.add_argument("--tool", metavar="NAME", help="a tool call's or tool result's tool name")
    p.add_argument("--since", metavar="TIME", help="entries at or after TIME (ISO 8601)")
    p.add_argument("--until", metavar="TIME", help="entries at or before TIME (ISO 8601)")
    from .args import _pos_int, progress_flags, ray_flags

    progress_flags(p)
    ray_flags(p, "local: one index in this process; ray: one index per shard, fanned out (Ray)")
    p.add_argument("--shards", type=_pos_int, metavar="N", help="shards (engine ray; default: the cluster's CPUs)")


#: seconds a search runs before the notice that it is indexing (a warm query answers sooner)
NOTICE_AFTER = 1.0


def _notice() -> None:
    print(
        "sessiontree: search: indexing new or changed files (the first search of a store reads every "
        "session once; the index is saved in the cache folder: `sessiontree cache info`)...",
        file=sys.stderr,
        flush=True,
    )


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {v}")
    return v


def _fail(message: str, as_json: bool) -> int:
    from .render import safe_text

    print(f"sessiontree: error: {safe_text(message)}", file=sys.stderr)
    if as_json:
        from .render import json_document

        sys.stdout.write(json_document({"error": True, "exit_code": 2, "message": message}) + "\n")
        sys.stdout.flush()
    return 2


#: labels shown per hit in the text output (a long session can have hundreds on one path)
_LABELS_SHOWN = 3


def _print_text(r: Any) -> None:
    from .render import _write_out, safe_text

    lines: list[str] = []
    shown = f"{r.total} hit{'s' if r.total != 1 else ''}"
    if r.hits:
        first = r.next_offset - len(r.hits) if r.next_offset is not None else r.total - len(r.hits)
        shown += f", {first + 1}-{first + len(r.hits)} shown"
    lines.append(f"{shown} ({r.took_ms:.1f} ms)")
    for h in r.hits:
        who = h.type if h.role is None else f"{h.type}/{h.role}"
        if h.tool:
            who += f" {h.tool}"
        state = h.branch_state
        if h.branch_state == "abandoned":
            state += f" (fork {h.fork_point or '-'}" + (f", summary {h.summary_id}" if h.summary_id else "") + ")"
        labels = ""
        if h.labels:
            more = len(h.labels) - _LABELS_SHOWN
            labels = f" labels: {', '.join(h.labels[:_LABELS_SHOWN])}" + (f" (+{more} more)" if more > 0 else "")
        # a Claude Code or Codex file: its line is the source line the entry came from
        fmt = "" if h.source_format == "pi" else f" ({h.source_format})"
        lines.append(
            f"{safe_text(h.path)}:{h.line}{fmt} {safe_text(h.entry_id)} {safe_text(who)} {state}{safe_text(labels)}"
        )
        lines.append(f"  {safe_text(h.marked())}")
    if r.next_offset is not None:
        lines.append(f"more: --offset {r.next_offset}")
    _write_out("\n".join(lines) + "\n", flush=True)


def run(args: argparse.Namespace) -> int:
    """Run ``search``; returns the exit code."""
    from ..errors import SearchQueryError, SessionTreeError
    from ..searching import default_source, search

    sources = list(args.source) or [default_source()]
    from .._local_sources import is_url

    for s in sources:
        if not any(c in s for c in "*?[") and not is_url(s) and not os.path.lexists(s):
            return _fail(f"cannot read {s}: no such file or directory", args.json)
    import threading

    from .render import progress_wanted

    # a search that takes seconds is indexing: say so on a terminal (or with --progress)
    timer = threading.Timer(NOTICE_AFTER, _notice) if progress_wanted(args) else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        r = search(
            args.query,
            sources,
            limit=args.limit,
            offset=args.offset,
            role=args.role,
            type=args.etype,
            branch_state=args.branch_state,
            session=args.session,
            cwd=args.cwd,
            label=args.label,
            tool=args.tool,
            since=args.since,
            until=args.until,
            engine=args.engine,
            address=args.address,
            shards=args.shards,
        )
    except SearchQueryError as exc:
        return _fail(str(exc).replace("\n", " "), args.json)
    except (SessionTreeError, ValueError) as exc:
        return _fail(str(exc).replace("\n", " "), args.json)
    except OSError as exc:
        return _fail(f"{exc.filename or 'search'}: {exc.strerror or exc}", args.json)
    finally:
        if timer is not None:
            timer.cancel()
    if args.json:
        from .render import _write_out, json_document

        doc = r.to_dict()
        for h in doc["hits"]:  # a name that is not UTF-8: \xNN for each such byte, as stats' rows
            if not h["path"].isascii():  # (the fleet package loads only for such a name)
                from ..fleet import path_text

                h["path"] = path_text(h["path"])
        _write_out(json_document(doc) + "\n", flush=True)
    else:
        _print_text(r)
    return 0
