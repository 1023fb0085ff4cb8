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
from typing import Any, Sequence, Union

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
    engine: str = "local",
    address: str | None = None,
    num_cpus: int | None = None,
    shards: int | None = None,
) -> SearchResult:
    """Searches the sessions of ``sources`` for ``query``.

    ``sources``: a session file, a directory (Pi's layout, or any tree of ``.jsonl`` files), a
    glob, an object-store URL (``s3://bucket/prefix``, as ``stats`` reads: searched through
    local copies kept in the cache folder, ``docs/search.md``), or a list of them (default:
    :func:`default_source`, Pi's session folder). ``limit``/``offset`` page the
    hits. Filters (all exact, combined with AND): ``role`` (``message.role``), ``type`` (the
    entry type), ``tool`` (a tool call's or result's tool name), ``branch_state``
    (``active``/``compacted``/``abandoned``), ``session`` (the header's id), ``cwd`` (the
    header's cwd), ``label`` (a label on the hit's path), ``since``/``until`` (inclusive
    bounds on the entry's timestamp: a ``datetime``, an ISO string or ms since the epoch).
    ``index_cache``: where the index lives (as :meth:`Session.open`'s; ``False``: in memory for
    this call). ``engine``: ``"local"`` (one index, this process) or ``"ray"`` (one index per
    shard, each on the node holding its files, the query fanned out and the pages merged: the
    same hits as ``"local"``; ``address``/``num_cpus`` as the fleet's, ``shards`` how many,
    default the cluster's CPUs).

    Returns a :class:`SearchResult`; an object's hits name its URL. Raises
    :class:`~sessiontree.errors.SearchQueryError` for a query that does not parse (one line,
    before anything is read), :class:`SessionArgumentError` for bad arguments,
    :class:`~sessiontree.errors.SearchIndexError` when the index cannot be written even after a
    rebuild, ``SourceError`` (an ``OSError``) when a URL cannot be listed.
    """
    import time

    from ._local_sources import is_url, local_paths, walk_local_cached
    from .search_hits import check_query

    t0 = time.perf_counter()
    if engine not in ("local", "ray"):
        raise SessionArgumentError(f"engine must be local or ray, not {engine!r}")
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise SessionArgumentError(f"shards must be an int >= 1, not {shards!r}")
    check_query(query)  # a bad query fails here, before any listing or indexing
    if sources is None:
        sources = default_source()
    srcs = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    names: list[str] = []
    urls: list[str] = []
    for s in srcs:
        text = os.fsdecode(os.fspath(s))
        if text.startswith("file://"):
            text = text[len("file://") :]
        if is_url(text):
            urls.append(text)
            continue
        names.append(os.path.abspath(os.path.expanduser(text)))
    # local sources listed as the fleet lists them (``fleet._sources.resolve_source``), without
    # importing the fleet package: a search of local files is one light import
    # (a folder's walk is reused while none of its directories changed; its paths are
    # absolute already: the root is)
    found: set[str] = set()
    for n in names:
        if not any(c in n for c in "*?[") and not n.endswith(".jsonl") and os.path.isdir(n):
            found.update(walk_local_cached(n))
        else:
            found.update(os.path.abspath(p) for p in local_paths(n))
    files = sorted(found)
    remotes: list[Any] = []
    if urls:
        from .fleet._copies import Remote
        from .fleet._sources import object_stats

        remotes = [Remote(it, st, u) for u in sorted(set(urls)) for it, st in object_stats(u)]
    store_key = "\n".join(sorted(set(names) | set(urls)))
    kw: dict[str, Any] = dict(
        role=role,
        type=type,
        branch_state=branch_state,
        session=session,
        cwd=cwd,
        label=label,
        tool=tool,
        since=since,
        until=until,
    )
    if engine == "ray":
        from .fleet._search import search_ray
        from .index_cache import open_kwargs

        for k, v in (("limit", limit), ("offset", offset)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise SessionArgumentError(f"{k} must be an int >= 0, not {v!r}")
        hits, total, nxt = search_ray(
            query,
            files,
            remotes,
            store_key,
            cache=dict(open_kwargs(index_cache)),
            limit=limit,
            offset=offset,
            shards=shards,
            address=address,
            num_cpus=num_cpus,
            kw=kw,
        )
        return SearchResult(tuple(hits), total, nxt, (time.perf_counter() - t0) * 1000.0)
    if not remotes:
        return search_files(query, files, store_key, limit=limit, offset=offset, index_cache=index_cache, **kw)
    return _search_with_copies(query, files, remotes, store_key, limit, offset, index_cache, kw, t0)


def _search_with_copies(
    query: str,
    files: list[str],
    remotes: list[Any],
    store_key: str,
    limit: int,
    offset: int,
    index_cache: IndexCache,
    kw: dict[str, Any],
    t0: float,
) -> SearchResult:
    """The local engine over local files and objects' copies (``fleet/_copies.py``) in the
    cache folder (a temporary one, removed after, when the cache is off); hits name the URLs."""
    import dataclasses
    import shutil
    import tempfile
    import time

    from .fleet._copies import copies_of
    from .index_cache import resolve, usable

    found = resolve(index_cache)
    tmp = None
    if found is not None and usable(found):
        root = str(found)
    else:
        root = tmp = tempfile.mkdtemp(prefix="sessiontree-objects-")
    try:
        back = copies_of(remotes, root)
        every = sorted(set(files) | set(back))
        r = search_files(query, every, store_key, limit=limit, offset=offset, index_cache=index_cache, **kw)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    hits = tuple(dataclasses.replace(h, path=back[h.path]) if h.path in back else h for h in r.hits)
    return dataclasses.replace(r, hits=hits, took_ms=(time.perf_counter() - t0) * 1000.0)
