"""Scrubbing a whole store (issue 20): ``scrub_sessions`` and the scrubbed opening behind
``entries_table(scrub=True)``, over the public :mod:`sessiontree.scrub` API."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import SessionArgumentError, SessionError
from ..scrub import scrub_bytes, scrub_file
from ..writer import atomic_write
from ._sources import Item, resolve_source


def _relative(item: Item, base: str | None) -> str:
    """Where ``item`` goes below the output directory: its path below ``base`` (the items'
    common directory), without any ``..`` or absolute part (a hostile key cannot escape)."""
    p = item.key if item.fs is not None else os.path.abspath(item.path)
    p = str(p).replace("\\", "/")
    if base is not None and item.fs is None:
        p = os.path.relpath(p, base)
    parts = [x for x in p.split("/") if x not in ("", ".", "..")]
    return "/".join(parts) or "session.jsonl"


def scrub_sessions(
    source: Any,
    out_dir: str | os.PathLike,
    *,
    replay: str = "keep",
    header: bool = False,
    filesystem: Any = None,
) -> list[dict]:
    """Scrub every session of ``source`` (see :func:`resolve_source`) into ``out_dir``, keeping
    each file's path below the source directory (files and globs: below their common
    directory; objects: their key). Returns one
    row per session, in path order: ``path``, ``output``, ``found``, ``kinds`` (secrets per
    kind), ``replay_fields``, ``error`` (None, or why it was not written). Outputs are written
    atomically with the source's mode; nothing is written for a failed session."""
    items = resolve_source(source, filesystem=filesystem)
    local = [os.path.abspath(it.path) for it in items if it.fs is None]
    srcs = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if srcs and all(isinstance(x, (str, os.PathLike)) and os.path.isdir(x) for x in srcs):
        base: str | None = os.path.commonpath([os.path.abspath(x) for x in srcs])  # below the directories given
    else:
        base = os.path.commonpath([os.path.dirname(p) for p in local]) if local else None
    root = Path(out_dir)
    rows = []
    for it in items:
        dest = root / _relative(it, base)
        row: dict[str, Any] = {"path": it.path, "output": str(dest), "found": None, "kinds": None, "error": None}
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            if it.fs is not None:
                from ._rows import _read_object

                data, _, _ = _read_object(it, None)
                clean, report = scrub_bytes(data, header=header, replay=replay)
                atomic_write(dest, [clean])
            else:
                report = scrub_file(it.path, dest, header=header, replay=replay)
            row.update(found=report.found, kinds=report.kinds, replay_fields=report.replay_fields)
        except (OSError, SessionError) as exc:
            row["error"] = f"{type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
            row["output"] = None
        rows.append(row)
    return rows


__all__ = ["scrub_sessions", "SessionArgumentError"]
