"""Pi 1.6 compaction preparation: cut points, file tracking and serialization.

Pure functions over **root-first lists of entry dicts** (Pi's in-memory session entries after
migration, exactly as parsed from the JSONL file). Nothing here reads files or calls a model; the
stateful session and the summarizers call these functions.

The rules mirror Pi's ``core/compaction/compaction.ts`` and ``core/compaction/utils.ts``; where
Pi 1.6.0 differs from older Pi (context_edit omissions, system messages, compaction entries in
the summarized span) the behaviour follows the goldens in ``tests/corpus``. Search this file for a
Pi name (``findCutPoint``, ``prepareCompaction``, ``serializeConversation``) to find its rule.

Units: token counts are Pi's ``estimateTokens`` (``ceil(chars / 4)``, chars counted in **UTF-16
code units**, i.e. JavaScript ``string.length``), computed by :func:`sessiontree.tokens.estimate_tokens`.
Where Pi throws on malformed content (a ``null`` content, a tool call without ``arguments``...)
these functions raise at the same point: :class:`sessiontree.tokens.EstimateError` from token
estimates, :class:`sessiontree.context.ContextError` from context building and
:class:`SerializationError` from :func:`serialize_conversation`, each with Pi's text in
``pi_error``.

Example::

    >>> from sessiontree.settings import CompactionSettings
    >>> def message(i, role, content):
    ...     return {"type": "message", "id": f"m{i}", "parentId": f"m{i - 1}" if i else None,
    ...             "timestamp": "2026-01-01T00:00:00Z",
    ...             "message": {"role": role, "content": content, "timestamp": 0}}
    >>> path = [message(0, "user", "x" * 400),
    ...         message(1, "assistant", [{"type": "text", "text": "ok"}]),
    ...         message(2, "user", "y" * 40)]
    >>> prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=10))
    >>> prep.first_kept_entry_id, [m["role"] for m in prep.messages_to_summarize], prep.tokens_before
    ('m2', ['user', 'assistant'], 111)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from .errors import PiError
from ._jsjson import (
    JS_UNDEFINED,
    entry_id,
    entry_type,
    js_len,
    js_object_entries,
    js_stringify,
    js_to_string,
    js_truthy,
    js_utf16_key,
    js_utf16_prefix,
    message_role,
)
from .context import (
    NO_EDIT,
    apply_context_edit,
    build_session_context,
    collect_context_edits,
    context_edit_for,
    entry_to_context_messages,
    estimate_projected_context_tokens,
    latest_compaction,
)
from .entries import entry_value, entry_values
from .settings import DEFAULT_COMPACTION_SETTINGS
from .tokens import estimate_tokens

__all__ = [
    "CutPointResult",
    "FileOperations",
    "CompactionPreparation",
    "collect_context_edits",
    "apply_context_edit",
    "entry_context_messages",
    "SerializationError",
    "find_valid_cut_points",
    "find_turn_start_index",
    "find_cut_point",
    "kept_boundary",
    "extract_file_ops_from_message",
    "file_ops_from_details",
    "compute_file_lists",
    "format_file_operations",
    "serialize_conversation",
    "prepare_compaction",
    "latest_cut_keep",
    "TOOL_RESULT_MAX_CHARS",
]

Entry = Mapping[str, Any]

#: Tool results are cut to this many UTF-16 code units by :func:`serialize_conversation`.
TOOL_RESULT_MAX_CHARS = 2000

# Roles at which a kept region may start (never ``toolResult``: it must stay with its call).
_CUT_POINT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
# Roles that open a user-message span ("turn"): everything user-like, not assistant/toolResult.
_TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})


# ==== Types ====


@dataclass(frozen=True)
class CutPointResult:
    """Where a compaction cuts a path (Pi compaction.ts ``CutPointResult``).

    * ``first_kept_entry_index``: index (into the entry list given to :func:`find_cut_point`) of
      the first entry kept verbatim.
    * ``turn_start_index``: index of the entry that opens the user-message span being split, or
      ``-1`` when the cut does not split a span.
    * ``is_split_turn``: ``True`` when the cut lands inside a span (at an assistant message).
    """

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool


@dataclass
class FileOperations:
    """Files touched by ``read`` / ``write`` / ``edit`` tool calls (Pi utils.ts ``FileOperations``).

    Each field is an insertion-ordered set of paths: a ``dict`` whose keys are the paths (values
    are ``None``), so ``list(ops.read)`` gives them in first-seen order like a JS ``Set``.

        >>> ops = FileOperations()
        >>> ops.add("read", "a.ts"); ops.add("read", "a.ts"); list(ops.read)
        ['a.ts']
    """

    read: dict[str, Any] = field(default_factory=dict)
    written: dict[str, Any] = field(default_factory=dict)
    edited: dict[str, Any] = field(default_factory=dict)

    def add(self, kind: str, path: Any) -> None:
        """Add ``path`` to the set named ``kind`` (``"read"``, ``"written"`` or ``"edited"``)."""
        getattr(self, kind).setdefault(path, None)

    def as_lists(self) -> dict[str, Any]:
        """``{"read": [...], "written": [...], "edited": [...]}`` in insertion order."""
        return {"read": list(self.read), "written": list(self.written), "edited": list(self.edited)}


@dataclass(frozen=True)
class CompactionPreparation:
    """What Pi 1.6 ``prepareCompaction`` hands to the summarizer.

    * ``first_kept_entry_id``: id of the first entry kept verbatim (str).
    * ``messages_to_summarize``: context messages (dicts, Pi ``AgentMessage`` shape) before the
      kept region, starting at the previous compaction's kept boundary.
    * ``turn_prefix_messages``: when ``is_split_turn``, the messages of the split span before the
      cut (summarized separately); else ``[]``.
    * ``tokens_before``: Pi's projected context-token estimate of the whole current context.
    * ``previous_summary``: summary of the compaction in effect, or ``None``.
    * ``file_ops``: :class:`FileOperations` from the summarized messages, plus the previous
      Pi-generated compaction's ``details``.
    * ``settings``: the settings object passed in.
    """

    first_kept_entry_id: str
    messages_to_summarize: list[Any]
    turn_prefix_messages: list[Any]
    is_split_turn: bool
    tokens_before: int
    previous_summary: Optional[str]
    file_ops: FileOperations
    settings: Any


# ==== Entry projection ====


def entry_context_messages(entry: Entry, edits: Optional[Mapping[str, Any]] = None) -> list[Any]:
    """The context messages one entry contributes to compaction (Pi ``sessionEntryToContextMessages``).

    :func:`sessiontree.context.entry_to_context_messages` (stored messages with null content
    fixed up; ``custom_message`` -> ``custom``; ``branch_summary`` with a summary ->
    ``branchSummary``) with the entry's ``context_edit`` from ``edits``
    (:func:`collect_context_edits`) applied. Compaction entries give ``[]``: their summary is
    placed by context building, never counted, cut at or summarized again by compaction code.
    Raises :class:`sessiontree.context.ContextError` where Pi throws (a null ``message``).
    """
    entry = entry_value(entry)
    if entry_type(entry) == "compaction":
        return []
    messages = entry_to_context_messages(entry)
    if edits and messages:
        replacement = context_edit_for(edits, entry_id(entry))
        if replacement is not NO_EDIT:
            messages = apply_context_edit(messages, replacement)
    return messages


def _projector(entries: Sequence[Entry], edits: Optional[Mapping[str, Any]]) -> Callable[[int], list[Any]]:
    """Memoised ``index -> entry_context_messages(entries[index], edits)``."""
    cache: dict[int, list[Any]] = {}

    def messages_of(index: int) -> list[Any]:
        got = cache.get(index)
        if got is None:
            got = cache[index] = entry_context_messages(entries[index], edits)
        return got

    return messages_of


# ==== Cut point (Pi compaction.ts findCutPoint) ====


def _is_cut_point(entry: Any, messages: list[Any]) -> bool:
    return entry_type(entry) != "compaction" and any(message_role(m) in _CUT_POINT_ROLES for m in messages)


def _is_turn_start(entry: Any, messages: list[Any]) -> bool:
    return entry_type(entry) != "compaction" and any(message_role(m) in _TURN_START_ROLES for m in messages)


def _turn_start(
    entries: Sequence[Entry], entry_index: int, start_index: int, messages_of: Callable[[int], list[Any]]
) -> int:
    for i in range(entry_index, start_index - 1, -1):
        if _is_turn_start(entries[i], messages_of(i)):
            return i
    return -1


def find_valid_cut_points(
    entries: Sequence[Entry], start_index: int, end_index: int, edits: Optional[Mapping[str, Any]] = None
) -> list[Any]:
    """Indices in ``[start_index, end_index)`` where a kept region may start (Pi ``findValidCutPoints``).

    A cut point is an entry (not a compaction) contributing a user, assistant, bashExecution,
    custom, branchSummary or compactionSummary message: user/assistant/bash/custom-role
    ``message`` entries, ``custom_message`` and ``branch_summary`` entries. Never a tool result,
    a system message or an entry hidden by a ``context_edit`` in ``edits``. Ascending ints.
    """
    entries = entry_values(entries)
    messages_of = _projector(entries, edits)
    return [i for i in range(start_index, end_index) if _is_cut_point(entries[i], messages_of(i))]


def find_turn_start_index(
    entries: Sequence[Entry], entry_index: int, start_index: int, edits: Optional[Mapping[str, Any]] = None
) -> int:
    """Index of the entry opening the turn that holds ``entry_index`` (Pi ``findTurnStartIndex``).

    Walks back from ``entry_index`` to ``start_index`` (both inclusive) for an entry contributing
    a user, bashExecution, custom, branchSummary or compactionSummary message; ``-1`` if none.
    """
    entries = entry_values(entries)
    return _turn_start(entries, entry_index, start_index, _projector(entries, edits))


def find_cut_point(
    entries: Sequence[Entry],
    start_index: int,
    end_index: int,
    keep_recent_tokens: int,
    edits: Optional[Mapping[str, Any]] = None,
    token_counter: Optional[Callable[[dict[str, Any]], Any]] = None,
) -> CutPointResult:
    """Find where to cut so that about ``keep_recent_tokens`` tokens stay verbatim (Pi ``findCutPoint``).

    ``entries``: root-first entry dicts; only ``[start_index, end_index)`` is considered.
    ``keep_recent_tokens``: token budget (Pi's estimate, or ``token_counter``'s counts when
    given). ``edits``: optional ``context_edit`` map (:func:`collect_context_edits`); hidden
    entries count 0 tokens and are no cut points.

    Walking back from ``end_index - 1``, the estimates of the messages each entry contributes are
    summed, skipping entries worth 0 tokens. At the first entry where the sum reaches the budget
    the cut goes to the nearest valid cut point at or after it (:func:`find_valid_cut_points`);
    if the budget is never reached everything from the first cut point is kept. The cut then
    moves back over directly preceding entries that contribute no message (model and thinking
    changes, labels, ``custom`` entries, edits...), stopping at a compaction. A cut at an entry
    that does not open a user-message span (an assistant message) is a split turn, whose span
    starts at :func:`find_turn_start_index`. With no cut point in range: ``(start_index, -1, False)``.

    Estimates are computed lazily, newest first, so a malformed message raises
    :class:`sessiontree.tokens.EstimateError` only if the walk reaches it, as in Pi.

        >>> path = [{"type": "message", "id": "u", "message": {"role": "user", "content": "q"}},
        ...         {"type": "message", "id": "a", "message": {"role": "assistant",
        ...          "content": [{"type": "text", "text": "x" * 80}]}}]
        >>> find_cut_point(path, 0, len(path), 20)
        CutPointResult(first_kept_entry_index=1, turn_start_index=0, is_split_turn=True)
    """
    entries = entry_values(entries)
    return _find_cut_point(
        entries,
        start_index,
        end_index,
        keep_recent_tokens,
        _projector(entries, edits),
        token_counter or estimate_tokens,
    )


def _find_cut_point(
    entries: Sequence[Entry],
    start_index: int,
    end_index: int,
    keep_recent_tokens: int,
    messages_of: Callable[[int], list[Any]],
    count: Callable[[Any], float] = estimate_tokens,
) -> CutPointResult:
    cut_points = [i for i in range(start_index, end_index) if _is_cut_point(entries[i], messages_of(i))]
    if not cut_points:
        return CutPointResult(start_index, -1, False)

    accumulated: float = 0
    cut_index = cut_points[0]
    for i in range(end_index - 1, start_index - 1, -1):
        tokens: float = 0
        for message in messages_of(i):
            tokens += count(message)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            at = bisect.bisect_left(cut_points, i)
            if at < len(cut_points):
                cut_index = cut_points[at]
            break

    # Keep the metadata entries (settings changes, labels, ...) directly before the cut.
    while cut_index > start_index:
        if entry_type(entries[cut_index - 1]) == "compaction" or messages_of(cut_index - 1):
            break
        cut_index -= 1

    starts_turn = _is_turn_start(entries[cut_index], messages_of(cut_index))
    turn_start = -1 if starts_turn else _turn_start(entries, cut_index, start_index, messages_of)
    return CutPointResult(cut_index, turn_start, not starts_turn and turn_start != -1)


# ==== File operations (Pi utils.ts) ====

_TOOL_FILE_KIND = {"read": "read", "write": "written", "edit": "edited"}


def extract_file_ops_from_message(message: Any, file_ops: FileOperations) -> None:
    """Record the paths of ``read`` / ``write`` / ``edit`` tool calls of an assistant message.

    Pi utils.ts ``extractFileOpsFromMessage``: only ``assistant`` messages with list content;
    a ``toolCall`` block needs ``name`` and ``arguments`` keys and a non-empty string
    ``arguments.path``. ``read`` -> ``file_ops.read``, ``write`` -> ``written``, ``edit`` -> ``edited``;
    other tools are ignored. Mutates ``file_ops`` in place; returns ``None``; never raises.

        >>> ops = FileOperations()
        >>> extract_file_ops_from_message({"role": "assistant", "content": [
        ...     {"type": "toolCall", "name": "edit", "arguments": {"path": "a.ts"}}]}, ops)
        >>> list(ops.edited)
        ['a.ts']
    """
    if message_role(message) != "assistant":
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        if "arguments" not in block or "name" not in block:
            continue
        args = block["arguments"]
        path = args.get("path") if isinstance(args, dict) else None
        if not isinstance(path, str) or not path:
            continue
        kind = _TOOL_FILE_KIND.get(block["name"]) if isinstance(block["name"], str) else None
        if kind is not None:
            file_ops.add(kind, path)


def file_ops_from_details(entry: Entry, file_ops: FileOperations) -> None:
    """Carry the file lists of a Pi-generated summary entry's ``details`` into ``file_ops``.

    Pi compaction.ts ``extractFileOperations`` / branch-summarization.ts ``prepareBranchEntries``:
    only when ``fromHook`` is falsy and ``details`` is an object; ``details.readFiles`` (a list)
    goes to ``read``, ``details.modifiedFiles`` (a list) to ``edited`` (modified files are not
    split back into written/edited).
    Non-string items are added as JavaScript's ``String(item)``. Mutates ``file_ops`` in place.
    """
    entry = entry_value(entry)
    if not isinstance(entry, dict) or js_truthy(entry.get("fromHook")):
        return
    details = entry.get("details")
    if not isinstance(details, dict):
        return
    for key, kind in (("readFiles", "read"), ("modifiedFiles", "edited")):
        paths = details.get(key)
        if isinstance(paths, list):
            for path in paths:
                file_ops.add(kind, path if isinstance(path, str) else js_to_string(path))


def compute_file_lists(file_ops: FileOperations) -> tuple[Any, ...]:
    """``(read_files, modified_files)``, two lists of paths (Pi utils.ts ``computeFileLists``).

    ``modified_files`` = edited ∪ written; ``read_files`` = read minus modified. Both are sorted by
    UTF-16 code units like JavaScript's default ``Array.prototype.sort``, which differs from
    Python's code-point order: ``"ｆｕｌｌ.txt"`` (U+FF46) sorts *after* ``"😀.md"`` (U+D83D...).

        >>> compute_file_lists(FileOperations(read={"b": None, "a": None}, edited={"b": None}))
        (['a'], ['b'])
    """
    modified = dict.fromkeys([*file_ops.edited, *file_ops.written])
    read_only = sorted((f for f in file_ops.read if f not in modified), key=js_utf16_key)
    return read_only, sorted(modified, key=js_utf16_key)


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    r"""The file-list blocks Pi appends to a summary (Pi utils.ts ``formatFileOperations``).

    ``""`` when both lists are empty, else ``"\n\n"`` followed by
    ``<read-files>\n...\n</read-files>`` and/or ``<modified-files>\n...\n</modified-files>``
    (one path per line), the two blocks separated by a blank line.

        >>> format_file_operations(["a.ts"], [])
        '\n\n<read-files>\na.ts\n</read-files>'
    """
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)


# ==== Serialization (Pi utils.ts serializeConversation) ====


class SerializationError(PiError):
    """Pi's ``serializeConversation`` would throw on these messages.

    ``str(err)`` and ``err.pi_error`` are Pi's text, e.g. ``"TypeError: msg.content.some is not a
    function"`` for an assistant message whose ``content`` is a string.
    """


def _truncate_for_summary(text: str, max_chars: int) -> str:
    """Pi ``truncateForSummary``: keep ``max_chars`` UTF-16 units and say how many were cut."""
    length = js_len(text)
    if length <= max_chars:
        return text
    return f"{js_utf16_prefix(text, max_chars)}\n\n[... {length - max_chars} more characters truncated]"


def _block_type(block: Any) -> Any:
    """``block.type`` in JavaScript: throws on null blocks, undefined on other primitives."""
    if isinstance(block, dict):
        return block.get("type")
    if block is None:
        raise SerializationError("TypeError: Cannot read properties of null (reading 'type')")
    return None


def _join_item(value: Any) -> str:
    """How ``Array.prototype.join`` renders one item: ``null``/``undefined`` become ``""``."""
    return "" if value is None or value is JS_UNDEFINED else js_to_string(value)


def _text_of_blocks(content: Any) -> str:
    """Concatenated ``text`` of the ``type:"text"`` blocks (JS ``filter/map/join("")``)."""
    if not isinstance(content, list):
        raise SerializationError("TypeError: msg.content.filter is not a function")
    return "".join(_join_item(b.get("text")) for b in content if _block_type(b) == "text")


def _format_tool_call(block: Mapping[str, Any]) -> str:
    """``name(key=<JSON value>, ...)`` as Pi renders one tool call."""
    arguments = js_object_entries(block.get("arguments", JS_UNDEFINED), SerializationError)
    rendered = ", ".join(f"{key}={js_stringify(value)}" for key, value in arguments)
    return f"{js_to_string(block.get('name', JS_UNDEFINED))}({rendered})"


def serialize_conversation(llm_messages: Iterable[Any]) -> str:
    r"""Render LLM messages as plain text for a summarizer (Pi utils.ts ``serializeConversation``).

    ``llm_messages``: message dicts after :func:`sessiontree.context.convert_to_llm` (roles user,
    assistant, toolResult; other roles such as system are skipped). Returns the parts below joined
    by a blank line (``"\n\n"``):

    * ``[User]: <text>``: string content, or the text blocks concatenated; skipped when empty;
    * ``[Assistant]: <text blocks joined by "\n">`` then
      ``[Assistant tool calls]: name(key=<JSON>, ...); ...``; thinking blocks are left out (Pi 1.6);
    * ``[Tool result]: <text>``, cut after 2000 UTF-16 code units (one fewer rather than splitting a
      surrogate pair) and followed by ``\n\n[... N more characters truncated]``, N = length - 2000.

    Raises :class:`SerializationError` where Pi throws: assistant content that is not a list,
    user/tool-result content that is neither a string nor a list, a tool call without arguments.

        >>> serialize_conversation([{"role": "user", "content": "hi"},
        ...     {"role": "assistant", "content": [{"type": "toolCall", "name": "read",
        ...      "arguments": {"path": "a.ts", "limit": 5}}]}])
        '[User]: hi\n\n[Assistant tool calls]: read(path="a.ts", limit=5)'
    """
    parts = []
    for message in llm_messages:
        role = message_role(message)
        if role == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else _text_of_blocks(content)
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            content = message.get("content")
            if not isinstance(content, list):
                raise SerializationError("TypeError: msg.content.some is not a function")
            texts, calls = [], []
            for block in content:
                kind = _block_type(block)
                if kind == "text":
                    texts.append(_join_item(block.get("text")))
                elif kind == "toolCall":
                    calls.append(_format_tool_call(block))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = _text_of_blocks(message.get("content"))
            if text:
                parts.append("[Tool result]: " + _truncate_for_summary(text, TOOL_RESULT_MAX_CHARS))
    return "\n\n".join(parts)


# ==== Preparation (Pi compaction.ts prepareCompaction) ====


def _summary_message(entry: Entry, messages: list[Any]) -> Any:
    """Pi ``getMessageFromEntryForCompaction``.

    An entry's first context message, except for compaction entries and system messages (prompt
    state, folded into the checkpoint)."""
    if entry_type(entry) == "compaction" or not messages:
        return None
    first = messages[0]
    return None if message_role(first) == "system" else first


def _summary_messages(
    path: Sequence[Entry], start: int, end: int, messages_of: Callable[[int], list[Any]]
) -> list[Any]:
    out = []
    for i in range(start, end):
        message = _summary_message(path[i], messages_of(i))
        if message is not None:
            out.append(message)
    return out


def _invisible_suffix_start(
    path: Sequence[Entry],
    cut_index: int,
    boundary_start: int,
    messages_of: Callable[[int], list[Any]],
    edits: Optional[Mapping[str, Any]],
) -> Optional[int]:
    """Index the kept boundary advances to in an overflow-recovery suffix, else ``None``.

    Pi 1.6 compaction.md ("Cut Point Rules"): the boundary moves from ``cut_index`` to the start
    of the path's context-invisible tail (entries contributing no message after edits) only when
    that tail holds an assistant message omitted by a ``context_edit`` and no edit *replaces*
    content in the span being summarized (``boundary_start`` up to the tail).
    """
    start = len(path)
    while start > cut_index and entry_type(path[start - 1]) != "compaction" and not messages_of(start - 1):
        start -= 1
    if start >= len(path) or start <= cut_index:
        return None

    def omitted_assistant(entry: Any) -> bool:
        return (
            entry_type(entry) == "message"
            and message_role(entry.get("message")) == "assistant"
            and context_edit_for(edits, entry_id(entry)) is None
        )

    if not any(omitted_assistant(path[i]) for i in range(start, len(path))):
        return None
    for i in range(boundary_start, start):
        if context_edit_for(edits, entry_id(path[i])) not in (None, NO_EDIT):
            return None
    return start


def kept_boundary(found: tuple[Any, ...] | None) -> tuple[int, int | None]:
    """Where Pi 1.6 ``prepareCompaction`` searches for a cut: ``(boundary_start, dropped)``.

    From :func:`latest_compaction`'s answer ``found`` for the path.

    ``dropped`` is the position of the latest compaction (``None`` without one). Pi cuts over the
    context projection, where that compaction is not between the kept entries and what follows
    it, so callers take it out of the path (a cut backing up over metadata can cross it: golden
    edge_v1_legacy, keepRecentTokens 0). ``boundary_start`` is the start of the summarized span in
    the path without it: the compaction's first kept entry, else the entry right after it.
    """
    if found is None:
        return 0, None
    prev_index, _, kept_index = found
    # Divergence (docs/divergences.md): the kept range is looked for only before the
    # compaction, as context building does; Pi searches the whole path, so a
    # firstKeptEntryId naming a later entry left the messages between the compaction and
    # that entry neither summarized nor kept.
    boundary_start = kept_index if kept_index is not None else prev_index + 1
    if boundary_start > prev_index:
        boundary_start -= 1
    return boundary_start, prev_index


def _cut_range(path: list[Any]) -> tuple[Any, ...]:
    """``(path, boundary_start, previous_compaction)``.

    :func:`kept_boundary` applied to ``path`` (the latest compaction taken out of the returned
    path)."""
    boundary_start, dropped = kept_boundary(latest_compaction(path))
    if dropped is None:
        return path, 0, None
    return path[:dropped] + path[dropped + 1 :], boundary_start, path[dropped]


def latest_cut_keep(
    path_entries: Sequence[Entry], settings: Any = DEFAULT_COMPACTION_SETTINGS
) -> Optional[int | float]:
    """The ``keep_recent_tokens`` at which Pi's cut rule cuts at the path's **latest** cut point.

    The latest valid cut point after the previous kept boundary; ``None`` when no cut point
    after the first one exists (then nothing can be freed).

    Auto-compaction's fallback (docs/divergences.md): when the context is over the threshold
    but :func:`prepare_compaction` finds nothing to summarize (the keep budget falls inside a
    long run of tool results after the last cut point, so Pi keeps everything), compacting with
    this budget keeps only from the latest cut point on; :func:`prepare_compaction` itself stays
    Pi-exact. Units: ``settings.token_counter``'s, else Pi's chars/4 estimate.
    """
    path, start, _ = _cut_range(entry_values(path_entries))
    edits = collect_context_edits(path)
    messages_of = _projector(path, edits)
    points = [i for i in range(start, len(path)) if _is_cut_point(path[i], messages_of(i))]
    if len(points) < 2:
        return None
    count = getattr(settings, "token_counter", None) or estimate_tokens
    keep: int | float = 0
    for i in range(points[-1], len(path)):
        for message in messages_of(i):
            keep += count(message)
    return keep if keep > 0 else None


def _tokens_before(path: list[Any]) -> Any:
    """Pi 1.6 ``tokensBefore``: the projected estimate of the rebuilt current context."""
    context = build_session_context(path)
    return estimate_projected_context_tokens(context.messages, context.sources, path).tokens


def prepare_compaction(
    path_entries: Sequence[Entry], settings: Any = DEFAULT_COMPACTION_SETTINGS
) -> Optional[CompactionPreparation]:
    """Decide what a compaction of the current path summarizes and keeps (Pi 1.6 ``prepareCompaction``).

    ``path_entries``: the root-first path to the leaf (Pi ``getBranch()``), entry dicts.
    ``settings``: anything with ``keep_recent_tokens`` (a
    :class:`sessiontree.settings.CompactionSettings`, Pi's defaults if omitted); returned as
    ``preparation.settings``.

    Returns ``None`` when the leaf is a compaction, the path is empty, the first kept entry has
    no id (a v1 session that needs migration) or there is nothing to summarize. Otherwise:

    * The summarized span starts at the previous compaction's ``firstKeptEntryId`` (messages that
      survived it are summarized again), or right after that compaction when the id is not on the
      path; :func:`find_cut_point` searches from there to the leaf.
    * Messages come from the context projection: ``context_edit`` omissions and replacements
      applied (latest edit on the path wins), null content fixed up; compaction entries and
      system messages are never summarized. A split turn's prefix goes to
      ``turn_prefix_messages``; whatever precedes the span to ``messages_to_summarize``.
    * Overflow recovery: when the path ends in a context-invisible suffix holding an omitted
      assistant attempt, the kept boundary advances into it, so an over-budget input is
      summarized (:func:`_invisible_suffix_start`).
    * ``tokens_before`` is the projected estimate of the whole current context
      (:func:`sessiontree.context.estimate_projected_context_tokens`).
    * ``file_ops``: the previous compaction's ``details`` unless ``fromHook``, then the tool calls of
      ``messages_to_summarize``, then those of ``turn_prefix_messages``.

    Raises :class:`sessiontree.tokens.EstimateError` / :class:`sessiontree.context.ContextError`
    where Pi throws (a malformed message reached by the token walk or by context building).

        >>> prepare_compaction([]) is None
        True
    """
    path = entry_values(path_entries)
    if path and entry_type(path[-1]) == "compaction":
        return None

    tokens_before = _tokens_before(path)
    path, boundary_start, previous_entry = _cut_range(path)
    previous_summary = previous_entry.get("summary") if previous_entry is not None else None

    edits = collect_context_edits(path)
    messages_of = _projector(path, edits)
    cut = _find_cut_point(
        path,
        boundary_start,
        len(path),
        settings.keep_recent_tokens,
        messages_of,
        getattr(settings, "token_counter", None) or estimate_tokens,
    )
    advanced = _invisible_suffix_start(path, cut.first_kept_entry_index, boundary_start, messages_of, edits)
    if advanced is not None:
        turn_start = _turn_start(path, advanced, boundary_start, messages_of)
        cut = CutPointResult(advanced, turn_start, turn_start != -1)

    if cut.first_kept_entry_index >= len(path):
        return None
    first_kept_id = entry_id(path[cut.first_kept_entry_index])
    if not isinstance(first_kept_id, str) or not first_kept_id:
        return None  # Pi: "Session needs migration"

    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    messages_to_summarize = _summary_messages(path, boundary_start, history_end, messages_of)
    turn_prefix = []
    if cut.is_split_turn:
        turn_prefix = _summary_messages(path, cut.turn_start_index, cut.first_kept_entry_index, messages_of)
    if not messages_to_summarize and not turn_prefix:
        return None

    file_ops = FileOperations()
    if previous_entry is not None:
        file_ops_from_details(previous_entry, file_ops)
    for message in (*messages_to_summarize, *turn_prefix):
        extract_file_ops_from_message(message, file_ops)

    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=messages_to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        settings=settings,
    )
