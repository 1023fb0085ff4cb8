"""Scrubbing a whole store: ``scrub_sessions`` and the scrubbed opening behind
``entries_table(scrub=True)``, over the public :mod:`sessiontree.scrub` API."""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import Path
from typing import Any, Callable

from ..errors import OutputPathError, SessionArgumentError, SessionFormatError, SessionTreeError
from ..scrub import scrub_bytes, scrub_file
from ..writer import atomic_write
from ._sources import FileSystemArg, Item, SourceArg, resolve_source


def _relative(item: Item, base: str | None) -> str:
    """Where ``item`` goes below the output directory: its path below ``base`` (the items'
    common directory), without any ``..`` or absolute part (a hostile key cannot escape)."""
    p = item.key if item.fs is not None else os.path.abspath(item.path)
    p = str(p).replace("\\", "/")
    if base is not None and item.fs is None:
        p = os.path.relpath(p, base)
    parts = [x for x in p.split("/") if x not in ("", ".", "..")]
    return "/".join(parts) or "session.jsonl"


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` resolves to ``folder`` or below it."""
    real = os.path.realpath(path)
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def _open_dir(parent: int, name: str) -> int:
    """Open (making it when missing) the folder ``name`` in the open folder ``parent`` without
    following a symbolic link.

    Raises:
        OutputPathError: ``name`` is a symbolic link or not a folder (nothing is written).
    """
    try:
        os.mkdir(name, 0o777, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
            except OSError:
                link = False
            why = "is a symbolic link; nothing is written through one" if link else "is not a folder"
            raise OutputPathError(errno.EEXIST, f"a folder of the output path {why}", name) from None
        raise


class _OutDirs:
    """The output folder and the folders below it, opened one component at a time with
    ``O_NOFOLLOW`` (relative to their parent's descriptor): a symbolic link planted inside
    the output folder is never followed, even when planted while the job runs."""

    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def open(self, parts: list[str]) -> int:
        """A new descriptor of the folder ``parts`` below the root (the caller closes it)."""
        fd = os.dup(self.root_fd)
        try:
            for part in parts:
                nfd = _open_dir(fd, part)
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        os.close(self.root_fd)


def scrub_sessions(
    source: SourceArg,
    out_dir: str | os.PathLike[str],
    *,
    replay: str = "keep",
    header: bool = False,
    filesystem: FileSystemArg | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Scrub every session of ``source`` (see :func:`resolve_source`) into ``out_dir``, keeping
    each file's path below the source directory (files and globs: below their common
    directory; objects: their key). Returns one
    row per session, in path order: ``path``, ``output``, ``source_format`` (``pi``,
    ``claude-code``, ``codex``, read from the content; None: none of them), ``found``, ``kinds`` (secrets per
    kind), ``replay_fields``, ``error_kind`` and ``error`` (None, or why it was not written:
    ``not_found``, ``not_a_file``, ``unreadable``, ``not_a_session``, ``refused_output``, ``io``,
    ``error``, as the stats and convert-all rows name them). Outputs are written
    atomically with the source's mode; nothing is written for a failed session.

    Every folder below ``out_dir`` is opened relative to its parent with ``O_NOFOLLOW``: a
    symbolic link inside ``out_dir`` (a folder or the file) is never written through (that
    session's row has the error). Files under ``out_dir`` are not sources (an ``out_dir``
    inside the source is skipped, so a second run does not scrub the first run's outputs).
    ``progress(done, total)`` is called after each session; ``on_row(row)`` with each row as
    soon as its session and those before it are done (in path order, before this returns: the
    CLI prints them as they come).

    ``workers``: processes that scrub at once (the fleet's long-lived pool,
    :func:`sessiontree.fleet._engine.run_local`: batches of about equal bytes; 1: in this
    process). None: one per CPU from 256 MiB of sessions (:data:`POOL_MIN_BYTES`), else 1.
    The rows are the same whatever the count.

    Raises:
        SessionArgumentError: ``out_dir`` is a source folder or holds one (nothing written).
    """
    root = Path(out_dir)
    out_real = os.path.realpath(root)
    srcs = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    for x in srcs:
        if isinstance(x, (str, os.PathLike)) and os.path.isdir(x) and _inside(os.fspath(x), out_real):
            raise SessionArgumentError(
                f"{out_dir}: the output folder is the source folder {x} or holds it (nothing was written)"
            )
    items = resolve_source(source, filesystem=filesystem)
    items = [it for it in items if it.fs is not None or not _inside(it.path, out_real)]
    local = [os.path.abspath(it.path) for it in items if it.fs is None]
    if srcs and all(isinstance(x, (str, os.PathLike)) and os.path.isdir(x) for x in srcs):
        base: str | None = os.path.commonpath([os.path.abspath(x) for x in srcs])  # below the directories given
    else:
        base = os.path.commonpath([os.path.dirname(p) for p in local]) if local else None
    pairs = [(it, _relative(it, base)) for it in items]
    _OutDirs(root).close()  # the output folder made (and checked) here, before any worker
    from . import _engine

    sizes = [_engine.item_bytes(it) for it in items]
    state = {"done": 0}

    def tick(k: int) -> None:
        for _ in range(k):
            state["done"] += 1
            if progress is not None:
                progress(state["done"], len(items))

    opts = _ScrubOptions(root, replay, header)
    return _engine.run_local(
        _scrub_batch,
        pairs,
        opts,
        workers=workers,
        progress=tick,
        sizes=sizes,
        auto_min_bytes=POOL_MIN_BYTES,
        on_rows=None if on_row is None else functools.partial(_engine.each_row, on_row),
    )


#: With ``workers=None``, :func:`scrub_sessions` starts a pool from this much work (bytes, see
#: :func:`sessiontree.fleet._engine.work_bytes`): the scrub runs on one core at ~280 MB/s, so a
#: pool (about 0.3-1 s to start on a busy 2-core machine) pays off far sooner than for stats.
POOL_MIN_BYTES = 256 << 20


class _ScrubOptions:
    """What :func:`_scrub_batch` needs besides the items (picklable)."""

    def __init__(self, root: Path, replay: str, header: bool):
        self.root = root
        self.replay = replay
        self.header = header


def _scrub_batch(pairs: list[tuple[Item, str]], opts: _ScrubOptions) -> list[dict[str, Any]]:
    """Scrub each ``(item, path below the output folder)`` of a batch; one row each, in order.
    The output folders are opened by this process (:class:`_OutDirs`, never through a link)."""
    rows = []
    dirs = _OutDirs(opts.root)
    try:
        for it, rel_path in pairs:
            rows.append(_scrub_one(it, rel_path, dirs, opts))
    finally:
        dirs.close()
    return rows


def _scrub_one(it: Item, rel_path: str, dirs: _OutDirs, opts: _ScrubOptions) -> dict[str, Any]:
    rel = rel_path.split("/")
    dest = opts.root.joinpath(*rel)
    row: dict[str, Any] = {
        "path": it.path,
        "output": str(dest),
        "source_format": None,
        "found": None,
        "kinds": None,
        "error_kind": None,
        "error": None,
    }
    try:
        if it.fs is None:
            st = os.stat(it.path)  # follows symlinks: a dangling one is FileNotFoundError below
            if not stat.S_ISREG(st.st_mode):  # named as the fleet's rows name it (``not_a_file``)
                what = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else None
                row.update(error_kind="not_a_file", error=f"{it.path}: {what or 'not a regular file'}", output=None)
                return row
        dfd = dirs.open(rel[:-1])
        try:
            if it.fs is not None:
                from ._rows import _read_object

                data, _, _ = _read_object(it, None)
                row["source_format"] = _format_of_bytes(data, it.path)
                clean, report = scrub_bytes(data, header=opts.header, replay=opts.replay)
                atomic_write(rel[-1], [clean], dir_fd=dfd)
            else:
                row["source_format"] = _format_of_file(it.path)
                report = scrub_file(it.path, rel[-1], header=opts.header, replay=opts.replay, dir_fd=dfd)
        finally:
            os.close(dfd)
        row.update(found=report.found, kinds=report.kinds, replay_fields=report.replay_fields)
    except (OSError, SessionTreeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename and exc.strerror else ""
        row["error"] = f"{type(exc).__name__}: {where}{why}"
        row["error_kind"] = _error_kind(exc, it)
        row["output"] = None
    return row


def _format_of_file(path: str) -> str | None:
    """``path``'s format from its first lines (``pi``, ``claude-code``, ``codex``; the core's
    ``convert_detect``), None when it is none of them (scrubbed all the same: the scrubber reads
    every JSON string of every line whatever the format)."""
    from ..errors import SessionTreeError
    from ..session import convert_detect

    try:
        return convert_detect(path)
    except (OSError, SessionTreeError):
        return None


def _format_of_bytes(data: bytes, name: str) -> str | None:
    """:func:`_format_of_file` of an object's bytes held in memory."""
    from ..errors import SessionTreeError
    from ..session import convert_detect_bytes

    try:
        return convert_detect_bytes(data, name)
    except (OSError, SessionTreeError):
        return None


def _error_kind(exc: BaseException, it: Item) -> str:
    """The fleet's ``error_kind`` of a session that was not scrubbed (the stats and convert-all
    rows' names): ``not_found``, ``unreadable`` (the source could not be read), ``not_a_session``,
    ``refused_output`` (a link or non-folder in the output's way), ``io`` (writing failed),
    ``error`` (anything else), or the object store's reason (``too_large``...)."""
    kind = getattr(exc, "kind", None)  # an object the store would not hand over
    if isinstance(kind, str):
        return kind
    if isinstance(exc, OutputPathError):
        return "refused_output"
    if isinstance(exc, SessionFormatError):
        return "not_a_session"
    if isinstance(exc, FileNotFoundError) and exc.filename in (None, it.path):
        return "not_found"
    if isinstance(exc, OSError):
        return "unreadable" if exc.filename == it.path else "io"
    return "error"


__all__ = ["scrub_sessions", "SessionArgumentError"]
