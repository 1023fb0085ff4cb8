"""The sessions one RPC server process holds.

Shared by file between connections (one index, one writer gate each), new sessions announced
before they are written, and the gate that refuses a second writer on ``--listen``."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable

from ..paths import check_session_id, iso_now, new_session_id, session_file_name
from ..session import Session
from .protocol import RpcError


class AnswerCache:
    """Answers that depend only on a session's bytes and leaf, kept until they change.

    Each value is stored under the session's :attr:`Session.state_key` read before it was
    computed, and kept only if the key is the same after (a write or leaf move while computing
    leaves nothing behind), so a cached answer always equals the answer computed now (never
    stale). Shared by every connection on one file; thread-safe (two threads may compute one
    answer at once: both get it, one is kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: Any = None
        self._values: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0

    def get(self, session: Session, name: str, compute: Callable[[], Any]) -> Any:
        """The answer ``name`` of ``session`` now: cached, or ``compute()`` (then cached)."""
        key = session.state_key
        with self._lock:
            if self._key == key and name in self._values:
                self.hits += 1
                return self._values[name]
            self.misses += 1
        value = compute()
        if session.state_key == key:
            with self._lock:
                if self._key != key:
                    self._key = key
                    self._values = {}
                self._values[name] = value
        return value


class SharedSession:
    """One session as the connections serving it share it.

    The :class:`Session` (one index), its writer ``gate``, how many connections hold it
    (``refs``) and its :class:`AnswerCache`."""

    def __init__(self, session: Session, gate: Any = None, key: Any = None):
        self.session = session
        self.gate = gate if gate is not None else threading.RLock()
        self.key = key
        self.refs = 1
        self.cache = AnswerCache()


class PendingSession:
    """A new session announced but not written yet (Pi writes a new session lazily too).

    Its id, header timestamp and so its path are fixed when it is announced, so ``get_state``
    reports the ``sessionFile`` it will have. ``name`` is a ``--name`` to write with it."""

    def __init__(
        self,
        cwd: str,
        session_dir: Path,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        name: str | None = None,
    ):
        self.cwd = cwd
        self.session_dir = Path(session_dir)
        self.session_id = check_session_id(session_id) if session_id is not None else new_session_id()
        self.timestamp = iso_now()
        self.parent_session = parent_session
        self.name = name
        self.path = Path(os.path.abspath(self.session_dir / session_file_name(self.timestamp, self.session_id)))


class SessionRegistry:
    """The sessions one server process has open, by file (device and inode).

    Connections on one file share one :class:`SharedSession`; the session is closed when the
    last connection lets it go. ``gate`` makes each file's writer gate (a blocking lock for
    stdio; for ``--listen``, :class:`_WriterGate`, which refuses a second writer instead of
    queueing it)."""

    def __init__(self, gate: Callable[[], Any] = threading.RLock):
        self.make_gate = gate
        self._lock = threading.Lock()
        self._open: dict[Any, SharedSession] = {}

    @staticmethod
    def _key(path: Path) -> Any:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)

    def private(self, session: Session) -> SharedSession:
        """A session only one connection holds (in memory, or a placeholder)."""
        return SharedSession(session, self.make_gate())

    def adopt(self, session: Session, gate: Any = None) -> SharedSession:
        """Register a session just opened or created.

        If the same file is already open, the new object is closed and the open one shared."""
        if session.path is None:
            return SharedSession(session, gate if gate is not None else self.make_gate())
        key = self._key(session.path)
        with self._lock:
            got = self._open.get(key)
            if got is not None:
                got.refs += 1
            else:
                got = self._open[key] = SharedSession(session, gate if gate is not None else self.make_gate(), key)
                return got
        try:
            session.close()
        except Exception:
            pass
        return got

    def acquire(self, shared: SharedSession) -> SharedSession:
        """One more connection holds ``shared``."""
        with self._lock:
            shared.refs += 1
        return shared

    def open(self, path: str | os.PathLike[str]) -> SharedSession:
        """The shared session of the file at ``path`` (opened if no connection has it).

        Raises:
            FileNotFoundError, SessionFormatError, OSError: as :meth:`Session.open`.
        """
        try:
            key = self._key(Path(path).expanduser())
        except FileNotFoundError:
            raise
        except OSError:
            key = None
        if key is not None:
            with self._lock:
                got = self._open.get(key)
                if got is not None:
                    got.refs += 1
                    return got
        return self.adopt(Session.open(path))

    def create(self, spec: PendingSession) -> SharedSession:
        """Write the announced session ``spec``, or share it when another connection wrote it first.

        Written: its header, and its ``--name``."""
        with self._lock:
            exists = spec.path.exists()
        if exists:
            return self.open(spec.path)
        try:
            s = Session.create(
                spec.cwd,
                session_dir=spec.session_dir,
                session_id=spec.session_id,
                parent_session=spec.parent_session,
                timestamp=spec.timestamp,
            )
        except FileExistsError:  # another connection wrote it just now
            return self.open(spec.path)
        if spec.name is not None:
            s.append_session_info(spec.name)
        return self.adopt(s)

    def release(self, shared: SharedSession) -> None:
        """One connection lets ``shared`` go; the last one closes the session."""
        with self._lock:
            shared.refs -= 1
            last = shared.refs <= 0
            if last and shared.key is not None and self._open.get(shared.key) is shared:
                del self._open[shared.key]
        if last:
            try:
                shared.session.close()
            except Exception:
                pass


class _WriterGate:
    """One writer at a time: a write while another is running is refused, not queued."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> "_WriterGate":
        if not self._lock.acquire(blocking=False):
            raise RpcError("another client is writing to this session (one writer at a time); retry later")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()
