"""Appending to a session file: one writer at a time, whole lines, chosen durability.

* **One writer.** A writing :class:`~sessiontree.Session` holds an exclusive advisory lock
  (``fcntl.flock``) on the session file from its first write until :meth:`close`. A second
  writer (another process, or another ``Session`` object in this one) gets
  :class:`~sessiontree.SessionLockedError` at once, or waits up to ``lock_timeout`` seconds.
  Readers never take the lock and are never blocked. The operating system releases the lock
  when the process dies, so a crash leaves no stale lock. (Pi itself does not lock; the lock
  protects sessiontree writers from each other.)
* **Whole lines.** Each entry is one complete ``...\\n`` line passed to a single ``write()``
  on a file opened with ``O_APPEND``, so a reader never sees two entries interleaved. The
  writes are done by the Rust core (``_core.Index.append_entry`` / ``write_lines``), which
  builds, writes and indexes an entry in one call on a duplicate of the descriptor this
  module locked; a write that fails part-way is cut back off the file, and nothing is indexed.
* **Durability** (what an append has done when it returns):

  ========  ===============================================  ===========================
  mode      an appended entry is…                            survives
  ========  ===============================================  ===========================
  none      buffered in the process (written at 64 KiB,      nothing until ``flush()`` /
            ``flush()``, ``close()`` or exit)                ``close()``
  flush     handed to the OS with one ``write()`` (default)   a crash of the process
  fsync     written and ``fsync``-ed                          a crash of the machine
  ========  ===============================================  ===========================

  Costs measured by ``benches/bench_ops.py``: ``none`` is a memory copy, ``flush`` one system
  call, ``fsync`` one system call plus a disk flush (milliseconds on most disks). In ``none``
  mode the buffer is the index's own copy of the appended lines, so buffering copies nothing
  twice; a full buffer is written before the next entry is added, so an append that raises
  never leaves its entry half-done.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Literal, Sequence

from .errors import OutputPathError, SessionArgumentError, SessionFileChangedError, SessionLockedError

Durability = Literal["none", "flush", "fsync"]
DURABILITY_MODES = ("none", "flush", "fsync")


def check_lock_timeout(value: object) -> float | None:
    """``value`` if it is None or a finite number of seconds >= 0 (an int or float, not a
    bool), else :class:`SessionArgumentError` (``nan`` would make the wait spin forever)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SessionArgumentError(f"lock_timeout must be None or a number of seconds, not {type(value).__name__}")
    if not (value >= 0) or math.isinf(value):
        raise SessionArgumentError(f"lock_timeout must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


class SessionWriter:
    """The writer lock of one session file (see the module docs) and the descriptor to append
    with. The lock is taken (and waited for) on a descriptor open for reading only, and
    :attr:`fd` (``O_WRONLY | O_APPEND``) is opened once the lock is held: a process waiting for
    the lock holds nothing open for writing, so a rewrite in place
    (:func:`sessiontree.scrub.rewrite_open_file`) never takes it for a writer that takes no lock.
    The session's Rust core writes through a duplicate of :attr:`fd`.

    Args:
        path: the session file (must exist).
        lock_timeout: seconds to wait for another writer's lock; None fails at once.
    """

    def __init__(self, path: Path, lock_timeout: float | None = None):
        self.path = Path(path)
        self.lock_timeout = check_lock_timeout(lock_timeout)
        self._fd: int | None = None
        self._lock_fd: int | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int:
        """The descriptor to append with (``O_WRONLY | O_APPEND``), opened once the lock is
        held (the lock is on another descriptor of the same file).

        Raises:
            RuntimeError: the lock is not held.
        """
        if self._fd is None:
            raise RuntimeError("the writer lock is not held")
        return self._fd

    def acquire(self) -> bool:
        """Open the file for appending and take the lock. Returns True when newly acquired.

        Raises:
            SessionLockedError: another writer holds the lock (after ``lock_timeout``).
            SessionArgumentError: the path is not a regular file (a FIFO, a device: opened
                without blocking, so a FIFO with no reader does not hang the call).
            SessionFileChangedError: the path was replaced each time the lock was taken (100
                times); once replaced, the lock of the file it names now is waited for.
            OSError: the file cannot be opened for reading or writing.
        """
        if self._fd is not None:
            return False
        deadline = None if self.lock_timeout is None else time.monotonic() + self.lock_timeout
        for _ in range(100):
            fd = self._open(os.O_RDONLY)
            self._flock(fd, deadline)
            try:
                wfd = self._open(os.O_WRONLY | os.O_APPEND)
            except BaseException:
                os.close(fd)
                raise
            a, b = os.fstat(fd), os.fstat(wfd)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                break
            # the file was replaced (a rewrite in place) while we waited: the lock we hold is on
            # the old file; wait for the lock of the one the path names now
            os.close(wfd)
            os.close(fd)
        else:
            raise SessionFileChangedError(f"{self.path} kept being replaced while its writer lock was taken")
        self._lock_fd, self._fd = fd, wfd
        return True

    def _flock(self, fd: int, deadline: float | None) -> None:
        """Take the lock on ``fd``, waiting until ``deadline`` (None: not at all); closes ``fd``
        on failure."""
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if deadline is None or time.monotonic() >= deadline:
                    os.close(fd)
                    raise SessionLockedError(
                        f"another writer holds the lock on {self.path}"
                        + ("" if deadline is None else f" (waited {self.lock_timeout} s)")
                    ) from None
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 0.1)
            except BaseException:
                os.close(fd)
                raise

    def _open(self, flags: int) -> int:
        """The path opened with ``flags``, without blocking (a FIFO with no reader or writer must
        not hang the call), and only when it is a regular file."""
        try:
            fd = os.open(self.path, flags | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENXIO:  # a FIFO with no reader
                raise SessionArgumentError(f"{self.path}: not a regular file (nothing was written)") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SessionArgumentError(f"{self.path}: not a regular file (nothing was written)")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        """Close the file and release the lock (the core's duplicate of :attr:`fd` must be
        closed first: the lock no longer covers its writes)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        lock_fd, self._lock_fd = self._lock_fd, None
        os.close(fd)
        if lock_fd is not None:
            os.close(lock_fd)  # closing the last descriptor of the open file releases the flock


# ==== whole files: atomic writes, temp cleanup, rewrites, copies ====


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_TMP_RE = r"\.(?P<name>.+)\.[0-9a-f]{8}\.tmp\Z"  # compiled by `re` on first use (a light import)


def _temp_name(path: Path) -> Path:
    """The temp copy :func:`atomic_write` writes before renaming it over ``path``:
    ``.<name>.<8 hex digits>.tmp`` in the same folder."""
    return path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")  # secrets.token_hex(4), lighter


def remove_stale_temp_files(path: Path, older_than: float) -> list[Path]:
    """Remove the temp copies of ``path`` that an :func:`atomic_write` killed mid-way left
    (``.<name>.<8 hex>.tmp`` beside it, last modified before ``older_than``, a
    ``time.time()`` value). Call it only while holding ``path``'s writer lock: every rewrite
    of ``path`` holds that lock while its temp copy exists, so a copy found then belongs to a
    writer that died. Other names are never touched. Returns what was removed."""
    removed: list[Path] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for n in names:
        m = re.match(_TMP_RE, n)
        if m is None or m.group("name") != path.name:
            continue
        tmp = path.with_name(n)
        try:
            st = os.lstat(tmp)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < older_than:
                os.unlink(tmp)
                removed.append(tmp)
        except OSError:
            pass
    return removed


def _target_kind(st: os.stat_result) -> str:
    m = st.st_mode
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(m):
            return name
    return "not a regular file"  # pragma: no cover - door, whiteout, event port


def _check_target(path: Path, source_id: tuple[int, int] | None, dir_fd: int | None = None) -> os.stat_result | None:
    """The ``lstat`` of the regular file at ``path`` (None: nothing there), or
    :class:`OutputPathError` for what :func:`atomic_write` never replaces. ``dir_fd``: ``path``
    is a name in that directory."""
    try:
        st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise OutputPathError(
            errno.EEXIST, "is a symbolic link; nothing is written through one (name its target)", str(path)
        )
    if not stat.S_ISREG(st.st_mode):
        raise OutputPathError(
            errno.EEXIST, f"is not a regular file ({_target_kind(st)}); only a regular file is replaced", str(path)
        )
    if source_id is not None and (st.st_dev, st.st_ino) == source_id:
        raise OutputPathError(errno.EEXIST, "is the file being read; it is never written over", str(path))
    return st


check_target = _check_target  # the public name, for the modules that write beside a target (scrub)


def _stat_or_none(path: str | os.PathLike[str] | None) -> os.stat_result | None:
    try:
        return os.stat(path) if path is not None else None
    except OSError:
        return None


def _source_id(source: os.stat_result | str | os.PathLike[str] | None) -> tuple[int, int] | None:
    if source is None:
        return None
    if not isinstance(source, os.stat_result):
        try:
            source = os.stat(source)
        except FileNotFoundError:
            return None
    return (source.st_dev, source.st_ino)


class AtomicWriter:
    """The context manager :func:`atomic_writer` returns: ``with`` yields a binary file
    object (``write(bytes-like)``) on the temp copy; a clean exit makes it ``path``, an
    exception discards it. See :func:`atomic_write` for the rules.

    ``settle(fh)``: called after the temp copy is fsynced, right before it is closed and
    renamed (it may write more and fsync again); ``renamed()``: called right after the rename,
    before the folder's fsync. A rewrite in place uses them to copy what another writer
    appended meanwhile (:func:`sessiontree.scrub.rewrite_open_file`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        like: os.stat_result | None = None,
        source: os.stat_result | str | os.PathLike[str] | None = None,
        dir_fd: int | None = None,
        settle: Callable[[Any], None] | None = None,
        renamed: Callable[[], None] | None = None,
        mode: int | None = None,
        fsync: bool = True,
    ):
        self.path = Path(path)
        self._like = like
        if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777):
            raise ValueError(f"mode must be permission bits (0 to 0o777), not {mode!r}")
        self._mode = mode
        self._fsync = fsync
        self._settle = settle
        self._renamed = renamed
        self._source = _source_id(source)
        self._dir_fd = dir_fd
        if dir_fd is not None and self.path.name != str(path):
            raise ValueError("with dir_fd, path is a name in that directory")
        self._tmp: Path | None = None
        self._fh: Any = None

    def __enter__(self) -> Any:
        path, like = self.path, self._like
        existing = _check_target(path, self._source, self._dir_fd)
        tmp = _temp_name(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        # a new path: created with like's bits (or 0644), less the umask (the kernel applies it);
        # a replaced file: created 0600, then given its mode (and like's bound) below
        # (with a mode given: created 0600 at most, then given that mode)
        if self._mode is not None:
            create_mode = self._mode & 0o600
        elif existing is not None:
            create_mode = 0o600
        else:
            create_mode = stat.S_IMODE(like.st_mode) & 0o777 if like else 0o644
        fd = os.open(tmp, flags, create_mode, dir_fd=self._dir_fd)
        self._tmp = tmp
        try:
            bounds = [b for b in (existing, like) if b is not None]
            if existing is not None:
                try:
                    os.fchown(fd, existing.st_uid, existing.st_gid)
                except OSError:
                    pass  # not permitted: the owner stays ours (the mode below still applies)
                mode = stat.S_IMODE(existing.st_mode)
                if like is None or (like.st_dev, like.st_ino) != (existing.st_dev, existing.st_ino):
                    mode &= 0o777  # setuid/setgid/sticky stay only on a rewrite of the file itself
            else:
                mode = stat.S_IMODE(os.fstat(fd).st_mode)
                if like is not None and os.fstat(fd).st_gid != like.st_gid:
                    try:
                        os.fchown(fd, -1, like.st_gid)
                    except OSError:
                        pass  # not in that group: its bits are dropped below
            if self._mode is not None:
                mode = self._mode
            if like is not None:
                mode &= stat.S_IMODE(like.st_mode)
            gid = os.fstat(fd).st_gid
            if any(b.st_gid != gid for b in bounds):
                mode &= ~0o070  # our group is not the group the bits were granted to
            os.fchmod(fd, mode)
            self._fh = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self._discard()
            raise
        return self._fh

    def _discard(self) -> None:
        if self._tmp is not None:
            try:
                os.unlink(self._tmp, dir_fd=self._dir_fd)
            except OSError:
                pass
            self._tmp = None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        fh, tmp = self._fh, self._tmp
        try:
            if exc_type is not None:
                fh.close()
                return
            fh.flush()
            if self._fsync:
                os.fsync(fh.fileno())
            if self._settle is not None:
                self._settle(fh)  # may write more (and fsync it) right before the rename
            fh.close()
            # again just before the rename: a FIFO, a link or the source put there meanwhile
            _check_target(self.path, self._source, self._dir_fd)
            os.replace(tmp, self.path, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)  # type: ignore[arg-type]
            self._tmp = None
            if self._renamed is not None:
                self._renamed()
        except BaseException:
            if not fh.closed:
                try:
                    fh.close()
                except OSError:
                    pass
            raise
        finally:
            self._discard()
        if not self._fsync:
            return
        if self._dir_fd is None:
            _fsync_dir(self.path.parent)
        else:
            try:
                os.fsync(self._dir_fd)
            except OSError:
                pass


def atomic_writer(
    path: str | os.PathLike[str],
    *,
    like: os.stat_result | None = None,
    source: os.stat_result | str | os.PathLike[str] | None = None,
    dir_fd: int | None = None,
    mode: int | None = None,
    fsync: bool = True,
) -> AtomicWriter:
    """:func:`atomic_write` for a producer that streams: ``with atomic_writer(out, like=st) as
    fh: fh.write(chunk)...`` (``fh`` is a binary file object on the temp copy). The checks of
    the target run on entering and again before the rename; an exception in the block
    discards the temp copy and leaves ``path`` as it was.

    Raises:
        OutputPathError: as :func:`atomic_write`.
        OSError: the folder cannot be written (on entering), the disk is full (in the block or
            on leaving it).

    ``dir_fd``: ``path`` is a bare name in the directory open as ``dir_fd`` (every step, the
    temp file, the checks and the rename, is relative to it: a folder renamed or swapped for
    a symbolic link meanwhile is not followed). ``mode`` and ``fsync``: as :func:`atomic_write`.
    """
    return AtomicWriter(path, like=like, source=source, dir_fd=dir_fd, mode=mode, fsync=fsync)


def atomic_write(
    path: str | os.PathLike[str],
    chunks: Iterator[bytes] | Sequence[bytes],
    *,
    like: os.stat_result | None = None,
    source: os.stat_result | str | os.PathLike[str] | None = None,
    dir_fd: int | None = None,
    mode: int | None = None,
    fsync: bool = True,
) -> None:
    """Write ``path`` atomically: a temp file ``.<name>.<8 hex>.tmp`` created ``O_EXCL`` in the
    same folder, the chunks, fsync, rename over ``path``, fsync of the folder. Readers see the
    old file or the new one, never half of one; a failure (here or in the producer of
    ``chunks``) removes the temp file and leaves ``path`` as it was. Every file the package
    writes whole goes through here (rewrites, forks and clones, the HTML export); the rules:

    * ``path`` is a new path or a regular file. A symbolic link there is refused, whatever it
      points at: nothing is written through one (pass the target, as a migration does). A
      FIFO, a device, a directory or a socket is refused: never replaced by a regular file.
    * ``source`` (the file being read: its ``os.stat`` or its path) is never replaced: a
      ``path`` with its device and inode (the path itself, a hard link) is refused.
    * The new file is never more readable than ``like`` (the source's ``os.stat``) nor than the
      file it replaces. Replacing a file keeps its permission bits (narrowed to ``like``'s) and
      its owner and group where the process may set them (root, or a group the user is in); a
      new path gets ``like``'s bits (or 0644) less the umask, and ``like``'s group where
      permitted. Group bits are dropped when the group could not be kept.

    The checks run before the temp file is made and again just before the rename; what another
    program renames into place between that check and the rename (microseconds) is replaced.
    ``dir_fd``: as :func:`atomic_writer`. ``mode``: the new file's permission bits (0 to
    0o777; still narrowed to ``like``'s), in place of the rule above: the temp file is created
    with at most 0600 and given ``mode`` before anything is written (a private copy: ``0o600``,
    whatever the umask or the file it replaces). ``fsync=False``: no fsync of the file or the
    folder (a cache checked before each use and made again when lost; the rename still makes
    it whole or absent).

    Raises:
        OutputPathError: ``path`` is a symbolic link, not a regular file, or the source
            (nothing written; an ``OSError`` too).
        OSError: the folder cannot be written, the disk is full.
        ValueError: ``mode`` is not permission bits.
    """
    with atomic_writer(path, like=like, source=source, dir_fd=dir_fd, mode=mode, fsync=fsync) as fh:
        for chunk in chunks:
            fh.write(chunk)


def file_head(path: Path, n: int = 3) -> bytes:
    """The first ``n`` bytes of ``path`` (b"" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def create_new_file(path: Path, data: bytes, *, fsync: bool) -> None:
    """Create ``path`` (``O_EXCL``, mode 0644 less the umask) holding ``data`` (a new session's
    header line): one ``write()``; with ``fsync``, the file and its folder are fsynced (the new
    name survives a power loss). A failure (a full disk, a short write) leaves no empty or
    partial file behind.

    Raises:
        FileExistsError: ``path`` exists.
        OSError: the folder cannot be written, the disk is full.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "the session header was written only in part", str(path))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    if fsync:
        _fsync_dir(path.parent)


def write_copy(path: Path, chunks: Iterator[bytes] | Sequence[bytes], *, source: Path | None) -> None:
    """Write a new session file holding a source's entries (a fork, a clone) with
    :func:`atomic_write`: it appears whole or not at all, and is never more readable than
    ``source`` (the session file read; None: in no file)."""
    atomic_write(path, chunks, like=_stat_or_none(source))


def open_own_file(
    path: str | os.PathLike[str], identity: tuple[int, int] | None
) -> tuple[Path, BinaryIO, os.stat_result]:
    """(real path, open binary reader, its stat) of the file a session indexed, for a rewrite in
    place under the writer lock (the migration rewrite, the in-place scrub).

    ``identity`` is the ``(st_dev, st_ino)`` the session indexed (``Index.file_identity``).

    Raises:
        SessionFileChangedError: the path now names another file (renamed over, replaced).
    """
    target = Path(os.path.realpath(path))
    fh = open(target, "rb")
    st = os.fstat(fh.fileno())
    if (st.st_dev, st.st_ino) != identity:
        fh.close()
        raise SessionFileChangedError(f"{path} was replaced since it was opened: open it again (nothing was rewritten)")
    return target, fh, st


def rewrite_lines(
    target: Path,
    data: bytes,
    replacements: dict[int, bytes],
    header: bytes,
    is_header: Callable[[bytes], bool],
    *,
    like: os.stat_result,
    locked_at: float,
) -> None:
    """Rewrite ``target`` (a migration): ``data`` is its bytes, read under the writer lock; line
    ``n`` (1-based) becomes ``replacements[n]`` where given, the first line ``is_header`` accepts
    becomes ``header``, every other line is kept verbatim (so nothing is lost). Temp copies an
    earlier rewrite killed mid-way left (older than ``locked_at``) are removed first; the write
    is :func:`atomic_write` with ``like`` (the file's own stat: mode and owner kept).

    Raises:
        OutputPathError, OSError: as :func:`atomic_write` (the file is left as it was).
    """
    raw_lines = data.split(b"\n")
    if data.endswith(b"\n"):
        raw_lines.pop()
    out: list[bytes] = []
    header_done = False
    for n, line in enumerate(raw_lines, start=1):
        if n in replacements:
            out.append(replacements[n] + b"\n")
        elif not header_done and line.strip().startswith(b"{") and is_header(line):
            out.append(header + b"\n")
            header_done = True
        else:
            out.append(line + b"\n")
    remove_stale_temp_files(target, locked_at)
    atomic_write(target, out, like=like)
