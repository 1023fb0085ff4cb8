"""Where saved indexes live, and the ``sessiontree cache`` commands (issue 17).

After a cold scan of a session file the core saves the index it built in a cache folder of
ours; the next open, in any process, checks that saved index against the file, loads it and
scans only the bytes appended since (``rust/src/saved.rs`` describes the file and its checks;
``docs/reliability.md`` what the check catches and what it cannot). A saved index is derived
data: it is never authoritative, and any doubt means a cold scan with the same answers.

Where: ``$SESSIONTREE_INDEX_CACHE`` when set (a folder, or ``off``), else
``$XDG_CACHE_HOME/sessiontree`` (an absolute ``XDG_CACHE_HOME`` only, as the XDG spec says),
else ``~/.cache/sessiontree``. Never beside the session files unless that folder is named.
``index_cache=`` on :meth:`Session.open`, :func:`list_sessions` and the fleet functions
overrides it per call: a folder, or ``False``/``"off"`` for no cache.

Files smaller than :data:`DEFAULT_MIN_BYTES` (``$SESSIONTREE_INDEX_CACHE_MIN_BYTES``) are not
saved: their scan costs about what loading a saved index does.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Union

from .errors import SessionArgumentError

#: Below this file size (bytes) no index is saved (1 MiB: a cold open of 1 MiB takes about a
#: millisecond, no more than checking and loading a saved index).
DEFAULT_MIN_BYTES = 1 << 20

#: What ``index_cache=`` accepts: None (the default place), a folder, or False / "off".
IndexCache = Union[None, bool, str, "os.PathLike[str]"]

_SUFFIX = ".stidx"


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/sessiontree`` (when absolute), else ``~/.cache/sessiontree``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "sessiontree"
    return Path.home() / ".cache" / "sessiontree"


def _is_off(v: object) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("off", "0", "false", "no", ""))


def resolve(index_cache: IndexCache = None) -> Path | None:
    """The cache folder for ``index_cache`` (see the module docs), or None when off.

    Raises:
        SessionArgumentError: ``index_cache`` is not None, a bool, a str or a path.
    """
    if index_cache is None or index_cache is True:
        env = os.environ.get("SESSIONTREE_INDEX_CACHE")
        if env is not None:
            return None if _is_off(env) else Path(env).expanduser()
        return default_dir()
    if _is_off(index_cache):
        return None
    if isinstance(index_cache, (str, os.PathLike)):
        return Path(index_cache).expanduser()
    raise SessionArgumentError(f"index_cache must be None, False, 'off' or a folder, not {index_cache!r}")


def for_workers(index_cache: IndexCache = None) -> IndexCache:
    """What a whole-store job hands its workers: ``index_cache`` when given; else the caller's
    ``$SESSIONTREE_INDEX_CACHE`` when set (an explicit setting follows the job to its workers,
    which may have been started with another environment, e.g. a Ray cluster's); else None, so
    that each worker uses its own machine's default folder."""
    if index_cache is not None:
        return index_cache
    return os.environ.get("SESSIONTREE_INDEX_CACHE")


def min_bytes() -> int:
    """Files below this size (bytes) are not saved: ``$SESSIONTREE_INDEX_CACHE_MIN_BYTES`` or
    :data:`DEFAULT_MIN_BYTES`."""
    v = os.environ.get("SESSIONTREE_INDEX_CACHE_MIN_BYTES")
    if v is None:
        return DEFAULT_MIN_BYTES
    try:
        n = int(v)
    except ValueError:
        return DEFAULT_MIN_BYTES
    return max(n, 0)


class OpenKwargs(TypedDict, total=False):
    """The saved-index keywords of the core's ``Index.open``."""

    cache_dir: str
    cache_min: int


def open_kwargs(index_cache: IndexCache = None) -> OpenKwargs:
    """Keyword arguments for the core's ``Index.open`` (``cache_dir``, ``cache_min``)."""
    d = resolve(index_cache)
    if d is None:
        return {}
    return {"cache_dir": str(d), "cache_min": min_bytes()}


@dataclass(frozen=True)
class CacheInfo:
    """What ``sessiontree cache info`` shows: the folder (None when the cache is off), whether it
    exists, how many saved indexes and saved rows it holds and their total size in bytes, and
    leftover temp files of interrupted saves."""

    folder: Path | None
    exists: bool
    files: int
    bytes: int
    temp_files: int


def _ours(name: str) -> bool:
    return (
        name.endswith(_SUFFIX)
        or name.endswith(".row")
        or (name.startswith(".") and name.endswith(".tmp") and _SUFFIX in name)
    )


def info(index_cache: IndexCache = None) -> CacheInfo:
    """The cache folder's state (read only; symlinks in it are neither followed nor counted)."""
    d = resolve(index_cache)
    if d is None:
        return CacheInfo(None, False, 0, 0, 0)
    try:
        names = os.listdir(d)
    except OSError:
        return CacheInfo(d, False, 0, 0, 0)
    files = size = temps = 0
    for n in names:
        if not _ours(n):
            continue
        try:
            st = os.lstat(d / n)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if n.endswith(".tmp"):
            temps += 1
        else:
            files += 1
            size += st.st_size
    return CacheInfo(d, True, files, size, temps)


def clear(index_cache: IndexCache = None) -> int:
    """Removes every saved index (and leftover temp file) from the cache folder; returns how
    many files were removed. Only our own names are touched (a symlink with such a name is
    removed as a link, its target left alone); other files and the folder stay."""
    d = resolve(index_cache)
    if d is None:
        return 0
    try:
        names = os.listdir(d)
    except OSError:
        return 0
    n = 0
    for name in names:
        if not _ours(name):
            continue
        p = d / name
        try:
            if stat.S_ISDIR(os.lstat(p).st_mode):
                continue
            os.unlink(p)
            n += 1
        except OSError:
            continue
    return n


# ---------------------------------------------------------------- saved rows
#
# A saved row is a small answer about one whole file (a ``sessiontree stats`` row, a listing
# entry), kept beside the saved indexes and reused while the file is the one it was computed
# from: the same (device, inode, size, mtime ns, ctime ns). The kernel sets ctime to the current
# time on every write, truncate, rename or chmod, and no program can set it back (only the
# system clock can), so an equal stamp means the file was not written since. Rows are JSON
# after a checksum line (BLAKE2b-128 of the JSON bytes, hex: a flipped bit or a cut is never
# read as a row, as the saved index's checksum does for it), written like saved indexes
# (O_EXCL temp file 0600 in a folder we own, renamed; symlinks neither followed nor written
# through); anything odd reads as "no row".

_ROW_SUFFIX = ".row"
_ROW_MAX = 1 << 20
_ROW_VERSION = 2


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _row_sum(body: bytes) -> bytes:
    """The checksum line of a saved row's JSON bytes: BLAKE2b-128, hex."""
    import hashlib

    return hashlib.blake2b(body, digest_size=16).hexdigest().encode()


def _row_name(st: os.stat_result, kind: str) -> str:
    return f"{st.st_dev:016x}-{st.st_ino:016x}.{kind}{_ROW_SUFFIX}"


def _open_folder(d: Path, create: bool) -> int | None:
    """The cache folder's descriptor (created 0700 when ``create``), or None when it is a
    symlink, not ours, writable by others, or cannot be opened."""
    try:
        if create:
            os.makedirs(d, mode=0o700, exist_ok=True)
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        return None
    return fd


def load_row(kind: str, st: os.stat_result, key: str, index_cache: IndexCache = None) -> dict | None:
    """The row saved for the file whose ``os.stat`` is ``st``, computed with options ``key``;
    None when there is none, or it was saved for another state of the file or other options."""
    import json

    d = resolve(index_cache)
    if d is None:
        return None
    dfd = _open_folder(d, False)
    if dfd is None:
        return None
    try:
        fd = os.open(_row_name(st, kind), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        os.close(dfd)
        return None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or fst.st_size > _ROW_MAX:
            return None
        data = os.read(fd, _ROW_MAX + 1)
        sum_line, _, body = data.partition(b"\n")
        if sum_line != _row_sum(body):
            return None
        v = json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
        os.close(dfd)
    if (
        not isinstance(v, dict)
        or v.get("v") != _ROW_VERSION
        or v.get("stamp") != _stamp(st)
        or v.get("key") != key
        or not isinstance(v.get("row"), dict)
    ):
        return None
    return v["row"]


def save_row(kind: str, st: os.stat_result, key: str, row: dict, index_cache: IndexCache = None) -> bool:
    """Saves ``row`` for the file whose ``os.stat`` (taken before the row was computed) is
    ``st``. False (nothing written) when the cache is off or unusable; never raises for that."""
    import json
    import secrets

    d = resolve(index_cache)
    if d is None:
        return False
    try:
        body = json.dumps({"v": _ROW_VERSION, "stamp": _stamp(st), "key": key, "row": row}).encode()
    except (TypeError, ValueError):
        return False
    data = _row_sum(body) + b"\n" + body
    if len(data) > _ROW_MAX:
        return False
    dfd = _open_folder(d, True)
    if dfd is None:
        return False
    name = _row_name(st, kind)
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(6)}{_SUFFIX}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    except OSError:
        os.close(dfd)
        return False
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return True
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        return False
    finally:
        os.close(dfd)
