"""Typed, lazy views over session entries.

An :class:`Entry` is a handle on one line of the session file: its id, parent id, type and
line number come from the Rust index; the line is parsed (with orjson) only when its body is
asked for, through :attr:`Entry.raw` or mapping access (``entry["message"]``).
"""

# No ``from __future__ import annotations`` here: with it, every NamedTuple field annotation
# below is a string that ``typing`` compiles into a ForwardRef at import (a light import).
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, NamedTuple

import orjson

from . import _core
from .errors import SessionError


def probe_header(buf: bytes, eof: bool) -> "HeaderProbe":
    """The header of a file from its first bytes ``buf``, by the rule ``Session.open`` applies.

    ``eof``: ``buf`` is the whole file. The core's ``header_probe``, as a :class:`HeaderProbe`:
    ``("more", None, 0, 0)`` (read more), ``("none", None, 0, 0)`` (no JSON value),
    ``("valid", None, offset, len)`` or ``("invalid", reason, 0, 0)``. Listing uses it so that
    listing and opening agree."""
    return _core.header_probe(buf, eof)


def parse_json_line(line: bytes) -> Any:
    """Parse one JSON line as JavaScript's ``JSON.parse`` would, returning Python values.

    orjson handles almost every line; lines it refuses are checked by the Rust core's JSON
    reader (``_core.json_check``: JavaScript's grammar, linear time, no recursion), which also
    measures their nesting; only then does the standard library parser build them. That covers
    what JavaScript accepts and orjson does not: lone UTF-16 surrogate escapes such as
    ``"\\ud800"``, integers beyond 64 bits (where orjson refuses them: 3.13 reads an integer
    outside [-2**63, 2**64 - 1] as a float itself), bytes that are not UTF-8 inside strings (read
    as U+FFFD, as Node reads them). Integers too long for Python's ``int`` (over 4,300 digits)
    become the float ``JSON.parse`` makes of them (usually ``inf``).

    Raises:
        json.JSONDecodeError: the line is not JSON as JavaScript reads it (``NaN``,
            ``Infinity``, a torn line...).
        SessionError: the line nests deeper than Python can represent (JavaScript accepts it).
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise SessionError(
                f"entry is nested too deeply to load in Python (more than {MAX_DEPTH} levels; "
                "it stays in the tree, only its body cannot be read)"
            ) from exc
    depth, reason = _core.json_check(line)
    if reason is not None:
        raise json.JSONDecodeError(reason, "", 0) from None
    if depth > MAX_DEPTH:
        raise SessionError(f"entry is nested too deeply to load in Python (more than {MAX_DEPTH} levels)")
    try:
        return json.loads(line.decode("utf-8", errors="replace"), parse_int=_js_int)
    except RecursionError as exc:
        raise SessionError("entry is nested too deeply to load in Python") from exc


def _js_int(text: str) -> int | float:
    # Python refuses int() of more than 4,300 digits (ValueError); JavaScript reads every
    # number as a double, which is what such a literal becomes (inf beyond 1.8e308).
    return int(text) if len(text) <= 4000 else float(text)


#: Deepest nesting we hand to a Python JSON parser (orjson stops at 1024 too): deeper input
#: could exhaust the C stack when a program raised Python's recursion limit.
MAX_DEPTH = 1000


#: The core's fixed entry types and message roles, in code order (``rust/src/index/codes.rs``;
#: ``""`` at code 0 stands for "not a string"): each has its row in the core's projection
#: (``rust/src/entry_kind.rs``); ``sessiontree.entry_types`` is checked against them.
CORE_TYPE_NAMES: tuple[str, ...] = _core.TYPE_NAMES
CORE_ROLE_NAMES: tuple[str, ...] = _core.ROLE_NAMES
#: The scanner's problem kinds (:attr:`Problem.kind`; ``rust/src/index/problems.rs``).
PROBLEM_KINDS: tuple[str, ...] = _core.PROBLEM_KINDS


class Problem(NamedTuple):
    """A skipped or odd line of a session file.

    1-based ``line`` number, byte ``offset`` of the line, ``kind`` (``malformed_json``, ``torn_last_line``, ``skipped_value``, ``blank_line``, ``extra_header``,
    ``invalid_utf8``, ``line_too_long``) and a human ``message``."""

    line: int
    offset: int
    kind: str
    message: str


class EntryRecord(NamedTuple):
    """One entry's facts from the index, what :class:`Entry` shows without parsing its line.

    ``_core.Index.record``: ``id``, ``parent_id``, ``type`` and ``role`` (``message.role``;
    v2 ``hookMessage`` reads ``custom``) when strings, else None; ``parent_is_null``
    (``parentId`` is JSON null); 1-based ``line``; byte ``offset`` of the line."""

    id: str | None
    parent_id: str | None
    parent_is_null: bool
    type: str | None
    role: str | None
    line: int
    offset: int


class EntryColumns(NamedTuple):
    """What listings show of many entries, one list per field.

    From ``_core.Index.table``: the facts of :class:`EntryRecord`."""

    ids: list[str | None]
    parent_ids: list[str | None]
    parent_is_null: list[bool]
    types: list[str | None]
    roles: list[str | None]
    lines: list[int]
    offsets: list[int]


class HeaderProbe(NamedTuple):
    """The header of a file from its first bytes (:func:`probe_header`).

    ``state`` ``"more"`` (read more), ``"none"`` (no JSON value), ``"valid"`` (the header's JSON
    text is ``length`` bytes at ``offset``) or ``"invalid"`` (``reason`` says why)."""

    state: Literal["more", "none", "valid", "invalid"]
    reason: str | None
    offset: int
    length: int


class TreeTable(NamedTuple):
    """Pi's tree as entry positions (:meth:`Session.tree_table`, ``_core.Index.tree_table``).

    Root nodes, and the children of node ``i`` in ``kids[start[i]:start[i + 1]]``."""

    roots: list[int]
    start: list[int]
    kids: list[int]


class ScrubFinding(NamedTuple):
    """One secret found (never its value), as the core's scrubber gives it.

    From ``_core.Scrubber.take_findings``; :mod:`sessiontree.scrub` reports them.

    ``line``: 1-based line number; ``entry_id``: the entry's id (None for the header, a line
    that is not JSON or an entry without a string id); ``pointer``: RFC 6901 JSON pointer of the
    string inside the line (None when the line is not JSON); ``in_key``: the secret was an
    object key (the pointer names that member); ``kind``; ``start``/``end``: offsets in the
    decoded string in Unicode code points; ``hash``: the placeholder's 6 hex digits."""

    line: int
    entry_id: str | None
    pointer: str | None
    in_key: bool
    kind: str
    start: int
    end: int
    hash: str

    def to_json(self) -> dict[str, Any]:
        """The finding as the JSON report writes it (Pi-style camelCase keys)."""
        return {
            "line": self.line,
            "entryId": self.entry_id,
            "pointer": self.pointer,
            "inKey": self.in_key,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "hash": self.hash,
        }


#: The secret kinds the core's scrub rules detect, in the rule table's order (rust/src/scrub/rules.rs).
SCRUB_KINDS: tuple[str, ...] = tuple(_core.Scrubber.kinds())


def new_scrubber(header: bool, replay: str, record: bool) -> Any:
    """The core's streaming scrubber (``_core.Scrubber``, rust/src/scrub/).

    Blocks of a session file in, scrubbed bytes out; ``header``: also scrub the header's ``cwd``
    and ``parentSession``; ``replay``: ``"keep"`` or ``"drop"`` (provider replay fields);
    ``record``: keep the findings. :mod:`sessiontree.scrub` drives it."""
    return _core.Scrubber(bool(header), replay, bool(record))


def otel_trace_id(session_id: str) -> str:
    """The OpenTelemetry trace id (32 hex digits) of a session (rust/src/otel ``trace_id_of``)."""
    return _core.otel_trace_id(session_id)


def otel_span_id(session_id: str, parts: list[str]) -> str:
    """The span id (16 hex digits) of ``parts`` (an entry id...) in a session (rust/src/otel)."""
    return _core.otel_span_id(session_id, parts)


class ScrubStats(NamedTuple):
    """What the core's scrubber counted so far (``_core.Scrubber.stats``).

    ``bytes_in`` fed, ``lines_changed``, secrets ``found`` (replaced, or with ``record`` off
    counted), ``replay_fields`` kept or dropped."""

    bytes_in: int
    lines_changed: int
    found: int
    replay_fields: int


class EntryTable(NamedTuple):
    """Entries as columns (:meth:`Session.entry_table`), one list per field, all the same length.

    Entry positions, ``id`` and ``parentId`` (when strings, else None), whether ``parentId`` is
    JSON null, ``type`` and ``message.role`` (when strings), 1-based line and byte offset of
    each entry. ``zip(*table)`` gives one tuple per entry in this field order."""

    index: list[int]  # type: ignore[assignment]  # a NamedTuple field may shadow tuple.index
    id: list[str | None]
    parent_id: list[str | None]
    parent_is_null: list[bool]
    type: list[str | None]
    role: list[str | None]
    line: list[int]
    offset: list[int]


class EntryMetrics(NamedTuple):
    """Per-entry sizes, times and token estimates as columns (:meth:`Session.entry_metrics`).

    All the same length: entry positions, ``bytes`` of each entry's JSON text, ``timestamp_ms`` (ms
    since the epoch, None when invalid) and ``tokens`` (Pi's chars/4 estimate, None where Pi
    throws)."""

    index: list[int]  # type: ignore[assignment]  # a NamedTuple field may shadow tuple.index
    bytes: list[int]
    timestamp_ms: list[float | None]
    tokens: list[int | float | None]


class AbandonedBranch(NamedTuple):
    """What a move of the leaf abandons (:meth:`Session.abandoned_branch`).

    The entry positions from just below the common ancestor down to the old leaf, root first,
    and the ancestor's id (None: the branches share no ancestor)."""

    indices: list[int]
    ancestor_id: str | None


class CutPoint(NamedTuple):
    """A cut point as entry ids.

    The first entry kept verbatim, the entry opening the turn the cut splits (None when the cut
    does not split a turn), and whether it splits one."""

    first_kept_entry_id: str | None
    turn_start_entry_id: str | None
    is_split_turn: bool


class ProblemList(Sequence[Problem]):
    """The problems of a session, built one by one on access.

    A file of millions of bad lines costs a compact record per line in Rust, not a Python object
    per line."""

    __slots__ = ("_core", "_n")

    def __init__(self, core: _core.Index):
        self._core = core
        self._n = core.problem_count()

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("problem index out of range")
        return self._core.problem(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ProblemList)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        shown = ", ".join(repr(p) for p in self[:3])
        return f"ProblemList([{shown}{', ...' if self._n > 3 else ''}], n={self._n})"


class EntryView:
    """What a session's :class:`Entry` objects read: its index and how an entry's value is parsed.

    ``index`` is the core's ``Index`` the session reads now (``record(i)``: an
    :class:`EntryRecord`); ``load(index, i)`` parses entry ``i``'s line (migrated). The facade
    makes one per session and sets ``index`` again when a rewrite opens a new one, so entries
    made before read the new index. It holds no reference to the session (no cycle: a dropped
    session is freed at once). Entries of one view are one session's: equal by view and position.
    """

    __slots__ = ("index", "load")

    def __init__(self, index: Any, load: Callable[[Any, int], Any]) -> None:
        self.index = index
        self.load = load


class Entry(Mapping[str, Any]):
    """One session entry (header excluded), as Pi holds it after migration.

    Attributes come from the index without parsing the line: ``index`` (position in file
    order, 0-based), ``id`` and ``parent_id`` (str, or None when null or not a string),
    ``type`` (str or None), ``line`` (1-based line number). ``raw`` is the parsed JSON value
    (normally a dict, with legacy v1/v2 migration applied in memory); mapping access reads it.
    """

    __slots__ = ("_view", "index", "_raw", "_rec", "_rec_core")
    _rec: EntryRecord  # the index's facts, taken on first use (see below)

    def __init__(self, view: EntryView, index: int):
        self._view = view
        self.index = index
        self._raw: Any = _UNSET
        self._rec_core: Any = None

    # Each attribute takes the entry's record (one call for all the index's facts) on first
    # use and keeps it while the session holds the same index (a rewrite such as migrate()
    # opens a new one: the record is taken again from it).

    @property
    def id(self) -> str | None:
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.id

    @property
    def parent_id(self) -> str | None:
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.parent_id

    @property
    def parent_is_null(self) -> bool:
        """Whether ``parentId`` is JSON ``null`` (a root by Pi's rule).

        As opposed to missing or not a string (``parent_id`` is None in all three cases)."""
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.parent_is_null

    @property
    def type(self) -> str | None:
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.type

    @property
    def role(self) -> str | None:
        """``message.role`` for message entries (v2 ``hookMessage`` reads ``custom``), else None."""
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.role

    @property
    def line(self) -> int:
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.line

    @property
    def offset(self) -> int:
        """Byte offset of the line in the file."""
        core = self._view.index
        if self._rec_core is not core:
            self._rec, self._rec_core = core.record(self.index), core
        return self._rec.offset

    @property
    def timestamp(self) -> Any:
        """The entry's ``timestamp`` as stored (normally an ISO-8601 string)."""
        raw = self.raw
        return raw.get("timestamp") if isinstance(raw, dict) else None

    @property
    def raw(self) -> Any:
        """The parsed entry (a dict for every well-formed entry), parsed on first access."""
        if self._raw is _UNSET:
            view = self._view
            self._raw = view.load(view.index, self.index)
        return self._raw

    @property
    def message(self) -> dict[str, Any] | None:
        """The ``message`` object of a message entry, else None."""
        raw = self.raw
        if isinstance(raw, dict):
            m = raw.get("message")
            return m if isinstance(m, dict) else None
        return None

    def __getitem__(self, key: str) -> Any:
        raw = self.raw
        if isinstance(raw, dict):
            return raw[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raw = self.raw
        return iter(raw) if isinstance(raw, dict) else iter(())

    def __len__(self) -> int:
        raw = self.raw
        return len(raw) if isinstance(raw, dict) else 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Entry):
            return self._view is other._view and self.index == other.index
        return NotImplemented

    def __hash__(self) -> int:
        return hash((id(self._view), self.index))

    def __repr__(self) -> str:
        return f"Entry(id={self.id!r}, type={self.type!r}, parent_id={self.parent_id!r}, line={self.line})"


class _Unset:
    __slots__ = ()


_UNSET: Any = _Unset()


@dataclass(eq=False)
class TreeNode:
    """A node of :meth:`Session.get_tree`.

    The ``entry``, its ``children`` (TreeNodes in Pi's order: by timestamp, ties in file order)
    and its resolved ``label`` (str or None)."""

    entry: Entry
    children: list["TreeNode"] = field(default_factory=list)
    label: Any = None

    def __repr__(self) -> str:
        return f"TreeNode(id={self.entry.id!r}, children={len(self.children)}, label={self.label!r})"


class TreeSource:
    """What the nodes of one :meth:`Session.get_tree` call share.

    The core's tree table taken at the call (a snapshot: ``kids[start[i]:start[i + 1]]`` are
    node ``i``'s children), the labels resolved at the call, and the nodes made so far (one per
    position, so a repeated id is one node listed once per occurrence, as the eager tree had
    it)."""

    __slots__ = ("view", "start", "kids", "label_of", "nodes")

    def __init__(self, view: EntryView, start: Sequence[int], kids: Sequence[int], label_of: dict[int, Any]):
        self.view = view
        self.start = start
        self.kids = kids
        self.label_of = label_of
        self.nodes: dict[int, TreeNode] = {}

    def node(self, i: int) -> TreeNode:
        n = self.nodes.get(i)
        if n is None:
            n = self.nodes.setdefault(i, _LazyTreeNode._made(self, i))  # one node per position, threads too
        return n


class _LazyTreeNode(TreeNode):
    """A :class:`TreeNode` of :meth:`Session.get_tree` made on access.

    Its ``entry`` is made when first read, its ``children`` list when first read (their nodes
    then, not their subtrees); both are kept once made, and may be reassigned as on any
    ``TreeNode``."""

    __slots__ = ("_src", "_i", "_entry", "_children", "label")

    def __init__(self, entry: Entry, children: list[TreeNode] | None = None, label: Any = None) -> None:
        # TreeNode's own signature, for dataclasses.replace() and copies; get_tree uses _made()
        self._src: Any = None
        self._i = -1
        self._entry = entry
        self._children = [] if children is None else children
        self.label = label

    @classmethod
    def _made(cls, src: TreeSource, i: int) -> "_LazyTreeNode":
        n = cls.__new__(cls)
        n._src = src
        n._i = i
        n._entry = _UNSET
        n._children = _UNSET
        n.label = src.label_of.get(i)
        return n

    @property
    def entry(self) -> Entry:
        e = self._entry
        if e is _UNSET:
            e = self._entry = Entry(self._src.view, self._i)
        return e

    @entry.setter
    def entry(self, value: Entry) -> None:
        self._entry = value

    @property
    def children(self) -> list[TreeNode]:
        c = self._children
        if c is _UNSET:
            src, i = self._src, self._i
            node = src.node
            c = self._children = [node(k) for k in src.kids[src.start[i] : src.start[i + 1]]]
        return c

    @children.setter
    def children(self, value: list[TreeNode]) -> None:
        self._children = value


def entry_value(entry: Any) -> Any:
    """The parsed value behind one entry, for the pure functions.

    An :class:`Entry` gives its :attr:`Entry.raw` (parsed now if it was not yet), a plain
    ``dict`` (or any non-mapping value) is returned as is, any other mapping is copied into a
    ``dict``. The pure functions (:mod:`sessiontree.context`, :mod:`sessiontree.compaction`,
    :mod:`sessiontree.branch_summary`, ...) call this on what they are given, so ``Session``'s
    entries and dicts give the same answer."""
    if type(entry) is dict:  # the common case first (isinstance on an ABC is slow)
        return entry
    if isinstance(entry, Entry):
        return entry.raw
    if isinstance(entry, dict) or not isinstance(entry, Mapping):
        return entry
    return dict(entry)


def entry_values(entries: Any) -> list[Any]:
    """:func:`entry_value` of each of ``entries`` (any iterable), as a new list."""
    return [entry_value(e) for e in entries]
