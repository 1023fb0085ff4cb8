"""Session trees as OpenTelemetry GenAI traces: the store-level export (see :mod:`.trace`).

:mod:`sessiontree.otel.trace` maps one session to OTLP/JSON requests (``Session.to_otlp`` uses
it); this module exports every session of a source (files, directories, globs, URLs, as for
:func:`sessiontree.fleet.stats`) into one file, locally or on Ray.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import OutputPathError, SessionArgumentError, SessionError, SessionTreeError
from ..writer import atomic_writer
from .trace import (
    CONTENT_MODES,
    SCHEMA_URL,
    SEMCONV_VERSION,
    OtelReport,
    check_content,
    session_chunks,
    session_requests,
    span_id_of,
    to_otlp,
    trace_id_of,
    write_session,
)

from ..paths import FileSystemArg, SourceArg

if TYPE_CHECKING:
    from ..session import Session

__all__ = [
    "CONTENT_MODES",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "OtelReport",
    "export",
    "session_requests",
    "span_id_of",
    "to_otlp",
    "trace_id_of",
    "write_session",
]


def _export_item(
    item: Any, content: str, max_bytes: int | None
) -> tuple[OtelReport, list[bytes] | None, Session | None]:
    from ..fleet._rows import Options, open_item

    rep = OtelReport(path=item.path)
    try:
        s, _size, _mtime = open_item(item, Options(max_bytes=max_bytes))
    except (OSError, SessionTreeError) as exc:  # the fleet's unopenable item too
        rep.error = str(exc)
        return rep, None, None
    return rep, None, s


def _ray_one(items: Sequence[Any], opts: Any) -> list[Any]:
    """Ray's per-batch function: each session's lines (held in memory) and report."""
    content, max_bytes = opts
    rows = []
    for it in items:
        rep, _, s = _export_item(it, content, max_bytes)
        lines: list[bytes] = []
        if s is not None:
            try:
                lines = list(session_chunks(s, content=content, report=rep))
            except SessionError as exc:
                rep.error = f"{type(exc).__name__}: {exc}"
                lines = []
            finally:
                s.close()
        rows.append((rep.to_json(), b"".join(lines)))
    return rows


def export(
    source: SourceArg,
    out: str | os.PathLike[str],
    *,
    content: str = "none",
    engine: str = "local",
    filesystem: FileSystemArg | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    max_bytes: int | None = None,
    progress: bool = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Export every session of ``source`` (a file, directory, glob, URL or a list of them, as
    for :func:`sessiontree.fleet.stats`) as traces into one OTLP/JSON file ``out``, written
    atomically. Returns one row per session (:meth:`OtelReport.to_json`: ``path``,
    ``sessionId``, ``traceId``, ``spans``, ``requests``, ``problems``, ``error``); a session
    that cannot be opened is a row with its ``error`` and no spans.

    ``engine="local"`` streams each session in this process (memory bounded per session);
    ``"ray"`` maps the sessions on a Ray cluster (``address``; None: a local one), each task
    returning its session's lines, which this process writes in source order. ``on_row(row)``
    is called with each row as soon as its session's lines are written (in source order, before
    ``out`` is renamed into place: a caller can print rows while later sessions still run).

    Raises:
        SessionArgumentError: ``content`` or ``engine`` is not known.
        OutputPathError, OSError: ``out`` cannot be written (nothing is written).
    """
    check_content(content)
    if engine not in ("local", "ray"):
        raise SessionArgumentError(f"engine must be local or ray, not {engine!r}")
    from .._progress import progress_bar as _progress_bar
    from ..fleet._engine import run_ray
    from ..fleet._sources import resolve_source

    items = resolve_source(source, filesystem=filesystem)
    rows: list[dict[str, Any]] = []
    local = [it.path for it in items if it.fs is None]
    out_path = Path(out)
    for p in local:
        try:
            same = os.path.samefile(p, out_path)
        except OSError:  # one of them does not exist (yet)
            same = False
        if same:
            raise OutputPathError(
                errno.EEXIST, "is one of the sessions read: write the trace elsewhere (nothing written)", str(out)
            )
    with atomic_writer(out_path, source=local[0] if len(local) == 1 else None) as fh:
        if engine == "ray":
            for rep_json, data in run_ray(
                _ray_one, items, (content, max_bytes), address=address, num_cpus=num_cpus, progress=progress
            ):
                fh.write(data)
                rows.append(rep_json)
                if on_row is not None:
                    on_row(rep_json)
        else:
            tick = _progress_bar(len(items), progress)
            for it in items:
                rep, _, s = _export_item(it, content, max_bytes)
                if s is not None:
                    try:
                        for data in session_chunks(s, content=content, report=rep):
                            fh.write(data)
                    except SessionError as exc:  # the lines written are whole requests: they stay
                        rep.error = f"{type(exc).__name__}: {exc}"
                    finally:
                        s.close()
                rows.append(rep.to_json())
                if on_row is not None:
                    on_row(rows[-1])
                tick(1)
    return rows
