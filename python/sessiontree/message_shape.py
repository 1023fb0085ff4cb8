"""Pi's ``AgentMessage`` shapes, checked before a message is appended in strict mode
(``Session.append_message(message, strict=True)``).

The shapes are Pi 1.6's (``packages/ai/src/types.ts``, ``packages/coding-agent/src/core/
messages.ts``; docs ``message-types.md``): a known ``role``; ``timestamp`` an integer of
milliseconds; content blocks of the types each role allows; the required fields of each role
with their types; and, anywhere in the message, only JSON values (dict with string keys, list,
str, int, finite float, bool, None): no ``NaN``/``Infinity`` (``JSON.stringify`` writes them as
``null``), no ``datetime`` or other objects. Optional fields Pi adds over time are not
required; unknown extra fields are allowed (Pi keeps them).

Non-strict appends keep accepting anything JSON can hold, as Pi's own ``appendMessage`` does.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import MessageShapeError

ROLES = ("system", "user", "assistant", "toolResult", "bashExecution", "custom")
STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted", "deferred")
_USER_BLOCKS = ("text", "image")
_ASSISTANT_BLOCKS = ("text", "thinking", "toolCall")
_MAX_DEPTH = 512


def check_message_shape(message: Any) -> None:
    """Raise :class:`MessageShapeError` naming the first field of ``message`` that is not
    what Pi's ``AgentMessage`` of its role holds (see the module docs); return None when the
    message has Pi's shape. Iterative: any nesting depth is checked without recursion (deeper
    than 512 levels is refused)."""
    if not isinstance(message, dict):
        raise MessageShapeError(f"message must be a dict, not {type(message).__name__}")
    _check_json_values(message)
    role = message.get("role")
    if not isinstance(role, str):
        raise MessageShapeError("message.role is required and must be a string")
    if role not in ROLES:
        raise MessageShapeError(f"message.role {role!r} is not one of Pi's roles ({', '.join(ROLES)})")
    ts = message.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise MessageShapeError(
            f"message.timestamp must be an int (Unix milliseconds), not {type(ts).__name__ if 'timestamp' in message else 'missing'}"
        )
    content = message.get("content")
    if role in ("user", "custom"):
        _content(content, _USER_BLOCKS, allow_str=True)
    elif role == "system":
        _content(content, ("text",), allow_str=True)
    elif role == "assistant":
        _content(content, _ASSISTANT_BLOCKS, allow_str=False)
        for name in ("api", "provider", "model"):
            _require(message, name, str)
        stop = message.get("stopReason")
        if stop not in STOP_REASONS:
            raise MessageShapeError(f"message.stopReason must be one of {', '.join(STOP_REASONS)}, not {stop!r}")
        _usage(message.get("usage"), "message.usage")
    elif role == "toolResult":
        _content(content, _USER_BLOCKS, allow_str=False)
        _require(message, "toolCallId", str)
        _require(message, "toolName", str)
        _require(message, "isError", bool)
    elif role == "bashExecution":
        _require(message, "command", str)
        _require(message, "output", str)
        code = message.get("exitCode")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise MessageShapeError("message.exitCode must be an int or missing")
        _require(message, "cancelled", bool)
        _require(message, "truncated", bool)
    if role == "custom":
        _require(message, "customType", str)
        _require(message, "display", bool)


def _require(message: dict[str, Any], name: str, kind: type) -> None:
    value = message.get(name)
    if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
        raise MessageShapeError(f"message.{name} is required and must be a {kind.__name__}")


def _content(content: Any, blocks: tuple[str, ...], allow_str: bool) -> None:
    if allow_str and isinstance(content, str):
        return
    if not isinstance(content, list):
        want = "a string or a list of content blocks" if allow_str else "a list of content blocks"
        raise MessageShapeError(f"message.content must be {want}, not {type(content).__name__}")
    for k, block in enumerate(content):
        where = f"message.content[{k}]"
        if not isinstance(block, dict):
            raise MessageShapeError(f"{where} must be a content block (a dict)")
        btype = block.get("type")
        if btype not in blocks:
            raise MessageShapeError(f"{where}.type must be one of {', '.join(blocks)} here, not {btype!r}")
        fields = {
            "text": ("text",),
            "image": ("data", "mimeType"),
            "thinking": ("thinking",),
            "toolCall": ("id", "name"),
        }[btype]
        for f in fields:
            if not isinstance(block.get(f), str):
                raise MessageShapeError(f"{where}.{f} is required and must be a string")
        if btype == "toolCall" and not isinstance(block.get("arguments"), dict):
            raise MessageShapeError(f"{where}.arguments is required and must be a dict")


def _usage(usage: Any, where: str) -> None:
    if not isinstance(usage, dict):
        raise MessageShapeError(f"{where} is required and must be a dict")
    for name in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        v = usage.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise MessageShapeError(f"{where}.{name} is required and must be a number")
    cost = usage.get("cost")
    if not isinstance(cost, dict):
        raise MessageShapeError(f"{where}.cost is required and must be a dict")
    for name in ("input", "output", "cacheRead", "cacheWrite", "total"):
        v = cost.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise MessageShapeError(f"{where}.cost.{name} is required and must be a number")


def _check_json_values(message: dict[str, Any]) -> None:
    """Every value is a JSON value and every number finite (iterative walk)."""
    stack: list[tuple[Any, str, int]] = [(message, "message", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise MessageShapeError(f"{where} is nested deeper than {_MAX_DEPTH} levels")
        if value is None or isinstance(value, (str, bool, int)):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise MessageShapeError(f"{where} is {value!r}: JSON has no NaN or Infinity (Pi would write null)")
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise MessageShapeError(f"{where} has a key that is not a string: {k!r}")
                stack.append((v, f"{where}.{k}", depth + 1))
            continue
        if isinstance(value, list):
            for k, v in enumerate(value):
                stack.append((v, f"{where}[{k}]", depth + 1))
            continue
        raise MessageShapeError(f"{where} is a {type(value).__name__}, not a JSON value")
