"""The state every concern of :class:`~sessiontree.session.Session` stands on.

:class:`SessionBase` holds the Rust index (``_core``), the file, the header and the writer
state, and the few private reads every concern shares: an entry's parsed value, an id's
position, the walk up from an entry, the leaf :meth:`Session.build_context` resolves, and the
naming of the entry a Pi error came from. The concerns are mixins over it (``reads.py``,
``views.py``, ``writes.py``, ``rewrites.py``, ``delegates.py``), assembled in ``__init__.py``
as ``rpc/server.py`` assembles ``RpcServer``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .. import _core
from .._jsjson import js_stringify_bytes
from ..entries import EntryView, parse_json_line
from ..errors import EntryNotFoundError, PiError, SessionError
from ..migrate import migrate_entry
from ..results import SessionHooks
from ..usage import UsageAccumulator
from ..validation import entry_content_error
from ..writer import DURABILITY_MODES, Durability, SessionWriter, check_lock_timeout


def dumps_entry(value: Any) -> bytes:
    """Serialize an entry as one JSON line's text (no newline).

    The bytes of Pi's ``JSON.stringify`` (:func:`sessiontree._jsjson.js_stringify_bytes`:
    orjson's text with JavaScript's number spelling, array-index keys first)."""
    return js_stringify_bytes(value)


def _as_indexed(entry_id: str) -> str:
    """An id with lone surrogates as the index keeps it: each lone surrogate as U+FFFD."""
    return entry_id.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def load_entry_value(core: _core.Index, i: int) -> Any:
    """Entry ``i``'s parsed line in the index ``core``, migrated in memory in a legacy (v1/v2) file."""
    raw = parse_json_line(core.line(i))
    if core.needs_migration:
        v1 = core.legacy_v1
        first_kept = None
        if v1 and isinstance(raw, dict) and raw.get("type") == "compaction":
            fk = raw.get("firstKeptEntryIndex")
            if isinstance(fk, int) and not isinstance(fk, bool) and fk >= 0:
                t = core.entry_at_value_pos(fk)
                if t is not None:
                    first_kept = core.record(t).id
        rec = core.record(i)
        raw = migrate_entry(
            raw,
            legacy_v1=v1,
            entry_id=rec.id,
            parent_id=rec.parent_id,
            first_kept_id=first_kept,
        )
    return raw


class SessionBase:
    """A session's state and the private reads its concerns share (see the module docstring)."""

    def __init__(
        self,
        core: _core.Index,
        *,
        path: Path | None,
        session_dir: Path | None,
        header: dict[str, Any],
        header_on_disk: bool,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
    ):
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, not {durability!r}")
        self._core = core
        self._view = EntryView(core, load_entry_value)  # what this session's Entry objects read
        self._path = path
        self._session_dir = session_dir
        self._header = header
        self._header_on_disk = header_on_disk
        self._durability: Durability = durability
        self._lock_timeout = check_lock_timeout(lock_timeout)
        self._writer: SessionWriter | None = None
        self._ready = False
        # taking the lock, migrating and writing the header happen once per writer lock; a
        # thread lock keeps two threads from doing them twice (appends themselves are single
        # core calls, each atomic under the GIL)
        self._prepare_lock = threading.RLock()
        self._read_only = False
        self._source_name: str | None = None
        # state the facade's friends use, declared here (never set in ``__dict__`` from outside)
        self._compaction_lock = threading.Lock()
        self._hooks: SessionHooks | None = None
        self._usage_acc: tuple[Any, UsageAccumulator] | None = None

    # ==== what the concerns ask of one another (defined in their modules) ==========
    if TYPE_CHECKING:

        @property
        def leaf_id(self) -> str | None: ...
        @property
        def cwd(self) -> str: ...
        def flush(self) -> None: ...
        def _get_writer(self) -> SessionWriter: ...
        def close(self) -> None: ...
        def migrate(self) -> bool: ...
        def raw_values(self, indices: Sequence[int]) -> list[Any]: ...
        def context_span(self, *, with_settings: bool = True, context_rule: bool = True) -> list[int]: ...

    # ==== the private reads every concern shares ====================================

    def _load_raw(self, i: int) -> Any:
        return load_entry_value(self._core, i)

    def _lookup(self, entry_id: str) -> int | None:
        """Index of the entry with this id, or None. An id with a lone surrogate is looked up
        the way the index keeps it (each lone surrogate as U+FFFD)."""
        try:
            return self._core.index_of(entry_id)
        except UnicodeEncodeError:
            return self._core.index_of(_as_indexed(entry_id))

    def _index_of(self, entry_id: str) -> int:
        # an id that is not a string names no entry (get_entry returns None for it): the one error
        i = self._lookup(entry_id) if isinstance(entry_id, str) else None
        if i is None:
            raise EntryNotFoundError.of(entry_id)
        return i

    def _walk(self, i: int) -> list[int]:
        return self._core.branch(i)

    def _branch_walk(self, from_id: str | None) -> list[int]:
        # Pi getBranch's positions, root first: from ``from_id`` (None: the leaf; [] when the
        # leaf is null or names no entry); the one home of get_branch, branch_positions, branch_table
        if from_id is None:
            leaf = self._core.leaf()
            return [] if leaf is None else self._core.branch(leaf)
        return self._core.branch(self._index_of(from_id))

    def _context_leaf(self) -> int | None:
        # Pi buildSessionContext: null leaf → nothing; unknown leaf id → the last entry.
        if self._core.leaf_is_null():
            return None
        leaf = self._core.leaf()
        if leaf is None and len(self._core):
            leaf = len(self._core) - 1
        return leaf

    def _context_path(self) -> list[int]:
        leaf = self._context_leaf()
        return [] if leaf is None else self._walk(leaf)

    def _name_entry(self, exc: PiError) -> PiError:
        """``exc`` naming the entry whose content raised it (id and line).

        The first entry on the current branch, then in the file, whose content raises the same
        Pi error (:func:`sessiontree.validation.entry_content_error`). Runs only when an error
        was raised."""
        if exc.entry_id is not None or exc.line is not None:
            return exc
        try:
            path = self._context_path()
        except SessionError:
            path = []
        seen = set(path)
        for i in [*path, *(k for k in range(len(self._core)) if k not in seen)]:
            err = entry_content_error(self._load_raw(i))
            if err is not None and err.pi_error == exc.pi_error:
                rec = self._core.record(i)
                return exc.at_entry(rec.id, rec.line)
        return exc
