"""The typed answer of a search and the one call into the core's search (``rust/src/search/``).

:func:`sessiontree.search` (``searching.py``) resolves a store's sources into files;
:meth:`Session.search` searches its own file; both come here. ``docs/search.md`` has the rules.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass
from typing import Any, Literal, Sequence, Union

from . import _core
from .errors import SessionArgumentError
from .index_cache import IndexCache
from .index_cache import open_kwargs as _cache_kwargs

__all__ = [
    "BRANCH_STATES",
    "BranchState",
    "SearchHit",
    "SearchResult",
    "TimeBound",
    "check_query",
    "search_files",
    "shard_stats",
    "sum_stats",
]

BranchState = Literal["active", "compacted", "abandoned"]
#: The branch states a hit can have (``branch_state=`` accepts one of them).
BRANCH_STATES: tuple[str, ...] = ("active", "compacted", "abandoned")

#: A time bound: a ``datetime`` (naive ones are UTC), an ISO 8601 string, or ms since the epoch.
TimeBound = Union[_dt.datetime, str, int, float]


@dataclass(frozen=True)
class SearchHit:
    """One matching entry.

    ``path``/``session_id``: its session file and the header's id; ``entry_id``, ``type``,
    ``role`` (message entries), ``tool`` (the first tool call's name, or a tool result's tool),
    ``timestamp_ms`` (ms since the epoch, None when invalid), ``line`` (1-based) and ``offset``
    (the line's byte offset); ``snippet``: at most 160 characters of the entry's searchable text
    around the first match (newlines as spaces), ``spans`` the matches in it as character
    offsets ``(start, end)``; ``score`` (BM25); ``branch_state``: ``active`` (in the context
    ``build_context()`` gives), ``compacted`` (on the active path, before the latest
    compaction's first kept entry) or ``abandoned`` (on a branch the leaf left), with
    ``fork_point`` (the nearest ancestor on the active path) and ``summary_id`` (the branch
    summary covering it, if any) for abandoned hits; ``labels``: the labels on its path, root
    first. ``source_format``: ``pi``, or ``claude-code`` / ``codex`` for a file searched through
    its conversion to Pi (the entry, its id and tree are the converted session's; ``line`` and
    ``offset`` name the source line it came from, ``source_id`` that line's record id)."""

    path: str
    session_id: str | None
    entry_id: str | None
    type: str
    role: str | None
    tool: str | None
    timestamp_ms: int | None
    line: int
    offset: int
    snippet: str
    spans: tuple[tuple[int, int], ...]
    score: float
    branch_state: BranchState
    fork_point: str | None
    summary_id: str | None
    labels: tuple[str, ...]
    source_format: str = "pi"
    source_id: str | None = None

    def marked(self, left: str = "[", right: str = "]") -> str:
        """The snippet with each match between ``left`` and ``right``."""
        out: list[str] = []
        at = 0
        for a, b in self.spans:
            if a < at:
                continue
            out += [self.snippet[at:a], left, self.snippet[a:b], right]
            at = b
        out.append(self.snippet[at:])
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready values (``spans`` as lists)."""
        d = asdict(self)
        d["spans"] = [list(s) for s in self.spans]
        d["labels"] = list(self.labels)
        return d


@dataclass(frozen=True)
class SearchResult:
    """A page of hits in rank order (BM25, ties to the newer entry), and how many in all.

    ``total`` hits in all, ``next_offset`` the next page's ``offset`` (None: the last page),
    ``took_ms`` the time taken, indexing included."""

    hits: tuple[SearchHit, ...]
    total: int
    next_offset: int | None
    took_ms: float

    def to_dict(self) -> dict[str, Any]:
        """``{"hits": [...], "total", "next_offset", "took_ms"}``."""
        return {
            "hits": [h.to_dict() for h in self.hits],
            "total": self.total,
            "next_offset": self.next_offset,
            "took_ms": round(self.took_ms, 3),
        }


def _ms(v: TimeBound | None, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise SessionArgumentError(f"{name} must be a datetime, an ISO string or ms since the epoch, not {v!r}")
    if isinstance(v, (int, float)):
        if v != v or abs(v) > 8.64e15:
            raise SessionArgumentError(f"{name} is out of range: {v!r}")
        return int(v)
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return int(v.timestamp() * 1000)
    if isinstance(v, str):
        t = _core.date_parse(v)
        if t != t:
            raise SessionArgumentError(f"{name}: not a date: {v!r}")
        return int(t)
    raise SessionArgumentError(f"{name} must be a datetime, an ISO string or ms since the epoch, not {v!r}")


def _count(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SessionArgumentError(f"{name} must be an int >= 0, not {v!r}")
    return v


def _opt_str(v: Any, name: str) -> str | None:
    if v is not None and not isinstance(v, str):
        raise SessionArgumentError(f"{name} must be a str, not {v!r}")
    return v


def search_files(
    query: str,
    files: Sequence[str],
    store_key: str,
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
    stats: str | None = None,
) -> SearchResult:
    """:func:`sessiontree.search` over session files already resolved (absolute paths).

    The index is the one of the store named ``store_key``. ``stats``: when these files are one
    shard of a store, the store's BM25 statistics for the query (JSON: the shards'
    ``_core.search_shard_stats`` summed by ``_core.search_stats_sum``), so scores equal one
    index's over the whole store (``sessiontree/fleet/_search.py``); None: this index's own."""
    if not isinstance(query, str):
        raise SessionArgumentError(f"query must be a str, not {query!r}")
    if branch_state is not None and branch_state not in BRANCH_STATES:
        raise SessionArgumentError(f"branch_state must be one of {', '.join(BRANCH_STATES)}, not {branch_state!r}")
    kw: dict[str, Any] = dict(_cache_kwargs(index_cache))
    hits, total, next_offset, took = _core.search_store(
        query,
        list(files),
        store_key,
        limit=_count(limit, "limit"),
        offset=_count(offset, "offset"),
        role=_opt_str(role, "role"),
        etype=_opt_str(type, "type"),
        tool=_opt_str(tool, "tool"),
        branch_state=branch_state,
        session=_opt_str(session, "session"),
        cwd=_opt_str(cwd, "cwd"),
        label=_opt_str(label, "label"),
        since=_ms(since, "since"),
        until=_ms(until, "until"),
        stats=stats,
        **kw,
    )
    return SearchResult(hits=tuple(_hit(a, b) for a, b in hits), total=total, next_offset=next_offset, took_ms=took)


#: :class:`SearchHit`'s fields in the order of the core's two tuples per hit (``_core.search_store``)
_FIELDS_A = ("path", "session_id", "entry_id", "type", "role", "tool", "timestamp_ms", "line", "offset")
_FIELDS_B = (
    "snippet",
    "spans",
    "score",
    "branch_state",
    "fork_point",
    "summary_id",
    "labels",
    "source_format",
    "source_id",
)


def _hit(a: Sequence[Any], b: Sequence[Any]) -> SearchHit:
    """The :class:`SearchHit` of the core's tuples ``a`` and ``b``: the instance's fields set at
    once (a frozen dataclass's ``__init__`` sets its 18 fields one call each: a third of the
    Python side of a warm query); equal to ``SearchHit(...)`` of the same values."""
    h = object.__new__(SearchHit)
    d = h.__dict__
    d.update(zip(_FIELDS_A, a))
    d.update(zip(_FIELDS_B, b))
    d["spans"] = tuple(map(tuple, b[1]))
    d["labels"] = tuple(b[6])
    return h


def check_query(query: Any) -> None:
    """Checks that ``query`` parses, reading nothing.

    Raises :class:`~sessiontree.errors.SearchQueryError` (one line) when it does not,
    :class:`SessionArgumentError` when it is not a str."""
    if not isinstance(query, str):
        raise SessionArgumentError(f"query must be a str, not {query!r}")
    _core.search_match(query, "")


def shard_stats(query: str, files: Sequence[str], store_key: str, *, index_cache: IndexCache = None) -> str:
    """One shard's index brought up to date, and its BM25 statistics as JSON.

    The shard: ``files``, its index named ``store_key``. The statistics of ``query``'s terms
    (``rust/src/search/shard.rs``), to be summed over the shards (:func:`sum_stats`) and given to each shard's
    :func:`search_files` (``stats=``). Raises as :func:`search_files`."""
    check_query(query)
    kw: dict[str, Any] = dict(_cache_kwargs(index_cache))
    return _core.search_shard_stats(query, list(files), store_key, **kw)


def sum_stats(parts: Sequence[str]) -> str:
    """The sum of shards' statistics (:func:`shard_stats`' JSON), as JSON.

    Raises :class:`~sessiontree.errors.SearchIndexError` for one that does not parse."""
    return _core.search_stats_sum(list(parts))
