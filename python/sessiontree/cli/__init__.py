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

# The package (issue 21 step 2), by what each part does: ``render`` (safe text, JSON, previews,
# the output stream), ``read`` (info, tree, branch, context, entries, validate), ``compact``
# (compact and what the writing commands share), ``tree`` (the streamed tree walk), ``write``
# (navigate, export-html), ``fleet``
# (stats, compact-all over a SOURCE), ``scrub`` (scrub, scrub-all), ``args`` (argparse types,
# epilogs), ``app`` (the command table, the parser, :func:`main`). The names below stay
# importable from ``sessiontree.cli``.
from .app import (
    COMMANDS as COMMANDS,
    WRITING_COMMANDS as WRITING_COMMANDS,
    build_parser as build_parser,
    main,
)
from .render import print_failure as _fail  # noqa: F401 (importable from here, as before)
from .args import _nonneg_float as _nonneg_float, _nonneg_int as _nonneg_int, _pos_int as _pos_int
from .compact import cmd_compact as cmd_compact
from .read import (
    cmd_branch as cmd_branch,
    cmd_context as cmd_context,
    cmd_entries as cmd_entries,
    cmd_info as cmd_info,
    cmd_tree as cmd_tree,
    cmd_validate as cmd_validate,
    validate_session,
)
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
from .write import cmd_export_html as cmd_export_html, cmd_navigate as cmd_navigate

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
