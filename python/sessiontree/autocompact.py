"""Auto-compaction policy: Pi 1.6's three check points and its one-shot overflow recovery.

An agent loop owns an :class:`AutoCompactor` and calls it where Pi does (compaction.md, "When It
Triggers")::

    compactor = AutoCompactor(session, summarizer, CompactionSettings(), context_window=200_000)
    compactor.before_prompt()                       # before a new user prompt is sent
    ...model answers, tools run, results appended...
    compactor.after_tool_results(will_call_model)   # skipped when the tool batch ends the run
    compactor.after_run()                           # after the run ends
    # the model call failed:
    outcome = compactor.recover_from_overflow(error)
    if outcome.retry:
        ...call the model once more with outcome.context.messages...

Each check point compacts (reason ``"threshold"``) when Pi's ``shouldCompact`` holds for the
projected context estimate (:func:`sessiontree.context.estimate_projected_context_tokens`:
provider usage recorded before the latest compaction or context edit is ignored), i.e. when
``tokens > context_window - settings.reserve_tokens`` and ``settings.enabled``.

Every method has an ``a``-prefixed coroutine twin (``abefore_prompt`` ...) for async loops; the
plain ones run them to completion (:func:`sessiontree.orchestration.run_blocking`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Optional

from .compaction import latest_cut_keep
from .context import build_session_context, estimate_projected_context_tokens, should_compact
from .errors import SessionError
from .orchestration import (
    CompactionCancelledError,
    CompactionNoProgressError,
    CompactionResult,
    AlreadyCompactedError,
    NothingToCompactError,
    acompact,
    read_context,
    run_blocking,
)
from .provider_context import ProviderContext, repair_for_provider
from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings
from .summarizers.base import ContextOverflowError, Summarizer

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["AutoCompactor", "RecoveryResult", "is_overflow_error", "CompactionNoProgressError", "CannotCompactError"]

# Used only when sessiontree.summarizers.overflow is not available.
_FALLBACK_OVERFLOW = re.compile(
    r"context[ _-]?length|context window|maximum context|prompt is too long|too many tokens|"
    r"exceeds? the (?:model'?s? )?(?:maximum|context)|input is too long|token limit|context_length_exceeded|"
    r"request too large|reduce the length",
    re.IGNORECASE,
)


def _provider_overflow_check(status: Any, message: str) -> bool:
    try:
        from .summarizers.overflow import is_context_overflow
    except ImportError:
        if status == 413:
            return True
        return bool(message) and bool(_FALLBACK_OVERFLOW.search(message))
    return bool(is_context_overflow(status, message))


def is_overflow_error(error: Any, context_window: Optional[int] = None) -> bool:
    """True when ``error`` says the request did not fit the model's context window.

    ``error`` may be an exception (:class:`ContextOverflowError` always counts; otherwise its
    ``status_code``/``status`` and message are checked), a failed assistant message dict
    (``stopReason: "error"`` with ``errorMessage``; or, Pi's *silent overflow*, a successful answer
    whose ``usage.input + usage.cacheRead`` exceeds ``context_window``) or a message string.
    Provider messages are recognized by ``sessiontree.summarizers.overflow.is_context_overflow``.
    """
    if isinstance(error, ContextOverflowError):
        return True
    if isinstance(error, BaseException):
        status = getattr(error, "status_code", None) or getattr(error, "status", None)
        return _provider_overflow_check(status if isinstance(status, int) else None, str(error))
    if isinstance(error, dict):
        if error.get("role") == "assistant":
            if error.get("stopReason") == "error":
                return _provider_overflow_check(error.get("errorStatus"), str(error.get("errorMessage") or ""))
            usage = error.get("usage")
            if error.get("stopReason") == "length":
                # Pi 1.6 compaction.md: an early final "length" stop with no output at all means
                # the input left no room to answer: a context overflow
                output = usage.get("output") if isinstance(usage, dict) else None
                return output in (0, None) and not _has_output(error.get("content"))
            if context_window and isinstance(usage, dict) and error.get("stopReason") == "stop":
                used = (usage.get("input") or 0) + (usage.get("cacheRead") or 0)
                return isinstance(used, (int, float)) and used > context_window
            return False
        return _provider_overflow_check(error.get("status"), str(error.get("message") or ""))
    if isinstance(error, str):
        return _provider_overflow_check(None, error)
    return False


def _has_output(content: Any) -> bool:
    """Whether an assistant's content holds any text, thinking or tool call."""
    if isinstance(content, str):
        return bool(content)
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, dict):
            if block.get("type") == "toolCall" or block.get("text") or block.get("thinking"):
                return True
    return False


class CannotCompactError(SessionError):
    """The context is over the auto-compaction threshold and nothing can be compacted (no cut
    point frees tokens, or the leaf is already a compaction): sending the next request would
    exceed the window. Nothing was appended."""


@dataclass(frozen=True)
class RecoveryResult:
    """Outcome of :meth:`AutoCompactor.recover_from_overflow`.

    * ``retry``: call the model once more (with ``context.messages``);
    * ``outcome``: ``"compacted"``, ``"not_overflow"`` (not a context overflow: handle the error
      normally), ``"nothing_to_compact"`` or ``"cancelled"`` (a hook cancelled; Pi keeps the
      omission and does not retry);
    * ``omitted_entry_id``: the failed assistant attempt hidden by a ``context_edit``, if any;
    * ``compaction``: the :class:`~sessiontree.orchestration.CompactionResult`, if one was appended;
    * ``context``: the provider-safe context to retry with (after the repairs).
    """

    retry: bool
    outcome: str
    omitted_entry_id: Optional[str] = None
    compaction: Optional[CompactionResult] = None
    context: Optional[ProviderContext] = None


def _projected_tokens(path: list[Any]) -> Any:
    """Pi's projected estimate (tokens) of the context span ``path`` (entry dicts, root first)."""
    ctx = build_session_context(path)
    return estimate_projected_context_tokens(ctx.messages, ctx.sources, path).tokens


class AutoCompactor:
    """Pi 1.6's automatic compaction policy for one session.

    Args:
        session: the :class:`sessiontree.Session`.
        summarizer: a :class:`~sessiontree.summarizers.base.Summarizer` (``None``: the offline one).
        settings: :class:`CompactionSettings` (``enabled``, ``reserve_tokens``, ``keep_recent_tokens``).
        context_window: the conversation model's context window, tokens (decides when to compact).
        max_tokens: the summarizing model's output limit (default: the summarizer's / 16384).
        summary_context_window: the summarizing model's context window, which sizes the summary's
            output budget (default: the summarizer's ``context_window``, else none). Never the
            conversation model's window: a conversation that filled a small window would leave
            the summary a budget of a few tokens (Pi sends ``max_completion_tokens: 1``).
    """

    def __init__(
        self,
        session: "Session",
        summarizer: Summarizer | None = None,
        settings: Optional[CompactionSettings] = None,
        context_window: int = 200_000,
        *,
        max_tokens: Optional[int] = None,
        summary_context_window: Optional[int] = None,
    ):
        self.session = session
        self.summarizer = summarizer
        self.settings = settings or DEFAULT_COMPACTION_SETTINGS
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.summary_context_window = summary_context_window
        self.last_result: Optional[CompactionResult] = None
        self._recovery_compaction_id: Optional[str] = None

    # ==== estimates =====================================================

    def context_tokens(self) -> Any:
        """Pi's projected estimate of the current context, tokens."""
        return _projected_tokens(self.session.context_values())

    def needs_compaction(self) -> bool:
        """Pi ``shouldCompact`` over :meth:`context_tokens`."""
        return should_compact(self.context_tokens(), self.context_window, self.settings)

    async def _compact(
        self,
        reason: str,
        will_retry: bool = False,
        settings: Optional[CompactionSettings] = None,
        span: Optional[tuple[Optional[str], list[Any]]] = None,
    ) -> CompactionResult:
        result = await acompact(
            self.session,
            self.summarizer,
            settings=settings or self.settings,
            reason=reason,
            context_window=self.summary_context_window,
            max_tokens=self.max_tokens,
            will_retry=will_retry,
            span=span,
        )
        self.last_result = result
        return result

    async def _threshold(self) -> bool:
        # the context the check reads is the one the compaction plans from (parsed once)
        span = read_context(self.session)
        if not should_compact(_projected_tokens(span[1]), self.context_window, self.settings):
            return False
        try:
            await self._compact("threshold", span=span)
        except CompactionCancelledError:
            return False
        except AlreadyCompactedError as exc:
            raise CannotCompactError(
                f"the context ({self.context_tokens()} tokens) is over the threshold "
                f"({self.context_window} - {self.settings.reserve_tokens}) right after a compaction; "
                "nothing more can be summarized"
            ) from exc
        except NothingToCompactError as exc:
            # Pi's cut rule keeps everything (the keep budget falls inside a run of tool results
            # after the last cut point): fall back to the latest cut point that frees tokens
            # (docs/divergences.md), or say so; never let an over-window request go out silently.
            keep = latest_cut_keep(span[1], self.settings)
            if keep is None:
                raise CannotCompactError(
                    f"the context ({self.context_tokens()} tokens) is over the threshold "
                    f"({self.context_window} - {self.settings.reserve_tokens}) but has no cut point "
                    "to compact at"
                ) from exc
            try:
                await self._compact("threshold", settings=replace(self.settings, keep_recent_tokens=keep), span=span)
            except NothingToCompactError as again:
                raise CannotCompactError("over the threshold, and the fallback cut frees nothing") from again
            except CompactionCancelledError:
                return False
        return True

    # ==== check points ==================================================

    async def abefore_prompt(self) -> bool:
        """Check before a new user prompt is sent; returns whether it compacted. A new prompt
        starts a new run: an earlier overflow recovery (whose retry may have got no answer)
        no longer counts as "right after a recovery".

        Raises:
            CannotCompactError: over the threshold and nothing can be compacted.
        """
        self._recovery_compaction_id = None
        return await self._threshold()

    async def aafter_tool_results(self, will_call_model: bool) -> bool:
        """Check after a tool batch's results are appended, before the next model call
        (Pi ``prepareNextTurn``); skipped (False) when ``will_call_model`` is False, i.e. the
        batch ends the run and nothing queued needs an answer."""
        if not will_call_model:
            return False
        return await self._threshold()

    async def aafter_run(self) -> bool:
        """Check after the run ends; returns whether it compacted. Skipped after an aborted
        answer (the user cancelled) and after a context-overflow failure, which belongs to
        :meth:`recover_from_overflow` (Pi checks overflow first, then the threshold)."""
        last = self._last_assistant()
        if last is not None:
            message = last[1]
            if message.get("stopReason") == "aborted":
                return False
            if message.get("stopReason") == "error" and is_overflow_error(message, self.context_window):
                return False
        return await self._threshold()

    def before_prompt(self) -> bool:
        """Sync :meth:`abefore_prompt`."""
        return run_blocking(self.abefore_prompt())

    def after_tool_results(self, will_call_model: bool) -> bool:
        """Sync :meth:`aafter_tool_results`."""
        return run_blocking(self.aafter_tool_results(will_call_model))

    def after_run(self) -> bool:
        """Sync :meth:`aafter_run`."""
        return run_blocking(self.aafter_run())

    # ==== overflow recovery =============================================

    def _last_assistant(self) -> Optional[tuple[str | None, dict[str, Any]]]:
        """``(entry_id, message)`` of the newest assistant message on the branch (the index
        walks back from the leaf only as far as that message)."""
        found = self.session.last_on_branch("message", "assistant")
        if found is None:
            return None
        m = found.get("message")
        return (found.id, m) if isinstance(m, dict) else None

    def _failed_attempt(self, error: Any) -> Optional[str]:
        """Id of the failed assistant attempt to omit: the entry given, else the newest assistant
        message on the branch if it failed (``stopReason`` ``error``) or is the silent overflow."""
        if isinstance(error, str) and self.session.get_entry(error) is not None:
            return error
        last = self._last_assistant()
        if last is None:
            return None
        entry_id, message = last
        if (
            message.get("stopReason") == "error"
            or (isinstance(error, dict) and error == message)
            or (message.get("stopReason") == "length" and is_overflow_error(message, self.context_window))
        ):
            return entry_id
        return None

    def _overflowed_right_after_recovery(self) -> bool:
        """True when the last recovery compaction is on the branch and no successful assistant
        answer came after it."""
        cid = self._recovery_compaction_id
        if cid is None:
            return False
        span = self.session.context_span(with_settings=False, context_rule=False)
        ids = self.session.entry_table(span).id
        if cid in ids:
            entries = [self.session.entry_at(i) for i in span[ids.index(cid) + 1 :]]
        else:  # not the latest compaction: look over the whole branch
            branch = self.session.get_branch()
            at = next((k for k, e in enumerate(branch) if e.id == cid), None)
            if at is None:
                return False
            entries = branch[at + 1 :]
        for e in entries:
            if e.type == "message":
                m = e.get("message")
                if isinstance(m, dict) and m.get("role") == "user":
                    return False  # a new prompt started a new run
                if (
                    isinstance(m, dict)
                    and m.get("role") == "assistant"
                    and m.get("stopReason") not in ("error", "aborted")
                ):
                    return False
        return True

    def _omit(self, entry_id: str) -> None:
        """Append Pi 1.6's recovery omission: ``context_edit`` with ``replacement: null``."""
        self.session.append_context_edit(entry_id, None)

    async def arecover_from_overflow(self, error: Any) -> RecoveryResult:
        """One-shot recovery from a context-overflow failure (Pi 1.6 "Overflow and Length Recovery
        Ordering"): omit the failed attempt with a ``context_edit`` (``replacement: null``),
        compact with ``reason="overflow"`` (hooks see ``will_retry=True``), and tell the caller to
        retry once with the provider-safe context.

        ``error``: the exception or failed assistant message (see :func:`is_overflow_error`), or
        the failed attempt's entry id. Not an overflow: ``RecoveryResult(retry=False,
        outcome="not_overflow")`` and nothing is appended. When compaction is cancelled or finds
        nothing, the omission stays and there is no retry (Pi).

        Raises:
            CompactionNoProgressError: compaction did not shrink the context (tokens after >=
                before), or the model overflowed again right after a recovery (the omission of
                the new failed attempt is still appended).
            SummarizerError: the summary call failed (the omission stays).
        """
        probe = error
        entry = self.session.get_entry(error) if isinstance(error, str) else None
        if entry is not None:
            probe = entry.get("message")
        if not is_overflow_error(probe, self.context_window):
            return RecoveryResult(retry=False, outcome="not_overflow")
        failed = self._failed_attempt(error)
        if failed is not None:
            self._omit(failed)
        if self._overflowed_right_after_recovery():
            self._recovery_compaction_id = None
            raise CompactionNoProgressError("context overflow again right after an overflow compaction; not retrying")
        try:
            result = await self._compact("overflow", will_retry=True)
        except NothingToCompactError:
            return RecoveryResult(retry=False, outcome="nothing_to_compact", omitted_entry_id=failed)
        except CompactionCancelledError:
            return RecoveryResult(retry=False, outcome="cancelled", omitted_entry_id=failed)
        before = result.estimated_tokens_before if result.estimated_tokens_before is not None else result.tokens_before
        if not result.estimated_tokens_after < before:
            raise CompactionNoProgressError(
                f"compaction made no progress (~{before} tokens before, ~{result.estimated_tokens_after} after, "
                "both chars/4 estimates); not retrying"
            )
        if result.estimated_tokens_after > self.context_window:
            raise CompactionNoProgressError(
                f"after compacting, the context is still ~{result.estimated_tokens_after} tokens, over the "
                f"{self.context_window}-token window; a retry would overflow again, not retrying"
            )
        self._recovery_compaction_id = result.entry.id
        return RecoveryResult(
            retry=True,
            outcome="compacted",
            omitted_entry_id=failed,
            compaction=result,
            context=result.context or self.provider_context(),
        )

    def recover_from_overflow(self, error: Any) -> RecoveryResult:
        """Sync :meth:`arecover_from_overflow`."""
        return run_blocking(self.arecover_from_overflow(error))

    def provider_context(self) -> ProviderContext:
        """The provider-safe context of the current branch (:func:`repair_for_provider`)."""
        ctx = self.session.build_context()
        return repair_for_provider(ctx.messages, ctx.sources)
