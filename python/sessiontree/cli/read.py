"""The read commands (they never write to the session file).

``info``, ``tree``, ``branch``, ``context``, ``entries``, ``validate``."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any


from ..errors import (
    EntryNotFoundError,
)
from ..listing import parent_session_of
from ..session import Session

from .render import (
    path_shown,
    _Out,
    _Stream,
    _active_path,
    _entry_preview_of,
    _fmt_tokens,
    _kind_from,
    _labels_by_id,
    _print_json,
    _safe_preview,
    _shown_id,
    _tokens_or_none,
    message_preview,
    safe_text,
)


# ==== info ============================================================================


def cmd_info(s: Session, args: argparse.Namespace) -> int:
    """``info``: header fields, counts, leaf, name, labels, roots and the context's size.

    Also the roles on the active branch and the number of problem lines."""
    disk = s.file_header
    header = s.header
    path, cycle = _active_path(s)
    roles = Counter(role or "?" for etype, role in zip(path.type, path.role) if etype == "message")
    context_count = context_tokens = None
    context_error = None
    if cycle is None:
        try:
            ctx = s.build_context()
        except Exception as exc:  # Pi throws here too (e.g. a null message)
            context_error = str(exc)
        else:
            from ..tokens import estimate_tokens

            context_count = len(ctx.messages)
            per = [_tokens_or_none(estimate_tokens, m) for m in ctx.messages]
            context_tokens = None if any(t is None for t in per) else sum(per)
    version = disk.get("version") if disk is not None else None
    info = {
        "path": str(s.path if s.path is not None else s.source_name),
        "session_id": header.get("id") if disk is not None else None,
        "cwd": header.get("cwd") if disk is not None else None,
        "version": version,
        "legacy_migrated_in_memory": bool(s.needs_migration),
        "parent_session": parent_session_of(header),
        "empty_file": disk is None,
        "entries": len(s),
        "distinct_ids": s.entry_count(),
        "leaf_id": s.leaf_id,
        "session_name": s.session_name,
        "labels": len(s.labels),
        "roots": len(s.tree_roots()),
        "active_branch_length": None if cycle else len(path.index),
        "active_branch_cycle": list(cycle.ids) if cycle else None,
        "message_roles": None if cycle else dict(sorted(roles.items())),
        "context_messages": context_count,
        "context_tokens": context_tokens,
        "context_error": context_error,
        "problems": len(s.problems),
    }
    if args.json:
        _print_json(info)
        return 0
    out = _Out()
    out(f"path:            {path_shown(info['path'])}")
    if disk is None:
        out("header:          none (empty file; Pi writes a new header when it opens it)")
    else:
        out(f"session id:      {safe_text(info['session_id'])}")
        out(f"cwd:             {safe_text(info['cwd'])}")
        legacy = " (legacy: migrated to v3 in memory, Pi rewrites the file)" if s.needs_migration else ""
        out(f"version:         {safe_text(version if version is not None else 'none (v1)')}{legacy}")
        if info["parent_session"] is not None:
            out(f"parent session:  {safe_text(info['parent_session'])}")
    out(f"entries:         {info['entries']} ({info['distinct_ids']} distinct ids)")
    out(f"leaf:            {safe_text(info['leaf_id']) if info['leaf_id'] is not None else '-'}")
    out(f"session name:    {safe_text(info['session_name']) if info['session_name'] is not None else '-'}")
    out(f"labels:          {info['labels']}")
    out(f"roots:           {info['roots']}")
    if cycle is not None:
        out(f"active branch:   parentId cycle ({' -> '.join(_shown_id(i) for i in cycle.ids)}); Pi cannot open it")
    else:
        shown = ", ".join(f"{safe_text(r)} {n}" for r, n in sorted(roles.items())) or "no messages"
        out(f"active branch:   {len(path.index)} entries; messages: {shown}")
    if context_error is not None:
        out(f"context:         error: {safe_text(context_error)}")
    elif context_count is not None:
        out(f"context:         {context_count} messages, ~{_fmt_tokens(context_tokens)} tokens (estimated)")
    out(f"problem lines:   {info['problems']} (run `sessiontree validate` for structural checks)")
    out.flush()
    return 0


# ==== tree ============================================================================


from .tree import cmd_tree as cmd_tree  # noqa: E402  (its own module: the streamed walk)


# ==== branch ==========================================================================


def cmd_branch(s: Session, args: argparse.Namespace) -> int:
    """The branch root → leaf (or root → ``--from ID``).

    Depth, id, role or type, preview, printed as it is read (``--since ID``: only the entries
    after ID on the branch; ``--limit N``: the first N of them; previews are read for the lines
    shown only).

    Raises:
        EntryNotFoundError: ``--from`` or ``--since`` names no entry.
        SessionArgumentError: ``--since`` names an entry that is not on the branch.
        SessionCycleError: the parent chain loops.
    """
    from .._progress import close_bar, progress_bar
    from ..errors import SessionArgumentError
    from .render import progress_wanted

    positions = s.branch_positions(args.from_id)  # SessionCycleError when it loops
    first = 0
    if args.since is not None:
        since = s.get_entry(args.since) if isinstance(args.since, str) else None
        if since is None:
            raise EntryNotFoundError.of(args.since)
        try:
            first = positions.index(since.index) + 1
        except ValueError:
            raise SessionArgumentError(f"Entry {args.since} is not on the branch (--since)") from None
    length = len(positions)
    stop = length if args.limit is None else min(length, first + args.limit)
    limit = 0 if args.no_preview else args.max_preview
    labels = _labels_by_id(s)
    leaf_entry = s.leaf_entry
    leaf = leaf_entry.index if leaf_entry is not None else None
    bar = progress_bar(stop - first, progress_wanted(args, streams_to_stdout=True), "entries")

    def rows() -> Any:
        size = 8  # a small first batch: the first line at once
        b0 = first
        while b0 < stop:
            part = positions[b0 : min(b0 + size, stop)]
            path = s.entry_table(part)  # the columns of the lines shown only
            for j, i in enumerate(part):
                eid = path.id[j]
                yield {
                    "depth": b0 + j,
                    "id": eid,
                    "parent_id": path.parent_id[j],
                    "type": path.type[j],
                    "role": path.role[j],
                    "line": path.line[j],
                    "label": labels.get(eid) if eid is not None else None,
                    "preview": _entry_preview_of(s, i, limit, not args.json) if limit > 0 else None,
                    "is_leaf": i == leaf,
                }
            bar(len(part))
            b0 += len(part)
            size = 512

    try:
        if args.json:
            entries = []
            for row in rows():
                if limit <= 0:
                    del row["preview"]
                entries.append(row)
            _print_json(
                {
                    "from_id": args.from_id if args.from_id is not None else s.leaf_id,
                    "leaf_id": s.leaf_id,
                    "length": length,
                    "since": args.since,
                    "truncated": stop < length,
                    "entries": entries,
                }
            )
            return 0
        out = _Stream()
        width = len(str(max(length - 1, 0)))
        for row in rows():
            parts = [
                f"{row['depth']:>{width}}  ",
                _shown_id(row["id"]),
                "  ",
                safe_text(_kind_from(row["type"], row["role"])),
            ]
            if row["label"] is not None:
                parts.append(f" [{safe_text(row['label'])}]")
            if row["preview"]:
                parts.append(": " + row["preview"])
            if row["is_leaf"]:
                parts.append("  ← leaf")
            out("".join(parts))
        if not length:
            out("(empty branch: no leaf)")
        elif stop < length:
            out(f"-- {length - stop} more entries on the branch (--limit {args.limit}) --")
        out.flush()
    finally:
        close_bar(bar)
    return 0


# ==== context =========================================================================


def cmd_context(s: Session, args: argparse.Namespace) -> int:
    """The messages ``build_context()`` returns (``--llm``: after ``convert_to_llm``).

    Index, role, estimated tokens, source entry, preview; then thinking level, model, total.

    Raises:
        SessionCycleError: the active branch loops.
        ContextError: Pi's context building throws on this branch.
    """
    from ..context import convert_to_llm
    from ..tokens import estimate_tokens

    ctx = s.build_context()
    messages = list(ctx.messages)
    sources: list[Any] = list(ctx.sources)
    if args.llm:
        messages = convert_to_llm(messages)
        sources = [None] * len(messages)  # convert_to_llm drops and rewrites messages
    limit = 0 if args.no_preview else args.max_preview
    tokens = [_tokens_or_none(estimate_tokens, m) for m in messages]
    total = None if any(t is None for t in tokens) else sum(tokens)

    def source_of(k: int) -> tuple[Any, Any]:
        src = sources[k] if k < len(sources) else None
        if isinstance(src, dict):
            return src.get("id"), src.get("type")
        return None, None

    if args.json:
        rows = []
        for k, m in enumerate(messages):
            sid, stype = source_of(k)
            row = {"index": k, "role": m.get("role") if isinstance(m, dict) else None, "tokens": tokens[k]}
            if not args.llm:
                row["source_id"] = sid
                row["source_type"] = stype
            if limit > 0:
                row["preview"] = _safe_preview(message_preview, m, limit, escape=False)
            row["message"] = m
            rows.append(row)
        _print_json(
            {
                "llm": bool(args.llm),
                "thinking_level": ctx.thinking_level,
                "model": ctx.model,
                "total_tokens": total,
                "count": len(rows),
                "messages": rows,
            }
        )
        return 0
    out = _Out()
    width = len(str(max(len(messages) - 1, 0)))
    for k, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        sid, _ = source_of(k)
        parts = [f"{k:>{width}}  ", f"{safe_text(role or '?'):<17} ", f"{_fmt_tokens(tokens[k]):>7} tok"]
        if sid is not None:
            parts.append(f"  ({_shown_id(sid)})")
        text = _safe_preview(message_preview, m, limit)
        if text:
            parts.append("  " + text)
        out("".join(parts))
    if not messages:
        out("(no messages)")
    model = ctx.model
    if isinstance(model, dict) and (model.get("provider") is not None or model.get("modelId") is not None):
        model_text = f"{safe_text(model.get('provider'))}/{safe_text(model.get('modelId'))}"
    else:
        model_text = "-"
    out(f"thinking level: {safe_text(ctx.thinking_level)}")
    out(f"model:          {model_text}")
    out(f"total:          {len(messages)} messages, ~{_fmt_tokens(total)} tokens (estimated)")
    out.flush()
    return 0


# ==== entries =========================================================================


def cmd_entries(s: Session, args: argparse.Namespace) -> int:
    """Entries in file order (header excluded): line, id, parentId, role or type.

    Printed as they are read, a batch of the index's columns at a time (the first line at
    once; ``--json`` written entry by entry, the same text :func:`json_document` gives for the
    whole document). ``--since ID``: only the entries after ID in the file; ``--limit N``: the
    first N of them.

    Raises:
        EntryNotFoundError: ``--since`` names no entry.
    """
    from .tree import _JsonStream, _Raw

    first = 0
    if args.since is not None:
        since = s.get_entry(args.since) if isinstance(args.since, str) else None
        if since is None:
            raise EntryNotFoundError.of(args.since)
        first = since.index + 1
    total = len(s)
    stop = total if args.limit is None else min(total, first + args.limit)

    def batches() -> Any:
        size = 8  # a small first batch: the first line at once
        b0 = first
        while b0 < stop:
            yield s.entry_table(range(b0, min(b0 + size, stop)))
            b0 += size
            size = 4096

    if args.json:
        raw = _Raw()
        doc = _JsonStream(raw)
        doc.field("since", args.since, first=True)
        doc.field("count", stop - first)
        doc.field("truncated", stop < total)
        doc.open_nodes("entries")
        for table in batches():
            for _, eid, pid, _, etype, role, line, offset in zip(*table):
                doc.node({"line": line, "offset": offset, "id": eid, "parent_id": pid, "type": etype, "role": role})
        doc.close_nodes()
        doc.close()
        raw.flush()
        return 0
    out = _Stream()
    last = s.entry_table([stop - 1]).line if stop > first else []
    width = len(str(last[0])) if last else 1
    for table in batches():
        for _, eid, pid, pnull, etype, role, line, _ in zip(*table):
            parent = _shown_id(pid) if pid is not None else ("null" if pnull else "-")
            out(
                f"{line:>{width}}  {_shown_id(eid)}  {parent}  "
                f"{safe_text(_kind_from(etype, role if etype == 'message' else None))}"
            )
    if stop == first:
        out("(no entries)")
    elif stop < total:
        out(f"-- {total - stop} more entries (--limit {args.limit}) --")
    out.flush()
    return 0


# ==== validate ========================================================================


def validate_session(s: Session) -> list[dict[str, Any]]:
    """:meth:`Session.validate` (kept here for one release; the check lives in the library)."""
    return s.validate()


def cmd_validate(s: Session, args: argparse.Namespace) -> int:
    """Print every problem (line, byte offset, kind, message). Exit 0 when there is none
    (notes such as blank lines do not count), 1 otherwise. A progress bar on stderr when it is
    a terminal (or with ``--progress``)."""
    from .._progress import close_bar, progress_bar
    from .render import progress_wanted

    bar = progress_bar(len(s), progress_wanted(args), "entries")
    try:
        problems = s.validate(progress=bar)
    finally:
        close_bar(bar)
    errors = sum(1 for p in problems if p["severity"] == "error")
    if args.json:
        _print_json(
            {
                "path": str(s.path if s.path is not None else s.source_name),
                "ok": errors == 0,
                "errors": errors,
                "notes": len(problems) - errors,
                "problems": problems,
            }
        )
        return 1 if errors else 0
    out = _Out()
    for p in problems:
        tag = "" if p["severity"] == "error" else " (note)"
        out(f"line {p['line']} (byte {p['offset']}): {safe_text(p['kind'])}{tag}: {safe_text(p['message'])}")
    notes = len(problems) - errors
    summary = "ok" if not errors else f"{errors} problem{'s' if errors != 1 else ''}"
    if notes:
        summary += f", {notes} note{'s' if notes != 1 else ''}"
    out(f"{safe_text(str(s.path if s.path is not None else s.source_name))}: {summary}")
    out.flush()
    return 1 if errors else 0
