"""Exceptions raised by sessiontree. All derive from :class:`SessionError`."""
from __future__ import annotations


class SessionError(Exception):
    """Base class of every error sessiontree raises on purpose."""


class PiError(SessionError, ValueError):
    """Pi itself would throw on this input (malformed content reached by its code).

    ``str(err)`` and ``err.pi_error`` are Pi's exact JavaScript error text, e.g.
    ``"TypeError: content is not iterable"``: the goldens record them as ``pi_error``.
    """

    def __init__(self, pi_error: str) -> None:
        super().__init__(pi_error)
        self.pi_error = pi_error


class SessionFormatError(SessionError, ValueError):
    """The file is not a Pi session (Pi: ``Session file is not a valid pi session: <path>``).

    Raised when the first JSON value of the file is not an object with ``type: "session"`` and a
    string ``id`` (a UTF-8 BOM before the header, a missing header, a header that is not first),
    or when a file holds bytes but no JSON value at all. The file is never modified.
    """


class SessionCycleError(SessionError):
    """A ``parentId`` chain loops. Pi would loop until it runs out of memory; we stop.

    Attributes:
        ids: the entry ids on the cycle, in walk order (child to parent), as strings
            (``None`` for an entry whose id is not a string).
    """

    def __init__(self, message: str, ids: list[str | None]):
        super().__init__(message)
        self.ids = ids


class EntryNotFoundError(SessionError, KeyError):
    """No entry has the given id (Pi: ``Entry <id> not found``)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class SessionFileChangedError(SessionError):
    """The session file shrank or was replaced under us; the index no longer describes it."""


class SessionLockedError(SessionError):
    """Another writer holds the session file's lock."""


class SessionReadOnlyError(SessionError):
    """A write was attempted on a session opened read-only."""


class SessionArgumentError(SessionError, ValueError, TypeError):
    """An argument of the API is of the wrong type or out of its documented range (e.g.
    ``lock_timeout=float("nan")``). Catch it as :class:`SessionError`, ``ValueError`` or
    ``TypeError``."""


class MessageShapeError(SessionError, ValueError):
    """``append_message(..., strict=True)`` got a message that is not one of Pi's
    ``AgentMessage`` shapes (see :mod:`sessiontree.message_shape`); the message says which
    field. Nothing was appended."""
