"""sessiontree: fast, Pi-compatible append-only session trees for LLM coding agents.

The heavy lifting (scanning, indexing, walking) lives in the Rust extension
``sessiontree._core``; this package is the public Python API over it.

    >>> from sessiontree import Session
    >>> s = Session.in_memory("/project")
    >>> _ = s.append_message({"role": "user", "content": "hello", "timestamp": 0})
    >>> s.build_context().messages[0]["content"]
    'hello'
"""

from __future__ import annotations

from .errors import (
    EntryNotFoundError,
    PiError,
    MessageShapeError,
    OutputPathError,
    SessionArgumentError,
    SessionCycleError,
    SessionError,
    SessionFileChangedError,
    SessionFormatError,
    SessionLockedError,
    SessionReadOnlyError,
    SessionTreeError,
    SearchIndexError,
    SearchQueryError,
)

# ``typing`` is not imported at run time: ``import sessiontree`` loads the errors only (no
# typing, re, enum, pathlib; the core extension with the first name that needs it); the
# annotations are strings, and type checkers take any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False

if TYPE_CHECKING:  # what type checkers see; at run time these load on first use (below)
    from typing import Any

    from .context import SessionContext
    from .entries import Entry, Problem, TreeNode
    from .session import Session
    from .settings import CompactionSettings
    from .tokens import estimate_tokens
    from .usage import UsageTotals
    from .autocompact import AutoCompactor, RecoveryResult
    from .hooks import HookResultError
    from .results import SessionHooks
    from .listing import SessionInfo, list_sessions
    from .results import (
        AlreadyCompactedError,
        CompactionCancelledError,
        CompactionNoProgressError,
        CompactionResult,
        NavigationResult,
        NothingToCompactError,
    )
    from .provider_context import ProviderContext
    from .scrub import ScrubFinding, ScrubReport
    from .searching import SearchHit, SearchResult, search
    from .summarizers.base import SummarizerError
    from .token_counter import TokenCounterError
    from .paths import __version__ as __version__

# A light import: ``import sessiontree`` loads the errors; every name
# below (``Session`` and what it needs, summarizers, asyncio through orchestration, hooks,
# listing, the token counter's sockets, the scrubber's tempfile, search) loads on first use
# through the module ``__getattr__`` (PEP 562), so a command that needs only search (``python
# -m sessiontree search``) never loads ``Session``.
_LAZY: dict[str, str] = {
    "Session": ".session",
    "SessionContext": ".context",
    "Entry": ".entries",
    "Problem": ".entries",
    "TreeNode": ".entries",
    "CompactionSettings": ".settings",
    "estimate_tokens": ".tokens",
    "UsageTotals": ".usage",
    "AutoCompactor": ".autocompact",
    "RecoveryResult": ".autocompact",
    "HookResultError": ".hooks",
    "SessionHooks": ".results",
    "SessionInfo": ".listing",
    "list_sessions": ".listing",
    "AlreadyCompactedError": ".results",
    "CompactionCancelledError": ".results",
    "CompactionNoProgressError": ".results",
    "CompactionResult": ".results",
    "NavigationResult": ".results",
    "NothingToCompactError": ".results",
    "ProviderContext": ".provider_context",
    "ScrubFinding": ".scrub",
    "ScrubReport": ".scrub",
    "SearchHit": ".searching",
    "SearchResult": ".searching",
    "search": ".searching",
    "SummarizerError": ".summarizers.base",
    "TokenCounterError": ".token_counter",
    # the one version: Cargo.toml's, compiled into the core; its owner ``paths`` (which loads
    # pathlib) is imported on first use
    "__version__": ".paths",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Session",
    "ScrubReport",
    "ScrubFinding",
    "SessionContext",
    "SessionInfo",
    "Entry",
    "TreeNode",
    "Problem",
    "CompactionSettings",
    "CompactionResult",
    "NavigationResult",
    "ProviderContext",
    "UsageTotals",
    "SessionHooks",
    "AutoCompactor",
    "RecoveryResult",
    "list_sessions",
    "search",
    "SearchHit",
    "SearchResult",
    "estimate_tokens",
    "SessionTreeError",
    "SessionError",
    "PiError",
    "SessionFormatError",
    "SessionCycleError",
    "EntryNotFoundError",
    "SessionFileChangedError",
    "SessionLockedError",
    "SessionReadOnlyError",
    "SessionArgumentError",
    "MessageShapeError",
    "OutputPathError",
    "SearchQueryError",
    "SearchIndexError",
    "NothingToCompactError",
    "AlreadyCompactedError",
    "CompactionCancelledError",
    "CompactionNoProgressError",
    "HookResultError",
    "SummarizerError",
    "TokenCounterError",
]
