"""Pi 1.6 branch summarization preparation (``/tree`` navigation away from a branch).

Pure functions mirroring Pi's ``core/compaction/branch-summarization.ts``: which entries a
branch summary covers (:func:`collect_entries_for_branch_summary`) and which of their messages
fit a token budget (:func:`prepare_branch_entries`). They work with any store: entries are plain
dicts, and the collector only needs two callables.

Units: tokens are Pi's ``estimateTokens`` (``ceil(chars / 4)`` over UTF-16 code units).

Example (``A`` has two children; leaving ``C`` for ``D`` abandons ``B`` and ``C``)::

    >>> def entry(i, parent, role, text):
    ...     return {"type": "message", "id": i, "parentId": parent, "timestamp": "2026-01-01T00:00:00Z",
    ...             "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 0}}
    >>> store = {e["id"]: e for e in (entry("A", None, "user", "hi"), entry("B", "A", "assistant", "b" * 40),
    ...                               entry("C", "B", "user", "c" * 40), entry("D", "A", "assistant", "d"))}
    >>> def branch(i):
    ...     out = []
    ...     while i is not None:
    ...         out.insert(0, store[i]); i = store[i]["parentId"]
    ...     return out
    >>> got = collect_entries_for_branch_summary(store.get, branch, "C", "D")
    >>> got.common_ancestor_id, [e["id"] for e in got.entries]
    ('A', ['B', 'C'])
    >>> prep = prepare_branch_entries(got.entries, token_budget=15)
    >>> [m["role"] for m in prep.messages], prep.total_tokens
    (['user'], 10)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from ._jsjson import JS_UNDEFINED, entry_id
from .compaction import (
    FileOperations,
    extract_file_ops_from_message,
    file_ops_from_details,
)
from .context import (
    NO_EDIT,
    ContextError,
    apply_context_edit,
    collect_context_edits,
    context_edit_for,
    entry_to_context_messages,
)
from .entries import entry_value, entry_values
from .errors import SessionCycleError
from .tokens import estimate_tokens

__all__ = [
    "BranchSummaryCollection",
    "BranchPreparation",
    "collect_entries_for_branch_summary",
    "branch_entry_message",
    "prepare_branch_entries",
]

Entry = Mapping[str, Any]


@dataclass(frozen=True)
class BranchSummaryCollection:
    """Result of :func:`collect_entries_for_branch_summary` (Pi ``CollectEntriesResult``).

    * ``entries``: entry dicts from just after the common ancestor to the old leaf, oldest first.
    * ``common_ancestor_id``: deepest entry on both paths, or ``None`` when they share none.
    """

    entries: list[Any]
    common_ancestor_id: Optional[str]


@dataclass(frozen=True)
class BranchPreparation:
    """Result of :func:`prepare_branch_entries` (Pi ``BranchPreparation``).

    * ``messages``: message dicts (Pi ``AgentMessage`` shape) that fit the budget, oldest first.
    * ``file_ops``: :class:`sessiontree.compaction.FileOperations` from **all** entries (tool
      calls of every considered message and nested Pi-generated branch summaries' ``details``).
    * ``total_tokens``: sum of the estimates of ``messages``.
    """

    messages: list[Any]
    file_ops: FileOperations
    total_tokens: int | float


def collect_entries_for_branch_summary(
    get_entry: Callable[[str], Optional[Entry]],
    get_branch: Callable[[str], Sequence[Entry]],
    old_leaf_id: Optional[str],
    target_id: str,
) -> BranchSummaryCollection:
    """Entries abandoned moving from ``old_leaf_id`` to ``target_id`` (Pi ``collectEntriesForBranchSummary``).

    ``get_entry(id)`` returns the entry dict or ``None``; ``get_branch(id)`` returns the root-first
    path ending at ``id``. The common ancestor is the deepest entry of the target's path that is
    also on the old leaf's path. Entries are collected walking ``parentId`` links from the old leaf
    up to (excluding) the common ancestor, stopping early at an unknown id, and returned oldest
    first. Compactions on the way are included. With no ``old_leaf_id`` the result is empty.

    Raises :class:`sessiontree.errors.SessionCycleError` if the parent chain from the old leaf
    loops without meeting the common ancestor (Pi would never return).
    """
    if not old_leaf_id:
        return BranchSummaryCollection([], None)

    old_path_ids = {entry_id(entry_value(entry)) for entry in get_branch(old_leaf_id)}
    common_ancestor_id = None
    for entry in reversed(entry_values(get_branch(target_id))):
        eid = entry_id(entry)
        if eid in old_path_ids:
            # a missing id matches only a missing id (Pi: undefined !== null); the result keeps None
            common_ancestor_id = None if eid is JS_UNDEFINED else eid
            break

    entries: list[Any] = []
    seen: dict[str, Any] = {}  # id -> position in the walk
    current: Optional[str] = old_leaf_id
    while current and current != common_ancestor_id:
        if current in seen:
            cycle = list(seen)[seen[current] :]
            raise SessionCycleError(f"parentId cycle through {current!r} while collecting the branch", cycle)
        seen[current] = len(seen)
        entry = entry_value(get_entry(current))
        if entry is None:
            break
        entries.append(entry)
        current = entry.get("parentId") if isinstance(entry, dict) else None
    entries.reverse()
    return BranchSummaryCollection(entries, common_ancestor_id)


def branch_entry_message(entry: Entry, edits: Optional[Mapping[str, Any]] = None) -> Any:
    """The message a branch summary takes from one entry (Pi branch-summarization ``getMessageFromEntry``).

    * ``message`` -> the stored message **as is** (no null-content fix-up, unlike context building,
      so Pi's estimate may throw on it later), except tool results, which give ``None`` (their gist
      is in the assistant's tool call);
    * ``custom_message`` -> ``custom`` message; ``branch_summary`` with a summary -> ``branchSummary``;
    * ``compaction`` -> its ``compactionSummary`` message ``{role, summary, tokensBefore, timestamp}``
      (never its ``systemMessage``);
    * anything else -> ``None``.

    ``edits`` (:func:`sessiontree.context.collect_context_edits`) hide or replace the content of
    targeted entries (:func:`sessiontree.context.apply_context_edit`), as Pi 1.6 does.
    Raises :class:`sessiontree.context.ContextError` for a ``message`` entry whose message is null.
    """
    entry = entry_value(entry)
    etype = entry.get("type") if isinstance(entry, dict) else None
    if etype == "message":
        message = entry.get("message", JS_UNDEFINED)
        if message is None or message is JS_UNDEFINED:
            what = "null" if message is None else "undefined"
            raise ContextError(f"TypeError: Cannot read properties of {what} (reading 'role')")
        if isinstance(message, dict) and message.get("role") == "toolResult":
            return None
        produced = [message]
    elif etype in ("custom_message", "branch_summary", "compaction"):
        produced = entry_to_context_messages(entry)[-1:]  # a compaction's summary comes last
    else:
        return None
    if edits and produced:
        replacement = context_edit_for(edits, entry.get("id", JS_UNDEFINED))
        if replacement is not NO_EDIT:
            produced = apply_context_edit(produced, replacement)
    return produced[0] if produced else None


def prepare_branch_entries(entries: Sequence[Entry], token_budget: int = 0) -> BranchPreparation:
    """The messages of abandoned ``entries`` that fit ``token_budget`` (Pi ``prepareBranchEntries``).

    ``entries``: entry dicts, oldest first (as :func:`collect_entries_for_branch_summary` gives
    them). ``token_budget``: estimated tokens, ``0`` = no limit. ``context_edit`` entries among
    ``entries`` apply first (latest wins): omitted messages are skipped entirely, replaced ones use
    their new content. Then:

    1. File lists of every nested Pi-generated ``branch_summary`` (``fromHook`` falsy, truthy
       ``details``) are collected first, whatever fits: ``readFiles`` -> read, ``modifiedFiles`` -> edited.
    2. Entries are walked **newest first**; each message (:func:`branch_entry_message`) adds its
       ``read``/``write``/``edit`` tool calls to the file lists, then is kept if the running total
       stays within the budget. The first message that does not fit ends the walk; if it is a
       compaction or branch summary it is still kept when the total so far is below 90% of the
       budget.

    Raises :class:`sessiontree.tokens.EstimateError` where Pi's estimate throws (null content, a
    tool call without ``arguments``, ...), :class:`sessiontree.context.ContextError` for a null message.

        >>> prepare_branch_entries([]).total_tokens
        0
    """
    messages: list[Any] = []
    file_ops = FileOperations()
    total: int | float = 0

    entries = entry_values(entries)
    for entry in entries:
        if isinstance(entry, dict) and entry.get("type") == "branch_summary":
            file_ops_from_details(entry, file_ops)

    edits = collect_context_edits(entries)
    for entry in reversed(entries):
        message = branch_entry_message(entry, edits)
        if message is None:
            continue
        extract_file_ops_from_message(message, file_ops)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            if entry.get("type") in ("compaction", "branch_summary") and total < token_budget * 0.9:
                # A summary is dense context: squeeze it in while under 90% of the budget.
                messages.append(message)
                total += tokens
            break
        messages.append(message)
        total += tokens

    messages.reverse()
    return BranchPreparation(messages, file_ops, total)
