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

from ._jsjson import JS_UNDEFINED, js_usage_number
from .entries import entry_value
from .entry_types import USAGE_TYPES

__all__ = ["UsageTotals", "UsageAccumulator", "usage_totals_of_entries"]

#: the entry-type table's usage types other than ``message`` (whose usage sits in the message)
_USAGE_ENTRY_TYPES = tuple(t for t in USAGE_TYPES if t != "message")


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

    def to_pi(self) -> dict[str, Any]:
        """The sums as Pi's ``get_session_stats`` shows them (NaN becomes ``None``).

        ``{"tokens": {input, output, cacheRead, cacheWrite, total}, "cost"}``."""

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


class UsageAccumulator:
    """A running :class:`UsageTotals`.

    :meth:`add` entries (file order) as they come, read :meth:`totals` any time; the same sums,
    in the same order, as :func:`usage_totals_of_entries` over all of them.
    :meth:`sessiontree.Session.usage_totals` keeps one, so each call costs the entries appended
    since the last one."""

    __slots__ = ("input", "output", "cache_read", "cache_write", "cost", "count", "skip_missing", "_seen", "_carriers")

    def __init__(self, *, skip_missing: bool = False) -> None:
        """``skip_missing=False``: Pi's arithmetic (a missing or non-number field makes its
        sum NaN). ``skip_missing=True``: SQL's ``sum`` instead, for tables (the fleet's
        Arrow columns): a field that is missing or not a finite number adds nothing, and a
        sum that usages were added to but none gave a number is ``None`` in :meth:`totals`
        (with no usage at all, the sums are 0, as Pi's)."""
        self.input: float = 0
        self.output: float = 0
        self.cache_read: float = 0
        self.cache_write: float = 0
        self.cost: float = 0
        #: how many entries were added (a cursor for the caller)
        self.count = 0
        self.skip_missing = skip_missing
        #: which sums got a number (skip_missing): input, output, cacheRead, cacheWrite, cost
        self._seen = [False] * 5
        #: how many usages were added (skip_missing)
        self._carriers = 0

    def add(self, entries: Iterable[Any]) -> None:
        """Add the usage ``entries`` carry (entry dicts or :class:`~sessiontree.entries.Entry`)."""
        if self.skip_missing:
            self._add_skipping(entries)
            return
        i, o, cr, cw, cost = self.input, self.output, self.cache_read, self.cache_write, self.cost
        for entry in entries:
            usage = _carries_usage(entry_value(entry))
            if usage is None:
                continue
            i += js_usage_number(usage.get("input", JS_UNDEFINED))
            o += js_usage_number(usage.get("output", JS_UNDEFINED))
            cr += js_usage_number(usage.get("cacheRead", JS_UNDEFINED))
            cw += js_usage_number(usage.get("cacheWrite", JS_UNDEFINED))
            c = usage.get("cost")
            if isinstance(c, dict):
                cost += js_usage_number(c.get("total", JS_UNDEFINED))
        self.input, self.output, self.cache_read, self.cache_write, self.cost = i, o, cr, cw, cost

    def _add_skipping(self, entries: Iterable[Any]) -> None:
        sums = [self.input, self.output, self.cache_read, self.cache_write, self.cost]
        seen = self._seen
        for entry in entries:
            usage = _carries_usage(entry_value(entry))
            if usage is None:
                continue
            self._carriers += 1
            c = usage.get("cost")
            values = (
                usage.get("input", JS_UNDEFINED),
                usage.get("output", JS_UNDEFINED),
                usage.get("cacheRead", JS_UNDEFINED),
                usage.get("cacheWrite", JS_UNDEFINED),
                c.get("total", JS_UNDEFINED) if isinstance(c, dict) else JS_UNDEFINED,
            )
            for k, v in enumerate(values):
                if v is JS_UNDEFINED:
                    continue
                n = js_usage_number(v)
                if math.isfinite(n):
                    sums[k] += n
                    seen[k] = True
        self.input, self.output, self.cache_read, self.cache_write, self.cost = sums

    def totals(self) -> UsageTotals:
        """The sums so far (tokens; ``cost`` in dollars).

        ``total`` is input + output + cache reads + cache writes, as Pi's ``get_session_stats``
        reports it. With ``skip_missing``, a sum the usages added gave no number to is ``None``
        (``total``: the sum of the four that are not)."""
        i, o, cr, cw = self.input, self.output, self.cache_read, self.cache_write
        if self.skip_missing:
            parts = [
                v if seen or not self._carriers else None for v, seen in zip((i, o, cr, cw, self.cost), self._seen)
            ]
            tokens = [v for v in parts[:4] if v is not None]
            total = sum(tokens) if tokens else None
            return UsageTotals(parts[0], parts[1], parts[2], parts[3], total, parts[4])  # type: ignore[arg-type]
        return UsageTotals(i, o, cr, cw, i + o + cr + cw, self.cost)


def usage_totals_of_entries(entries: Iterable[Any], *, skip_missing: bool = False) -> UsageTotals:
    """Sum the usage of ``entries`` (file order) by the rules of this module.

    ``entries``: entry dicts or :class:`~sessiontree.entries.Entry`; ``skip_missing``: see
    :class:`UsageAccumulator`.

        >>> u = {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}
        >>> usage_totals_of_entries([{"type": "usage", "usage": u},
        ...     {"type": "message", "message": {"role": "assistant", "usage": u}}]).to_pi()
        {'tokens': {'input': 20, 'output': 4, 'cacheRead': 0, 'cacheWrite': 0, 'total': 24}, 'cost': 1.0}
    """
    acc = UsageAccumulator(skip_missing=skip_missing)
    acc.add(entries)
    return acc.totals()
