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

from typing import Any, Callable

CURRENT_SESSION_VERSION = 3


def migrate_header(header: dict[str, Any], legacy_v1: bool) -> dict[str, Any]:
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


def _top_level_members(line: bytes) -> list[tuple[int, int, int, int]] | None:
    """The members of the JSON object ``line``: (key start, key end, value start, value end)
    byte spans, keys with their quotes. One linear pass; None when ``line`` is not one object
    this pass can follow (the caller then re-serializes)."""
    n = len(line)
    i = 0
    while i < n and line[i] in b" \t\r":
        i += 1
    if i >= n or line[i] != ord("{"):
        return None
    depth = 0
    in_str = False
    esc = False
    members: list[tuple[int, int, int, int]] = []
    key_start = key_end = val_start = -1
    expect_key = True
    for j in range(i, n):
        c = line[j]
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:  # backslash
                esc = True
            elif c == 0x22:  # closing quote
                in_str = False
                if depth == 1 and expect_key and key_start >= 0 and key_end < 0:
                    key_end = j + 1
            continue
        if c == 0x22:
            in_str = True
            if depth == 1 and expect_key and key_start < 0:
                key_start = j
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            if depth == 1 and c == ord("}"):
                if val_start >= 0:
                    members.append((key_start, key_end, val_start, j))
                return members if line[j + 1 :].strip() == b"" else None
            depth -= 1
        elif depth == 1 and c == ord(":") and expect_key:
            expect_key = False
            val_start = j + 1
        elif depth == 1 and c == ord(","):
            if val_start < 0:
                return None
            members.append((key_start, key_end, val_start, j))
            key_start = key_end = val_start = -1
            expect_key = True
    return None


def header_line_at_version(line: bytes, version: int = CURRENT_SESSION_VERSION) -> bytes | None:
    """The header ``line`` with its ``version`` set to ``version`` and every other byte kept
    (fields this library does not know, their spelling and order survive a migration); a
    header without the key gains it at the end, as Pi's assignment does. None when the line
    is not a plain object with at most one ``"version"`` key spelt without escapes (the
    caller then re-serializes the header)."""
    members = _top_level_members(line)
    if members is None:
        return None
    spans = [m for m in members if line[m[0] : m[1]] == b'"version"']
    if any(b"\\" in line[m[0] : m[1]] for m in members) or len(spans) > 1:
        return None
    v = str(int(version)).encode()
    if spans:
        _, _, vs, ve = spans[0]
        value = line[vs:ve]
        lead = value[: len(value) - len(value.lstrip())]
        trail = value[len(value.rstrip()) :]
        return line[:vs] + lead + v + trail + line[ve:]
    end = line.rstrip().rfind(b"}")
    body = line[:end].rstrip()
    sep = b"" if body.endswith(b"{") else b","
    return body + sep + b'"version":' + v + line[end:]


def migrated_lines(core: Any, load_raw: Callable[[int], Any]) -> dict[int, bytes]:
    """The lines a migration rewrites: {line number (1-based): new bytes} for each entry whose
    migrated value (``load_raw(i)``) differs from its line's (a v1 entry gains its ids, a v2
    ``hookMessage`` becomes ``custom``); every other line is kept byte for byte (unknown types
    and fields, their spelling). ``core``: the session's core index."""
    from ._jsjson import js_stringify_bytes
    from .entries import parse_json_line
    from .errors import SessionError

    legacy_v1 = core.legacy_v1
    out: dict[int, bytes] = {}
    for i, line_no in enumerate(core.table(list(range(len(core)))).lines):
        new = load_raw(i)
        if not legacy_v1:
            try:
                if parse_json_line(core.line(i)) == new:
                    continue
            except (SessionError, ValueError, RecursionError):
                pass
        out[line_no] = js_stringify_bytes(new)
    return out
