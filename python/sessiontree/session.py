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
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

import orjson

from . import _core
from ._jsjson import JS_UNDEFINED, js_get, js_stringify_bytes, js_trim
from .context import SessionContext, build_session_context, latest_compaction, latest_compaction_at
from .entries import Entry, ProblemList, TreeNode, TreeTable, _TreeSource, parse_json_line
from .entry_types import USAGE_TYPES
from .errors import (
    EntryNotFoundError,
    LeafMovedError,
    SessionCycleError,
    SessionError,
    SessionFileChangedError,
    SessionFormatError,
    PiError,
    SessionArgumentError,
    SessionReadOnlyError,
)
from .index_cache import IndexCache
from .index_cache import open_kwargs as index_cache_open_kwargs
from .tokens import estimate_tokens
from .usage import UsageAccumulator, UsageTotals
from .validation import content_problems, entry_content_error, structural_problems
from .migrate import CURRENT_SESSION_VERSION, header_line_at_version, migrate_entry, migrate_header, migrated_lines
from .message_shape import check_message_shape
from .writer import (
    DURABILITY_MODES,
    AtomicWriter,
    Durability,
    SessionWriter,
    atomic_write,
    atomic_writer,
    check_lock_timeout,
    create_new_file,
    open_own_file,
    rewrite_lines,
    write_copy,
)  # the file I/O; atomic_write, atomic_writer and AtomicWriter stay importable from here

from .provider_context import ProviderContext
from .results import (
    BRANCH_SUMMARY_RESERVE_TOKENS,
    CompactionResult,
    NavigationResult,
    SessionHooks,
)  # the bottom floor: orchestration, hooks and the HTML view load inside the methods that delegate

if TYPE_CHECKING:
    from .scrub import ScrubReport
from .paths import (
    check_session_id,
    default_session_dir,
    inside,
    iso_now,
    new_session_id,
    session_file_name,
)


# ==== the core's other objects, for the layers above (issue 21) ====================
# Only session.py, entries.py, _jsjson.py and paths.py import ``_core``
# (tests/seams/test_public_api_seams.py); what other modules need of it is handed out here.

#: The package's one version: Cargo.toml's, compiled into the core (``sessiontree.__version__``).
__version__: str = _core.__version__

#: The secret kinds the core's scrub rules detect, in the rule table's order (rust/src/scrub/rules.rs).
SCRUB_KINDS: tuple[str, ...] = tuple(_core.Scrubber.kinds())


def new_scrubber(header: bool, replay: str, record: bool) -> Any:
    """The core's streaming scrubber (``_core.Scrubber``, rust/src/scrub/): blocks of a session
    file in, scrubbed bytes out; ``header``: also scrub the header's ``cwd`` and
    ``parentSession``; ``replay``: ``"keep"`` or ``"drop"`` (provider replay fields);
    ``record``: keep the findings. :mod:`sessiontree.scrub` drives it."""
    return _core.Scrubber(bool(header), replay, bool(record))


# Entry ids need uniqueness within a file (collision-checked), not secrecy: a fast generator
# seeded from the OS (Pi uses randomUUID().slice(0, 8)).

_FORBIDDEN_MESSAGE_ROLES = ("compactionSummary", "branchSummary")


class _AnyLeaf:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<any leaf>"


_ANY_LEAF: Any = _AnyLeaf()


def dumps_entry(value: Any) -> bytes:
    """Serialize an entry as one JSON line's text (no newline): the bytes of Pi's
    ``JSON.stringify`` (:func:`sessiontree._jsjson.js_stringify_bytes`: orjson's text with
    JavaScript's number spelling, array-index keys first)."""
    return js_stringify_bytes(value)


def _as_indexed(entry_id: str) -> str:
    """An id with lone surrogates as the index keeps it: each lone surrogate as U+FFFD."""
    return entry_id.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _require_str(**values: Any) -> None:
    """TypeError naming the first argument that is not a str (Pi's fields are strings)."""
    for name, value in values.items():
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def _bom_reason(head: bytes) -> str | None:
    """Why session bytes that start with a UTF-8 byte order mark are not a session, or None
    when ``head`` (the first bytes) does not start with one: the one text, for a local file
    and for bytes from storage (:meth:`Session.from_bytes`, the fleet's S3 reads) alike. (Pi's
    ``JSON.parse`` refuses the BOM, so the header line is not JSON to Pi either: acceptance
    stays Pi's, only the message names the cause.)"""
    return "UTF-8 BOM at byte 0 (Pi rejects it)" if bytes(head[:3]) == b"\xef\xbb\xbf" else None


def _file_head(path: Path, n: int = 3) -> bytes:
    """The first ``n`` bytes of ``path`` (b"" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


# Sessions holding a writer lock: a child process forked from ours drops their writers (see
# `_drop_writers_after_fork`).
_WRITING: "weakref.WeakSet[Session]" = weakref.WeakSet()


def _drop_writers_after_fork() -> None:
    """In a child process after ``os.fork()``: every Session that was writing becomes a reader
    of what it knows. The entries the parent buffered are the parent's to write (the child
    writing them too would write them twice), and the parent's lock is not the child's (the
    child's next write takes the lock anew, and waits for the parent's)."""
    for s in list(_WRITING):
        s._forget_writer_after_fork()
    _WRITING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_drop_writers_after_fork)


class Session:
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

    def __init__(
        self,
        core: Any,
        *,
        path: Path | None,
        session_dir: Path | None,
        header: dict,
        header_on_disk: bool,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
    ):
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, not {durability!r}")
        self._core = core
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

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        session_dir: str | os.PathLike | None = None,
        durability: Durability = "flush",
        lock_timeout: float | None = None,
        index_cache: IndexCache = None,
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
        core = _core.Index.open(str(p), **cache)
        if core.end == 0 and _file_head(p, 1):
            # /proc and other pseudo files: stat says 0 bytes, a read returns some. One rule for
            # every caller (CLI, RPC, fleet): only files whose size is what they hold are read.
            raise SessionFormatError(
                f"Session file is not a valid pi session: {p} (the system reports size 0 but the file holds "
                "bytes: a /proc or other pseudo file, not a session file)"
            )
        # the folder the caller named (lexically, like Node's path.resolve), not where a
        # symlinked file points: clones must land in the directory the caller gave
        sdir = Path(session_dir) if session_dir is not None else Path(os.path.abspath(p)).parent
        return cls._over_core(core, p, p, sdir, lambda: _file_head(p), durability=durability, lock_timeout=lock_timeout)

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
        """The session over a freshly scanned index (``open`` and ``from_bytes``): the header
        checks, migration in memory, a header in memory for an empty file. ``head()`` gives the
        first bytes (read only to explain a refusal)."""
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
    def from_bytes(cls, data: Any, *, name: str | None = None) -> "Session":
        """A read-only session over the bytes of a session file held in memory (an object read
        from storage, say), with no temporary file: the same index and the same answers as
        :meth:`open` on a file holding these bytes.

        Args:
            data: ``bytes``, ``bytearray``, ``memoryview``, ``mmap.mmap`` or anything else with
                the buffer protocol (contiguous bytes). The bytes are copied once, so the
                caller may reuse or close the buffer afterwards (a closed or shrunk mmap can
                never fault the session).
            name: where the bytes came from (``"s3://bucket/key.jsonl"``), used in error
                messages and kept as :attr:`source_name`; :attr:`path` is None.

        Writing raises :class:`SessionReadOnlyError` (nothing is appended); :meth:`refresh`
        finds nothing new; the leaf can still be moved in memory with :meth:`branch`.

        Raises:
            TypeError: ``data`` does not expose a buffer of bytes.
            SessionFormatError: as :meth:`open`.
        """
        if isinstance(data, str):
            raise TypeError("Session.from_bytes needs bytes (or a buffer), not str")
        core = _core.Index.from_bytes(data)
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
        session_dir: str | os.PathLike | None = None,
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
        header: dict = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": sid, "timestamp": ts, "cwd": cwd}
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
        """A session that lives only in memory (Pi ``SessionManager.inMemory``); ``session_id``
        default a new UUID.

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
        source_path: str | os.PathLike,
        target_cwd: str,
        *,
        session_dir: str | os.PathLike | None = None,
        session_id: str | None = None,
    ) -> "Session":
        """Copy a whole session (every entry, all branches) into a new file for ``target_cwd``
        whose header names the source as ``parentSession`` (Pi ``SessionManager.forkFrom``);
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
    def continue_recent(cls, cwd: str, *, session_dir: str | os.PathLike | None = None) -> "Session":
        """Open the most recently modified valid session of ``cwd``'s session directory, or
        create a new one there (Pi ``SessionManager.continueRecent``)."""
        sdir = Path(session_dir) if session_dir is not None else default_session_dir(cwd)
        from .listing import most_recent_session

        recent = most_recent_session(sdir)
        if recent is not None:
            return cls.open(recent, session_dir=sdir)
        return cls.create(cwd, session_dir=sdir)

    # ==== properties ===============================================================

    @property
    def path(self) -> Path | None:
        """The session file, or None for an in-memory session."""
        return self._path

    @property
    def session_dir(self) -> Path | None:
        """The sessions folder this session was opened or created with, where the sessions branched
        from it are written; None when none was given (they go beside this file) or in memory."""
        return self._session_dir

    @property
    def session_id(self) -> Any:
        """The header's ``id`` as written (a str in every file Pi writes; any JSON value, or None
        when missing, in a hand-made one)."""
        return self._header.get("id")

    @property
    def cwd(self) -> str:
        """The header's ``cwd``; the process's working folder when the header has none (Pi's rule)."""
        cwd = self._header.get("cwd")
        return cwd if isinstance(cwd, str) else os.getcwd()

    @property
    def header(self) -> dict:
        """The session header as Pi holds it after migration (a copy)."""
        return dict(self._header)

    @property
    def file_header(self) -> dict | None:
        """The header line as it is in the file, parsed (before any migration: a v1 file has no
        ``version``); None for an empty file or a header line that is not a JSON object."""
        line = self._core.header_line()
        if line is None:
            return None
        try:
            value = parse_json_line(line)
        except SessionError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def leaf_entry(self) -> Entry | None:
        """The entry at the leaf (None when the leaf is null or names no entry)."""
        i = self._core.leaf()
        return None if i is None else Entry(self, i)

    @property
    def leaf_id(self) -> str | None:
        """The current leaf's id (None before the first entry, after :meth:`reset_leaf`, or
        when the last entry's id is not a string)."""
        return self._core.leaf_id()

    @property
    def session_name(self) -> str | None:
        """``name.trim()`` of the last ``session_info`` entry in file order, on any branch;
        None when there is none or it is empty (Pi 1.6 ``getSessionName``)."""
        i = self._core.session_info_entry()
        if i is None:
            return None
        raw = self._load_raw(i)
        name = raw.get("name") if isinstance(raw, dict) else None
        if not isinstance(name, str):
            return None
        name = js_trim(name)
        return name or None

    @property
    def labels(self) -> dict[str, Any]:
        """Resolved labels ``{target id: label}`` in Pi's order (label entries replayed in file
        order; a truthy ``label`` sets, anything else clears; targets need not exist)."""
        out: dict[str, Any] = {}
        for target, e in self._core.labels():
            raw = self._load_raw(e)
            if target is None:
                target = raw.get("targetId")
                if isinstance(target, (dict, list)):
                    continue  # a Map key in Pi no entry id can ever equal
            out[target] = raw.get("label")
        return out

    @property
    def problems(self) -> "ProblemList":
        """Lines Pi skips or that look damaged, in file order: a sequence of :class:`Problem`
        built on access (``len()``, indexing, iteration)."""
        return ProblemList(self._core)

    def validate(self, *, content: bool = True) -> list[dict]:
        """Every problem in the file, sorted by line: the line problems of :attr:`problems`
        (same line, offset, kind and message), structural ones (``missing_id``,
        ``duplicate_id``, ``orphan``, ``bad_parent_id``, ``self_parent``, ``parent_cycle``,
        ``unreachable``, ``leaf_cycle``, ``label_target_missing``) and, with ``content``,
        ``content_error`` for entries whose content Pi would throw on when estimating,
        compacting or summarizing. See :mod:`sessiontree.validation`.

        Returns dicts ``{line, offset, kind, message, severity}``, severity ``"error"`` or
        ``"note"`` (blank lines). ``sessiontree validate`` prints exactly this list. Cost: the
        whole index, plus parsing label entries (and with ``content`` the message-carrying ones).

            >>> Session.in_memory().validate()
            []
        """
        out = structural_problems(self)
        if not self._header_on_disk and (self._path is not None or self._read_only):
            out.append(
                {
                    "line": 1,
                    "offset": 0,
                    "kind": "empty_file",
                    "message": "no session header: the file holds no entry (Pi writes a new header when it opens it)",
                    "severity": "error",
                }
            )
        if content:
            out += content_problems(self)
        out.sort(key=lambda p: (p["line"], p["offset"]))
        return out

    @property
    def needs_migration(self) -> bool:
        """True for a legacy v1/v2 file that Pi would rewrite on open."""
        return self._core.needs_migration

    @property
    def legacy_version(self) -> int | None:
        """1 or 2 for a legacy file whose first write rewrites it as v3 (Pi's
        ``migrateSessionEntries``), else None."""
        if not self._core.needs_migration:
            return None
        return 1 if self._core.legacy_v1 else 2

    @property
    def indexed_bytes(self) -> int:
        """Bytes of the session file this session has indexed: the file's length at the last
        scan, :meth:`refresh` or append (for :meth:`from_bytes`, the data's length; 0 for a new
        in-memory session). Cost: none (the index knows it)."""
        return self._core.end

    def __len__(self) -> int:
        return len(self._core)

    def entry_count(self) -> int:
        """Distinct entry ids (Pi ``getEntryCount``; duplicates count once)."""
        return self._core.entry_count()

    def __repr__(self) -> str:
        where = str(self._path) if self._path else (self._source_name or "<bytes>") if self._read_only else "<memory>"
        try:
            return f"Session({where!r}, entries={len(self)}, leaf={self.leaf_id!r})"
        except SessionFileChangedError:  # poisoned by a refresh that found the file changed
            return f"Session({where!r}, changed on disk: open it again)"

    # ==== reading ==================================================================

    def _load_raw(self, i: int) -> Any:
        raw = parse_json_line(self._core.line(i))
        if self._core.needs_migration:
            v1 = self._core.legacy_v1
            first_kept = None
            if v1 and isinstance(raw, dict) and raw.get("type") == "compaction":
                fk = raw.get("firstKeptEntryIndex")
                if isinstance(fk, int) and not isinstance(fk, bool) and fk >= 0:
                    t = self._core.entry_at_value_pos(fk)
                    if t is not None:
                        first_kept = self._core.record(t).id
            rec = self._core.record(i)
            raw = migrate_entry(
                raw,
                legacy_v1=v1,
                entry_id=rec.id,
                parent_id=rec.parent_id,
                first_kept_id=first_kept,
            )
        return raw

    def _load_raws(self, idx: list[int]) -> list:
        """Parsed values of entries ``idx`` (one batch read of their lines)."""
        if self._core.needs_migration:
            return [self._load_raw(i) for i in idx]
        return [parse_json_line(line) for line in self._core.lines(idx)]

    def _entry(self, i: int) -> Entry:
        return Entry(self, i)

    def _lookup(self, entry_id: str) -> int | None:
        """Index of the entry with this id, or None. An id with a lone surrogate is looked up
        the way the index keeps it (each lone surrogate as U+FFFD)."""
        try:
            return self._core.index_of(entry_id)
        except UnicodeEncodeError:
            return self._core.index_of(_as_indexed(entry_id))

    def _index_of(self, entry_id: str) -> int:
        if not isinstance(entry_id, str):
            raise TypeError(f"entry id must be a str, not {type(entry_id).__name__}")
        i = self._lookup(entry_id)
        if i is None:
            raise EntryNotFoundError.of(entry_id)
        return i

    def entries(self) -> list[Entry]:
        """All entries in file order (header excluded; duplicates and branches included)."""
        return [Entry(self, i) for i in range(len(self._core))]

    def iter_entries(self) -> Iterator[Entry]:
        """Like :meth:`entries`, lazily."""
        for i in range(len(self._core)):
            yield Entry(self, i)

    def get_entries(self, since: str | None = None) -> list[Entry]:
        """Entries in file order; with ``since``, only those appended after the entry with
        that id (a durable cursor; Pi RPC ``get_entries``).

        Raises:
            EntryNotFoundError: ``since`` names no entry (Pi: ``Entry not found: <id>``).
        """
        if since is None:
            return self.entries()
        return [Entry(self, k) for k in range(self._since_start(since), len(self._core))]

    def _since_start(self, since: Any) -> int:
        """File position after the entry ``since`` names; with a repeated id, after its first
        occurrence (Pi ``entries.findIndex``). The scan for the first occurrence runs only when
        the file repeats ids."""
        i = self._lookup(since) if isinstance(since, str) else None
        if i is None:
            raise EntryNotFoundError.of(since)
        if self._core.entry_count() != len(self._core):
            key = self._core.record(i).id
            i = self._core.ids(list(range(i + 1))).index(key)
        return i + 1

    def get_entries_page(self, since: str | None = None, limit: int | None = None) -> list[Entry]:
        """Like :meth:`get_entries`, at most ``limit`` entries (None: all): one page of the
        file-order listing, for paging through huge files. Cost follows the page, not the file.

        Raises:
            EntryNotFoundError: ``since`` names no entry (``Entry not found: <id>``).
            ValueError: ``limit`` is negative.
        """
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        start = 0 if since is None else self._since_start(since)
        stop = len(self._core) if limit is None else min(len(self._core), start + limit)
        return [Entry(self, k) for k in range(start, stop)]

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id (the last one if the id repeats), or None."""
        i = self._lookup(entry_id) if isinstance(entry_id, str) else None
        return None if i is None else Entry(self, i)

    def get_children(self, entry_id: str) -> list[Entry]:
        """Children of an entry in Pi's tree order (by timestamp, ties in file order).

        Raises:
            EntryNotFoundError: no entry has this id.
        """
        return [Entry(self, c) for c in self._core.children(self._index_of(entry_id))]

    def _walk(self, i: int) -> list[int]:
        return self._core.branch(i)

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Entries from the root down to ``from_id`` (default: the leaf), root first
        (Pi ``getBranch``). Empty when the leaf is null.

        Raises:
            EntryNotFoundError: ``from_id`` names no entry.
            SessionCycleError: the parent chain loops (Pi never returns).
        """
        if from_id is None:
            leaf = self._core.leaf()
            if leaf is None:
                return []
            start = leaf
        else:
            start = self._index_of(from_id)
        return [Entry(self, i) for i in self._walk(start)]

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

    def _span(self, *, with_settings: bool = False, context_rule: bool = True) -> list[int]:
        """Entry indices of the context span (``Index.context_span``, rust/src/walk.rs): what
        context building and compaction read of the active branch. ``context_rule``: the leaf
        as :meth:`build_context` resolves it (else as :meth:`get_branch` does)."""
        leaf = self._context_leaf() if context_rule else self._core.leaf()
        return [] if leaf is None else self._core.context_span(leaf, with_settings)

    def _last_on_branch(self, etype: str, role: str | None = None) -> Entry | None:
        """The newest entry of type ``etype`` (and message role ``role``) on the active branch:
        the index walks back from the leaf only as far as it is."""
        leaf = self._core.leaf()
        if leaf is None:
            return None
        i = self._core.find_back(leaf, etype, role)
        return None if i is None else Entry(self, i)

    def _abandoned_since(self, old_leaf: str | None, target_id: str) -> tuple | None:
        """``(entry indices from just below the common ancestor to old_leaf, ancestor id)``, the
        index walking both branches up only as far as their common ancestor; None when the pure
        rule must decide (no old leaf, an unknown id, duplicate ids, a legacy file)."""
        core = self._core
        a = self._lookup(old_leaf) if isinstance(old_leaf, str) and old_leaf else None
        b = self._lookup(target_id) if isinstance(target_id, str) else None
        if a is None or b is None or core.needs_migration or core.entry_count() != len(core):
            return None
        ancestor = core.common_ancestor_near(a, b)
        below = core.branch_since(a, ancestor) or []
        return below, None if ancestor is None else core.record(ancestor).id

    # ==== batch views for the package's own layers (issue 21) =========================
    # Orchestration, auto-compaction, validation and the HTML view read a session through these
    # public methods only (tests/seams/test_public_api_seams.py rejects private use above the
    # facade). Each is batch-shaped: positions in, lists out, one core call where it can be.

    def context_span(self, *, with_settings: bool = True, context_rule: bool = True) -> list[int]:
        """Entry positions (:attr:`Entry.index`) of the context span, root first: what context
        building and compaction read of the active branch (the index's ``context_span``,
        rust/src/walk.rs; :meth:`get_context_entries` as positions). ``with_settings``: include
        the few earlier entries whose values still count (the latest thinking-level and model
        entries before the latest compaction, every ``context_edit``); ``context_rule``: the
        leaf as :meth:`build_context` resolves it (an unknown leaf id reads as the last entry),
        else as :meth:`get_branch` does (it gives nothing). Empty when the leaf is null. Cost:
        the walk back from the leaf to the latest compaction; nothing parsed.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        return self._span(with_settings=with_settings, context_rule=context_rule)

    def raw_values(self, indices: Sequence[int]) -> list:
        """The parsed values (:attr:`Entry.raw`: a dict for every well-formed entry, migrated
        for a legacy file) of the entries at positions ``indices``, in that order: one batch
        read of their lines, no :class:`Entry` made.

        Raises:
            IndexError: a position names no entry.
            SessionError: an entry nests too deeply to load in Python.
        """
        return self._load_raws(list(indices))

    def entry_index(self, entry_id: Any) -> int | None:
        """The position (:attr:`Entry.index`) of the entry :meth:`get_entry` returns for
        ``entry_id`` (the last one if the id repeats), or None (no such entry, or not a str).
        Cost: one by-id lookup."""
        return self._lookup(entry_id) if isinstance(entry_id, str) else None

    def parent_positions(self, indices: Sequence[int]) -> list[int | None]:
        """For each position in ``indices``, the position the walk up from it goes to next (Pi's
        ``byId.get(parentId)``: the entry winning that id), or None at a root (``parentId`` null,
        missing, not a string, or naming no entry). Cost: one lookup per position.

        Raises:
            IndexError: a position names no entry.
        """
        core = self._core
        return [core.walk_parent(i) for i in indices]

    @property
    def leaf_is_null(self) -> bool:
        """True when the leaf is before the first entry (Pi's null leaf: a new session,
        :meth:`reset_leaf`, a branch summary at the root), as opposed to a leaf naming an entry
        or an id that names none."""
        return self._core.leaf_is_null()

    def last_on_branch(self, etype: str, role: str | None = None) -> Entry | None:
        """The newest entry of type ``etype`` (and, given ``role``, message role ``role``) on the
        active branch, or None: the index walks back from the leaf only as far as it is.

        Raises:
            SessionCycleError: the parent chain from the leaf loops before one is found.
        """
        return self._last_on_branch(etype, role)

    def abandoned_branch(self, old_leaf: str | None, target_id: str) -> "AbandonedBranch | None":
        """What moving the leaf from ``old_leaf`` to ``target_id`` abandons, from the index: an
        :class:`AbandonedBranch` ``(indices, ancestor_id)``, the entry positions from just below
        the common ancestor down to ``old_leaf`` (root first) and the ancestor's id (None: no
        common ancestor). Both branches are walked up only as far as their common ancestor.
        None when the pure rule (:func:`sessiontree.branch_summary.collect_entries_for_branch_summary`)
        must decide: no old leaf, an unknown id, duplicate ids, a legacy file.

        Raises:
            SessionCycleError: a parent chain loops.
        """
        found = self._abandoned_since(old_leaf, target_id)
        return None if found is None else AbandonedBranch(*found)

    def branch_positions(self, from_id: str | None = None) -> list[int]:
        """:meth:`get_branch` as entry positions (:attr:`Entry.index`), root first, without
        building entries or columns: the index's walk up from ``from_id`` (default: the leaf).
        Empty when the leaf is null or names no entry.

        Raises:
            EntryNotFoundError: ``from_id`` names no entry.
            SessionCycleError: the parent chain loops.
        """
        if from_id is None:
            start = self._core.leaf()
            if start is None:
                return []
        else:
            start = self._index_of(from_id)
        return self._walk(start)

    def check_tree(self) -> None:
        """Check that Pi's tree (:meth:`get_tree`) can be walked, without building it.

        Raises:
            SessionCycleError: a ``parentId`` cycle is reachable from a root (through duplicate
                ids); ``ids`` names it.
            SessionError: the walk would repeat whole subtrees past a size limit.
        """
        self._core.check_tree()

    def to_bytes(self) -> bytes:
        """The session as the index holds it: the header line, then each entry's line as it is
        in the file (not migrated), each ending in ``\n``. For an in-memory session, the file it
        would be; for a file session, the indexed lines (problem lines such as malformed or blank
        ones are left out). Cost: every line read once."""
        core = self._core
        return b"".join(
            [(core.header_line() or b"") + b"\n"] + [line + b"\n" for line in core.lines(list(range(len(core))))]
        )

    def html_digest(self, start: int, stop: int, preview_chars: int) -> bytes:
        """The HTML view's index chunk for entries ``start:stop`` (rust/src/digest.rs: per entry
        id, kind, preview of at most ``preview_chars`` characters, reference id, offset and
        length, timestamp, token estimate, usage), as the JSON bytes :mod:`sessiontree.html`
        compresses into the page. Cost: those entries' lines, read and digested by the core.

        Raises:
            IndexError: ``start:stop`` is not a range of entry positions.
        """
        return _core.html_digest(self._core, start, stop, preview_chars)

    def html_segment_bounds(self, seg_bytes: int) -> list[tuple[int, int]]:
        """The HTML view's segments of a file session: ``[(offset, length)]`` covering the
        indexed bytes, each cut where an entry's line starts and about ``seg_bytes`` long
        (rust/src/export.rs ``segment_bounds``). Cost: the index only (no read)."""
        return _core.html_segment_bounds(self._core, seg_bytes)

    def html_write_index(self, fd: int, batch: int, preview_chars: int, head: bytes, tail: bytes) -> None:
        """Writes the HTML view's index chunks to descriptor ``fd``: for each ``batch`` entries,
        ``head`` + base64(gzip(:meth:`html_digest` of them)) + ``tail``, in entry order
        (digested and compressed by the core on every core, written while later batches are
        worked on; rust/src/export.rs). Cost: every entry's line read once.

        Raises:
            OSError: writing ``fd`` failed.
        """
        _core.html_write_index(self._core, fd, batch, preview_chars, head, tail)

    def html_write_segments(
        self,
        fd: int,
        bounds: list[tuple[int, int]],
        order: list[int],
        heads: list[bytes],
        tail: bytes,
        data: bytes | None,
    ) -> None:
        """Writes the HTML view's segments to descriptor ``fd`` in ``order``: for segment ``k``,
        ``heads[k]`` + base64(gzip(the bytes of ``bounds[k]``)) + ``tail``; the bytes are the
        file's (read by the core with the GIL released), or ``data``'s for an in-memory session
        (rust/src/export.rs). Cost: each segment's bytes read and compressed once.

        Raises:
            SessionFileChangedError: the file shrank under the index.
            OSError: reading the file or writing ``fd`` failed.
        """
        _core.html_write_segments(self._core, fd, bounds, order, heads, tail, data)

    @property
    def compaction_lock(self) -> threading.Lock:
        """The lock one compaction of this session at a time holds
        (:func:`sessiontree.orchestration.acompact` takes it, without blocking the event loop)."""
        return self._compaction_lock

    def get_context_entries(self) -> list[Entry]:
        """The entries of the active branch that context building and compaction read, root
        first: the whole branch when it holds no compaction; otherwise the latest compaction's
        kept range (from its ``firstKeptEntryId``) to the leaf, preceded by the few earlier
        entries whose values still count (the latest thinking-level and model entries before
        it, and any ``context_edit``). Every pure function (:func:`~sessiontree.context.build_session_context`,
        :func:`~sessiontree.compaction.prepare_compaction`, ...) gives the same answer on this
        list as on :meth:`get_branch`, at a cost that follows the context, not the branch:
        the index walks back from the leaf and no line is parsed until read.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        return [Entry(self, i) for i in self._span(with_settings=True)]

    def entry_at(self, index: int) -> Entry:
        """The entry at file position ``index`` (0-based, header excluded; ``Entry.index``).

        Raises:
            IndexError: no entry there.
        """
        if not 0 <= index < len(self._core):
            raise IndexError(f"entry index {index} out of range")
        return Entry(self, index)

    def entry_table(self, indices: Sequence[int] | None = None) -> EntryTable:
        """What listings show of many entries, as columns, without parsing them or building
        :class:`Entry` objects: an :class:`EntryTable` over the entry positions ``indices``
        (default: every entry in file order). Cost: the index only, one call into the core.

            >>> s = Session.in_memory()
            >>> eid = s.append_message({"role": "user", "content": "hi", "timestamp": 0})
            >>> t = s.entry_table()
            >>> (t.id == [eid], t.type, t.role, t.parent_is_null)
            (True, ['message'], ['user'], [True])

        Raises:
            IndexError: a position names no entry.
        """
        idx = list(range(len(self._core))) if indices is None else list(indices)
        return EntryTable(idx, *self._core.table(idx))

    def branch_table(self, from_id: str | None = None) -> EntryTable:
        """:meth:`get_branch` as an :meth:`entry_table` (root first; empty when the leaf is null).

        Raises:
            EntryNotFoundError: ``from_id`` names no entry.
            SessionCycleError: the parent chain loops.
        """
        if from_id is None:
            start = self._core.leaf()
            if start is None:
                return self.entry_table([])
        else:
            start = self._index_of(from_id)
        return self.entry_table(self._walk(start))

    def tree_roots(self) -> list[int]:
        """Positions of the tree's root nodes in Pi's order (``getTree``'s roots), without
        building the children table's Python lists."""
        return self._core.roots()

    def tree_table(self) -> TreeTable:
        """Pi's tree (as :meth:`get_tree`) as entry positions, for walking millions of nodes
        without building objects: ``roots`` (node positions in Pi's order) and the children of
        node ``i`` in ``kids[start[i]:start[i + 1]]`` (sorted like Pi). Positions are
        :attr:`Entry.index` values (:meth:`entry_at`)."""
        return self._core.tree_table()

    def unreachable_entries(self) -> list[Entry]:
        """Entries no root reaches (they hang off a ``parentId`` cycle), in file order; empty
        when the tree walk itself meets a loop through duplicated ids.

        Raises:
            SessionError: the tree walk would repeat whole subtrees past a size limit.
        """
        try:
            return [Entry(self, i) for i in self._core.unreachable()]
        except SessionCycleError:
            return []

    def tree_leaves(self) -> list[int]:
        """Positions (:attr:`Entry.index`) of the tree's leaf nodes, in file order: nodes of Pi's
        ``getTree`` (one per distinct id: the entry that wins the id) without children,
        including nodes no root reaches (below a ``parentId`` cycle). Cost: the index and the
        children table, no entry parsed.

        Raises:
            SessionError: the tree walk would repeat whole subtrees past a size limit.
        """
        n = len(self._core)
        if n == 0:
            return []
        _roots, start, _kids = self._core.tree_table()
        unique = self._core.entry_count() == n  # no repeated id: every entry is its own node
        return [p for p in range(n) if start[p + 1] == start[p] and (unique or self._core.node_of(p) == p)]

    def context_table(self) -> EntryTable:
        """The path :meth:`build_context` walks (Pi ``buildSessionContext``) as an
        :meth:`entry_table`, root first: empty when the leaf is null; when the leaf id names no
        entry, the path to the last entry in the file (where :meth:`branch_table` is empty).
        Cost: the index only.

        Raises:
            SessionCycleError: the parent chain loops.
        """
        return self.entry_table(self._context_path())

    def entry_metrics(self, indices: Sequence[int] | None = None) -> EntryMetrics:
        """Size, time and token columns of many entries (an :class:`EntryMetrics` over the entry
        positions ``indices``; default: every entry in file order): ``bytes`` is the length of
        the entry's JSON text in the file (UTF-8 bytes, newline excluded), ``timestamp_ms`` is
        ``new Date(entry.timestamp).getTime()`` (ms since the epoch; None where Pi gets NaN),
        ``tokens`` is Pi's chars/4 estimate of the context messages the entry contributes to
        compaction (``estimateTokens`` over ``sessionEntryToContextMessages``; 0 for entries
        without one, such as compactions and labels; None where Pi throws on the content).

        Cost: the index for most entries; only entries the core cannot estimate from their line
        (content edits, odd shapes) are parsed and estimated by :mod:`sessiontree.compaction`.

        Raises:
            IndexError: a position names no entry.
        """
        n = len(self._core)
        idx = list(range(n)) if indices is None else list(indices)
        if idx and not (0 <= min(idx) and max(idx) < n):  # negative ones too: the core takes none
            bad = next(i for i in idx if not 0 <= i < n)
            raise IndexError(f"entry index {bad} out of range")
        size, when, estimates = self._core.metrics(idx)
        tokens: list[int | float | None] = list(estimates)
        for k, t in enumerate(tokens):
            if t is None:  # the exact (Python) rules decide
                try:
                    from .compaction import entry_context_messages

                    tokens[k] = sum(estimate_tokens(m) for m in entry_context_messages(self._load_raw(idx[k])))
                except (SessionError, ValueError):
                    tokens[k] = None
        return EntryMetrics(idx, size, when, tokens)

    def get_tree(self) -> list[TreeNode]:
        """The whole tree as root :class:`TreeNode` s (Pi ``getTree``): roots are entries whose
        ``parentId`` is null, their own id, or unknown (orphans); children sorted by
        timestamp, ties in file order; a repeated id is one node listed once per occurrence.
        Built without recursion.

        Raises:
            SessionCycleError: duplicate ids put a node below itself (Pi's ``getTree`` returns
                such a cyclic graph and its tree view never ends; the core's walk refuses it,
                and so does this tree: no returned ``TreeNode`` is its own descendant).
        """
        self._core.check_tree()
        roots, start, kids = self._core.tree_table()
        label_of: dict[int, Any] = {}
        for target, e in self._core.labels():
            if target is not None:
                t = self._core.index_of(target)
                if t is not None:
                    label_of[t] = self._load_raw(e).get("label")
        src = _TreeSource(self, start, kids, label_of)  # nodes and entries made on access
        return [src.node(r) for r in roots]

    def get_label(self, entry_id: str) -> Any:
        """The label on an entry, or None."""
        if not isinstance(entry_id, str):
            return None
        try:
            e = self._core.label_entry(entry_id)
        except UnicodeEncodeError:
            e = self._core.label_entry(_as_indexed(entry_id))
        return None if e is None else self._load_raw(e).get("label")

    def build_context(self) -> SessionContext:
        """The messages the model sees on the current branch, exactly as Pi's
        ``buildSessionContext`` builds them (compaction folded in, context edits applied),
        with the thinking level and model. See :func:`sessiontree.context.build_session_context`.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        try:
            return build_session_context(self._load_raws(self._span(with_settings=True)))
        except PiError as exc:
            self._name_entry(exc)
            raise

    def _name_entry(self, exc: PiError) -> PiError:
        """``exc`` naming the entry whose content raised it (id and line): the first entry on
        the current branch, then in the file, whose content raises the same Pi error
        (:func:`sessiontree.validation.entry_content_error`). Runs only when an error was raised."""
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

    def refresh(self) -> int:
        """Index entries another process appended since the last scan; cost follows the new
        bytes only. Returns how many entries appeared. When entries appeared, the leaf moves to
        the last one, as when the file is opened (Pi's rule); a torn last line is indexed once
        it is complete.

        Raises:
            SessionFileChangedError: the file shrank or was replaced.
        """
        if self._path is None:
            return 0
        self.flush()
        return self._core.refresh()

    def index_cache_state(self) -> tuple[str, int, str]:
        """What the saved index (:mod:`sessiontree.index_cache`) did when this session was
        opened: ``("warm", covered_bytes, "")`` (a saved index was loaded and only the bytes
        after ``covered_bytes`` were scanned), ``("saved", 0, why)`` (a cold scan, because
        ``why``, then the index was saved), ``("cold", 0, why)`` (a cold scan, nothing saved:
        e.g. below the size saved, or the folder is unwritable) or ``("off", 0, "")``."""
        return self._core.cache_state()

    # ==== writing ==================================================================

    def _generate_id(self) -> str:
        """Pi ``generateId``: 8 hex digits not used in this session (the core's one generator)."""
        return self._core.new_id()

    def lock(self) -> None:
        """Take the writer lock now (it is otherwise taken by the first write), so that a locked
        or read-only file fails before slow work such as a summary request. Held until
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
        """Take the writer lock; on first taking it, index what others appended meanwhile and
        hand the core the descriptor to write to. The leaf is then the file's current leaf (its
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

    def _append_built(self, build: Callable[[], dict]) -> str:
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
                return entry["id"]

    def _append_field(self, type_: str, name: str | None, value: Any) -> str:
        """Append ``{type, id, parentId: leaf, timestamp, name: value}`` (Pi's key order) in one
        core call: the Rust core picks the id and timestamp, builds (giving orjson's text
        ``JSON.stringify``'s number spelling), writes (per the durability mode) and indexes the
        line; ``value`` is serialized alone and the core writes ``"name":`` before it. ``name``
        None: ``value`` is the dict of fields, written after the four. Returns the new id.

        One of the two append paths (issue 21); the other, :meth:`_append_built`, is for entries
        Python builds whole (a compaction checked against the leaf, a branch summary, custom
        entries).

        The hot path of append_message: orjson's text, made ``JSON.stringify``'s by the core as
        it builds the line; the exact Python writer when orjson cannot write the value, or when
        an object has an array-index key (then the core appends nothing and returns None)."""
        if not self._ready:
            self._prepare_write()
        try:  # (append_entry raises no TypeError for a str type and name)
            entry_id = self._core.append_entry(type_, orjson.dumps(value), name)
        except TypeError:  # orjson.JSONEncodeError included
            entry_id = None
        if entry_id is None:
            entry_id = self._core.append_entry(type_, js_stringify_bytes(value), name, False)
        return entry_id

    def _base(self, type_: str) -> dict:
        return {"type": type_, "id": self._generate_id(), "parentId": self._leaf_for_parent(), "timestamp": iso_now()}

    def _leaf_for_parent(self) -> str | None:
        return self._core.leaf_id()

    def append_message(self, message: dict, *, strict: bool = False) -> str:
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
        usage: dict | None = None,
        system_message: dict | None = None,
        expected_leaf_id: Any = _ANY_LEAF,
    ) -> str:
        """Append a ``compaction`` entry (keys in Pi's order: summary, firstKeptEntryId,
        tokensBefore, details, usage, fromHook; None values are omitted). Returns its id.

        ``expected_leaf_id``: append only if the leaf is still this id (None: no entry yet),
        checked atomically with the write, so a summary of one branch never lands on another.

        Raises:
            EntryNotFoundError: ``first_kept_entry_id`` names no entry (a retain-none
                compaction names its own id: pass None to get that).
            LeafMovedError: the leaf is not ``expected_leaf_id`` (nothing appended).
        """
        if first_kept_entry_id is not None and self._lookup(first_kept_entry_id) is None:
            raise EntryNotFoundError.of(first_kept_entry_id)

        def build() -> dict:
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
        e: dict = {"type": "custom", "customType": custom_type}
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
        e: dict = {"type": "custom_message", "customType": custom_type, "content": content, "display": display}
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

    def append_context_edit(self, target_id: str, replacement: dict | None) -> str:
        """Append a ``context_edit`` entry (Pi 1.6): ``replacement`` None omits the target's
        message from future model context; ``{"content": ...}`` replaces its content (a string
        becomes one text block for assistant and tool-result messages). The target entry
        itself is never changed. Returns the edit's id.

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
        usage: dict | None = None,
    ) -> str:
        """Move the leaf to ``entry_id`` (None: before the first entry) and append a
        ``branch_summary`` entry there whose ``fromId`` is the abandoned leaf (``"root"`` when
        there was none). Returns the summary entry's id.

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

    def create_branched_session(self, leaf_id: str) -> "Session":
        """Clone: a new session holding only the path from the root to ``leaf_id`` (Pi
        ``createBranchedSession``), whose header names this file as ``parentSession``.

        Label entries on the path are dropped and the labels of path entries are re-created
        at the end (in Pi's label order). An entry whose parent was a dropped label is
        re-attached to that label's parent, so no entry is left dangling (Pi issue 5669).
        A legacy source is migrated first. This session is left unchanged; the clone is
        written atomically into ``session_dir`` (in memory for in-memory sessions).

        Raises:
            EntryNotFoundError: no entry has this id.
            SessionCycleError: the path loops.
        """
        path = self._walk(self._index_of(leaf_id))
        ids, parent_ids, _, types, _, _, _ = self._core.table(path)
        label_ids: dict[str, str | None] = {}
        kept: list[int] = []  # positions in path
        for k in range(len(path)):
            if types[k] == "label":
                # a dropped label's children re-attach to the label's own (effective) parent
                pid = parent_ids[k]
                label_ids[ids[k]] = label_ids.get(pid, pid) if pid in label_ids else pid
            else:
                kept.append(k)
        kept_ids = {ids[k] for k in kept}
        used = set(kept_ids)
        lines: list[bytes] = []
        for k in kept:
            i, pid = path[k], parent_ids[k]
            if pid in label_ids or self._core.needs_migration:
                raw = self._load_raw(i)
                if pid in label_ids:
                    raw = dict(raw)
                    raw["parentId"] = label_ids[pid]
                lines.append(dumps_entry(raw) + b"\n")
            else:
                lines.append(self._core.line(i) + b"\n")
        parent = ids[kept[-1]] if kept else None
        for target, e in self._core.labels():
            if target is not None and target in kept_ids:
                nid = self._core.new_id()  # unused in this file, so in the new one
                while nid in used:
                    nid = self._core.new_id()
                used.add(nid)
                lab = {
                    "type": "label",
                    "id": nid,
                    "parentId": parent,
                    "timestamp": iso_now(),
                    "targetId": target,
                    "label": self._load_raw(e).get("label"),
                }
                lines.append(dumps_entry(lab) + b"\n")
                parent = nid
        sid = new_session_id()
        ts = iso_now()
        header: dict = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": ts,
            "cwd": self.cwd,
        }
        if self._path is not None:
            header["parentSession"] = os.path.abspath(self._path)  # absolute, as Pi writes it
        head = dumps_entry(header) + b"\n"
        if self._path is None:
            core = _core.Index.in_memory()
            core.append(0, head + b"".join(lines))
            return Session(core, path=None, session_dir=None, header=header, header_on_disk=True)
        sdir = self._session_dir or self._path.parent
        sdir.mkdir(parents=True, exist_ok=True)
        new_path = inside(sdir, session_file_name(ts, sid))
        write_copy(new_path, [head, *lines], source=self._path)  # no wider than the source
        return Session.open(new_path, session_dir=sdir, durability=self._durability)

    # ==== cut point (Rust) =========================================================

    def _latest_compaction(self, path: list[int]) -> tuple | None:
        """:func:`sessiontree.context.latest_compaction` of the entries ``path`` (entry indices),
        from the index: type names, and string ids up to the compaction; only the compaction's
        line is parsed. Where the index's ids are not exact (duplicate or non-string ids, a
        legacy file) the parsed values decide."""
        core = self._core
        if core.entry_count() == len(core) and not core.needs_migration:
            inexact: list[int] = []

            def id_of(i: int) -> Any:
                got = core.record(path[i]).id
                if got is None:  # not a string: the index does not keep its value
                    inexact.append(i)
                    return object()
                return got

            def first_kept_of(i: int) -> Any:
                got = js_get(self._load_raw(path[i]), "firstKeptEntryId")
                if isinstance(got, str) and ("\ufffd" in got or _as_indexed(got) != got):
                    inexact.append(i)  # the index keeps lone surrogates as U+FFFD
                return got

            found = latest_compaction_at(core.types(path), id_of, first_kept_of)
            if not inexact:
                return found
        return latest_compaction(self._load_raws(path))

    def find_cut_point(self, keep_recent_tokens: int, *, token_counter: Any = None) -> "CutPoint":
        """Where a compaction keeping about ``keep_recent_tokens`` would cut the current branch
        (Pi 1.6 ``findCutPoint`` as ``prepareCompaction`` runs it: from the latest compaction's
        ``firstKeptEntryId``, over the context projection).

        The Rust core walks back from the leaf estimating tokens from the raw lines and stops
        as soon as the budget is met: it parses only the entries it needs, so a 1 GB session
        with a 20k-token tail costs about what a 1 MB one does. Branches with ``context_edit``
        entries, content Pi would choke on, or a custom ``token_counter`` use the exact Python
        rules (:func:`sessiontree.compaction.find_cut_point`).

        Returns a :class:`CutPoint` (entry ids; ``first_kept_entry_id`` None on an empty branch).

        Raises:
            SessionCycleError: the branch loops.
        """
        path = self._span()
        if not path:
            return CutPoint(None, None, False)
        from .compaction import collect_context_edits, kept_boundary
        from .compaction import find_cut_point as py_find_cut_point

        start, dropped = kept_boundary(self._latest_compaction(path))
        if dropped is not None:
            path = path[:dropped] + path[dropped + 1 :]
        got = (
            None
            if token_counter is not None
            else self._core.find_cut_point(path, start, len(path), max(0, int(keep_recent_tokens)))
        )
        if got is None:
            entries = self._load_raws(path)
            try:
                r = py_find_cut_point(
                    entries, start, len(entries), keep_recent_tokens, collect_context_edits(entries), token_counter
                )
            except PiError as exc:
                self._name_entry(exc)
                raise
            got = (r.first_kept_entry_index, r.turn_start_index, r.is_split_turn)
        first, turn, split = got
        if first >= len(path):
            return CutPoint(None, None, False)
        return CutPoint(
            self._core.record(path[first]).id, self._core.record(path[turn]).id if turn >= 0 else None, split
        )

    # ==== compaction and navigation ================================================

    @property
    def hooks(self) -> SessionHooks:
        """This session's :class:`sessiontree.hooks.SessionHooks` (``before_compact``,
        ``before_tree`` lists of sync or async callables)."""
        hooks = self._hooks
        if hooks is None:
            hooks = self._hooks = SessionHooks()
        return hooks

    async def acompact(
        self,
        summarizer: Any = None,
        *,
        settings: Any = None,
        custom_instructions: str | None = None,
        reason: str = "manual",
        context_window: int | None = None,
        max_tokens: int | None = None,
        will_retry: bool = False,
        accept_suspect_summary: bool = False,
    ) -> CompactionResult:
        """Compact the active branch (Pi ``compact``): see :func:`sessiontree.orchestration.acompact`
        for every parameter (``context_window``/``max_tokens``: the summarizing model's window
        and output limit in tokens; ``will_retry``: recorded for hooks; ``accept_suspect_summary``:
        append a summary the safety checks flag). Reads only the context span
        (:meth:`get_context_entries`). Returns a :class:`~sessiontree.orchestration.CompactionResult`.

        Raises:
            NothingToCompactError: ``"Nothing to compact (session too small)"``.
            SummaryBudgetError, UnsafeSummaryError: the summary could not be asked for or was
                refused (nothing appended).
            LeafMovedError: the leaf moved while the summary was written (nothing appended).
        """
        from . import orchestration

        try:
            return await orchestration.acompact(
                self,
                summarizer,
                settings=settings,
                custom_instructions=custom_instructions,
                reason=reason,
                context_window=context_window,
                max_tokens=max_tokens,
                will_retry=will_retry,
                accept_suspect_summary=accept_suspect_summary,
            )
        except PiError as exc:
            self._name_entry(exc)
            raise

    def compact(
        self,
        summarizer: Any = None,
        *,
        settings: Any = None,
        custom_instructions: str | None = None,
        reason: str = "manual",
        context_window: int | None = None,
        max_tokens: int | None = None,
        will_retry: bool = False,
        accept_suspect_summary: bool = False,
    ) -> CompactionResult:
        """Sync :meth:`acompact` (not from inside a running event loop); the same parameters."""
        from . import orchestration

        return orchestration.run_blocking(
            self.acompact(
                summarizer,
                settings=settings,
                custom_instructions=custom_instructions,
                reason=reason,
                context_window=context_window,
                max_tokens=max_tokens,
                will_retry=will_retry,
                accept_suspect_summary=accept_suspect_summary,
            )
        )

    async def anavigate_tree(
        self,
        target_id: str,
        *,
        summarize: bool = False,
        summarizer: Any = None,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        reserve_tokens: int = BRANCH_SUMMARY_RESERVE_TOKENS,
    ) -> NavigationResult:
        """Move within the tree (Pi ``/tree``): see :func:`sessiontree.orchestration.anavigate_tree`
        for every parameter. Returns a :class:`~sessiontree.orchestration.NavigationResult`.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry.
        """
        from . import orchestration

        try:
            return await orchestration.anavigate_tree(
                self,
                target_id,
                summarize=summarize,
                summarizer=summarizer,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                label=label,
                context_window=context_window,
                max_tokens=max_tokens,
                reserve_tokens=reserve_tokens,
            )
        except PiError as exc:
            self._name_entry(exc)
            raise

    def navigate_tree(
        self,
        target_id: str,
        *,
        summarize: bool = False,
        summarizer: Any = None,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
        context_window: int | None = None,
        max_tokens: int | None = None,
        reserve_tokens: int = BRANCH_SUMMARY_RESERVE_TOKENS,
    ) -> NavigationResult:
        """Sync :meth:`anavigate_tree`: selecting a user message moves the leaf to its parent and
        returns its text (``editor_text``); anything else becomes the leaf; ``summarize=True``
        appends a ``branch_summary`` of the abandoned branch.

        Raises:
            EntryNotFoundError: ``target_id`` names no entry.
        """
        from . import orchestration

        return orchestration.run_blocking(
            self.anavigate_tree(
                target_id,
                summarize=summarize,
                summarizer=summarizer,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                label=label,
                context_window=context_window,
                max_tokens=max_tokens,
                reserve_tokens=reserve_tokens,
            )
        )

    def usage_totals(self) -> UsageTotals:
        """Token and cost totals over every entry of the file (Pi ``get_session_stats``
        ``tokens``/``cost``): see :mod:`sessiontree.usage`. Returns a
        :class:`~sessiontree.usage.UsageTotals`."""
        types = USAGE_TYPES  # the entry-type table: message, compaction, branch_summary, usage
        n = len(self._core)
        # an unterminated last line may still change: it is never folded into the running total
        stable = n - 1 if n and self._core.ends_without_newline() else n
        acc = self._usage_acc
        if acc is None or acc[0] is not self._core or acc[1].count > stable:
            acc = self._usage_acc = (self._core, UsageAccumulator())
        run = acc[1]
        if run.count < stable:
            new = range(run.count, stable)
            tys = self._core.types(list(new))
            run.add(self._load_raws([i for i, t in zip(new, tys) if t in types]))
            run.count = stable
        if stable == n:
            return run.totals()
        last = UsageAccumulator()
        for name in ("input", "output", "cache_read", "cache_write", "cost"):
            setattr(last, name, getattr(run, name))
        if self._core.record(n - 1).type in types:
            last.add([self._load_raw(n - 1)])
        return last.totals()

    def build_provider_context(self) -> ProviderContext:
        """:meth:`build_context` repaired for providers (orphan tool results and unanswered tool
        calls dropped, empty failed attempts dropped): see :mod:`sessiontree.provider_context`.
        Returns a :class:`~sessiontree.provider_context.ProviderContext` ``(messages, dropped)``."""
        ctx = self.build_context()
        from .provider_context import repair_for_provider

        return repair_for_provider(ctx.messages, ctx.sources)

    # ---- HTML view (issue 12) ----
    def export_html(self, path: str | os.PathLike, *, scrub: bool = False, replay: str = "keep") -> Path:
        """Write a self-contained HTML view of this session (tree, active path, messages,
        search, the original JSONL) to ``path`` and return it as a :class:`~pathlib.Path`.
        Streams from the index; see :func:`sessiontree.html.export_html`. Written by
        :func:`atomic_writer`: never over this session's file, a FIFO or a device, nor through
        a symbolic link; never more readable than the session file or the page it replaces.

        With ``scrub``, the view is made from a scrubbed copy (:meth:`scrub`; ``replay`` as
        there) in a private temporary directory, removed afterwards: no secret the rules know
        reaches the page.

        Raises:
            OutputPathError: ``path`` is this session's file, a symbolic link, or not a
                regular file (nothing written).
            SessionFileChangedError: the file shrank or was replaced under the index.
            SessionArgumentError: ``scrub`` on a session with no file.
            OSError: ``path`` cannot be written.
        """
        from .html import export_html

        if not scrub:
            return export_html(self, path)
        if self._path is None:
            raise SessionArgumentError("export_html(scrub=True) needs a session file")
        from .scrub import scrubbed_copy

        self.flush()
        copy, tmp = scrubbed_copy(self._path, replay=replay)
        try:
            clean = Session.open(copy)
            try:
                if clean.entry_count() and self.leaf_id is not None and clean.leaf_id != self.leaf_id:
                    clean.branch(self.leaf_id)  # the view shows our leaf
                return export_html(clean, path)
            finally:
                clean.close()
        finally:
            tmp.cleanup()

    def scrub(
        self,
        out: str | os.PathLike | None = None,
        *,
        in_place: bool = False,
        check: bool = False,
        header: bool = False,
        replay: str = "keep",
    ) -> "ScrubReport":
        """Scrub secrets from this session's file (see :mod:`sessiontree.scrub`): into ``out``,
        rewriting the file (``in_place``), or only finding them (``check``). Returns the
        :class:`~sessiontree.scrub.ScrubReport` (kinds, JSON pointers, offsets, hashes: never a
        value). ``header`` also searches the header's ``cwd`` and ``parentSession``; ``replay``
        (``keep``/``drop``) is the policy for provider replay fields.

        ``in_place`` takes this session's writer lock, rewrites the file atomically (mode and
        owner kept; a symlink's target rewritten), then re-indexes it with the same leaf, and
        closes the writer (as :meth:`migrate`).

        Raises:
            SessionArgumentError: not exactly one of ``out``/``in_place``/``check``; ``out`` is
                this file, a symlink or not a regular file; an in-memory session.
            SessionLockedError: ``in_place`` and another writer holds the lock.
            SessionFileChangedError: ``in_place`` and the file was replaced since it was opened.
            OSError: reading or writing failed (no partial output is left).
        """
        from . import scrub as _scrub

        if self._path is None:
            raise SessionArgumentError("scrub needs a session file (in memory: sessiontree.scrub.scrub_bytes)")
        self.flush()
        if not in_place:
            return _scrub.scrub_file(self._path, out, check=check, header=header, replay=replay)
        if out is not None or check:
            raise SessionArgumentError("give exactly one of out, in_place or check")
        leaf_null = self._core.leaf_is_null()
        leaf_id = self._core.leaf_id()
        writer = self._get_writer()
        writer.acquire()
        try:
            self._core.refresh()
            target, fh, st = open_own_file(self._path, self._core.file_identity())
            with fh:
                report = _scrub.rewrite_open_file(fh, target, st, header=header, replay=replay)
            report.source = report.output = str(self._path)
        finally:
            self.close()
        self._reopen_keeping_leaf(leaf_null, leaf_id)
        return report

    # ---- end HTML view ----

    def _reopen_keeping_leaf(self, leaf_null: bool, leaf_id: str | None) -> None:
        """Indexes the rewritten file afresh and puts the leaf back where it was (by id)."""
        self._core = _core.Index.open(str(self._path))
        if leaf_null:
            self._core.set_leaf(None)
        elif leaf_id is not None and self._core.index_of(leaf_id) is not None:
            self._core.set_leaf(self._core.index_of(leaf_id))

    def _entry_lines(self, with_header: dict | None = None) -> Iterator[bytes]:
        """Every entry as a line (migrated when the file is legacy), optionally after a header."""
        if with_header is not None:
            yield dumps_entry(with_header) + b"\n"
        migrate = self._core.needs_migration
        for i in range(len(self._core)):
            if migrate:
                yield dumps_entry(self._load_raw(i)) + b"\n"
            else:
                yield self._core.line(i) + b"\n"

    def migrate(self) -> bool:
        """Rewrite a legacy v1/v2 file as v3, atomically (Pi does this on open). Lines Pi
        would drop (malformed, blank) are kept verbatim, so nothing is lost. Returns whether
        the file was rewritten.

        The rewrite holds the writer lock, first checks that the path still names the file
        this session indexed (same device and inode, not shorter), keeps the file's mode (and
        owner where permitted), rewrites a symbolic link's target (the link stays), and
        removes temp copies an earlier rewrite of this file left when it was killed.

        Raises:
            SessionFileChangedError: the file was replaced (renamed over), removed or
                truncated since it was opened: nothing is written.
            OSError: the file could not be replaced (it is left as it was).
        """
        if not self._core.needs_migration or self._path is None:
            return False
        self.flush()
        leaf_null = self._core.leaf_is_null()
        leaf_id = self._core.leaf_id()
        writer = self._get_writer()
        locked_at = time.time()
        writer.acquire()  # no other sessiontree writer while the file is replaced
        try:
            # the path still names our file (else SessionFileChangedError); lines another
            # program appended meanwhile are indexed, so they are migrated too
            self._core.refresh()
            target, fh, st = open_own_file(self._path, self._core.file_identity())
            with fh:
                data = fh.read()
            if len(data) < self._core.end:
                raise SessionFileChangedError(
                    f"{self._path} shrank since it was indexed: open it again (nothing was rewritten)"
                )
            replacements = migrated_lines(self._core, self._load_raw)
            header = header_line_at_version(self._core.header_line() or b"")
            rewrite_lines(
                target,
                data,
                replacements,
                header if header is not None else dumps_entry(self._header),
                _is_header_line,
                like=st,
                locked_at=locked_at,
            )
        finally:
            self.close()
        self._reopen_keeping_leaf(leaf_null, leaf_id)
        return True

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

    # ==== batch views for servers answering many clients (sessiontree.rpc) ==========

    @property
    def state_key(self) -> tuple:
        """A cheap key of everything this session's reads answer from: ``(file identity,
        indexed bytes, entries, leaf id, leaf version, file changes)``. Equal keys (on one
        ``Session``) mean equal answers from every read method; any append, :meth:`refresh` that
        found entries, or leaf move changes it (the leaf version is bumped on each move, so
        moving away and back changes it too), and so does a :meth:`refresh` that found the file's
        size, mtime or ctime changed (a rewrite in place it could not see reads the new bytes).
        Cost: none (the index knows each part)."""
        core = self._core
        return (core.file_identity(), core.end, len(core), core.leaf_id(), core.leaf_version, core.file_changes)

    def raw_entries(self, indices: Sequence[int]) -> list:
        """The parsed JSON values of the entries at ``indices`` (:attr:`Entry.raw` of each, as
        :meth:`entry_at` would give, migrated in memory for a legacy file), read in one batch
        without an :class:`Entry` per entry.

        Raises:
            IndexError: a position is out of range.
        """
        return self._load_raws(list(indices))

    def entry_texts(self, indices: Sequence[int]) -> list[bytes | None]:
        """The JSON text of each entry at ``indices`` as ``JSON.stringify`` writes its value (the
        bytes :func:`dumps_entry` gives for :attr:`Entry.raw`) where the file's line already is
        that text (checked in the core: compact, escaped and numbered as JavaScript writes, no
        repeated keys), so it is copied without a parse; None for the other entries (and for
        every entry of a legacy file, which is migrated in memory): read those with
        :meth:`raw_entries`.

        Raises:
            IndexError: a position is out of range.
        """
        idx = list(indices)
        if self._core.needs_migration:
            return [None] * len(idx)
        return _core.stringify_lines(self._core, idx)

    def tree_json(self, write: Callable[[Any], bytes], head: bytes = b"", foot: bytes = b"") -> bytes:
        """The JSON text of Pi's nested tree as RPC ``get_tree`` sends it under ``"tree"``:
        ``head + [{"entry": E, "children": [...], "label"?, "labelTimestamp"?}...] + foot`` (the nodes of
        :meth:`get_tree` in its order), written by the core in one iterative pass (no recursion
        on depth). Each entry's line is copied where it already is ``JSON.stringify``'s text (as
        :meth:`entry_texts` checks); the others, labels and label timestamps are ``write(value)``
        of the parsed value (:attr:`Entry.raw`; ``write`` must give ``JSON.stringify``'s text).
        Lines are read in batches of 4,096; the answer is one ``bytes``.

        Raises:
            SessionCycleError: duplicate ids put a node below itself (as :meth:`get_tree`).
            SessionError: the walk would repeat whole subtrees past a size limit.
        """
        tails: dict[int, bytes] = {}
        for i, (label, ts) in self.tree_labels().items():
            if label is not None:
                t = b',"label":' + write(label)
                if ts is not JS_UNDEFINED:
                    t += b',"labelTimestamp":' + write(ts)
                tails[i] = t
        return _core.tree_json(
            self._core,
            tails,
            lambda idx: [write(v) for v in self._load_raws(idx)],
            not self._core.needs_migration,
            head,
            foot,
        )

    def tree_labels(self) -> dict[int, tuple[Any, Any]]:
        """The labels :meth:`get_tree` puts on its nodes, by node position: ``{position:
        (label, timestamp)}`` where ``timestamp`` is the ``timestamp`` field of the label entry
        that set the label as it is (Pi's ``labelTimestamp``: ``None`` for a JSON ``null``, which
        Pi sends, :data:`~sessiontree._jsjson.JS_UNDEFINED` when the entry has none, which Pi
        leaves out). Cost: the label entries only."""
        out: dict[int, tuple[Any, Any]] = {}
        for target, e in self._core.labels():
            if target is not None:
                t = self._core.index_of(target)
                if t is not None:
                    raw = self._load_raw(e)
                    out[t] = (raw.get("label"), raw.get("timestamp", JS_UNDEFINED))
        return out

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

    def _forget_writer_after_fork(self) -> None:
        # a thread of the parent may have held this lock at the fork: the child gets a new one
        self._prepare_lock = threading.RLock()
        self._ready = False
        writer, self._writer = self._writer, None
        if writer is not None:
            self._core.forget_writer()
            writer.close()  # the child's copy only: the parent's descriptor keeps the lock

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    # ---- fleet rows (issue 18): a whole session's row facts as columns, from the core ----

    def fleet_columns(
        self,
        *,
        per_entry: bool = False,
        labels: Sequence[tuple[str, str]] = (),
        columns: Sequence[str] | None = None,
    ) -> dict:
        """What a whole-store job (:mod:`sessiontree.fleet`) reads of this session, computed by
        the core from the index and the raw lines (``rust/src/rows.rs``), never an object per
        entry. A dict:

        * ``totals``, ``summary_totals``: usage sums over every entry / over compactions and
          branch summaries (``(input, output, cache_read, cache_write, total, cost)``, tokens
          and dollars, by :class:`~sessiontree.usage.UsageAccumulator` with
          ``skip_missing=True``: an item is None when usages were added but none gave it a
          number); None when ``undecided`` is not empty;
        * ``undecided``: entry positions whose usage or tool calls the core left to the Python
          rules (escaped names, huge integers, deep nesting: ``sessiontree.usage`` decides);
        * ``tool_calls``: ``toolCall`` blocks of assistant messages (undecided entries left out);
        * ``last_activity``: ms of the last user/assistant message with ``content``
          (``message.timestamp`` when a number, else a valid entry timestamp), or None;
          ``last_activity_undecided``: the entry where the core stopped instead (or None);
        * ``path_length``: entries root to the context leaf (:meth:`build_context`'s leaf;
          None: a ``parentId`` cycle);
        * ``context``: ``(tokens, messages)`` of the context at that leaf, Pi's projected
          estimate (:func:`sessiontree.context.estimate_projected_context_tokens` over
          :meth:`build_context`), or None where the core leaves it to those rules (repeated
          ids, legacy files, context edits, system messages, entry types the core does not
          know, content the estimate leaves to Python, a cycle);
        * ``messages``, ``messages_by_role`` (user, assistant, toolResult, bashExecution,
          custom, any other role), ``compactions``, ``branch_summaries``: entry counts.

        With ``per_entry``: ``n`` and ``columns``, a dict of Arrow buffers per column (strings:
        ``(int32 offsets, data, validity or None, null count)``; ``timestamp``, ``line``,
        ``offset``, ``bytes``: int64; ``tokens`` (:meth:`entry_metrics`), ``input_tokens``,
        ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``, ``cost``: float64,
        each ``(values, b"", validity or None, null count)``; ``on_active_path``: the bits),
        and ``tokens_undecided`` (positions whose ``tokens`` :meth:`entry_metrics` decides).
        ``labels``: ``(entry id, label)`` pairs for the ``label`` column. ``columns``: the
        per-entry columns to make, in that order (the entry table's list,
        :data:`sessiontree.fleet.columns.ENTRY_COLUMNS`, names those the core makes); None:
        every one (``rust/src/columns.rs``).

        Raises:
            SessionFileChangedError: the file was rewritten under the index.
            SessionArgumentError: ``columns`` is not a sequence of names (a bare string is
                refused), names a column the core does not make, or one twice.
            SessionError: a string column would exceed 2 GiB (Arrow's int32 offsets).
        """
        names = None if columns is None else list(columns)
        if isinstance(columns, (str, bytes)) or (names is not None and not all(isinstance(c, str) for c in names)):
            raise SessionArgumentError(f"columns must be a list of column names (str), not {columns!r}")
        return _core.fleet_rows(self._core, self._context_leaf(), per_entry, list(labels), names)


class EntryTable(NamedTuple):
    """Entries as columns (:meth:`Session.entry_table`), one list per field, all the same
    length: entry positions, ``id`` and ``parentId`` (when strings, else None), whether
    ``parentId`` is JSON null, ``type`` and ``message.role`` (when strings), 1-based line and
    byte offset of each entry. ``zip(*table)`` gives one tuple per entry in this field order."""

    index: list[int]  # type: ignore[assignment]  # a NamedTuple field may shadow tuple.index
    id: list[str | None]
    parent_id: list[str | None]
    parent_is_null: list[bool]
    type: list[str | None]
    role: list[str | None]
    line: list[int]
    offset: list[int]


class EntryMetrics(NamedTuple):
    """Per-entry sizes, times and token estimates as columns (:meth:`Session.entry_metrics`), all
    the same length: entry positions, ``bytes`` of each entry's JSON text, ``timestamp_ms`` (ms
    since the epoch, None when invalid) and ``tokens`` (Pi's chars/4 estimate, None where Pi
    throws)."""

    index: list[int]  # type: ignore[assignment]  # a NamedTuple field may shadow tuple.index
    bytes: list[int]
    timestamp_ms: list[float | None]
    tokens: list[int | float | None]


class AbandonedBranch(NamedTuple):
    """What a move of the leaf abandons (:meth:`Session.abandoned_branch`): the entry positions
    from just below the common ancestor down to the old leaf, root first, and the ancestor's
    id (None: the branches share no ancestor)."""

    indices: list[int]
    ancestor_id: str | None


class CutPoint(NamedTuple):
    """A cut point as entry ids: the first entry kept verbatim, the entry opening the turn the
    cut splits (None when the cut does not split a turn), and whether it splits one."""

    first_kept_entry_id: str | None
    turn_start_entry_id: str | None
    is_split_turn: bool


def _set_optional(entry: dict, details: Any, usage: Any, from_hook: Any) -> None:
    """Summary entries' optional keys in Pi's order; None (JS undefined) is omitted."""
    if details is not None:
        entry["details"] = details
    if usage is not None:
        entry["usage"] = usage
    if from_hook is not None:
        entry["fromHook"] = from_hook


def _is_header_line(line: bytes) -> bool:
    try:
        v = parse_json_line(line.rstrip(b"\r"))
    except Exception:
        return False
    return isinstance(v, dict) and v.get("type") == "session" and isinstance(v.get("id"), str)


__all__ = [
    "Session",
    "atomic_write",
    "atomic_writer",
    "AtomicWriter",
    "dumps_entry",
    "SessionCycleError",
    "SessionError",
]
