"""``sessiontree compact`` and what the writing commands share.

The summarizer choice, progress, the writer lock, one-line failures."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from typing import Any, Sequence


from ..errors import (
    SessionLockedError,
)
from ..session import Session

from ..providers import names_text, provider
from .render import _CliFailure, _Out, _fmt_tokens, _kind_from, _print_json, _shown_id, _tokens_or_none, safe_text


# ==== compact / navigate: shared helpers =================================================


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
    from ..summarizers import get_summarizer

    name = args.summarizer or "offline"
    kw: dict[str, Any] = {}
    if name == "offline":
        given = [flag for flag, value in (("--model", args.model), ("--base-url", args.base_url)) if value]
        if given:
            raise _CliFailure(f"{' and '.join(given)} need --summarizer {names_text()}")
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
        p = provider(name)
        env = p.env if p is not None else "OPENAI"
        raise _CliFailure(f"{exc} (use --model M, or set ${env}_MODEL / ${env}_API_KEY)") from None


def _take_write_lock(s: Session) -> None:
    """Take the writer lock before any slow work.

    So a locked or read-only file fails before a model is called rather than after."""
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


def _entry_where(s: Session, entry_id: Any) -> dict[str, Any]:
    """``{id, line, type, role}`` of an entry id (line/type/role None when unknown)."""
    e = s.get_entry(entry_id) if isinstance(entry_id, str) else None
    if e is None:
        return {"id": entry_id, "line": None, "type": None, "role": None}
    return {"id": entry_id, "line": e.line, "type": e.type, "role": e.role}


def _where_text(w: dict[str, Any]) -> str:
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


def _sum_tokens(messages: list[Any]) -> Any:
    from ..tokens import estimate_tokens

    per = [_tokens_or_none(estimate_tokens, m) for m in messages]
    return None if any(t is None for t in per) else sum(per)


def _files_json(read: Sequence[str], modified: Sequence[str]) -> dict[str, Any]:
    return {"read": list(read), "modified": list(modified)}


# ==== compact =========================================================================


def _compact_settings(args: argparse.Namespace) -> Any:
    from ..settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings

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


def _compact_plan(s: Session, args: argparse.Namespace, settings: Any) -> dict[str, Any]:
    """What a compaction would do.

    :func:`sessiontree.orchestration.plan_compaction` (the plan ``compact`` runs), shown without
    a summarizer."""
    from ..context import should_compact
    from ..orchestration import AlreadyCompactedError, NothingToCompactError, plan_compaction

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


def _print_dry_run(doc: dict[str, Any], summarizer_name: str) -> None:
    out = _Out()

    def count(part: dict[str, Any]) -> str:
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
    from ..orchestration import NothingToCompactError, AlreadyCompactedError
    from ..summarizers import SummarizerError

    settings = _compact_settings(args)
    progress = _Progress(_progress_enabled(args) and not args.dry_run)
    if args.dry_run:
        if args.summarizer in (None, "offline") and (args.model or args.base_url):
            raise _CliFailure(f"--model and --base-url need --summarizer {names_text()}")
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

    from ..summarizers import OfflineSummarizer

    made = _make_summarizer(args)
    # the output-budget rules (window - 4096 - input, the output limit) are a model's: the offline
    # summarizer sends nothing and has neither, so the window is only --dry-run's threshold for it
    # (as compact-all treats it)
    offline = isinstance(made, OfflineSummarizer)
    summarizer = _ProgressSummarizer(made, progress)
    legacy = _legacy_version(s)
    _take_write_lock(s)
    progress("preparing…")

    def on_prepared(event: Any) -> None:  # progress only: the result carries the preparation
        prep = event.preparation
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
            context_window=None if offline else args.context_window,
            max_tokens=None if offline else args.max_tokens,
        )
    except NothingToCompactError as exc:
        return _nothing_to_compact(s, args, str(exc), isinstance(exc, AlreadyCompactedError))
    except SummarizerError as exc:
        raise _CliFailure(f"summary request failed ({summarizer.name}); nothing written: {exc}") from None
    finally:
        s.hooks.before_compact.remove(on_prepared)
    s.flush()
    progress("done")
    prep = result.preparation
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
