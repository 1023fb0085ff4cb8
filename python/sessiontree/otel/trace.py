"""Session trees as OpenTelemetry GenAI traces, written as OTLP/JSON (one request per line).

The output is what ``opentelemetry-exporter-otlp-json-file`` writes and the Collector's
``otlpjsonfile`` receiver and Jaeger's UI upload read: one ``ExportTraceServiceRequest`` per
line in OTLP/JSON (camelCase keys, trace and span ids as lowercase hex, 64-bit integers as
decimal strings, enums as integers). It follows the GenAI semantic conventions
:data:`SEMCONV_VERSION` (``gen_ai.*`` names and types of that release's registry; the
``schemaUrl`` says which); everything of ours is under ``sessiontree.*``.

The mapping (``docs/otel.md`` has the table):

* one trace per session, its id the first 16 bytes of SHA-256 over the session id; a span's id
  the first 8 bytes of SHA-256 over the session id and the entry id (and the tool call id for a
  tool call): a re-export gives the same ids;
* a root ``invoke_agent`` span per session, an ``invoke_agent`` span per user message (a turn);
* ``chat {model}`` per assistant message (usage, finish reasons, cost under ``sessiontree.cost.*``),
  ``execute_tool {name}`` per tool call (child of its chat span, ending at its result) and per
  ``bashExecution`` message; ``compaction`` and ``branch_summary`` spans;
* labels, model and thinking-level changes (and the other entries without a span) as span events
  of the span they fall in;
* entries off the active path (the leaf's branch) under a ``branch {fromId}`` span that links to
  the fork point's span; ``sessiontree.active_path`` on every span;
* message content: ``none`` (default), ``scrubbed`` (through :mod:`sessiontree.scrub`'s rules
  first) or ``full`` (``gen_ai.input.messages``, ``gen_ai.output.messages`` in the conventions'
  JSON shape).

The mapping is the core's (``rust/src/otel``, through :meth:`~sessiontree.Session.otel_feed`):
this module orchestrates it. It streams: entries are read and mapped in batches of
:data:`BATCH` with the GIL released while mapping, spans are written as they are made, and what
is kept per entry is a few fixed-size numbers (its group, time and flags; its parent in the
content modes: 13 or 17 bytes) and a small record per turn: memory grows with the entry count,
not with the file. Bad input (no
timestamps, unknown types, usage that is not a number) still gives a valid trace; each problem
is recorded (:attr:`OtelReport.problems`, and as a ``sessiontree.problem`` event on the root
span), never raised.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import orjson

from ..entries import otel_span_id, otel_trace_id
from ..errors import SessionArgumentError
from ..writer import atomic_writer

if TYPE_CHECKING:
    from ..session import Session

__all__ = [
    "CONTENT_MODES",
    "SEMCONV_VERSION",
    "SCHEMA_URL",
    "OtelReport",
    "session_chunks",
    "session_requests",
    "write_session",
    "to_otlp",
    "check_content",
    "span_id_of",
    "trace_id_of",
]

#: The GenAI semantic conventions implemented: the last release of
#: ``open-telemetry/semantic-conventions`` that holds the ``gen_ai`` registry
#: (``model/gen-ai/registry.yaml``; later releases moved it to ``semantic-conventions-genai``).
SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
CONTENT_MODES = ("none", "scrubbed", "full")
#: Spans per ``ExportTraceServiceRequest`` line.
SPANS_PER_REQUEST = 512
#: Entries per batch of the mapping (content modes prune the input messages kept at the end of
#: each).
BATCH = 2048
#: Entries read and mapped per call into the core (what is held at once: their lines and the
#: request lines they finish).
READ = 512
#: Events kept on one span; more are counted in ``droppedEventsCount``.
MAX_EVENTS = 256
#: Problems kept per session (and as events on the root span); more are counted.
MAX_PROBLEMS = 200
#: Characters of one content attribute value (longer ones are cut, with a problem recorded).
MAX_CONTENT_CHARS = 1 << 20


@dataclass
class OtelReport:
    """What one session's export did: ``spans`` and ``requests`` (lines) written, and its
    ``problems`` (strings, at most :data:`MAX_PROBLEMS`; ``problems_dropped`` more)."""

    path: str | None = None
    session_id: str | None = None
    trace_id: str | None = None
    spans: int = 0
    requests: int = 0
    problems: list[str] = field(default_factory=list)
    problems_dropped: int = 0
    error: str | None = None

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.problems_dropped += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sessionId": self.session_id,
            "traceId": self.trace_id,
            "spans": self.spans,
            "requests": self.requests,
            "problems": list(self.problems),
            "problemsDropped": self.problems_dropped,
            "error": self.error,
        }


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(v: Any) -> str | None:
    """``v`` when a string (each lone surrogate as U+FFFD, as the index keeps ids), else None."""
    return _SURROGATE.sub("\ufffd", v) if isinstance(v, str) else None


def trace_id_of(session_id: str) -> str:
    """The trace id (32 hex digits) of a session: SHA-256 over ``"trace"`` and the session id."""
    return otel_trace_id(_text(session_id) or "")


def span_id_of(session_id: str, *parts: str) -> str:
    """A span id (16 hex digits): SHA-256 over ``"span"``, the session id and ``parts``."""
    return otel_span_id(_text(session_id) or "", [_text(p) or "" for p in parts])


def _dumps(value: Any) -> bytes:
    """A migrated entry as a JSON line for the core (orjson; ``str`` for what it cannot write)."""
    try:
        return orjson.dumps(value, default=str)
    except (orjson.JSONEncodeError, TypeError):
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8", "replace")


_VERSION: str | None = None


def _version() -> str:
    global _VERSION
    if _VERSION is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _VERSION = version("sessiontree")
        except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
            _VERSION = "0"
    return _VERSION


def check_content(content: str) -> None:
    if content not in CONTENT_MODES:
        raise SessionArgumentError(f"content must be one of {', '.join(CONTENT_MODES)}, not {content!r}")


def _fill(rep: OtelReport, m: Any) -> None:
    sid, trace, spans, requests, problems, dropped = m.report()
    rep.session_id, rep.trace_id, rep.spans, rep.requests = sid, trace, spans, requests
    rep.problems, rep.problems_dropped = list(problems), dropped


def session_requests(session: Session, *, content: str = "none", report: OtelReport | None = None) -> Iterator[bytes]:
    """The OTLP/JSON lines (``bytes``, each ending in ``\\n``) of one session's trace, made as
    they are consumed (mapped by the core, a batch of :data:`BATCH` entries at a time).
    ``report`` (an :class:`OtelReport`) collects the counts and problems.

    Raises:
        SessionArgumentError: ``content`` is not one of :data:`CONTENT_MODES`.
        SessionFileChangedError: the file changed under the index meanwhile.
    """
    for data in session_chunks(session, content=content, report=report):
        yield from data.splitlines(keepends=True)


def session_chunks(session: Session, *, content: str = "none", report: OtelReport | None = None) -> Iterator[bytes]:
    """:func:`session_requests`' lines as the core hands them over: ``bytes`` of whole lines
    (one or more, or none), each chunk what one call into the core finished. What a writer
    wants (no split into lines and no write per line); same errors."""
    check_content(content)
    rep = report if report is not None else OtelReport()
    s = session
    n = len(s)
    head = s.header
    sid = s.session_id
    m = s.otel_mapper(
        session_id=_text(sid) or None,
        fallback_id=_text(str(s.source_name or "session")) or "session",
        cwd=_text(head.get("cwd")),
        parent_session=_text(head.get("parentSession")),
        timestamp=_text(head.get("timestamp")),
        session_name=_text(s.session_name),
        path=_text(rep.path),
        version=_version(),
        content=content,
        dups=s.entry_count() != n,
    )
    # a legacy file's entries are migrated here (the one home of migration) and handed over as lines
    migrate = s.needs_migration
    for lo in range(0, n, READ):
        hi = min(n, lo + READ)
        lines = [_dumps(r) for r in s.raw_values(range(lo, hi))] if migrate else None
        data = s.otel_feed(m, lo, hi, lines)
        _fill(rep, m)
        yield data
    for k in range(m.chunks()):
        turns = m.chunk_turns(k) if migrate else []
        data = s.otel_finish_chunk(m, k, [_dumps(r) for r in s.raw_values(turns)] if turns else None)
        _fill(rep, m)
        yield data
    data = m.finish_root()
    _fill(rep, m)
    yield data


def write_session(session: Session, fh: Any, *, content: str = "none", path: str | None = None) -> OtelReport:
    """Write one session's trace to the binary file object ``fh``; its :class:`OtelReport`."""
    rep = OtelReport(path=path if path is not None else (str(session.path) if session.path else session.source_name))
    for data in session_chunks(session, content=content, report=rep):
        fh.write(data)
    return rep


def to_otlp(session: Session, out: str | os.PathLike[str], *, content: str = "none") -> OtelReport:
    """:meth:`Session.to_otlp`: the session's trace written to ``out`` atomically."""
    check_content(content)
    src = session.path
    with atomic_writer(out, source=src) as fh:
        return write_session(session, fh, content=content)
