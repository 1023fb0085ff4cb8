"""What every command of :class:`~sessiontree.rpc.RpcServer` stands on.

The connection's current session (shared through a
:class:`~sessiontree.rpc.sessions.SessionRegistry`), the new session announced but not yet
written, the refresh before a command, events, and the writer gate around a write. The commands
themselves are in ``reads.py`` and ``writes.py``."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from ..paths import default_session_dir
from ..session import Session
from .protocol import Text, encode, response
from .sessions import PendingSession, SessionRegistry, SharedSession


class ServerBase:
    """One connection's state and the helpers its commands share.

    See :class:`RpcServer` for the arguments."""

    def __init__(
        self,
        session: Session | None = None,
        *,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        model: dict[str, Any] | None = None,
        models: list[dict[str, Any]] | None = None,
        settings: dict[str, Any] | None = None,
        summarizer: Any = None,
        cwd: str | None = None,
        session_dir: str | os.PathLike[str] | None = None,
        persist: bool = True,
        write_lock: Any = None,
        release_after_write: bool = True,
        session_ref: "SharedSession | None" = None,
        registry: "SessionRegistry | None" = None,
        pending: "PendingSession | None" = None,
    ):
        self.cwd = cwd or os.getcwd()
        self.session_dir = Path(session_dir) if session_dir is not None else None
        self.persist = persist
        self.on_event = on_event or (lambda event: None)
        self.models = list(models or [])
        self.model = model
        self.settings = settings or {}
        self.summarizer = summarizer
        self.release_after_write = release_after_write
        self.hello = False
        self.is_compacting = False
        self.registry = registry if registry is not None else SessionRegistry()
        self._pending: PendingSession | None = None
        self._followers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._text_ok = False  # handle_line(text_ok=True): answers may come as Text
        if session_ref is not None:
            self._cur = self.registry.acquire(session_ref)
        elif session is not None:
            self._cur = self.registry.adopt(session, gate=write_lock)
        elif pending is not None or persist:
            self._cur = self.registry.private(Session.in_memory(self.cwd))
            self._start_pending(pending or self._new_pending_spec(None))
        else:
            self._cur = self.registry.private(Session.in_memory(self.cwd))

    # ---- session access ----

    @property
    def session(self) -> Session:
        """The session this connection holds now (``new_session``/``switch_session``/``fork``
        change it)."""
        return self._cur.session

    @property
    def write_lock(self) -> Any:
        """The writer gate of the current session (shared by every connection on its file)."""
        return self._cur.gate

    @property
    def pending(self) -> "PendingSession | None":
        """The new session announced but not written yet (None once written, or for a file)."""
        return self._pending

    def _new_pending_spec(self, parent_session: str | None, session_id: str | None = None) -> "PendingSession":
        cwd = self.session.cwd if getattr(self, "_cur", None) is not None else self.cwd
        sdir = self.session_dir or default_session_dir(cwd)
        return PendingSession(cwd, sdir, session_id=session_id, parent_session=parent_session)

    def _start_pending(self, spec: "PendingSession") -> None:
        """Serve ``spec`` (not written yet) from an in-memory placeholder with its id."""
        self.cwd = spec.cwd
        self._switch_to(self.registry.private(Session.in_memory(spec.cwd, session_id=spec.session_id)))
        self._pending = spec

    def _materialize(self) -> Session:
        """A new session is written on its first entry (Pi writes it lazily too), at the path announced.

        Connections waiting on the same announced session share the file."""
        spec = self._pending
        if spec is not None:
            shared = self.registry.create(spec)
            self._switch_to(shared)
        return self._cur.session

    def _session_file(self) -> Optional[str]:
        if self._pending is not None:
            return str(self._pending.path)
        if self.session.path is None:
            return None
        return os.path.abspath(self.session.path)  # Pi resolves the path it was given

    def _session_name(self) -> Optional[str]:
        if self._pending is not None and self._pending.name is not None:
            return self._pending.name
        return self.session.session_name

    def close(self) -> None:
        """Stop the follower threads and release the session; never raises.

        Each thread is waited for up to 2 s; the session is closed when no other connection
        holds it."""
        self._stop.set()
        for t in self._followers:
            t.join(timeout=2)
        try:
            self.registry.release(self._cur)
        except Exception:
            pass

    # ---- around a command ----

    def _refresh(self) -> None:
        """Index what other processes appended since the last command (cost: the new bytes).
        An announced session another connection has written since is served from its file."""
        if self._pending is not None:
            if self._pending.path.exists():
                self._materialize()
            return
        if self.session.path is not None:
            self.session.refresh()

    def _emit(self, event: dict[str, Any]) -> None:
        try:
            self.on_event(event)
        except Exception:
            pass

    def _write(self, fn: Callable[[Session], Any]) -> Any:
        """Run a write under the current file's writer gate (one writer at a time per file).

        Release the file lock afterwards when ``release_after_write``."""
        self._materialize()
        shared = self._cur
        with shared.gate:
            s = shared.session
            try:
                return fn(s)
            finally:
                if self.release_after_write:
                    s.close()

    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """The current session's answer ``name``, computed once per state of its bytes and leaf.

        Kept by :class:`~sessiontree.rpc.sessions.AnswerCache`, shared by the connections on its
        file. Only for values that depend on nothing but the session."""
        return self._cur.cache.get(self.session, name, compute)

    def _reply(
        self,
        cmd_id: Any,
        ctype: str,
        name: str,
        build: Callable[[], dict[str, Any]],
        text: Callable[[], bytes] | None = None,
    ) -> dict[str, Any]:
        """A success response whose ``data`` (``build()``) depends only on the session.

        Cached; for a transport (``text_ok``) its JSON text is cached too (``text()`` writes it
        directly, when given, without building the value)."""
        if self._text_ok:
            data_text = self._cached(name + ":text", text or (lambda: encode(self._cached(name, build))))
            return Text(cmd_id, ctype, data_text)
        return response(cmd_id, ctype, dict(self._cached(name, build)))

    def _context(self) -> Any:
        """The current session's :meth:`Session.build_context` (cached)."""
        return self._cached("context", self.session.build_context)

    def _switch_to(self, shared: "SharedSession") -> None:
        """Make ``shared`` this connection's session and release the previous one.

        Other connections stay where they are."""
        old = getattr(self, "_cur", None)
        self._cur = shared
        self._pending = None
        if old is not None and old is not shared:
            self.registry.release(old)

    def _switch_session_to(self, session: Session) -> None:
        self._switch_to(self.registry.adopt(session) if session.path is not None else self.registry.private(session))
