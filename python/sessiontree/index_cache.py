"""Where saved indexes live, and the ``sessiontree cache`` commands.

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

Size: a saved index takes about 45 bytes per entry, 2-5% of a typical session file (a 200 MB
session of 170,000 entries: about 7 MB).
After every save the folder is trimmed: saved indexes whose session file no longer exists, or
was rewritten (another inode at its path, or other bytes at its inode), are removed, then the
least recently used (a load counts as a use) while they total more than
:data:`DEFAULT_MAX_BYTES` (``$SESSIONTREE_INDEX_CACHE_MAX_BYTES``, or ``max_bytes`` of a
:class:`CacheSettings` passed as ``index_cache=``).

Memory: an open does not load a saved index whole; a query reads the blocks it needs (1,024
records, winners or key-lookup entries each, checked when read). The blocks read are kept in one
cache per process, every session together, under a byte budget: :data:`DEFAULT_BLOCK_CACHE_BYTES`
(``$SESSIONTREE_INDEX_BLOCK_CACHE_BYTES``, or ``block_cache_bytes`` of a :class:`CacheSettings`;
each open with the cache on sets it). Past it, blocks not used lately are dropped (CLOCK) and
read and checked again when next needed. The key groups (ids and other keys) are kept once read.

An unusable setting (``~nosuchuser/x``, no home folder, a file, a folder that cannot be created)
means no cache: the open goes on cold, and one line on stderr says why (once per process).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Union

from .errors import SessionArgumentError

#: Below this file size (bytes) no index is saved (1 MiB: a cold open of 1 MiB takes about a
#: millisecond, no more than checking and loading a saved index).
DEFAULT_MIN_BYTES = 1 << 20

#: The cap on a cache folder's saved indexes (bytes) when none is set (1 GiB).
DEFAULT_MAX_BYTES = 1 << 30

#: The byte budget of the blocks of saved indexes one process keeps in memory, every session
#: together, when none is set (128 MiB: a 1 GiB session's records, winners and key lookup are
#: about 35 MiB).
DEFAULT_BLOCK_CACHE_BYTES = 128 << 20


@dataclass(frozen=True)
class CacheSettings:
    """``index_cache=`` with settings: ``folder`` (None: the default place; False or ``"off"``:
    no cache), ``max_bytes`` (the cap on the folder's saved indexes, None: the environment's or
    :data:`DEFAULT_MAX_BYTES`), ``min_bytes`` (the smallest file saved, None: the
    environment's or :data:`DEFAULT_MIN_BYTES`) and ``block_cache_bytes`` (the budget of the
    saved blocks this process keeps in memory, every session together, None: the environment's
    or :data:`DEFAULT_BLOCK_CACHE_BYTES`; see :func:`block_cache_bytes`)."""

    folder: Union[None, bool, str, "os.PathLike[str]"] = None
    max_bytes: int | None = None
    min_bytes: int | None = None
    block_cache_bytes: int | None = None


#: What ``index_cache=`` accepts: None (the default place), a folder, False / "off", or a
#: :class:`CacheSettings`.
IndexCache = Union[None, bool, str, os.PathLike[str], CacheSettings]

_SUFFIX = ".stidx"


_warned: set[str] = set()


def _unusable(what: str, why: str) -> None:
    """One line on stderr (once per process per setting): the cache is off, and why."""
    if what in _warned:
        return
    _warned.add(what)
    try:
        sys.stderr.write(f"sessiontree: index cache off: {what} {why}\n")
    except (OSError, ValueError):
        pass


def default_dir() -> Path | None:
    """``$XDG_CACHE_HOME/sessiontree`` (when absolute), else ``~/.cache/sessiontree``; None
    (with one line on stderr) when there is no usable home folder."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "sessiontree"
    env_home = os.environ.get("HOME")
    if env_home is not None and not os.path.isabs(env_home):
        _unusable("the default folder", f"(HOME={env_home!r} is not an absolute path)")
        return None
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        _unusable("the default folder", "(no home folder: set HOME or SESSIONTREE_INDEX_CACHE)")
        return None
    if not home.is_absolute() or not home.is_dir():
        _unusable("the default folder", f"(the home folder {str(home)!r} does not exist)")
        return None
    return home / ".cache" / "sessiontree"


def _expand(v: str | os.PathLike[str], what: str) -> Path | None:
    """``v`` as a folder, ``~`` expanded; None (one line on stderr) when it cannot be."""
    try:
        p = Path(v)
        if p.parts and p.parts[0].startswith("~"):
            home = Path(p.parts[0]).expanduser()
            if not home.is_absolute() or not home.is_dir():
                raise RuntimeError(home)
        p = p.expanduser()
    except (RuntimeError, KeyError, OSError, ValueError):
        _unusable(what, "(its ~ names no home folder)")
        return None
    if "\0" in str(p):
        _unusable(what, "(a NUL in the path)")
        return None
    return p


def usable(d: Path) -> bool:
    """Whether ``d`` is a folder, or was missing and could be created (0700). Else False, with
    one line on stderr. (Ownership and mode are checked when the folder is opened, by the
    core: a folder of another user's is not used, silently.)"""
    try:
        st = os.stat(d)
    except FileNotFoundError:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            return True
        except OSError as e:
            _unusable(str(d), f"cannot be created ({e.strerror or e})")
            return False
    except OSError as e:
        _unusable(str(d), f"is unusable ({e.strerror})")
        return False
    if not stat.S_ISDIR(st.st_mode):
        _unusable(str(d), "is not a folder")
        return False
    return True


def _is_off(v: object) -> bool:
    return v is False or (isinstance(v, str) and v.strip().lower() in ("off", "0", "false", "no", ""))


def resolve(index_cache: IndexCache = None) -> Path | None:
    """The cache folder for ``index_cache`` (see the module docs), or None when off.

    Raises:
        SessionArgumentError: ``index_cache`` is not None, a bool, a str or a path.
    """
    if isinstance(index_cache, CacheSettings):
        index_cache = index_cache.folder
    if index_cache is None or index_cache is True:
        env = os.environ.get("SESSIONTREE_INDEX_CACHE")
        if env is not None:
            return None if _is_off(env) else _expand(env, f"SESSIONTREE_INDEX_CACHE={env!r}")
        return default_dir()
    if _is_off(index_cache):
        return None
    if isinstance(index_cache, (str, os.PathLike)):
        return _expand(index_cache, f"index_cache={str(index_cache)!r}")
    raise SessionArgumentError(
        f"index_cache must be None, False, 'off', a folder or a CacheSettings, not {index_cache!r}"
    )


def for_workers(index_cache: IndexCache = None) -> IndexCache:
    """What a whole-store job hands its workers: ``index_cache`` when given; else the caller's
    ``$SESSIONTREE_INDEX_CACHE`` when set (an explicit setting follows the job to its workers,
    which may have been started with another environment, e.g. a Ray cluster's); else None, so
    that each worker uses its own machine's default folder."""
    if index_cache is not None:
        return index_cache
    return os.environ.get("SESSIONTREE_INDEX_CACHE")


_SIZE = r"(?i)\s*(\d+)\s*([kmgt]?)i?b?\s*"  # compiled by `re` on first use (a light import)


def _size(v: str | None, default: int) -> int:
    """A byte count from ``v`` (``123``, ``512M``, ``2GiB``: powers of 1024), else ``default``."""
    if v is None:
        return default
    m = re.fullmatch(_SIZE, v)
    if m is None or len(m.group(1)) > 20:
        return default
    return _bytes(int(m.group(1)) << (10 * "kmgt".find(m.group(2).lower()) + 10 if m.group(2) else 0))


#: the largest byte count handed to the core (a larger one, from the environment or settings,
#: would fail every open with ``OverflowError``): no budget or cap reaches it anyway
_MAX_BYTES = (1 << 63) - 1


def _bytes(n: int) -> int:
    """``n`` within ``0 ..= _MAX_BYTES``."""
    return min(max(int(n), 0), _MAX_BYTES)


def min_bytes(index_cache: IndexCache = None) -> int:
    """Files below this size (bytes) are not saved: ``index_cache``'s ``min_bytes`` when it is a
    :class:`CacheSettings` that sets it, ``$SESSIONTREE_INDEX_CACHE_MIN_BYTES`` or
    :data:`DEFAULT_MIN_BYTES`."""
    if isinstance(index_cache, CacheSettings) and index_cache.min_bytes is not None:
        return _bytes(index_cache.min_bytes)
    return _size(os.environ.get("SESSIONTREE_INDEX_CACHE_MIN_BYTES"), DEFAULT_MIN_BYTES)


def max_bytes(index_cache: IndexCache = None) -> int:
    """The cap (bytes) on a cache folder's saved indexes: ``index_cache``'s ``max_bytes`` when it
    is a :class:`CacheSettings` that sets it, ``$SESSIONTREE_INDEX_CACHE_MAX_BYTES`` (``512M``,
    ``2G`` ...) or :data:`DEFAULT_MAX_BYTES`."""
    if isinstance(index_cache, CacheSettings) and index_cache.max_bytes is not None:
        return _bytes(index_cache.max_bytes)
    return _size(os.environ.get("SESSIONTREE_INDEX_CACHE_MAX_BYTES"), DEFAULT_MAX_BYTES)


def block_cache_bytes(index_cache: IndexCache = None) -> int:
    """The byte budget of the saved-index blocks one process keeps in memory (every session
    together): ``index_cache``'s ``block_cache_bytes`` when it is a :class:`CacheSettings` that
    sets it, ``$SESSIONTREE_INDEX_BLOCK_CACHE_BYTES`` (``64M`` ...) or
    :data:`DEFAULT_BLOCK_CACHE_BYTES`. Process-wide: each open with the cache on sets it (see
    :func:`open_kwargs`); blocks past a smaller budget are dropped when it is set. Bytes, an
    ``int`` >= 0; sizes past 2^63-1 are capped there, junk in the environment means the default."""
    if isinstance(index_cache, CacheSettings) and index_cache.block_cache_bytes is not None:
        return _bytes(index_cache.block_cache_bytes)
    return _size(os.environ.get("SESSIONTREE_INDEX_BLOCK_CACHE_BYTES"), DEFAULT_BLOCK_CACHE_BYTES)


def block_cache_info() -> tuple[int, int]:
    """``(bytes held, budget)`` of this process's cache of saved-index blocks."""
    from . import _core

    return _core.index_block_cache()


class OpenKwargs(TypedDict, total=False):
    """The saved-index keywords of the core's ``Index.open``."""

    cache_dir: str
    cache_min: int
    cache_max: int
    cache_evict_s: int


def open_kwargs(index_cache: IndexCache = None) -> OpenKwargs:
    """Keyword arguments for the core's ``Index.open`` (``cache_dir``, ``cache_min``,
    ``cache_max``); none when the cache is off or unusable (an open never fails for it). With
    the cache on, this also sets the process's block budget (:func:`block_cache_bytes`)."""
    d = resolve(index_cache)
    if d is None or not usable(d):
        return {}
    from . import _core

    _core.index_block_cache(block_cache_bytes(index_cache))
    return {
        "cache_dir": str(d),
        "cache_min": min_bytes(index_cache),
        "cache_max": max_bytes(index_cache),
        "cache_evict_s": evict_every(),
    }


#: Seconds between two evictions by one process (its first save always evicts).
DEFAULT_EVICT_EVERY_S = 10


def evict_every() -> int:
    """How often (seconds) one process trims the folder after a save: its first save always
    does, later ones at most once per ``$SESSIONTREE_INDEX_CACHE_EVICT_SECONDS`` or
    :data:`DEFAULT_EVICT_EVERY_S` (a trim reads every saved index's header: a bulk job
    saving thousands must not do it on every save)."""
    v = os.environ.get("SESSIONTREE_INDEX_CACHE_EVICT_SECONDS")
    try:
        return max(int(v), 0) if v is not None else DEFAULT_EVICT_EVERY_S
    except ValueError:
        return DEFAULT_EVICT_EVERY_S


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


def _read_row_file(dfd: int, name: str, owned: bool) -> Any:
    """The JSON value of the saved row ``name`` in the folder ``dfd``, or None when it is unusable.

    Unusable: not a regular file (never read through a symlink, a FIFO or a device), over
    ``_ROW_MAX`` bytes, a checksum line that does not match its body, not JSON; with ``owned``,
    also a file of another user.
    """
    import json

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (owned and fst.st_uid != os.geteuid()) or fst.st_size > _ROW_MAX:
            return None
        data = os.read(fd, _ROW_MAX + 1)
        sum_line, _, body = data.partition(b"\n")
        if sum_line != _row_sum(body):
            return None
        return json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)


def _row_is_ours(dfd: int, name: str) -> bool:
    """Whether ``name`` in the folder ``dfd`` is a saved row this module would load: our name,
    a regular file of ours (never through a symlink), its checksum and version right, and
    its stamp naming the file its name does."""
    m = re.fullmatch(_ROW_NAME, name)
    if m is None:
        return False
    v = _read_row_file(dfd, name, owned=True)
    if not isinstance(v, dict):
        return False
    stamp = v.get("stamp")
    return (
        v.get("v") == _ROW_VERSION
        and isinstance(stamp, list)
        and len(stamp) == 5
        and stamp[:2] == [int(m.group(1), 16), int(m.group(2), 16)]
    )


def _row_temp_is_ours(dfd: int, name: str) -> bool:
    """Whether ``name`` is a leftover temp file of :func:`save_row` (regular, ours, 0600)."""
    if re.fullmatch(_ROW_TEMP, name) is None:
        return False
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600


def _rows(d: Path) -> tuple[list[str], list[str], int]:
    """The saved rows and row temp files of ours in ``d`` (a folder that passes the cache's
    rules, else none) and the rows' total size."""
    dfd = _open_folder(d, False)
    if dfd is None:
        return [], [], 0
    rows: list[str] = []
    temps: list[str] = []
    size = 0
    try:
        for n in os.listdir(dfd):
            if _row_is_ours(dfd, n):
                rows.append(n)
                try:
                    size += os.stat(n, dir_fd=dfd, follow_symlinks=False).st_size
                except OSError:
                    pass
            elif _row_temp_is_ours(dfd, n):
                temps.append(n)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return rows, temps, size


def info(index_cache: IndexCache = None) -> CacheInfo:
    """The cache folder's state (read only). Only files the cache would load are counted; a
    folder the cache refuses (a symlink, another user's, writable by others) counts nothing."""
    from ._core import index_cache_census

    d = resolve(index_cache)
    if d is None:
        return CacheInfo(None, False, 0, 0, 0)
    if not os.path.isdir(d):
        return CacheInfo(d, False, 0, 0, 0)
    census = index_cache_census(str(d))
    if census is None:
        return CacheInfo(d, True, 0, 0, 0)
    files, size, temps = census
    rows, row_temps, row_size = _rows(d)
    return CacheInfo(d, True, files + len(rows), size + row_size, temps + len(row_temps))


def clear(index_cache: IndexCache = None) -> int:
    """Removes the saved indexes and rows (and leftover temp files) from the cache folder;
    returns how many files were removed. Only files the cache itself would load are removed
    (our names, format and stamps), through the folder's descriptor (a symlink is never
    followed); a folder the cache refuses (a symlink, another user's, writable by others) is
    left alone. Other files and the folder stay."""
    from ._core import index_cache_clear

    d = resolve(index_cache)
    if d is None:
        return 0
    n = index_cache_clear(str(d))
    n += _clear_search(d) + _clear_search(d, "objects")
    dfd = _open_folder(d, False)
    if dfd is None:
        return n
    try:
        for name in os.listdir(dfd):
            if _row_is_ours(dfd, name) or _row_temp_is_ours(dfd, name):
                try:
                    os.unlink(name, dir_fd=dfd)
                    n += 1
                except OSError:
                    continue
    except OSError:
        pass
    finally:
        os.close(dfd)
    return n


_SEARCH_DIR = re.compile(r"\.?[0-9a-f]{16}(\.old\.\d+\.\d+)?")


def _clear_search(d: Path, folder: str = "search") -> int:
    """Removes the search indexes (``search/<16 hex>/``, ``rust/src/search/store_index.rs``), or
    with ``folder="objects"`` the objects' copies search keeps (``objects/<16 hex>/``,
    ``fleet/_copies.py``), under the cache folder ``d``; returns how many files went. Only
    folders named as they are named, in a folder of ours (never through a symlink:
    ``shutil.rmtree`` works through descriptors)."""
    import shutil

    dfd = _open_folder(d, False)
    if dfd is None:
        return 0
    try:
        sfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return 0
    finally:
        os.close(dfd)
    n = 0
    try:
        st = os.fstat(sfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return 0
        for name in os.listdir(sfd):
            if _SEARCH_DIR.fullmatch(name) is None:
                continue
            try:
                sub = os.stat(name, dir_fd=sfd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(sub.st_mode) or sub.st_uid != os.geteuid():
                continue
            try:
                cfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
                try:
                    n += sum(1 for _ in os.scandir(cfd))
                finally:
                    os.close(cfd)
                shutil.rmtree(name, dir_fd=sfd)
            except OSError:
                continue
    finally:
        os.close(sfd)
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
_ROW_NAME = r"([0-9a-f]{16})-([0-9a-f]{16})\.[a-z0-9_]+\.row"  # compiled by `re` on first use
_ROW_TEMP = r"\.[0-9a-f]{16}-[0-9a-f]{16}\.[a-z0-9_]+\.row\.\d+\.[0-9a-f]{12}\.stidx\.tmp"
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


def load_row(kind: str, st: os.stat_result, key: str, index_cache: IndexCache = None) -> dict[str, Any] | None:
    """The row saved for the file whose ``os.stat`` is ``st``, computed with options ``key``;
    None when there is none, or it was saved for another state of the file or other options."""
    d = resolve(index_cache)
    if d is None:
        return None
    dfd = _open_folder(d, False)
    if dfd is None:
        return None
    try:
        v = _read_row_file(dfd, _row_name(st, kind), owned=False)
    finally:
        os.close(dfd)
    if (
        not isinstance(v, dict)
        or v.get("v") != _ROW_VERSION
        or v.get("stamp") != _stamp(st)
        or v.get("key") != key
        or not isinstance(v.get("row"), dict)
    ):
        return None
    row: dict[str, Any] = v["row"]
    return row


def save_row(kind: str, st: os.stat_result, key: str, row: dict[str, Any], index_cache: IndexCache = None) -> bool:
    """Saves ``row`` for the file whose ``os.stat`` (taken before the row was computed) is
    ``st``. False (nothing written) when the cache is off or unusable; never raises for that."""
    import json
    import secrets

    d = resolve(index_cache)
    if d is None or not usable(d):
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
