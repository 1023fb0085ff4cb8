"""Compaction and navigation: the hooks, the cut point, and the async and sync pairs.

The work itself is :mod:`sessiontree.orchestration`'s (loaded on first use: a light
``import sessiontree`` never loads asyncio); each sync method is its async twin run to
completion (:func:`blocking`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Concatenate, Coroutine, ParamSpec, TypeVar, cast

from .._jsjson import js_get
from ..context import latest_compaction, latest_compaction_at
from ..entries import CutPoint
from ..errors import PiError
from ..results import BRANCH_SUMMARY_RESERVE_TOKENS, CompactionResult, NavigationResult, SessionHooks
from ..settings import CompactionSettings
from .base import SessionBase, _as_indexed

if TYPE_CHECKING:
    from . import Session


P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def blocking(
    amethod: Callable[Concatenate[S, P], Coroutine[Any, Any, R]], name: str, doc: str
) -> Callable[Concatenate[S, P], R]:
    """The sync twin ``name`` of the async method ``amethod``.

    The same parameters (its signature, for :func:`inspect.signature` and type checkers), run to
    completion; not from inside a running event loop
    (:func:`sessiontree.orchestration.run_blocking`). The twin calls the async method by name,
    so a subclass that overrides the async one changes both."""
    async_name = amethod.__name__

    @functools.wraps(amethod)
    def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        from .. import orchestration

        result: R = orchestration.run_blocking(getattr(self, async_name)(*args, **kwargs))
        return result

    method.__name__ = name
    method.__qualname__ = amethod.__qualname__.rsplit(".", 1)[0] + "." + name
    method.__doc__ = doc
    return method


class Delegates(SessionBase):
    """``hooks``, ``find_cut_point``, ``acompact``/``compact``, ``anavigate_tree``/``navigate_tree``."""

    # ==== cut point (Rust) =========================================================

    def _latest_compaction(self, path: list[int]) -> tuple[Any, ...] | None:
        """:func:`sessiontree.context.latest_compaction` of the entries ``path``, from the index.

        ``path`` holds entry indices. The index gives type names, and string ids up to the compaction; only the compaction's
        line is parsed. Where the index's ids are not exact (duplicate or non-string ids, a
        legacy file) the parsed values decide."""
        core = self._core
        if core.entry_count() == len(core) and not core.needs_migration:
            inexact: list[int] = []

            def id_of(i: int) -> Any:
                got = core.record(path[i]).id
                if got is None:  # not a string: the index does not keep its value
                    inexact.append(i)
                    return object()
                return got

            def first_kept_of(i: int) -> Any:
                got = js_get(self._load_raw(path[i]), "firstKeptEntryId")
                if isinstance(got, str) and ("\ufffd" in got or _as_indexed(got) != got):
                    inexact.append(i)  # the index keeps lone surrogates as U+FFFD
                return got

            found = latest_compaction_at(core.types(path), id_of, first_kept_of)
            if not inexact:
                return found
        return latest_compaction(self.raw_values(path))

    def find_cut_point(
        self, keep_recent_tokens: int, *, token_counter: Callable[[dict[str, Any]], Any] | None = None
    ) -> "CutPoint":
        """Where a compaction keeping about ``keep_recent_tokens`` would cut the current branch.

        Pi 1.6 ``findCutPoint`` as ``prepareCompaction`` runs it: from the latest compaction's
        ``firstKeptEntryId``, over the context projection.

        The Rust core walks back from the leaf estimating tokens from the raw lines and stops
        as soon as the budget is met: it parses only the entries it needs, so a 1 GB session
        with a 20k-token tail costs about what a 1 MB one does. Branches with ``context_edit``
        entries, content Pi would choke on, or a custom ``token_counter`` use the exact Python
        rules (:func:`sessiontree.compaction.find_cut_point`).

        Returns a :class:`CutPoint` (entry ids; ``first_kept_entry_id`` None on an empty branch).

        Raises:
            SessionCycleError: the branch loops.
        """
        path = self.context_span(with_settings=False)
        if not path:
            return CutPoint(None, None, False)
        from ..compaction import collect_context_edits, kept_boundary
        from ..compaction import find_cut_point as py_find_cut_point

        start, dropped = kept_boundary(self._latest_compaction(path))
        if dropped is not None:
            path = path[:dropped] + path[dropped + 1 :]
        got = (
            None
            if token_counter is not None
            else self._core.find_cut_point(path, start, len(path), max(0, int(keep_recent_tokens)))
        )
        if got is None:
            entries = self.raw_values(path)
            try:
                r = py_find_cut_point(
                    entries, start, len(entries), keep_recent_tokens, collect_context_edits(entries), token_counter
                )
            except PiError as exc:
                self._name_entry(exc)
                raise
            got = (r.first_kept_entry_index, r.turn_start_index, r.is_split_turn)
        first, turn, split = got
        if first >= len(path):
            return CutPoint(None, None, False)
        return CutPoint(
            self._core.record(path[first]).id, self._core.record(path[turn]).id if turn >= 0 else None, split
        )

    # ==== compaction and navigation ================================================

    @property
    def hooks(self) -> SessionHooks:
        """This session's :class:`sessiontree.hooks.SessionHooks`.

        ``before_compact`` and ``before_tree`` are lists of sync or async callables."""
        hooks = self._hooks
        if hooks is None:
            hooks = self._hooks = SessionHooks()
        return hooks

    async def _naming_the_entry(self, work: Awaitable[R]) -> R:
        """``await work``; a Pi error it raises names the entry whose content raised it."""
        try:
            return await work
        except PiError as exc:
            self._name_entry(exc)
            raise

    async def acompact(
        self,
        summarizer: Any = None,
        *,
        settings: CompactionSettings | None = None,
        custom_instructions: str | None = None,
        reason: str = "manual",
        context_window: int | None = None,
        max_tokens: int | None = None,
        will_retry: bool = False,
        accept_suspect_summary: bool = False,
    ) -> CompactionResult:
        """Compact the active branch (Pi ``compact``).

        See :func:`sessiontree.orchestration.acompact` for every parameter
        (``context_window``/``max_tokens``: the summarizing model's window and output limit in
        tokens; ``will_retry``: recorded for hooks; ``accept_suspect_summary``: append a summary
        the safety checks flag). Reads only the context span (:meth:`get_context_entries`).
        Returns a :class:`~sessiontree.orchestration.CompactionResult`.

        Raises:
            NothingToCompactError: ``"Nothing to compact (session too small)"``.
            SummaryBudgetError, UnsafeSummaryError: the summary could not be asked for or was
                refused (nothing appended).
            LeafMovedError: the leaf moved while the summary was written (nothing appended).
        """
        from .. import orchestration

        return await self._naming_the_entry(
            orchestration.acompact(
                cast("Session", self),
                summarizer,
                settings=settings,
                custom_instructions=custom_instructions,
                reason=reason,
                context_window=context_window,
                max_tokens=max_tokens,
                will_retry=will_retry,
                accept_suspect_summary=accept_suspect_summary,
            )
        )

    compact = blocking(
        acompact,
        "compact",
        """Sync :meth:`acompact` (not from inside a running event loop); the same parameters.""",
    )

    async def anavigate_tree(
        self,
        target_id: str,
        *,
        summarize: bool = False,
        summarizer: Any = None,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        reserve_tokens: int = BRANCH_SUMMARY_RESERVE_TOKENS,
    ) -> NavigationResult:
        """Move within the tree (Pi ``/tree``).

        See :func:`sessiontree.orchestration.anavigate_tree` for every parameter. Returns a
        :class:`~sessiontree.orchestration.NavigationResult`.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry.
        """
        from .. import orchestration

        return await self._naming_the_entry(
            orchestration.anavigate_tree(
                cast("Session", self),
                target_id,
                summarize=summarize,
                summarizer=summarizer,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                label=label,
                context_window=context_window,
                max_tokens=max_tokens,
                reserve_tokens=reserve_tokens,
            )
        )

    navigate_tree = blocking(
        anavigate_tree,
        "navigate_tree",
        """Sync :meth:`anavigate_tree`: selecting a user message moves the leaf to its parent and
        returns its text (``editor_text``); anything else becomes the leaf; ``summarize=True``
        appends a ``branch_summary`` of the abandoned branch.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry.
        """,
    )
