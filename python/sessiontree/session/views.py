"""The batch views the package's own layers read: positions in, lists out, one core call.

Orchestration, auto-compaction, validation, the HTML view, RPC and the fleet read a session
through these public methods only (tests/seams/test_public_api_seams.py rejects private use
above the facade).
"""

from __future__ import annotations

import datetime
import threading
import warnings
from typing import Any, Callable, Sequence

from .. import _core
from .._jsjson import JS_UNDEFINED
from ..index_cache import IndexCache
from ..entries import AbandonedBranch, Entry, EntryMetrics, EntryTable, TreeTable, parse_json_line
from ..errors import SessionArgumentError, SessionCycleError, SessionError
from ..tokens import estimate_tokens
from .base import SessionBase


class Views(SessionBase):
    """Spans, positions, columns and the pass-throughs of the core's batch readers."""

    # ==== the context span and positions ===========================================

    def context_span(self, *, with_settings: bool = True, context_rule: bool = True) -> list[int]:
        """Entry positions (:attr:`Entry.index`) of the context span, root first.

        What context building and compaction read of the active branch (the index's
        ``context_span``, rust/src/walk.rs; :meth:`get_context_entries` as positions).
        ``with_settings``: include the few earlier entries whose values still count (the latest
        thinking-level and model entries before the latest compaction, every ``context_edit``);
        ``context_rule``: the leaf as :meth:`build_context` resolves it (an unknown leaf id
        reads as the last entry), else as :meth:`get_branch` does (it gives nothing). Empty when
        the leaf is null. Cost: the walk back from the leaf to the latest compaction; nothing
        parsed.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        leaf = self._context_leaf() if context_rule else self._core.leaf()
        return [] if leaf is None else self._core.context_span(leaf, with_settings)

    def context_values(self) -> list[Any]:
        """The context span as compaction reads it.

        :meth:`context_span` parsed (:meth:`raw_values`), the leaf as :meth:`get_branch`
        resolves it. Pure functions (Pi ``prepareCompaction``, ``buildSessionContext``) give the
        same answers on it as on the whole branch; its cost follows the context, not the branch.

        Raises:
            SessionCycleError: the parent chain from the leaf loops.
        """
        return self.raw_values(self.context_span(context_rule=False))

    def raw_values(self, indices: Sequence[int]) -> list[Any]:
        """The parsed values of the entries at positions ``indices``, in that order.

        Each is :attr:`Entry.raw`: a dict for every well-formed entry, migrated for a legacy
        file. One batch read of their lines, no :class:`Entry` made.

        Raises:
            IndexError: a position names no entry.
            SessionError: an entry nests too deeply to load in Python.
        """
        idx = list(indices)
        if self._core.needs_migration:
            return [self._load_raw(i) for i in idx]
        return [parse_json_line(line) for line in self._core.lines(idx)]

    def _content_findings(self, indices: Sequence[int]) -> list[tuple[int, str | None, str | None]]:
        """Where Pi throws on the content of the entries at positions ``indices``.

        The core's check (``rust/src/content.rs``); :func:`sessiontree.validation.content_problems`
        reports it.

        ``(position, stage, pi_error)`` for each entry Pi throws on (``stage``: ``"context"``,
        ``"estimate"`` or ``"serialize"``), ``(position, None, None)`` for each one the core leaves
        to the Python rules (every entry of a legacy file, migrated in memory); the others are
        left out. In the order of ``indices``.

        Raises:
            IndexError: a position names no entry.
        """
        idx = list(indices)
        if self._core.needs_migration:
            return [(i, None, None) for i in idx]
        return self._core.content_check(idx)

    def raw_entries(self, indices: Sequence[int]) -> list[Any]:
        """Deprecated alias of :meth:`raw_values` (the same values; warns ``DeprecationWarning``)."""
        warnings.warn("Session.raw_entries is deprecated: use Session.raw_values", DeprecationWarning, stacklevel=2)
        return self.raw_values(indices)

    def entry_texts(self, indices: Sequence[int]) -> list[bytes | None]:
        """Each entry's ``JSON.stringify`` text where the file's line already is it, else None.

        For the entries at ``indices``: the bytes :func:`dumps_entry` gives for :attr:`Entry.raw`
        where the file's line already is that text (checked in the core: compact, escaped and numbered as JavaScript writes, no
        repeated keys), so it is copied without a parse; None for the other entries (and for
        every entry of a legacy file, which is migrated in memory): read those with
        :meth:`raw_values`.

        Raises:
            IndexError: a position is out of range.
        """
        idx = list(indices)
        if self._core.needs_migration:
            return [None] * len(idx)
        return _core.stringify_lines(self._core, idx)

    def entry_index(self, entry_id: Any) -> int | None:
        """The position (:attr:`Entry.index`) of the entry :meth:`get_entry` returns, or None.

        The last entry if the id repeats; None when no entry has it or ``entry_id`` is not a
        str. Cost: one by-id lookup."""
        return self._lookup(entry_id) if isinstance(entry_id, str) else None

    def parent_positions(self, indices: Sequence[int]) -> list[int | None]:
        """For each position in ``indices``, the position the walk up from it goes to next.

        That is Pi's ``byId.get(parentId)``: the entry winning that id), or None at a root (``parentId`` null,
        missing, not a string, or naming no entry). Cost: one lookup per position.

        Raises:
            IndexError: a position names no entry.
        """
        core = self._core
        return [core.walk_parent(i) for i in indices]

    @property
    def leaf_is_null(self) -> bool:
        """True when the leaf is before the first entry (Pi's null leaf).

        A new session, :meth:`reset_leaf`, a branch summary at the root; as opposed to a leaf
        naming an entry or an id that names none."""
        return self._core.leaf_is_null()

    def last_on_branch(self, etype: str, role: str | None = None) -> Entry | None:
        """The newest entry of type ``etype`` (and role ``role``) on the active branch, or None.

        The index walks back from the leaf only as far as it is.

        Raises:
            SessionCycleError: the parent chain from the leaf loops before one is found.
        """
        leaf = self._core.leaf()
        if leaf is None:
            return None
        i = self._core.find_back(leaf, etype, role)
        return None if i is None else Entry(self._view, i)

    def abandoned_branch(self, old_leaf: str | None, target_id: str) -> "AbandonedBranch | None":
        """What moving the leaf from ``old_leaf`` to ``target_id`` abandons, from the index.

        An :class:`AbandonedBranch` ``(indices, ancestor_id)``, the entry positions from just
        below the common ancestor down to ``old_leaf`` (root first) and the ancestor's id (None:
        no common ancestor). Both branches are walked up only as far as their common ancestor.
        None when the pure rule
        (:func:`sessiontree.branch_summary.collect_entries_for_branch_summary`) must decide: no
        old leaf, an unknown id, duplicate ids, a legacy file.

        Raises:
            SessionCycleError: a parent chain loops.
        """
        core = self._core
        a = self._lookup(old_leaf) if isinstance(old_leaf, str) and old_leaf else None
        b = self._lookup(target_id) if isinstance(target_id, str) else None
        if a is None or b is None or core.needs_migration or core.entry_count() != len(core):
            return None
        ancestor = core.common_ancestor_near(a, b)
        below = core.branch_since(a, ancestor) or []
        return AbandonedBranch(below, None if ancestor is None else core.record(ancestor).id)

    def branch_positions(self, from_id: str | None = None) -> list[int]:
        """:meth:`get_branch` as entry positions (:attr:`Entry.index`), root first.

        No entries or columns are built: the index's walk up from ``from_id`` (default: the leaf).
        Empty when the leaf is null or names no entry.

        Raises:
            EntryNotFoundError: ``from_id`` names no entry.
            SessionCycleError: the parent chain loops.
        """
        return self._branch_walk(from_id)

    def check_tree(self) -> None:
        """Check that Pi's tree (:meth:`get_tree`) can be walked, without building it.

        Raises:
            SessionCycleError: a ``parentId`` cycle is reachable from a root (through duplicate
                ids); ``ids`` names it.
            SessionError: the walk would repeat whole subtrees past a size limit.
        """
        self._core.check_tree()

    @property
    def compaction_lock(self) -> threading.Lock:
        """The lock one compaction of this session at a time holds.

        :func:`sessiontree.orchestration.acompact` takes it without blocking the event loop."""
        return self._compaction_lock

    @property
    def state_key(self) -> tuple[Any, ...]:
        """A cheap key of everything this session's reads answer from.

        ``(file identity, indexed bytes, entries, leaf id, leaf version, file changes)``. Equal
        keys (on one ``Session``) mean equal answers from every read method; any append,
        :meth:`refresh` that found entries, or leaf move changes it (the leaf version is bumped
        on each move, so moving away and back changes it too), and so does a :meth:`refresh`
        that found the file's size, mtime or ctime changed (a rewrite in place it could not see
        reads the new bytes). Cost: none (the index knows each part)."""
        core = self._core
        return (core.file_identity(), core.end, len(core), core.leaf_id(), core.leaf_version, core.file_changes)

    # ==== columns ==================================================================

    def entry_table(self, indices: Sequence[int] | None = None) -> EntryTable:
        """What listings show of many entries, as columns (an :class:`EntryTable`).

        Nothing is parsed and no :class:`Entry` is built: an :class:`EntryTable` over the entry positions ``indices``
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
        return self.entry_table(self._branch_walk(from_id))

    def context_table(self) -> EntryTable:
        """The path :meth:`build_context` walks (Pi ``buildSessionContext``) as an :meth:`entry_table`.

        Root first: empty when the leaf is null; when the leaf id names no
        entry, the path to the last entry in the file (where :meth:`branch_table` is empty).
        Cost: the index only.

        Raises:
            SessionCycleError: the parent chain loops.
        """
        return self.entry_table(self._context_path())

    def entry_metrics(self, indices: Sequence[int] | None = None) -> EntryMetrics:
        """Size, time and token columns of many entries, as an :class:`EntryMetrics`.

        Over the entry positions ``indices`` (default: every entry in file order): ``bytes`` is the length of
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
                    from ..compaction import entry_context_messages

                    tokens[k] = sum(estimate_tokens(m) for m in entry_context_messages(self._load_raw(idx[k])))
                except (SessionError, ValueError):
                    tokens[k] = None
        return EntryMetrics(idx, size, when, tokens)

    def tree_roots(self) -> list[int]:
        """Positions of the tree's root nodes in Pi's order (``getTree``'s roots).

        The children table's Python lists are not built."""
        return self._core.roots()

    def tree_table(self) -> TreeTable:
        """Pi's tree (as :meth:`get_tree`) as entry positions, for walking millions of nodes.

        No objects are built: ``roots`` (node positions in Pi's order) and the children of
        node ``i`` in ``kids[start[i]:start[i + 1]]`` (sorted like Pi). Positions are
        :attr:`Entry.index` values (:meth:`entry_at`)."""
        return self._core.tree_table()

    def tree_leaves(self) -> list[int]:
        """Positions (:attr:`Entry.index`) of the tree's leaf nodes, in file order.

        Nodes of Pi's ``getTree`` (one per distinct id: the entry that wins the id) without
        children, including nodes no root reaches (below a ``parentId`` cycle). Cost: the index
        and the children table, no entry parsed.

        Raises:
            SessionError: the tree walk would repeat whole subtrees past a size limit.
        """
        if len(self._core) == 0:
            return []
        return self._core.tree_leaves()

    def unreachable_entries(self) -> list[Entry]:
        """Entries no root reaches (they hang off a ``parentId`` cycle), in file order.

        Empty when the tree walk itself meets a loop through duplicated ids.

        Raises:
            SessionError: the tree walk would repeat whole subtrees past a size limit.
        """
        try:
            return [Entry(self._view, i) for i in self._core.unreachable()]
        except SessionCycleError:
            return []

    def tree_labels(self) -> dict[int, tuple[Any, Any]]:
        """The labels :meth:`get_tree` puts on its nodes, by node position.

        ``{position: (label, timestamp)}`` where ``timestamp`` is the ``timestamp`` field of the
        label entry that set the label as it is (Pi's ``labelTimestamp``: ``None`` for a JSON
        ``null``, which Pi sends, :data:`~sessiontree._jsjson.JS_UNDEFINED` when the entry has
        none, which Pi leaves out). Cost: the label entries only."""
        out: dict[int, tuple[Any, Any]] = {}
        for target, e in self._core.labels():
            if target is not None:
                t = self._core.index_of(target)
                if t is not None:
                    raw = self._load_raw(e)
                    out[t] = (raw.get("label"), raw.get("timestamp", JS_UNDEFINED))
        return out

    def tree_json(self, write: Callable[[Any], bytes], head: bytes = b"", foot: bytes = b"") -> bytes:
        """The JSON text of Pi's nested tree as RPC ``get_tree`` sends it under ``"tree"``.

        ``head + [{"entry": E, "children": [...], "label"?, "labelTimestamp"?}...] + foot`` as one
        ``bytes``: what :meth:`write_tree_json` hands its sink, joined (see there).

        Raises:
            SessionCycleError: duplicate ids put a node below itself (as :meth:`get_tree`).
            SessionError: the walk would repeat whole subtrees past a size limit.
        """
        parts: list[bytes] = []
        self.write_tree_json(parts.append, write, head, foot)
        return b"".join(parts)

    def write_tree_json(
        self, sink: Callable[[bytes], object], write: Callable[[Any], bytes], head: bytes = b"", foot: bytes = b""
    ) -> None:
        """:meth:`tree_json`'s text handed to ``sink`` in pieces (never held whole).

        The nodes of :meth:`get_tree` in its order, written by the core in one iterative pass
        (no recursion on depth); ``sink(piece)`` is called with one piece per batch of up to
        4,096 entries (or 8 MiB of lines), whose concatenation is the text. Each batch's lines
        are read and checked with the GIL released, on both cores, while the previous batch is
        handed over. Each entry's line is copied where the scan found it already
        ``JSON.stringify``'s text (as :meth:`entry_texts` tells); the others, labels and label
        timestamps are ``write(value)`` of the parsed value (:attr:`Entry.raw`; ``write`` must
        give ``JSON.stringify``'s text). The tree is the one of the call's start: entries
        appended meanwhile (another thread) are not in it.

        Raises:
            SessionCycleError: duplicate ids put a node below itself (as :meth:`get_tree`),
                before ``sink`` is called.
            SessionError: the walk would repeat whole subtrees past a size limit (before
                ``sink`` is called).
            SessionFileChangedError: the file changed under the session (possibly after some
                pieces were handed over).
            Whatever ``sink`` raises.
        """
        tails: dict[int, bytes] = {}
        for i, (label, ts) in self.tree_labels().items():
            if label is not None:
                t = b',"label":' + write(label)
                if ts is not JS_UNDEFINED:
                    t += b',"labelTimestamp":' + write(ts)
                tails[i] = t
        _core.tree_json(
            self._core,
            tails,
            lambda idx: [write(v) for v in self.raw_values(idx)],
            not self._core.needs_migration,
            head,
            foot,
            sink,
        )

    # ==== the core's batch writers: the HTML page, the fleet's rows ==================

    def to_bytes(self) -> bytes:
        """The session as the index holds it.

        The header line, then each entry's line as it is in the file (not migrated), each ending
        in ``\n``. For an in-memory session, the file it would be; for a file session, the
        indexed lines (problem lines such as malformed or blank ones are left out). Cost: every
        line read once."""
        core = self._core
        return b"".join(
            [(core.header_line() or b"") + b"\n"] + [line + b"\n" for line in core.lines(list(range(len(core))))]
        )

    def html_digest(self, start: int, stop: int, preview_chars: int) -> bytes:
        """The HTML view's index chunk for entries ``start:stop``, as JSON bytes.

        Made by rust/src/digest.rs: per entry id, kind, preview of at most ``preview_chars``
        characters, reference id, offset and length, timestamp, token estimate, usage;
        :mod:`sessiontree.html` compresses it into the page. Cost: those entries' lines, read and
        digested by the core.

        Raises:
            IndexError: ``start:stop`` is not a range of entry positions.
        """
        return _core.html_digest(self._core, start, stop, preview_chars)

    def html_segment_bounds(self, seg_bytes: int) -> list[tuple[int, int]]:
        """The HTML view's segments of a file session.

        ``[(offset, length)]`` covering the indexed bytes, each cut where an entry's line starts
        and about ``seg_bytes`` long (rust/src/export.rs ``segment_bounds``). Cost: the index
        only (no read)."""
        return _core.html_segment_bounds(self._core, seg_bytes)

    def html_write_index(self, fd: int, batch: int, preview_chars: int, head: bytes, tail: bytes) -> None:
        """Writes the HTML view's index chunks to descriptor ``fd``.

        For each ``batch`` entries, ``head`` + base64(gzip(:meth:`html_digest` of them)) +
        ``tail``, in entry order (digested and compressed by the core on every core, written
        while later batches are worked on; rust/src/export.rs). Cost: every entry's line read
        once.

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
        """Writes the HTML view's segments to descriptor ``fd`` in ``order``.

        For segment ``k``, ``heads[k]`` + base64(gzip(the bytes of ``bounds[k]``)) + ``tail``;
        the bytes are the file's (read by the core with the GIL released), or ``data``'s for an
        in-memory session (rust/src/export.rs). Cost: each segment's bytes read and compressed
        once.

        Raises:
            SessionFileChangedError: the file shrank under the index.
            OSError: reading the file or writing ``fd`` failed.
        """
        _core.html_write_segments(self._core, fd, bounds, order, heads, tail, data)

    def otel_mapper(self, **meta: Any) -> Any:
        """A new ``_core.OtelMapper`` for this session's trace (rust/src/otel).

        ``meta``: its keyword arguments but ``index`` (this session's: its entries and the
        leaf's branch, walked in the core), as :func:`sessiontree.otel.session_requests` gives
        them. Feed it with :meth:`otel_feed`.
        """
        return _core.OtelMapper(index=self._core, **meta)

    def otel_feed(self, mapper: Any, lo: int, hi: int, lines: list[bytes] | None = None) -> bytes:
        """Maps entries ``lo:hi`` into ``mapper``; the OTLP/JSON request lines it finished (bytes).

        ``mapper`` is a ``_core.OtelMapper`` (the OpenTelemetry export of
        :mod:`sessiontree.otel`, rust/src/otel). The core reads the entries' ids, types, parents and lines from the index, then
        maps them with the GIL released. ``lines``: the entries' lines after migration (a legacy
        file), instead of the file's. Cost: each line read and parsed once.

        Raises:
            IndexError: ``lo:hi`` is not a range of entry positions.
            SessionFileChangedError: the file changed under the index.
        """
        data: bytes = mapper.feed(self._core, lo, hi, lines)
        return data

    def otel_finish_chunk(self, mapper: Any, k: int, lines: list[bytes] | None = None) -> bytes:
        """Writes the turn and branch spans of ``mapper``'s chunk ``k``; the request lines finished.

        See :meth:`otel_feed`. The turns' user messages are read again when content is on
        (``lines``: theirs after migration).

        Raises:
            SessionFileChangedError: the file changed under the index.
        """
        data: bytes = mapper.finish_chunk(self._core, k, lines)
        return data

    def fleet_columns(
        self,
        *,
        per_entry: bool = False,
        labels: Sequence[tuple[str, str]] = (),
        columns: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """What a whole-store job (:mod:`sessiontree.fleet`) reads of this session, as a dict.

        Computed by the core from the index and the raw lines (``rust/src/rows.rs``), never an object per
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

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        offset: int = 0,
        role: str | None = None,
        type: str | None = None,
        branch_state: str | None = None,
        label: str | None = None,
        tool: str | None = None,
        since_time: datetime.datetime | str | int | float | None = None,
        until_time: datetime.datetime | str | int | float | None = None,
        index_cache: IndexCache = None,
    ) -> Any:
        """Full-text search of this session's file, as :func:`sessiontree.search` of this one file.

        The same query syntax, filters and :class:`~sessiontree.SearchResult`. Reads
        what is in the file: lines still buffered by this session's writer are not found until
        written. ``since_time``/``until_time`` are :func:`sessiontree.search`'s ``since``/``until``
        (named apart from this class's ``since``, which is an entry id). Raises
        :class:`SessionArgumentError` for a session with no file (in memory),
        :class:`~sessiontree.errors.SearchQueryError` for a bad query."""
        import os

        from ..search_hits import search_files

        if self._path is None:
            raise SessionArgumentError("search reads the session file; an in-memory session has none")
        path = os.path.abspath(self._path)
        return search_files(
            query,
            [path],
            path,
            limit=limit,
            offset=offset,
            role=role,
            type=type,
            branch_state=branch_state,  # type: ignore[arg-type]
            label=label,
            tool=tool,
            since=since_time,
            until=until_time,
            index_cache=index_cache,
        )
