"""Checks of one session's structure and content, beyond what the scanner records per line.

:meth:`sessiontree.Session.validate` runs them and ``sessiontree validate`` prints what it
returns, so the library and the CLI agree on every file. Two kinds:

* structural (ids, parent links, cycles, label targets): :func:`structural_problems`;
* content Pi would throw on when it builds the context, estimates tokens or serializes a
  conversation for a summary (a ``message`` that is null, ``content`` that is not iterable, a
  tool call without ``arguments``...): :func:`content_problems`, decided by the core
  (``rust/src/content.rs``) for the whole file; :func:`entry_content_error` runs the Python
  rules on one parsed entry (the check's test oracle, and the judge of the lines the core
  leaves undecided).

Each problem is a dict ``{line, offset, kind, message, severity}``, severity ``"error"`` or
``"note"`` (blank lines), as the CLI has always printed them.

:meth:`Session.validate` hands these functions itself; they read it through its public batch
views (entry table, problems, walks) and the core's content check
(``Session._content_findings``), never the core index itself. Users call
:meth:`Session.validate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Callable

from .entry_types import CONTENT_TYPES
from .errors import PiError, SessionCycleError, SessionError

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["NOTE_KINDS", "entry_content_error", "structural_problems", "content_problems"]

#: Problem kinds that do not make ``validate`` fail (Pi reads such files exactly as intended).
#: ``too_deep``: an entry nested too deeply for Python to load; Pi reads it, but building the
#: context or compacting over it here raises :class:`~sessiontree.errors.SessionError`.
NOTE_KINDS = frozenset({"blank_line", "too_deep"})

#: Entry types whose content reaches Pi's context building, estimates and serialization.
_CONTENT_TYPES = CONTENT_TYPES  # the entry-type table (entry_types.py)


def entry_content_error(raw: Any) -> PiError | None:
    """The error Pi would throw on this entry's content, or None.

    Runs, on the context messages of one parsed entry, what compaction, branch summaries and
    context estimates run: context building (:func:`sessiontree.context.entry_to_context_messages`,
    Pi ``buildSessionContext``), the token estimate (Pi ``estimateTokens``) and the summary
    serialization (Pi ``convertToLlm`` + ``serializeConversation``). Returns the first
    :class:`~sessiontree.errors.PiError` raised (its ``pi_error`` is Pi's text), else None.
    Cost: one entry's messages.

        >>> call = {"type": "toolCall", "name": "read"}  # no arguments
        >>> entry_content_error({"type": "message", "message": {"role": "assistant", "content": [call]}}).pi_error
        "TypeError: Cannot read properties of undefined (reading 'length')"
        >>> entry_content_error({"type": "message", "id": "a", "message": {"role": "user", "content": "hi"}}) is None
        True
    """
    found = _content_check(raw)
    return found[1] if found is not None else None


#: What fails when each stage throws (the ``content_error`` message says it).
_STAGE_EFFECT = {
    "context": "building the context, and estimates and compaction over it, fail",
    "estimate": "token estimates (should_compact, compaction, branch summaries) over it fail",
    "serialize": "compactions and branch summaries that summarize it fail",
}


def _content_check(raw: Any) -> tuple[str, PiError] | None:
    """(stage, error) for the first stage that throws on ``raw``'s content, else None."""
    from .compaction import serialize_conversation
    from .context import convert_to_llm, entry_to_context_messages
    from .tokens import estimate_tokens

    if not isinstance(raw, dict) or raw.get("type") not in _CONTENT_TYPES:
        return None
    stage = "context"
    try:
        messages = entry_to_context_messages(raw)
        stage = "estimate"
        for message in messages:
            estimate_tokens(message)
        stage = "serialize"
        serialize_conversation(convert_to_llm(messages))
    except PiError as exc:
        return stage, exc
    return None


def _problem(line: int, offset: int, kind: str, message: str) -> dict[str, Any]:
    return {
        "line": line,
        "offset": offset,
        "kind": kind,
        "message": message,
        "severity": "note" if kind in NOTE_KINDS else "error",
    }


def _cycles(session: "Session", candidates: Iterable[int]) -> list[list[int]]:
    """Parent cycles among ``candidates`` (entries unreachable from any root): each cycle
    once, as entry indices in walk order (child to parent). Iterative."""
    state: dict[int, int] = {}  # 1 = on the current walk, 2 = done
    cycles: list[list[int]] = []
    for start in candidates:
        if start in state:
            continue
        walk: list[int] = []
        i: int | None = start
        while i is not None and i not in state:
            state[i] = 1
            walk.append(i)
            i = session.parent_positions([i])[0]
        if i is not None and state.get(i) == 1:
            cycles.append(walk[walk.index(i) :])
        for j in walk:
            state[j] = 2
    return cycles


def structural_problems(session: "Session") -> list[dict[str, Any]]:
    """The scanner's line problems (``malformed_json``, ``torn_last_line``, ``skipped_value``,
    ``blank_line``, ``extra_header``, ...) plus structural ones: ``missing_id``,
    ``duplicate_id``, ``orphan`` (parentId names no entry: Pi makes it a root),
    ``bad_parent_id`` (parentId missing or not a string), ``self_parent`` (Pi's getBranch never
    returns from it), ``parent_cycle``, ``unreachable`` (hangs off a cycle), ``leaf_cycle`` (the
    leaf's path loops: Pi cannot open the file), ``label_target_missing``, ``leaf_entry`` (a
    ``{"type":"leaf","targetId":...}`` line some harnesses append to move the leaf: Pi 1.6
    reads it as an ordinary entry, which becomes the leaf, and without an id the active branch
    is empty; we read it as Pi 1.6 does and report it until its rule is pinned). Unsorted.

    Reads ``session`` through its public batch views (:meth:`Session.entry_table`,
    :attr:`Session.problems`, :meth:`Session.check_tree`, :meth:`Session.unreachable_entries`,
    :meth:`Session.parent_positions`, :meth:`Session.raw_values`). Cost: every entry's index
    record, plus the parsed ``label`` entries.
    """
    out: list[dict[str, Any]] = []
    table = session.entry_table()
    ids, lines, offsets = table.id, table.line, table.offset

    def add(i: int | None, kind: str, message: str, line: int = 0, offset: int = 0) -> None:
        if i is not None:
            line, offset = lines[i], offsets[i]
        out.append(_problem(line, offset, kind, message))

    for p in session.problems:
        add(None, p.kind, p.message, p.line, p.offset)
    n = len(ids)
    first_line: dict[str, int] = {}
    leaf_at = [i for i in range(n) if table.type[i] == "leaf"]
    for i, raw in zip(leaf_at, session.raw_values(leaf_at)):
        target = raw.get("targetId") if isinstance(raw, dict) else None
        add(
            i,
            "leaf_entry",
            f"a harness-written leaf entry (targetId {target!r}): Pi 1.6 reads it as an ordinary entry"
            + (" without an id, so the active branch ends here and is empty" if ids[i] is None else "")
            + "; read as Pi 1.6 does until its rule is pinned",
        )
    leaf_set = set(leaf_at)
    for i in range(n):
        eid = ids[i]
        if eid is None:
            if i not in leaf_set:
                add(i, "missing_id", "entry has no string id (Pi keeps it as a root that nothing can reference)")
            continue
        if eid in first_line:
            add(i, "duplicate_id", f"id {eid!r} already used on line {first_line[eid]}; this later entry wins lookups")
        else:
            first_line[eid] = lines[i]
        pid = table.parent_id[i]
        if pid is not None:
            if pid == eid:
                add(
                    i,
                    "self_parent",
                    f"entry {eid!r} is its own parent (a root in Pi's tree; Pi's getBranch never returns from it)",
                )
            elif session.entry_index(pid) is None:
                add(i, "orphan", f"parentId {pid!r} names no entry (Pi treats {eid!r} as a root)")
        elif not table.parent_is_null[i]:
            add(i, "bad_parent_id", f"entry {eid!r} has no parentId or a non-string one (Pi treats it as a root)")
    try:
        session.check_tree()
    except SessionCycleError as exc:
        add(None, "parent_cycle", f"parentId cycle reachable from a root: {' -> '.join(map(str, exc.ids))}")
    unreachable = [e.index for e in session.unreachable_entries()]  # empty on a loop through duplicate ids
    cycles = _cycles(session, unreachable)
    on_cycle = {i for c in cycles for i in c}
    for c in cycles:
        if len(c) == 1 and table.parent_id[c[0]] == ids[c[0]]:
            continue  # already reported as self_parent
        names = " -> ".join(repr(ids[i]) for i in c)
        add(min(c), "parent_cycle", f"parentId cycle: {names} -> {ids[c[0]]!r}")
    for i in unreachable:
        if i not in on_cycle:
            add(i, "unreachable", f"entry {ids[i]!r} hangs off a parentId cycle (not reachable from any root)")
    leaf = session.leaf_entry
    if leaf is not None:
        try:
            session.branch_positions()  # walks the leaf's parent chain
        except SessionCycleError as exc:
            add(
                leaf.index,
                "leaf_cycle",
                f"the active leaf's parent chain loops ({' -> '.join(map(str, exc.ids))}): Pi cannot open this session",
            )
    label_at = [i for i in range(n) if table.type[i] == "label"]
    for i, raw in zip(label_at, session.raw_values(label_at)):
        target = raw.get("targetId") if isinstance(raw, dict) else None
        if not isinstance(target, str) or session.entry_index(target) is None:
            add(i, "label_target_missing", f"label targets {target!r}, which names no entry")
    return out


def content_problems(session: "Session", progress: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """``content_error`` for every entry whose content Pi would throw on when it builds the
    context, estimates tokens or serializes the conversation for a summary
    (:func:`entry_content_error`): compaction, branch summaries and ``should_compact`` fail on a
    branch holding one. The message names the entry and Pi's error. A ``too_deep`` note for an
    entry nested too deeply for Python to load. In entry order.

    The core's check decides (``rust/src/content.rs``: it reads each line of the four
    content-carrying types once, on every core, as a shape); a line it leaves undecided (nesting
    past 128 levels, a duplicate key, a number beyond a double, a legacy file migrated in
    memory) is parsed here and checked by :func:`entry_content_error`, the rule's test oracle
    (tests/parity/test_content_check.py). ``progress(n)``: called as entries are passed (``n``
    entry positions at a time, ``len(session)`` in all)."""
    out: list[dict[str, Any]] = []
    table = session.entry_table()
    n = len(table.type)
    todo = [i for i, etype in enumerate(table.type) if etype in _CONTENT_TYPES]
    passed = 0
    for c0 in range(0, len(todo), _CHUNK):
        part = todo[c0 : c0 + _CHUNK]
        found = session._content_findings(part)
        undecided = [i for i, stage, _ in found if stage is None]
        by_python = _python_problems(session, undecided) if undecided else {}
        for i, stage, pi_error in found:
            if stage is None:
                out += by_python.get(i, [])
            else:
                out.append(_content_error(table.line[i], table.offset[i], table.id[i], stage, pi_error or ""))
        if progress is not None and c0 + _CHUNK < len(todo):
            progress(part[-1] + 1 - passed)
            passed = part[-1] + 1
    if progress is not None and n > passed:
        progress(n - passed)
    return out


#: Entry positions checked per call of the core (a progress step).
_CHUNK = 16384


def _content_error(line: int, offset: int, entry_id: Any, stage: str, pi_error: str) -> dict[str, Any]:
    return _problem(
        line,
        offset,
        "content_error",
        f"entry {entry_id!r}: Pi throws {pi_error!r} on its content ({_STAGE_EFFECT[stage]})",
    )


def _python_problems(session: "Session", idx: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The problems of the entries at ``idx`` by the Python rules (:func:`_content_check`), by
    position: the lines the core's check leaves undecided."""
    table = session.entry_table()
    out: dict[int, list[dict[str, Any]]] = {}
    for i, raw in _raw_values(session, idx):
        line, offset = table.line[i], table.offset[i]
        if isinstance(raw, SessionError):  # nested too deeply for Python's parser
            message = (
                f"entry {table.id[i]!r}: {raw} (Pi reads it; building the context or compacting over it here fails)"
            )
            out[i] = [_problem(line, offset, "too_deep", message)]
            continue
        found = _content_check(raw)
        if found is not None:
            stage, err = found
            out[i] = [_content_error(line, offset, table.id[i], stage, err.pi_error)]
    return out


def _raw_values(session: "Session", idx: list[int], batch: int = 1024) -> Iterator[tuple[int, Any]]:
    """``(i, parsed value)`` for each position of ``idx``, read in batches; a value that cannot
    be loaded (:class:`SessionError`: nested too deeply) comes as its error, alone."""
    for b0 in range(0, len(idx), batch):
        part = idx[b0 : b0 + batch]
        try:
            yield from zip(part, session.raw_values(part))
        except SessionError:
            for i in part:
                try:
                    yield i, session.raw_values([i])[0]
                except SessionError as exc:
                    yield i, exc
