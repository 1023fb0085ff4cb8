"""The fleet rows as the Python rules computed them before the core did (issue 18): the test
oracle for :meth:`sessiontree.Session.fleet_columns` and ``sessiontree/fleet/_rows.py``. A
frozen copy of ``_stats_of`` / ``_entries_of`` / ``_last_activity_ms`` as they were (an entry
parsed at a time, ``sessiontree.usage`` summing); ``tests/fleet/test_core_rows_parity.py``
compares them with the rows the package makes, over the corpus and generated stores."""

from __future__ import annotations

from typing import Any

from sessiontree._jsjson import JS_UNDEFINED
from sessiontree.errors import SessionCycleError
from sessiontree.fleet._rows import PROBLEM_KINDS, ROLES, _context, _ms, _num
from sessiontree.fleet._sources import Item
from sessiontree.session import Session
from sessiontree.usage import UsageAccumulator, usage_totals_of_entries

_USAGE_TYPES = ("compaction", "branch_summary", "usage")
_SUMMARY_TYPES = ("compaction", "branch_summary")


def last_activity_ms(s: Session, n: int, types: list, roles: list) -> float | None:
    """Pi's ``modified`` rule as :func:`sessiontree.listing.session_info` applies it: the last
    user or assistant message with ``content`` (its ``message.timestamp`` when a number, else
    the entry's timestamp). The index gives roles; only the candidate entries are parsed."""
    for i in range(n - 1, -1, -1):
        if types[i] != "message" or roles[i] not in ("user", "assistant"):
            continue
        raw = s.entry_at(i).raw
        m = raw.get("message") if isinstance(raw, dict) else None
        if not isinstance(m, dict) or "content" not in m:
            continue
        ts = m.get("timestamp")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            return float(ts)
        t = _ms(raw.get("timestamp", JS_UNDEFINED))
        if t is not None:
            return t
    return None


def stats_of(s: Session, item: Item, size: int, mtime: float | None, opts: Any) -> dict:
    table = s.entry_table()  # ids, types and roles from the index, no entry parsed
    n = len(table.index)
    types = table.type
    roles = [r if t == "message" else None for t, r in zip(types, table.role)]
    counts: dict[str | None, int] = {}  # None: a type that is not a string
    for t in types:
        counts[t] = counts.get(t, 0) + 1
    by_role = {col: 0 for _, col in ROLES}
    other = 0
    role_cols: dict[str | None, str] = dict(ROLES)
    usage_idx: list[int] = []
    for i, t in enumerate(types):
        if t == "message":
            r = roles[i]
            col = role_cols.get(r)
            if col is None:
                other += 1
            else:
                by_role[col] += 1
            if r in ("assistant", "toolResult"):
                usage_idx.append(i)
        elif t in _USAGE_TYPES:
            usage_idx.append(i)
    # only the entries that carry usage (or tool calls) are parsed, one at a time (never all
    # held at once: a long session has tens of thousands of them)
    usage_acc = UsageAccumulator(skip_missing=True)
    summary_acc = UsageAccumulator(skip_missing=True)
    tool_calls = 0
    for i in usage_idx:
        r = s.entry_at(i).raw
        usage_acc.add((r,))
        if types[i] in _SUMMARY_TYPES:
            summary_acc.add((r,))
        elif roles[i] == "assistant":
            m = r.get("message") if isinstance(r, dict) else None
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                tool_calls += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "toolCall")
        del r
    usage = usage_acc.totals()
    summary = summary_acc.totals()
    problems = {k: 0 for k in PROBLEM_KINDS}
    problems_other = 0
    found = s.problems
    npro = len(found)
    for p in found:
        if p.kind in problems:
            problems[p.kind] += 1
        else:
            problems_other += 1
    # leaves: tree nodes without children (Pi getTree)
    leaves = len(s.tree_leaves())
    header = s.header
    leaf = s.leaf_entry
    row: dict[str, Any] = {
        "path": item.path,
        "session_id": header.get("id") if isinstance(header.get("id"), str) else None,
        "cwd": header.get("cwd") if isinstance(header.get("cwd"), str) else None,
        "parent_session": header.get("parentSession") if isinstance(header.get("parentSession"), str) else None,
        "name": s.session_name,
        "created": _ms(header.get("timestamp", JS_UNDEFINED)),
        "modified": None,
        "file_modified": mtime,
        "bytes": size,
        "entries": n,
        "distinct_ids": s.entry_count(),
        "messages": counts.get("message", 0),
        **{f"messages_{col}": v for col, v in by_role.items()},
        "messages_other": other,
        "tool_calls": tool_calls,
        "compactions": counts.get("compaction", 0),
        "branch_summaries": counts.get("branch_summary", 0),
        "labels": len(s.labels),
        "leaves": leaves,
        "leaf_id": s.leaf_id,
        "leaf_type": leaf.type if leaf is not None else None,
        "active_path_length": None,
        "context_messages": None,
        "context_tokens": None,
        "should_compact": None,
        "context_window": opts.context_window,
        "context_error": None,
        "input_tokens": _num(usage.input),
        "output_tokens": _num(usage.output),
        "cache_read_tokens": _num(usage.cache_read),
        "cache_write_tokens": _num(usage.cache_write),
        "total_tokens": _num(usage.total),
        "cost": _num(usage.cost),
        "summary_tokens": _num(summary.total),
        "summary_cost": _num(summary.cost),
        "problems": npro,
        **{f"problems_{k}": v for k, v in problems.items()},
        "problems_other": problems_other,
        "needs_migration": bool(s.needs_migration),
        "error_kind": None,
        "error": None,
    }
    last = last_activity_ms(s, n, types, roles)
    row["modified"] = last if last is not None and last > 0 else row["created"] if row["created"] is not None else mtime
    try:
        row["active_path_length"] = len(s.context_table().index)
    except SessionCycleError:
        pass
    tokens, should, err, nmsg = _context(s, opts)
    row["context_messages"] = nmsg
    row["context_tokens"] = _num(tokens)
    row["should_compact"] = should
    row["context_error"] = err
    return row


def entries_of(s: Session, item: Item) -> list[dict]:
    table = s.entry_table()
    n = len(table.index)
    if n == 0:
        return []
    metrics = s.entry_metrics()  # bytes, times and token estimates, from the index
    try:
        on_path = set(s.context_table().index)
    except SessionCycleError:
        on_path = set()
    # a label is any JSON value in the file: the column holds string labels only
    label_of: dict[str, Any] = {k: v for k, v in s.labels.items() if isinstance(k, str) and isinstance(v, str)}
    sid = s.session_id if isinstance(s.session_id, str) else None
    ids = table.id
    rows = []
    for i in range(n):
        t = table.type[i]
        role = table.role[i] if t == "message" else None
        usage = None
        if t in _USAGE_TYPES or (t == "message" and role in ("assistant", "toolResult")):
            usage = usage_totals_of_entries([s.entry_at(i).raw], skip_missing=True)
        rows.append(
            {
                "path": item.path,
                "session_id": sid,
                "entry_index": i,
                "entry_id": ids[i],
                "parent_id": table.parent_id[i],
                "type": t,
                "role": role,
                "timestamp": metrics.timestamp_ms[i],
                "line": table.line[i],
                "offset": table.offset[i],
                "bytes": metrics.bytes[i],
                "tokens": metrics.tokens[i],
                "input_tokens": _num(usage.input) if usage else None,
                "output_tokens": _num(usage.output) if usage else None,
                "cache_read_tokens": _num(usage.cache_read) if usage else None,
                "cache_write_tokens": _num(usage.cache_write) if usage else None,
                "cost": _num(usage.cost) if usage else None,
                "on_active_path": i in on_path,
                "label": label_of.get(eid) if (eid := ids[i]) is not None else None,
                "error_kind": None,
                "error": None,
            }
        )
    return rows


def table(rows: list[dict], schema: Any) -> Any:
    """Rows as an Arrow table, as ``sessiontree.fleet`` built it before (``pa.array`` on lists)."""
    import pyarrow as pa

    from sessiontree.fleet import _ms_or_none, arrow_text, path_bytes, path_text

    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    if "path_bytes" in cols:
        cols["path_bytes"] = [path_bytes(r["path"]) for r in rows]
        cols["path"] = [path_text(r["path"]) for r in rows]
    for f in schema:
        if pa.types.is_timestamp(f.type):
            cols[f.name] = [_ms_or_none(v) for v in cols[f.name]]
        elif pa.types.is_string(f.type):
            cols[f.name] = [arrow_text(v) for v in cols[f.name]]
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)
