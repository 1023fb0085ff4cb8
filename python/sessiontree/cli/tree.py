"""``sessiontree tree``: the tree drawn like Pi's ``/tree``, a line at a time.

The walk is a generator over the children table (:meth:`Session.tree_table`, one call into the
core); entry columns (:meth:`Session.entry_table`) and previews are read a batch of shown lines
at a time, so the first line prints at once and ``--limit``/``--around`` cost what they show."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Iterator, Sequence

import orjson

from .._progress import close_bar, progress_bar
from ..errors import EntryNotFoundError, SessionCycleError
from ..session import Session
from .render import (
    MAX_TREE_GUIDES,
    _entry_preview_of,
    _kind_from,
    _labels_by_id,
    _shown_id,
    _Stream,
    _write_out,
    json_document,
    progress_wanted,
    safe_text,
)

#: ``--around ID``: ancestors shown right above the entry (the older ones but the root are
#: counted on one ``⋮`` line).
AROUND_ABOVE = 5
#: ``--around ID`` without ``--limit``: entries of its subtree shown below it.
AROUND_BELOW = 20
#: ``--around ID`` without ``--depth``: levels of branching shown below the entry.
AROUND_DEPTH = 1

# A row of the walk: ("e", index, guides, folded, connector, depth, again, unreachable, note)
# for an entry line, or ("t", text) for a line of text only (human output).
Row = tuple[Any, ...]


def walk_rows(
    children_of: Any,
    tops: Sequence[int],
    seen: bytearray,
    *,
    unreachable: bool = False,
    depth0: int = 0,
    max_level: int | None = None,
    depth_flag: str = "--depth",
) -> Iterator[Row]:
    """Pre-order rows of the trees below ``tops``, without recursion.

    A node with one child is followed by that child at the same indentation (a linear run
    stays flat, as in Pi's ``/tree``): only forks indent, by one guide (``├─``/``└─``, then
    ``│``). Past :data:`MAX_TREE_GUIDES` guides the oldest fold into the row's ``folded``
    count (drawn ``⋯N``). Below ``max_level`` forks the children of a fork are not walked: one
    text row says how many branches were left out. A node met a second time (duplicated ids)
    is yielded once more with ``again`` and not expanded; ``seen`` collects the nodes walked.
    """
    cap = 3 * MAX_TREE_GUIDES
    # stack items: (node, guides, folded, connector, guides of its children, their folded, depth, level)
    stack: list[tuple[int, str, int, str, str, int, int, int]] = []
    many = len(tops) > 1
    for k in range(len(tops) - 1, -1, -1):
        last = k == len(tops) - 1
        conn = ("└─ " if last else "├─ ") if many else ""
        stack.append((tops[k], "", 0, conn, ("   " if last else "│  ") if many else "", 0, depth0, 0))
    while stack:
        i, guides, folded, conn, child_guides, child_folded, depth, level = stack.pop()
        again = bool(seen[i])
        yield ("e", i, guides, folded, conn, depth, again, unreachable, None)
        if again:
            continue
        seen[i] = 1
        ch = children_of(i)
        if not ch:
            continue
        if len(ch) == 1:
            stack.append((ch[0], child_guides, child_folded, "", child_guides, child_folded, depth + 1, level))
            continue
        if max_level is not None and level >= max_level:
            marker = f"⋯{child_folded} " if child_folded else ""
            yield ("t", f"  {marker}{child_guides}└─ ⋯ {len(ch)} branches below (deeper than {depth_flag} {max_level})")
            continue
        for k in range(len(ch) - 1, -1, -1):
            last = k == len(ch) - 1
            sub, sub_folded = child_guides + ("   " if last else "│  "), child_folded
            if len(sub) > cap:
                sub, sub_folded = sub[3:], sub_folded + 1
            stack.append(
                (ch[k], child_guides, child_folded, "└─ " if last else "├─ ", sub, sub_folded, depth + 1, level + 1)
            )


class _JsonStream:
    """The ``tree --json`` document written as it is made.

    The same text :func:`json_document` gives for the whole document, one node at a time (memory
    stays flat)."""

    def __init__(self, out: _Stream) -> None:
        self.out = out
        self.nodes = 0

    def field(self, key: str, value: Any, first: bool = False) -> None:
        text = json_document(value).replace("\n", "\n  ")
        self.out(("{\n" if first else ",\n") + f"  {orjson.dumps(key).decode()}: {text}")

    def open_nodes(self, key: str = "nodes") -> None:
        self.out(f",\n  {orjson.dumps(key).decode()}: [")

    def node(self, record: dict[str, Any]) -> None:
        text = json_document(record).replace("\n", "\n    ")
        self.out(("\n    " if self.nodes == 0 else ",\n    ") + text)
        self.nodes += 1

    def close_nodes(self) -> None:
        self.out("\n  ]" if self.nodes else "]")

    def close(self) -> None:
        self.out("\n}\n")


class _Raw(_Stream):
    """A :class:`_Stream` of text pieces (no newline added): the JSON document's parts."""

    def flush(self) -> None:
        if self.lines:
            self.written += len(self.lines)
            _write_out("".join(self.lines), flush=True)
            self.lines.clear()
        self.last = time.monotonic()


def cmd_tree(s: Session, args: argparse.Namespace) -> int:
    """Draw the tree like Pi's /tree, a line at a time, without recursion.

    One line per entry: ``•`` in the first column for entries on the active branch, branch
    guides (``├─``, ``└─``, ``│``), the id, role or type, ``[label]``, a preview, and
    ``← leaf`` on the leaf. A node with one child is followed by that child at the same
    indentation (a linear run stays flat, as in Pi), so only real branch points indent;
    beyond ``MAX_TREE_GUIDES`` levels older guides fold into ``⋯N`` (N levels folded).
    Entries not reachable from any root (parentId cycles) are drawn after the tree. A node
    met a second time (a duplicated id listed twice, or a loop through one) is shown once
    more with ``(shown above)`` and not expanded again.

    Narrowing: ``--around ID`` (the path to ID, then its subtree), ``--depth N`` (at most N
    levels of forks), ``--branches-only`` (roots, forks, leaves, labelled entries and
    compactions), ``--since ID`` (entries appended after ID), ``--limit N`` (N entry lines).

    Raises:
        EntryNotFoundError: ``--around`` or ``--since`` names no entry.
        SessionCycleError: the path to ``--around``'s entry loops.
    """
    preview = 0 if args.no_preview else args.max_preview
    as_json = bool(args.json)
    max_lines = args.limit
    since_index = None
    if args.since is not None:
        since = s.get_entry(args.since)
        if since is None:
            raise EntryNotFoundError.of(args.since)
        since_index = since.index
    around_path = None
    if args.around is not None:
        if s.get_entry(args.around) is None:
            raise EntryNotFoundError.of(args.around)
        around_path = s.branch_positions(args.around)  # SessionCycleError when it loops
        if max_lines is None:  # the nearby part: the ancestors shown, the entry, AROUND_BELOW below it
            n = len(around_path)
            max_lines = (min(n - 1, AROUND_ABOVE + 1) if n > 1 else 0) + 1 + AROUND_BELOW
    roots, start, kids = s.tree_table()
    total = len(s)

    def children_of(i: int) -> list[int]:
        return kids[start[i] : start[i + 1]] if i + 1 < len(start) else []

    labels = _labels_by_id(s)
    # the active branch as one byte per entry (its columns are not needed: memory stays flat)
    on_path = bytearray(total)
    cycle: SessionCycleError | None = None
    try:
        for i in s.branch_positions():
            on_path[i] = 1
    except SessionCycleError as exc:
        cycle = exc
    leaf_entry = s.leaf_entry
    leaf = leaf_entry.index if leaf_entry is not None else None
    unreachable: list[int] | None = None
    if as_json or around_path is None:
        unreachable = [e.index for e in s.unreachable_entries()]
    seen = bytearray(total)  # nodes walked

    out: _Stream = _Raw() if as_json else _Stream()
    doc = _JsonStream(out) if as_json else None
    bar = progress_bar(total, progress_wanted(args, streams_to_stdout=True), "entries")
    walked = 0

    def rows() -> Iterator[Row]:
        if around_path is not None:
            yield from _around_rows(around_path, children_of, seen, args.depth)
            return
        yield from walk_rows(children_of, roots, seen, max_level=args.depth)
        rest = [i for i in (unreachable or ()) if not seen[i]]
        if rest:
            yield ("t", f"-- {len(unreachable or ())} entries not reachable from any root (parentId cycle) --")
            for i in rest:
                if not seen[i]:
                    yield from walk_rows(children_of, [i], seen, unreachable=True, max_level=args.depth)

    shown = 0
    truncated = False
    carried: list[Any] = [None]  # --branches-only: a hidden branch's connector, drawn on its next shown line

    def wanted(row: Row, etype: Any, label: Any) -> bool:
        _, i, _, _, _, depth, _, _, note = row
        if since_index is not None and i <= since_index:
            return False
        if args.branches_only and note is None:
            nch = start[i + 1] - start[i] if i + 1 < len(start) else 0
            return nch != 1 or depth == 0 or label is not None or etype == "compaction" or i == leaf
        return True

    def emit(batch: list[Row]) -> bool:
        """Print ``batch``; False once ``--limit`` lines are out and one more was due."""
        nonlocal shown, truncated
        need = [r[1] for r in batch if r[0] == "e"]
        if as_json:
            need += [c for r in batch if r[0] == "e" and not r[6] for c in children_of(r[1])]
        pos = {i: k for k, i in enumerate(need)}
        table = s.entry_table(need)
        ids, types = table.id, table.type
        for row in batch:
            if row[0] == "t":
                if not as_json and not truncated:
                    out(row[1])
                continue
            _, i, guides, folded, conn, depth, again, unreach, note = row
            k = pos[i]
            eid = ids[k]
            label = labels.get(eid) if eid is not None else None
            if not wanted(row, types[k], label):
                if conn:
                    carried[0] = (guides, conn)
                continue
            if carried[0] is not None:
                g, c = carried[0]
                if not conn and guides == g + ("│  " if c == "├─ " else "   "):
                    guides, conn = g, c
                carried[0] = None
            if max_lines is not None and shown >= max_lines:
                truncated = True
                return False
            if as_json:
                if again:
                    continue
                assert doc is not None
                ch = children_of(i)
                rec = {
                    "index": i,
                    "id": eid,
                    "parent_id": table.parent_id[k],
                    "type": types[k],
                    "role": table.role[k],
                    "line": table.line[k],
                    "depth": depth,
                    "label": label,
                    "children": [ids[pos[c]] for c in ch],
                    "child_indices": list(ch),
                    "on_active_branch": bool(on_path[i]),
                    "is_leaf": i == leaf,
                    "unreachable": unreach,
                }
                if preview > 0:
                    rec["preview"] = _entry_preview_of(s, i, preview, False)
                doc.node(rec)
            else:
                text = "" if preview <= 0 else _entry_preview_of(s, i, preview, True)
                parts = ["• " if on_path[i] else "  ", f"⋯{folded} " if folded else "", guides, conn]
                parts += [_shown_id(eid), " ", safe_text(_kind_from(types[k], table.role[k]))]
                if label is not None:
                    parts.append(f" [{safe_text(label)}]")
                if text:
                    parts.append(": " + text)
                if note:
                    parts.append(note)
                if again:
                    parts.append("  (shown above)")
                if i == leaf and not again:
                    parts.append("  ← leaf")
                out("".join(parts))
            shown += 1
        return True

    try:
        if doc is not None:
            ids_of = s.entry_table(list(roots) + list(unreachable or ())).id
            doc.field("leaf_id", s.leaf_id, first=True)
            doc.field("roots", ids_of[: len(roots)])
            doc.field("unreachable_ids", ids_of[len(roots) :])
            doc.field("active_branch_cycle", list(cycle.ids) if cycle else None)
            doc.open_nodes()
        batch: list[Row] = []
        size = 8  # a small first batch: the first line at once
        more = True

        def flush_batch() -> bool:
            nonlocal walked
            step = min(sum(1 for r in batch if r[0] == "e"), total - walked)  # never past the total
            walked += step
            bar(step)
            return emit(batch)

        for row in rows():
            batch.append(row)
            if len(batch) >= size:
                more = flush_batch()
                batch = []
                size = 512
                if not more:
                    break
        if more and batch:
            flush_batch()
        if doc is not None:
            doc.close_nodes()
            doc.field("truncated", truncated)
            doc.close()
        else:
            if truncated:
                out(f"-- more entries not shown (--limit {max_lines}) --")
            elif shown == 0 and not roots and not unreachable:
                out("(no entries)")
        out.flush()
    finally:
        close_bar(bar)
    if cycle is not None:
        print(
            f"sessiontree: warning: the active branch loops ({safe_text(str(cycle))}); Pi cannot open this session",
            file=sys.stderr,
        )
    return 0


def _around_rows(path: list[int], children_of: Any, seen: bytearray, depth: int | None) -> Iterator[Row]:
    """``--around``: the path root → the entry, then the entry's subtree.

    The path shows the root and the last :data:`AROUND_ABOVE` entries above the entry, the others
    counted on one ``⋮`` line; a fork on it says how many other branches leave there."""
    n = len(path)
    near = max(1, n - 1 - AROUND_ABOVE)
    for k in [0] + list(range(near, n - 1)) if n > 1 else []:
        if k == near and near > 1:
            yield ("t", f"  ⋮ {near - 1} entries")
        i = path[k]
        nch = len(children_of(i))
        note = f"  (+{nch - 1} other branch{'es' if nch > 2 else ''})" if nch > 1 else ""
        seen[i] = 1
        yield ("e", i, "", 0, "", k, False, False, note)
    yield from walk_rows(
        children_of, [path[-1]], seen, depth0=n - 1, max_level=AROUND_DEPTH if depth is None else depth
    )
