"""The Python mapping of sessions to OTLP/JSON, kept as the test oracle of the core's
(``rust/src/otel``): ``tests/otel/test_otel_parity.py`` checks that both give the same lines
(JSON-equal, content attributes parsed) over the corpus, the converted fixtures and generated
trees, in every content mode.

It is the mapping as it was written in Python first (``sessiontree.otel.trace`` before the
core took it over), with the two rules the core added: integers outside the 64-bit range
(usage, ``tokensBefore``, exit codes) are a problem, not a value no OTLP reader can parse.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from typing import TYPE_CHECKING, Any, Callable, Iterator

import orjson

from sessiontree._jsjson import js_date_parse
from sessiontree.errors import SessionError
from sessiontree.otel.trace import (
    BATCH,
    MAX_CONTENT_CHARS,
    MAX_EVENTS,
    SCHEMA_URL,
    SPANS_PER_REQUEST,
    OtelReport,
    _version,
    check_content,
    span_id_of,
    trace_id_of,
)

if TYPE_CHECKING:
    from sessiontree.session import Session

_INTERNAL, _CLIENT = 1, 3  # Span.SpanKind
_STATUS_ERROR = 2
_FINISH = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error", "aborted": "aborted"}
_USAGE = (
    ("input", "gen_ai.usage.input_tokens"),
    ("output", "gen_ai.usage.output_tokens"),
    ("cacheRead", "gen_ai.usage.cache_read.input_tokens"),
    ("cacheWrite", "gen_ai.usage.cache_creation.input_tokens"),
    ("totalTokens", "sessiontree.usage.total_tokens"),
)
_COST = ("input", "output", "cacheRead", "cacheWrite", "total")
_COST_KEY = {"cacheRead": "cache_read", "cacheWrite": "cache_write"}
_EVENT_TYPES = {"label", "model_change", "thinking_level_change", "session_info", "custom", "context_edit"}
_ROOT = -1
_UNSEEN = -2
_I64 = 1 << 63
_SURROGATE = re.compile("[\ud800-\udfff]")


def _av(value: Any) -> dict[str, Any]:
    t = type(value)
    if t is str:
        return {"stringValue": value}
    if t is bool:
        return {"boolValue": value}
    if t is int:
        return {"intValue": str(value)}
    if t is float:
        return {"doubleValue": value}
    if t is list or t is tuple:
        return {"arrayValue": {"values": [_av(v) for v in value]}}
    return {"stringValue": str(value)}


def _attrs(pairs: dict[str, Any]) -> list[Any]:
    return [{"key": k, "value": _av(v)} for k, v in pairs.items() if v is not None]


def _dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (orjson; a string holding a lone surrogate, which UTF-8
    cannot hold, through ``json`` with the surrogate replaced)."""
    try:
        return orjson.dumps(value, default=str)
    except (orjson.JSONEncodeError, TypeError):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")  # each lone surrogate as U+FFFD, as the core reads it


def _nanos(ms: float) -> str:
    return str(int(ms * 1_000_000))


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


# --- content in the conventions' JSON shape ---


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _parts(content: Any) -> list[Any]:
    """GenAI message parts of a Pi message content (a string or a list of blocks)."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    out: list[Any] = []
    if not isinstance(content, list):
        return out
    for b in content:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            out.append({"type": "text", "content": _str(b.get("text")) or ""})
        elif t == "thinking":
            out.append({"type": "reasoning", "content": _str(b.get("thinking")) or ""})
        elif t == "toolCall":
            out.append(
                {
                    "type": "tool_call",
                    "id": _str(b.get("id")),
                    "name": _str(b.get("name")) or "",
                    "arguments": b.get("arguments"),
                }
            )
        elif t == "image":
            out.append(
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": _str(b.get("mimeType")),
                    "content": _str(b.get("data")) or "",
                }
            )
        else:
            out.append({"type": str(t), "content": _dumps(b).decode()})
    return out


def _input_message(msg: dict[str, Any]) -> dict[str, Any] | None:
    """A context message (user, toolResult, bashExecution, custom, summaries) as a GenAI input message."""
    role = msg.get("role")
    if role == "user":
        return {"role": "user", "parts": _parts(msg.get("content"))}
    if role == "toolResult":
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": _str(msg.get("toolCallId")),
                    "response": _text_of(msg.get("content")),
                }
            ],
        }
    if role == "bashExecution":
        return {
            "role": "user",
            "parts": [{"type": "text", "content": f"$ {msg.get('command')}\n{msg.get('output') or ''}"}],
        }
    if role in ("custom", "branchSummary", "compactionSummary"):
        text = msg.get("summary") if role != "custom" else _text_of(msg.get("content"))
        return {"role": "user", "parts": [{"type": "text", "content": _str(text) or ""}]}
    return None


class _Mapper:
    """The state of one session's export (see the module docs)."""

    def __init__(self, s: Session, content: str, report: OtelReport, write: Callable[[bytes], Any]):
        self.s = s
        self.content = content
        self.report = report
        self.write = write
        sid = s.session_id
        if not isinstance(sid, str) or not sid:
            report.problem("the header has no string session id: the trace id is derived from the file name")
            sid = str(s.source_name or "session")
        self.sid = sid
        self.trace = trace_id_of(sid)
        report.session_id, report.trace_id = sid, self.trace
        self.root_span = span_id_of(sid)
        self.pending: list[Any] = []
        n = len(s)
        self.n = n
        self.parent = array("q", [_ROOT]) * n
        self.group = array("q", [_UNSEEN]) * n  # the group (turn/branch) position its children go under
        self.time = array("d", [math.nan]) * n
        self.own = bytearray(8 * n)  # the span id (8 bytes) that stands for the entry
        self.active = bytearray(n)
        #: turn groups by their user message's position, branch groups by n + the position of the
        #: branch's first entry: [span, parent group, name, start, end, attrs, links, events, dropped, active,
        #: parent span]
        self.groups: dict[int, list[Any]] = {}
        self.tools: dict[str, list[Any]] = {}  # tool call id -> pending span parts
        self.recent: dict[int, dict[str, Any]] = {}  # content modes: position -> input message
        self.root_events: list[Any] = []
        self.dups = s.entry_count() != self.n  # repeated ids: spans of the earlier ones also name their position
        self.cur: tuple[str, ...] = ()
        self.root_dropped = 0
        head_ts = s.header.get("timestamp")
        head_ms = js_date_parse(head_ts) if isinstance(head_ts, str) else math.nan
        self.start_ms = head_ms if math.isfinite(head_ms) else math.nan
        self.end_ms = self.start_ms
        try:
            for p in s.branch_positions():
                self.active[p] = 1
        except SessionError as exc:
            report.problem(f"the active path could not be walked: {exc}")

    # --- output ---

    def emit(self, span: dict[str, Any]) -> None:
        self.pending.append(span)
        self.report.spans += 1
        if len(self.pending) >= SPANS_PER_REQUEST:
            self.flush()

    def resource(self) -> dict[str, Any]:
        s = self.s
        return {
            "attributes": _attrs(
                {
                    "service.name": "sessiontree",
                    "sessiontree.session.id": self.sid,
                    "sessiontree.session.cwd": _str(s.header.get("cwd")),
                    "sessiontree.session.path": self.report.path,
                    "sessiontree.session.parent": _str(s.header.get("parentSession")),
                }
            )
        }

    def flush(self) -> None:
        if not self.pending:
            return
        req = {
            "resourceSpans": [
                {
                    "resource": self.resource(),
                    "scopeSpans": [
                        {
                            "scope": {"name": "sessiontree.otel", "version": _version()},
                            "spans": self.pending,
                            "schemaUrl": SCHEMA_URL,
                        }
                    ],
                    "schemaUrl": SCHEMA_URL,
                }
            ]
        }
        self.write(_dumps(req) + b"\n")
        self.report.requests += 1
        self.pending = []

    def span(
        self,
        span_id: str,
        parent: str | None,
        name: str,
        kind: int,
        start: float,
        end: float,
        attrs: dict[str, Any],
        *,
        active: bool,
        events: list[Any] | None = None,
        dropped_events: int = 0,
        links: list[Any] | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        if not math.isfinite(start):
            start = end
        if not math.isfinite(end):
            end = start
        if not math.isfinite(start):
            start = end = 0.0
        if end < start:
            end = start
        attrs = {"gen_ai.conversation.id": self.sid, **attrs, "sessiontree.active_path": active}
        out: dict[str, Any] = {"traceId": self.trace, "spanId": span_id}
        if parent:
            out["parentSpanId"] = parent
        out.update(
            name=name, kind=kind, startTimeUnixNano=_nanos(start), endTimeUnixNano=_nanos(end), attributes=_attrs(attrs)
        )
        if events:
            out["events"] = events
        if dropped_events:
            out["droppedEventsCount"] = dropped_events
        if links:
            out["links"] = links
        out["status"] = {"code": _STATUS_ERROR, "message": error} if error is not None else {}
        return out

    # --- helpers ---

    def _content_value(self, value: Any, what: str) -> str:
        text = _dumps(value).decode()
        if len(text) > MAX_CONTENT_CHARS:
            self.report.problem(f"{what}: content of {len(text)} characters cut to {MAX_CONTENT_CHARS}")
            text = _dumps([{"role": "user", "parts": [{"type": "text", "content": text[:MAX_CONTENT_CHARS]}]}]).decode()
        return text

    def _group_span(self, g: int) -> str:
        return self.root_span if g < 0 else self.groups[g][0]

    def _touch(self, g: int, ms: float) -> None:
        """Extend group ``g`` and its ancestors (and the root) to ``ms``."""
        if not math.isfinite(ms):
            return
        if not (self.end_ms >= ms):
            self.end_ms = ms
        if not (self.start_ms <= ms):
            self.start_ms = ms
        hops = 0
        while g >= 0 and hops < 8:
            rec = self.groups[g]
            if not (rec[4] >= ms):
                rec[4] = ms
            if not (rec[3] <= ms):
                rec[3] = ms
            g = rec[1]
            hops += 1

    def _event(self, g: int, ms: float, name: str, attrs: dict[str, Any]) -> None:
        ev = {
            "timeUnixNano": _nanos(
                ms if math.isfinite(ms) else (self.start_ms if math.isfinite(self.start_ms) else 0.0)
            ),
            "name": name,
            "attributes": _attrs(attrs),
        }
        if g < 0:
            if len(self.root_events) < MAX_EVENTS:
                self.root_events.append(ev)
            else:
                self.root_dropped += 1
            return
        rec = self.groups[g]
        if len(rec[7]) < MAX_EVENTS:
            rec[7].append(ev)
        else:
            rec[8] += 1

    def _usage(self, usage: Any, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if usage is None:
            return out
        if not isinstance(usage, dict):
            self.report.problem(f"{where}: usage is not an object")
            return out
        for key, name in _USAGE:
            v = usage.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                self.report.problem(f"{where}: usage.{key} is not a finite number ({type(v).__name__})")
                continue
            if not -_I64 <= int(v) < _I64:
                self.report.problem(f"{where}: usage.{key} is out of the 64-bit range")
                continue
            out[name] = int(v)
        cost = usage.get("cost")
        if isinstance(cost, dict):
            for key in _COST:
                v = cost.get(key)
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    self.report.problem(f"{where}: usage.cost.{key} is not a finite number ({type(v).__name__})")
                    continue
                out[f"sessiontree.cost.{_COST_KEY.get(key, key)}"] = float(v)
        elif cost is not None:
            self.report.problem(f"{where}: usage.cost is not an object")
        return out

    # --- the walk ---

    def entry(self, p: int, eid: Any, etype: Any, parent: int | None, raw: Any) -> None:
        rep = self.report
        if not isinstance(eid, str):
            rep.problem(f"entry {p + 1}: no string id (its span id is derived from its position)")
            eid = f"#{p}"
            self.cur = (eid, "@noid")
        elif self.dups and self.s.entry_index(eid) != p:  # a repeated id: the earlier ones by position
            self.cur = (eid, f"@{p}")
        else:
            self.cur = (eid,)
        where = f"entry {eid}"
        if not isinstance(raw, dict):
            raw = {}
        ts = raw.get("timestamp")
        ms = js_date_parse(ts) if isinstance(ts, str) else math.nan
        if not math.isfinite(ms):
            msg = raw.get("message")
            alt = msg.get("timestamp") if isinstance(msg, dict) else None
            ms = (
                float(alt)
                if isinstance(alt, (int, float)) and not isinstance(alt, bool) and math.isfinite(alt)
                else math.nan
            )
            rep.problem(f"{where}: no valid timestamp" + ("" if math.isnan(ms) else " (the message's is used)"))
        # the parent's time, group and span
        if parent is not None and not (0 <= parent < self.n):
            parent = None
        if parent is not None and self.group[parent] == _UNSEEN:
            rep.problem(f"{where}: its parent comes later in the file (placed under the root)")
            parent = None
        if parent is not None:
            self.parent[p] = parent
            g = self.group[parent]
            start = self.time[parent]
            if math.isnan(ms):
                ms = start
        else:
            g = _ROOT
            start = self.start_ms
        if math.isnan(start):
            start = ms
        self.time[p] = ms
        active = bool(self.active[p])
        own = self._group_span(g)
        # an abandoned branch starts where the active path (or the root) is left
        if not active and (parent is None or self.active[parent]):
            # the fork point's span (no fork point: a second root, linked to the session's span)
            fork = self.root_span if parent is None else self.own[8 * parent : 8 * parent + 8].hex()
            from_id = self._id_of(parent) if parent is not None else "root"
            bspan = span_id_of(self.sid, *self.cur, "branch")
            links = (
                [{"traceId": self.trace, "spanId": fork, "attributes": _attrs({"sessiontree.link": "fork_point"})}]
                if fork
                else []
            )
            key = self.n + p
            self.groups[key] = [
                bspan,
                g,
                f"branch {from_id}",
                start,
                ms,
                {"sessiontree.branch.from_id": from_id},
                links,
                [],
                0,
                False,
                own,
            ]
            g = key
            own = bspan
        self._touch(g, ms)
        span_here = None
        if etype == "message":
            msg = raw.get("message")
            role = msg.get("role") if isinstance(msg, dict) else None
            if not isinstance(msg, dict):
                rep.problem(f"{where}: a message entry without a message object")
            elif role == "user":
                span_here = span_id_of(self.sid, *self.cur)
                attrs: dict[str, Any] = {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "pi",
                    "sessiontree.entry.id": eid,
                }
                if self.content != "none":  # the turn's own content is read again when it is written
                    im = _input_message(msg)
                    if im:
                        self.recent[p] = im
                self.groups[p] = [span_here, g, "invoke_agent pi", ms, ms, attrs, [], [], 0, active, own]
                self._touch(p, ms)
                g = p
            elif role == "assistant":
                span_here = self.chat(p, eid, msg, g, own, start, ms, active, parent)
            elif role == "toolResult":
                self.tool_result(p, eid, msg, g, own, start, ms, active)
                if self.content != "none":
                    self.recent[p] = _input_message(msg) or {}
            elif role == "bashExecution":
                span_here = span_id_of(self.sid, *self.cur)
                code = msg.get("exitCode")
                if isinstance(code, int) and not -_I64 <= code < _I64:
                    code = None
                err = None
                if msg.get("cancelled") is True:
                    err = "cancelled"
                elif isinstance(code, int) and not isinstance(code, bool) and code != 0:
                    err = f"exit code {code}"
                attrs = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "bash",
                    "gen_ai.tool.type": "extension",
                    "sessiontree.entry.id": eid,
                    "sessiontree.bash.exit_code": code
                    if isinstance(code, int) and not isinstance(code, bool)
                    else None,
                }
                if self.content != "none":
                    attrs["gen_ai.tool.call.arguments"] = _dumps({"command": msg.get("command")}).decode()
                    attrs["gen_ai.tool.call.result"] = self._content_value(msg.get("output"), where)
                    self.recent[p] = _input_message(msg) or {}
                self.emit(
                    self.span(span_here, own, "execute_tool bash", _INTERNAL, ms, ms, attrs, active=active, error=err)
                )
            else:
                if self.content != "none":
                    im = _input_message(msg)
                    if im:
                        self.recent[p] = im
                self._event(
                    g,
                    ms,
                    f"sessiontree.message.{role}" if isinstance(role, str) else "sessiontree.message",
                    {"sessiontree.entry.id": eid},
                )
        elif etype in ("compaction", "branch_summary"):
            span_here = self.summary(p, eid, etype, raw, own, start, ms, active)
        elif etype == "custom_message":
            self._event(
                g,
                ms,
                "sessiontree.custom_message",
                {"sessiontree.entry.id": eid, "sessiontree.custom_type": _str(raw.get("customType"))},
            )
        elif etype in _EVENT_TYPES:
            attrs = {"sessiontree.entry.id": eid}
            if etype == "label":
                attrs.update(
                    {
                        "sessiontree.label.target_id": _str(raw.get("targetId")),
                        "sessiontree.label": _str(raw.get("label")),
                    }
                )
            elif etype == "model_change":
                attrs.update(
                    {
                        "sessiontree.model.provider": _str(raw.get("provider")),
                        "sessiontree.model.id": _str(raw.get("modelId")),
                    }
                )
            elif etype == "thinking_level_change":
                attrs["sessiontree.thinking_level"] = _str(raw.get("thinkingLevel"))
            elif etype == "session_info":
                attrs["sessiontree.session.name"] = _str(raw.get("name"))
            elif etype == "custom":
                attrs["sessiontree.custom_type"] = _str(raw.get("customType"))
            self._event(g, ms, f"sessiontree.{etype}", attrs)
        else:
            rep.problem(f"{where}: unknown entry type {etype!r} (kept as an event)")
            self._event(
                g, ms, "sessiontree.entry", {"sessiontree.entry.id": eid, "sessiontree.entry.type": _str(etype)}
            )
        self.group[p] = g
        sid8 = bytes.fromhex(span_here or (self.groups[g][0] if g >= 0 else self.root_span))
        self.own[8 * p : 8 * p + 8] = sid8

    def _id_of(self, p: int) -> str:
        i = self.s.entry_table([p]).id[0]
        return i if isinstance(i, str) else f"#{p}"

    def chat(
        self,
        p: int,
        eid: str,
        msg: dict[str, Any],
        g: int,
        own: str,
        start: float,
        ms: float,
        active: bool,
        parent: int | None,
    ) -> str:
        span_id = span_id_of(self.sid, *self.cur)
        model = _str(msg.get("model"))
        provider = _str(msg.get("provider"))
        stop = msg.get("stopReason")
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": _str(msg.get("responseModel")) or model,
            "gen_ai.response.id": _str(msg.get("responseId")),
            "gen_ai.response.finish_reasons": [_FINISH.get(stop, stop)] if isinstance(stop, str) else None,
            "sessiontree.entry.id": eid,
            "sessiontree.api": _str(msg.get("api")),
        }
        attrs.update(self._usage(msg.get("usage"), f"entry {eid}"))
        if self.content != "none":
            inputs: list[Any] = []
            q, hops = parent, 0
            while q is not None and q in self.recent and hops < 64:
                inputs.append(self.recent[q])
                q = self.parent[q] if self.parent[q] >= 0 else None
                hops += 1
            inputs = [m for m in reversed(inputs) if m]
            if inputs:
                attrs["gen_ai.input.messages"] = self._content_value(inputs, f"entry {eid}")
            out = {
                "role": "assistant",
                "parts": _parts(msg.get("content")),
                "finish_reason": _FINISH.get(stop, stop) if isinstance(stop, str) else "stop",
            }
            attrs["gen_ai.output.messages"] = self._content_value([out], f"entry {eid}")
        err = _str(msg.get("errorMessage")) if stop == "error" else None
        if stop == "error" and err is None:
            err = "error"
        name = f"chat {model}" if model else "chat"
        self.emit(self.span(span_id, own, name, _CLIENT, start, ms, attrs, active=active, error=err))
        content = msg.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    cid = _str(b.get("id")) or ""
                    tname = _str(b.get("name")) or "tool"
                    tattrs: dict[str, Any] = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": tname,
                        "gen_ai.tool.call.id": cid or None,
                        "gen_ai.tool.type": "function",
                        "sessiontree.entry.id": eid,
                    }
                    if self.content != "none":
                        tattrs["gen_ai.tool.call.arguments"] = self._content_value(b.get("arguments"), f"entry {eid}")
                    tspan = span_id_of(self.sid, *self.cur, "tool", cid)
                    old = self.tools.pop(cid, None) if cid else None
                    if old is not None:
                        self.emit(self.span(*old[:7], active=old[7]))
                    rec: list[Any] = [tspan, span_id, f"execute_tool {tname}", _INTERNAL, ms, ms, tattrs, active]
                    if cid:
                        self.tools[cid] = rec
                    else:
                        self.report.problem(f"entry {eid}: a tool call without an id")
                        self.emit(self.span(*rec[:7], active=active))
        return span_id

    def tool_result(
        self, p: int, eid: str, msg: dict[str, Any], g: int, own: str, start: float, ms: float, active: bool
    ) -> None:
        cid = _str(msg.get("toolCallId")) or ""
        rec = self.tools.pop(cid, None)
        err = "tool error" if msg.get("isError") is True else None
        if err and self.content != "none":
            err = _text_of(msg.get("content"))[:1024] or "tool error"
        if rec is None:
            tname = _str(msg.get("toolName")) or "tool"
            self.report.problem(f"entry {eid}: a tool result for no earlier tool call ({cid or 'no id'})")
            rec = [
                span_id_of(self.sid, *self.cur, "tool", cid),
                own,
                f"execute_tool {tname}",
                _INTERNAL,
                start,
                ms,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tname,
                    "gen_ai.tool.call.id": cid or None,
                    "sessiontree.entry.id": eid,
                },
                active,
            ]
        rec[5] = ms
        rec[6]["sessiontree.result.entry_id"] = eid
        if self.content != "none":
            rec[6]["gen_ai.tool.call.result"] = self._content_value(_text_of(msg.get("content")), f"entry {eid}")
        self.emit(self.span(*rec[:7], active=rec[7], error=err))

    def summary(
        self, p: int, eid: str, etype: str, raw: dict[str, Any], own: str, start: float, ms: float, active: bool
    ) -> str:
        span_id = span_id_of(self.sid, *self.cur)
        summary = raw.get("summary")
        attrs: dict[str, Any] = {"sessiontree.entry.id": eid}
        links = []
        if etype == "compaction":
            tb = raw.get("tokensBefore")
            if isinstance(tb, (int, float)) and not isinstance(tb, bool) and math.isfinite(tb):
                if -_I64 <= int(tb) < _I64:
                    attrs["sessiontree.compaction.tokens_before"] = int(tb)
                else:
                    self.report.problem(f"entry {eid}: tokensBefore is out of the 64-bit range")
            elif tb is not None:
                self.report.problem(f"entry {eid}: tokensBefore is not a finite number")
            attrs["sessiontree.compaction.first_kept_entry_id"] = _str(raw.get("firstKeptEntryId"))
            if isinstance(summary, str):
                attrs["sessiontree.compaction.tokens_after"] = -(-len(summary) // 4)
        else:
            from_id = _str(raw.get("fromId"))
            attrs["sessiontree.branch_summary.from_id"] = from_id
            q = self.s.entry_index(from_id) if from_id else None
            if q is not None and q < self.n:
                target = (
                    self.own[8 * q : 8 * q + 8].hex()
                    if self.group[q] != _UNSEEN
                    else span_id_of(self.sid, from_id or "")
                )
                links.append(
                    {
                        "traceId": self.trace,
                        "spanId": target,
                        "attributes": _attrs({"sessiontree.link": "summarized_branch"}),
                    }
                )
            if isinstance(summary, str):
                attrs["sessiontree.branch_summary.tokens"] = -(-len(summary) // 4)
        if raw.get("fromHook") is True:
            attrs["sessiontree.from_hook"] = True
        attrs.update(self._usage(raw.get("usage"), f"entry {eid}"))
        if self.content != "none" and isinstance(summary, str):
            attrs["gen_ai.output.messages"] = self._content_value(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": etype if etype == "compaction" else "branch_summary", "content": summary}],
                        "finish_reason": "stop",
                    }
                ],
                f"entry {eid}",
            )
            self.recent[p] = {"role": "user", "parts": [{"type": "text", "content": summary}]}
        self.emit(self.span(span_id, own, etype, _INTERNAL, start, ms, attrs, active=active, links=links))
        return span_id

    def _emit_group(self, rec: list[Any]) -> None:
        self.emit(
            self.span(
                rec[0],
                rec[10],
                rec[2],
                _INTERNAL,
                rec[3],
                rec[4],
                rec[5],
                active=rec[9],
                events=rec[7],
                dropped_events=rec[8],
                links=rec[6],
            )
        )

    def finish(self) -> None:
        for rec in self.tools.values():
            rec[6]["sessiontree.tool.result_missing"] = True
            self.emit(self.span(*rec[:7], active=rec[7]))
        self.tools = {}
        keys = list(self.groups)
        for lo in range(0, len(keys), BATCH):
            chunk = keys[lo : lo + BATCH]
            if self.content != "none":  # the turns' user messages, read again: not held until here
                turns = [g for g in chunk if g < self.n]
                raws = self.s.raw_values(turns)
                if self.content == "scrubbed":
                    raws = _scrubbed(raws)
                for g, raw in zip(turns, raws):
                    msg = raw.get("message") if isinstance(raw, dict) else None
                    im = _input_message(msg) if isinstance(msg, dict) else None
                    if im:
                        rec = self.groups[g]
                        rec[5]["gen_ai.input.messages"] = self._content_value(
                            [im], f"entry {rec[5]['sessiontree.entry.id']}"
                        )
            for g in chunk:
                self._emit_group(self.groups.pop(g))
        self.groups = {}
        rep = self.report
        for text in rep.problems:
            self._event(_ROOT, self.start_ms, "sessiontree.problem", {"sessiontree.problem": text})
        name = self.s.session_name
        attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "pi",
            "gen_ai.agent.id": self.sid,
            "sessiontree.session.name": _str(name),
            "sessiontree.session.cwd": _str(self.s.header.get("cwd")),
            "sessiontree.entries": self.n,
            "sessiontree.problems": len(rep.problems) + rep.problems_dropped,
        }
        self.emit(
            self.span(
                self.root_span,
                None,
                "invoke_agent pi",
                _INTERNAL,
                self.start_ms,
                self.end_ms,
                attrs,
                active=True,
                events=self.root_events,
                dropped_events=self.root_dropped,
            )
        )
        self.flush()


def _scrubbed(raws: list[Any]) -> list[Any]:
    """``raws`` through the scrubber's rules (:func:`sessiontree.scrub.scrub_bytes`), one line each."""
    from sessiontree.scrub import scrub_bytes

    head = b'{"type":"session","version":3,"id":"-"}\n'
    clean, _ = scrub_bytes(head + b"\n".join(_dumps(r) for r in raws) + b"\n")
    out = clean.split(b"\n")[1 : 1 + len(raws)]
    return [orjson.loads(x) for x in out]


def oracle_requests(session: Session, *, content: str = "none", report: OtelReport | None = None) -> Iterator[bytes]:
    """The OTLP/JSON lines (``bytes``, each ending in ``\\n``) of one session's trace, made as
    they are consumed. ``report`` (an :class:`OtelReport`) collects the counts and problems.

    Raises:
        SessionArgumentError: ``content`` is not one of :data:`CONTENT_MODES`.
    """
    check_content(content)
    rep = report if report is not None else OtelReport()
    out: list[bytes] = []
    m = _Mapper(session, content, rep, out.append)
    s = session
    n = m.n
    for lo in range(0, n, BATCH):
        idx = list(range(lo, min(n, lo + BATCH)))
        table = s.entry_table(idx)
        parents = s.parent_positions(idx)
        raws = s.raw_values(idx)
        if content == "scrubbed":
            raws = _scrubbed(raws)
        for k, p in enumerate(idx):
            m.entry(p, table.id[k], table.type[k], parents[k], raws[k])
        if content != "none" and len(m.recent) > 4 * BATCH:
            m.recent = {q: v for q, v in m.recent.items() if q >= lo - BATCH}
        yield from out
        out.clear()
    m.finish()
    yield from out
