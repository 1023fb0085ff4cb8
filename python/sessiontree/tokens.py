"""Pi's token estimate for one message (``estimateTokens`` in Pi's compaction.ts).

Pi never tokenizes: it counts characters as JavaScript does (UTF-16 code units, see
:func:`sessiontree._jsjson.js_len`) and divides by four, rounding up. This module
reproduces that estimate exactly, including where Pi throws on malformed messages.

    >>> estimate_tokens({"role": "user", "content": "hello world"})
    3
    >>> estimate_tokens({"role": "assistant", "content": [{"type": "text", "text": "😀😀"}]})
    1
"""

from __future__ import annotations

import math
from typing import Any

from .errors import PiError
from ._jsjson import JS_UNDEFINED, js_add, js_get, js_len, js_stringify_len, js_to_number, js_truthy

__all__ = ["EstimateError", "ESTIMATED_IMAGE_CHARS", "estimate_tokens"]

#: Characters Pi counts for every ``{"type": "image"}`` block (1200 tokens).
ESTIMATED_IMAGE_CHARS = 4800

_NAN = math.nan


class EstimateError(PiError):
    """Pi's ``estimateTokens`` would throw on this message.

    Mirrors the JavaScript ``TypeError`` Pi raises on malformed content (``null``
    content, a tool call without ``arguments``, ...). ``str(err)`` and ``err.pi_error``
    are Pi's exact text, e.g. ``"TypeError: content is not iterable"``.
    """


# ==== JavaScript property access =================================================


def _prop(obj: Any, key: str) -> Any:
    """``obj[key]`` (:func:`sessiontree._jsjson.js_get`), raising :class:`EstimateError`."""
    return js_get(obj, key, EstimateError)


def _length(value: Any) -> Any:
    """``value.length`` as a number to add (NaN when JS would add ``undefined``)."""
    n = _prop(value, "length")
    return _NAN if n is JS_UNDEFINED else n


def _iterate(value: Any, name: str) -> list[Any]:
    """``for (const x of value)``: lists and strings iterate, anything else throws."""
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return list(value)
    raise EstimateError(f"TypeError: {name} is not iterable")


def _add(chars: Any, value: Any) -> Any:
    """``chars += value`` as JavaScript adds (a string ``length`` concatenates)."""
    return js_add(chars, value, EstimateError)


def _ceil4(chars: Any) -> int | float:
    """``Math.ceil(chars / 4)``: NaN and Infinity as they are (a string is read as ``Number``)."""
    n = chars if type(chars) in (int, float) else js_to_number(chars, EstimateError)
    if n != n or n in (math.inf, -math.inf):
        return float(n)
    return math.ceil(n / 4)


# ==== Per-role character counts ===================================================


def _content_chars(content: Any) -> Any:
    """Pi's estimateTextAndImageContentChars: string length, or text lengths + 4800 per image."""
    if isinstance(content, str):
        return js_len(content)
    chars: Any = 0
    for block in _iterate(content, "content"):
        btype = _prop(block, "type")
        if btype == "text":
            text = _prop(block, "text")
            if js_truthy(text):
                chars = _add(chars, _length(text))
        elif btype == "image":
            chars = _add(chars, ESTIMATED_IMAGE_CHARS)
    return chars


def _assistant_chars(message: dict[str, Any]) -> Any:
    chars: Any = 0
    for block in _iterate(_prop(message, "content"), "assistant.content"):
        btype = _prop(block, "type")
        if btype == "text":
            chars = _add(chars, _length(_prop(block, "text")))
        elif btype == "thinking":
            chars = _add(chars, _length(_prop(block, "thinking")))
        elif btype == "toolCall":
            name_len = _length(_prop(block, "name"))
            args = _prop(block, "arguments")
            if args is JS_UNDEFINED:  # JSON.stringify(undefined) is undefined
                raise EstimateError("TypeError: Cannot read properties of undefined (reading 'length')")
            chars = _add(chars, _add(name_len, js_stringify_len(args)))
    return chars


def _system_chars(message: dict[str, Any]) -> Any:
    chars = _content_chars(_prop(message, "content"))
    sections = _prop(message, "sections")
    if js_truthy(sections):
        if isinstance(sections, dict):
            values = list(sections.values())
        elif isinstance(sections, list):
            values = sections
        elif isinstance(sections, str):  # Object.values("ab") -> ["a", "b"]
            values = [sections] if sections else []
        else:
            values = []
        for section in values:
            if js_truthy(section):
                chars = _add(chars, _length(section))
    tools = _prop(message, "toolsAdded")
    if js_truthy(tools):
        chars = _add(chars, js_stringify_len(tools))
    return chars


def estimate_tokens(message: Any) -> int | float:
    """Pi's ``estimateTokens(message)``: ``ceil(chars / 4)`` with chars in UTF-16 code units.

    ``message`` is an ``AgentMessage`` dict as Pi holds it (the ``message`` of a message
    entry, or one built by context building). Characters counted per ``role``:

    * ``user``, ``custom``, ``toolResult``: a string ``content``'s length, or for a list the
      lengths of non-empty ``text`` of ``{"type": "text"}`` blocks plus 4800 per
      ``{"type": "image"}`` block;
    * ``assistant``: ``text`` / ``thinking`` lengths, and for ``toolCall`` blocks
      ``len(name) + len(JSON.stringify(arguments))``;
    * ``bashExecution``: ``len(command) + len(output)``;
    * ``branchSummary`` / ``compactionSummary``: ``len(summary)``;
    * ``system``: content as for ``user``, plus every truthy ``sections`` value's length,
      plus ``len(JSON.stringify(toolsAdded))`` when ``toolsAdded`` is truthy;
    * any other role (or a non-dict message): 0.

    Returns an ``int``; ``float('nan')`` in the rare cases where JavaScript arithmetic
    yields NaN (e.g. a ``text`` that is a number), as Pi would.

    Raises :class:`EstimateError` with Pi's message where Pi throws: ``content`` null or
    missing (``"TypeError: content is not iterable"``), assistant content not a list
    (``"TypeError: assistant.content is not iterable"``), a text/thinking/name/arguments
    field missing (``"TypeError: Cannot read properties of undefined (reading 'length')"``).
    Mirrors Pi compaction.ts ``estimateTokens``.
    """
    if message is None:
        raise EstimateError("TypeError: Cannot read properties of null (reading 'role')")
    if not isinstance(message, dict):
        return 0
    role = message.get("role")
    if role in ("user", "custom", "toolResult"):
        return _ceil4(_content_chars(_prop(message, "content")))
    if role == "assistant":
        return _ceil4(_assistant_chars(message))
    if role == "system":
        return _ceil4(_system_chars(message))
    if role == "bashExecution":
        return _ceil4(_add(_length(_prop(message, "command")), _length(_prop(message, "output"))))
    if role in ("branchSummary", "compactionSummary"):
        return _ceil4(_length(_prop(message, "summary")))
    return 0
