"""Shared helpers of the conversion tests: staging fixtures in their agent's layout, reading
JSONL, and the oracles (a source line's texts, the expected leaf)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CC = FIXTURES / "claude-code"
CODEX = FIXTURES / "codex"


def cc_mains() -> list[Path]:
    """Claude Code fixtures that are sessions (subagent files ride with their session)."""
    return sorted(p for p in CC.glob("*.jsonl") if "__subagents__" not in p.name)


def codex_files() -> list[Path]:
    return sorted(CODEX.glob("*.jsonl"))


def stage_cc(src: Path, tmp: Path) -> tuple[Path, list[Path]]:
    """Copy a Claude Code fixture into ``tmp`` in Claude Code's layout: the session file and
    its subagent files (fixtures named ``<stem>__subagents__<name>``) under
    ``<stem>/subagents/<name>``. Returns the session path and the subagent paths."""
    dst = tmp / src.name
    shutil.copyfile(src, dst)
    subs = []
    for s in sorted(CC.glob(src.stem + "__subagents__*.jsonl")):
        d = tmp / src.stem / "subagents" / s.name.split("__subagents__", 1)[1]
        d.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, d)
        subs.append(d)
    return dst, subs


def read_objects(path: Path) -> list[Any]:
    """Each line's JSON value (None for a line that is not JSON)."""
    out = []
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(None)
    return out


def pi_entries(path: Path) -> list[dict]:
    return [o for o in read_objects(path)[1:] if isinstance(o, dict)]


def texts_of(content: Any) -> list[str]:
    """The texts of a message content: a string, or its text blocks."""
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"]]
    return []


def pi_texts(entries: list[dict]) -> set[str]:
    """Every text of every Pi message (and compaction summary) in ``entries``."""
    out: set[str] = set()
    for e in entries:
        if e.get("type") == "message":
            m = e["message"]
            out.update(texts_of(m.get("content")))
            if m.get("role") == "toolResult":
                out.update(texts_of(m.get("content")))
        elif e.get("type") == "compaction":
            out.add(e["summary"])
    return out
