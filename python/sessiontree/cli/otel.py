"""``sessiontree otel``: sessions as OpenTelemetry GenAI traces (OTLP/JSON), over the public
:func:`sessiontree.otel.export`. Registered by :mod:`.app`."""

from __future__ import annotations

import argparse
from typing import Any


from .args import documented_parser

_OTEL_EPILOG = """Writes OUT as OTLP/JSON: one ExportTraceServiceRequest per line, as the OpenTelemetry
file exporter writes it (the Collector's otlpjsonfile receiver and Jaeger's UI upload read it).
One trace per session (its id derived from the session id, so a re-export gives the same
ids); spans follow the OpenTelemetry GenAI semantic conventions 1.41.0: invoke_agent per
session and per user turn, chat {model} per assistant message, execute_tool {name} per tool
call and bash execution, compaction and branch_summary spans, abandoned branches under
branch {fromId} spans linked to their fork point (docs/otel.md has the mapping).

--content none (default: no message text), scrubbed (secrets replaced by the scrub rules
first), full (gen_ai.input.messages / gen_ai.output.messages in the conventions' shape).

One JSON line per session on stdout as each is done (path, sessionId, traceId, spans, requests,
problems, error); with --json, one JSON document instead (output, content, sessions, written, failed,
spans, requests, problems and the rows; an error as {"error": true, "exit_code", "message"}). Bad
input (no timestamps, unknown types, usage that is not a number) still gives a valid trace;
each problem is listed and recorded on the trace's root span. OUT is written atomically (never
a partial file; never over a session read).

exit codes: 0 done; 1 some sessions could not be read (see their lines; the others are in
OUT); 2 bad options, no session found, OUT refused or not writable"""


def add_parsers(sub: Any) -> None:
    """Register ``otel`` on the CLI's subparsers."""
    p = documented_parser(
        sub,
        "otel",
        description="Export every session of SOURCE as an OpenTelemetry trace into OUT (sessiontree.otel.export).",
        epilog=_OTEL_EPILOG,
    )
    p.add_argument("source", metavar="SOURCE", nargs="+", help="file, directory, glob or URL (s3://...), as for stats")
    p.add_argument("-o", "--output", metavar="OUT.jsonl", required=True, help="the OTLP/JSON file to write")
    p.add_argument(
        "--content", choices=("none", "scrubbed", "full"), default="none", help="message content (default none)"
    )
    p.add_argument(
        "--engine", choices=("local", "ray"), default="local", help="where sessions are mapped (default local)"
    )
    p.add_argument("--address", metavar="ADDR", help="--engine ray: the cluster (default: a local one)")
    from .args import progress_flags

    progress_flags(p)
    p.add_argument("--json", action="store_true", help="one JSON document (the rows) instead of a line per session")


def run(args: argparse.Namespace) -> int:
    """Run ``otel``; returns the exit code."""
    from ..errors import SessionError
    from ..otel import export
    from .render import _OutputError, _write_out, json_line, os_error_text, print_failure, progress_wanted

    def _err(message: str) -> int:
        return print_failure(message, 2, args.json)

    def on_row(row: dict[str, Any]) -> None:  # each session's line as it is done (streamed)
        if not args.json:
            _write_out(json_line(row) + "\n", flush=True)

    try:
        rows = export(
            args.source,
            args.output,
            content=args.content,
            engine=args.engine,
            address=args.address,
            progress=progress_wanted(args),
            on_row=on_row,
        )
    except (BrokenPipeError, _OutputError):
        raise  # standard output failed under a row: the CLI's main says so (or stops quietly)
    except SessionError as exc:
        return _err(str(exc))
    except OSError as exc:
        return _err(os_error_text(exc))
    if not rows:
        return _err("no session found in " + " ".join(args.source) + f" ({args.output} holds no trace)")
    failed = sum(row["error"] is not None for row in rows)
    if args.json:
        from .render import json_document

        doc = {
            "output": args.output,
            "content": args.content,
            "sessions": len(rows),
            "written": len(rows) - failed,
            "failed": failed,
            "spans": sum(r["spans"] for r in rows),
            "requests": sum(r["requests"] for r in rows),
            "problems": sum(len(r["problems"]) + r["problemsDropped"] for r in rows),
            "rows": rows,
        }
        _write_out(json_document(doc) + "\n", flush=True)
    return 1 if failed else 0
