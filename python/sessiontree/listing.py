"""Listing sessions without reading whole files (Pi ``SessionManager.list`` / ``listAll``).

For each ``*.jsonl`` file we read the header line, the first user message near the start,
and search backwards from the end for the latest ``session_info`` and the last user or
assistant message: cost follows what listing shows, not the file size (the backward search
only goes further when the file holds none near its end).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ._jsjson import js_date_parse, js_trim
from .entries import parse_json_line
from .paths import default_session_dir, sessions_root

_HEAD_LIMIT = 1 << 20  # longest header line we read
_FIRST_MESSAGE_WINDOW = 256 << 10
_BACK_BLOCK = 1 << 20  # bytes read at a time by the backward search


@dataclass(frozen=True)
class SessionInfo:
    """One listed session.

    ``path``; ``id`` and ``cwd`` from the header; ``name`` (latest ``session_info``, trimmed,
    or None); ``parent_session`` (header ``parentSession`` as written: never opened);
    ``created`` (header timestamp, UTC datetime or None); ``modified`` (last user/assistant
    message time, else header time, else file mtime — Pi's rule); ``first_message`` (text
    of the first user message within the first 256 KiB, ``"(no messages)"`` if none);
    ``size`` in bytes.
    """

    path: Path
    id: str
    cwd: str
    name: str | None
    parent_session: str | None
    created: datetime | None
    modified: datetime
    first_message: str
    size: int


def _read_first_line(path: Path) -> bytes | None:
    with open(path, "rb") as fh:
        chunk = fh.read(_HEAD_LIMIT)
    nl = chunk.find(b"\n")
    return chunk if nl < 0 else chunk[:nl]


def read_header(path: Path) -> dict | None:
    """The header of a session file if its first line is a valid Pi header, else None."""
    try:
        line = _read_first_line(path)
    except OSError:
        return None
    if not line:
        return None
    try:
        h = parse_json_line(line.rstrip(b"\r"))
    except Exception:
        return None
    if isinstance(h, dict) and h.get("type") == "session" and isinstance(h.get("id"), str):
        return h
    return None


def most_recent_session(session_dir: Path) -> Path | None:
    """The valid session file with the newest mtime in ``session_dir`` (Pi
    ``findMostRecentSession``), or None."""
    try:
        names = [n for n in os.listdir(session_dir) if n.endswith(".jsonl")]
    except OSError:
        return None
    best: tuple[float, Path] | None = None
    for n in names:
        p = Path(session_dir) / n
        if not p.is_file() or read_header(p) is None:
            continue
        m = p.stat().st_mtime
        if best is None or m > best[0]:
            best = (m, p)
    return best[1] if best else None


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content
                        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


def _lines_backwards(fd: int, size: int, needle: bytes):
    """The lines of the first ``size`` bytes of ``fd`` that contain ``needle``, last first.

    Plain reads (``pread``, ``_BACK_BLOCK`` bytes at a time), never a memory map: a file
    truncated meanwhile ends the search (short read) instead of killing the process with
    SIGBUS. A line longer than a block is gathered in pieces and joined once."""
    end = size
    pieces: list[bytes] = []  # the start of the data after `end`, up to its first line end
    while end > 0:
        start = max(0, end - _BACK_BLOCK)
        block = os.pread(fd, end - start, start)
        if len(block) < end - start:
            return  # the file shrank under us
        cut = 0 if start == 0 else block.find(b"\n") + 1
        if start and cut == 0:
            pieces.append(block)  # all inside one long line
            end = start
            continue
        region = block[cut:] + b"".join(reversed(pieces)) if pieces else block[cut:]
        pieces = [block[:cut]] if cut else []
        e = len(region)
        while True:
            k = region.rfind(needle, 0, e)
            if k < 0:
                break
            ls = region.rfind(b"\n", 0, k) + 1
            le = region.find(b"\n", k)
            le = len(region) if le < 0 else le
            yield region[ls:le].rstrip(b"\r")
            e = ls
        end = start


def session_info(path: Path) -> SessionInfo | None:
    """List one file, or None when it is not a Pi session."""
    header = read_header(path)
    if header is None:
        return None
    st = path.stat()
    name = None
    last_activity: float | None = None
    first_message = ""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return None
        fd = fh.fileno()
        for line in _lines_backwards(fd, size, b'"session_info"'):
            try:
                v = parse_json_line(line)
            except Exception:
                continue
            if isinstance(v, dict) and v.get("type") == "session_info":
                n = v.get("name")
                name = (js_trim(n) or None) if isinstance(n, str) else None  # Pi getSessionName
                break
        for line in _lines_backwards(fd, size, b'"message"'):
            try:
                v = parse_json_line(line)
            except Exception:
                continue
            if not (isinstance(v, dict) and v.get("type") == "message"):
                continue
            m = v.get("message")
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or "content" not in m:
                continue
            ts = m.get("timestamp")
            if isinstance(ts, (int, float)) and not isinstance(ts, bool):
                last_activity = float(ts)
            else:
                t = js_date_parse(v.get("timestamp"))
                if t == t:
                    last_activity = t
            if last_activity is not None:
                break
        window = os.pread(fd, min(size, _FIRST_MESSAGE_WINDOW), 0)
    for line in window.split(b"\n")[1:]:
        if b'"user"' not in line:
            continue
        try:
            v = parse_json_line(line.rstrip(b"\r"))
        except Exception:
            continue
        if isinstance(v, dict) and v.get("type") == "message" and isinstance(v.get("message"), dict) \
                and v["message"].get("role") == "user":
            first_message = _text_of(v["message"])
            if first_message:
                break
    created_ms = js_date_parse(header.get("timestamp"))
    created = datetime.fromtimestamp(created_ms / 1000, timezone.utc) if created_ms == created_ms else None
    if last_activity is not None and last_activity > 0:
        modified = datetime.fromtimestamp(last_activity / 1000, timezone.utc)
    elif created is not None:
        modified = created
    else:
        modified = datetime.fromtimestamp(st.st_mtime, timezone.utc)
    cwd = header.get("cwd")
    parent = header.get("parentSession")
    return SessionInfo(path=path, id=header["id"], cwd=cwd if isinstance(cwd, str) else "", name=name,
                       parent_session=parent if isinstance(parent, str) else None, created=created,
                       modified=modified, first_message=first_message or "(no messages)", size=st.st_size)


def list_sessions(cwd: str | None = None, *, session_dir: str | os.PathLike | None = None) -> list[SessionInfo]:
    """Sessions newest first (by ``modified``).

    With ``session_dir``: the ``*.jsonl`` files in that folder. Else with ``cwd``: Pi's
    folder for that cwd. With neither: every folder under Pi's sessions root (Pi ``listAll``).
    Files that are not Pi sessions are left out. Only files directly inside the folders are
    read; links are followed only if they point at regular files.
    """
    if session_dir is not None:
        dirs = [Path(session_dir)]
    elif cwd is not None:
        dirs = [default_session_dir(cwd)]
    else:
        root = sessions_root()
        try:
            dirs = [root / d for d in sorted(os.listdir(root)) if (root / d).is_dir()]
        except OSError:
            dirs = []
    out: list[SessionInfo] = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            if not n.endswith(".jsonl"):
                continue
            p = d / n
            if not p.is_file():
                continue
            try:
                info = session_info(p)
            except (OSError, ValueError):
                continue
            if info is not None:
                out.append(info)
    out.sort(key=lambda i: i.modified, reverse=True)
    return out
