"""Summarizers for compaction and branch summaries (see :mod:`.base` for the contract).

* :class:`OfflineSummarizer` (default): extractive, no model, no network;
* :class:`~.openai_compat.OpenAICompatSummarizer`: any OpenAI-compatible chat-completions server
  (extra ``sessiontree[openai]``);
* :class:`~.anthropic.AnthropicSummarizer`: Anthropic Messages (extra ``sessiontree[anthropic]``).

    >>> s = get_summarizer("offline")
    >>> run_sync(s.summarize(SummaryRequest("compaction", "[User]: Add a --json flag."))).text.splitlines()[1]
    'Add a --json flag.'

The provider classes are imported lazily, so this package imports without the SDKs.
"""

from __future__ import annotations

import os
from typing import Any

from .base import (
    MIN_SUMMARY_OUTPUT_TOKENS,
    OVERSIZED_SUMMARY_FACTOR,
    ContextOverflowError,
    EmptySummaryError,
    OversizedSummaryError,
    Pricing,
    Summarizer,
    SummarizerError,
    SummaryBudgetError,
    SummaryKind,
    SummaryRequest,
    SummaryResult,
    SummaryUsage,
    TruncatedSummaryError,
    UnsafeSummaryError,
    run_sync,
)
from .offline import OfflineSummarizer
from .overflow import is_context_overflow
from .prompts import (
    SYSTEM_PROMPT,
    TURN_CONTEXT_SEPARATOR,
    build_prompt,
    build_user_text,
    estimate_request_tokens,
    estimate_text_tokens,
    merge_split_turn,
    output_budget,
)
from .retry import RetriesExhaustedError, RetryPolicy, TransientError

__all__ = [
    "SummaryKind",
    "SummaryUsage",
    "SummaryRequest",
    "SummaryResult",
    "Summarizer",
    "SummarizerError",
    "ContextOverflowError",
    "SummaryBudgetError",
    "UnsafeSummaryError",
    "TruncatedSummaryError",
    "EmptySummaryError",
    "OversizedSummaryError",
    "MIN_SUMMARY_OUTPUT_TOKENS",
    "OVERSIZED_SUMMARY_FACTOR",
    "RetriesExhaustedError",
    "TransientError",
    "Pricing",
    "RetryPolicy",
    "run_sync",
    "OfflineSummarizer",
    "OpenAICompatSummarizer",
    "AnthropicSummarizer",
    "get_summarizer",
    "SUMMARIZER_NAMES",
    "PROVIDERS",
    "Provider",
    "provider",
    "provider_for_pi_api",
    "provider_class",
    "is_context_overflow",
    "output_budget",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "build_prompt",
    "build_user_text",
    "merge_split_turn",
    "SYSTEM_PROMPT",
    "TURN_CONTEXT_SEPARATOR",
]

from ..providers import PROVIDERS, SUMMARIZER_NAMES, Provider, provider, provider_for_pi_api  # noqa: E402

_BY_NAME = {n: p for p in PROVIDERS for n in (p.name, *p.aliases)}
_BY_CLASS = {p.cls: p for p in PROVIDERS}


def provider_class(p: Provider) -> Any:
    """The provider's summarizer class (imports its module; the SDK is imported when the class
    is instantiated)."""
    import importlib

    return getattr(importlib.import_module(f".{p.module}", __name__), p.cls)


def __getattr__(name: str) -> Any:  # lazy provider classes (their SDKs are optional)
    p = _BY_CLASS.get(name)
    if p is not None:
        return provider_class(p)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_summarizer(name: str = "offline", **kw: Any) -> Summarizer:
    """A summarizer by name: ``"offline"``, ``"openai"`` or ``"anthropic"``.

    Keyword arguments go to the class. Missing settings come from the environment:

    * ``openai``: ``api_key`` <- ``$OPENAI_API_KEY``, ``base_url`` <- ``$OPENAI_BASE_URL``,
      ``model`` <- ``$OPENAI_MODEL``;
    * ``anthropic``: ``api_key`` <- ``$ANTHROPIC_API_KEY``, ``base_url`` <- ``$ANTHROPIC_BASE_URL``,
      ``model`` <- ``$ANTHROPIC_MODEL``.

    Raises:
        ValueError: unknown name, or no model / API key for a provider.
        ImportError: the provider's SDK is not installed (message names the pip extra).
    """
    key = (name or "offline").strip().lower()
    if key == "offline":
        return OfflineSummarizer(**kw)
    p = _BY_NAME.get(key)
    if p is not None:
        import importlib

        mod = importlib.import_module(f".{p.module}", __name__)
        # the provider's SDK first: a missing package is the error to fix before any setting
        getattr(mod, p.sdk_import)()
        cls, env = getattr(mod, p.cls), p.env
        kw.setdefault("api_key", os.environ.get(f"{env}_API_KEY"))
        kw.setdefault("base_url", os.environ.get(f"{env}_BASE_URL"))
        model = kw.pop("model", None) or os.environ.get(f"{env}_MODEL")
        if not model:
            raise ValueError(f"get_summarizer({key!r}) needs model=... (or ${env}_MODEL)")
        made: Summarizer = cls(model, **kw)
        return made
    raise ValueError(f"unknown summarizer {name!r}; choose one of {', '.join(SUMMARIZER_NAMES)}")
