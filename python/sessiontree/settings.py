"""Settings Pi reads from ``~/.pi/agent/settings.json`` that this library needs."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompactionSettings", "DEFAULT_COMPACTION_SETTINGS"]


@dataclass(frozen=True)
class CompactionSettings:
    """Pi's ``CompactionSettings`` (the ``compaction`` block of settings.json).

    * ``enabled``: auto-compaction on/off (``shouldCompact`` is always False when off);
    * ``reserve_tokens``: compact when context tokens exceed ``context_window - reserve_tokens``;
    * ``keep_recent_tokens``: tokens of recent context a compaction keeps verbatim.

    Token counts are Pi's chars/4 estimate. Defaults are Pi's
    ``DEFAULT_COMPACTION_SETTINGS`` (compaction.ts).

        >>> CompactionSettings(keep_recent_tokens=2000)
        CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=2000)
    """

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


#: Pi's defaults: ``{enabled: true, reserveTokens: 16384, keepRecentTokens: 20000}``.
DEFAULT_COMPACTION_SETTINGS = CompactionSettings()
