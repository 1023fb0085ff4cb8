"""What :meth:`Session.compact` and :meth:`Session.navigate_tree` return
(:class:`CompactionResult`, :class:`NavigationResult`; made by :mod:`sessiontree.orchestration`,
which re-exports them), the errors they raise (:class:`NothingToCompactError` and its kin,
re-exported by the orchestration too) and the hook lists a session holds
(:class:`SessionHooks`, re-exported by :mod:`sessiontree.hooks`). A light module of the bottom
floor: ``Session``'s return types resolve (``typing.get_type_hints``) without importing the
orchestration, its asyncio and summarizers, or the hooks' runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ._jsjson import js_whole_numbers
from .errors import SessionError

if TYPE_CHECKING:
    from .entries import Entry
    from .provider_context import ProviderContext
    from .summarizers.base import SummaryUsage

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


# ==== Hooks =====================================================================


@dataclass
class SessionHooks:
    """The hook lists of one session: append sync or async callables.

    * ``before_compact``: called with a :class:`~sessiontree.hooks.BeforeCompactEvent` before every compaction
      (manual, threshold or overflow);
    * ``before_tree``: called with a :class:`~sessiontree.hooks.BeforeTreeEvent` before every tree navigation that
      moves the leaf (whether or not a summary was asked for).
    """

    before_compact: list[Any] = field(default_factory=list)
    before_tree: list[Any] = field(default_factory=list)


# ==== Results ===================================================================

#: Pi ``branchSummary.reserveTokens`` default: budget = context window - this.
BRANCH_SUMMARY_RESERVE_TOKENS = 16384


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`acompact` did.

    * ``entry``: the appended ``compaction`` :class:`sessiontree.entries.Entry`;
    * ``summary``, ``first_kept_entry_id``, ``tokens_before``, ``details``: as stored;
    * ``estimated_tokens_after``: Pi's projected estimate of the rebuilt context (tokens);
    * ``tokens_before_source``: where ``tokens_before`` comes from: ``"usage"`` (the provider's
      count of the last answer plus estimates after it), ``"estimate"`` (chars/4) or ``"hook"``;
      ``estimated_tokens_before``: the chars/4 estimate of the context before, the figure
      comparable with ``estimated_tokens_after`` (like with like);
    * ``usage``: :class:`SummaryUsage` of the summary calls (summed), or ``None`` (a hook gave none);
    * ``reason``: ``"manual"``, ``"threshold"`` or ``"overflow"``; ``from_hook``: a hook supplied it;
    * ``context``: the provider-safe context after compaction (:class:`ProviderContext`);
    * ``preparation``: the :class:`~sessiontree.compaction.CompactionPreparation` it was made
      from (what was summarized, the split turn, the previous summary).
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
    tokens_before_source: str = "estimate"
    estimated_tokens_before: Any = None
    preparation: Any = None

    def to_pi(self) -> dict[str, Any]:
        """Pi's RPC ``compact`` response ``data``: ``{summary, firstKeptEntryId, tokensBefore,
        estimatedTokensAfter, usage, details}`` (``usage`` omitted when unknown)."""
        out: dict[str, Any] = {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "estimatedTokensAfter": self.estimated_tokens_after,
        }
        if self.usage is not None:
            out["usage"] = js_whole_numbers(self.usage.to_pi())  # Pi's stored usage object
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
