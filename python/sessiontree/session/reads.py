"""Pi ``SessionManager``'s read API over the index: properties, entries, branches, the tree.

Reading never materializes every entry: ids, parents, types, children and labels come from
the Rust index; an entry's JSON is parsed only when asked (:class:`~sessiontree.entries.Entry`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, cast

from .._jsjson import js_trim
from ..context import SessionContext, build_session_context
from ..entries import Entry, ProblemList, TreeNode, TreeSource, parse_json_line
from ..entry_types import USAGE_TYPES
from ..errors import EntryNotFoundError, PiError, SessionError, SessionFileChangedError
from ..provider_context import ProviderContext
from ..usage import UsageAccumulator, UsageTotals
from ..validation import content_problems, structural_problems
from .base import SessionBase, _as_indexed

if TYPE_CHECKING:
    from . import Session


#: entries whose usage :meth:`usage_totals` parses at a time (its memory: one batch, not the file)
_USAGE_BATCH = 256


class Reads(SessionBase):
    """Properties and Pi's read methods (``getEntry``, ``getBranch``, ``getTree``, ...)."""

    # ==== properties ===============================================================

    @property
    def path(self) -> Path | None:
        """The session file, or None for an in-memory session."""
        return self._path

    @property
    def session_dir(self) -> Path | None:
        """The sessions folder this session was opened or created with (None: not given).

        Sessions branched from it are written there; when None they go beside this file (none
        in memory)."""
        return self._session_dir

    @property
    def session_id(self) -> Any:
        """The header's ``id`` as written.

        A str in every file Pi writes; any JSON value, or None when missing, in a hand-made one."""
        return self._header.get("id")

    @property
    def cwd(self) -> str:
        """The header's ``cwd``; the process's working folder when the header has none (Pi's rule)."""
        cwd = self._header.get("cwd")
        return cwd if isinstance(cwd, str) else os.getcwd()

    @property
    def header(self) -> dict[str, Any]:
        """The session header as Pi holds it after migration (a copy)."""
        return dict(self._header)

    @property
    def file_header(self) -> dict[str, Any] | None:
        """The header line as it is in the file, parsed (before any migration: a v1 file has no ``version``).

        None for an empty file or a header line that is not a JSON object."""
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
        return None if i is None else Entry(self._view, i)

    @property
    def leaf_id(self) -> str | None:
        """The current leaf's id, or None.

        None before the first entry, after :meth:`reset_leaf`, or when the last entry's id is
        not a string."""
        return self._core.leaf_id()

    @property
    def session_name(self) -> str | None:
        """``name.trim()`` of the last ``session_info`` entry in file order, on any branch.

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
        """Resolved labels ``{target id: label}`` in Pi's order.

        Label entries replayed in file order; a truthy ``label`` sets, anything else clears;
        targets need not exist."""
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
        """Lines Pi skips or that look damaged, in file order.

        A sequence of :class:`Problem` built on access (``len()``, indexing, iteration)."""
        return ProblemList(self._core)

    def validate(self, *, content: bool = True, progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
        """Every problem in the file, sorted by line.

        The line problems of :attr:`problems` (same line, offset, kind and message), structural
        ones (``missing_id``, ``duplicate_id``, ``orphan``, ``bad_parent_id``, ``self_parent``,
        ``parent_cycle``, ``unreachable``, ``leaf_cycle``, ``label_target_missing``) and, with
        ``content``, ``content_error`` for entries whose content Pi would throw on when
        estimating, compacting or summarizing. See :mod:`sessiontree.validation`.

        Returns dicts ``{line, offset, kind, message, severity}``, severity ``"error"`` or
        ``"note"`` (blank lines). ``sessiontree validate`` prints exactly this list. Cost: the
        whole index, plus parsing label entries (and with ``content`` the message-carrying ones).
        ``progress(n)``, when given, is called as the content check passes entries, ``n`` at a
        time, ``len(self)`` in all (for a progress bar).

            >>> Session.in_memory().validate()
            []
        """
        out = structural_problems(cast("Session", self))
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
            out += content_problems(cast("Session", self), progress)
        elif progress is not None:
            progress(len(self))
        out.sort(key=lambda p: (p["line"], p["offset"]))
        return out

    @property
    def needs_migration(self) -> bool:
        """True for a legacy v1/v2 file that Pi would rewrite on open."""
        return self._core.needs_migration

    @property
    def legacy_version(self) -> int | None:
        """1 or 2 for a legacy file the first write rewrites as v3, else None.

        The rewrite is Pi's ``migrateSessionEntries``."""
        if not self._core.needs_migration:
            return None
        return 1 if self._core.legacy_v1 else 2

    @property
    def indexed_bytes(self) -> int:
        """Bytes of the session file this session has indexed.

        The file's length at the last scan, :meth:`refresh` or append (for :meth:`from_bytes`,
        the data's length; 0 for a new in-memory session). Cost: none (the index knows it)."""
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

    # ==== entries, branches, the tree ==============================================

    def _entry(self, i: int) -> Entry:
        return Entry(self._view, i)

    def entries(self) -> list[Entry]:
        """All entries in file order (header excluded; duplicates and branches included)."""
        return [Entry(self._view, i) for i in range(len(self._core))]

    def iter_entries(self) -> Iterator[Entry]:
        """Like :meth:`entries`, lazily."""
        for i in range(len(self._core)):
            yield Entry(self._view, i)

    def get_entries(self, since: str | None = None) -> list[Entry]:
        """Entries in file order; with ``since``, only those appended after that entry.

        ``since`` is a durable cursor (Pi RPC ``get_entries``).

        Raises:
            EntryNotFoundError: ``since`` names no entry (Pi: ``Entry not found: <id>``).
        """
        if since is None:
            return self.entries()
        return [Entry(self._view, k) for k in range(self._since_start(since), len(self._core))]

    def _since_start(self, since: Any) -> int:
        """File position after the entry ``since`` names.

        With a repeated id, after its first occurrence (Pi ``entries.findIndex``). The scan for
        the first occurrence runs only when the file repeats ids."""
        i = self._lookup(since) if isinstance(since, str) else None
        if i is None:
            raise EntryNotFoundError.of(since)
        if self._core.entry_count() != len(self._core):
            key = self._core.record(i).id
            i = self._core.ids(list(range(i + 1))).index(key)
        return i + 1

    def get_entries_page(self, since: str | None = None, limit: int | None = None) -> list[Entry]:
        """Like :meth:`get_entries`, at most ``limit`` entries (None: all).

        One page of the file-order listing, for paging through huge files. Cost follows the
        page, not the file.

        Raises:
            EntryNotFoundError: ``since`` names no entry (``Entry not found: <id>``).
            ValueError: ``limit`` is negative.
        """
        if limit is not None and limit < 0:
            raise ValueError("limit must be >= 0")
        start = 0 if since is None else self._since_start(since)
        stop = len(self._core) if limit is None else min(len(self._core), start + limit)
        return [Entry(self._view, k) for k in range(start, stop)]

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id (the last one if the id repeats), or None (Pi ``getEntry``).

        None when no entry has it, a non-string id included. Every method that needs the entry
        (:meth:`branch`, :meth:`get_branch`, :meth:`get_children`, ...) raises
        :class:`EntryNotFoundError` (``Entry not found: <id>``) for exactly these ids, the CLI
        prints that line (exit 2) and RPC answers it (docs/divergences.md row 32)."""
        i = self._lookup(entry_id) if isinstance(entry_id, str) else None
        return None if i is None else Entry(self._view, i)

    def get_children(self, entry_id: str) -> list[Entry]:
        """Children of an entry in Pi's tree order (by timestamp, ties in file order).

        Raises:
            EntryNotFoundError: no entry has this id.
        """
        return [Entry(self._view, c) for c in self._core.children(self._index_of(entry_id))]

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Entries from the root down to ``from_id`` (default: the leaf), root first
        (Pi ``getBranch``). Empty when the leaf is null.

        Raises:
            EntryNotFoundError: ``from_id`` names no entry.
            SessionCycleError: the parent chain loops (Pi never returns).
        """
        return [Entry(self._view, i) for i in self._branch_walk(from_id)]

    def get_context_entries(self) -> list[Entry]:
        """The entries of the active branch that context building and compaction read, root first.

        The whole branch when it holds no compaction; otherwise the latest compaction's kept
        range (from its ``firstKeptEntryId``) to the leaf, preceded by the few earlier entries
        whose values still count (the latest thinking-level and model entries before it, and any
        ``context_edit``). Every pure function
        (:func:`~sessiontree.context.build_session_context`,
        :func:`~sessiontree.compaction.prepare_compaction`, ...) gives the same answer on this
        list as on :meth:`get_branch`, at a cost that follows the context, not the branch: the
        index walks back from the leaf and no line is parsed until read.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        return [Entry(self._view, i) for i in self.context_span()]

    def entry_at(self, index: int) -> Entry:
        """The entry at file position ``index`` (0-based, header excluded; ``Entry.index``).

        Raises:
            IndexError: no entry there.
        """
        if not 0 <= index < len(self._core):
            raise IndexError(f"entry index {index} out of range")
        return Entry(self._view, index)

    def get_tree(self) -> list[TreeNode]:
        """The whole tree as root :class:`TreeNode` s (Pi ``getTree``).

        Roots are entries whose ``parentId`` is null, their own id, or unknown (orphans);
        children sorted by timestamp, ties in file order; a repeated id is one node listed once
        per occurrence. Built without recursion.

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
        src = TreeSource(self._view, start, kids, label_of)  # nodes and entries made on access
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

    # ==== context, usage, the file =================================================

    def build_context(self) -> SessionContext:
        """The messages the model sees on the current branch (Pi ``buildSessionContext``).

        Compaction folded in, context edits applied, with the thinking level and model. See :func:`sessiontree.context.build_session_context`.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        try:
            return build_session_context(self.raw_values(self.context_span()))
        except PiError as exc:
            self._name_entry(exc)
            raise

    def build_provider_context(self) -> ProviderContext:
        """:meth:`build_context` repaired for providers (see :mod:`sessiontree.provider_context`).

        Orphan tool results, unanswered tool calls and empty failed attempts are dropped: see :mod:`sessiontree.provider_context`.
        Returns a :class:`~sessiontree.provider_context.ProviderContext` ``(messages, dropped)``."""
        ctx = self.build_context()
        from ..provider_context import repair_for_provider

        return repair_for_provider(ctx.messages, ctx.sources)

    def usage_totals(self) -> UsageTotals:
        """Token and cost totals over every entry of the file (Pi ``get_session_stats`` ``tokens``/``cost``).

        See :mod:`sessiontree.usage`. Returns a :class:`~sessiontree.usage.UsageTotals`."""
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
            todo = [i for i, t in zip(new, tys) if t in types]
            for k in range(0, len(todo), _USAGE_BATCH):  # a batch of entries in memory at a time
                run.add(self.raw_values(todo[k : k + _USAGE_BATCH]))
            run.count = stable
        if stable == n:
            return run.totals()
        last = UsageAccumulator()
        for name in ("input", "output", "cache_read", "cache_write", "cost"):
            setattr(last, name, getattr(run, name))
        if self._core.record(n - 1).type in types:
            last.add([self._load_raw(n - 1)])
        return last.totals()

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
        """What the saved index (:mod:`sessiontree.index_cache`) did when this session was opened.

        ``("warm", covered_bytes, "")`` (a saved index was loaded and only the bytes after
        ``covered_bytes`` were scanned), ``("saved", 0, why)`` (a cold scan, because ``why``,
        then the index was saved), ``("cold", 0, why)`` (a cold scan, nothing saved: e.g. below
        the size saved, or the folder is unwritable) or ``("off", 0, "")``. A warm session reads
        the saved keys and records as its queries need them, each block checked as it is read;
        once one was found damaged (its answers then come from a cold scan of the file, the same
        as a cold open's), ``("cold", 0, why)``."""
        return self._core.cache_state()
