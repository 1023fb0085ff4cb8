"""What :meth:`Session.compact` and :meth:`Session.navigate_tree` return
(:class:`CompactionResult`, :class:`NavigationResult`; made by :mod:`sessiontree.orchestration`,
which re-exports them). A light module: ``Session``'s return types resolve
(``typing.get_type_hints``) without importing the orchestration, its asyncio and summarizers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .provider_context import ProviderContext

if TYPE_CHECKING:
    from .entries import Entry
    from .summarizers.base import SummaryUsage

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
    tokens_before_source: str = "estimate"
    estimated_tokens_before: Any = None

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
            from .orchestration import _usage_dict  # loaded: a result comes from it

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
