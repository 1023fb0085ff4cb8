"""Exceptions raised by sessiontree: one tree under :class:`SessionTreeError`.

``except sessiontree.SessionTreeError`` catches anything the package raises on purpose:
session errors (:class:`SessionError` and below), Pi's own throws mirrored
(:class:`PiError`), summarizer errors, hook-result errors and token-counter errors. Each
subclass also keeps a standard base where one fits (``ValueError``, ``KeyError``), so existing
``except ValueError`` clauses still work. The Rust core raises these same classes (created once
per interpreter, see ``rust/src/py.rs``).
"""

from __future__ import annotations

# typing is not imported at run time (``import sessiontree`` loads this module only; the
# annotations are strings): type checkers read the names below.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence


class SessionTreeError(Exception):
    """Base class of every exception sessiontree defines."""


class SessionError(SessionTreeError):
    """A session-level failure: bad file, cycle, missing entry, lock, changed file..."""


class PiError(SessionError, ValueError):
    """Pi itself would throw on this input (malformed content reached by its code).

    ``str(err)`` and ``err.pi_error`` are Pi's exact JavaScript error text, e.g.
    ``"TypeError: content is not iterable"``: the goldens record them as ``pi_error``.
    When the error is raised from an entry's content, :meth:`at_entry` adds the entry's id and
    line to ``str(err)`` (``err.pi_error`` stays Pi's text).

    Attributes:
        pi_error: Pi's exact text (what the goldens record), never decorated.
        entry_id: the id of the entry whose content made Pi throw, when known (else None).
        line: that entry's 1-based line in the session file, when known (else None).
    """

    entry_id: Any = None
    line: int | None = None

    def __init__(self, pi_error: str) -> None:
        super().__init__(pi_error)
        self.pi_error = pi_error

    def at_entry(self, entry_id: Any, line: int | None) -> "PiError":
        """Record which entry's content raised this; ``str(err)`` then names it:
        ``"TypeError: ... (entry 'a1b2c3d4', line 7)"``. Returns ``self`` (for ``raise``)."""
        if self.entry_id is None and self.line is None:
            self.entry_id, self.line = entry_id, line
            where = f"entry {entry_id!r}" + (f", line {line}" if line is not None else "")
            self.args = (f"{self.pi_error} ({where})",)
        return self


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

    def __init__(self, message: str, ids: Sequence[str | None]):
        super().__init__(message)
        self.ids = list(ids)


class EntryNotFoundError(SessionError, KeyError):
    """No entry has the given id. Its one wording is :meth:`of`'s, Pi's RPC text
    ``Entry not found: <id>`` (Pi's ``SessionManager.branch`` says ``Entry <id> not found``;
    every sessiontree surface uses the one text).

    Attributes:
        entry_id: the id looked up (any JSON value), when made by :meth:`of`; else ``None``.
    """

    entry_id: Any = None

    @classmethod
    def of(cls, entry_id: Any) -> "EntryNotFoundError":
        """The error for ``entry_id``: ``Entry not found: <id>`` (``entry_id`` kept)."""
        err = cls(f"Entry not found: {entry_id}")
        err.entry_id = entry_id
        return err

    def __str__(self) -> str:  # KeyError quotes its argument; keep the plain message
        return str(self.args[0]) if self.args else ""


class SessionFileChangedError(SessionError):
    """The session file shrank or was replaced under us; the index no longer describes it."""


class OutputPathError(SessionError, OSError):
    """An output path we refuse to write (:func:`sessiontree.session.atomic_write`): it names
    something that is not a regular file (a FIFO, a device, a directory, a socket), a symbolic
    link (we never write through one: pass its target), or the file being read (the same
    device and inode: the path itself or a hard link). Nothing was written. It is an
    ``OSError`` (``errno`` ``EEXIST``, ``filename`` the path) so ``except OSError`` callers see
    a write that failed."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}" if self.filename is not None else str(self.strerror or "")


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


class LeafMovedError(SessionError):
    """The leaf moved between preparing a compaction and appending it (a hook, another task or
    thread navigated or appended): the summary describes another branch, so nothing was
    appended. ``expected`` and ``actual`` are the leaf ids (None: before the first entry)."""

    def __init__(self, message: str, expected: str | None = None, actual: str | None = None):
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class ConvertError(SessionTreeError, ValueError):
    """A conversion between agents' formats (:mod:`sessiontree.convert`) that wrote nothing:
    an unsupported pair of formats, or a source it cannot read as the format named."""


class UnrecognisedFormatError(ConvertError):
    """The source is not a Claude Code transcript, a Codex rollout or a Pi session (detected
    from the content of its first lines), or not the format asked for."""


class SearchQueryError(SessionTreeError, ValueError):
    """A search query that does not parse (:func:`sessiontree.search`): ``str(err)`` is one
    line, ``bad query: why`` (an unclosed quote, ``OR`` without an item on each side, a
    negated item inside an ``OR``, only negated items, nothing to search for)."""


class SearchIndexError(SessionTreeError):
    """The search index could not be built or written, even after a rebuild (a full disk, a
    cache folder that refuses writes)."""
