"""Listing sessions without reading whole files (Pi ``SessionManager.list`` / ``listAll``).

What a session is comes from the Rust core's header rule, the one :meth:`Session.open`
applies (``entries.probe_header``: the first JSON value, blank, damaged and falsy lines skipped,
must be an object with ``type: "session"`` and a string ``id``; the header may be on any line
and of any length). Then, with plain reads (never a memory map: a file truncated meanwhile
ends the read, it cannot raise SIGBUS), each file costs bounded bytes whatever its size:

* the header line (and any skipped lines before it);
* the first user message: lines read forward from the header, at most
  :data:`_FIRST_MESSAGE_BYTES` bytes and :data:`_FIRST_MESSAGE_LINES` lines, each line only
  looked at through its first :data:`_LINE_PREFIX` bytes unless that prefix says it may be a
  user message;
* the last :data:`_TAIL_BYTES` bytes: the latest ``session_info`` (the name) and the last
  user or assistant message (recency), read backwards; when the tail has no ``session_info``,
  the first :data:`_HEAD_NAME_BYTES` bytes after the header are searched for one.

Listing a 1 GB session reads about 5 MiB of it (``tests/session/test_hostile_text_and_listing.py``).
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .index_cache import IndexCache

from ._jsjson import JS_UNDEFINED, js_date_parse, js_trim
from .entries import parse_json_line, probe_header
from .paths import default_session_dir, session_dir_env, sessions_root

_BLOCK = 64 << 10  # bytes per read when looking for a header or a line end
_TAIL_BYTES = 4 << 20
_HEAD_NAME_BYTES = 1 << 20
_FIRST_MESSAGE_BYTES = 16 << 20
_FIRST_MESSAGE_LINES = 5000
_LINE_PREFIX = 64 << 10
#: ``new Date(x)`` is valid for |x| <= 8.64e15 ms (JavaScript's time range: years -271821 to
#: 275760); Python's ``datetime`` stops at year 9999.
_MAX_JS_TIME = 8.64e15
_DT_MAX = datetime.max.replace(tzinfo=timezone.utc)
_DT_MIN = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class SessionInfo:
    """One listed session.

    ``path``; ``id`` and ``cwd`` from the header; ``name`` (latest ``session_info``, trimmed,
    or None); ``parent_session`` (header ``parentSession``, or the legacy ``branchedFrom``, as
    written: never opened by listing; :meth:`parent_session_id` reads the parent's header on
    request); ``created`` (header timestamp, UTC datetime or None); ``modified`` (last
    user/assistant message time, else header time, else file mtime — Pi's rule);
    ``first_message`` (text of the first user message, ``"(no messages)"`` if none was found
    within the forward budget); ``size`` in bytes; ``modified_ms`` (``modified`` as JavaScript
    milliseconds: exact where ``datetime`` cannot go, e.g. year 10000, whose ``modified`` is
    clamped to ``datetime.max``; the listing is sorted by it).
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
    modified_ms: float = 0.0

    def parent_session_id(self) -> str | None:
        """The parent session's id, read from the parent file's header only.

        A relative ``parent_session`` is taken relative to this session's folder. None when
        there is no parent, or it is missing, not a regular file, or not a Pi session."""
        if not self.parent_session:
            return None
        p = Path(self.parent_session)
        if not p.is_absolute():
            p = self.path.parent / p
        h = read_header(p)
        return h["id"] if h is not None else None


def parent_session_of(header: Any) -> str | None:
    """A header's parent session path.

    ``parentSession``, else the legacy ``branchedFrom`` (older Pi versions), when a string; else
    None."""
    if not isinstance(header, dict):
        return None
    for key in ("parentSession", "branchedFrom"):
        v = header.get(key)
        if isinstance(v, str):
            return v
    return None


def _read_header_fd(fd: int, size: int) -> tuple[dict[str, Any] | None, int]:
    """The header of the open file ``fd`` (``size`` bytes) by the open rule, and its line's end.

    The offset just past the header's line; (None, 0) when the file is not a Pi session."""
    want = min(size, _BLOCK)
    while True:
        buf = os.pread(fd, want, 0)
        eof = len(buf) < want or want >= size
        state, _why, off, ln = probe_header(buf, eof)
        if state == "more" and not eof:
            want = min(size, want * 4)
            continue
        if state != "valid":
            return None, 0
        try:
            h = parse_json_line(buf[off : off + ln])
        except Exception:  # nested too deeply for Python: Session.open refuses it too
            return None, 0
        nl = buf.find(b"\n", off + ln)
        return (h if isinstance(h, dict) else None), (len(buf) if nl < 0 else nl + 1)


def _open_regular(path: Path) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file, else None.

    FIFOs and devices are not opened for reading: ``O_NONBLOCK`` keeps a FIFO from blocking,
    then it is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_header(path: Path) -> dict[str, Any] | None:
    """The header of a session file if it is a Pi session, else None.

    By the rule :meth:`Session.open` applies. Reads only as far as the header line."""
    fd = _open_regular(Path(path))
    if fd is None:
        return None
    try:
        return _read_header_fd(fd, os.fstat(fd).st_size)[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def most_recent_session(session_dir: Path) -> Path | None:
    """The valid session file with the newest mtime in ``session_dir``, or None.

    Pi ``findMostRecentSession``."""
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


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            b.get("text", "")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _parse(line: bytes) -> Any:
    try:
        return parse_json_line(line.rstrip(b"\r"))
    except Exception:  # not JSON as JavaScript reads it (NaN, torn...), or nested too deeply
        return None


def _find_newline(fd: int, pos: int, limit: int) -> int:
    """Offset of the first ``\\n`` in ``[pos, limit)`` of ``fd``, or -1."""
    while pos < limit:
        block = os.pread(fd, min(_BLOCK, limit - pos), pos)
        if not block:
            return -1
        k = block.find(b"\n")
        if k >= 0:
            return pos + k
        pos += len(block)
    return -1


def _first_user_message(fd: int, start: int, size: int) -> str:
    """Text of the first user message after the header, scanning forward within the budget."""
    limit = min(size, start + _FIRST_MESSAGE_BYTES)
    pos = start
    for _ in range(_FIRST_MESSAGE_LINES):
        if pos >= limit:
            break
        nl = _find_newline(fd, pos, limit)
        end = limit if nl < 0 else nl
        if nl < 0 and limit < size:
            break  # the line runs past the budget
        prefix = os.pread(fd, min(end - pos, _LINE_PREFIX), pos)
        # Pi writes `"role"` before `content`: a prefix naming another role is skipped unread
        if b'"user"' in prefix or (b'"role"' not in prefix and b'"message"' in prefix and end - pos > len(prefix)):
            line = prefix if end - pos <= len(prefix) else os.pread(fd, end - pos, pos)
            v = _parse(line)
            if (
                isinstance(v, dict)
                and v.get("type") == "message"
                and isinstance(v.get("message"), dict)
                and v["message"].get("role") == "user"
            ):
                text = _text_of(v["message"])
                if text:
                    return text
        pos = end + 1
    return ""


def _lines_backwards(buf: bytes, whole: bool) -> Iterator[bytes]:
    """Lines of ``buf`` last first; the first (partial) line only when ``whole``."""
    end = len(buf)
    while end > 0:
        k = buf.rfind(b"\n", 0, end)
        if k < 0 and not whole:
            return
        yield buf[k + 1 : end]
        end = k if k >= 0 else 0


def _name_in(lines: Iterator[bytes]) -> tuple[bool, str | None]:
    for line in lines:
        if b'"session_info"' not in line:
            continue
        v = _parse(line)
        if isinstance(v, dict) and v.get("type") == "session_info":
            n = v.get("name")
            return True, ((js_trim(n) or None) if isinstance(n, str) else None)  # Pi getSessionName
    return False, None


def _js_time(x: Any) -> float | None:
    """``x`` as a JavaScript time value in ms when ``new Date(x)`` would be valid, else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        t = float(x)
    except OverflowError:  # an int beyond a double: Infinity in JavaScript
        return None
    return t if math.isfinite(t) and abs(t) <= _MAX_JS_TIME else None


def _utc(ms: float) -> datetime:
    """A JavaScript time as an aware UTC datetime, clamped to what ``datetime`` holds."""
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc)
    except (OverflowError, ValueError, OSError):
        return _DT_MAX if ms > 0 else _DT_MIN


def session_info(path: Path) -> SessionInfo | None:
    """List one file, or None when it is not a Pi session (or not a regular file)."""
    fd = _open_regular(Path(path))
    if fd is None:
        return None
    try:
        return _session_info_fd(Path(path), fd)
    finally:
        os.close(fd)


def _session_info_fd(path: Path, fd: int) -> SessionInfo | None:
    st = os.fstat(fd)
    size = st.st_size
    if size == 0:
        return None
    header, body = _read_header_fd(fd, size)
    if header is None:
        return None
    tail_start = max(body, size - _TAIL_BYTES)
    tail = os.pread(fd, size - tail_start, tail_start)
    found, name = _name_in(_lines_backwards(tail, whole=tail_start == body))
    if not found and tail_start > body:
        head = os.pread(fd, min(_HEAD_NAME_BYTES, tail_start - body), body)  # a cut last line does not parse
        found, name = _name_in(_lines_backwards(head, whole=True))
    last_activity: float | None = None
    for line in _lines_backwards(tail, whole=tail_start == body):
        if b'"message"' not in line:
            continue
        v = _parse(line)
        if not (isinstance(v, dict) and v.get("type") == "message"):
            continue
        m = v.get("message")
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or "content" not in m:
            continue
        ts = m.get("timestamp")
        t = _js_time(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None
        if t is None and not isinstance(ts, (int, float)):
            t = _js_time(js_date_parse(v.get("timestamp", JS_UNDEFINED)))
        if t is not None:
            last_activity = t
            break
    first_message = _first_user_message(fd, body, size)
    created_ms = _js_time(js_date_parse(header.get("timestamp", JS_UNDEFINED)))
    created = _utc(created_ms) if created_ms is not None else None
    if last_activity is not None and last_activity > 0:
        modified_ms = last_activity
    elif created_ms is not None:
        modified_ms = created_ms
    else:
        modified_ms = st.st_mtime * 1000
    cwd = header.get("cwd")
    return SessionInfo(
        path=path,
        id=header["id"],
        cwd=cwd if isinstance(cwd, str) else "",
        name=name,
        parent_session=parent_session_of(header),
        created=created,
        modified=_utc(modified_ms),
        first_message=first_message or "(no messages)",
        size=size,
        modified_ms=modified_ms,
    )


def _info_row(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "cwd": info.cwd,
        "name": info.name,
        "parent_session": info.parent_session,
        "created": info.created.isoformat() if info.created is not None else None,
        "modified": info.modified.isoformat(),
        "first_message": info.first_message,
        "size": info.size,
        "modified_ms": info.modified_ms,
    }


def _info_of_row(path: Path, r: dict[str, Any]) -> SessionInfo | None:
    try:
        return SessionInfo(
            path=path,
            id=r["id"],
            cwd=r["cwd"],
            name=r["name"],
            parent_session=r["parent_session"],
            created=datetime.fromisoformat(r["created"]) if r["created"] is not None else None,
            modified=datetime.fromisoformat(r["modified"]),
            first_message=r["first_message"],
            size=r["size"],
            modified_ms=r["modified_ms"],
        )
    except (KeyError, TypeError, ValueError):
        return None


def _listed(p: Path, index_cache: IndexCache) -> SessionInfo | None:
    """``session_info(p)``, through a saved row when the file is unchanged since it was listed.

    The rows are :mod:`sessiontree.index_cache`'s."""
    from . import index_cache as ic

    try:
        st = os.stat(p)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_size >= ic.min_bytes(index_cache) and ic.resolve(index_cache) is not None:
        row = ic.load_row("list", st, "1", index_cache)
        if row is not None:
            hit = _info_of_row(p, row)
            if hit is not None:
                return hit
        info = session_info(p)
        if info is not None:
            ic.save_row("list", st, "1", _info_row(info), index_cache)
        return info
    return session_info(p)


def list_sessions(
    cwd: str | None = None, *, session_dir: str | os.PathLike[str] | None = None, index_cache: IndexCache = None
) -> list[SessionInfo]:
    """Sessions newest first (by ``modified_ms``).

    With ``session_dir``: the ``*.jsonl`` files in that folder. Else with ``cwd``: Pi's
    folder for that cwd (:func:`~sessiontree.paths.default_session_dir`). With neither: every
    folder under Pi's sessions root (Pi ``listAll``), or, with ``$PI_CODING_AGENT_SESSION_DIR``
    set, that one folder (Pi ``listAll(sessionDir)``: the folder holds the files of every cwd).
    Files that are not Pi sessions (by the rule :meth:`Session.open` applies) are left out.
    Only files directly inside the folders are read; links are followed only if they point
    at regular files.

    ``index_cache`` (:mod:`sessiontree.index_cache`: None for the default folder, a folder, or
    ``False``/``"off"``): a file of at least the saved size is listed from a saved row while it
    is unchanged (same device, inode, size, mtime and ctime in ns), else read as above and its
    row saved. Listing never needs a saved index: it reads bounded bytes of each file.
    """
    if session_dir is not None:
        dirs = [Path(session_dir)]
    elif cwd is not None:
        dirs = [default_session_dir(cwd)]
    elif (env := session_dir_env()) is not None:
        dirs = [env]
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
                info = _listed(p, index_cache)
            except (OSError, ValueError):
                continue
            if info is not None:
                out.append(info)
    out.sort(key=lambda i: i.modified_ms, reverse=True)
    return out
