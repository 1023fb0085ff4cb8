"""The stateful session: a Pi session file (JSONL v3) indexed by the Rust core.

Mirrors Pi's ``SessionManager`` (session-manager.ts) with three deliberate safety
differences, each listed in ``docs/divergences.md``:

* opening never writes: Pi appends a missing final newline, migrates v1/v2 files and gives
  an empty file a header on open; we do that (atomically) only when the caller writes;
* a ``parentId`` cycle raises :class:`SessionCycleError` where Pi loops forever;
* a file holding bytes but no JSON value raises :class:`SessionFormatError` where Pi would
  overwrite it with a fresh header.

    >>> s = Session.in_memory("/tmp/project")
    >>> first = s.append_message({"role": "user", "content": "hi", "timestamp": 1})
    >>> s.get_entry(first)["message"]["content"]
    'hi'
    >>> [m["role"] for m in s.build_context().messages]
    ['user']

The class is assembled from one module per concern; this one holds construction and lifetime:

* ``base.py``: the state and the private reads every concern shares;
* ``reads.py``: Pi ``SessionManager``'s read API (``get_entry`` ... ``build_context``,
  ``usage_totals``, ``validate``, ``refresh``);
* ``views.py``: the batch views the package's own layers read (positions in, lists out);
* ``writes.py``: the writer lock, the two append paths, ``branch``, ``reset_leaf``,
  ``branch_with_summary``, ``flush``, ``sync``;
* ``rewrites.py``: ``migrate``, ``scrub``, ``export_html``, ``create_branched_session``;
* ``delegates.py``: the hooks, the cut point, and the compaction and navigation pairs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .. import _core
from ..entries import parse_json_line
from ..errors import SessionCycleError, SessionError, SessionFormatError
from ..index_cache import IndexCache
from ..index_cache import open_kwargs as index_cache_open_kwargs
from ..migrate import CURRENT_SESSION_VERSION, migrate_header
from ..paths import check_session_id, default_session_dir, inside, iso_now, new_session_id, session_file_name
from ..writer import (
    AtomicWriter,
    Durability,
    atomic_write,
    atomic_writer,
    check_lock_timeout,
    create_new_file,
    file_head,
    write_copy,
)  # the file I/O; atomic_write, atomic_writer and AtomicWriter stay importable from here

# the column and result types of the views, defined beside the entry views; importable from here
from ..entries import AbandonedBranch as AbandonedBranch
from ..entries import CutPoint as CutPoint
from ..entries import EntryMetrics as EntryMetrics
from ..entries import EntryTable as EntryTable
from ..entries import SCRUB_KINDS as SCRUB_KINDS
from ..entries import new_scrubber as new_scrubber
from .base import dumps_entry
from .delegates import Delegates
from .reads import Reads
from .rewrites import Rewrites
from .views import Views
from .writes import _WRITING, Writes, _require_str

# ==== the core's other objects, for the layers above ==============================
# Only the session/ package, entries.py, _jsjson.py and paths.py import ``_core``
# (tests/seams/test_public_api_seams.py); what other modules need of it is handed out by them
# (the scrubber by entries.py, beside the scrubber's finding type).

#: The package's one version: Cargo.toml's, compiled into the core (``sessiontree.__version__``).
__version__: str = _core.__version__


def convert_detect(path: str) -> str:
    """The core's format detection (``_core.convert_detect``, rust/src/convert/).

    ``"claude-code"``, ``"codex"`` or ``"pi"`` from a file's first lines.
    :mod:`sessiontree.convert` drives it."""
    return _core.convert_detect(path)


def convert_file(
    src: str,
    out: str,
    source: str,
    target: str,
    shown: str | None = None,
    store: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The core's conversion (``_core.convert_file``, rust/src/convert/, the GIL released).

    ``store``: ``(source folder, output folder)`` of a whole store's conversion (a Codex fork's
    ``parentSession`` then names its parent's Pi output). Its report as a dict.
    :mod:`sessiontree.convert` drives it and makes the typed result."""
    if store is None:
        return _core.convert_file(src, out, source, target, shown)
    return _core.convert_file(src, out, source, target, shown, store[0], store[1])


def convert_detect_bytes(data: bytes, name: str) -> str:
    """:func:`convert_detect` over a file's bytes held in memory (``_core.convert_detect_bytes``)."""
    return _core.convert_detect_bytes(data, name)


def convert_bytes(data: bytes, name: str, source: str) -> tuple[bytes, dict[str, Any]]:
    """The core's in-memory conversion to Pi (``_core.convert_bytes``, the GIL released).

    The main Pi session's bytes and the report as a dict. :mod:`sessiontree.convert` drives it."""
    return _core.convert_bytes(data, name, source)


def convert_bytes_all(data: bytes, name: str, source: str) -> tuple[list[tuple[str, bytes]], dict[str, Any]]:
    """:func:`convert_bytes` with every session made (``_core.convert_bytes_all``).

    ``[(path, pi_bytes), ...]``, the main one first (named ``name``), then Claude Code sidechain
    sessions named beside it (paths as ``str``, their bytes kept: ``os.fsdecode``); and the
    report as a dict. ``convert-all`` writes them for objects in storage."""
    made, report = _core.convert_bytes_all(data, name, source)
    return [(os.fsdecode(os.fspath(p)), b) for p, b in made], report


def _bom_reason(head: bytes) -> str | None:
    """Why bytes starting with a UTF-8 byte order mark are not a session (None: no BOM).

    ``head`` is the first bytes. The one text, for a local file
    and for bytes from storage (:meth:`Session.from_bytes`, the fleet's S3 reads) alike. (Pi's
    ``JSON.parse`` refuses the BOM, so the header line is not JSON to Pi either: acceptance
    stays Pi's, only the message names the cause.)"""
    return "UTF-8 BOM at byte 0 (Pi rejects it)" if bytes(head[:3]) == b"\xef\xbb\xbf" else None


class Session(Reads, Views, Writes, Rewrites, Delegates):
    """A Pi session: header, append-only entries forming a tree, and a movable leaf.

    Create one with :meth:`open`, :meth:`create`, :meth:`in_memory`, :meth:`fork_from` or
    :meth:`continue_recent`. Reading never materializes every entry: ids, parents, types,
    children and labels come from the Rust index; an entry's JSON is parsed only when asked.

    Properties: ``path`` (Path or None in memory), ``session_id``, ``cwd``, ``header``
    (dict, after migration), ``leaf_id``, ``session_name``, ``labels`` (dict id → label),
    ``problems`` (list of :class:`Problem`), ``len(session)`` (entries in file order, header
    excluded, duplicates included).
    """

    # ==== construction ===========================================================

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        session_dir: str | os.PathLike[str] | None = None,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
        index_cache: IndexCache = None,
        _row_sums: bool = False,
    ) -> "Session":
        """Open an existing session file. Never modifies the file.

        Legacy v1/v2 files are migrated in memory (see :mod:`sessiontree.migrate`); the file is
        rewritten (atomically) only on the first write or :meth:`migrate`. An empty file gets
        a header in memory, written with the first entry (Pi writes it on open).

        Args:
            path: the ``.jsonl`` file (a leading ``~`` is expanded).
            session_dir: where :meth:`create_branched_session` writes; default the file's folder.
            durability: ``"flush"`` (each entry is one ``write()``; default), ``"fsync"``
                (each append is also fsynced before it returns) or ``"none"`` (buffered in
                the process until :meth:`flush`/:meth:`close`); see :mod:`sessiontree.writer`.
            lock_timeout: seconds the first write waits for another writer's lock (None:
                fail at once with :class:`SessionLockedError`). Reading never locks.
            index_cache: where saved indexes are read and written (:mod:`sessiontree.index_cache`):
                None for the default (``$SESSIONTREE_INDEX_CACHE``, else
                ``$XDG_CACHE_HOME/sessiontree``), a folder, or ``False``/``"off"``. A saved index
                that passes its checks is loaded and only bytes appended since are scanned; the
                answers are the cold scan's either way. The session file is never written.
            _row_sums: (for :mod:`sessiontree.fleet`) a cold scan also sums the usage its
                stats row needs as it parses each line, so :meth:`fleet_columns` reads no
                line again; the answers are the same without it.

        Raises:
            FileNotFoundError: no such file.
            SessionFormatError: not a Pi session (first JSON value is not a ``session``
                header with a string id, e.g. a BOM or a missing header), or bytes with no
                JSON value at all.
            SessionArgumentError: ``lock_timeout`` is not None or a finite number >= 0.
        """
        check_lock_timeout(lock_timeout)
        cache = index_cache_open_kwargs(index_cache)
        p = Path(path).expanduser()
        if session_dir is not None:
            session_dir = Path(session_dir).expanduser()
        if not p.is_file():
            if not p.exists():
                raise FileNotFoundError(f"no session file at {p}")
            raise SessionFormatError(f"not a regular file: {p}")
        core = _core.Index.open(str(p), row_sums=_row_sums, **cache)
        if core.end == 0 and file_head(p, 1):
            # /proc and other pseudo files: stat says 0 bytes, a read returns some. One rule for
            # every caller (CLI, RPC, fleet): only files whose size is what they hold are read.
            raise SessionFormatError(
                f"Session file is not a valid pi session: {p} (the system reports size 0 but the file holds "
                "bytes: a /proc or other pseudo file, not a session file)"
            )
        # the folder the caller named (lexically, like Node's path.resolve), not where a
        # symlinked file points: clones must land in the directory the caller gave
        sdir = Path(session_dir) if session_dir is not None else Path(os.path.abspath(p)).parent
        return cls._over_core(core, p, p, sdir, lambda: file_head(p), durability=durability, lock_timeout=lock_timeout)

    @classmethod
    def _over_core(
        cls,
        core: Any,
        path: Path | None,
        shown: Any,
        sdir: Path | None,
        head: Callable[[], bytes],
        *,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
    ) -> "Session":
        """The session over a freshly scanned index (``open`` and ``from_bytes``).

        The header checks, migration in memory, a header in memory for an empty file. ``head()``
        gives the first bytes (read only to explain a refusal)."""
        p = shown
        state, reason = core.header_state()
        if state == "invalid":
            raise SessionFormatError(f"Session file is not a valid pi session: {p} ({_bom_reason(head()) or reason})")
        if state == "empty":
            if core.line_count and any(core.problem(k)[2] != "blank_line" for k in range(core.problem_count())):
                bom = _bom_reason(head())
                if bom:
                    raise SessionFormatError(f"Session file is not a valid pi session: {p} ({bom})")
                raise SessionFormatError(
                    f"Session file is not a valid pi session: {p} (no JSON value in {core.line_count} lines; "
                    "Pi would overwrite it with a new header, we leave it untouched)"
                )
            header = {
                "type": "session",
                "version": CURRENT_SESSION_VERSION,
                "id": new_session_id(),
                "timestamp": iso_now(),
                "cwd": os.getcwd(),
            }
            return cls(
                core,
                path=path,
                session_dir=sdir,
                header=header,
                header_on_disk=False,
                durability=durability,
                lock_timeout=lock_timeout,
            )
        header = parse_json_line(core.header_line())
        if core.needs_migration:
            header = migrate_header(header, core.legacy_v1)
        return cls(
            core,
            path=path,
            session_dir=sdir,
            header=header,
            header_on_disk=True,
            durability=durability,
            lock_timeout=lock_timeout,
        )

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, *, name: str | None = None, _row_sums: bool = False
    ) -> "Session":
        """A read-only session over a session file's bytes held in memory (no temporary file).

        An object read from storage, say: the same index and the same answers as :meth:`open`
        on a file holding these bytes.

        Args:
            data: ``bytes``, ``bytearray`` or ``memoryview``; an ``mmap.mmap`` or anything else
                with the buffer protocol (contiguous bytes) works too (wrapped in a
                ``memoryview`` for a type checker). The bytes are copied once, so the
                caller may reuse or close the buffer afterwards (a closed or shrunk mmap can
                never fault the session).
            name: where the bytes came from (``"s3://bucket/key.jsonl"``), used in error
                messages and kept as :attr:`source_name`; :attr:`path` is None.
            _row_sums: as in :meth:`open`.

        Writing raises :class:`SessionReadOnlyError` (nothing is appended); :meth:`refresh`
        finds nothing new; the leaf can still be moved in memory with :meth:`branch`.

        Raises:
            TypeError: ``data`` does not expose a buffer of bytes.
            SessionFormatError: as :meth:`open`.
        """
        if isinstance(data, str):
            raise TypeError("Session.from_bytes needs bytes (or a buffer), not str")
        core = _core.Index.from_bytes(data, row_sums=_row_sums)
        shown = name if name is not None else "<bytes>"

        def head() -> bytes:
            try:
                return bytes(memoryview(data).cast("B")[:3])
            except (TypeError, ValueError):
                return b""

        s = cls._over_core(core, None, shown, None, head)
        s._read_only = True
        s._source_name = name
        return s

    @property
    def read_only(self) -> bool:
        """True for a session made by :meth:`from_bytes` (every write raises
        :class:`SessionReadOnlyError`)."""
        return self._read_only

    @property
    def source_name(self) -> str | None:
        """The ``name`` given to :meth:`from_bytes` (None otherwise)."""
        return self._source_name

    @classmethod
    def create(
        cls,
        cwd: str,
        *,
        session_dir: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        parent_session: str | None = None,
        timestamp: str | None = None,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
    ) -> "Session":
        """Start a new session file ``<session_dir>/<timestamp>_<id>.jsonl`` and write its header.

        ``session_dir`` defaults to Pi's ``~/.pi/agent/sessions/--<cwd>--/``, or the folder
        ``$PI_CODING_AGENT_SESSION_DIR`` names (:func:`~sessiontree.paths.default_session_dir`;
        created if missing). Pi defers writing the file until the first assistant message; we write the
        header at once so nothing appended later can be lost (a header-only file opens in Pi).
        ``timestamp`` (an ISO string as ``new Date().toISOString()`` writes, default now) is the
        header's and the file name's: a caller that announced the path before writing (RPC
        ``new_session``) passes the one it announced.

        Raises:
            ValueError: ``session_id`` is unsafe as a file name (separators, ``..``, NUL), or
                ``timestamp`` is not a valid date.
            FileExistsError: a file of that name already exists.
            SessionArgumentError: ``lock_timeout`` is not None or a finite number >= 0.
        """
        check_lock_timeout(lock_timeout)
        sdir = Path(session_dir).expanduser() if session_dir is not None else default_session_dir(cwd)
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        if timestamp is not None:
            ms = _core.date_parse(timestamp) if isinstance(timestamp, str) else float("nan")
            if ms != ms:  # NaN: new Date(timestamp) is an invalid date
                raise ValueError(f"timestamp must be an ISO date string, not {timestamp!r}")
        sdir.mkdir(parents=True, exist_ok=True)
        ts = timestamp if timestamp is not None else iso_now()
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": ts,
            "cwd": cwd,
        }
        if parent_session is not None:
            header["parentSession"] = str(parent_session)
        path = inside(sdir, session_file_name(ts, sid))
        create_new_file(path, dumps_entry(header) + b"\n", fsync=durability == "fsync")
        core = _core.Index.open(str(path))
        return cls(
            core,
            path=path,
            session_dir=sdir,
            header=header,
            header_on_disk=True,
            durability=durability,
            lock_timeout=lock_timeout,
        )

    @classmethod
    def in_memory(cls, cwd: str = ".", *, session_id: str | None = None) -> "Session":
        """A session that lives only in memory (Pi ``SessionManager.inMemory``).

        ``session_id`` default a new UUID.

        Raises:
            TypeError: ``session_id`` is not a str.
        """
        if session_id is not None:
            _require_str(session_id=session_id)
        core = _core.Index.in_memory()
        header = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": session_id if session_id is not None else new_session_id(),
            "timestamp": iso_now(),
            "cwd": cwd,
        }
        core.append(0, dumps_entry(header) + b"\n")
        return cls(core, path=None, session_dir=None, header=header, header_on_disk=True)

    @classmethod
    def fork_from(
        cls,
        source_path: str | os.PathLike[str],
        target_cwd: str,
        *,
        session_dir: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
    ) -> "Session":
        """Copy a whole session into a new file for ``target_cwd`` (Pi ``SessionManager.forkFrom``).

        Every entry and branch is copied; the new header names the source as ``parentSession``;
        ``session_id`` is the new session's (default a new UUID; Pi ``--fork`` with
        ``--session-id``).

        Entries are copied byte for byte; a legacy v1/v2 source is migrated first, so the
        new v3 file never holds unmigrated entries. The file appears atomically.

        Raises:
            FileNotFoundError, SessionFormatError: as :meth:`open` for the source.
            ValueError: ``session_id`` is unsafe as a file name.
        """
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        src = cls.open(source_path)
        assert src._path is not None  # opened from a file
        sdir = Path(session_dir) if session_dir is not None else default_session_dir(target_cwd)
        sdir.mkdir(parents=True, exist_ok=True)
        ts = iso_now()
        header = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": ts,
            "cwd": target_cwd,
            "parentSession": os.path.abspath(src._path),
        }  # absolute, as Pi writes it
        path = inside(sdir, session_file_name(ts, sid))
        # the copy holds the source's entries: no more readable than the source
        write_copy(path, src._entry_lines(with_header=header), source=src._path)
        return cls.open(path, session_dir=sdir)

    @classmethod
    def continue_recent(cls, cwd: str, *, session_dir: str | os.PathLike[str] | None = None) -> "Session":
        """Open the newest valid session of ``cwd``'s folder, or create one (Pi ``continueRecent``).

        The newest is the most recently modified (Pi ``SessionManager.continueRecent``)."""
        sdir = Path(session_dir) if session_dir is not None else default_session_dir(cwd)
        from ..listing import most_recent_session

        recent = most_recent_session(sdir)
        if recent is not None:
            return cls.open(recent, session_dir=sdir)
        return cls.create(cwd, session_dir=sdir)

    # ==== lifetime =================================================================

    def close(self) -> None:
        """Flush buffered entries and release the writer lock (the next write takes it again).

        Raises:
            OSError: writing out buffered entries failed (the lock is released all the same).
        """
        with self._prepare_lock:
            self._ready = False
            _WRITING.discard(self)
            if self._path is None:
                return
            if self._writer is not None:
                writer, self._writer = self._writer, None
                try:
                    self._core.detach_writer()
                finally:
                    writer.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


__all__ = [
    "Session",
    "atomic_write",
    "atomic_writer",
    "AtomicWriter",
    "dumps_entry",
    "SessionCycleError",
    "SessionError",
]
