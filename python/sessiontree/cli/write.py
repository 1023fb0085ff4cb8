"""The other writing commands: ``navigate`` (Pi's ``/tree``) and ``export-html``."""

from __future__ import annotations

import argparse
import sys
from typing import Any


from ..errors import (
    EntryNotFoundError,
)
from ..session import Session

from ..providers import names_text
from .render import _CliFailure, _Out, _print_json, _shown_id, json_document, safe_text
from .compact import (
    _Progress,
    _ProgressSummarizer,
    _entry_where,
    _legacy_version,
    _make_summarizer,
    _migration_line,
    _print_block,
    _progress_enabled,
    _take_write_lock,
    _usage_json,
    _usage_text,
    _where_text,
)


# ==== navigate ========================================================================


def cmd_navigate(s: Session, args: argparse.Namespace) -> int:
    """Move the leaf like Pi's ``/tree`` and write what Pi's format can keep.

    A branch summary (``--summarize``) and/or a label (``--label``). Exit 1 when neither is
    asked (nothing would be written: Pi reopens a file at its last entry), unless ``--dry-run``."""
    from ..summarizers import SummarizerError

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
        raise _CliFailure(f"--model and --base-url need --summarizer {names_text()}")
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
    captured: dict[str, Any] = {}

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


# ---- export-html ----
def cmd_export_html(session: Session, args: argparse.Namespace) -> int:
    """Write the HTML view (default: FILE with .html) and print where it went."""
    from pathlib import Path

    from .render import progress_wanted

    out = Path(args.output) if args.output else Path(args.file).with_suffix(".html")
    if args.header and not args.scrub:
        raise _CliFailure("--header needs --scrub (nothing was written)", 2)
    try:
        written = session.export_html(
            out, scrub=args.scrub, replay=args.replay, header=args.header, progress=progress_wanted(args)
        )
    except OSError as exc:
        raise _CliFailure(f"cannot write {out}: {exc.strerror or exc}", 2) from exc
    if args.json:
        print(json_document({"path": str(written), "bytes": written.stat().st_size}))
    else:
        print(safe_text(str(written)))
    return 0


# ---- end export-html ----
