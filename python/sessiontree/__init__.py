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

from .context import SessionContext
from .entries import Entry, Problem, TreeNode
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
)
from .autocompact import AutoCompactor, RecoveryResult
from .hooks import HookResultError, SessionHooks
from .listing import SessionInfo, list_sessions
from .orchestration import (
    AlreadyCompactedError,
    CompactionCancelledError,
    CompactionNoProgressError,
    CompactionResult,
    NavigationResult,
    NothingToCompactError,
)
from .provider_context import ProviderContext
from .session import Session
from .scrub import ScrubFinding, ScrubReport
from .settings import CompactionSettings
from .summarizers.base import SummarizerError
from .token_counter import TokenCounterError
from .tokens import estimate_tokens
from .usage import UsageTotals

# The one version: Cargo.toml's, compiled into the core (env!("CARGO_PKG_VERSION")).
from ._core import __version__ as __version__

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
    "NothingToCompactError",
    "AlreadyCompactedError",
    "CompactionCancelledError",
    "CompactionNoProgressError",
    "HookResultError",
    "SummarizerError",
    "TokenCounterError",
]
