"""Every session in a store: stats and entry tables as Arrow/Parquet, and bulk compaction.

One API, two engines: ``engine="local"`` (default; a long-lived process pool on this machine,
nothing to start) and ``engine="ray"`` (Ray tasks over bundles of files running the same
per-file function, on ``ray.init()`` or an existing cluster ``address``). Both give the same rows in the same order and write the same
Parquet; DuckDB then answers questions over it (``docs/fleet.md``).

    >>> from sessiontree.fleet import session_stats            # doctest: +SKIP
    >>> table = session_stats("~/.pi/agent/sessions", parquet="stats.parquet")  # doctest: +SKIP

Sources: a directory (Pi's layout ``--<cwd>--/*.jsonl``, any depth), a glob, a list of paths,
or a filesystem URL (``s3://bucket/prefix``) read through ``pyarrow.fs`` (or an fsspec
filesystem passed as ``filesystem=``): objects are read into memory and opened with
:meth:`sessiontree.Session.from_bytes`, never spilled to temporary files.

Hostile stores never fail a job: a file that cannot be read or is not a Pi session becomes a
row whose ``error_kind`` says why (``not_found``, ``not_a_file`` for a directory or FIFO named
``*.jsonl``, ``unreadable`` for an I/O error or a symlink loop, ``not_a_session``,
``too_large`` over ``max_bytes``, ``error``); a session whose context Pi cannot build (a
``parentId`` cycle, content Pi throws on) has its other fields and ``context_error``.

Needs the ``fleet`` extra (``pip install 'sessiontree[fleet]'``: pyarrow, duckdb, ray[data]);
imported lazily, so the core keeps its own dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..index_cache import IndexCache

from .columns import ENTRY_COLUMNS, STATS_COLUMNS
from ._sources import FileSystemArg, Item, SourceArg, resolve_source

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import CompactionSettings
    from ._compact import compact_sessions, outcomes_schema
    from ._convert import convert_sessions
    from ._scrub import scrub_sessions

#: Names loaded on first use (``sessiontree stats`` needs neither bulk compaction nor scrubbing:
#: ~90 ms of imports less per process)
_LAZY = {
    "compact_sessions": "._compact",
    "outcomes_schema": "._compact",
    "scrub_sessions": "._scrub",
    "convert_sessions": "._convert",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "session_stats",
    "stats_columns",
    "StatsColumns",
    "entries_table",
    "compact_sessions",
    "scrub_sessions",
    "convert_sessions",
    "stats_schema",
    "entries_schema",
    "outcomes_schema",
    "resolve_source",
    "Item",
    "write_parquet",
    "path_text",
]


def _pa() -> Any:
    from ._arrow import wait_for_import

    wait_for_import()  # a background import of pyarrow (stats_columns(arrow_soon=True)) first
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "sessiontree.fleet needs pyarrow: pip install 'sessiontree[fleet]' (from a source checkout: pip install '.[fleet]')"
        ) from exc
    return pa


def stats_schema() -> Any:
    """The Arrow schema of :func:`session_stats` (one row per session file), built from the one
    column list :data:`sessiontree.fleet.columns.STATS_COLUMNS`.

    Times are UTC ``timestamp[ms]``; tokens are Pi's units (float64: Pi's sums can be NaN
    when a usage lacks a field); cost in dollars.

    * ``path``: the file path or object URL, as text (see :func:`path_text`: a byte of the name
      that is not UTF-8 is written ``\\xNN``); ``path_bytes``: the name's exact bytes (a local
      path as the OS gives it, ``os.fsencode``; an object URL in UTF-8). ``session_id``, ``cwd``, ``parent_session``
      (header ``parentSession`` as written), ``parent_session_id`` (that session's id when it
      is among the rows, else null), ``name`` (latest ``session_info``, Pi's
      ``getSessionName``).
    * ``created`` (header timestamp), ``modified`` (Pi's listing rule: last user/assistant
      message time, else created, else file time), ``file_modified`` (mtime), ``bytes``.
    * ``entries`` (lines holding entries, duplicates included), ``distinct_ids``,
      ``messages`` and ``messages_<role>`` (user, assistant, tool_result, bash_execution,
      custom), ``messages_other``, ``tool_calls`` (``toolCall`` blocks of assistant messages),
      ``compactions``, ``branch_summaries``, ``labels``, ``leaves`` (tree nodes without
      children: the branches), ``leaf_id``, ``leaf_type`` (``compaction`` when the session
      was compacted at its leaf).
    * ``active_path_length`` (entries root to leaf), ``context_messages``, ``context_tokens``
      (Pi's projected estimate of the context, ``estimateProjectedContextTokens``),
      ``should_compact`` (Pi's ``shouldCompact`` at ``context_window`` with the settings'
      reserve), ``context_window``, ``context_error`` (why the context could not be built).
    * ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
      ``total_tokens``, ``cost``: Pi's ``get_session_stats`` totals over the whole file,
      summaries included; ``summary_tokens``, ``summary_cost``: the compaction and branch
      summary part of them.
    * ``problems`` and ``problems_<kind>`` (one per scanner problem kind), ``problems_other``,
      ``needs_migration`` (a v1/v2 file).
    * ``source_format``: ``pi``, or ``claude-code`` / ``codex`` for a Claude Code transcript
      or a Codex rollout read as a Pi session converted in memory in the core
      (:func:`sessiontree.convert.to_pi_bytes`; its sidechains and subagents are not counted).
    * ``error_kind``, ``error``: set when the file could not be opened (then only ``path``,
      ``bytes`` and ``file_modified`` may be set).
    """
    pa = _pa()
    types = _arrow_types(pa)
    fields = [(name, types[kind]) for name, kind in STATS_COLUMNS]  # the one column list (fleet/columns.py)
    return pa.schema(fields)


def _arrow_types(pa: Any) -> dict[str, Any]:
    """The Arrow type of each type name of the column lists (``fleet/columns.py``)."""
    return {
        "string": pa.string(),
        "binary": pa.binary(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("ms", tz="UTC"),
    }


def entries_schema(scrub: bool = False) -> Any:
    """The Arrow schema of :func:`entries_table` (one row per entry, file order), built from
    the one column list :data:`sessiontree.fleet.columns.ENTRY_COLUMNS`.

    ``path``, ``path_bytes`` (as in :func:`stats_schema`), ``session_id``, ``entry_index`` (0-based, file order), ``entry_id``,
    ``parent_id`` (null when not a string), ``type``, ``role`` (messages), ``timestamp``
    (UTC ms), ``line`` (1-based), ``offset`` and ``bytes`` (the line's byte span), ``tokens``
    (Pi's estimate of the context messages the entry contributes), the entry's own usage
    (``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``, ``cost``:
    set for assistant/tool-result messages, compactions, branch summaries and usage entries),
    ``on_active_path``, ``label`` (the label on the entry, when a string), ``error_kind`` and
    ``error`` (one row with no entry for a file that could not be opened). With ``scrub``,
    also ``secrets``: how many secrets were replaced in the entry's line.
    """
    pa = _pa()
    if scrub:
        return pa.schema(list(entries_schema()) + [pa.field("secrets", pa.int64())])
    types = _arrow_types(pa)
    # the one column list (fleet/columns.py)
    return pa.schema([(name, types[kind]) for name, kind, _by in ENTRY_COLUMNS])


#: JavaScript's Date range (ms): a time outside it (a hostile ``timestamp: 1e300``) is null.
_JS_DATE_MAX = 8.64e15


def _ms_or_none(v: Any) -> int | None:
    if v is None or not isinstance(v, (int, float)) or v != v or abs(v) > _JS_DATE_MAX:
        return None
    return int(v)


def path_text(path: str) -> str:
    """A path as the text of a ``path`` column: the name's bytes decoded as UTF-8, a byte that
    is not UTF-8 written ``\\xNN`` (Python's ``backslashreplace``). ``path_bytes`` keeps the
    bytes themselves; a name that is valid UTF-8 is its own text."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def path_bytes(path: str) -> bytes:
    """The exact bytes of a ``path`` as listed: ``os.fsencode`` (a URL is text: its UTF-8)."""
    return os.fsencode(path)


def arrow_text(v: Any) -> Any:
    """A string for an Arrow ``string`` column: one that is not valid UTF-8 (a lone surrogate,
    from a non-UTF-8 file name in an error message or an ``\\ud800`` escape in the JSON) has
    those characters written ``\\udcNN``; anything else is returned as it is."""
    if not isinstance(v, str):
        return v
    try:
        v.encode("utf-8")
        return v
    except UnicodeEncodeError:
        return v.encode("utf-8", "backslashreplace").decode("utf-8")


def _table(rows: list[dict[str, Any]], schema: Any) -> Any:
    """``rows`` (dicts) as a table of ``schema`` (:func:`sessiontree.fleet._rows.row_columns`
    makes the values, :func:`_columns_table` the arrays)."""
    pa = _pa()
    kinds = tuple(
        (f.name, "timestamp" if pa.types.is_timestamp(f.type) else "string" if pa.types.is_string(f.type) else "other")
        for f in schema
    )
    from ._rows import row_columns

    return _columns_table(row_columns(rows, kinds), schema)


def _columns_table(cols: dict[str, list[Any]], schema: Any) -> Any:
    """A table of ``schema`` from one list of values per column, as
    :func:`sessiontree.fleet._rows.row_columns` makes them."""
    pa = _pa()
    from ._arrow import from_list  # buffers, not pa.array() on lists (that imports pandas)

    return pa.Table.from_arrays([from_list(pa, f.type, cols[f.name]) for f in schema], schema=schema)


class _Chunks:
    """A write-only file object for pyarrow's writer that hands what it is given to a generator
    (so the Parquet bytes stream into :func:`sessiontree.session.atomic_write`)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False
        self.pos = 0

    def write(self, data: Any) -> int:
        b = bytes(data)
        self.parts.append(b)
        self.pos += len(b)
        return len(b)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        """Nothing to do: what pyarrow wrote is already in ``parts``, handed on by :meth:`take`
        (durability is :func:`~sessiontree.session.atomic_write`'s fsync of the whole file)."""

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def take(self) -> list[bytes]:
        out, self.parts = self.parts, []
        return out


def _parquet_chunks(table: Any, row_group: int = 64 * 1024) -> Any:
    _pa()
    import pyarrow.parquet as pq

    sink = _Chunks()
    writer = pq.ParquetWriter(sink, table.schema, compression="zstd")
    try:
        for batch in table.to_batches(max_chunksize=row_group):
            writer.write_batch(batch)
            yield from sink.take()
    finally:
        writer.close()
    yield from sink.take()


def write_parquet(table: Any, path: str | os.PathLike[str]) -> None:
    """Write ``table`` to one Parquet file (zstd) through the package's atomic write
    (:func:`sessiontree.session.atomic_write`: a new ``O_EXCL`` temp file with a random name
    beside ``path``, fsynced, renamed over it): never through a planted symlink, never half a
    file. The bytes stream out row group by row group (no copy of the whole file in memory).

    Raises :class:`OSError` when it cannot be written (nothing is left behind)."""
    _write_parquet_summed(table, path)


def _write_parquet_summed(table: Any, path: str | os.PathLike[str]) -> str:
    """:func:`write_parquet`; returns the BLAKE2b-128 (hex) of the bytes written."""
    import hashlib

    from .. import session as _session

    h = hashlib.blake2b(digest_size=16)

    def summed() -> Any:
        for chunk in _parquet_chunks(table):
            h.update(chunk)
            yield chunk

    _session.atomic_write(Path(os.fspath(path)), summed())
    return h.hexdigest()


#: The saved-row kind of a Parquet stamp (:func:`sessiontree.index_cache.save_row`), and the
#: most bytes of Parquet a rerun reads back to check one (a larger file is just rewritten).
_STAMP_KIND = "parquet"
_STAMP_MAX_BYTES = 256 << 20


def _parquet_is_current(path: str | os.PathLike[str], key: str, cache: IndexCache) -> bool:
    """True when ``path`` is a regular file this package wrote for the rows whose digest is
    ``key`` and its bytes are still exactly those written: its stamp in the index cache (saved
    for the file's device, inode, size, mtime and ctime and for ``key``) names the BLAKE2b of
    the bytes, and the file read now has that sum and the same identity before and after the
    read. Anything else (no stamp, another file, a symlink, a FIFO, a changed byte, a read
    error) is False: the caller writes the file again."""
    import hashlib
    import stat as stat_mod

    from .. import index_cache as ic

    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return False
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size > _STAMP_MAX_BYTES:
            return False
        saved = ic.load_row(_STAMP_KIND, st, key, cache)
        want = saved.get("blake2b") if saved is not None else None
        if not isinstance(want, str):
            return False
        h = hashlib.blake2b(digest_size=16)
        left = st.st_size
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                return False  # shorter than it was: changed
            h.update(b)
            left -= len(b)
        if os.read(fd, 1):
            return False  # longer than it was: changed
        after = os.fstat(fd)
        same = (after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return same and h.hexdigest() == want
    except OSError:
        return False
    finally:
        os.close(fd)


def _stamp_parquet(path: str | os.PathLike[str], key: str, digest: str, cache: IndexCache) -> None:
    """Saves the stamp :func:`_parquet_is_current` checks for the file just written at
    ``path`` (its identity now, ``key``, the sum of the bytes written). A file replaced between
    the write and this stat gets a stamp its bytes do not match: the next run rewrites it."""
    from .. import index_cache as ic

    try:
        st = os.stat(os.fspath(path), follow_symlinks=False)
    except (OSError, ValueError):
        return
    import stat as stat_mod

    if stat_mod.S_ISREG(st.st_mode):
        ic.save_row(_STAMP_KIND, st, key, {"blake2b": digest}, cache)


def _resolve_parents(rows: list[dict[str, Any]]) -> None:
    """``parent_session_id``: the id of the session ``parent_session`` names, when that file
    is among the rows (matched by its path as written, its absolute path or its file name)."""
    by_path: dict[str, str] = {}
    by_name: dict[str, list[str]] = {}
    for r in rows:
        sid = r.get("session_id")
        if sid is None:
            continue
        p = r["path"]
        by_path[p] = sid
        if "://" not in p:
            by_path[os.path.abspath(p)] = sid
        by_name.setdefault(os.path.basename(p), []).append(sid)
    for r in rows:
        parent = r.get("parent_session")
        if not parent:
            continue
        sid = by_path.get(parent) or (by_path.get(os.path.abspath(parent)) if "://" not in parent else None)
        if sid is None:
            cands = by_name.get(os.path.basename(parent), [])
            sid = cands[0] if len(cands) == 1 else None
        r["parent_session_id"] = sid


def _entry_parts_table(parts: list[Any], schema: Any) -> Any:
    """One table of the per-session entry tables and error rows the workers made
    (:func:`sessiontree.fleet._rows.entry_rows`), in path order (then file order)."""
    pa = _pa()
    keyed = []
    for k, part in enumerate(parts):
        if isinstance(part, dict):
            keyed.append((part["path"], k, _table([part], schema)))
        elif part.num_rows:
            keyed.append((part.column("path_bytes")[0].as_py(), k, part))
    # a session table's path is its first row's; error rows carry theirs as written
    keyed = [(p if isinstance(p, str) else os.fsdecode(p), k, t) for p, k, t in keyed]
    keyed.sort(key=lambda x: (x[0], x[1]))
    if not keyed:
        return schema.empty_table()
    return pa.concat_tables([t for _, _, t in keyed])


def session_stats(
    source: SourceArg,
    *,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "local",
    context_window: int = 200_000,
    settings: CompactionSettings | None = None,
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    filesystem: FileSystemArg | None = None,
    max_bytes: int | None = None,
    progress: bool = False,
    index_cache: IndexCache = None,
) -> Any:
    """One row per session of ``source`` (:func:`stats_schema`), as a ``pyarrow.Table`` in
    path order; written to ``parquet`` too when given.

    Args:
        source: directory, glob, path list or URL (see :func:`resolve_source`).
        engine: ``"local"`` (process pool of ``workers`` processes; default: in this process
            below 4 GiB of work counted in bytes (each session's bytes plus 2 MiB), where
            starting a pool costs more than it saves, else one process per CPU, the sessions
            sent in batches of about equal bytes) or
            ``"ray"`` (Ray tasks over bundles of files; ``address`` of a running cluster, else
            ``ray.init`` with ``num_cpus``; ``workers`` bounds the tasks in flight).
        context_window, settings: for ``should_compact`` (Pi's ``shouldCompact``: context
            tokens > window - ``settings.reserve_tokens``).
        filesystem: a ``pyarrow.fs`` or fsspec filesystem for URLs/keys.
        max_bytes: files larger than this become ``too_large`` rows without being read.
        progress: a progress bar on stderr (local engine) or Ray's bars.
        index_cache: where sessions' saved indexes are read and written
            (:mod:`sessiontree.index_cache`: a folder, ``False``/``"off"``; None: the caller's
            ``$SESSIONTREE_INDEX_CACHE`` when set, else each worker's default folder on its own
            machine). Objects read from storage are never saved. Saved stats rows are checked
            here before any work is dispatched (see :func:`stats_columns`).
    """
    cols = stats_columns(
        source,
        engine=engine,
        context_window=context_window,
        settings=settings,
        workers=workers,
        address=address,
        num_cpus=num_cpus,
        filesystem=filesystem,
        max_bytes=max_bytes,
        progress=progress,
        index_cache=index_cache,
        arrow_soon=True,
    )
    table = cols.to_arrow()
    if parquet is not None:
        write_parquet(table, parquet)
    return table


class StatsColumns:
    """The stats rows of a store as Python lists, one per column of :func:`stats_schema`, in
    path order (what :func:`stats_columns` returns): no pyarrow until :meth:`to_arrow` or
    :meth:`write_parquet` is called. Values are those of the Arrow table's
    ``to_pylist()``, except timestamps: int milliseconds since the epoch (UTC), or None."""

    def __init__(self, cols: dict[str, list[Any]], order: list[int] | None, index_cache: IndexCache = "off") -> None:
        #: the columns in the workers' item order; ``order``: the row positions in path order
        #: (None: already in path order); ``index_cache``: where :meth:`write_parquet` keeps
        #: the stamp of the file it wrote
        self._cols = cols
        self._order = order
        self._cache = index_cache

    @property
    def num_rows(self) -> int:
        """How many rows (one per session file)."""
        return len(self._cols["path"])

    @property
    def column_names(self) -> list[str]:
        """The columns' names, in :func:`stats_schema` order."""
        return list(self._cols)

    def column(self, name: str) -> list[Any]:
        """The values of column ``name``, in path order. Raises KeyError for another name."""
        col = self._cols[name]
        return list(col) if self._order is None else [col[k] for k in self._order]

    def to_pylist(self) -> list[dict[str, Any]]:
        """One dict per row, in path order (timestamps as int ms)."""
        names = self.column_names
        cols = [self.column(n) for n in names]
        return [dict(zip(names, vals)) for vals in zip(*cols)]

    def to_arrow(self) -> Any:
        """The ``pyarrow.Table`` (:func:`stats_schema`), in path order."""
        pa = _pa()
        table = _columns_table(self._cols, stats_schema())
        if self._order is not None:
            table = table.take(pa.array(self._order, pa.int64()))
        return table

    def digest(self) -> str:
        """BLAKE2b-128 (hex) of the rows in path order, the schema and the package's version:
        equal digests, equal tables (floats by their exact ``repr``)."""
        import hashlib

        from .. import __version__

        h = hashlib.blake2b(digest_size=16)
        h.update(repr((__version__, STATS_COLUMNS, "zstd")).encode())
        for name in self.column_names:
            h.update(repr((name, self.column(name))).encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """Writes :meth:`to_arrow` to ``path`` (:func:`write_parquet`).

        With the index cache on, a file this method wrote for the same rows is not written
        again, and pyarrow is not imported: the file's stamp (its device, inode, size, mtime,
        ctime and the BLAKE2b of its bytes, saved in the cache with :meth:`digest`) is checked
        against the file as it is, every byte read back and summed
        (:func:`_parquet_is_current`); any difference and the file is written again."""
        key = self.digest()
        if _resolve_cache(self._cache) and _parquet_is_current(path, key, self._cache):
            return
        digest = _write_parquet_summed(self.to_arrow(), path)
        if _resolve_cache(self._cache):
            _stamp_parquet(path, key, digest, self._cache)


def _resolve_cache(index_cache: IndexCache) -> bool:
    """Whether ``index_cache`` names a folder (not off)."""
    from .. import index_cache as ic

    try:
        return ic.resolve(index_cache) is not None
    except Exception:  # an unusable setting: no stamp, the file is written as before
        return False


def stats_columns(
    source: SourceArg,
    *,
    engine: str = "local",
    context_window: int = 200_000,
    settings: CompactionSettings | None = None,
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    filesystem: FileSystemArg | None = None,
    max_bytes: int | None = None,
    progress: bool = False,
    index_cache: IndexCache = None,
    arrow_soon: bool = False,
) -> StatsColumns:
    """The rows of :func:`session_stats` as :class:`StatsColumns` (Python lists; arguments as
    :func:`session_stats`): what ``sessiontree stats`` prints its summary from without
    importing pyarrow.

    ``arrow_soon``: the caller will build the Arrow table or write Parquet next; when the work
    runs in other processes (a pool, Ray), this process imports pyarrow in a thread meanwhile
    (:func:`sessiontree.fleet._arrow.import_in_background`), so the import overlaps the
    workers' run. Nothing is imported when every row is saved or the work runs here.

    Saved rows are checked here, before any work is dispatched: each local file is stat-ed and
    its saved row read (:func:`sessiontree.fleet._rows.saved_stats_row`: same device, inode,
    size, mtime and ctime, same options); only the files without one go to the engine, so a
    rerun over an unchanged store starts no worker process and no Ray task."""
    from . import _engine, _rows
    from ..index_cache import for_workers

    if engine not in _engine.ENGINES:  # checked here too: a rerun may dispatch nothing
        raise ValueError(f"engine must be one of {_engine.ENGINES}, not {engine!r}")
    items = resolve_source(source, filesystem=filesystem)
    opts = _rows.Options(context_window, settings, max_bytes, for_workers(index_cache))
    opts.row_sums = True  # each file read once: the core sums the row's usage as it scans
    saved: dict[int, dict[str, Any]] = {}
    for k, it in enumerate(items):
        row = _rows.saved_stats_row(it, opts)
        if row is not None:
            saved[k] = row
    todo = [it for k, it in enumerate(items) if k not in saved]
    from .._progress import close_bar, progress_bar

    bar = progress_bar(len(items), bool(progress))
    batches: list[Any] = []
    try:
        if saved:
            bar(len(saved))
        if todo:
            batches = _engine.run(
                _rows.stats_batch,
                todo,
                opts,
                engine=engine,
                workers=workers,
                address=address,
                num_cpus=num_cpus,
                progress=bar,
                while_waiting=_import_arrow if arrow_soon else None,
            )
        else:  # every row saved: no pool, no task
            _engine.LAST_RUN.clear()
            _engine.LAST_RUN.update(engine=engine, workers=0, tasks=0, pool_start=0.0, busy=0.0, cpu=0.0, wall=0.0)
        _engine.LAST_RUN.update(saved=len(saved), dispatched=len(todo))
    finally:
        close_bar(bar)
    return _stats_columns(batches, saved, len(items), opts.index_cache)


def _import_arrow() -> None:
    from ._arrow import import_in_background

    import_in_background()


def _stats_columns(
    batches: list[Any], saved: dict[int, dict[str, Any]], n: int, index_cache: IndexCache = "off"
) -> StatsColumns:
    """One :class:`StatsColumns` of the workers' ``(columns, links)`` batches
    (:func:`sessiontree.fleet._rows.stats_batch`, for the items without a saved row, in item
    order) and the ``saved`` rows (by item position; ``n`` items in all): rows in item order,
    then sorted by path (stable), ``parent_session_id`` set (:func:`_resolve_parents`)."""
    from ._rows import row_columns
    from .columns import STATS_COLUMNS

    names = [name for name, _kind in STATS_COLUMNS]
    done: dict[str, list[Any]] = {name: [] for name in names}
    links: list[tuple[Any, Any, Any]] = []
    for part_cols, part_links in batches:
        for name in names:
            done[name].extend(part_cols[name])
        links.extend(part_links)
    if saved:
        rows = [saved[k] for k in sorted(saved)]
        mine = row_columns(rows)
        mine_links = [(r["path"], r.get("session_id"), r.get("parent_session")) for r in rows]
        # the saved rows back in their places among the computed ones (item order)
        take = [k in saved for k in range(n)]
        cols: dict[str, list[Any]] = {}
        for name in names:
            a, b = iter(mine[name]), iter(done[name])
            cols[name] = [next(a) if s else next(b) for s in take]
        a_links, b_links = iter(mine_links), iter(links)
        links = [next(a_links) if s else next(b_links) for s in take]
    else:
        cols = done
    order = sorted(range(len(links)), key=lambda k: links[k][0])  # stable: as rows.sort did
    rows_in_order = [{"path": links[k][0], "session_id": links[k][1], "parent_session": links[k][2]} for k in order]
    _resolve_parents(rows_in_order)
    parents: list[Any] = [None] * len(links)
    for k, r in zip(order, rows_in_order):
        parents[k] = arrow_text(r.get("parent_session_id"))
    cols["parent_session_id"] = parents
    return StatsColumns(cols, None if order == list(range(len(order))) else order, index_cache)


def entries_table(
    source: SourceArg,
    *,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    filesystem: FileSystemArg | None = None,
    max_bytes: int | None = None,
    progress: bool = False,
    index_cache: IndexCache = None,
    scrub: bool = False,
) -> Any:
    """One row per entry of every session of ``source`` (:func:`entries_schema`), in path then
    file order, as a ``pyarrow.Table``; written to ``parquet`` too when given. Arguments as
    :func:`session_stats`. With ``scrub``, each session is read from its scrubbed bytes
    (:func:`sessiontree.scrub.scrub_bytes`: labels and every other string column hold
    placeholders, never secrets) and a ``secrets`` column counts the secrets of each entry."""
    from . import _engine, _rows

    items = resolve_source(source, filesystem=filesystem)
    from ..index_cache import for_workers

    from ._rows import Options

    opts = Options(max_bytes=max_bytes, index_cache=for_workers(index_cache), scrub=scrub)
    rows = _engine.run(
        _rows.entries_rows,
        items,
        opts,
        engine=engine,
        workers=workers,
        address=address,
        num_cpus=num_cpus,
        progress=progress,
    )
    table = _entry_parts_table(rows, entries_schema(scrub))
    if parquet is not None:
        write_parquet(table, parquet)
    return table
