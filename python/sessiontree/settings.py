"""Settings Pi reads from ``~/.pi/agent/settings.json`` that this library needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["CompactionSettings", "DEFAULT_COMPACTION_SETTINGS"]


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's ``CompactionSettings`` (the ``compaction`` block of settings.json).

    * ``enabled``: auto-compaction on/off (``shouldCompact`` is always False when off);
    * ``reserve_tokens``: compact when context tokens exceed ``context_window - reserve_tokens``;
    * ``keep_recent_tokens``: tokens of recent context a compaction keeps verbatim;
    * ``token_counter``: ``counter(message) -> int`` used by the cut-point search; None (the
      default) is Pi's chars/4 estimate, which the goldens use. A
      :class:`sessiontree.token_counter.TiktokenCounter` gives exact counts (cuts then differ
      from Pi's by design).

    Token counts are Pi's chars/4 estimate unless a counter is given. Defaults are Pi's
    ``DEFAULT_COMPACTION_SETTINGS`` (compaction.ts).

        >>> CompactionSettings(keep_recent_tokens=2000)
        CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=2000)
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int | float = 20000  # tokens (a counter may count in floats)
    token_counter: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False, compare=False)


#: Pi's defaults: ``{enabled: true, reserveTokens: 16384, keepRecentTokens: 20000}``.
DEFAULT_COMPACTION_SETTINGS = CompactionSettings()
