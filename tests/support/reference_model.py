"""The one reference model of Pi's session file and tree rules, in plain, slow Python.

Tests use it as an oracle independent of the Rust core (``rust/src/index/``, ``walk.rs``): the
property tests (tests/parity/test_properties.py) check the core against it on random files, and
the golden helpers (tests/support/goldens.py) load the corpus with it, so context, compaction
and branch-summary tests do not depend on the scanner. It loads a whole file into Python values,
which the library itself never does. Ids are modelled as strings only (a non-string id is never
found by id), which is all the goldens and the generated files need.

Rules (Pi 1.6 session-manager.ts):

* :func:`load_values` (``loadEntriesFromFile``): split on ``\\n``; drop one trailing ``\\r``;
  skip blank lines, lines ``JSON.parse`` rejects (``NaN``/``Infinity`` included) and falsy
  values; the first value must be the session header (``type:"session"``, a string ``id``).
* :func:`index_by_id` (``_buildIndex``): later ``type:"session"`` values are not entries; the
  last entry with an id wins.
* :func:`walk` (``getBranch``): follow ``parentId`` while it is a non-empty string naming an
  entry; meeting an entry twice is a cycle (Pi never returns): :class:`ReferenceCycle`.
* :class:`ReferenceSession`: the leaf is the last entry's id; the tree's roots have
  ``parentId`` null, equal to their own id, or unknown; children are sorted by
  ``Date.parse(timestamp)``, ties in file order; labels are replayed in file order (a truthy
  label sets, anything else clears).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sessiontree._jsjson import JS_UNDEFINED, js_date_parse


class ReferenceCycle(Exception):
    """A parent chain loops (the ids walked so far are in ``args[0]``)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")  # JSON.parse rejects NaN/Infinity


def _is_falsy(value: Any) -> bool:
    return value is None or value is False or value == "" or (type(value) in (int, float) and value == 0)


def load_values(data: bytes) -> tuple[dict, list] | None:
    """``(header, values after it)`` as Pi's ``loadEntriesFromFile`` reads ``data``, or ``None``
    when the first value is not a session header. The values keep any later ``type:"session"``
    value (Pi's file entries do; :func:`entries_of` drops them)."""
    values: list = []
    for raw in data.split(b"\n"):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except ValueError:
            continue
        if _is_falsy(value):
            continue  # falsy JSON values are not entries
        values.append(value)
    if not values:
        return None
    header = values[0]
    if not (isinstance(header, dict) and header.get("type") == "session" and isinstance(header.get("id"), str)):
        return None
    return header, values[1:]


def _is_session(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "session"


def entries_of(values: list) -> list:
    """The entries among the file's values: every value but a later ``type:"session"`` one."""
    return [v for v in values if not _is_session(v)]


def index_by_id(entries: list) -> dict:
    """Entries by string id (Pi's ``byId``); the last one with an id wins; session values skipped."""
    by_id: dict = {}
    for e in entries:
        if isinstance(e, dict) and not _is_session(e) and isinstance(e.get("id"), str):
            by_id[e["id"]] = e
    return by_id


def walk(by_id: dict, start: Any) -> list:
    """The branch from the root down to ``start`` (an entry value, or ``None`` for none): Pi's
    ``getBranch`` loop. Raises :class:`ReferenceCycle` where Pi's loop never ends."""
    path: list = []
    seen: set = set()
    current = start
    while current is not None:
        if id(current) in seen:
            raise ReferenceCycle([e.get("id") if isinstance(e, dict) else None for e in path])
        seen.add(id(current))
        path.append(current)
        parent = current.get("parentId") if isinstance(current, dict) else None
        current = by_id.get(parent) if isinstance(parent, str) and parent else None
    path.reverse()
    return path


@dataclass
class ReferenceSession:
    """A whole session file held as values, with Pi's index and tree rules over it."""

    header: dict
    entries: list = field(default_factory=list)

    @classmethod
    def load(cls, data: bytes) -> "ReferenceSession | None":
        loaded = load_values(data)
        if loaded is None:
            return None
        header, values = loaded
        return cls(header, entries_of(values))

    @property
    def by_id(self) -> dict:
        return index_by_id(self.entries)

    @property
    def leaf_id(self) -> Any:
        last = self.entries[-1] if self.entries else None
        return last.get("id") if isinstance(last, dict) else None

    def branch(self, from_id: Any) -> list:
        by_id = self.by_id
        return walk(by_id, by_id.get(from_id) if from_id else None)

    def children_ids(self) -> dict:
        """Node id -> children ids in Pi's order (string ids only)."""
        by_id = self.by_id
        kids: dict = {k: [] for k in by_id}
        for e in self.entries:
            p = e.get("parentId")
            if p is None or p == e.get("id") or p not in by_id:
                continue
            kids[p].append(e.get("id"))
        for k, lst in kids.items():
            lst_ts = [(js_date_parse(by_id[c].get("timestamp", JS_UNDEFINED)), n, c) for n, c in enumerate(lst)]
            if all(t == t for t, _, _ in lst_ts):
                kids[k] = [c for _, _, c in sorted(lst_ts)]
        return kids

    def roots(self) -> list:
        by_id = self.by_id
        return [
            e.get("id")
            for e in self.entries
            if e.get("parentId") is None or e.get("parentId") == e.get("id") or e.get("parentId") not in by_id
        ]

    def labels(self) -> dict:
        out: dict = {}
        for e in self.entries:
            if e.get("type") == "label":
                if e.get("label"):
                    out[e.get("targetId")] = e.get("label")
                else:
                    out.pop(e.get("targetId"), None)
        return out
