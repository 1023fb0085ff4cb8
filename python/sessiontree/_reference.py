"""The session tree in plain, slow Python: a readable statement of Pi's rules.

This is the educational twin of the Rust core (``rust/src/index.rs``, ``walk.rs``), used by the
property tests to check the core on random files. It loads a whole file into dicts, which the
library itself never does. Only string ids are modelled (every file we generate uses them).

Rules (Pi 1.6 session-manager.ts):

* ``load``: split on ``\\n``; drop one trailing ``\\r``; skip blank lines, lines
  ``JSON.parse`` rejects, and falsy values; the first value must be the session header;
  later ``type:"session"`` values are not entries.
* ``by_id``: the last entry with an id wins; ``leaf`` = the last entry's id.
* ``branch``: follow ``parentId`` while it is truthy and known; a repeated entry is a cycle.
* ``tree``: roots have ``parentId`` null, equal to their own id, or unknown; children are
  sorted by ``Date.parse(timestamp)``, ties in file order; a repeated id is one node listed
  once per occurrence.
* ``labels``: replayed in file order; truthy label sets, anything else clears.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ._jsjson import js_date_parse
from .errors import SessionTreeError


class ReferenceCycle(SessionTreeError):
    """A parent chain loops (the ids on it are in ``args[0]``)."""


@dataclass
class ReferenceSession:
    header: dict
    entries: list = field(default_factory=list)

    @classmethod
    def load(cls, data: bytes) -> "ReferenceSession | None":
        values = []
        for raw in data.split(b"\n"):
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            try:
                v = json.loads(text, parse_constant=_reject)
            except ValueError:
                continue
            if v is None or v is False or v == "" or (type(v) in (int, float) and v == 0):
                continue
            values.append(v)
        if not values:
            return None
        h = values[0]
        if not (isinstance(h, dict) and h.get("type") == "session" and isinstance(h.get("id"), str)):
            return None
        return cls(h, [v for v in values[1:] if not (isinstance(v, dict) and v.get("type") == "session")])

    # ---- index --------------------------------------------------------------

    @property
    def by_id(self) -> dict:
        out = {}
        for e in self.entries:
            out[e.get("id")] = e
        return out

    @property
    def leaf_id(self) -> Any:
        return self.entries[-1].get("id") if self.entries else None

    def branch(self, from_id: Any) -> list:
        by_id = self.by_id
        path: list = []
        seen: set = set()
        cur = by_id.get(from_id) if from_id else None
        while cur is not None:
            if id(cur) in seen:
                raise ReferenceCycle([e.get("id") for e in path])
            seen.add(id(cur))
            path.append(cur)
            p = cur.get("parentId")
            cur = by_id.get(p) if p else None
        return path[::-1]

    def children_ids(self) -> dict:
        """Node id → children ids in Pi's order (only string ids)."""
        by_id = self.by_id
        kids: dict = {k: [] for k in by_id}
        for e in self.entries:
            p = e.get("parentId")
            if p is None or p == e.get("id") or p not in by_id:
                continue
            kids[p].append(e.get("id"))
        for k, lst in kids.items():
            lst_ts = [(js_date_parse(by_id[c].get("timestamp", _MISSING)), n, c) for n, c in enumerate(lst)]
            if all(t == t for t, _, _ in lst_ts):
                kids[k] = [c for _, _, c in sorted(lst_ts)]
        return kids

    def roots(self) -> list:
        by_id = self.by_id
        return [e.get("id") for e in self.entries
                if e.get("parentId") is None or e.get("parentId") == e.get("id") or e.get("parentId") not in by_id]

    def labels(self) -> dict:
        out: dict = {}
        for e in self.entries:
            if e.get("type") == "label":
                if e.get("label"):
                    out[e.get("targetId")] = e.get("label")
                else:
                    out.pop(e.get("targetId"), None)
        return out


class _Missing:
    """A missing ``timestamp`` (JavaScript ``undefined``: ``new Date(undefined)`` is NaN)."""


_MISSING: Any = _Missing()


def _reject(name: str) -> Any:
    raise ValueError(name)
