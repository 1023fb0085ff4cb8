"""Checks of one session's structure and content, beyond what the scanner records per line.

:meth:`sessiontree.Session.validate` runs them and ``sessiontree validate`` prints what it
returns, so the library and the CLI agree on every file. Two kinds:

* structural (ids, parent links, cycles, label targets): :func:`structural_problems`;
* content Pi would throw on when it builds the context, estimates tokens or serializes a
  conversation for a summary (a ``message`` that is null, ``content`` that is not iterable, a
  tool call without ``arguments``...): :func:`entry_content_error`, one entry at a time.

Each problem is a dict ``{line, offset, kind, message, severity}``, severity ``"error"`` or
``"note"`` (blank lines), as the CLI has always printed them.

This module is the Session's own: :func:`structural_problems` reads the core index that
:meth:`Session.validate` hands it (entry positions, ids, parent links, walks); users call
:meth:`Session.validate`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .errors import PiError, SessionCycleError, SessionError

__all__ = ["NOTE_KINDS", "entry_content_error", "structural_problems", "content_problems"]

#: Problem kinds that do not make ``validate`` fail (Pi reads such files exactly as intended).
#: ``too_deep``: an entry nested too deeply for Python to load; Pi reads it, but building the
#: context or compacting over it here raises :class:`~sessiontree.errors.SessionError`.
NOTE_KINDS = frozenset({"blank_line", "too_deep"})

#: Entry types whose content reaches Pi's context building, estimates and serialization.
_CONTENT_TYPES = ("message", "custom_message", "branch_summary", "compaction")


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


def _problem(line: int, offset: int, kind: str, message: str) -> dict:
    return {
        "line": line,
        "offset": offset,
        "kind": kind,
        "message": message,
        "severity": "note" if kind in NOTE_KINDS else "error",
    }


def _cycles(index: Any, candidates: Iterable[int]) -> list[list[int]]:
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
            i = index.walk_parent(i)
        if i is not None and state.get(i) == 1:
            cycles.append(walk[walk.index(i) :])
        for j in walk:
            state[j] = 2
    return cycles


def structural_problems(index: Any, load_raw: Callable[[int], Any]) -> list[dict]:
    """The scanner's line problems (``malformed_json``, ``torn_last_line``, ``skipped_value``,
    ``blank_line``, ``extra_header``, ...) plus structural ones: ``missing_id``,
    ``duplicate_id``, ``orphan`` (parentId names no entry: Pi makes it a root),
    ``bad_parent_id`` (parentId missing or not a string), ``self_parent`` (Pi's getBranch never
    returns from it), ``parent_cycle``, ``unreachable`` (hangs off a cycle), ``leaf_cycle`` (the
    leaf's path loops: Pi cannot open the file), ``label_target_missing``. Unsorted.

    ``index`` is the session's core index (``sessiontree._core.Index``), ``load_raw(i)`` entry
    ``i`` parsed (migrated for legacy files). Cost: every entry's index record, plus the parsed
    ``label`` entries.
    """
    out: list[dict] = []
    n = len(index)
    cols = index.table(list(range(n)))
    ids = cols.ids

    def add(i: int | None, kind: str, message: str, line: int = 0, offset: int = 0) -> None:
        if i is not None:
            line, offset = cols.lines[i], cols.offsets[i]
        out.append(_problem(line, offset, kind, message))

    for k in range(index.problem_count()):
        line, offset, kind, message = index.problem(k)
        add(None, kind, message, line, offset)
    first_line: dict[str, int] = {}
    for i in range(n):
        eid = ids[i]
        pid = cols.parent_ids[i]
        if eid is None:
            add(i, "missing_id", "entry has no string id (Pi keeps it as a root that nothing can reference)")
            continue
        if eid in first_line:
            add(i, "duplicate_id", f"id {eid!r} already used on line {first_line[eid]}; this later entry wins lookups")
        else:
            first_line[eid] = cols.lines[i]
        if pid is not None:
            if pid == eid:
                add(
                    i,
                    "self_parent",
                    f"entry {eid!r} is its own parent (a root in Pi's tree; Pi's getBranch never returns from it)",
                )
            elif index.index_of(pid) is None:
                add(i, "orphan", f"parentId {pid!r} names no entry (Pi treats {eid!r} as a root)")
        elif not cols.parent_is_null[i]:
            add(i, "bad_parent_id", f"entry {eid!r} has no parentId or a non-string one (Pi treats it as a root)")
    try:
        index.preorder()
    except SessionCycleError as exc:
        add(None, "parent_cycle", f"parentId cycle reachable from a root: {' -> '.join(map(str, exc.ids))}")
    try:
        unreachable = list(index.unreachable())
    except SessionCycleError:
        unreachable = []  # the loop through duplicate ids was reported above
    cycles = _cycles(index, unreachable)
    on_cycle = {i for c in cycles for i in c}
    for c in cycles:
        if len(c) == 1 and cols.parent_ids[c[0]] == ids[c[0]]:
            continue  # already reported as self_parent
        names = " -> ".join(repr(ids[i]) for i in c)
        add(min(c), "parent_cycle", f"parentId cycle: {names} -> {ids[c[0]]!r}")
    for i in unreachable:
        if i not in on_cycle:
            add(i, "unreachable", f"entry {ids[i]!r} hangs off a parentId cycle (not reachable from any root)")
    if not index.leaf_is_null() and index.leaf() is not None:
        try:
            index.branch(index.leaf())
        except SessionCycleError as exc:
            add(
                index.leaf(),
                "leaf_cycle",
                f"the active leaf's parent chain loops ({' -> '.join(map(str, exc.ids))}): Pi cannot open this session",
            )
    for i in range(n):
        if cols.types[i] != "label":
            continue
        raw = load_raw(i)
        target = raw.get("targetId") if isinstance(raw, dict) else None
        if not isinstance(target, str) or index.index_of(target) is None:
            add(i, "label_target_missing", f"label targets {target!r}, which names no entry")
    return out


def content_problems(index: Any, load_raw: Callable[[int], Any]) -> list[dict]:
    """``content_error`` for every entry whose content Pi would throw on when it builds the
    context, estimates tokens or serializes the conversation for a summary
    (:func:`entry_content_error`): compaction, branch summaries and ``should_compact`` fail on a
    branch holding one. The message names the entry and Pi's error. Cost: parses the entries of
    the four content-carrying types."""
    out: list[dict] = []
    types = index.types(list(range(len(index))))
    for i, etype in enumerate(types):
        if etype not in _CONTENT_TYPES:
            continue
        try:
            raw = load_raw(i)
        except SessionError as exc:  # nested too deeply for Python's parser
            rec = index.record(i)
            out.append(
                _problem(
                    rec.line,
                    rec.offset,
                    "too_deep",
                    f"entry {rec.id!r}: {exc} (Pi reads it; building the context or compacting over it here fails)",
                )
            )
            continue
        found = _content_check(raw)
        if found is not None:
            stage, err = found
            rec = index.record(i)
            out.append(
                _problem(
                    rec.line,
                    rec.offset,
                    "content_error",
                    f"entry {rec.id!r}: Pi throws {err.pi_error!r} on its content ({_STAGE_EFFECT[stage]})",
                )
            )
    return out
