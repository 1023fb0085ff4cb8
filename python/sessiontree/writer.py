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

import fcntl
import math
import os
import time
from pathlib import Path
from typing import Literal

from .errors import SessionArgumentError, SessionLockedError

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
    """The writer lock of one session file (see the module docs): the descriptor the lock is
    held on. The session's Rust core writes through a duplicate of :attr:`fd`.

    Args:
        path: the session file (must exist).
        lock_timeout: seconds to wait for another writer's lock; None fails at once.
    """

    def __init__(self, path: Path, lock_timeout: float | None = None):
        self.path = Path(path)
        self.lock_timeout = check_lock_timeout(lock_timeout)
        self._fd: int | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int:
        """The descriptor (``O_WRONLY | O_APPEND``) the lock is held on.

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
            OSError: the file cannot be opened for writing.
        """
        if self._fd is not None:
            return False
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        deadline = None if self.lock_timeout is None else time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
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
        self._fd = fd
        return True

    def close(self) -> None:
        """Release the lock and close the file (the core's duplicate must be closed first,
        or the lock lives on with it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the last descriptor of the open file releases the flock
