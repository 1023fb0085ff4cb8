"""Command-line interface: look inside a Pi session file without Pi.

    $ sessiontree info session.jsonl        # header, counts, leaf, context size
    $ sessiontree tree session.jsonl        # the tree, drawn like Pi's /tree, streamed
                                            # (--around ID, --depth N, --branches-only, --since ID, --limit N)
    $ sessiontree branch session.jsonl      # root → leaf (or --from ID; --since ID, --limit N)
    $ sessiontree context session.jsonl     # what the model sees (--llm: after convertToLlm)
    $ sessiontree entries session.jsonl     # file order (--since ID)
    $ sessiontree validate session.jsonl    # damaged lines, duplicate ids, orphans, cycles
    $ sessiontree compact session.jsonl     # summarize old history (--dry-run: show the plan)
    $ sessiontree navigate session.jsonl ID --summarize   # Pi's /tree, with a branch summary
    $ sessiontree export-html session.jsonl # a self-contained HTML view (-o OUT.html)
    $ sessiontree rpc --session FILE        # Pi's RPC mode on stdin/stdout (sessiontree.rpc)
    $ sessiontree cache info                # the saved-index cache (clear: empty it)
    $ sessiontree stats SOURCE              # a store's summary (--parquet OUT: a row per session)
    $ sessiontree compact-all SOURCE        # compact every session over the threshold
    $ sessiontree scrub FILE -o OUT         # secrets replaced (--in-place, --check)
    $ sessiontree scrub-all SOURCE --out DIR
    $ sessiontree otel SOURCE -o OUT.jsonl  # OpenTelemetry GenAI traces
    $ sessiontree convert SRC -o OUT        # Claude Code / Codex <-> Pi
    $ sessiontree convert-all SRC_DIR --out DIR  # a whole store to Pi sessions
    $ sessiontree search QUERY [SOURCE...]  # full-text search, each hit's branch state

Each command is a row of :data:`sessiontree.cli.commands.COMMANDS` (name, module, handler,
what it writes, ``--json``, help line).

Every subcommand but ``rpc`` takes ``--json`` (one JSON document on stdout, snake_case keys).
Human output never passes terminal control sequences from the file through: everything taken
from the file goes through :func:`safe_text`. Only ``compact``, ``navigate``, ``compact-all``,
``rpc`` and ``scrub --in-place`` write to session files (appending entries under the writer
lock; ``scrub --in-place`` rewrites one); ``--dry-run`` writes nothing. Progress goes to
stderr (when it is a terminal, or with ``--progress``), so stdout stays one JSON document with
``--json``.

Exit codes: 0 success; 1 ``validate`` found a problem, ``compact`` found nothing to compact,
``navigate`` was asked for a move that would write nothing (see its ``--help``); 2 the file is
missing, unreadable or not a Pi session, an id given on the command line is unknown, the active
branch loops (``branch``/``context``: Pi never returns there), another writer holds the lock,
a summarizer is misconfigured or its request failed; 130 interrupted. Tracebacks are never
shown for these.
"""

from __future__ import annotations

# The package, by what each part does: ``commands`` (the registry: one row per command),
# ``app`` (the parser and :func:`main`, dispatching through the registry), ``render`` (safe
# text, JSON, previews, the output stream), ``read`` (info, branch, context, entries,
# validate), ``tree`` (the streamed tree walk), ``compact`` (compact and what the writing
# commands share), ``write`` (navigate, export-html), ``fleet`` (stats, compact-all over a
# SOURCE), ``scrub`` (scrub, scrub-all), ``otel``, ``convert``, ``args`` (argparse types,
# epilogs). A command's module is imported when it runs; the names below stay importable from
# ``sessiontree.cli`` (the commands' functions on first use).
from typing import Any

from .app import (
    COMMANDS as COMMANDS,
    WRITING_COMMANDS as WRITING_COMMANDS,
    build_parser as build_parser,
    main,
)
from .args import _nonneg_float as _nonneg_float, _nonneg_int as _nonneg_int, _pos_int as _pos_int
from .render import (
    DEFAULT_PREVIEW as DEFAULT_PREVIEW,
    MAX_TREE_GUIDES as MAX_TREE_GUIDES,
    clip,
    entry_preview,
    json_document,
    message_preview,
    preview,
    safe_text,
)
from .render import print_failure as _fail  # noqa: F401 (importable from here, as before)

#: Names importable from here whose modules load on first use: name -> module of ``sessiontree.cli``.
_LAZY = {
    "cmd_info": "read",
    "cmd_branch": "read",
    "cmd_context": "read",
    "cmd_entries": "read",
    "cmd_validate": "read",
    "validate_session": "read",
    "cmd_tree": "tree",
    "cmd_compact": "compact",
    "cmd_navigate": "write",
    "cmd_export_html": "write",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
