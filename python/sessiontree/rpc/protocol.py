"""The wire of Pi 1.6's RPC mode.

Versions, the response envelopes, JSON lines written like Pi's ``JSON.stringify`` (without
recursion for deep values), and the small JavaScript-flavoured helpers that error texts use."""

from __future__ import annotations

from typing import Any, Callable

from ..errors import SessionError
from ..session import dumps_entry

PI_VERSION = "1.6.0"
PROTOCOL = "sessiontree-rpc/1"
#: the longest command line accepted (bytes); longer lines are answered with a parse error
MAX_LINE_BYTES = 64 * 1024 * 1024

NOT_AN_AGENT = "this server holds sessions, not an agent: {cmd} needs a running Pi agent (sessiontree rpc)"


class RpcError(SessionError):
    """A command failed; the message is the response's ``error`` text."""


# ==== JSON ===========================================================================


def encode(value: Any) -> bytes:
    """One JSON line's text (no newline), compact like Pi's ``JSON.stringify``. Values nested
    deeper than orjson allows (``get_tree`` on a long path) are written without recursion."""
    try:
        return dumps_entry(value)
    except (RecursionError, ValueError, TypeError):
        return _encode_iterative(value)


def _encode_iterative(value: Any) -> bytes:
    out: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, dict):
            items = list(v.items())
            parts: list[Any] = [b"{"]
            for n, (k, x) in enumerate(items):
                if n:
                    parts.append(b",")
                parts.append(dumps_entry(str(k)) + b":")
                parts.append(x)
            parts.append(b"}")
            stack.extend(reversed(parts))
        elif isinstance(v, (list, tuple)):
            parts = [b"["]
            for n, x in enumerate(v):
                if n:
                    parts.append(b",")
                parts.append(x)
            parts.append(b"]")
            stack.extend(reversed(parts))
        else:
            out.append(dumps_entry(v))
    return b"".join(out)


def response(cmd_id: Any, command: Any, data: Any = None, *, has_data: bool = True) -> dict[str, Any]:
    """A success envelope (``data`` omitted when ``has_data`` is false, as Pi omits it)."""
    r: dict[str, Any] = {}
    if cmd_id is not None:
        r["id"] = cmd_id
    r.update(type="response", command=command, success=True)
    if has_data:
        r["data"] = data
    return r


class Text(dict[str, Any]):
    """A success response already written as its JSON line (``text``, no newline), for the transports.

    The dict holds the envelope without ``data``. :meth:`RpcServer.handle_line` returns one only
    when asked (``text_ok``); :meth:`RpcServer.handle` never does."""

    def __init__(self, cmd_id: Any, command: Any, data_text: bytes):
        super().__init__(response(cmd_id, command, has_data=False))
        #: the line up to its data (a large cached ``data`` is not copied into a new line for
        #: each answer)
        self.head = encode(dict(self))[:-1] + b',"data":'
        self.data = data_text

    @property
    def parts(self) -> tuple[bytes, bytes, bytes]:
        """The line in three parts, written one after the other: head, data, ``}``."""
        return (self.head, self.data, b"}")

    @property
    def text(self) -> bytes:
        """The whole JSON line (no newline)."""
        return b"".join(self.parts)

    def write_to(self, write: Callable[[bytes], object]) -> None:
        """Hands the line (no newline) to ``write`` in pieces."""
        for part in self.parts:
            write(part)


class StreamedText(Text):
    """A :class:`Text` whose ``data`` is written while it is sent, never held whole.

    ``produce(write)`` hands the data's JSON text to ``write`` in pieces (RPC ``get_tree`` of a
    large session: its answer is larger than the session file). If it raises after some pieces
    were written, the line is cut: the transport closes the connection."""

    def __init__(self, cmd_id: Any, command: Any, produce: Callable[[Callable[[bytes], object]], None]):
        super().__init__(cmd_id, command, b"")
        self.produce = produce

    @property
    def parts(self) -> tuple[bytes, bytes, bytes]:
        """The line in three parts, the data produced into memory.

        For callers other than the transports (which call :meth:`write_to`)."""
        got: list[bytes] = []
        self.produce(got.append)
        return (self.head, b"".join(got), b"}")

    def write_to(self, write: Callable[[bytes], object]) -> None:
        """Hands the line (no newline) to ``write``, the data as it is produced."""
        write(self.head)
        self.produce(write)
        write(b"}")


def error_response(cmd_id: Any, command: Any, message: str) -> dict[str, Any]:
    """Pi's failed-command response.

    ``{"id"?, "type": "response", "command", "success": false, "error": message}`` (``id`` only
    when the command had one, as Pi's ``rpc-mode.ts`` does)."""
    r: dict[str, Any] = {}
    if cmd_id is not None:
        r["id"] = cmd_id
    r.update(type="response", command=command, success=False, error=message)
    return r


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN / Infinity


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _js_string(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return encode(v).decode("utf-8", "replace")


def _is_summarizer_error(exc: BaseException) -> bool:
    try:
        from ..summarizers import SummarizerError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, SummarizerError)


def _error_text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
