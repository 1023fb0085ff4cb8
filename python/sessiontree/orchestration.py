"""Compaction and tree navigation end to end: prepare, run hooks, summarize, append.

This is Pi 1.6's ``AgentSession.compact`` / ``navigateTree`` over a :class:`sessiontree.Session`,
built from the pure pieces (:func:`sessiontree.compaction.prepare_compaction`,
:func:`sessiontree.branch_summary.prepare_branch_entries`, the summarizers). The session methods
``Session.compact`` / ``acompact`` / ``navigate_tree`` / ``anavigate_tree`` delegate here.

Compaction (:func:`acompact`), in Pi's order:

1. ``prepare_compaction`` over the active path; ``None`` raises :class:`NothingToCompactError`
   with Pi's text (``"Nothing to compact (session too small)"``, or ``"Already compacted"`` when
   the leaf is a compaction).
2. ``before_compact`` hooks (:mod:`sessiontree.hooks`): cancel raises
   :class:`CompactionCancelledError`; a supplied compaction is validated and stored with
   ``fromHook: true``.
3. Otherwise the summarizer runs: one ``"compaction"`` request (with the previous summary for a
   rolling update), and for a split turn a ``"turn_prefix"`` request **concurrently**
   (``asyncio.gather``). Stored summary: ``<history>\\n\\n---\\n\\n**Turn Context (split
   turn):**\\n\\n<prefix>``; with nothing before the split turn the history part is ``"No prior
   history."`` (Pi) or, when a previous compaction is in effect, its summary (Pi would drop it).
   Usage is the sum of the calls. Pi's file lists (``<read-files>`` / ``<modified-files>``) are
   appended to the summary and stored as ``details: {readFiles, modifiedFiles}``.
4. The ``compaction`` entry is appended (keys ``type, id, parentId, timestamp, summary,
   firstKeptEntryId, tokensBefore[, systemMessage], details, usage, fromHook``). When the context
   holds system messages their replay is stored as ``systemMessage`` (Pi 1.6's checkpoint), so
   prompt state survives the compaction.

Output budget of each summary request (Pi 1.6, measured on the goldens): the model's ``maxTokens``,
reduced to ``context_window - 4096 - input`` where ``input`` sums ``ceil(UTF-16 length / 3.5)``
over the request's system and user texts, never below 1 (:func:`summary_output_budget`, built on
:mod:`sessiontree.summarizers.prompts`).
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .branch_summary import collect_entries_for_branch_summary, prepare_branch_entries
from .compaction import compute_file_lists, format_file_operations, prepare_compaction, serialize_conversation
from .context import (
    build_session_context,
    convert_to_llm,
    current_system_message,
    estimate_projected_context_tokens,
)
from .errors import EntryNotFoundError, SessionError
from .hooks import (
    BeforeCompactEvent,
    BeforeTreeEvent,
    HookResultError,
    TreePreparation,
    is_set,
    normalize_compact_result,
    normalize_tree_result,
    run_hooks,
)
from .provider_context import ProviderContext, repair_for_provider
from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings
from .summarizers import prompts
from .summarizers.base import SummarizerError, SummaryRequest, SummaryResult, SummaryUsage, run_sync

if TYPE_CHECKING:  # pragma: no cover
    from .entries import Entry
    from .session import Session

__all__ = [
    "CompactionResult",
    "NavigationResult",
    "NothingToCompactError",
    "AlreadyCompactedError",
    "CompactionCancelledError",
    "CompactionNoProgressError",
    "HookResultError",
    "acompact",
    "anavigate_tree",
    "summary_output_budget",
    "default_summarizer",
    "run_blocking",
    "TURN_CONTEXT_SEPARATOR",
    "NO_PRIOR_HISTORY",
    "BRANCH_SUMMARY_PREAMBLE",
    "DEFAULT_MODEL_MAX_TOKENS",
    "DEFAULT_BRANCH_CONTEXT_WINDOW",
    "BRANCH_SUMMARY_RESERVE_TOKENS",
]

#: Between the history summary and the turn-prefix summary of a split turn (Pi compaction.ts).
TURN_CONTEXT_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
#: History part of a split-turn summary when nothing precedes the turn (Pi).
NO_PRIOR_HISTORY = "No prior history."
#: Pi branch-summarization.ts prefixes every generated branch summary with this.
BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"
)
#: Branch summary when no message of the abandoned branch fits (Pi).
NO_CONTENT_TO_SUMMARIZE = "No content to summarize"
#: Output limit used when neither the caller nor the summarizer names one (Pi's fake model: 16384).
DEFAULT_MODEL_MAX_TOKENS = 16384
#: Context window Pi assumes for branch summaries when the model names none.
DEFAULT_BRANCH_CONTEXT_WINDOW = 128000
#: Pi ``branchSummary.reserveTokens`` default: budget = context window - this.
BRANCH_SUMMARY_RESERVE_TOKENS = 16384


# ==== Errors ====================================================================


class NothingToCompactError(SessionError):
    """Pi's ``prepareCompaction`` found nothing to summarize: ``"Nothing to compact (session too
    small)"`` (Pi's exact text). Nothing was appended."""


class AlreadyCompactedError(NothingToCompactError):
    """The leaf is already a compaction (Pi: ``"Already compacted"``). Nothing was appended."""


class CompactionCancelledError(SessionError):
    """A ``before_compact`` hook cancelled the compaction (Pi: ``"Compaction cancelled"``)."""


class CompactionNoProgressError(SessionError):
    """Compaction did not shrink the context (tokens after >= before), or the model overflowed
    again right after an overflow recovery: retrying would loop."""


# ==== Results ===================================================================


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`acompact` did.

    * ``entry``: the appended ``compaction`` :class:`sessiontree.entries.Entry`;
    * ``summary``, ``first_kept_entry_id``, ``tokens_before``, ``details``: as stored;
    * ``estimated_tokens_after``: Pi's projected estimate of the rebuilt context (tokens);
    * ``usage``: :class:`SummaryUsage` of the summary calls (summed), or ``None`` (a hook gave none);
    * ``reason``: ``"manual"``, ``"threshold"`` or ``"overflow"``; ``from_hook``: a hook supplied it;
    * ``context``: the provider-safe context after compaction (:class:`ProviderContext`).
    """

    entry: "Entry"
    summary: str
    first_kept_entry_id: str
    tokens_before: Any
    estimated_tokens_after: Any
    usage: Optional[SummaryUsage]
    details: Any
    reason: str
    from_hook: bool = False
    context: Optional[ProviderContext] = None

    def to_pi(self) -> dict:
        """Pi's RPC ``compact`` response ``data``: ``{summary, firstKeptEntryId, tokensBefore,
        estimatedTokensAfter, usage, details}`` (``usage`` omitted when unknown)."""
        out: dict = {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "estimatedTokensAfter": self.estimated_tokens_after,
        }
        if self.usage is not None:
            out["usage"] = _usage_dict(self.usage)
        if self.details is not None:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class NavigationResult:
    """What :func:`anavigate_tree` did.

    * ``new_leaf_id``: the leaf afterwards (``None``: before the first entry);
    * ``editor_text``: the selected user message's text, for re-editing (else ``None``);
    * ``summary_entry``: the appended ``branch_summary`` :class:`~sessiontree.entries.Entry`, or ``None``;
    * ``cancelled``: a ``before_tree`` hook cancelled (nothing changed);
    * ``usage``: :class:`SummaryUsage` of the summary call, when one ran.
    """

    new_leaf_id: Optional[str]
    editor_text: Optional[str] = None
    summary_entry: Optional["Entry"] = None
    cancelled: bool = False
    usage: Optional[SummaryUsage] = None


# ==== Helpers ===================================================================


def default_summarizer() -> Any:
    """The offline extractive summarizer (``sessiontree.summarizers.get_summarizer("offline")``).

    Raises:
        SummarizerError: the summarizers package offers no offline summarizer.
    """
    try:
        from .summarizers import get_summarizer  # type: ignore[attr-defined]
    except ImportError as exc:  # pragma: no cover - depends on the summarizers package
        raise SummarizerError("no default summarizer available; pass summarizer=") from exc
    return get_summarizer("offline")


def _js_number(value: Any) -> Any:
    """Floats that are whole numbers become ints (JavaScript writes ``0``, not ``0.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _js_number(v) for k, v in value.items()}
    return value


def _usage_dict(usage: Any) -> Optional[dict]:
    """Pi's stored ``usage`` object for a :class:`SummaryUsage` or a Pi-shaped dict."""
    if usage is None:
        return None
    if isinstance(usage, SummaryUsage):
        return _js_number(usage.to_pi())
    if isinstance(usage, dict):
        return usage
    raise HookResultError(f"usage must be a SummaryUsage or a dict, not {type(usage).__name__}")


def _as_summary_usage(usage: Any) -> Optional[SummaryUsage]:
    if usage is None:
        return None
    if isinstance(usage, SummaryUsage):
        return usage
    return SummaryUsage.from_pi(usage)


def summary_output_budget(request: SummaryRequest, context_window: Optional[int], max_tokens: int) -> int:
    """Output-token budget of one summary request (Pi 1.6, as the goldens show it).

    ``max_tokens`` (the model's output limit) when it fits; else ``context_window - 4096 -
    input``, where ``input`` = ``ceil(len/3.5)`` of the system text plus that of the user text
    (lengths in UTF-16 code units; the texts :func:`sessiontree.summarizers.prompts.build_prompt`
    renders), never below 1. Without a ``context_window``: ``max_tokens``.
    """
    system, user = prompts.build_prompt(request)
    return prompts.output_budget(max_tokens, context_window, prompts.estimate_request_tokens(system, user))


def _limits(summarizer: Any, context_window: Optional[int], max_tokens: Optional[int]) -> tuple:
    """Context window and output limit: the caller's, else the summarizer's, else defaults."""
    if context_window is None:
        context_window = getattr(summarizer, "context_window", None)
    if max_tokens is None:
        max_tokens = getattr(summarizer, "max_output_tokens", None) or getattr(summarizer, "max_tokens", None)
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        max_tokens = DEFAULT_MODEL_MAX_TOKENS
    return context_window, max_tokens


async def _summarize(summarizer: Any, request: SummaryRequest, context_window: Optional[int], max_tokens: int) -> SummaryResult:
    request = SummaryRequest(
        kind=request.kind,
        conversation=request.conversation,
        previous_summary=request.previous_summary,
        custom_instructions=request.custom_instructions,
        replace_instructions=request.replace_instructions,
        max_tokens=summary_output_budget(request, context_window, max_tokens),
        request_id=request.request_id or uuid.uuid4().hex,
        metadata=dict(request.metadata),
    )
    result = await summarizer.summarize(request)
    if not isinstance(result, SummaryResult) or not isinstance(result.text, str):
        raise SummarizerError(f"summarizer {getattr(summarizer, 'name', summarizer)!r} returned {result!r}")
    return result


def run_blocking(coro: Any) -> Any:
    """:func:`sessiontree.summarizers.base.run_sync` that closes ``coro`` when it cannot run
    (inside a running event loop), so no "never awaited" warning is left behind."""
    try:
        return run_sync(coro)
    except RuntimeError:
        coro.close()
        raise


async def _gather_or_cancel(coros: list) -> list:
    """``asyncio.gather`` the calls concurrently; when one fails the others are cancelled (so
    their HTTP requests are aborted) before the error propagates."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _raw_path(session: "Session") -> list:
    return [e.raw for e in session.get_branch()]


def _projected_tokens(path: list) -> Any:
    ctx = build_session_context(path)
    return estimate_projected_context_tokens(ctx.messages, ctx.sources, path).tokens


def _validate_first_kept(path: list, first_kept_id: Any) -> None:
    """A kept region must start on the active path and never at a tool result."""
    if not isinstance(first_kept_id, str) or not first_kept_id:
        raise HookResultError(f"first_kept_entry_id must be an entry id string, not {first_kept_id!r}")
    entry = next((e for e in reversed(path) if isinstance(e, dict) and e.get("id") == first_kept_id), None)
    if entry is None:
        raise HookResultError(f"first_kept_entry_id {first_kept_id!r} is not on the active path")
    message = entry.get("message") if entry.get("type") == "message" else None
    if isinstance(message, dict) and message.get("role") == "toolResult":
        raise HookResultError(
            f"first_kept_entry_id {first_kept_id!r} is a tool result: a kept region must start with the "
            "tool call, never at its result"
        )


def compaction_summary_text(history: str, turn_prefix: Optional[str]) -> str:
    """Join a history summary and a split turn's prefix summary the way Pi does."""
    return history if turn_prefix is None else f"{history}{TURN_CONTEXT_SEPARATOR}{turn_prefix}"


# ==== Compaction ================================================================


async def acompact(
    session: "Session",
    summarizer: Any = None,
    *,
    settings: Optional[CompactionSettings] = None,
    custom_instructions: Optional[str] = None,
    reason: str = "manual",
    context_window: Optional[int] = None,
    max_tokens: Optional[int] = None,
    will_retry: bool = False,
) -> CompactionResult:
    """Compact the active branch of ``session`` (Pi 1.6 ``AgentSession.compact``); see the module
    docstring for the steps.

    Args:
        summarizer: a :class:`sessiontree.summarizers.base.Summarizer`; default the offline one.
        settings: :class:`CompactionSettings` (``keep_recent_tokens`` decides the cut); Pi's defaults.
        custom_instructions: extra focus, sent with every summary request of this compaction.
        reason: ``"manual"``, ``"threshold"`` or ``"overflow"`` (recorded, shown to hooks).
        context_window, max_tokens: the summarizing model's window and output limit (tokens), for
            the output budget; default the summarizer's ``context_window`` / ``max_output_tokens``
            attributes, else no window and 16384.
        will_retry: tell hooks that an overflowed call is retried afterwards.

    Returns:
        :class:`CompactionResult`.

    Raises:
        NothingToCompactError: nothing to summarize (``AlreadyCompactedError`` when the leaf is a compaction).
        CompactionCancelledError: a hook cancelled.
        HookResultError: a hook's compaction is invalid (nothing appended).
        SummarizerError: a summary call failed (nothing appended).
    """
    settings = settings or DEFAULT_COMPACTION_SETTINGS
    path = _raw_path(session)
    preparation = prepare_compaction(path, settings)
    if preparation is None:
        if path and isinstance(path[-1], dict) and path[-1].get("type") == "compaction":
            raise AlreadyCompactedError("Already compacted")
        raise NothingToCompactError("Nothing to compact (session too small)")

    event = BeforeCompactEvent(preparation, path, custom_instructions, reason, will_retry)
    hooked = normalize_compact_result(await run_hooks(session.hooks.before_compact, event))
    if hooked is not None and hooked.cancel:
        raise CompactionCancelledError("Compaction cancelled")

    usage: Optional[SummaryUsage]
    if hooked is not None and hooked.compaction is not None:
        given = hooked.compaction
        first_kept = given.first_kept_entry_id if given.first_kept_entry_id is not None else preparation.first_kept_entry_id
        _validate_first_kept(path, first_kept)
        summary = given.summary
        tokens_before = given.tokens_before if given.tokens_before is not None else preparation.tokens_before
        details = given.details
        usage_stored = _usage_dict(given.usage)
        usage = _as_summary_usage(given.usage)
        from_hook = True
    else:
        if summarizer is None:
            summarizer = default_summarizer()
        window, limit = _limits(summarizer, context_window, max_tokens)
        first_kept = preparation.first_kept_entry_id
        tokens_before = preparation.tokens_before
        calls = []
        history_index = None
        if preparation.messages_to_summarize:
            history_index = len(calls)
            calls.append(SummaryRequest(
                kind="compaction",
                conversation=serialize_conversation(convert_to_llm(preparation.messages_to_summarize)),
                previous_summary=preparation.previous_summary,
                custom_instructions=custom_instructions,
            ))
        prefix_index = None
        if preparation.is_split_turn and preparation.turn_prefix_messages:
            prefix_index = len(calls)
            calls.append(SummaryRequest(
                kind="turn_prefix",
                conversation=serialize_conversation(convert_to_llm(preparation.turn_prefix_messages)),
                custom_instructions=custom_instructions,
            ))
        results = await _gather_or_cancel([_summarize(summarizer, r, window, limit) for r in calls])
        if history_index is not None:
            history = results[history_index].text
        else:
            history = preparation.previous_summary or NO_PRIOR_HISTORY
        prefix = results[prefix_index].text if prefix_index is not None else None
        read_files, modified_files = compute_file_lists(preparation.file_ops)
        summary = compaction_summary_text(history, prefix) + format_file_operations(read_files, modified_files)
        details = {"readFiles": read_files, "modifiedFiles": modified_files}
        usage = None
        for r in results:
            usage = r.usage if usage is None else usage + r.usage
        usage_stored = _usage_dict(usage)
        from_hook = False

    system_message = current_system_message(build_session_context(path).messages)
    entry_id = session.append_compaction(
        summary, first_kept, tokens_before, details, from_hook, usage=usage_stored, system_message=system_message
    )
    new_path = _raw_path(session)
    new_context = build_session_context(new_path)
    after = estimate_projected_context_tokens(new_context.messages, new_context.sources, new_path).tokens
    return CompactionResult(
        entry=session.get_entry(entry_id),
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
        estimated_tokens_after=after,
        usage=usage,
        details=details,
        reason=reason,
        from_hook=from_hook,
        context=repair_for_provider(new_context.messages, new_context.sources),
    )


# ==== Tree navigation ===========================================================


def _user_text(message: Any) -> str:
    """The text Pi puts back in the editor for a user message (string content, or its text
    blocks concatenated)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


async def anavigate_tree(
    session: "Session",
    target_id: str,
    *,
    summarize: bool = False,
    summarizer: Any = None,
    custom_instructions: Optional[str] = None,
    replace_instructions: bool = False,
    label: Optional[str] = None,
    context_window: Optional[int] = None,
    max_tokens: Optional[int] = None,
    reserve_tokens: int = BRANCH_SUMMARY_RESERVE_TOKENS,
) -> NavigationResult:
    """Move to another point of the tree (Pi 1.6 ``/tree``, ``AgentSession.navigateTree``).

    Selection rules (Pi's sessions.md): selecting a **user message** moves the leaf to its parent
    and returns its text as ``editor_text`` for re-editing (a root user message resets the leaf:
    the next entry becomes a new root); selecting **anything else** moves the leaf to it. When
    ``target_id`` is the current leaf nothing happens.

    With ``summarize=True`` the abandoned branch (from the old leaf up to the common ancestor,
    :func:`collect_entries_for_branch_summary`) is summarized: its messages that fit ``context_window
    - reserve_tokens`` tokens (:func:`prepare_branch_entries`; window default the summarizer's
    ``context_window``, else 128000) are serialized and sent as one ``kind="branch"`` request
    (``custom_instructions``, ``replace_instructions``); the stored summary is Pi's preamble + the
    answer + the file lists, with ``details: {readFiles, modifiedFiles}`` and the call's ``usage``,
    appended as a ``branch_summary`` whose ``fromId`` is the old leaf, at the new leaf position.
    Nothing to summarize (no abandoned entries) appends nothing.

    ``before_tree`` hooks see a :class:`sessiontree.hooks.TreePreparation` and may cancel (result
    ``cancelled=True``, nothing changes), supply the summary (used only with ``summarize=True``,
    stored with ``fromHook: true``) or override instructions and label. ``label`` (when not
    ``None``) labels the target afterwards (``""`` clears); that ``label`` entry becomes the leaf.

    Raises:
        EntryNotFoundError: ``target_id`` names no entry.
        HookResultError: a hook returned an invalid result (nothing changed).
        SummarizerError: the summary call failed (nothing changed).
    """
    old_leaf = session.leaf_id
    if target_id == old_leaf:
        return NavigationResult(new_leaf_id=old_leaf)
    target = session.get_entry(target_id)
    if target is None:
        raise EntryNotFoundError(f"Entry {target_id} not found")

    def get_entry(entry_id: str) -> Any:
        e = session.get_entry(entry_id)
        return None if e is None else e.raw

    def get_branch(entry_id: str) -> list:
        return [e.raw for e in session.get_branch(entry_id)]

    collected = collect_entries_for_branch_summary(get_entry, get_branch, old_leaf, target_id)
    preparation = TreePreparation(
        target_id=target_id,
        old_leaf_id=old_leaf,
        common_ancestor_id=collected.common_ancestor_id,
        entries_to_summarize=collected.entries,
        user_wants_summary=summarize,
        custom_instructions=custom_instructions,
        replace_instructions=replace_instructions,
        label=label,
    )
    hooked = normalize_tree_result(await run_hooks(session.hooks.before_tree, BeforeTreeEvent(preparation)))
    if hooked is not None and hooked.cancel:
        return NavigationResult(new_leaf_id=old_leaf, cancelled=True)
    if hooked is not None:
        if is_set(hooked.custom_instructions):
            custom_instructions = hooked.custom_instructions
        if is_set(hooked.replace_instructions):
            replace_instructions = bool(hooked.replace_instructions)
        if is_set(hooked.label):
            label = hooked.label

    summary_text = None
    details: Any = None
    usage: Optional[SummaryUsage] = None
    usage_stored = None
    from_hook = False
    if summarize and hooked is not None and hooked.summary is not None:
        summary_text = hooked.summary.summary
        details = hooked.summary.details
        usage_stored = _usage_dict(hooked.summary.usage)
        usage = _as_summary_usage(hooked.summary.usage)
        from_hook = True
    elif summarize and collected.entries:
        if summarizer is None:
            summarizer = default_summarizer()
        window, limit = _limits(summarizer, context_window, max_tokens)
        budget = (window or DEFAULT_BRANCH_CONTEXT_WINDOW) - reserve_tokens
        prepared = prepare_branch_entries(collected.entries, max(budget, 0))
        read_files, modified_files = compute_file_lists(prepared.file_ops)
        if prepared.messages:
            request = SummaryRequest(
                kind="branch",
                conversation=serialize_conversation(convert_to_llm(prepared.messages)),
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
            )
            result = await _summarize(summarizer, request, window, limit)
            usage = result.usage
            usage_stored = _usage_dict(usage)
            summary_text = BRANCH_SUMMARY_PREAMBLE + result.text
        else:
            summary_text = NO_CONTENT_TO_SUMMARIZE
        summary_text += format_file_operations(read_files, modified_files)
        details = {"readFiles": read_files, "modifiedFiles": modified_files}

    if target.type == "message" and isinstance(target.get("message"), dict) and target["message"].get("role") == "user":
        new_leaf = target.parent_id
        if new_leaf is not None and session.get_entry(new_leaf) is None:
            new_leaf = None  # an orphan's parent is unknown: it starts a root, as it is one in the tree
        editor_text: Optional[str] = _user_text(target["message"])
    else:
        new_leaf = target_id
        editor_text = None

    summary_entry = None
    if summary_text:
        sid = session.branch_with_summary(new_leaf, summary_text, details, from_hook, usage=usage_stored)
        summary_entry = session.get_entry(sid)
    elif new_leaf is None:
        session.reset_leaf()
    else:
        session.branch(new_leaf)
    if label is not None:
        session.append_label_change(target_id, label)
    return NavigationResult(
        new_leaf_id=session.leaf_id, editor_text=editor_text, summary_entry=summary_entry, usage=usage
    )
