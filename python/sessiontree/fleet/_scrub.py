"""Scrubbing a whole store (issue 20): ``scrub_sessions`` and the scrubbed opening behind
``entries_table(scrub=True)``, over the public :mod:`sessiontree.scrub` API."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, Callable

from ..errors import OutputPathError, SessionArgumentError, SessionError
from ..scrub import scrub_bytes, scrub_file
from ..writer import atomic_write
from ._sources import Item, resolve_source


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
    source: Any,
    out_dir: str | os.PathLike[str],
    *,
    replay: str = "keep",
    header: bool = False,
    filesystem: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Scrub every session of ``source`` (see :func:`resolve_source`) into ``out_dir``, keeping
    each file's path below the source directory (files and globs: below their common
    directory; objects: their key). Returns one
    row per session, in path order: ``path``, ``output``, ``found``, ``kinds`` (secrets per
    kind), ``replay_fields``, ``error`` (None, or why it was not written). Outputs are written
    atomically with the source's mode; nothing is written for a failed session.

    Every folder below ``out_dir`` is opened relative to its parent with ``O_NOFOLLOW``: a
    symbolic link inside ``out_dir`` (a folder or the file) is never written through (that
    session's row has the error). Files under ``out_dir`` are not sources (an ``out_dir``
    inside the source is skipped, so a second run does not scrub the first run's outputs).
    ``progress(done, total)`` is called after each session.

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
    rows = []
    dirs = _OutDirs(root)
    try:
        for n, it in enumerate(items, start=1):
            rel = _relative(it, base).split("/")
            dest = root.joinpath(*rel)
            row: dict[str, Any] = {"path": it.path, "output": str(dest), "found": None, "kinds": None, "error": None}
            try:
                dfd = dirs.open(rel[:-1])
                try:
                    if it.fs is not None:
                        from ._rows import _read_object

                        data, _, _ = _read_object(it, None)
                        clean, report = scrub_bytes(data, header=header, replay=replay)
                        atomic_write(rel[-1], [clean], dir_fd=dfd)
                    else:
                        report = scrub_file(it.path, rel[-1], header=header, replay=replay, dir_fd=dfd)
                finally:
                    os.close(dfd)
                row.update(found=report.found, kinds=report.kinds, replay_fields=report.replay_fields)
            except (OSError, SessionError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename and exc.strerror else ""
                row["error"] = f"{type(exc).__name__}: {where}{why}"
                row["output"] = None
            rows.append(row)
            if progress is not None:
                progress(n, len(items))
    finally:
        dirs.close()
    return rows


__all__ = ["scrub_sessions", "SessionArgumentError"]
