"""Extension hooks around compaction and tree navigation (Pi 1.6 ``session_before_compact`` /
``session_before_tree``).

Register plain or ``async`` callables on a session's :class:`SessionHooks`::

    >>> from sessiontree import Session
    >>> s = Session.in_memory()
    >>> s.hooks.before_compact.append(lambda event: {"cancel": True})
    >>> len(s.hooks.before_compact)
    1

A hook receives one event object and returns ``None`` (no opinion), a result dataclass
(:class:`CompactHookResult`, :class:`TreeHookResult`) or the equivalent dict in Pi's shape
(``{"cancel": True}``, ``{"compaction": {"summary", "firstKeptEntryId", "tokensBefore", "details",
"usage"}}``, ``{"summary": {"summary", "details", "usage"}, "customInstructions", "replaceInstructions",
"label"}``; snake_case keys are accepted too). Hooks run in registration order; a cancel stops
at once, otherwise the last non-``None`` result wins (Pi's extension runner).

What a hook returns is validated before anything is written (:class:`HookResultError`): a
custom compaction must keep an entry on the active path, never a tool result, and carry a
string summary. A hook that raises propagates its exception; nothing is appended.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Sequence, Union

from .errors import SessionError

__all__ = [
    "SessionHooks",
    "BeforeCompactEvent",
    "BeforeTreeEvent",
    "TreePreparation",
    "HookCompaction",
    "HookBranchSummary",
    "CompactHookResult",
    "TreeHookResult",
    "HookResultError",
    "run_hooks",
    "normalize_compact_result",
    "normalize_tree_result",
]

Hook = Callable[[Any], Union[Any, Awaitable[Any]]]


class HookResultError(SessionError, ValueError):
    """A hook returned something that cannot be stored (e.g. a ``first_kept_entry_id`` that is not
    on the active path, or that names a tool result). Nothing was appended."""


# ==== Events ====================================================================


@dataclass(frozen=True)
class BeforeCompactEvent:
    """What a ``before_compact`` hook sees (Pi ``SessionBeforeCompactEvent``).

    * ``preparation``: the :class:`sessiontree.compaction.CompactionPreparation` Pi's default would
      summarize (``first_kept_entry_id``, ``messages_to_summarize``, ``turn_prefix_messages``,
      ``tokens_before``, ``previous_summary``, ``file_ops``, ``settings``);
    * ``branch_entries``: the whole active path, root first, as entry dicts (a lazy sequence:
      read only if a hook looks at it, since it costs the whole branch);
    * ``custom_instructions``: the caller's focus text or ``None``;
    * ``reason``: ``"manual"``, ``"threshold"`` or ``"overflow"``;
    * ``will_retry``: True when an overflowed model call is retried after this compaction.
    """

    preparation: Any
    branch_entries: Sequence[Any]
    custom_instructions: Optional[str]
    reason: str
    will_retry: bool = False


@dataclass(frozen=True)
class TreePreparation:
    """Pi ``TreePreparation``: a pending ``/tree`` navigation.

    ``target_id`` (where we go), ``old_leaf_id`` (the leaf being left, or ``None``),
    ``common_ancestor_id``, ``entries_to_summarize`` (entry dicts of the abandoned branch, oldest
    first), ``user_wants_summary``, ``custom_instructions``, ``replace_instructions``, ``label``.
    """

    target_id: str
    old_leaf_id: Optional[str]
    common_ancestor_id: Optional[str]
    entries_to_summarize: list[Any]
    user_wants_summary: bool
    custom_instructions: Optional[str] = None
    replace_instructions: bool = False
    label: Optional[str] = None


@dataclass(frozen=True)
class BeforeTreeEvent:
    """What a ``before_tree`` hook sees (Pi ``SessionBeforeTreeEvent``): ``preparation``, a
    :class:`TreePreparation`."""

    preparation: TreePreparation


# ==== Results ===================================================================


@dataclass(frozen=True)
class HookCompaction:
    """A compaction supplied by a hook (stored with ``fromHook: true``).

    ``summary`` (str, stored verbatim: no file lists are added), ``first_kept_entry_id`` and
    ``tokens_before`` (default: the preparation's), ``details`` (any JSON value) and ``usage``
    (a :class:`sessiontree.summarizers.base.SummaryUsage` or Pi ``usage`` dict; counted in the
    session totals).
    """

    summary: str
    first_kept_entry_id: Optional[str] = None
    tokens_before: Optional[int] = None
    details: Any = None
    usage: Any = None


@dataclass(frozen=True)
class HookBranchSummary:
    """A branch summary supplied by a ``before_tree`` hook (used only when the caller asked for a
    summary): ``summary`` (str), ``details``, ``usage`` as in :class:`HookCompaction`."""

    summary: str
    details: Any = None
    usage: Any = None


@dataclass(frozen=True)
class CompactHookResult:
    """``before_compact`` result: ``cancel`` the compaction, or supply a ``compaction``."""

    cancel: bool = False
    compaction: Optional[HookCompaction] = None


_UNSET: Any = object()


@dataclass(frozen=True)
class TreeHookResult:
    """``before_tree`` result: ``cancel`` the navigation, supply the branch ``summary``, or override
    ``custom_instructions`` / ``replace_instructions`` / ``label`` (fields left unset keep the
    caller's values)."""

    cancel: bool = False
    summary: Optional[HookBranchSummary] = None
    custom_instructions: Any = _UNSET
    replace_instructions: Any = _UNSET
    label: Any = _UNSET


# SessionHooks (the hook lists a Session holds) lives in results.py, the bottom floor, so that
# Session declares it without importing this module; ``sessiontree.hooks.SessionHooks`` stays.
from .results import SessionHooks  # noqa: E402


# ==== Running and normalizing ===================================================


async def run_hooks(hooks: list[Any], event: Any) -> Any:
    """Call ``hooks`` in order with ``event``; await awaitable results. Returns the first result
    that cancels, else the last non-``None`` result, else ``None`` (Pi's extension runner)."""
    result = None
    for hook in list(hooks):
        got = hook(event)
        if inspect.isawaitable(got):
            got = await got
        if got is None:
            continue
        result = got
        if _field(got, "cancel", False):
            return got
    return result


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` for a dataclass or ``obj[name]`` / ``obj[camelName]`` for a dict."""
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        camel = camel_case(name)
        return obj.get(camel, default)
    return getattr(obj, name, default)


def camel_case(name: str) -> str:
    """Pi's camelCase spelling of a snake_case Python name: ``"tokens_before"`` ->
    ``"tokensBefore"`` (each part after an ``_`` gets its first letter upper-cased). The one
    home of the rule: ``rpc.py`` imports it for the field names it writes."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


_camel = camel_case  # the name it had


def normalize_compact_result(result: Any) -> CompactHookResult | None:
    """Turn what a ``before_compact`` hook returned into a :class:`CompactHookResult`.

    Raises :class:`HookResultError` for a value of the wrong shape (not a dict/dataclass, or a
    ``compaction`` whose ``summary`` is not a non-empty string)."""
    if result is None:
        return None
    if not isinstance(result, (dict, CompactHookResult)):
        raise HookResultError(
            f"before_compact hook returned {type(result).__name__}, expected a dict or CompactHookResult"
        )
    cancel = bool(_field(result, "cancel", False))
    raw = _field(result, "compaction", None)
    compaction = None
    if raw is not None:
        if isinstance(raw, HookCompaction):
            compaction = raw
        elif isinstance(raw, dict):
            compaction = HookCompaction(
                summary=_field(raw, "summary"),
                first_kept_entry_id=_field(raw, "first_kept_entry_id"),
                tokens_before=_field(raw, "tokens_before"),
                details=_field(raw, "details"),
                usage=_field(raw, "usage"),
            )
        else:
            raise HookResultError("before_compact hook: 'compaction' must be a dict or HookCompaction")
        if not isinstance(compaction.summary, str) or not compaction.summary:
            raise HookResultError("before_compact hook: compaction summary must be a non-empty string")
        tb = compaction.tokens_before
        if tb is not None and (isinstance(tb, bool) or not isinstance(tb, (int, float))):
            raise HookResultError("before_compact hook: tokens_before must be a number")
    return CompactHookResult(cancel=cancel, compaction=compaction)


def normalize_tree_result(result: Any) -> TreeHookResult | None:
    """Turn what a ``before_tree`` hook returned into a :class:`TreeHookResult`.

    Raises :class:`HookResultError` for a value of the wrong shape (a ``summary`` whose text is
    not a non-empty string, a non-string label or instructions)."""
    if result is None:
        return None
    if isinstance(result, TreeHookResult):
        out = result
    elif isinstance(result, dict):
        kwargs: dict[str, Any] = {"cancel": bool(_field(result, "cancel", False))}
        raw = _field(result, "summary", None)
        if raw is not None:
            if isinstance(raw, HookBranchSummary):
                kwargs["summary"] = raw
            elif isinstance(raw, dict):
                kwargs["summary"] = HookBranchSummary(
                    summary=_field(raw, "summary"), details=_field(raw, "details"), usage=_field(raw, "usage")
                )
            else:
                raise HookResultError("before_tree hook: 'summary' must be a dict or HookBranchSummary")
        for name in ("custom_instructions", "replace_instructions", "label"):
            if name in result or camel_case(name) in result:
                kwargs[name] = _field(result, name)
        out = TreeHookResult(**kwargs)
    else:
        raise HookResultError(f"before_tree hook returned {type(result).__name__}, expected a dict or TreeHookResult")
    if out.summary is not None and (not isinstance(out.summary.summary, str) or not out.summary.summary):
        raise HookResultError("before_tree hook: summary text must be a non-empty string")
    for name in ("custom_instructions", "label"):
        value = getattr(out, name)
        if value is not _UNSET and value is not None and not isinstance(value, str):
            raise HookResultError(f"before_tree hook: {name} must be a string or None")
    return out


def is_set(value: Any) -> bool:
    """True when a :class:`TreeHookResult` override field was given."""
    return value is not _UNSET
