"""Checks of OTLP/JSON trace files shared by the otel tests: every line parsed by the official
protobuf classes (``opentelemetry-proto``), every ``gen_ai.*`` attribute checked against the
vendored GenAI registry (semantic conventions 1.41.0, see README.md here), the spans' nesting
and links, and the content attributes against the conventions' JSON schemas."""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

HERE = Path(__file__).resolve().parent
REGISTRY = HERE / "semconv_v1.41.0_registry.yaml"
SCHEMAS = {
    "gen_ai.input.messages": HERE / "semconv_v1.41.0_gen-ai-input-messages.json",
    "gen_ai.output.messages": HERE / "semconv_v1.41.0_gen-ai-output-messages.json",
    "gen_ai.system_instructions": HERE / "semconv_v1.41.0_gen-ai-system-instructions.json",
}
_VALUE_OF = {"string": "stringValue", "int": "intValue", "double": "doubleValue", "boolean": "boolValue"}


@lru_cache(maxsize=1)
def registry() -> dict[str, str]:
    """``{attribute name: type}`` of the vendored registry (an enum's type is ``string``)."""
    doc = yaml.safe_load(REGISTRY.read_text())
    out: dict[str, str] = {}
    for group in doc["groups"]:
        for attr in group.get("attributes", []):
            t = attr["type"]
            if isinstance(t, dict):  # an enum: its members' type
                members = t.get("members", [])
                t = "int" if members and all(isinstance(m.get("value"), int) for m in members) else "string"
            out[attr["id"]] = t
    return out


def _hex_to_b64(value: str, nbytes: int) -> str:
    raw = bytes.fromhex(value)
    assert len(raw) == nbytes, f"id {value!r} is not {nbytes} bytes"
    return base64.b64encode(raw).decode()


def to_proto(line: bytes | str) -> ExportTraceServiceRequest:
    """One OTLP/JSON line as the protobuf message. OTLP/JSON writes ids as hex where proto3 JSON
    has base64 (the receivers convert): the ids are converted, then ``json_format.Parse`` checks
    every field name, type and enum (no unknown field allowed)."""
    doc = json.loads(line)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                sp["traceId"] = _hex_to_b64(sp["traceId"], 16)
                sp["spanId"] = _hex_to_b64(sp["spanId"], 8)
                if "parentSpanId" in sp:
                    sp["parentSpanId"] = _hex_to_b64(sp["parentSpanId"], 8)
                for ln in sp.get("links", []):
                    ln["traceId"] = _hex_to_b64(ln["traceId"], 16)
                    ln["spanId"] = _hex_to_b64(ln["spanId"], 8)
    msg = ExportTraceServiceRequest()
    json_format.Parse(json.dumps(doc), msg)
    return msg


def read_spans(path: Path) -> list[dict]:
    """Every span of the file (dicts as written, with ``_resource``: the resource attributes),
    each line parsed as written by ``json_format.Parse`` and, ids converted, by :func:`to_proto`."""
    spans: list[dict] = []
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    for line in data.splitlines():
        assert line.strip(), "a blank line"
        json_format.Parse(line, ExportTraceServiceRequest())  # the line as written
        msg = to_proto(line)
        doc = json.loads(line)
        assert len(msg.resource_spans) == len(doc["resourceSpans"])
        for rs in doc["resourceSpans"]:
            res = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
            for ss in rs["scopeSpans"]:
                assert ss["schemaUrl"] == "https://opentelemetry.io/schemas/1.41.0"
                for sp in ss["spans"]:
                    sp["_resource"] = res
                    spans.append(sp)
    return spans


def attrs(span: dict) -> dict[str, Any]:
    """A span's attributes as ``{key: plain value}``."""
    return {a["key"]: plain(a["value"]) for a in span.get("attributes", [])}


def plain(v: dict) -> Any:
    ((kind, x),) = v.items()
    if kind == "intValue":
        return int(x)
    if kind == "arrayValue":
        return [plain(y) for y in x.get("values", [])]
    return x


def check_registry(spans: list[dict]) -> int:
    """Fail on a ``gen_ai.*`` attribute the registry does not name or of the wrong type; checks
    the content attributes against the conventions' JSON schemas. Returns the attributes checked."""
    import jsonschema

    reg = registry()
    checked = 0
    validators = {k: jsonschema.Draft202012Validator(json.loads(p.read_text())) for k, p in SCHEMAS.items()}
    for sp in spans:
        for a in sp.get("attributes", []) + [x for e in sp.get("events", []) for x in e.get("attributes", [])]:
            key, value = a["key"], a["value"]
            if not key.startswith("gen_ai."):
                continue
            assert key in reg, f"{key} is not in the GenAI registry 1.41.0 (span {sp['name']})"
            t = reg[key]
            ((kind, x),) = value.items()
            if t == "any":
                assert kind in ("stringValue", "arrayValue", "kvlistValue", "intValue", "doubleValue", "boolValue")
            elif t.endswith("[]"):
                assert kind == "arrayValue", f"{key}: {kind}, registry type {t}"
                inner = _VALUE_OF[t[:-2]]
                assert all(list(y) == [inner] for y in x.get("values", [])), f"{key}: items not {inner}"
            else:
                assert kind == _VALUE_OF[t], f"{key}: {kind}, registry type {t}"
                if kind == "intValue":
                    assert isinstance(x, str) and str(int(x)) == x  # int64 as a decimal string
            if key in validators and kind == "stringValue":
                errors = list(validators[key].iter_errors(json.loads(x)))
                assert not errors, f"{key} of {sp['name']}: {errors[0].message}"
            checked += 1
    return checked


def check_structure(spans: list[dict]) -> dict[str, dict]:
    """One trace per session, unique span ids, one root per trace, every parent and link in the
    trace, chat spans under invoke_agent or branch spans, tool call spans under their chat span,
    times in order. Returns the spans by id."""
    by_trace: dict[str, dict[str, dict]] = {}
    for sp in spans:
        ids = by_trace.setdefault(sp["traceId"], {})
        assert sp["spanId"] not in ids, f"span id {sp['spanId']} twice"
        ids[sp["spanId"]] = sp
        assert int(sp["startTimeUnixNano"]) <= int(sp["endTimeUnixNano"])
    out: dict[str, dict] = {}
    for trace, ids in by_trace.items():
        roots = [sp for sp in ids.values() if "parentSpanId" not in sp]
        assert len(roots) == 1, f"trace {trace}: {len(roots)} roots"
        assert roots[0]["name"] == "invoke_agent pi"
        for sp in ids.values():
            a = attrs(sp)
            assert a["gen_ai.conversation.id"] == attrs(roots[0])["gen_ai.agent.id"]
            assert isinstance(a["sessiontree.active_path"], bool)
            if "parentSpanId" in sp:
                parent = ids.get(sp["parentSpanId"])
                assert parent is not None, f"{sp['name']}: parent not in the trace"
                pa = attrs(parent)
                if sp["name"].startswith("chat"):
                    assert pa.get("gen_ai.operation.name") == "invoke_agent" or parent["name"].startswith("branch ")
                if (
                    sp["name"].startswith("execute_tool")
                    and "gen_ai.tool.call.id" in a
                    and not a.get("sessiontree.result.entry_id", "").startswith("#")
                ):
                    if parent["name"].startswith("chat"):
                        assert pa["sessiontree.entry.id"] == a["sessiontree.entry.id"]
                if sp["name"].startswith("branch "):
                    assert not a["sessiontree.active_path"]
                    assert sp["links"] and all(ln["spanId"] in ids for ln in sp["links"])
                # a span on the active path has its parent there too (the root counts)
                if a["sessiontree.active_path"]:
                    assert pa["sessiontree.active_path"], f"{sp['name']} active under an inactive {parent['name']}"
            for ln in sp.get("links", []):
                assert ln["traceId"] == trace and ln["spanId"] in ids, f"{sp['name']}: a link out of the trace"
        out.update(ids)
    return out
