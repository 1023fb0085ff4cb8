"""Search every session of a store, and know where each hit stands in its tree.

    >>> from sessiontree import search
    >>> r = search('"cargo test" -flaky', "~/.pi/agent/sessions", branch_state="abandoned")  # doctest: +SKIP
    >>> r.hits[0].fork_point, r.hits[0].marked()  # doctest: +SKIP

The index (Tantivy, in the Rust core: ``rust/src/search/``) lives in the cache folder of the
saved indexes (:mod:`sessiontree.index_cache`), one per store (the sources named), and stores
no text: a hit's snippet is read from the session file through the entry's offset and the hit
re-checked, so a stale hit is never returned. Every file is checked against the index before a
query: appended files are indexed from where the index stopped, rewritten or replaced files
again, files gone are evicted. ``index_cache=False`` builds the index in memory for the call.
The query syntax and the branch states are in ``docs/search.md``.
"""

from __future__ import annotations

import os
from typing import Sequence, Union

from .errors import SessionArgumentError
from .index_cache import IndexCache
from .search_hits import BRANCH_STATES, BranchState, SearchHit, SearchResult, TimeBound, search_files

__all__ = ["SearchHit", "SearchResult", "search", "search_files", "default_source", "BRANCH_STATES"]

Sources = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def default_source() -> str:
    """Pi's session folder: ``$PI_CODING_AGENT_SESSION_DIR`` when set, else
    ``<agent dir>/sessions``."""
    from .paths import session_dir_env, sessions_root

    return str(session_dir_env() or sessions_root())


def search(
    query: str,
    sources: Sources | None = None,
    *,
    limit: int = 20,
    offset: int = 0,
    role: str | None = None,
    type: str | None = None,
    branch_state: BranchState | None = None,
    session: str | None = None,
    cwd: str | None = None,
    label: str | None = None,
    tool: str | None = None,
    since: TimeBound | None = None,
    until: TimeBound | None = None,
    index_cache: IndexCache = None,
) -> SearchResult:
    """Searches the sessions of ``sources`` for ``query``.

    ``sources``: a session file, a directory (Pi's layout, or any tree of ``.jsonl`` files), a
    glob, or a list of them (default: :func:`default_source`, Pi's session folder). Local files
    only: object-store URLs raise :class:`SessionArgumentError`. ``limit``/``offset`` page the
    hits. Filters (all exact, combined with AND): ``role`` (``message.role``), ``type`` (the
    entry type), ``tool`` (a tool call's or result's tool name), ``branch_state``
    (``active``/``compacted``/``abandoned``), ``session`` (the header's id), ``cwd`` (the
    header's cwd), ``label`` (a label on the hit's path), ``since``/``until`` (inclusive
    bounds on the entry's timestamp: a ``datetime``, an ISO string or ms since the epoch).
    ``index_cache``: where the index lives (as :meth:`Session.open`'s; ``False``: in memory for
    this call).

    Returns a :class:`SearchResult`. Raises :class:`~sessiontree.errors.SearchQueryError` for a
    query that does not parse (one line), :class:`SessionArgumentError` for bad arguments,
    :class:`~sessiontree.errors.SearchIndexError` when the index cannot be written even after a
    rebuild.
    """
    from .fleet._sources import is_url, resolve_source

    if sources is None:
        sources = default_source()
    srcs = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    names: list[str] = []
    for s in srcs:
        text = os.fsdecode(os.fspath(s))
        if text.startswith("file://"):
            text = text[len("file://") :]
        if is_url(text):
            raise SessionArgumentError(f"search reads local session files; {text!r} is a URL")
        names.append(os.path.abspath(os.path.expanduser(text)))
    items = resolve_source(names) if names else []
    files = sorted({os.path.abspath(it.path) for it in items if it.key is None})
    return search_files(
        query,
        files,
        "\n".join(sorted(set(names))),
        limit=limit,
        offset=offset,
        role=role,
        type=type,
        branch_state=branch_state,
        session=session,
        cwd=cwd,
        label=label,
        tool=tool,
        since=since,
        until=until,
        index_cache=index_cache,
    )
