"""Rendering for the command line.

Safe text (no terminal control sequence from a file ever reaches the terminal), JSON documents,
previews of entries and messages, the output stream."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

import orjson

from .._progress import stderr_is_terminal
from ..errors import (
    SessionCycleError,
    SessionTreeError,
)

if TYPE_CHECKING:
    from ..session import EntryTable, Session

#: Characters of preview shown by default (``--max-preview``).
DEFAULT_PREVIEW = 60
#: Branch-guide columns kept in ``tree`` before older ones are folded into ``⋯N`` (N folded).
MAX_TREE_GUIDES = 8

# ==== Terminal safety ===============================================================

# C0 controls (ESC, BEL, CR, ...), DEL, C1 controls (0x9b is an 8-bit CSI), the Arabic letter
# mark, LRM/RLM, line/paragraph separators, bidi embeddings/overrides/isolates (Trojan
# Source), and lone surrogates (which cannot even be encoded to UTF-8).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape_char(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(s: object) -> str:
    """``s`` with every character that could drive a terminal made visible as an escape.

    C0/C1 controls, DEL and ESC become ``\\xNN``; bidi controls (U+202A–U+202E,
    U+2066–U+2069, LRM/RLM/ALM), U+2028/U+2029 and lone surrogates become ``\\uNNNN``.
    Everything else (CJK, emoji, combining marks) passes unchanged. Non-strings are
    converted with ``str()`` first (None becomes ``""``).

        >>> safe_text("\\x1b[31mred\\x1b[0m")
        '\\\\x1b[31mred\\\\x1b[0m'
        >>> safe_text("abc\\u202edef")
        'abc\\\\u202edef'
    """
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    return _UNSAFE.sub(_escape_char, s)


#: a byte of a file name that was not UTF-8, as Python decodes it (``surrogateescape``)
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def bytes_shown(text: str) -> str:
    """``text`` with each undecodable file-name byte (U+DC80..U+DCFF) written ``\\xNN``.

    For messages that name files; the rest is left to :func:`safe_text`."""
    return _ESCAPED_BYTE.sub(lambda m: "\\x%02x" % (ord(m.group()) - 0xDC00), text)


def path_shown(path: object) -> str:
    """A file name as the text commands print it.

    :func:`safe_text` of the name, each byte that is not UTF-8 written ``\\xNN`` (as the store
    commands' ``path`` rows write it), not Python's ``\\udcNN`` for the byte it could not decode."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else ("" if path is None else str(path))
    return safe_text(bytes_shown(str(text)))


# Raw characters that JSON leaves unescaped but terminals may act on; inside a JSON document
# they can only occur in strings, so writing them as \\uXXXX keeps the value identical.
_JSON_UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _json_escape(m: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(m.group().decode("utf-8"))


def json_document(doc: Any) -> str:
    """``doc`` as indented JSON text, with C1/DEL/bidi characters escaped as ``\\uXXXX``.

    orjson; the JavaScript-exact writer for lone surrogates and big integers. The escapes keep
    the value."""
    try:
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        from .._jsjson import js_stringify_bytes

        data = js_stringify_bytes(doc)
    return _JSON_UNSAFE.sub(_json_escape, data).decode("utf-8")


def json_line(doc: Any) -> str:
    """``doc`` as one line of compact JSON (no newline), escaped like :func:`json_document`.

    A lone surrogate (a non-UTF-8 file name, decoded with ``surrogateescape``) is written as
    JavaScript's ``JSON.stringify`` writes it (``\\udcff``), never a TypeError."""
    try:
        data = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        from .._jsjson import js_stringify_bytes

        data = js_stringify_bytes(doc)
    return _JSON_UNSAFE.sub(_json_escape, data).decode("utf-8")


# ==== Previews =======================================================================


def _js_compact(value: Any) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return "…"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
    return " ".join(p for p in parts if p)


def message_preview(message: Any) -> str:
    """A one-paragraph text for an ``AgentMessage`` dict (not yet clipped or escaped).

    user/custom/system: the content text; toolResult: ``toolName: text``; assistant: its
    text, then ``→ tool(args)`` per tool call (``(thinking) …`` or ``(error) …`` when there
    is no text); bashExecution: ``$ command``; branchSummary/compactionSummary: the summary.
    Never raises on odd shapes (returns ``""``)."""
    if not isinstance(message, dict):
        return ""
    role = message.get("role")
    if role == "assistant":
        content = message.get("content")
        texts: list[str] = []
        calls: list[str] = []
        thinking: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                kind = b.get("type")
                if kind == "text" and isinstance(b.get("text"), str) and b["text"]:
                    texts.append(b["text"])
                elif kind == "toolCall":
                    args = b.get("arguments", b.get("input"))
                    calls.append(f"→ {b.get('name')}({_js_compact(args) if args is not None else ''})")
                elif kind == "thinking" and isinstance(b.get("thinking"), str):
                    thinking.append(b["thinking"])
        out = " ".join(texts + calls)
        if not out and thinking:
            out = "(thinking) " + " ".join(thinking)
        if not out and isinstance(message.get("errorMessage"), str):
            out = "(error) " + message["errorMessage"]
        return out
    if role == "toolResult":
        text = _content_text(message.get("content"))
        name = message.get("toolName")
        return f"{name}: {text}" if isinstance(name, str) else text
    if role == "bashExecution":
        cmd = message.get("command")
        return f"$ {cmd}" if isinstance(cmd, str) else "$"
    if role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        return summary if isinstance(summary, str) else ""
    return _content_text(message.get("content"))


def entry_preview(raw: Any) -> str:
    """A one-paragraph text for an entry (parsed JSON), by type; ``""`` when there is none.

    message: :func:`message_preview`; compaction/branch_summary: the summary;
    custom_message: its content; label: ``target ← "label"``; session_info: the name;
    model_change: ``provider/modelId``; thinking_level_change: the level; custom: its
    customType; a JSON value that is not an object: its JSON text."""
    if not isinstance(raw, dict):
        return _js_compact(raw)
    kind = raw.get("type")
    if kind == "message":
        return message_preview(raw.get("message"))
    if kind in ("compaction", "branch_summary"):
        summary = raw.get("summary")
        return summary if isinstance(summary, str) else ""
    if kind == "custom_message":
        return _content_text(raw.get("content"))
    if kind == "label":
        label = raw.get("label")
        shown = f'"{label}"' if isinstance(label, str) and label else "(cleared)"
        return f"{raw.get('targetId')} ← {shown}"
    if kind == "session_info":
        name = raw.get("name")
        return name if isinstance(name, str) else ""
    if kind == "model_change":
        return f"{raw.get('provider')}/{raw.get('modelId')}"
    if kind == "thinking_level_change":
        return str(raw.get("thinkingLevel"))
    if kind == "custom":
        return str(raw.get("customType"))
    return ""


def clip(text: str, limit: int = DEFAULT_PREVIEW) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…`` marking the cut.

    Newlines as ``⏎``, tabs as spaces. Not escaped: see :func:`preview`."""
    if limit <= 0 or not text:
        return ""
    text = text[: limit * 4 + 8]  # enough to clip after collapsing
    text = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎").replace("\t", " ")
    if len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def preview(text: str, limit: int = DEFAULT_PREVIEW) -> str:
    """:func:`clip` then :func:`safe_text`: a one-line preview safe to print.

    >>> preview("line one\\nline two", 12)
    'line one⏎li…'
    >>> preview("\\x1b[2Jboom", 20)
    '\\\\x1b[2Jboom'
    """
    return safe_text(clip(text, limit))


def _safe_preview(fn: Callable[[Any], str], value: Any, limit: int, escape: bool = True) -> str:
    """``fn(value)`` clipped (and escaped unless ``escape`` is false, for JSON output)."""
    if limit <= 0:
        return ""
    try:
        text = clip(fn(value), limit)
    except Exception:  # a preview must never break a listing
        return ""
    return safe_text(text) if escape else text


def _entry_preview_of(s: Any, i: int, limit: int, escape: bool = True) -> str:
    """Preview of entry ``i``; an entry whose body cannot be loaded (e.g. nested too deeply for
    Python) previews as empty instead of failing the listing."""
    try:
        raw = s.entry_at(i).raw
    except Exception:
        return ""
    return _safe_preview(entry_preview, raw, limit, escape)


# ==== Helpers over the session ==========================================================


def _kind_from(entry_type: Any, role: Any) -> str:
    if entry_type == "message":
        return role or "message"
    return entry_type if entry_type is not None else "?"


def _shown_id(entry_id: Any) -> str:
    return safe_text(entry_id) if entry_id is not None else "(no id)"


def _tokens_or_none(estimate: Callable[[Any], Any], message: Any) -> Any:
    try:
        n = estimate(message)
    except Exception:
        return None
    if isinstance(n, float) and math.isnan(n):
        return None
    return n


def _fmt_tokens(n: Any) -> str:
    return "?" if n is None else str(n)


def _labels_by_id(s: Session) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for target, label in s.labels.items():
        try:
            out[target] = label
        except TypeError:  # unhashable target (a JSON object as targetId)
            continue
    return out


def _active_path(s: Session, from_id: str | None = None) -> tuple[EntryTable, SessionCycleError | None]:
    """The entries root → ``from_id``, or an empty table and the cycle error when the chain loops.

    ``from_id`` defaults to the leaf, like ``get_branch()``.

    Raises:
        EntryNotFoundError: ``from_id`` names no entry.
    """
    try:
        return s.branch_table(from_id), None
    except SessionCycleError as exc:
        return s.entry_table([]), exc


# ==== Output ==========================================================================


class _Out:
    """Collects human output lines; written at the end in large chunks."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)

    def flush(self) -> None:
        for k in range(0, len(self.lines), 4096):
            _write_out("\n".join(self.lines[k : k + 4096]) + "\n")
        self.lines.clear()


class _Stream:
    """Human output lines written as they come.

    The first line at once, then in chunks (every ``chunk`` lines or ``interval`` seconds,
    whichever comes first), so a long listing starts printing before it is built and never holds
    all its lines."""

    def __init__(self, chunk: int = 512, interval: float = 0.1) -> None:
        self.lines: list[str] = []
        self.chunk = chunk
        self.interval = interval
        self.written = 0
        self.last = time.monotonic()

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)
        if self.written == 0 or len(self.lines) >= self.chunk or time.monotonic() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.written += len(self.lines)
            _write_out("\n".join(self.lines) + "\n", flush=True)
            self.lines.clear()
        self.last = time.monotonic()


def _stdout_is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def progress_wanted(args: argparse.Namespace, streams_to_stdout: bool = False) -> bool:
    """A progress bar for this command.

    ``--progress``, or stderr is a terminal (and, for a command that streams its lines, stdout
    is not: there the lines show the progress); never with ``--no-progress``."""
    if getattr(args, "no_progress", False):
        return False
    if getattr(args, "progress", False):
        return True
    return stderr_is_terminal() and not (streams_to_stdout and _stdout_is_terminal())


def _print_json(doc: Any) -> None:
    _write_out(json_document(doc) + "\n")


class _OutputError(SessionTreeError):
    """Standard output could not be written (closed, a full device): ``args[0]`` says why."""


class _CliFailure(SessionTreeError):
    """A one-line failure a command reports itself (message, exit code)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _write_out(text: str, flush: bool = False) -> None:
    """Write to standard output; a failure becomes :class:`_OutputError`.

    The reader going away stays a BrokenPipeError."""
    try:
        if sys.stdout is None:
            raise _OutputError("standard output is closed")
        sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: write to a closed file object
        raise _OutputError(f"cannot write to standard output: {getattr(exc, 'strerror', None) or exc}") from None


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null and drop buffered output.

    So the interpreter's final flush of a broken stdout neither fails nor prints a traceback of
    its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    try:
        sys.stdout = open(os.devnull, "w")  # the old object's unflushed buffer is discarded with it
    except OSError:
        sys.stdout = None


def os_error_text(exc: OSError) -> str:
    """What an OSError says, its file named once.

    ``NAME: strerror``, or its message (with the name before it when the message does not hold
    it already)."""
    name = exc.filename
    if exc.strerror:
        return f"{name}: {exc.strerror}" if name is not None else exc.strerror
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    if name is not None and str(name) not in text:
        return f"{name}: {text}"
    return text


def print_failure(message: str, code: int = 2, as_json: bool = False) -> int:
    """One line on stderr (and, for ``--json``, an error document on stdout); returns ``code``."""
    try:
        print(f"sessiontree: error: {safe_text(bytes_shown(message))}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass
    if as_json:
        try:
            _write_out(json_document({"error": True, "exit_code": code, "message": message}) + "\n", flush=True)
        except (_OutputError, BrokenPipeError):
            _silence_stdout()
    return code
