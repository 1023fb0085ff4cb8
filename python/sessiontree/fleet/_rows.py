"""The per-file functions every engine runs: one session in, its stats row (a dict) or its
entry rows out. Pure Python over the public :class:`~sessiontree.Session` (no pyarrow here,
so a worker imports only what it needs). A failure to read or open a file becomes a row with
``error_kind`` and ``error``; nothing raised here escapes to fail a job.
"""

from __future__ import annotations

import math
import os
import stat
import zlib
from typing import Any, Iterable, Protocol

from ..index_cache import IndexCache

from .._jsjson import JS_UNDEFINED, js_date_parse
from ..context import estimate_projected_context_tokens, should_compact
from ..entry_types import USAGE_TYPES
from ..errors import SessionCycleError, SessionError, SessionFormatError, SessionTreeError
from ..session import Session
from ..settings import CompactionSettings
from ..usage import UsageAccumulator, usage_totals_of_entries
from ._sources import Item
from .columns import PROBLEM_KINDS, ROLES  # their home: the column list
from .columns import core_entry_columns

__all__ = [
    "PROBLEM_KINDS",
    "open_item",
    "stats_row",
    "saved_stats_row",
    "entry_rows",
    "stats_rows",
    "stats_batch",
    "row_columns",
    "entries_rows",
]

#: the registry's types whose own ``usage`` is summed (``message`` entries: by role, below)
_USAGE_TYPES = tuple(t for t in USAGE_TYPES if t != "message")
_SUMMARY_TYPES = ("compaction", "branch_summary")


class Options:
    """What the per-file functions need besides the item (picklable)."""

    def __init__(
        self,
        context_window: int = 200_000,
        settings: CompactionSettings | None = None,
        max_bytes: int | None = None,
        index_cache: IndexCache = None,
        scrub: bool = False,
    ):
        self.context_window = int(context_window)
        self.settings = settings or CompactionSettings()
        self.max_bytes = max_bytes
        # resolved where the file is opened (a worker's own machine), not by the caller
        self.index_cache = index_cache
        #: open each session from its scrubbed bytes (``entries_table(scrub=True)``)
        self.scrub = bool(scrub)
        #: open each session with the core summing the stats row's usage in its scan (the stats
        #: row then reads no line of the file a second time)
        self.row_sums = False


class _Unopenable(SessionTreeError):
    """A source item that is not an openable session (internal: becomes an error row)."""

    def __init__(self, kind: str, message: str, size: int | None = None, mtime_ms: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.size = size
        self.mtime_ms = mtime_ms


class _Readable(Protocol):
    """A storage file object opened for reading: ``pyarrow.NativeFile`` or an fsspec file."""

    def read(self, nbytes: int = ..., /) -> bytes: ...


def _read_capped(fh: _Readable, max_bytes: int | None) -> bytes:
    """The bytes of an open object, at most ``max_bytes`` + 1 of them read (the limit holds on
    the bytes read, whatever a size check said before: the object may have been replaced).
    Raises TypeError when the filesystem's file returns something other than bytes."""
    data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    if not isinstance(data, bytes):
        raise TypeError(f"the filesystem's file read {type(data).__name__}, not bytes")
    return data


def _normalised_by_pyarrow(key: str) -> bool:
    """Whether pyarrow.fs would read another object than ``key`` names (or refuse it): it
    normalises paths, so an empty segment (``a//b``) is an error and ``.``/``..`` segments
    are resolved (``p/../x`` reads the bucket's ``x``, ``p/./y`` reads ``p/y``). Object keys are
    opaque strings: each is read as listed."""
    return any(seg in ("", ".", "..") for seg in key.split("/")[1:])


#: boto3 clients by the pyarrow S3FileSystem's settings (one per worker process)
_S3_CLIENTS: dict[str, Any] = {}


def _s3_client(fs: Any) -> Any:
    """A boto3 S3 client with the settings of a ``pyarrow.fs.S3FileSystem`` (endpoint, scheme,
    region, explicit credentials, anonymous); credentials it does not name come from boto3's
    own chain (the environment, ``~/.aws``), as pyarrow's do."""
    kw = dict(fs.__reduce__()[1][0])
    key = repr(sorted((k, str(v)) for k, v in kw.items()))
    client = _S3_CLIENTS.get(key)
    if client is not None:
        return client
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError:  # pragma: no cover - the fleet extra brings boto3
        raise _Unopenable(
            "unreadable", "reading an S3 key with empty, '.' or '..' segments exactly needs boto3 (the fleet extra)"
        ) from None
    if kw.get("role_arn"):
        raise _Unopenable("unreadable", "an S3 key with empty, '.' or '..' segments under role_arn: not supported")
    args: dict[str, Any] = {}
    if kw.get("endpoint_override"):
        args["endpoint_url"] = f"{kw.get('scheme') or 'https'}://{kw['endpoint_override']}"
    if kw.get("region"):
        args["region_name"] = kw["region"]
    if kw.get("access_key"):
        args["aws_access_key_id"] = kw["access_key"]
        args["aws_secret_access_key"] = kw.get("secret_key")
        if kw.get("session_token"):
            args["aws_session_token"] = kw["session_token"]
    if kw.get("anonymous"):
        args["config"] = Config(signature_version=UNSIGNED)
    client = boto3.client("s3", **args)
    _S3_CLIENTS[key] = client
    return client


def _read_s3_exact(item: Item, max_bytes: int | None) -> tuple[bytes, int, float | None]:
    """One S3 object by its exact key (through boto3, which sends the key as it is)."""
    from pyarrow import fs as pafs

    if not isinstance(item.fs, pafs.S3FileSystem):
        raise _Unopenable(
            "unreadable",
            f"{item.path}: a key with empty, '.' or '..' segments: this filesystem would read another object",
        )
    assert item.key is not None  # an object in a filesystem has a key
    bucket, key = item.key.split("/", 1)
    client = _s3_client(item.fs)
    args: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if max_bytes is not None:
        args["Range"] = f"bytes=0-{max_bytes}"  # one byte over: enough to tell it is too large
    try:
        resp = client.get_object(**args)
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") if hasattr(exc, "response") else None
        if code in ("NoSuchKey", "404", "NotFound"):
            raise _Unopenable("not_found", f"no such object: {item.path}") from None
        if code == "InvalidRange":  # an empty object
            return b"", 0, None
        raise _Unopenable("unreadable", f"{item.path}: {type(exc).__name__}: {exc}") from None
    modified = resp.get("LastModified")
    mtime = modified.timestamp() * 1000 if modified is not None else None
    body = resp["Body"]
    try:
        data = _read_capped(body, max_bytes)
    finally:
        body.close()
    if max_bytes is not None and len(data) > max_bytes:
        raise _Unopenable(
            "too_large", f"over max_bytes={max_bytes} (read {len(data)} bytes, then stopped)", None, mtime
        )
    return data, len(data), mtime


def _read_object(item: Item, max_bytes: int | None) -> tuple[bytes, int, float | None]:
    fs = item.fs
    assert item.key is not None  # an object in a filesystem has a key
    if hasattr(fs, "open_input_file") and _normalised_by_pyarrow(item.key):
        return _read_s3_exact(item, max_bytes)
    if hasattr(fs, "open_input_file"):  # pyarrow.fs
        from pyarrow import fs as pafs

        info = fs.get_file_info(item.key)
        mtime = info.mtime.timestamp() * 1000 if info.mtime is not None else None
        if info.type == pafs.FileType.NotFound:
            raise _Unopenable("not_found", f"no such object: {item.path}")
        if info.type != pafs.FileType.File:
            raise _Unopenable("not_a_file", f"not a file: {item.path}")
        if max_bytes is not None and info.size is not None and info.size > max_bytes:
            raise _Unopenable("too_large", f"{info.size} bytes, over max_bytes={max_bytes}", info.size, mtime)
        with fs.open_input_stream(item.key) as fh:
            data = _read_capped(fh, max_bytes)
    else:  # fsspec
        info = fs.info(item.key)
        size = info.get("size")
        mtime = None
        if info.get("type") == "directory":
            raise _Unopenable("not_a_file", f"not a file: {item.path}")
        if max_bytes is not None and size is not None and size > max_bytes:
            raise _Unopenable("too_large", f"{size} bytes, over max_bytes={max_bytes}", size, None)
        with fs.open(item.key, "rb") as fh:
            data = _read_capped(fh, max_bytes)
    if max_bytes is not None and len(data) > max_bytes:
        raise _Unopenable(
            "too_large", f"over max_bytes={max_bytes} (read {len(data)} bytes, then stopped)", None, mtime
        )
    return data, len(data), mtime


def _check_not_empty(s: Session, item: Item, size: int, mtime: float | None) -> None:
    """An empty file (or one of blank lines: no header) is no session: Pi would start a new one
    with a random id, the caller's cwd and "now" as its times, all invented."""
    if s.file_header is None:
        s.close()
        raise _Unopenable("empty", f"{item.path}: empty file (no session header)", size, mtime)


def open_item(item: Item, opts: Options) -> tuple[Session, int, float | None]:
    """``(session, bytes, file mtime ms)`` for one item; raises :class:`_Unopenable`. A Claude
    Code transcript or a Codex rollout is converted to Pi in memory (:func:`open_item_as`)."""
    s, size, mtime, _fmt = open_item_as(item, opts)
    return s, size, mtime


def _converted(data: bytes, item: Item, exc: SessionFormatError) -> tuple[Session, str]:
    """``data`` (not a Pi session: ``exc``) as a Pi session converted in memory in the core
    (:func:`sessiontree.convert.to_pi_bytes`) and its format; ``exc`` again when the bytes
    are no Claude Code transcript or Codex rollout either."""
    # the core's conversion through session/ (as sessiontree.convert.to_pi_bytes calls it; the
    # convert module imports the fleet for convert_all, so the fleet does not import it)
    from ..errors import UnrecognisedFormatError
    from ..session import convert_bytes

    try:
        pi, report = convert_bytes(bytes(data), item.path, "auto")
    except UnrecognisedFormatError:
        raise exc from None
    if report["source_format"] == "pi":
        raise exc
    return Session.from_bytes(pi, name=item.path), str(report["source_format"])


def open_item_as(item: Item, opts: Options) -> tuple[Session, int, float | None, str]:
    """:func:`open_item` and the file's format: ``"pi"``, or ``"claude-code"`` / ``"codex"``
    for a file converted to Pi in memory (no temporary file)."""
    try:
        if item.fs is not None:
            try:
                data, size, mtime = _read_object(item, opts.max_bytes)
            except (_Unopenable, SessionError):
                raise
            except Exception as exc:  # a storage client's error (ArrowInvalid, botocore...): a row
                raise _Unopenable("unreadable", f"{item.path}: {type(exc).__name__}: {exc}") from None
            fmt = "pi"
            try:
                s = Session.from_bytes(data, name=item.path, _row_sums=getattr(opts, "row_sums", False))
            except SessionFormatError as exc:
                s, fmt = _converted(data, item, exc)
            _check_not_empty(s, item, size, mtime)
            return s, size, mtime, fmt
        try:
            st = os.stat(item.path)  # follows symlinks: a loop is ELOOP, a dangling one ENOENT
        except FileNotFoundError:
            raise _Unopenable("not_found", f"no such file: {item.path}") from None
        if not stat.S_ISREG(st.st_mode):
            what = (
                "a directory"
                if stat.S_ISDIR(st.st_mode)
                else "a FIFO"
                if stat.S_ISFIFO(st.st_mode)
                else "not a regular file"
            )
            raise _Unopenable("not_a_file", f"{item.path}: {what}")
        mtime = st.st_mtime * 1000
        if opts.max_bytes is not None and st.st_size > opts.max_bytes:
            raise _Unopenable("too_large", f"{st.st_size} bytes, over max_bytes={opts.max_bytes}", st.st_size, mtime)
        fmt = "pi"
        try:
            s = Session.open(
                item.path, index_cache=getattr(opts, "index_cache", None), _row_sums=getattr(opts, "row_sums", False)
            )
        except SessionFormatError as exc:
            with open(item.path, "rb") as fh:
                data = fh.read() if opts.max_bytes is None else fh.read(opts.max_bytes + 1)
            if opts.max_bytes is not None and len(data) > opts.max_bytes:
                raise _Unopenable("too_large", f"over max_bytes={opts.max_bytes}", len(data), mtime) from None
            s, fmt = _converted(data, item, exc)
            del data
            _check_not_empty(s, item, st.st_size, mtime)
            return s, st.st_size, mtime, fmt
        if opts.max_bytes is not None and s.indexed_bytes > opts.max_bytes:  # grew after the check
            size = s.indexed_bytes
            s.close()
            raise _Unopenable("too_large", f"{size} bytes, over max_bytes={opts.max_bytes}", size, mtime)
        _check_not_empty(s, item, s.indexed_bytes, mtime)
        return s, s.indexed_bytes, mtime, fmt
    except _Unopenable:
        raise
    except SessionFormatError as exc:
        raise _Unopenable("not_a_session", str(exc)) from None
    except OSError as exc:
        raise _Unopenable("unreadable", f"{item.path}: {exc.strerror or exc}") from None
    except SessionError as exc:
        raise _Unopenable("error", str(exc)) from None


def _num(v: Any) -> float | None:
    """A number for an outcome/stats row column: ``None`` stays ``None`` (null), anything else
    becomes a ``float`` (so ``3`` and ``3.0`` write the same). ``_compact.py`` uses it too."""
    return None if v is None else float(v)


def _ms(value: Any) -> float | None:
    t = js_date_parse(value)
    return t if t == t and not math.isinf(t) else None


def _last_activity_ms(s: Session, n: int, types: list[Any], roles: list[Any]) -> float | None:
    """Pi's ``modified`` rule as :func:`sessiontree.listing.session_info` applies it: the last
    user or assistant message with ``content`` (its ``message.timestamp`` when a number, else
    the entry's timestamp). The index gives roles; only the candidate entries are parsed."""
    for i in range(n - 1, -1, -1):
        if types[i] != "message" or roles[i] not in ("user", "assistant"):
            continue
        raw = s.entry_at(i).raw
        m = raw.get("message") if isinstance(raw, dict) else None
        if not isinstance(m, dict) or "content" not in m:
            continue
        ts = m.get("timestamp")
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            return float(ts)
        t = _ms(raw.get("timestamp", JS_UNDEFINED))
        if t is not None:
            return t
    return None


def _error_row(item: Item, exc: _Unopenable) -> dict[str, Any]:
    return {
        "path": item.path,
        "error_kind": exc.kind,
        "error": str(exc),
        "bytes": exc.size,
        "file_modified": exc.mtime_ms,
    }


def _stats_key(opts: Options) -> str:
    """What a saved stats row depends on besides the file: the package version, the column list
    (a column added without a version bump, as in a dev build, must not be served as null from
    rows saved before it) and the options."""
    from .. import __version__
    from . import columns

    names = ",".join(columns.column_names(columns.STATS_COLUMNS))
    return f"{__version__}|{zlib.crc32(names.encode()):08x}|{opts.context_window}|{opts.settings!r}|{opts.max_bytes}"


def _local_stat(item: Item) -> os.stat_result | None:
    if item.fs is not None or item.key is not None:
        return None
    try:
        st = os.stat(item.path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _saved_stats_row(item: Item, opts: Options) -> tuple[os.stat_result | None, dict[str, Any] | None]:
    """``(stat, saved row)`` of a local file: the ``os.stat`` a new row is saved under (None for
    an object in storage, a file that cannot be stat-ed, or one below
    :func:`sessiontree.index_cache.min_bytes`) and the row saved for exactly that state of the
    file with these options (None when there is none or it does not match)."""
    from .. import index_cache

    st = _local_stat(item)
    if st is None or st.st_size < index_cache.min_bytes(getattr(opts, "index_cache", None)):
        return None, None  # a small file: computing its row costs about what reading a saved one does
    saved = index_cache.load_row("stats", st, _stats_key(opts), getattr(opts, "index_cache", None))
    if saved is not None:
        saved["path"] = item.path  # the same file under another name (a hard link)
    return st, saved


def saved_stats_row(item: Item, opts: Options) -> dict[str, Any] | None:
    """The saved stats row of ``item`` when one matches the file as it is now (see
    :func:`stats_row`), else None. What a job checks before it dispatches any work: a rerun
    over an unchanged store starts no worker."""
    return _saved_stats_row(item, opts)[1]


def stats_row(item: Item, opts: Options) -> dict[str, Any]:
    """One session's stats row (see :func:`sessiontree.fleet.stats_schema` for the fields).

    A local file's row (files of at least :func:`sessiontree.index_cache.min_bytes`) is saved in
    the index cache (:func:`sessiontree.index_cache.save_row`) and reused while the file is unchanged (same device, inode, size, mtime and ctime in ns)
    and the options are the same: a rerun over an unchanged store reads no session file."""
    from .. import index_cache

    cache = getattr(opts, "index_cache", None)
    st, saved = _saved_stats_row(item, opts)
    if saved is not None:
        return saved
    try:
        s, size, mtime, fmt = open_item_as(item, opts)
    except _Unopenable as exc:
        return _error_row(item, exc)
    try:
        row = _stats_of(s, item, size, mtime, opts)
        row["source_format"] = fmt
        if st is not None and row.get("error_kind") is None:
            index_cache.save_row("stats", st, _stats_key(opts), row, cache)
        return row
    except Exception as exc:  # never fail the job: a row with the problem instead
        return {
            "path": item.path,
            "error_kind": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "bytes": size,
            "file_modified": mtime,
        }


def _stats_of(s: Session, item: Item, size: int, mtime: float | None, opts: Options) -> dict[str, Any]:
    """The row of an open session: counts, usage sums, tool calls and the last activity from
    the core in one batch call (:meth:`Session.fleet_columns`, no entry parsed in Python);
    entries the core leaves undecided are summed by :mod:`sessiontree.usage`'s rules
    (:func:`_usage_by_rules`); the context estimate is :func:`_context`'s."""
    cols = s.fleet_columns()
    n = len(s)
    if cols["undecided"]:
        table = s.entry_table()
        usage, summary, tool_calls = _usage_by_rules(s, table.type, table.role)
    else:
        usage, summary, tool_calls = cols["totals"], cols["summary_totals"], cols["tool_calls"]
    problems = {k: 0 for k in PROBLEM_KINDS}
    problems_other = 0
    found = s.problems
    npro = len(found)
    for p in found:
        if p.kind in problems:
            problems[p.kind] += 1
        else:
            problems_other += 1
    # leaves: tree nodes without children (Pi getTree)
    leaves = len(s.tree_leaves())
    header = s.header
    leaf = s.leaf_entry
    by_role = cols["messages_by_role"]
    row: dict[str, Any] = {
        "path": item.path,
        "session_id": header.get("id") if isinstance(header.get("id"), str) else None,
        "cwd": header.get("cwd") if isinstance(header.get("cwd"), str) else None,
        "parent_session": header.get("parentSession") if isinstance(header.get("parentSession"), str) else None,
        "name": s.session_name,
        "created": _ms(header.get("timestamp", JS_UNDEFINED)),
        "modified": None,
        "file_modified": mtime,
        "bytes": size,
        "entries": n,
        "distinct_ids": s.entry_count(),
        "messages": cols["messages"],
        **{f"messages_{col}": by_role[k] for k, (_, col) in enumerate(ROLES)},
        "messages_other": by_role[len(ROLES)],
        "tool_calls": tool_calls,
        "compactions": cols["compactions"],
        "branch_summaries": cols["branch_summaries"],
        "labels": len(s.labels),
        "leaves": leaves,
        "leaf_id": s.leaf_id,
        "leaf_type": leaf.type if leaf is not None else None,
        "active_path_length": cols["path_length"],
        "context_messages": None,
        "context_tokens": None,
        "should_compact": None,
        "context_window": opts.context_window,
        "context_error": None,
        "input_tokens": usage[0],
        "output_tokens": usage[1],
        "cache_read_tokens": usage[2],
        "cache_write_tokens": usage[3],
        "total_tokens": usage[4],
        "cost": usage[5],
        "summary_tokens": summary[4],
        "summary_cost": summary[5],
        "problems": npro,
        **{f"problems_{k}": v for k, v in problems.items()},
        "problems_other": problems_other,
        "needs_migration": bool(s.needs_migration),
        "error_kind": None,
        "error": None,
    }
    if cols["last_activity_undecided"] is not None:
        table = s.entry_table()
        last = _last_activity_ms(
            s, n, table.type, [r if t == "message" else None for t, r in zip(table.type, table.role)]
        )
    else:
        last = cols["last_activity"]
    row["modified"] = last if last is not None and last > 0 else row["created"] if row["created"] is not None else mtime
    should: bool | None
    err: str | None
    if cols["context"] is not None:  # the core's estimate; Pi's shouldCompact over it
        tokens, nmsg = cols["context"]
        should, err = bool(should_compact(tokens, opts.context_window, opts.settings)), None
    else:
        tokens, should, err, nmsg = _context(s, opts)
    row["context_messages"] = nmsg
    row["context_tokens"] = _num(tokens)
    row["should_compact"] = should
    row["context_error"] = err
    return row


def _usage_by_rules(s: Session, types: list[Any], index_roles: list[Any]) -> tuple[list[Any], list[Any], int]:
    """Usage totals (all entries; summaries only) and tool calls by the Python rules
    (:class:`sessiontree.usage.UsageAccumulator`), for a session whose lines the core left
    undecided: only the entries that carry usage are parsed, one at a time."""
    usage_acc = UsageAccumulator(skip_missing=True)
    summary_acc = UsageAccumulator(skip_missing=True)
    tool_calls = 0
    for i, t in enumerate(types):
        role = index_roles[i] if t == "message" else None
        if not (t in _USAGE_TYPES or role in ("assistant", "toolResult")):
            continue
        r = s.entry_at(i).raw
        usage_acc.add((r,))
        if t in _SUMMARY_TYPES:
            summary_acc.add((r,))
        elif role == "assistant":
            m = r.get("message") if isinstance(r, dict) else None
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                tool_calls += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "toolCall")
        del r

    def six(u: Any) -> list[Any]:
        return [_num(u.input), _num(u.output), _num(u.cache_read), _num(u.cache_write), _num(u.total), _num(u.cost)]

    return six(usage_acc.totals()), six(summary_acc.totals()), tool_calls


def _context(s: Session, opts: Options) -> tuple[Any, bool | None, str | None, int | None]:
    """``(context tokens, should_compact, error, context messages)``: Pi's projected estimate
    of the current context (``estimateProjectedContextTokens`` over ``buildSessionContext``)
    and ``shouldCompact`` at ``opts.context_window``. Builds the context from the entries it
    needs (after the latest compaction); the path's other entries are read from the index
    only (ids and types)."""
    try:
        path = s.context_table()
        ctx = s.build_context()
        light = []
        for i, eid, t in zip(path.index, path.id, path.type):
            if eid is not None:
                light.append({"id": eid, "type": t} if t is not None else {"id": eid})
            else:  # a missing or non-string id: the raw entry, as Pi compares it
                light.append(s.entry_at(i).raw)
        tokens = estimate_projected_context_tokens(ctx.messages, ctx.sources, light).tokens
        return tokens, bool(should_compact(tokens, opts.context_window, opts.settings)), None, len(ctx.messages)
    except SessionCycleError as exc:
        return None, None, f"cycle: {exc}", None
    except (SessionError, ValueError) as exc:  # Pi throws building this context (ContextError...)
        return None, None, str(exc) or type(exc).__name__, None


def context_estimate(s: Session, opts: Options) -> tuple[Any, bool | None, str | None]:
    """``(context tokens, should_compact, error)`` of a session (see :func:`_context`)."""
    tokens, should, err, _n = _context(s, opts)
    return tokens, should, err


def stats_rows(items: Iterable[Item], opts: Options) -> list[dict[str, Any]]:
    """The stats rows of ``items`` (dicts, in item order)."""
    return [stats_row(it, opts) for it in items]


def stats_batch(items: Iterable[Item], opts: Options) -> list[Any]:
    """What a worker sends back for a batch of ``items``: one ``(columns, links)`` pair, the
    batch's stats rows as columns (:func:`row_columns`: one list per column of
    :data:`~sessiontree.fleet.columns.STATS_COLUMNS`, item order, ``parent_session_id`` not
    yet set: it needs every row) and, per row, ``(path, session_id, parent_session)`` as the
    rows hold them (what :func:`sessiontree.fleet._resolve_parents` matches). Plain lists
    travel back (one pickle per batch, not a dict per session), and no pyarrow: a worker
    imports neither it nor numpy (~0.17 s of CPU each); the parent builds the Arrow table only
    when one is asked for."""
    rows = stats_rows(items, opts)
    links = [(r["path"], r.get("session_id"), r.get("parent_session")) for r in rows]
    return [(row_columns(rows), links)]


def row_columns(rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...] | None = None) -> dict[str, list[Any]]:
    """``rows`` as one list per column of ``columns`` (default
    :data:`~sessiontree.fleet.columns.STATS_COLUMNS`), holding what the Arrow column holds:
    ``path`` as text (:func:`sessiontree.fleet.path_text`) and ``path_bytes`` its bytes, a
    ``timestamp`` as int ms UTC or None (outside JavaScript's Date range: None), a ``string``
    valid UTF-8 (:func:`sessiontree.fleet.arrow_text`), a missing field None. Pure Python
    (no pyarrow); :func:`sessiontree.fleet._table` wraps the lists as Arrow."""
    from . import _ms_or_none, arrow_text, path_bytes, path_text
    from .columns import STATS_COLUMNS

    cols: dict[str, list[Any]] = {}
    for name, kind in STATS_COLUMNS if columns is None else columns:
        if name == "path_bytes":
            cols[name] = [path_bytes(r["path"]) for r in rows]
        elif name == "path":
            cols[name] = [path_text(r["path"]) for r in rows]
        elif kind == "timestamp":
            cols[name] = [_ms_or_none(r.get(name)) for r in rows]
        elif kind == "string":
            cols[name] = [arrow_text(r.get(name)) for r in rows]
        else:
            cols[name] = [r.get(name) for r in rows]
    return cols


def entry_rows(item: Item, opts: Options) -> list[Any]:
    """The entry table of one session (see :func:`sessiontree.fleet.entries_schema`): a list
    holding one ``pyarrow.Table`` made from the core's columns, or, for a file that cannot be
    opened, one row dict with ``error_kind`` and no entry."""
    secrets: dict[int, int] | None = None
    shifts = None
    try:
        s, _size, _mtime = open_item(item, opts)
        if opts.scrub:
            s, secrets, shifts = open_scrubbed(_item_bytes(item, s), item.path)
    except _Unopenable as exc:
        return [{"path": item.path, "error_kind": exc.kind, "error": str(exc)}]
    except OSError as exc:
        return [{"path": item.path, "error_kind": "unreadable", "error": f"{item.path}: {exc.strerror or exc}"}]
    try:
        return [_entries_of(s, item, secrets, shifts)]
    except Exception as exc:
        return [{"path": item.path, "error_kind": "error", "error": f"{type(exc).__name__}: {exc}"}]


def _line_lengths(data: bytes) -> Any:
    from array import array

    return array("q", map(len, data.split(b"\n")))


def open_scrubbed(data: bytes, name: str, replay: str = "keep") -> tuple[Session, dict[int, int], Any]:
    """A read-only session over the scrubbed ``data``, its secrets per line (1-based), and the
    shifts that map the scrubbed bytes back to ``data``: None when no line changed, else
    ``(start, length)``, two ``array('q')`` indexed by line - 1: what to add to a scrubbed
    line's offset and byte count to address the same line of ``data`` (a scrub keeps the lines
    and their order, so line ``k`` is line ``k`` in both)."""
    from ..scrub import scrub_bytes

    clean, report = scrub_bytes(data, replay=replay)
    per_line: dict[int, int] = {}
    for f in report.findings:
        per_line[f.line] = per_line.get(f.line, 0) + 1
    shifts = None
    if report.lines_changed:
        from array import array
        from itertools import accumulate

        a, b = _line_lengths(data), _line_lengths(clean)
        length = array("q", [x - y for x, y in zip(a, b)])
        start = array("q", [0])
        start.extend(accumulate(length))
        shifts = (start, length)
    return Session.from_bytes(clean, name=name), per_line, shifts


def _item_bytes(item: Item, opened: Session) -> bytes:
    """The bytes of an item already checked by :func:`open_item` (then closed)."""
    opened.close()
    if item.fs is not None:
        return _read_object(item, None)[0]
    with open(item.path, "rb") as fh:
        return fh.read()


#: entry-table columns the core gives as buffers (their Arrow types from the schema)
_CORE_COLUMNS = core_entry_columns()  # the one list: fleet/columns.py
_USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost")


def _patched(pa: Any, typ: Any, n: int, col: tuple[Any, ...], fixes: dict[int, Any]) -> Any:
    """A float64 core column with the values at ``fixes`` (position -> float or None) set."""
    from array import array

    values, _data, valid, _nulls = col
    vals = array("d")
    vals.frombytes(values)
    ok = [True] * n if valid is None else [bool(valid[i >> 3] >> (i & 7) & 1) for i in range(n)]
    for i, v in fixes.items():
        vals[i] = 0.0 if v is None else float(v)
        ok[i] = v is not None
    from ._arrow import validity

    bits, nulls = validity(ok)
    return pa.Array.from_buffers(
        typ, n, [None if bits is None else pa.py_buffer(bits), pa.py_buffer(vals)], null_count=nulls
    )


def _entries_of(s: Session, item: Item, secrets: dict[int, int] | None = None, shifts: Any = None) -> Any:
    """One session's entry table (``pyarrow.Table``, :func:`sessiontree.fleet.entries_schema`)
    from the core's columns (:meth:`Session.fleet_columns` with ``per_entry``), wrapped
    without a copy. Entries the core leaves undecided get their usage from
    :mod:`sessiontree.usage` and their token estimate from :meth:`Session.entry_metrics`.
    ``shifts`` (from :func:`._scrub.open_scrubbed`): ``offset`` and ``bytes`` are moved back
    from the scrubbed bytes to the original file's."""
    import pyarrow as pa

    from . import _arrow, entries_schema, path_bytes, path_text

    schema = entries_schema(secrets is not None)
    # a label is any JSON value in the file: the column holds string labels only
    from . import arrow_text

    labels = [(k, arrow_text(v)) for k, v in s.labels.items() if isinstance(k, str) and isinstance(v, str)]
    labels = [(k, v) for k, v in labels if _utf8(k)]
    cols = s.fleet_columns(per_entry=True, labels=labels, columns=_CORE_COLUMNS)
    n = cols["n"]
    if n == 0:
        return schema.empty_table()
    core = cols["columns"]
    sid = s.session_id if isinstance(s.session_id, str) else None
    arrays: dict[str, Any] = {
        "path": _arrow.repeated(pa, pa.string(), path_text(item.path), n),
        "path_bytes": _arrow.repeated(pa, pa.binary(), path_bytes(item.path), n),
        "session_id": _arrow.repeated(pa, pa.string(), arrow_text(sid), n),
        "entry_index": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(_arange(n))], null_count=0),
        "on_active_path": pa.Array.from_buffers(
            pa.bool_(), n, [None, pa.py_buffer(core["on_active_path"])], null_count=0
        ),
        "error_kind": _arrow.repeated(pa, pa.string(), None, n),
        "error": _arrow.repeated(pa, pa.string(), None, n),
    }
    fixes: dict[str, dict[int, Any]] = {}
    for i in cols["undecided"]:
        u = usage_totals_of_entries([s.entry_at(i).raw], skip_missing=True)
        for name, v in zip(_USAGE_COLUMNS, (u.input, u.output, u.cache_read, u.cache_write, u.cost)):
            fixes.setdefault(name, {})[i] = _num(v)
    if cols["tokens_undecided"]:
        idx = cols["tokens_undecided"]
        fixes["tokens"] = dict(zip(idx, s.entry_metrics(idx).tokens))
    if shifts is not None:
        _unshift(core, n, shifts)
    for name in _CORE_COLUMNS:
        typ = schema.field(name).type
        if name in fixes:
            arrays[name] = _patched(pa, typ, n, core[name], fixes[name])
        else:
            arrays[name] = _arrow.from_core(pa, typ, n, core[name])
    if secrets is not None:
        from array import array

        line = array("q")
        line.frombytes(core["line"][0])
        arrays["secrets"] = pa.Array.from_buffers(
            pa.int64(), n, [None, pa.py_buffer(array("q", [secrets.get(k, 0) for k in line]))], null_count=0
        )
    return pa.Table.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _unshift(core: dict[str, Any], n: int, shifts: Any) -> None:
    """``offset`` and ``bytes`` of a scrubbed session's entries made the original file's (by
    line: a scrub keeps every line, in order)."""
    from array import array

    start, length = shifts
    line, off, size = array("q"), array("q"), array("q")
    line.frombytes(core["line"][0])
    off.frombytes(core["offset"][0])
    size.frombytes(core["bytes"][0])
    for i in range(n):
        k = line[i] - 1
        if 0 <= k < len(length):
            off[i] += start[k]
            size[i] += length[k]
    for name, values in (("offset", off), ("bytes", size)):
        core[name] = (values.tobytes(),) + tuple(core[name][1:])


def _utf8(v: str) -> bool:
    try:
        v.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _arange(n: int) -> Any:
    from array import array

    return array("q", range(n))


def entries_rows(items: Iterable[Item], opts: Options) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for it in items:
        out.extend(entry_rows(it, opts))
    return out
