"""Command-line interface: look inside a Pi session file without Pi.

    $ sessiontree info session.jsonl        # header, counts, leaf, context size
    $ sessiontree tree session.jsonl        # the tree, drawn like Pi's /tree
    $ sessiontree branch session.jsonl      # root → leaf (or --from ID)
    $ sessiontree context session.jsonl     # what the model sees (--llm: after convertToLlm)
    $ sessiontree entries session.jsonl     # file order (--since ID)
    $ sessiontree validate session.jsonl    # damaged lines, duplicate ids, orphans, cycles
    $ sessiontree compact session.jsonl     # summarize old history (--dry-run: show the plan)
    $ sessiontree navigate session.jsonl ID --summarize   # Pi's /tree, with a branch summary

Every subcommand takes ``--json`` (one JSON document on stdout, snake_case keys). Human output
never passes terminal control sequences from the file through: everything taken from the
file goes through :func:`safe_text`. Only ``compact`` and ``navigate`` write to the session
file (appending entries, under the writer lock); ``compact --dry-run`` and ``navigate
--dry-run`` write nothing. Their progress lines go to stderr (when it is a terminal, or with
``--progress``), so stdout stays one JSON document with ``--json``.

Exit codes: 0 success; 1 ``validate`` found a problem, ``compact`` found nothing to compact,
``navigate`` was asked for a move that would write nothing (see its ``--help``); 2 the file is
missing, unreadable or not a Pi session, an id given on the command line is unknown, the active
branch loops (``branch``/``context``: Pi never returns there), another writer holds the lock,
a summarizer is misconfigured or its request failed; 130 interrupted. Tracebacks are never
shown for these.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections import Counter
from dataclasses import asdict
from typing import Any, Callable, Sequence

import orjson

from .errors import (
    EntryNotFoundError,
    SessionCycleError,
    SessionError,
    SessionFormatError,
    SessionLockedError,
    SessionTreeError,
)
from .listing import parent_session_of
from .session import EntryTable, Session

__all__ = [
    "main",
    "safe_text",
    "clip",
    "preview",
    "entry_preview",
    "message_preview",
    "validate_session",
    "json_document",
]

#: Characters of preview shown by default (``--max-preview``).
DEFAULT_PREVIEW = 60
#: Branch-guide columns kept in ``tree`` before older ones are folded into ``⋯``.
MAX_TREE_GUIDES = 24

# ==== Terminal safety ===============================================================

# C0 controls (ESC, BEL, CR, ...), DEL, C1 controls (0x9b is an 8-bit CSI), the Arabic letter
# mark, LRM/RLM, line/paragraph separators, bidi embeddings/overrides/isolates (Trojan
# Source), and lone surrogates (which cannot even be encoded to UTF-8).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape_char(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(s: object) -> str:
    """``s`` with every character that could drive a terminal made visible as an escape.

    C0/C1 controls, DEL and ESC become ``\\xNN``; bidi controls (U+202A–U+202E,
    U+2066–U+2069, LRM/RLM/ALM), U+2028/U+2029 and lone surrogates become ``\\uNNNN``.
    Everything else (CJK, emoji, combining marks) passes unchanged. Non-strings are
    converted with ``str()`` first (None becomes ``""``).

        >>> safe_text("\\x1b[31mred\\x1b[0m")
        '\\\\x1b[31mred\\\\x1b[0m'
        >>> safe_text("abc\\u202edef")
        'abc\\\\u202edef'
    """
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    return _UNSAFE.sub(_escape_char, s)


# Raw characters that JSON leaves unescaped but terminals may act on; inside a JSON document
# they can only occur in strings, so writing them as \\uXXXX keeps the value identical.
_JSON_UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _json_escape(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8"))


def json_document(doc: Any) -> str:
    """``doc`` as indented JSON text (orjson; JavaScript-exact writer for lone surrogates and
    big integers), with C1/DEL/bidi characters escaped as ``\\uXXXX`` (same value)."""
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        from ._jsjson import js_stringify_bytes

        data = js_stringify_bytes(doc)
    return _JSON_UNSAFE.sub(_json_escape, data).decode("utf-8")


# ==== Previews =======================================================================


def _js_compact(value: Any) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return "…"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
    return " ".join(p for p in parts if p)


def message_preview(message: Any) -> str:
    """A one-paragraph text for an ``AgentMessage`` dict (not yet clipped or escaped).

    user/custom/system: the content text; toolResult: ``toolName: text``; assistant: its
    text, then ``→ tool(args)`` per tool call (``(thinking) …`` or ``(error) …`` when there
    is no text); bashExecution: ``$ command``; branchSummary/compactionSummary: the summary.
    Never raises on odd shapes (returns ``""``)."""
    if not isinstance(message, dict):
        return ""
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        texts: list[str] = []
        calls: list[str] = []
        thinking: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                kind = b.get("type")
                if kind == "text" and isinstance(b.get("text"), str) and b["text"]:
                    texts.append(b["text"])
                elif kind == "toolCall":
                    args = b.get("arguments", b.get("input"))
                    calls.append(f"→ {b.get('name')}({_js_compact(args) if args is not None else ''})")
                elif kind == "thinking" and isinstance(b.get("thinking"), str):
                    thinking.append(b["thinking"])
        out = " ".join(texts + calls)
        if not out and thinking:
            out = "(thinking) " + " ".join(thinking)
        if not out and isinstance(message.get("errorMessage"), str):
            out = "(error) " + message["errorMessage"]
        return out
    if role == "toolResult":
        text = _content_text(message.get("content"))
        name = message.get("toolName")
        return f"{name}: {text}" if isinstance(name, str) else text
    if role == "bashExecution":
        cmd = message.get("command")
        return f"$ {cmd}" if isinstance(cmd, str) else "$"
    if role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        return summary if isinstance(summary, str) else ""
    return _content_text(message.get("content"))


def entry_preview(raw: Any) -> str:
    """A one-paragraph text for an entry (parsed JSON), by type; ``""`` when there is none.

    message: :func:`message_preview`; compaction/branch_summary: the summary;
    custom_message: its content; label: ``target ← "label"``; session_info: the name;
    model_change: ``provider/modelId``; thinking_level_change: the level; custom: its
    customType; a JSON value that is not an object: its JSON text."""
    if not isinstance(raw, dict):
        return _js_compact(raw)
    kind = raw.get("type")
    if kind == "message":
        return message_preview(raw.get("message"))
    if kind in ("compaction", "branch_summary"):
        summary = raw.get("summary")
        return summary if isinstance(summary, str) else ""
    if kind == "custom_message":
        return _content_text(raw.get("content"))
    if kind == "label":
        label = raw.get("label")
        shown = f'"{label}"' if isinstance(label, str) and label else "(cleared)"
        return f"{raw.get('targetId')} ← {shown}"
    if kind == "session_info":
        name = raw.get("name")
        return name if isinstance(name, str) else ""
    if kind == "model_change":
        return f"{raw.get('provider')}/{raw.get('modelId')}"
    if kind == "thinking_level_change":
        return str(raw.get("thinkingLevel"))
    if kind == "custom":
        return str(raw.get("customType"))
    return ""


def clip(text: str, limit: int = DEFAULT_PREVIEW) -> str:
    """``text`` on one line (newlines as ``⏎``, tabs as spaces), cut to ``limit``
    characters with ``…`` marking the cut. Not escaped: see :func:`preview`."""
    if limit <= 0 or not text:
        return ""
    text = text[: limit * 4 + 8]  # enough to clip after collapsing
    text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎").replace("\t", " ")
    if len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def preview(text: str, limit: int = DEFAULT_PREVIEW) -> str:
    """:func:`clip` then :func:`safe_text`: a one-line preview safe to print.

    >>> preview("line one\\nline two", 12)
    'line one⏎li…'
    >>> preview("\\x1b[2Jboom", 20)
    '\\\\x1b[2Jboom'
    """
    return safe_text(clip(text, limit))


def _safe_preview(fn: Callable[[Any], str], value: Any, limit: int, escape: bool = True) -> str:
    """``fn(value)`` clipped (and escaped unless ``escape`` is false, for JSON output)."""
    if limit <= 0:
        return ""
    try:
        text = clip(fn(value), limit)
    except Exception:  # a preview must never break a listing
        return ""
    return safe_text(text) if escape else text


def _entry_preview_of(s: Any, i: int, limit: int, escape: bool = True) -> str:
    """Preview of entry ``i``; an entry whose body cannot be loaded (e.g. nested too deeply for
    Python) previews as empty instead of failing the listing."""
    try:
        raw = s.entry_at(i).raw
    except Exception:
        return ""
    return _safe_preview(entry_preview, raw, limit, escape)


# ==== Helpers over the session ==========================================================


def _kind_from(entry_type: Any, role: Any) -> str:
    if entry_type == "message":
        return role or "message"
    return entry_type if entry_type is not None else "?"


def _shown_id(entry_id: Any) -> str:
    return safe_text(entry_id) if entry_id is not None else "(no id)"


def _tokens_or_none(estimate: Callable[[Any], Any], message: Any) -> Any:
    try:
        n = estimate(message)
    except Exception:
        return None
    if isinstance(n, float) and math.isnan(n):
        return None
    return n


def _fmt_tokens(n: Any) -> str:
    return "?" if n is None else str(n)


def _labels_by_id(s: Session) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for target, label in s.labels.items():
        try:
            out[target] = label
        except TypeError:  # unhashable target (a JSON object as targetId)
            continue
    return out


def _active_path(s: Session, from_id: str | None = None) -> tuple[EntryTable, SessionCycleError | None]:
    """The entries root → ``from_id`` (default: the leaf, like ``get_branch()``), or an empty
    table and the cycle error when the parent chain loops.

    Raises:
        EntryNotFoundError: ``from_id`` names no entry.
    """
    try:
        return s.branch_table(from_id), None
    except SessionCycleError as exc:
        return s.entry_table([]), exc


# ==== Output ==========================================================================


class _Out:
    """Collects human output lines; written at the end in large chunks."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)

    def flush(self) -> None:
        for k in range(0, len(self.lines), 4096):
            _write_out("\n".join(self.lines[k : k + 4096]) + "\n")
        self.lines.clear()


def _print_json(doc: Any) -> None:
    _write_out(json_document(doc) + "\n")


class _OutputError(SessionTreeError):
    """Standard output could not be written (closed, a full device): ``args[0]`` says why."""


def _write_out(text: str, flush: bool = False) -> None:
    """Write to standard output; a failure (other than the reader going away, which stays a
    BrokenPipeError) becomes :class:`_OutputError`."""
    try:
        if sys.stdout is None:
            raise _OutputError("standard output is closed")
        sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: write to a closed file object
        raise _OutputError(f"cannot write to standard output: {getattr(exc, 'strerror', None) or exc}") from None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null and drop buffered output, so the interpreter's final flush of a
    broken stdout neither fails nor prints a traceback of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    try:
        sys.stdout = open(os.devnull, "w")  # the old object's unflushed buffer is discarded with it
    except OSError:
        sys.stdout = None  # type: ignore[assignment]


# ==== info ============================================================================


def cmd_info(s: Session, args: argparse.Namespace) -> int:
    """Header fields, counts, leaf, name, labels, roots, roles on the active branch, the
    context's size and the number of problem lines."""
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
            from .tokens import estimate_tokens

            context_count = len(ctx.messages)
            per = [_tokens_or_none(estimate_tokens, m) for m in ctx.messages]
            context_tokens = None if any(t is None for t in per) else sum(per)
    version = disk.get("version") if disk is not None else None
    info = {
        "path": str(s.path),
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
    out(f"path:            {safe_text(info['path'])}")
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


def cmd_tree(s: Session, args: argparse.Namespace) -> int:
    """Draw the tree like Pi's /tree, without recursion.

    One line per entry: ``•`` in the first column for entries on the active branch, branch
    guides (``├─``, ``└─``, ``│``), the id, role or type, ``[label]``, a preview, and
    ``← leaf`` on the leaf. A node with one child is followed by that child at the same
    indentation (a linear run stays flat, as in Pi), so only real branch points indent;
    beyond ``MAX_TREE_GUIDES`` levels older guides fold into ``⋯``. Entries not reachable
    from any root (parentId cycles) are drawn after the tree. A node met a second time
    (a duplicated id listed twice, or a loop through one) is shown once more with
    ``(shown above)`` and not expanded again.
    """
    limit = 0 if args.no_preview else args.max_preview
    roots, start, kids = s.tree_table()
    labels = _labels_by_id(s)
    path, cycle = _active_path(s)
    on_path = set(path.index)
    leaf_entry = s.leaf_entry
    leaf = leaf_entry.index if leaf_entry is not None else None
    unreachable = [e.index for e in s.unreachable_entries()]
    table = s.entry_table()
    ids, parent_ids, types, roles, lines = table.id, table.parent_id, table.type, table.role, table.line

    out = _Out()
    records: list[dict] = []
    seen: set[int] = set()
    max_prefix = 3 * MAX_TREE_GUIDES

    def children_of(i: int) -> list[int]:
        return kids[start[i] : start[i + 1]] if i + 1 < len(start) else []

    def walk(tops: Sequence[int], unreachable_part: bool) -> None:
        # stack items: (node, prefix of this line, connector, prefix for its children, depth)
        stack: list[tuple[int, str, str, str, int]] = []
        many = len(tops) > 1
        for k in range(len(tops) - 1, -1, -1):
            last = k == len(tops) - 1
            conn = ("└─ " if last else "├─ ") if many else ""
            stack.append((tops[k], "", conn, ("   " if last else "│  ") if many else "", 0))
        while stack:
            i, prefix, conn, child_prefix, depth = stack.pop()
            again = i in seen
            eid = ids[i]
            kind = _kind_from(types[i], roles[i])
            label = labels.get(eid) if eid is not None else None
            text = "" if limit <= 0 else _entry_preview_of(s, i, limit, not args.json)
            if args.json:
                if not again:
                    ch = children_of(i)
                    rec = {
                        "index": i,
                        "id": eid,
                        "parent_id": parent_ids[i],
                        "type": types[i],
                        "role": roles[i],
                        "line": lines[i],
                        "depth": depth,
                        "label": label,
                        "children": [ids[c] for c in ch],
                        "child_indices": list(ch),
                        "on_active_branch": i in on_path,
                        "is_leaf": i == leaf,
                        "unreachable": unreachable_part,
                    }
                    if limit > 0:
                        rec["preview"] = text
                    records.append(rec)
            else:
                mark = "• " if i in on_path else "  "
                parts = [mark, prefix, conn, _shown_id(eid), " ", safe_text(kind)]
                if label is not None:
                    parts.append(f" [{safe_text(label)}]")
                if text:
                    parts.append(": " + text)
                if again:
                    parts.append("  (shown above)")
                if i == leaf and not again:
                    parts.append("  ← leaf")
                out("".join(parts))
            if again:
                continue
            seen.add(i)
            ch = children_of(i)
            if not ch:
                continue
            if len(ch) == 1:
                stack.append((ch[0], child_prefix, "", child_prefix, depth + 1))
                continue
            for k in range(len(ch) - 1, -1, -1):
                last = k == len(ch) - 1
                sub = child_prefix + ("   " if last else "│  ")
                if len(sub) > max_prefix:
                    sub = "⋯  " + sub[-(max_prefix - 3) :]
                stack.append((ch[k], child_prefix, "└─ " if last else "├─ ", sub, depth + 1))

    walk(roots, False)
    rest = [i for i in unreachable if i not in seen]
    if rest:
        if not args.json:
            out(f"-- {len(unreachable)} entries not reachable from any root (parentId cycle) --")
        while rest:
            walk([rest[0]], True)
            rest = [i for i in rest if i not in seen]
    if args.json:
        _print_json(
            {
                "leaf_id": s.leaf_id,
                "roots": [ids[r] for r in roots],
                "unreachable_ids": [ids[i] for i in unreachable],
                "active_branch_cycle": list(cycle.ids) if cycle else None,
                "nodes": records,
            }
        )
    else:
        if not roots and not unreachable:
            out("(no entries)")
        out.flush()
    if cycle is not None:
        print(
            f"sessiontree: warning: the active branch loops ({safe_text(str(cycle))}); Pi cannot open this session",
            file=sys.stderr,
        )
    return 0


# ==== branch ==========================================================================


def cmd_branch(s: Session, args: argparse.Namespace) -> int:
    """The branch root → leaf (or root → ``--from ID``): depth, id, role or type, preview.

    Raises:
        EntryNotFoundError: ``--from`` names no entry.
        SessionCycleError: the parent chain loops.
    """
    path, cycle = _active_path(s, args.from_id)
    if cycle is not None:
        raise cycle
    limit = 0 if args.no_preview else args.max_preview
    labels = _labels_by_id(s)
    leaf_entry = s.leaf_entry
    leaf = leaf_entry.index if leaf_entry is not None else None
    rows = []
    for depth, (i, eid, pid, _, etype, role, line, _) in enumerate(zip(*path)):
        rows.append(
            {
                "depth": depth,
                "id": eid,
                "parent_id": pid,
                "type": etype,
                "role": role,
                "line": line,
                "label": labels.get(eid) if eid is not None else None,
                "preview": _entry_preview_of(s, i, limit, not args.json) if limit > 0 else None,
                "is_leaf": i == leaf,
            }
        )
    if args.json:
        for row in rows:
            if limit <= 0:
                del row["preview"]
        _print_json(
            {
                "from_id": args.from_id if args.from_id is not None else s.leaf_id,
                "leaf_id": s.leaf_id,
                "length": len(rows),
                "entries": rows,
            }
        )
        return 0
    out = _Out()
    width = len(str(max(len(rows) - 1, 0)))
    for row in rows:
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
    if not rows:
        out("(empty branch: no leaf)")
    out.flush()
    return 0


# ==== context =========================================================================


def cmd_context(s: Session, args: argparse.Namespace) -> int:
    """The messages ``build_context()`` returns (``--llm``: after ``convert_to_llm``): index,
    role, estimated tokens, source entry, preview; then thinking level, model, total.

    Raises:
        SessionCycleError: the active branch loops.
        ContextError: Pi's context building throws on this branch.
    """
    from .context import convert_to_llm
    from .tokens import estimate_tokens

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

    Raises:
        EntryNotFoundError: ``--since`` names no entry.
    """
    if args.since is not None:
        since = s.get_entry(args.since) if isinstance(args.since, str) else None
        if since is None:
            raise EntryNotFoundError.of(args.since)
        entries = s.entry_table(range(since.index + 1, len(s)))
    else:
        entries = s.entry_table()
    if args.json:
        rows = [
            {"line": line, "offset": offset, "id": eid, "parent_id": pid, "type": etype, "role": role}
            for _, eid, pid, _, etype, role, line, offset in zip(*entries)
        ]
        _print_json({"since": args.since, "count": len(rows), "entries": rows})
        return 0
    out = _Out()
    width = len(str(entries.line[-1])) if entries.line else 1
    for _, eid, pid, pnull, etype, role, line, _ in zip(*entries):
        parent = _shown_id(pid) if pid is not None else ("null" if pnull else "-")
        out(
            f"{line:>{width}}  {_shown_id(eid)}  {parent}  "
            f"{safe_text(_kind_from(etype, role if etype == 'message' else None))}"
        )
    if not entries.line:
        out("(no entries)")
    out.flush()
    return 0


# ==== validate ========================================================================


def validate_session(s: Session) -> list[dict]:
    """:meth:`Session.validate` (kept here for one release; the check lives in the library)."""
    return s.validate()


def cmd_validate(s: Session, args: argparse.Namespace) -> int:
    """Print every problem (line, byte offset, kind, message). Exit 0 when there is none
    (notes such as blank lines do not count), 1 otherwise."""
    problems = s.validate()
    errors = sum(1 for p in problems if p["severity"] == "error")
    if args.json:
        _print_json(
            {
                "path": str(s.path),
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
    out(f"{safe_text(str(s.path))}: {summary}")
    out.flush()
    return 1 if errors else 0


# ==== compact / navigate: shared helpers =================================================


class _CliFailure(SessionTreeError):
    """A one-line failure a writing command reports itself (message, exit code)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class _Progress:
    """Progress lines on stderr (``sessiontree: [1.2s] summarizing…``), only when enabled."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"sessiontree: [{time.monotonic() - self.t0:.1f}s] {message}", file=sys.stderr, flush=True)


def _progress_enabled(args: argparse.Namespace) -> bool:
    if getattr(args, "progress", False):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _ProgressSummarizer:
    """Wraps a summarizer: reports each finished request and ``appending…`` after the last.
    Every other attribute (``name``, ``context_window``, ``max_output_tokens``...) is the
    wrapped summarizer's, so output budgets are unchanged."""

    def __init__(self, inner: Any, progress: _Progress):
        self._inner = inner
        self._progress = progress
        self.total = 0
        self.done = 0

    @property
    def name(self) -> str:
        return getattr(self._inner, "name", type(self._inner).__name__)

    def __getattr__(self, attr: str) -> Any:  # only for attributes not found on the wrapper
        return getattr(self._inner, attr)

    async def summarize(self, request: Any) -> Any:
        result = await self._inner.summarize(request)
        self.done += 1
        total = max(self.total, self.done)
        self._progress(f"{request.kind} summary received ({self.done}/{total})")
        if self.done == self.total:
            self._progress("appending…")
        return result


def _make_summarizer(args: argparse.Namespace) -> Any:
    """The summarizer the options name (offline unless ``--summarizer``).

    Raises:
        _CliFailure: bad option combination, missing model/key, SDK not installed (code 2).
    """
    from .summarizers import get_summarizer

    name = args.summarizer or "offline"
    kw: dict[str, Any] = {}
    if name == "offline":
        given = [flag for flag, value in (("--model", args.model), ("--base-url", args.base_url)) if value]
        if given:
            raise _CliFailure(f"{' and '.join(given)} need --summarizer openai or anthropic")
    else:
        if args.model:
            kw["model"] = args.model
        if args.base_url:
            kw["base_url"] = args.base_url
        if args.context_window is not None:
            kw["context_window"] = args.context_window
        if args.max_tokens is not None:
            kw["max_output_tokens"] = args.max_tokens
    try:
        return get_summarizer(name, **kw)
    except ImportError as exc:
        raise _CliFailure(f"summarizer {name!r} is not available: {exc}") from None
    except ValueError as exc:
        env = "OPENAI" if name == "openai" else "ANTHROPIC"
        raise _CliFailure(f"{exc} (use --model M, or set ${env}_MODEL / ${env}_API_KEY)") from None


def _take_write_lock(s: Session) -> None:
    """Take the writer lock before any slow work, so a locked or read-only file fails before
    a model is called rather than after."""
    try:
        s.lock()
    except SessionLockedError:
        raise
    except OSError as exc:
        raise _CliFailure(f"{s.path}: cannot write: {exc.strerror or exc}") from None


def _legacy_version(s: Session) -> int | None:
    """1 or 2 for a legacy file whose first write rewrites it as v3 (migration), else None."""
    return s.legacy_version


def _migration_line(legacy: int | None, s: Session, dry_run: bool) -> str | None:
    """What the human output says about migrating a legacy file (None: nothing to say)."""
    if legacy is None:
        return None
    if dry_run:
        return f"migration:         the v{legacy} file would be rewritten as v3 first (Pi does this on open)"
    if s.needs_migration:
        return None  # nothing was written, so nothing was migrated
    return f"migrated:          the v{legacy} file was rewritten as v3 (atomically) before the first write, as Pi does"


def _entry_where(s: Session, entry_id: Any) -> dict:
    """``{id, line, type, role}`` of an entry id (line/type/role None when unknown)."""
    e = s.get_entry(entry_id) if isinstance(entry_id, str) else None
    if e is None:
        return {"id": entry_id, "line": None, "type": None, "role": None}
    return {"id": entry_id, "line": e.line, "type": e.type, "role": e.role}


def _where_text(w: dict) -> str:
    if w["line"] is None:
        return _shown_id(w["id"])
    return f"{_shown_id(w['id'])} (line {w['line']}, {safe_text(_kind_from(w['type'], w['role']))})"


def _usage_json(usage: Any) -> Any:
    return None if usage is None else asdict(usage)


def _usage_text(usage: Any, summarizer_name: str) -> str:
    if usage is None:
        return "none reported"
    if not any((usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens)):
        return "0 tokens" + (" (offline summarizer: no model call)" if summarizer_name == "offline" else "")
    parts = [f"{usage.input} input", f"{usage.output} output"]
    if usage.cache_read:
        parts.append(f"{usage.cache_read} cache read")
    if usage.cache_write:
        parts.append(f"{usage.cache_write} cache write")
    if usage.reasoning:
        parts.append(f"{usage.reasoning} reasoning")
    text = ", ".join(parts) + f" tokens ({usage.total_tokens} total)"
    if usage.cost and isinstance(usage.cost.get("total"), (int, float)):
        text += f"; cost ${usage.cost['total']:.6f}"
    return text


def _print_block(out: _Out, title: str, text: str) -> None:
    """A multi-line text, every line escaped and indented by two spaces."""
    out(title)
    for line in text.split("\n"):
        out("  " + safe_text(line) if line else "")


def _sum_tokens(messages: list) -> Any:
    from .tokens import estimate_tokens

    per = [_tokens_or_none(estimate_tokens, m) for m in messages]
    return None if any(t is None for t in per) else sum(per)


def _files_json(read: Sequence[str], modified: Sequence[str]) -> dict:
    return {"read": list(read), "modified": list(modified)}


# ==== compact =========================================================================


def _compact_settings(args: argparse.Namespace) -> Any:
    from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings

    d = DEFAULT_COMPACTION_SETTINGS
    return CompactionSettings(
        enabled=True,
        reserve_tokens=d.reserve_tokens if args.reserve_tokens is None else args.reserve_tokens,
        keep_recent_tokens=d.keep_recent_tokens if args.keep_recent_tokens is None else args.keep_recent_tokens,
    )


def _nothing_to_compact(s: Session, args: argparse.Namespace, message: str, already: bool) -> int:
    if args.json:
        _print_json(
            {
                "path": str(s.path),
                "dry_run": bool(args.dry_run),
                "compacted": False,
                "reason": "already_compacted" if already else "nothing_to_compact",
                "message": message,
            }
        )
    print(f"sessiontree: {safe_text(message)}", file=sys.stderr)
    return 1


def _compact_plan(s: Session, args: argparse.Namespace, settings: Any) -> dict:
    """What a compaction would do: :func:`sessiontree.orchestration.plan_compaction` (the plan
    ``compact`` runs), shown without a summarizer."""
    from .context import should_compact
    from .orchestration import AlreadyCompactedError, NothingToCompactError, plan_compaction

    try:
        plan = plan_compaction(s, settings, getattr(args, "instructions", None))
    except NothingToCompactError as exc:
        return {"preparation": None, "already": isinstance(exc, AlreadyCompactedError)}
    prep = plan.preparation
    kept = plan.kept_messages
    history = plan.requests[plan.history_index].conversation if plan.history_index is not None else ""
    prefix = plan.requests[plan.prefix_index].conversation if plan.prefix_index is not None else ""
    auto = None
    if args.context_window is not None:
        auto = {
            "context_window": args.context_window,
            "reserve_tokens": settings.reserve_tokens,
            "threshold": args.context_window - settings.reserve_tokens,
            "would_compact": should_compact(prep.tokens_before, args.context_window, settings),
        }
    return {
        "preparation": prep,
        "doc": {
            "path": str(s.path),
            "dry_run": True,
            "settings": {"keep_recent_tokens": settings.keep_recent_tokens, "reserve_tokens": settings.reserve_tokens},
            "first_kept_entry": _entry_where(s, prep.first_kept_entry_id),
            "is_split_turn": bool(prep.is_split_turn),
            "tokens_before": prep.tokens_before,
            "tokens_before_source": plan.tokens_before_source,
            "estimated_tokens_before": plan.estimated_tokens_before,
            "to_summarize": {
                "messages": len(prep.messages_to_summarize),
                "tokens": _sum_tokens(prep.messages_to_summarize),
            },
            "turn_prefix": {
                "messages": len(prep.turn_prefix_messages),
                "tokens": _sum_tokens(prep.turn_prefix_messages),
            },
            "kept": {"messages": len(kept), "tokens": _sum_tokens(kept)},
            "previous_summary": {
                "present": prep.previous_summary is not None,
                "chars": len(prep.previous_summary) if isinstance(prep.previous_summary, str) else None,
            },
            "files": _files_json(plan.read_files, plan.modified_files),
            "serialized_chars": {
                "history": len(history),
                "turn_prefix": len(prefix),
                "total": len(history) + len(prefix),
            },
            "summary_requests": len(plan.requests),
            "auto_compaction": auto,
        },
    }


def _tokens_before_text(tokens: Any, source: str, estimated: Any) -> str:
    """``tokens before`` labelled by where it comes from, with the comparable estimate."""
    if source == "usage":
        return f"{_fmt_tokens(tokens)} (provider usage + estimate; ~{_fmt_tokens(estimated)} by the chars/4 estimate)"
    if source == "hook":
        return f"{_fmt_tokens(tokens)} (given by a hook; ~{_fmt_tokens(estimated)} by the chars/4 estimate)"
    return f"~{_fmt_tokens(tokens)} (chars/4 estimate)"


def _print_dry_run(doc: dict, summarizer_name: str) -> None:
    out = _Out()

    def count(part: dict) -> str:
        n = part["messages"]
        return f"{n} message{'s' if n != 1 else ''}, ~{_fmt_tokens(part['tokens'])} tokens"

    out(f"dry run: nothing written to {safe_text(doc['path'])}")
    out(f"first kept entry:  {_where_text(doc['first_kept_entry'])}")
    out(f"split turn:        {'yes' if doc['is_split_turn'] else 'no'}")
    out(
        f"tokens before:     {_tokens_before_text(doc['tokens_before'], doc['tokens_before_source'], doc['estimated_tokens_before'])}"
    )
    out(f"to summarize:      {count(doc['to_summarize'])}")
    out(f"turn prefix:       {count(doc['turn_prefix'])}")
    out(f"kept verbatim:     {count(doc['kept'])}")
    prev = doc["previous_summary"]
    out(f"previous summary:  {'yes (%s chars, updated in place)' % prev['chars'] if prev['present'] else 'none'}")
    for title, key in (("read files:", "read"), ("modified files:", "modified")):
        files = doc["files"][key]
        out(f"{title:<19}{len(files)}")
        for f in files:
            out(f"  {safe_text(f)}")
    chars = doc["serialized_chars"]
    out(
        f"serialized text:   {chars['history']} chars to summarize"
        + (f" + {chars['turn_prefix']} chars of turn prefix" if chars["turn_prefix"] else "")
    )
    out(f"summary requests:  {doc['summary_requests']} ({safe_text(summarizer_name)} summarizer)")
    auto = doc["auto_compaction"]
    if auto is not None:
        verdict = "yes" if auto["would_compact"] else "no"
        out(
            f"auto-compaction:   {verdict} (tokens before > {auto['context_window']} - {auto['reserve_tokens']}"
            f" = {auto['threshold']})"
        )
    out.flush()


def cmd_compact(s: Session, args: argparse.Namespace) -> int:
    """Compact the active branch like Pi's ``/compact`` (``--dry-run``: only show the plan).

    Exit 1 when there is nothing to compact (session too small, or already compacted)."""
    from .orchestration import NothingToCompactError, AlreadyCompactedError
    from .summarizers import SummarizerError

    settings = _compact_settings(args)
    progress = _Progress(_progress_enabled(args) and not args.dry_run)
    if args.dry_run:
        if args.summarizer in (None, "offline") and (args.model or args.base_url):
            raise _CliFailure("--model and --base-url need --summarizer openai or anthropic")
        plan = _compact_plan(s, args, settings)
        if plan["preparation"] is None:
            message = "Already compacted" if plan["already"] else "Nothing to compact (session too small)"
            return _nothing_to_compact(s, args, message, plan["already"])
        doc = plan["doc"]
        doc["summarizer"] = args.summarizer or "offline"
        legacy = _legacy_version(s)
        doc["migrated_from_version"] = None
        doc["would_migrate_from_version"] = legacy
        if args.json:
            _print_json(doc)
        else:
            _print_dry_run(doc, doc["summarizer"])
            note = _migration_line(legacy, s, True)
            if note:
                print(note)
        return 0

    summarizer = _ProgressSummarizer(_make_summarizer(args), progress)
    legacy = _legacy_version(s)
    _take_write_lock(s)
    progress("preparing…")
    captured: dict = {}

    def on_prepared(event: Any) -> None:
        prep = event.preparation
        captured["prep"] = prep
        n = (1 if prep.messages_to_summarize else 0) + (1 if prep.is_split_turn and prep.turn_prefix_messages else 0)
        summarizer.total = n
        progress(f"summarizing ({n} request{'s' if n != 1 else ''}, {summarizer.name})…")
        if n == 0:
            progress("appending…")

    s.hooks.before_compact.append(on_prepared)
    try:
        result = s.compact(
            summarizer,
            settings=settings,
            custom_instructions=args.instructions,
            reason="manual",
            context_window=args.context_window,
            max_tokens=args.max_tokens,
        )
    except NothingToCompactError as exc:
        return _nothing_to_compact(s, args, str(exc), isinstance(exc, AlreadyCompactedError))
    except SummarizerError as exc:
        raise _CliFailure(f"summary request failed ({summarizer.name}); nothing written: {exc}") from None
    finally:
        s.hooks.before_compact.remove(on_prepared)
    s.flush()
    progress("done")
    prep = captured.get("prep")
    details = result.details if isinstance(result.details, dict) else {}
    read_files = details.get("readFiles") or []
    modified_files = details.get("modifiedFiles") or []
    entry = _entry_where(s, result.entry.id)
    doc = {
        "path": str(s.path),
        "dry_run": False,
        "compacted": True,
        "summarizer": summarizer.name,
        "compaction_entry": entry,
        "first_kept_entry": _entry_where(s, result.first_kept_entry_id),
        "tokens_before": result.tokens_before,
        "tokens_before_source": result.tokens_before_source,
        "estimated_tokens_before": result.estimated_tokens_before,
        "estimated_tokens_after": result.estimated_tokens_after,
        "summarized_messages": len(prep.messages_to_summarize) if prep is not None else None,
        "turn_prefix_messages": len(prep.turn_prefix_messages) if prep is not None else None,
        "is_split_turn": bool(prep.is_split_turn) if prep is not None else None,
        "usage": _usage_json(result.usage),
        "files": _files_json(read_files, modified_files),
        "summary": result.summary,
        "migrated_from_version": legacy if legacy is not None and not s.needs_migration else None,
        "would_migrate_from_version": None,
    }
    if args.json:
        _print_json(doc)
        return 0
    out = _Out()
    out(f"compacted {safe_text(doc['path'])} ({safe_text(summarizer.name)} summarizer)")
    note = _migration_line(legacy, s, False)
    if note:
        out(note)
    out(f"compaction entry:  {_where_text(entry)}")
    out(f"first kept entry:  {_where_text(doc['first_kept_entry'])}")
    if result.estimated_tokens_before is not None:
        out(
            f"tokens:            ~{_fmt_tokens(result.estimated_tokens_before)} → "
            f"~{_fmt_tokens(result.estimated_tokens_after)} (chars/4, like with like)"
        )
    out(
        f"tokens before:     {_tokens_before_text(result.tokens_before, result.tokens_before_source, result.estimated_tokens_before)}"
    )
    if prep is not None:
        extra = f" + {len(prep.turn_prefix_messages)} of a split turn" if prep.is_split_turn else ""
        out(f"summarized:        {len(prep.messages_to_summarize)} messages{extra}")
    out(f"usage:             {_usage_text(result.usage, summarizer.name)}")
    _print_block(out, "summary:", result.summary)
    out.flush()
    return 0


# ==== navigate ========================================================================


def cmd_navigate(s: Session, args: argparse.Namespace) -> int:
    """Move the leaf like Pi's ``/tree`` and write what Pi's format can keep: a branch summary
    (``--summarize``) and/or a label (``--label``). Exit 1 when neither is asked (nothing would
    be written: Pi reopens a file at its last entry), unless ``--dry-run``."""
    from .summarizers import SummarizerError

    target = s.get_entry(args.target_id)
    if target is None:
        raise EntryNotFoundError.of(args.target_id)
    if not (args.summarize or args.label is not None or args.dry_run):
        print(
            "sessiontree: navigate without --summarize or --label writes nothing (Pi reopens a session at "
            "its last entry, so a bare leaf move is not kept); add --summarize and/or --label TEXT, "
            "or --dry-run to preview the move",
            file=sys.stderr,
        )
        return 1
    if args.dry_run and args.summarizer in (None, "offline") and (args.model or args.base_url):
        raise _CliFailure("--model and --base-url need --summarizer openai or anthropic")
    progress = _Progress(_progress_enabled(args) and not args.dry_run)
    summarizer = None
    if args.summarize and not args.dry_run:
        summarizer = _ProgressSummarizer(_make_summarizer(args), progress)
    write = not args.dry_run
    legacy = _legacy_version(s)
    if write:
        _take_write_lock(s)
    old_leaf = s.leaf_id
    first_new = len(s)
    captured: dict = {}

    def on_prepared(event: Any) -> None:
        prep = event.preparation
        captured["prep"] = prep
        if summarizer is not None and prep.entries_to_summarize:
            summarizer.total = 1
            n = len(prep.entries_to_summarize)
            progress(
                f"summarizing the abandoned branch ({n} entr{'ies' if n != 1 else 'y'}, 1 request, {summarizer.name})…"
            )

    progress("preparing…")
    s.hooks.before_tree.append(on_prepared)
    try:
        result = s.navigate_tree(
            args.target_id,
            summarize=bool(args.summarize) and write,
            summarizer=summarizer,
            custom_instructions=args.instructions,
            replace_instructions=bool(args.replace_instructions),
            label=args.label if write else None,
            context_window=args.context_window,
            max_tokens=args.max_tokens,
        )
    except SummarizerError as exc:
        raise _CliFailure(
            f"summary request failed ({summarizer.name if summarizer else '?'}); nothing written: {exc}"
        ) from None
    finally:
        s.hooks.before_tree.remove(on_prepared)
    s.flush()
    new_entries = [s.entry_at(i) for i in range(first_new, len(s))] if write else []
    written: list[dict[str, Any]] = [{"id": e.id, "line": e.line, "type": e.type} for e in new_entries]
    label_entry = next((w for w in written if w["type"] == "label"), None)
    summary_entry = result.summary_entry
    if label_entry is not None:
        label = s.get_entry(label_entry["id"])
        assert label is not None  # appended above
        position = label.parent_id
    else:
        position = result.new_leaf_id
    prep = captured.get("prep")
    abandoned = len(prep.entries_to_summarize) if prep is not None else 0
    progress("done")
    doc = {
        "path": str(s.path),
        "dry_run": bool(args.dry_run),
        "target": _entry_where(s, args.target_id),
        "old_leaf_id": old_leaf,
        "position_id": position,
        "new_leaf_id": result.new_leaf_id,
        "editor_text": result.editor_text,
        "abandoned_entries": abandoned,
        "common_ancestor_id": prep.common_ancestor_id if prep is not None else None,
        "branch_summary_id": summary_entry.id if summary_entry is not None else None,
        "summary": summary_entry.get("summary") if summary_entry is not None else None,
        "label_entry_id": label_entry["id"] if label_entry is not None else None,
        "usage": _usage_json(result.usage),
        "written": written,
        "migrated_from_version": legacy if write and legacy is not None and not s.needs_migration else None,
        "would_migrate_from_version": legacy if args.dry_run else None,
    }
    if args.json:
        _print_json(doc)
        return 0
    out = _Out()
    if args.dry_run:
        out(f"dry run: nothing written to {safe_text(doc['path'])}")
    out(f"target:          {_where_text(doc['target'])}")
    out(f"old leaf:        {_shown_id(old_leaf) if old_leaf is not None else '(none)'}")
    leaf = result.new_leaf_id
    if leaf is None:
        out("new leaf:        (none: the next entry starts a new root)")
    else:
        out(f"new leaf:        {_where_text(_entry_where(s, leaf))}")
    if result.editor_text is not None:
        _print_block(out, "editor text:", result.editor_text)
    if args.dry_run:
        out(
            f"abandoned:       {abandoned} entr{'ies' if abandoned != 1 else 'y'}"
            + (" (--summarize would summarize them)" if abandoned else "")
        )
    elif summary_entry is not None:
        out(
            f"branch summary:  {_where_text(_entry_where(s, summary_entry.id))}, {abandoned} abandoned "
            f"entr{'ies' if abandoned != 1 else 'y'}"
        )
        if summarizer is not None:
            out(f"usage:           {_usage_text(result.usage, summarizer.name)}")
    elif args.summarize:
        out("branch summary:  none (no abandoned entries to summarize)")
    if label_entry is not None:
        shown = f'"{safe_text(args.label)}"' if args.label else "(cleared)"
        out(
            f"label:           {shown} on {_shown_id(args.target_id)} (entry {_shown_id(label_entry['id'])}, "
            f"line {label_entry['line']})"
        )
    note = _migration_line(legacy, s, bool(args.dry_run))
    if note:
        out(
            note.replace("migrated:          ", "migrated:        ").replace("migration:         ", "migration:       ")
        )
    if written:
        out(f"written:         {len(written)} entr{'ies' if len(written) != 1 else 'y'}; Pi reopens at the new leaf")
    else:
        out("written:         nothing (leaf moved in memory only)")
    if summary_entry is not None and isinstance(doc["summary"], str):
        _print_block(out, "summary:", doc["summary"])
    out.flush()
    return 0


# ==== main ============================================================================


# ---- export-html (issue 12) ----
def cmd_export_html(session: Session, args: argparse.Namespace) -> int:
    """Write the HTML view (default: FILE with .html) and print where it went."""
    from pathlib import Path

    out = Path(args.output) if args.output else Path(args.file).with_suffix(".html")
    try:
        written = session.export_html(out)
    except OSError as exc:
        raise _CliFailure(f"cannot write {out}: {exc.strerror or exc}", 2) from exc
    if args.json:
        print(orjson.dumps({"path": str(written), "bytes": written.stat().st_size}).decode())
    else:
        print(safe_text(str(written)))
    return 0


# ---- end export-html ----


COMMANDS: dict[str, Callable[[Session, argparse.Namespace], int]] = {
    "info": cmd_info,
    "tree": cmd_tree,
    "branch": cmd_branch,
    "context": cmd_context,
    "entries": cmd_entries,
    "validate": cmd_validate,
    "compact": cmd_compact,
    "navigate": cmd_navigate,
    "export-html": cmd_export_html,  # issue 12
}

#: Commands that may write to the session file.
WRITING_COMMANDS = frozenset({"compact", "navigate"})


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _nonneg_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _pos_int(text: str, negative: str | None = None) -> int:
    """argparse type for an integer > 0, shared by both CLIs (``_fleet_cli.py`` imports it).

    Errors: ``not an integer: 'x'``; ``must be > 0`` for 0; for a negative value ``negative``
    when given, else this CLI's ``must be >= 0, not -3`` (the text of :func:`_nonneg_int`).
    """
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}" if negative is None else negative)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


_NAVIGATE_EPILOG = """Selecting a user message moves the leaf to its parent and prints the message as editor text
(Pi puts it back in the editor); selecting anything else moves the leaf to it.

Pi's file format stores no leaf pointer: a session reopens at its last entry. So a bare move
is not persisted, and navigate refuses it (exit 1) unless something is written: --summarize
appends a branch_summary of the abandoned branch at the new position, --label TEXT appends a
label on the target (either becomes the last entry, so Pi reopens there). --dry-run shows
the move and writes nothing.

exit codes: 0 done; 1 nothing would be written (no --summarize/--label/--dry-run);
2 unknown id, bad file, locked file, summarizer misconfigured or its request failed"""

_COMPACT_EPILOG = """A real run appends one compaction entry (Pi's /compact): the history before the cut point is
summarized, the last --keep-recent-tokens of context is kept verbatim. --dry-run prints the
cut point and what would be summarized, and writes nothing.

Summarizers: offline (default; extractive, no model, no network), openai (any OpenAI-compatible
chat-completions server: $OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL), anthropic
($ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL, $ANTHROPIC_MODEL). --model/--base-url override the
environment. Progress goes to stderr when it is a terminal, or with --progress.

exit codes: 0 done; 1 nothing to compact (session too small, or already compacted);
2 bad file, locked file, summarizer misconfigured or its request failed"""


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for ``sessiontree`` (one subparser per command)."""
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="sessiontree",
        description="Inspect Pi coding-agent session files (JSONL v3). Only compact and navigate write "
        "(appending entries); every other command only reads.",
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
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("info", parents=[common], help="header, counts, leaf, context size")
    sub.add_parser("tree", parents=[common, previews], help="the whole tree, like Pi's /tree")
    p = sub.add_parser("branch", parents=[common, previews], help="the active branch, root to leaf")
    p.add_argument("--from", dest="from_id", metavar="ID", help="end the branch at this entry instead of the leaf")
    p = sub.add_parser("context", parents=[common, previews], help="the messages the model sees")
    p.add_argument("--llm", action="store_true", help="show convert_to_llm output (what a provider receives)")
    p = sub.add_parser("entries", parents=[common], help="entries in file order")
    p.add_argument("--since", metavar="ID", help="only entries after this one in the file")
    sub.add_parser("validate", parents=[common], help="list damaged lines and structural problems")
    sub.add_parser("rpc", add_help=False, help="serve a session over Pi's RPC (JSON lines); see rpc --help")

    summ = argparse.ArgumentParser(add_help=False)
    g = summ.add_argument_group("summarizer")
    g.add_argument(
        "--summarizer",
        choices=("offline", "openai", "anthropic"),
        default=None,
        help="who writes the summary (default offline: extractive, no model, no network)",
    )
    g.add_argument(
        "--model", metavar="M", help="model id for openai/anthropic (default $OPENAI_MODEL / $ANTHROPIC_MODEL)"
    )
    g.add_argument(
        "--base-url",
        metavar="URL",
        help="API base URL for openai/anthropic (default $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL)",
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
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "compact",
        parents=[common, summ],
        help="summarize old history into a compaction entry",
        description="Compact the active branch like Pi's /compact.",
        epilog=_COMPACT_EPILOG,
        formatter_class=fmt,
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
    p = sub.add_parser(
        "navigate",
        parents=[common, summ],
        help="move the leaf like Pi's /tree",
        description="Move to another point of the tree like Pi's /tree.",
        epilog=_NAVIGATE_EPILOG,
        formatter_class=fmt,
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
    p = sub.add_parser("export-html", parents=[common], help="a self-contained HTML view of the session")  # issue 12
    p.add_argument("-o", "--output", metavar="OUT.html", help="where to write (default: FILE with .html)")
    p = sub.add_parser(
        "cache",
        help="the saved-index cache (sessiontree.index_cache): info shows it, clear empties it",
        description="Saved indexes make a second open of a large session cheap. They live in "
        "$SESSIONTREE_INDEX_CACHE (a folder, or 'off'), else $XDG_CACHE_HOME/sessiontree, else "
        "~/.cache/sessiontree. Clearing only removes our own files; nothing is ever needed there.",
    )
    p.add_argument("action", choices=["info", "clear"])
    p.add_argument("--json", action="store_true", help="one JSON document")
    # --- fleet commands (a SOURCE of many sessions, not one FILE): sessiontree/_fleet_cli.py ---
    from ._fleet_cli import add_parsers as add_fleet_parsers

    add_fleet_parsers(sub)
    # ---
    return parser


def _cmd_cache(args: argparse.Namespace) -> int:
    """``sessiontree cache info|clear``: the folder, its saved indexes and rows; or remove them."""
    from . import index_cache

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
    }
    if args.json:
        _write_out(json_document(doc) + "\n", flush=True)
    elif inf.folder is None:
        _write_out("index cache: off (SESSIONTREE_INDEX_CACHE=off)\n", flush=True)
    else:
        _write_out(
            f"index cache: {inf.folder}{'' if inf.exists else ' (not created yet)'}\n"
            f"files: {inf.files} ({inf.bytes} bytes){f', {inf.temp_files} temp' if inf.temp_files else ''}\n"
            f"saved for files of at least {doc['min_bytes']} bytes\n",
            flush=True,
        )
    return 0


def _fail(message: str, code: int = 2, as_json: bool = False) -> int:
    """One line on stderr (and, for ``--json``, an error document on stdout); returns ``code``."""
    try:
        print(f"sessiontree: error: {safe_text(message)}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass
    if as_json:
        try:
            _write_out(json_document({"error": True, "exit_code": code, "message": message}) + "\n", flush=True)
        except (_OutputError, BrokenPipeError):
            _silence_stdout()
    return code


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
    if rest[:1] == ["rpc"]:  # Pi's RPC server takes Pi's launch flags: see sessiontree.rpc
        from .rpc import main as rpc_main

        return rpc_main(rest[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
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
        return _fail(message, code, as_json)

    if getattr(args, "max_preview", 0) < 0:
        return fail("--max-preview must be >= 0")
    if sys.stdout is None:  # started with fd 1 closed: refuse before doing anything
        return fail("standard output is closed; nothing done")
    if args.command == "cache":
        return _cmd_cache(args)
    # --- fleet commands take a SOURCE, not one FILE ---
    from ._fleet_cli import COMMANDS as FLEET_COMMANDS, run as run_fleet

    if args.command in FLEET_COMMANDS:
        return run_fleet(args)
    # ---
    try:
        session = Session.open(args.file, lock_timeout=getattr(args, "lock_timeout", None))
    except FileNotFoundError:
        return fail(f"{args.file}: no such file")
    except SessionFormatError as exc:
        text = str(exc)
        return fail(text if "not a valid pi session" in text else f"{args.file}: not a Pi session ({text})")
    except (OSError, SessionError) as exc:
        return fail(f"{args.file}: cannot read: {exc}")
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback
        return fail(f"{args.file}: cannot read: unexpected {type(exc).__name__}: {exc}")
    entries_before = len(session)
    try:
        rc = COMMANDS[args.command](session, args)
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
        return _fail(f"{exc}{done}", 2, False)
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
            _fail(f"{args.file}: cannot close: {exc}", 2, False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
