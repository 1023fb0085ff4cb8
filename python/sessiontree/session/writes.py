"""Writing: the writer lock, the two append paths, moving the leaf, flush and sync.

Appends go through :meth:`Writes._append_field` (the core builds, writes and indexes the
line) or :meth:`Writes._append_built` (an entry Python builds whole, checked against the
leaf); the file I/O itself lives in :mod:`sessiontree.writer`.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable

from orjson import dumps as _orjson_dumps  # the append path's one global lookup

from .._jsjson import js_stringify_bytes, js_trim
from ..errors import EntryNotFoundError, LeafMovedError, SessionReadOnlyError
from ..message_shape import check_message_shape
from ..paths import iso_now
from ..writer import SessionWriter
from .base import SessionBase, dumps_entry

_FORBIDDEN_MESSAGE_ROLES = frozenset(("compactionSummary", "branchSummary"))


class _AnyLeaf:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<any leaf>"


_ANY_LEAF: Any = _AnyLeaf()


def _require_str(**values: Any) -> None:
    """TypeError naming the first argument that is not a str (Pi's fields are strings)."""
    for name, value in values.items():
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def _set_optional(entry: dict[str, Any], details: Any, usage: Any, from_hook: Any) -> None:
    """Summary entries' optional keys in Pi's order; None (JS undefined) is omitted."""
    if details is not None:
        entry["details"] = details
    if usage is not None:
        entry["usage"] = usage
    if from_hook is not None:
        entry["fromHook"] = from_hook


# Sessions holding a writer lock: a child process forked from ours drops their writers (see
# `_drop_writers_after_fork`).
_WRITING: "weakref.WeakSet[Writes]" = weakref.WeakSet()


def _drop_writers_after_fork() -> None:
    """In a child process after ``os.fork()``.

    Every Session that was writing becomes a reader of what it knows. The entries the parent
    buffered are the parent's to write (the child writing them too would write them twice), and
    the parent's lock is not the child's (the child's next write takes the lock anew, and waits
    for the parent's)."""
    for s in list(_WRITING):
        s._forget_writer_after_fork()
    _WRITING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_writers_after_fork)


class Writes(SessionBase):
    """The writer lock, Pi's ``append*`` methods, ``branch``, ``reset_leaf``, ``flush``, ``sync``."""

    # ==== the writer lock ==========================================================

    def lock(self) -> None:
        """Take the writer lock now, so that a locked file fails before slow work (a summary).

        Otherwise the first write takes it; a read-only file fails here too. Held until
        :meth:`close`. Does nothing for an in-memory session.

        Raises:
            SessionLockedError: another writer holds the lock.
            OSError: the file cannot be opened for writing.
        """
        if self._path is not None:
            self._lock()

    def _get_writer(self) -> SessionWriter:
        if self._writer is None:
            assert self._path is not None  # only file sessions write through a writer
            self._writer = SessionWriter(self._path, self._lock_timeout)
        return self._writer

    def _lock(self) -> None:
        """Take the writer lock (on first taking it, index what others appended meanwhile).

        Then hand the core the descriptor to write to. The leaf is then the file's current leaf (its
        last entry, so writers taking turns build one chain), unless the caller had moved it
        away from the file's last entry (``branch``, ``reset_leaf``): that choice is kept."""
        writer = self._get_writer()
        if writer.acquire():
            try:
                leaf_null = self._core.leaf_is_null()
                leaf = self._core.leaf()
                n = len(self._core)
                # the leaf a scan leaves (the last entry in file order; a last entry with an
                # id that names nothing leaves a leaf that names nothing)
                follows_file = n == 0 or (leaf == n - 1 if leaf is not None else not leaf_null)
                if self._core.refresh() and not follows_file:
                    self._core.set_leaf(None if leaf_null or leaf is None else leaf)
                self._core.attach_writer(writer.fd, self._durability)
                _WRITING.add(self)
            except BaseException:
                self._writer = None
                writer.close()
                raise

    def _prepare_write(self) -> None:
        with self._prepare_lock:
            self._prepare_write_locked()

    def _prepare_write_locked(self) -> None:
        if self._ready:
            return
        if self._read_only:
            raise SessionReadOnlyError(
                f"session {self._source_name or '<bytes>'} is read-only (made with Session.from_bytes): nothing was written"
            )
        if self._path is None:
            self._ready = True  # in memory: appends only index
            return
        self._lock()
        if self._core.needs_migration:
            self.migrate()
            self._lock()
        if not self._header_on_disk:
            self._core.write_lines(dumps_entry(self._header) + b"\n")
            self._header_on_disk = True
        elif self._core.ends_without_newline():
            # never glue an entry to a torn or unterminated last line
            self._core.write_lines(b"\n")
        self._ready = True  # lock held, header written, file ends with a newline

    def _forget_writer_after_fork(self) -> None:
        # a thread of the parent may have held this lock at the fork: the child gets a new one
        self._prepare_lock = threading.RLock()
        self._ready = False
        writer, self._writer = self._writer, None
        if writer is not None:
            self._core.forget_writer()
            writer.close()  # the child's copy only: the parent's descriptor keeps the lock

    # ==== the two append paths =====================================================

    def _generate_id(self) -> str:
        """Pi ``generateId``: 8 hex digits not used in this session (the core's one generator)."""
        return self._core.new_id()

    def _append_built(self, build: Callable[[], dict[str, Any]]) -> str:
        """Append the entry ``build()`` makes (from the leaf, via :meth:`_base`, or whole). Should another
        thread append or branch between reading the leaf and writing, nothing is written and
        the entry is built again from the new leaf, so appends from several threads still form
        one chain. Returns the entry's id."""
        if not self._ready:
            self._prepare_write()
        while True:
            version = self._core.leaf_version
            entry = build()
            if self._core.write_lines_if(dumps_entry(entry) + b"\n", version):
                entry_id: str = entry["id"]
                return entry_id

    def _append_field(self, type_: str, name: str | None, value: Any) -> str:
        """Append ``{type, id, parentId: leaf, timestamp, name: value}`` (Pi's key order) in one core call.

        The Rust core picks the id and timestamp, builds (giving orjson's text
        ``JSON.stringify``'s number spelling), writes (per the durability mode) and indexes the
        line; ``value`` is serialized alone and the core writes ``"name":`` before it. ``name``
        None: ``value`` is the dict of fields, written after the four. Returns the new id.

        One of the two append paths; the other, :meth:`_append_built`, is for entries
        Python builds whole (a compaction checked against the leaf, a branch summary, custom
        entries).

        The hot path of append_message: orjson's text, made ``JSON.stringify``'s by the core as
        it builds the line; the exact Python writer when orjson cannot write the value, or when
        an object has an array-index key (then the core appends nothing and returns None)."""
        if not self._ready:
            self._prepare_write()
        try:  # (append_entry raises no TypeError for a str type and name)
            entry_id = self._core.append_entry(type_, _orjson_dumps(value), name)
        except TypeError:  # orjson.JSONEncodeError included
            entry_id = None
        if entry_id is None:
            entry_id = self._core.append_entry(type_, js_stringify_bytes(value), name, False)
            assert entry_id is not None  # js=False: the core writes the text as given
        return entry_id

    def _base(self, type_: str) -> dict[str, Any]:
        return {"type": type_, "id": self._generate_id(), "parentId": self._leaf_for_parent(), "timestamp": iso_now()}

    def _leaf_for_parent(self) -> str | None:
        return self._core.leaf_id()

    # ==== Pi's append methods ======================================================

    def append_message(self, message: dict[str, Any], *, strict: bool = False) -> str:
        """Append a ``message`` entry (child of the leaf; becomes the leaf). Returns its id.

        ``message`` is an ``AgentMessage`` dict (``role`` user/assistant/toolResult/
        bashExecution/custom/system...). Compaction and branch summaries are entries of their
        own (:meth:`append_compaction`, :meth:`branch_with_summary`), as in Pi. Like Pi's
        ``appendMessage``, anything JSON can hold is accepted; with ``strict=True`` the message
        must have Pi's shape for its role (known role, ``timestamp`` an int of milliseconds,
        content blocks and required fields of the right types, finite numbers, JSON values
        only: :func:`sessiontree.message_shape.check_message_shape`).

        Raises:
            TypeError: ``message`` is not a dict.
            ValueError: its role is ``compactionSummary`` or ``branchSummary``.
            MessageShapeError: ``strict`` and the message is not Pi's shape (nothing appended).
        """
        if not isinstance(message, dict):
            raise TypeError("message must be a dict")
        if strict:
            check_message_shape(message)
        if message.get("role") in _FORBIDDEN_MESSAGE_ROLES:
            raise ValueError(f"{message.get('role')} messages are appended as their own entries, not as messages")
        return self._append_field("message", "message", message)

    def append_thinking_level_change(self, thinking_level: str) -> str:
        """Append a ``thinking_level_change`` entry. Returns its id.

        Raises:
            TypeError: ``thinking_level`` is not a str.
        """
        _require_str(thinking_level=thinking_level)
        return self._append_field("thinking_level_change", "thinkingLevel", thinking_level)

    def append_model_change(self, provider: str, model_id: str) -> str:
        """Append a ``model_change`` entry (``provider``, ``modelId``). Returns its id.

        Raises:
            TypeError: ``provider`` or ``model_id`` is not a str.
        """
        _require_str(provider=provider, model_id=model_id)
        return self._append_field("model_change", None, {"provider": provider, "modelId": model_id})

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        *,
        usage: dict[str, Any] | None = None,
        system_message: dict[str, Any] | None = None,
        expected_leaf_id: Any = _ANY_LEAF,
    ) -> str:
        """Append a ``compaction`` entry. Returns its id.

        Keys in Pi's order: summary, firstKeptEntryId, tokensBefore, details, usage, fromHook;
        None values are omitted.

        ``expected_leaf_id``: append only if the leaf is still this id (None: no entry yet),
        checked atomically with the write, so a summary of one branch never lands on another.

        Raises:
            EntryNotFoundError: ``first_kept_entry_id`` names no entry (a retain-none
                compaction names its own id: pass None to get that).
            LeafMovedError: the leaf is not ``expected_leaf_id`` (nothing appended).
        """
        if first_kept_entry_id is not None and self._lookup(first_kept_entry_id) is None:
            raise EntryNotFoundError.of(first_kept_entry_id)

        def build() -> dict[str, Any]:
            if expected_leaf_id is not _ANY_LEAF and self._core.leaf_id() != expected_leaf_id:
                raise LeafMovedError(
                    f"the leaf moved from {expected_leaf_id!r} to {self._core.leaf_id()!r} while the compaction "
                    "was prepared; nothing appended",
                    expected_leaf_id,
                    self._core.leaf_id(),
                )
            e = self._base("compaction")
            e["summary"] = summary
            e["firstKeptEntryId"] = e["id"] if first_kept_entry_id is None else first_kept_entry_id
            e["tokensBefore"] = tokens_before
            if system_message is not None:
                e["systemMessage"] = system_message
            _set_optional(e, details, usage, from_hook)
            return e

        return self._append_built(build)

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        """Append a ``custom`` entry (extension state; not in the model context). Returns its id.

        Raises:
            TypeError: ``custom_type`` is not a str.
        """
        _require_str(custom_type=custom_type)
        e: dict[str, Any] = {"type": "custom", "customType": custom_type}
        if data is not None:
            e["data"] = data
        return self._append_built(lambda: {**e, **self._base("custom")})

    def append_custom_message_entry(self, custom_type: str, content: Any, display: bool, details: Any = None) -> str:
        """Append a ``custom_message`` entry (in the model context as a ``custom`` message).
        ``content`` is a string or a list of text/image blocks. Returns its id.

        Raises:
            TypeError: ``custom_type`` is not a str.
        """
        _require_str(custom_type=custom_type)
        e: dict[str, Any] = {
            "type": "custom_message",
            "customType": custom_type,
            "content": content,
            "display": display,
        }
        if details is not None:
            e["details"] = details
        return self._append_built(lambda: {**e, **self._base("custom_message")})

    def append_label_change(self, target_id: str, label: str | None) -> str:
        """Set (or with None / ``""`` clear) the label of an entry. Returns the label entry's id.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry (Pi: ``Entry <id> not found``).
        """
        if label is not None:
            _require_str(label=label)
        self._index_of(target_id)
        return self._append_field(
            "label", None, {"targetId": target_id} if label is None else {"targetId": target_id, "label": label}
        )

    def append_context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """Append a ``context_edit`` entry (Pi 1.6).

        ``replacement`` None omits the target's message from future model context; ``{"content":
        ...}`` replaces its content (a string becomes one text block for assistant and
        tool-result messages). The target entry itself is never changed. Returns the edit's id.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry.
            TypeError: ``replacement`` is neither None nor a dict.
        """
        self._index_of(target_id)
        if replacement is not None and not isinstance(replacement, dict):
            raise TypeError("replacement must be None or a dict such as {'content': ...}")
        return self._append_field("context_edit", None, {"targetId": target_id, "replacement": replacement})

    def append_session_info(self, name: str) -> str:
        """Append a ``session_info`` entry naming the session (``name`` is trimmed). Returns its id.

        Raises:
            TypeError: ``name`` is not a str.
        """
        _require_str(name=name)
        return self._append_field("session_info", "name", js_trim(name))

    # ==== moving the leaf ==========================================================

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an earlier entry; the next append starts a new branch there.

        Raises:
            EntryNotFoundError: no entry has this id.
        """
        self._core.set_leaf(self._index_of(entry_id))

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append becomes a new root."""
        self._core.set_leaf(None)

    def branch_with_summary(
        self,
        entry_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
        *,
        usage: dict[str, Any] | None = None,
    ) -> str:
        """Move the leaf to ``entry_id`` and append a ``branch_summary`` entry there.

        ``entry_id`` None: before the first entry. The entry's ``fromId`` is the abandoned leaf
        (``"root"`` when there was none). Returns the summary entry's id.

        Raises:
            EntryNotFoundError: ``entry_id`` names no entry.
        """
        if self._read_only:
            self._prepare_write()  # raises before the leaf moves
        old_leaf = self.leaf_id
        if entry_id is not None:
            self._index_of(entry_id)
        e = {
            "type": "branch_summary",
            "id": self._generate_id(),
            "parentId": entry_id,
            "timestamp": iso_now(),
            "fromId": old_leaf if old_leaf is not None else "root",
            "summary": summary,
        }
        _set_optional(e, details, usage, from_hook)
        if entry_id is None:
            self._core.set_leaf(None)
        else:
            self._core.set_leaf(self._index_of(entry_id))
        return self._append_built(lambda: e)  # the leaf is set: e names its parent itself

    # ==== durability ===============================================================

    def flush(self) -> None:
        """Write out entries buffered by ``durability="none"``.

        Raises:
            OSError: the write failed (the entries stay buffered and indexed).
        """
        if self._writer is not None:
            self._core.flush_writes()

    def sync(self) -> None:
        """Flush and fsync: every entry appended so far survives a machine crash.

        Raises:
            OSError: the write or the fsync failed.
        """
        if self._writer is not None:
            self._core.sync_writes()
