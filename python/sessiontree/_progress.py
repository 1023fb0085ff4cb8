"""The one progress bar of the CLI and the fleet: ``tqdm`` on stderr, or nothing.

A light module (it imports tqdm only when a bar is made), so every command can use it
without loading the fleet."""

from __future__ import annotations

import sys
from typing import Callable


class _Bar:
    """A ``tqdm`` progress bar on stderr: ``bar(n)`` advances it by ``n`` items; ``close()``."""

    def __init__(self, total: int, unit: str, scale: bool = False, desc: str | None = None):
        from tqdm import tqdm  # type: ignore[import-untyped]

        self._bar = tqdm(
            total=total,
            desc=desc,
            unit=unit if scale else f" {unit}",
            unit_scale=scale,
            file=sys.stderr,
            dynamic_ncols=True,
            leave=True,
        )

    def __call__(self, n: int) -> None:
        self._bar.update(n)
        if self._bar.n >= (self._bar.total or 0):
            self.close()

    def close(self) -> None:
        self._bar.close()


def _noop(n: int) -> None:
    return None


def progress_bar(
    total: int, enabled: bool, unit: str = "sessions", *, scale: bool = False, desc: str | None = None
) -> Callable[[int], None]:
    """A progress bar of ``total`` items when ``enabled`` (tqdm, on stderr), else a no-op.
    ``bar(n)`` advances it by ``n``; it closes itself at ``total`` (or call its ``close()``,
    when it has one, to end it early). Without tqdm installed (it comes with the ``fleet``
    extra), no bar. ``scale``: SI prefixes (k, M, G) on the counts, for bytes; ``desc``: a
    word before the bar (which pass of a job it counts)."""
    if not enabled or total == 0:
        return _noop
    try:
        return _Bar(total, unit, scale, desc)
    except ImportError:  # pragma: no cover - the fleet extra brings tqdm
        return _noop


def close_bar(bar: Callable[[int], None]) -> None:
    """End ``bar`` (from :func:`progress_bar`) before its total, e.g. when ``--limit`` stops early."""
    close = getattr(bar, "close", None)
    if close is not None:
        close()


def stderr_is_terminal() -> bool:
    """True when standard error is a terminal (where progress bars go); False when it is closed."""
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


Bar = _Bar  # the public name, for the modules that re-export it (fleet/_engine)
