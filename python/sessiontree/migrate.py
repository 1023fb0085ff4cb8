"""Legacy session formats, migrated in memory the way Pi migrates them on open.

* v1 (header without ``version``, or ``version`` < 2): entries have no ``id``/``parentId``.
  Pi (session-manager.ts ``migrateV1ToV2``) gives every entry a fresh id and makes it the
  child of the previous entry; a compaction's ``firstKeptEntryIndex`` (an index into the
  file's parsed values, the header being 0) becomes ``firstKeptEntryId``.
  Pi's ids are random; ours are derived from the header id and the entry's position, so the
  same file always gets the same ids (durable cursors) until it is rewritten.
* v2 (``version`` < 3): message role ``hookMessage`` becomes ``custom`` (``migrateV2ToV3``).

Nothing here writes: a file is only rewritten when the caller writes to it or calls
:meth:`sessiontree.Session.migrate`.
"""

from __future__ import annotations

from typing import Any

CURRENT_SESSION_VERSION = 3


def migrate_header(header: dict, legacy_v1: bool) -> dict:
    """Return the header as Pi holds it after migration (``version`` set to 3; a v1 header
    gains the key at the end, as Pi's in-place assignment does)."""
    out = dict(header)
    if legacy_v1:
        out["version"] = 2
    out["version"] = CURRENT_SESSION_VERSION
    return out


def migrate_entry(
    raw: Any, *, legacy_v1: bool, entry_id: str | None, parent_id: str | None, first_kept_id: str | None
) -> Any:
    """Apply Pi's v1→v2→v3 migrations to one parsed entry (a new dict is returned).

    Args:
        raw: the parsed line (non-dict values are returned unchanged).
        legacy_v1: the file is v1 (ids are assigned).
        entry_id / parent_id: the ids the index assigned (v1 only).
        first_kept_id: for a v1 compaction, the id of the entry its ``firstKeptEntryIndex``
            points at (None when it points at the header or nothing).
    """
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    if legacy_v1:
        out["id"] = entry_id
        out["parentId"] = parent_id
        if out.get("type") == "compaction" and "firstKeptEntryIndex" in out:
            idx = out["firstKeptEntryIndex"]
            if isinstance(idx, (int, float)) and not isinstance(idx, bool):
                if first_kept_id is not None:
                    out["firstKeptEntryId"] = first_kept_id
                del out["firstKeptEntryIndex"]
    if out.get("type") == "message":
        msg = out.get("message")
        if isinstance(msg, dict) and msg.get("role") == "hookMessage":
            msg = dict(msg)
            msg["role"] = "custom"
            out["message"] = msg
    return out
