"""Hand-made session lines for the hostile-input tests: a header and message entries as bytes."""

from __future__ import annotations

import json
from typing import Any

#: A Pi v3 session header line, with its newline.
HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'


def message_line(
    i: Any, parent: Any, content: Any = "t", ts: Any = "2026-01-01T00:00:01.000Z", role: str = "user"
) -> bytes:
    """A ``message`` entry line (compact JSON, ASCII-escaped, with its newline): id ``i`` under
    ``parent``, a ``role`` message of ``content`` at ``ts`` (any JSON values, to make odd lines)."""
    return (
        json.dumps(
            {
                "type": "message",
                "id": i,
                "parentId": parent,
                "timestamp": ts,
                "message": {"role": role, "content": content, "timestamp": 1},
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
    )
