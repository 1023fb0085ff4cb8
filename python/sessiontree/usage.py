"""Session token and cost totals (Pi 1.6 ``get_session_stats`` ``tokens`` / ``cost``).

Pi sums, over **every entry of the file** (all branches, pre-compaction history, file order):

* the ``usage`` of every assistant message;
* the ``usage`` of tool results that carry one (usage reported by tools, e.g. sub-agents);
* the ``usage`` of ``compaction`` and ``branch_summary`` entries (summarization work) and of
  ``usage`` entries (cache warming and other model work outside the conversation).

``total`` is ``input + output + cacheRead + cacheWrite`` (not the stored ``totalTokens``), ``cost``
the sum of ``usage.cost.total`` in dollars. Sums follow JavaScript: a missing token field makes
that total ``NaN`` (Pi's JSON shows ``null``), floating-point costs add in file order.

One deliberate difference: Pi throws (``Cannot read properties of undefined (reading 'input')``
/ ``(reading 'total')``) when an assistant message has no ``usage`` or a ``usage`` has no
``cost``; we count what is there and skip the missing part.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["UsageTotals", "usage_totals_of_entries"]

_USAGE_ENTRY_TYPES = ("compaction", "branch_summary", "usage")


@dataclass(frozen=True)
class UsageTotals:
    """Token and cost totals of a session.

    Tokens: ``input``, ``output``, ``cache_read``, ``cache_write``, ``total`` (the sum of the four).
    ``cost``: dollars. A value is ``nan`` where Pi's sum is ``NaN`` (a usage without that field).
    """

    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    total: float = 0
    cost: float = 0

    def to_pi(self) -> dict:
        """``{"tokens": {input, output, cacheRead, cacheWrite, total}, "cost"}`` as Pi's
        ``get_session_stats`` shows them (NaN becomes ``None``)."""

        def js(v: float) -> Any:
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            "tokens": {
                "input": js(self.input),
                "output": js(self.output),
                "cacheRead": js(self.cache_read),
                "cacheWrite": js(self.cache_write),
                "total": js(self.total),
            },
            "cost": js(self.cost),
        }


_MISSING: Any = object()


def _js_num(value: Any) -> float:
    """How ``x += value`` treats a usage field: numbers add, null is 0, booleans 0/1, a missing
    field (undefined) or anything else NaN."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return math.nan


def _carries_usage(entry: Any) -> Any:
    """The ``usage`` dict an entry contributes, or None."""
    if not isinstance(entry, dict):
        return None
    etype = entry.get("type")
    if etype == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        role = message.get("role")
        usage = message.get("usage")
        if role == "assistant" or (role == "toolResult" and usage):
            return usage if isinstance(usage, dict) else None
        return None
    if etype in _USAGE_ENTRY_TYPES:
        usage = entry.get("usage")
        return usage if isinstance(usage, dict) and usage else None
    return None


def usage_totals_of_entries(entries: Iterable[Any]) -> UsageTotals:
    """Sum the usage of ``entries`` (entry dicts, file order) by the rules of this module.

        >>> u = {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}
        >>> usage_totals_of_entries([{"type": "usage", "usage": u},
        ...     {"type": "message", "message": {"role": "assistant", "usage": u}}]).to_pi()
        {'tokens': {'input': 20, 'output': 4, 'cacheRead': 0, 'cacheWrite': 0, 'total': 24}, 'cost': 1.0}
    """
    i = o = cr = cw = 0
    cost: float = 0
    for entry in entries:
        usage = _carries_usage(entry)
        if usage is None:
            continue
        i += _js_num(usage.get("input", _MISSING))
        o += _js_num(usage.get("output", _MISSING))
        cr += _js_num(usage.get("cacheRead", _MISSING))
        cw += _js_num(usage.get("cacheWrite", _MISSING))
        c = usage.get("cost")
        if isinstance(c, dict):
            cost += _js_num(c.get("total", _MISSING))
    return UsageTotals(i, o, cr, cw, i + o + cr + cw, cost)
