"""Small session files written line by line for the search tests, and a brute-force oracle of
the search tokenizer and matcher (a second, simpler home of the rules in
``rust/src/search/tokenize.rs`` and ``query.rs``, used only to check them)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any


class Builder:
    """Writes a Pi v3 session: ``add(...)`` appends an entry under ``parent`` (default: the
    last one added) and returns its id."""

    def __init__(self, path: Path, sid: str = "sess-1", cwd: str = "/proj") -> None:
        self.path = path
        self.lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2025-01-01T00:00:00.000Z", "cwd": cwd}]
        self.last: str | None = None
        self.n = 0

    def add(self, etype: str = "message", parent: Any = "last", **fields: Any) -> str:
        self.n += 1
        eid = f"e{self.n:04d}"
        par = self.last if parent == "last" else parent
        ts = f"2025-01-01T00:{self.n // 60:02d}:{self.n % 60:02d}.000Z"
        self.lines.append({"type": etype, "id": eid, "parentId": par, "timestamp": ts, **fields})
        self.last = eid
        return eid

    def user(self, text: str, parent: Any = "last") -> str:
        return self.add(message={"role": "user", "content": text, "timestamp": 0}, parent=parent)

    def assistant(self, text: str, tool: str | None = None, args: Any = None, parent: Any = "last") -> str:
        content: list[Any] = [{"type": "text", "text": text}]
        if tool:
            content.append({"type": "toolCall", "id": "c1", "name": tool, "arguments": args or {}})
        return self.add(message={"role": "assistant", "content": content}, parent=parent)

    def tool_result(self, tool: str, text: str, parent: Any = "last") -> str:
        msg = {"role": "toolResult", "toolCallId": "c1", "toolName": tool, "content": [{"type": "text", "text": text}]}
        return self.add(message=msg, parent=parent)

    def write(self) -> Path:
        data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in self.lines)
        self.path.write_text(data, encoding="utf-8")
        return self.path

    def append_line(self, obj: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


# ---- the oracle ------------------------------------------------------------------------------


def oracle_parts(text: str) -> list[str]:
    """The part tokens of ``text`` (lowercased), in order: every run of letters and digits,
    split where a lowercase letter or digit meets an uppercase one and before the last
    uppercase letter of a run followed by a lowercase one (``HTTPServer``: ``http``,
    ``server``). Joiners, ``_`` and spaces only separate parts."""
    out: list[str] = []
    for piece in re.findall(r"[^\W_]+", text):
        cur = piece[0]
        for i in range(1, len(piece)):
            a, b = piece[i - 1], piece[i]
            nxt = piece[i + 1] if i + 1 < len(piece) else ""
            if b.isupper() and (a.islower() or a.isdigit() or (a.isupper() and nxt.islower())):
                out.append(cur.lower())
                cur = b
            else:
                cur += b
        out.append(cur.lower())
    return out


def oracle_contains(text: str, phrase_parts: list[str]) -> bool:
    """Whether the parts of ``text`` hold ``phrase_parts`` consecutively."""
    t = oracle_parts(text)
    n = len(phrase_parts)
    return n > 0 and any(t[i : i + n] == phrase_parts for i in range(len(t) - n + 1))
