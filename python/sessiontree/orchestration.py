"""Compaction and tree navigation end to end: prepare, run hooks, summarize, append.

This is Pi 1.6's ``AgentSession.compact`` / ``navigateTree`` over a :class:`sessiontree.Session`,
built from the pure pieces (:func:`sessiontree.compaction.prepare_compaction`,
:func:`sessiontree.branch_summary.prepare_branch_entries`, the summarizers). The session methods
``Session.compact`` / ``acompact`` / ``navigate_tree`` / ``anavigate_tree`` delegate here.

Compaction (:func:`acompact`), in Pi's order:

1. :func:`plan_compaction`: ``prepare_compaction`` over the context span; ``None`` raises :class:`NothingToCompactError`
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

Output budget of each summary request (Pi 1.6, measured on the goldens): the summarizing model's
``maxTokens``, reduced to ``context_window - 4096 - input`` where ``input`` sums ``ceil(UTF-16
length / 3.5)`` over the request's system and user texts (:func:`summary_output_budget`, built on
:mod:`sessiontree.summarizers.prompts`). Where Pi then sends as little as 1 token, a budget below
:data:`~sessiontree.summarizers.base.MIN_SUMMARY_OUTPUT_TOKENS` raises :class:`SummaryBudgetError`
and nothing is sent; answers cut off at the budget, empty or far oversized are refused
(:func:`check_summary`); a compaction is appended only at the leaf it was planned at
(:class:`~sessiontree.errors.LeafMovedError`), one compaction of a session at a time.
(docs/divergences.md 23-25.)

Cost: planning reads the context span only (:meth:`sessiontree.Session.get_context_entries`:
the latest compaction's kept range to the leaf), so it costs the same after 10 MB or 1 GB of
history (benches/main_job.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, Optional, ParamSpec, TypeVar, cast

from .branch_summary import collect_entries_for_branch_summary, prepare_branch_entries
from .compaction import compute_file_lists, format_file_operations, prepare_compaction, serialize_conversation
from .context import (
    build_session_context,
    convert_to_llm,
    current_system_message,
    estimate_messages_tokens,
    estimate_projected_context_tokens,
)
from ._jsjson import js_whole_numbers
from .errors import EntryNotFoundError, LeafMovedError, SessionError
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
from .provider_context import ProviderContext, repair_for_provider  # noqa: F401 (ProviderContext: re-exported)
from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings
from .summarizers import prompts
from .summarizers.base import (
    MIN_SUMMARY_OUTPUT_TOKENS,
    OVERSIZED_SUMMARY_FACTOR,
    EmptySummaryError,
    OversizedSummaryError,
    SummarizerError,
    SummaryBudgetError,
    SummaryRequest,
    SummaryResult,
    Summarizer,
    SummaryUsage,
    TruncatedSummaryError,
    UnsafeSummaryError,
    run_sync,
)
from .summarizers.prompts import estimate_text_tokens

if TYPE_CHECKING:  # pragma: no cover
    from .entries import Entry
    from .session import Session

__all__ = [
    "CompactionResult",
    "CompactionPlan",
    "plan_compaction",
    "read_context",
    "check_summary",
    "LeafMovedError",
    "SummaryBudgetError",
    "UnsafeSummaryError",
    "TruncatedSummaryError",
    "EmptySummaryError",
    "OversizedSummaryError",
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
    "user_message_text",
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
from .results import BRANCH_SUMMARY_RESERVE_TOKENS  # noqa: E402 (its home: the light module, for Session's defaults)


# ==== Errors ====================================================================
# Their home is the light module results.py (the bottom floor: Session's own return types and
# errors resolve without this module); imported here so ``sessiontree.orchestration.X`` stays.
from .results import (  # noqa: E402
    AlreadyCompactedError,
    CompactionCancelledError,
    CompactionNoProgressError,
    NothingToCompactError,
)


# ==== Results ===================================================================


# CompactionResult and NavigationResult live in the light module .results (Session's return
# types resolve without importing this module); re-exported here, where they were.
from .results import CompactionResult, NavigationResult  # noqa: E402


# ==== Helpers ===================================================================


def default_summarizer() -> Any:
    """The offline extractive summarizer (``sessiontree.summarizers.get_summarizer("offline")``).

    Raises:
        SummarizerError: the summarizers package offers no offline summarizer.
    """
    try:
        from .summarizers import get_summarizer
    except ImportError as exc:  # pragma: no cover - depends on the summarizers package
        raise SummarizerError("no default summarizer available; pass summarizer=") from exc
    return get_summarizer("offline")


def _usage_dict(usage: Any) -> Optional[dict[str, Any]]:
    """Pi's stored ``usage`` object for a :class:`SummaryUsage` or a Pi-shaped dict."""
    if usage is None:
        return None
    if isinstance(usage, SummaryUsage):
        pi: dict[str, Any] = js_whole_numbers(usage.to_pi())
        return pi
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


def _limits(summarizer: Any, context_window: Optional[int], max_tokens: Optional[int]) -> tuple[Any, ...]:
    """Context window and output limit: the caller's, else the summarizer's, else defaults."""
    if context_window is None:
        context_window = getattr(summarizer, "context_window", None)
    if max_tokens is None:
        max_tokens = getattr(summarizer, "max_output_tokens", None) or getattr(summarizer, "max_tokens", None)
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        max_tokens = DEFAULT_MODEL_MAX_TOKENS
    return context_window, max_tokens


async def _summarize(
    summarizer: Any,
    request: SummaryRequest,
    context_window: Optional[int],
    max_tokens: int,
    accept_suspect: bool = False,
) -> SummaryResult:
    budget = summary_output_budget(request, context_window, max_tokens)
    if budget < MIN_SUMMARY_OUTPUT_TOKENS:
        raise SummaryBudgetError(
            f"the summarizing model leaves {budget} output tokens for this summary (window {context_window}, "
            f"output limit {max_tokens}); at least {MIN_SUMMARY_OUTPUT_TOKENS} are needed: use a model with a "
            "larger window or summarize less (nothing sent)",
            budget,
            MIN_SUMMARY_OUTPUT_TOKENS,
        )
    request = SummaryRequest(
        kind=request.kind,
        conversation=request.conversation,
        previous_summary=request.previous_summary,
        custom_instructions=request.custom_instructions,
        replace_instructions=request.replace_instructions,
        max_tokens=budget,
        request_id=request.request_id or uuid.uuid4().hex,
        metadata=dict(request.metadata),
    )
    result = await summarizer.summarize(request)
    if not isinstance(result, SummaryResult) or not isinstance(result.text, str):
        raise SummarizerError(f"summarizer {getattr(summarizer, 'name', summarizer)!r} returned {result!r}")
    check_summary(result, budget, accept_suspect=accept_suspect)
    return result


def run_blocking(coro: Coroutine[Any, Any, _R]) -> _R:
    """:func:`sessiontree.summarizers.base.run_sync` that closes ``coro`` when it cannot run
    (inside a running event loop), so no "never awaited" warning is left behind."""
    try:
        return run_sync(coro)
    except RuntimeError:
        coro.close()
        raise


async def _gather_or_cancel(coros: list[Any]) -> list[Any]:
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


def _validate_first_kept(session: "Session", path: list[Any], first_kept_id: Any) -> None:
    """A kept region must start on the active path and never at a tool result."""
    if not isinstance(first_kept_id, str) or not first_kept_id:
        raise HookResultError(f"first_kept_entry_id must be an entry id string, not {first_kept_id!r}")
    entry = next((e for e in reversed(path) if isinstance(e, dict) and e.get("id") == first_kept_id), None)
    if entry is None:
        # before the context span: look on the whole branch (rare; costs the branch)
        entry = next((e.raw for e in reversed(session.get_branch()) if e.id == first_kept_id), None)
    if entry is None:
        raise HookResultError(f"first_kept_entry_id {first_kept_id!r} is not on the active path")
    message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
    if isinstance(message, dict) and message.get("role") == "toolResult":
        raise HookResultError(
            f"first_kept_entry_id {first_kept_id!r} is a tool result: a kept region must start with the "
            "tool call, never at its result"
        )


def compaction_summary_text(history: str, turn_prefix: Optional[str]) -> str:
    """Join a history summary and a split turn's prefix summary the way Pi does."""
    return history if turn_prefix is None else f"{history}{TURN_CONTEXT_SEPARATOR}{turn_prefix}"


class _LazyBranch(Sequence[Any]):
    """The active branch as entry dicts, read only if a hook looks at it (it costs the branch)."""

    def __init__(self, session: "Session", leaf_id: Optional[str]):
        self._session = session
        self._leaf_id = leaf_id
        self._items: Optional[list[Any]] = None

    def _load(self) -> list[Any]:
        if self._items is None:
            leaf = self._leaf_id
            self._items = [] if leaf is None else [e.raw for e in self._session.get_branch(leaf)]
        return self._items

    def __getitem__(self, i: Any) -> Any:
        return self._load()[i]

    def __len__(self) -> int:
        return len(self._load())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Sequence)):
            return self._load() == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"_LazyBranch(leaf={self._leaf_id!r})"


# ==== The plan ==================================================================


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction of the active branch would do, before any summary is written: the one
    plan :func:`acompact` runs and ``sessiontree compact --dry-run`` shows.

    * ``preparation``: Pi's :class:`~sessiontree.compaction.CompactionPreparation`;
    * ``path``: the context span it was prepared from (entry dicts, root first; see
      :meth:`sessiontree.Session.get_context_entries`); ``leaf_id``: the leaf it was prepared at
      (the compaction is appended there or not at all);
    * ``requests``: the :class:`SummaryRequest` s to send (``history_index`` /
      ``prefix_index`` locate the ``"compaction"`` and ``"turn_prefix"`` ones, or None);
      ``max_tokens`` is set when sent (:func:`summary_output_budget`);
    * ``read_files`` / ``modified_files``: Pi's file lists for the summary;
    * ``system_message``: the replayed system message stored as the checkpoint, or None;
    * ``tokens_before``: Pi's ``tokensBefore`` (provider usage of the last answer plus estimates
      after it when that usage is valid, ``tokens_before_source == "usage"``; else the chars/4
      estimate, ``"estimate"``); ``estimated_tokens_before``: the chars/4 estimate of the same
      context (:func:`sessiontree.context.estimate_messages_tokens`), the figure to compare with
      a compaction's ``estimated_tokens_after``;
    * :attr:`kept_messages`: the context messages kept verbatim (computed on first use).
    """

    preparation: Any
    path: list[Any]
    leaf_id: Optional[str]
    requests: tuple[Any, ...]
    history_index: Optional[int]
    prefix_index: Optional[int]
    read_files: list[Any]
    modified_files: list[Any]
    system_message: Optional[dict[str, Any]]
    tokens_before: Any
    tokens_before_source: str
    estimated_tokens_before: Any

    @property
    def kept_messages(self) -> list[Any]:
        """Context messages after the compaction, without its summary (a stand-in compaction
        entry is placed on the path; nothing is written)."""
        prep = self.preparation
        parent = self.path[-1].get("id") if self.path and isinstance(self.path[-1], dict) else None
        fake: dict[str, Any] = {
            "type": "compaction",
            "id": "\u0000sessiontree-plan",
            "parentId": parent,
            "timestamp": "1970-01-01T00:00:00.000Z",
            "summary": "",
            "firstKeptEntryId": prep.first_kept_entry_id,
            "tokensBefore": prep.tokens_before,
        }
        if self.system_message is not None:
            fake["systemMessage"] = self.system_message
        return [
            m
            for m in build_session_context(self.path + [fake]).messages
            if not (isinstance(m, dict) and m.get("role") == "compactionSummary")
        ]


def read_context(session: "Session") -> tuple[Optional[str], list[Any]]:
    """``(leaf_id, values)``: the leaf, then :meth:`sessiontree.Session.context_values` (parsed).

    Leaf first: a leaf that moves in between makes the pair stale (read again), never wrong."""
    leaf_id = session.leaf_id
    return leaf_id, session.context_values()


def plan_compaction(
    session: "Session",
    settings: Optional[CompactionSettings] = None,
    custom_instructions: Optional[str] = None,
    *,
    span: Optional[tuple[Optional[str], list[Any]]] = None,
) -> CompactionPlan:
    """Plan a compaction of ``session``'s active branch (Pi 1.6 ``prepareCompaction`` plus the
    summary requests, file lists and figures); nothing is sent or written. Reads the context
    span only, once (``span``: a :func:`read_context` pair, used while its leaf is the leaf).

    Raises:
        NothingToCompactError: nothing to summarize (``AlreadyCompactedError`` when the leaf is
            a compaction), with Pi's text.
    """
    settings = settings or DEFAULT_COMPACTION_SETTINGS
    leaf_id, path = span if span is not None and span[0] == session.leaf_id else read_context(session)
    preparation = prepare_compaction(path, settings)
    if preparation is None:
        if path and isinstance(path[-1], dict) and path[-1].get("type") == "compaction":
            raise AlreadyCompactedError("Already compacted")
        raise NothingToCompactError("Nothing to compact (session too small)")
    requests: list[Any] = []
    history_index = prefix_index = None
    if preparation.messages_to_summarize:
        history_index = len(requests)
        requests.append(
            SummaryRequest(
                kind="compaction",
                conversation=serialize_conversation(convert_to_llm(preparation.messages_to_summarize)),
                previous_summary=preparation.previous_summary,
                custom_instructions=custom_instructions,
            )
        )
    if preparation.is_split_turn and preparation.turn_prefix_messages:
        prefix_index = len(requests)
        requests.append(
            SummaryRequest(
                kind="turn_prefix",
                conversation=serialize_conversation(convert_to_llm(preparation.turn_prefix_messages)),
                custom_instructions=custom_instructions,
            )
        )
    read_files, modified_files = compute_file_lists(preparation.file_ops)
    ctx = build_session_context(path)
    projected = estimate_projected_context_tokens(ctx.messages, ctx.sources, path)
    return CompactionPlan(
        preparation=preparation,
        path=path,
        leaf_id=leaf_id,
        requests=tuple(requests),
        history_index=history_index,
        prefix_index=prefix_index,
        read_files=read_files,
        modified_files=modified_files,
        system_message=current_system_message(ctx.messages),
        tokens_before=preparation.tokens_before,
        tokens_before_source="usage" if projected.last_usage_index is not None else "estimate",
        estimated_tokens_before=estimate_messages_tokens(ctx.messages),
    )


def check_summary(result: SummaryResult, budget: int, *, accept_suspect: bool = False) -> None:
    """Refuse a summary that must not replace history (nothing is appended):

    * :class:`EmptySummaryError`: no text (never accepted);
    * :class:`TruncatedSummaryError`: the model stopped at its budget (``stop_reason == "length"``);
    * :class:`OversizedSummaryError`: the text's token estimate (``ceil(UTF-16 length / 3.5)``,
      :func:`sessiontree.summarizers.prompts.estimate_text_tokens`) exceeds
      :data:`OVERSIZED_SUMMARY_FACTOR` times ``budget`` (tokens).

    ``accept_suspect=True`` lets truncated and oversized summaries through (the caller's choice).
    """
    if not isinstance(result.text, str) or not result.text.strip():
        raise EmptySummaryError("the summarizer returned an empty summary; nothing appended", result)
    if accept_suspect:
        return
    if result.stop_reason == "length":
        raise TruncatedSummaryError(
            f"the summary was cut off at the output budget ({budget} tokens); nothing appended "
            "(pass accept_suspect_summary=True to keep it anyway)",
            result,
        )
    tokens = estimate_text_tokens(result.text)
    if tokens > OVERSIZED_SUMMARY_FACTOR * max(budget, 1):
        raise OversizedSummaryError(
            f"the summary is ~{tokens} tokens for a budget of {budget}; nothing appended "
            "(pass accept_suspect_summary=True to keep it anyway)",
            result,
        )


async def _acquire(lock: threading.Lock) -> None:
    """Take ``lock`` without blocking the event loop (two tasks or threads compacting one session)."""
    while not lock.acquire(blocking=False):
        await asyncio.sleep(0.002)


#: Sessions whose compaction the current task is running (a re-entrant call would wait forever).
_COMPACTING: contextvars.ContextVar[Any] = contextvars.ContextVar("sessiontree_compacting", default=frozenset())

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _one_compaction_at_a_time(
    fn: Callable[Concatenate["Session", _P], Awaitable[_R]],
) -> Callable[Concatenate["Session", _P], Awaitable[_R]]:
    """``fn(session, ...)`` under the session's compaction lock (:attr:`Session.compaction_lock`,
    taken without blocking the event loop), one at a time per session; a call from inside a
    compaction of the same session (a hook) raises :class:`SessionError` instead of waiting
    for itself. The signature and docstring stay ``fn``'s."""

    @functools.wraps(fn)
    async def guarded(session: "Session", /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        inside = _COMPACTING.get()
        if id(session) in inside:
            raise SessionError(
                "compact() called from inside a compaction of the same session (a hook?): it would wait for itself"
            )
        lock = session.compaction_lock
        await _acquire(lock)
        token = _COMPACTING.set(inside | {id(session)})
        try:
            return await fn(session, *args, **kwargs)
        finally:
            _COMPACTING.reset(token)
            lock.release()

    return guarded


# ==== Compaction ================================================================


@_one_compaction_at_a_time
async def acompact(
    session: "Session",
    summarizer: Summarizer | None = None,
    *,
    settings: Optional[CompactionSettings] = None,
    custom_instructions: Optional[str] = None,
    reason: str = "manual",
    context_window: Optional[int] = None,
    max_tokens: Optional[int] = None,
    will_retry: bool = False,
    accept_suspect_summary: bool = False,
    span: Optional[tuple[Optional[str], list[Any]]] = None,
) -> CompactionResult:
    """Compact the active branch of ``session`` (Pi 1.6 ``AgentSession.compact``); see the module
    docstring for the steps. The plan is :func:`plan_compaction`'s; only the context span is read,
    parsed once before the summary (or ``span``'s) and once after the append.

    Args:
        summarizer: a :class:`sessiontree.summarizers.base.Summarizer`; default the offline one.
        settings: :class:`CompactionSettings` (``keep_recent_tokens`` decides the cut); Pi's defaults.
        custom_instructions: extra focus, sent with every summary request of this compaction.
        reason: ``"manual"``, ``"threshold"`` or ``"overflow"`` (recorded, shown to hooks).
        context_window, max_tokens: the **summarizing** model's window and output limit (tokens),
            for the output budget; default the summarizer's ``context_window`` /
            ``max_output_tokens`` attributes, else no window and 16384.
        will_retry: tell hooks that an overflowed call is retried afterwards.
        accept_suspect_summary: keep a summary that was cut off at the budget or is far larger
            than asked (refused by default, see :func:`check_summary`).
        span: a :func:`read_context` pair the caller holds (a threshold check's; :func:`plan_compaction`).

    Concurrency: compactions of one session run one at a time; a second one waits, then plans
    again, so it raises :class:`AlreadyCompactedError` when the first one just compacted.

    Returns:
        :class:`CompactionResult`.

    Raises:
        NothingToCompactError: nothing to summarize (``AlreadyCompactedError`` when the leaf is a compaction).
        CompactionCancelledError: a hook cancelled.
        HookResultError: a hook's compaction is invalid (nothing appended).
        SummaryBudgetError: the summarizing model leaves too small an output budget (nothing sent).
        UnsafeSummaryError: the summary is empty, cut off or oversized (nothing appended).
        SummarizerError: a summary call failed (nothing appended).
        LeafMovedError: the leaf moved while the summary was written (nothing appended).
    """
    plan = plan_compaction(session, settings, custom_instructions, span=span)
    preparation = plan.preparation
    path = plan.path

    event = BeforeCompactEvent(preparation, _LazyBranch(session, plan.leaf_id), custom_instructions, reason, will_retry)
    hooked = normalize_compact_result(await run_hooks(session.hooks.before_compact, event))
    if hooked is not None and hooked.cancel:
        raise CompactionCancelledError("Compaction cancelled")

    usage: Optional[SummaryUsage]
    if hooked is not None and hooked.compaction is not None:
        given = hooked.compaction
        first_kept = (
            given.first_kept_entry_id if given.first_kept_entry_id is not None else preparation.first_kept_entry_id
        )
        _validate_first_kept(session, path, first_kept)
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
        results = await _gather_or_cancel(
            [_summarize(summarizer, r, window, limit, accept_suspect_summary) for r in plan.requests]
        )
        if plan.history_index is not None:
            history = results[plan.history_index].text
        else:
            history = preparation.previous_summary or NO_PRIOR_HISTORY
        prefix = results[plan.prefix_index].text if plan.prefix_index is not None else None
        summary = compaction_summary_text(history, prefix) + format_file_operations(
            plan.read_files, plan.modified_files
        )
        details = {"readFiles": plan.read_files, "modifiedFiles": plan.modified_files}
        usage = None
        for r in results:
            usage = r.usage if usage is None else usage + r.usage
        usage_stored = _usage_dict(usage)
        from_hook = False

    entry_id = session.append_compaction(
        summary,
        first_kept,
        tokens_before,
        details,
        from_hook,
        usage=usage_stored,
        system_message=plan.system_message,
        expected_leaf_id=plan.leaf_id,
    )
    new_path = session.context_values()
    new_context = build_session_context(new_path)
    after = estimate_projected_context_tokens(new_context.messages, new_context.sources, new_path).tokens
    return CompactionResult(
        entry=cast("Entry", session.get_entry(entry_id)),  # just appended: never None
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
        estimated_tokens_after=after,
        usage=usage,
        details=details,
        reason=reason,
        from_hook=from_hook,
        context=repair_for_provider(new_context.messages, new_context.sources),
        tokens_before_source="hook"
        if from_hook and tokens_before is not preparation.tokens_before
        else plan.tokens_before_source,
        estimated_tokens_before=plan.estimated_tokens_before,
        preparation=preparation,
    )


# ==== Tree navigation ===========================================================


def user_message_text(content: Any) -> str:
    """The text of a user message's ``content`` (Pi agent-session ``_extractUserMessageText``):
    a string as is, else the ``text`` of its ``type:"text"`` blocks concatenated; anything else
    gives ``""``. The editor text after navigating to a user message, and RPC
    ``get_fork_messages``' text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _collect_abandoned(session: "Session", old_leaf: Optional[str], target_id: str) -> Any:
    """:func:`collect_entries_for_branch_summary` for a session, reading only the abandoned
    entries: the index finds the common ancestor walking both branches up only as far as it is
    and hands out the entries below it (a parity test checks it against the pure rule over the
    corpus). Files with duplicate ids or legacy headers use the pure rule over whole branches."""
    fast = session.abandoned_branch(old_leaf, target_id)
    if fast is None:

        def get_entry(entry_id: str) -> Any:
            e = session.get_entry(entry_id)
            return None if e is None else e.raw

        def get_branch(entry_id: str) -> list[Any]:
            return [e.raw for e in session.get_branch(entry_id)]

        return collect_entries_for_branch_summary(get_entry, get_branch, old_leaf, target_id)
    below, ancestor_id = fast
    from .branch_summary import BranchSummaryCollection

    return BranchSummaryCollection(session.raw_values(below), ancestor_id)


async def anavigate_tree(
    session: "Session",
    target_id: str,
    *,
    summarize: bool = False,
    summarizer: Summarizer | None = None,
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
        raise EntryNotFoundError.of(target_id)

    collected = _collect_abandoned(session, old_leaf, target_id)
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
        editor_text: Optional[str] = user_message_text(target["message"].get("content"))
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
