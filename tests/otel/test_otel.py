"""The OpenTelemetry export (sessiontree.otel): OTLP/JSON lines parsed by the official protobuf
classes, gen_ai.* attributes checked against the vendored registry, nesting and links, content
modes, determinism, bad input, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.cli import main
from sessiontree.otel import SCHEMA_URL, SEMCONV_VERSION, export, span_id_of, trace_id_of

from .otlp_check import attrs, check_registry, check_structure, read_spans

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for p in (ROOT / "tests" / "corpus").rglob("*.jsonl"))
GEN = ROOT / "tests" / "tools" / "gen_session.py"


def _gen(tmp_path: Path, entries: int, seed: int, branchiness: float = 0.1) -> Path:
    out = tmp_path / f"gen{seed}.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(GEN),
            "--entries",
            str(entries),
            "--branchiness",
            str(branchiness),
            "--seed",
            str(seed),
            "--out",
            str(out),
        ],
        check=True,
    )
    return out


def _export_one(src: Path, out: Path, content: str = "none") -> tuple[list[dict], dict]:
    rows = export(src, out, content=content)
    assert len(rows) == 1
    return read_spans(out), rows[0]


def test_the_pinned_version_is_the_vendored_one():
    assert SEMCONV_VERSION == "1.41.0" and SCHEMA_URL.endswith("/1.41.0")


@pytest.mark.slow  # over ~1 s each on the loaded 2-core machine (CI runs them)
@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_every_corpus_file_gives_a_valid_trace(path, tmp_path):
    out = tmp_path / "t.jsonl"
    rows = export(path, out)
    spans = read_spans(out)
    if rows[0]["error"] is not None:  # a file that does not open: a row, nothing written for it
        assert spans == []
        return
    check_registry(spans)
    ids = check_structure(spans)
    s = Session.open(path)
    try:
        n_chat = 0
        for e in s.iter_entries():
            m = e.raw.get("message") if isinstance(e.raw, dict) else None
            if e.type == "message" and isinstance(m, dict) and m.get("role") == "assistant" and isinstance(e.id, str):
                n_chat += 1
                if s.entry_index(e.id) == e.index:  # a repeated id: the earlier ones' spans also name their position
                    assert span_id_of(s.session_id, e.id) in ids
        assert sum(sp["name"].startswith("chat") for sp in spans) == n_chat
    finally:
        s.close()


@pytest.mark.slow  # over ~1 s each on the loaded 2-core machine (CI runs them)
def test_generated_trees_with_forks_and_compactions(tmp_path):
    src = _gen(tmp_path, 3000, 7, 0.15)
    spans, row = _export_one(src, tmp_path / "t.jsonl")
    assert row["error"] is None and row["spans"] == len(spans)
    assert check_registry(spans) > 1000
    ids = check_structure(spans)
    names = [sp["name"].split(" ")[0] for sp in spans]
    for kind in ("invoke_agent", "chat", "execute_tool", "compaction", "branch", "branch_summary"):
        assert kind in names, kind
    s = Session.open(src)
    try:
        active = set(s.branch_positions())
        table = s.entry_table()
        sid = s.session_id
        assert {sp["traceId"] for sp in spans} == {trace_id_of(sid)}
        # each branch span links to its fork point, the parent of the branch's first entry
        for sp in spans:
            if sp["name"].startswith("branch "):
                first = attrs(sp)["sessiontree.branch.from_id"]
                assert sp["links"][0]["spanId"] in ids
                assert first in set(table.id)
        # the active path attribute follows the leaf's branch
        for k, (eid, etype) in enumerate(zip(table.id, table.type)):
            sp = ids.get(span_id_of(sid, eid))
            if sp is not None and etype in ("message", "compaction", "branch_summary"):
                assert attrs(sp)["sessiontree.active_path"] == (k in active), eid
    finally:
        s.close()
    # tool call spans: parent is the chat span of the message that called the tool; error status on errors
    chats = {sp["spanId"]: sp for sp in spans if sp["name"].startswith("chat")}
    tools = [sp for sp in spans if sp["name"].startswith("execute_tool") and "gen_ai.tool.call.id" in attrs(sp)]
    assert tools and all(
        sp["parentSpanId"] in chats for sp in tools if "sessiontree.result.entry_id" in attrs(sp) or True
    )


@pytest.mark.slow  # over ~1 s each on the loaded 2-core machine (CI runs them)
def test_re_export_gives_identical_bytes(tmp_path):
    src = _gen(tmp_path, 800, 3)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    export(src, a, content="full")
    export(src, b, content="full")
    assert a.read_bytes() == b.read_bytes()


def _session(tmp_path: Path, lines: list[dict], sid: str = "s-1") -> Path:
    p = tmp_path / "s.jsonl"
    head = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}
    p.write_text("\n".join(json.dumps(x) for x in [head, *lines]) + "\n")
    return p


def _msg(eid: str, parent: str | None, t: str, message: dict, **kw) -> dict:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": t, "message": message, **kw}


# a drawn-looking key: one repeated character would be filler, which scrub keeps (docs/scrub.md)
SECRET = "sk-ant-api03-" + ("Xq3Zr8Lm5Vv9Tn3Wk7Bd4Hy6Jp2Fs1Gc0" * 3)[:93] + "AA"


def _small(tmp_path: Path) -> Path:
    return _session(
        tmp_path,
        [
            _msg(
                "u1", None, "2026-01-01T00:00:01.000Z", {"role": "user", "content": f"use key {SECRET}", "timestamp": 1}
            ),
            _msg(
                "a1",
                "u1",
                "2026-01-01T00:00:03.000Z",
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm"},
                        {"type": "text", "text": "reading"},
                        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.txt"}},
                    ],
                    "provider": "anthropic",
                    "model": "claude-x",
                    "usage": {
                        "input": 10,
                        "output": 5,
                        "cacheRead": 3,
                        "cacheWrite": 2,
                        "totalTokens": 20,
                        "cost": {"total": 0.5},
                    },
                    "stopReason": "toolUse",
                    "timestamp": 3,
                },
            ),
            _msg(
                "r1",
                "a1",
                "2026-01-01T00:00:04.500Z",
                {
                    "role": "toolResult",
                    "toolCallId": "c1",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "no such file"}],
                    "isError": True,
                    "timestamp": 4,
                },
            ),
            {
                "type": "label",
                "id": "l1",
                "parentId": "r1",
                "timestamp": "2026-01-01T00:00:05.000Z",
                "targetId": "u1",
                "label": "start",
            },
            {
                "type": "model_change",
                "id": "m1",
                "parentId": "l1",
                "timestamp": "2026-01-01T00:00:05.500Z",
                "provider": "openai",
                "modelId": "gpt-x",
            },
            _msg(
                "a2",
                "m1",
                "2026-01-01T00:00:06.000Z",
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "done"}],
                    "provider": "openai",
                    "model": "gpt-x",
                    "usage": {"input": 1, "output": 1},
                    "stopReason": "stop",
                    "timestamp": 6,
                },
            ),
        ],
    )


def test_the_mapping_of_a_small_session(tmp_path):
    spans, row = _export_one(_small(tmp_path), tmp_path / "t.jsonl")
    assert row["problems"] == []
    check_registry(spans)
    by = {sp["name"]: sp for sp in spans}
    assert set(by) == {"invoke_agent pi", "chat claude-x", "chat gpt-x", "execute_tool read"}
    root = next(sp for sp in spans if "parentSpanId" not in sp)
    turn = next(sp for sp in spans if sp["name"] == "invoke_agent pi" and "parentSpanId" in sp)
    chat, tool = by["chat claude-x"], by["execute_tool read"]
    assert turn["parentSpanId"] == root["spanId"] and chat["parentSpanId"] == turn["spanId"]
    assert tool["parentSpanId"] == chat["spanId"]
    a = attrs(chat)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "claude-x"
    assert a["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (10, 5)
    assert (a["gen_ai.usage.cache_read.input_tokens"], a["gen_ai.usage.cache_creation.input_tokens"]) == (3, 2)
    assert a["sessiontree.cost.total"] == 0.5 and a["gen_ai.conversation.id"] == "s-1"
    assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output") for k in a)  # content off
    # times: the chat starts at the previous entry's time, the tool ends at its result's
    t0 = 1767225600 * 10**9
    assert (int(chat["startTimeUnixNano"]), int(chat["endTimeUnixNano"])) == (t0 + 1 * 10**9, t0 + 3 * 10**9)
    assert (int(tool["startTimeUnixNano"]), int(tool["endTimeUnixNano"])) == (t0 + 3 * 10**9, t0 + 4_500_000_000)
    ta = attrs(tool)
    assert ta["gen_ai.tool.name"] == "read" and ta["gen_ai.tool.call.id"] == "c1" and tool["status"]["code"] == 2
    assert root["_resource"]["sessiontree.session.cwd"] == {"stringValue": "/w"}
    events = [e["name"] for e in turn["events"]]
    assert events == ["sessiontree.label", "sessiontree.model_change"]
    assert int(root["endTimeUnixNano"]) == t0 + 6 * 10**9


def test_content_full_and_scrubbed(tmp_path):
    src = _small(tmp_path)
    spans, _ = _export_one(src, tmp_path / "full.jsonl", "full")
    check_registry(spans)  # the JSON schemas of the conventions too
    chat = next(sp for sp in spans if sp["name"] == "chat claude-x")
    a = attrs(chat)
    inputs = json.loads(a["gen_ai.input.messages"])
    outputs = json.loads(a["gen_ai.output.messages"])
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": f"use key {SECRET}"}]}]
    assert [p["type"] for p in outputs[0]["parts"]] == ["reasoning", "text", "tool_call"]
    assert outputs[0]["finish_reason"] == "tool_call"
    assert SECRET in (tmp_path / "full.jsonl").read_text()
    spans, _ = _export_one(src, tmp_path / "scrubbed.jsonl", "scrubbed")
    check_registry(spans)
    text = (tmp_path / "scrubbed.jsonl").read_text()
    assert SECRET not in text and "[REDACTED:" in text
    assert {sp["spanId"] for sp in spans} == {sp["spanId"] for sp in read_spans(tmp_path / "full.jsonl")}


def test_bad_input_gives_a_valid_trace_and_recorded_problems(tmp_path):
    src = _session(
        tmp_path,
        [
            {"type": "message", "id": "u1", "parentId": None, "message": {"role": "user", "content": "hi"}},
            _msg(
                "a1",
                "u1",
                "not a date",
                {
                    "role": "assistant",
                    "content": [],
                    "model": "m",
                    "usage": {"input": "12", "output": "NaN", "cacheRead": None},
                    "stopReason": "stop",
                },
            ),
            {"type": "wormhole", "id": "w1", "parentId": "a1", "timestamp": "2026-01-01T00:00:09.000Z"},
            _msg("r9", "w1", "2026-01-01T00:00:10.000Z", {"role": "toolResult", "toolCallId": "nope", "content": "x"}),
        ],
    )
    spans, row = _export_one(src, tmp_path / "t.jsonl")
    check_registry(spans)
    check_structure(spans)
    problems = " | ".join(row["problems"])
    assert "u1: no valid timestamp" in problems and "a1: no valid timestamp" in problems
    assert "usage.input is not a finite number (str)" in problems and "usage.output" in problems
    assert "unknown entry type 'wormhole'" in problems and "no earlier tool call" in problems
    root = next(sp for sp in spans if "parentSpanId" not in sp)
    assert sum(e["name"] == "sessiontree.problem" for e in root["events"]) == len(row["problems"])


def test_session_to_otlp_and_cli(tmp_path, capsys):
    src = _small(tmp_path)
    s = Session.open(src)
    try:
        rep = s.to_otlp(tmp_path / "a.jsonl")
    finally:
        s.close()
    assert rep.spans == len(read_spans(tmp_path / "a.jsonl")) == 5
    assert main(["otel", str(src), "-o", str(tmp_path / "b.jsonl")]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    row = json.loads(capsys.readouterr().out)
    assert row["spans"] == 5 and row["traceId"] == trace_id_of("s-1")
    # a source that is not a session: its row, exit 1; the output is never a session read
    (tmp_path / "bad.jsonl").write_text("nope\n")
    assert main(["otel", str(src), str(tmp_path / "bad.jsonl"), "-o", str(tmp_path / "c.jsonl")]) == 1
    assert main(["otel", str(src), "-o", str(src)]) == 2
    assert json.loads(src.read_text().splitlines()[0])["type"] == "session"
    assert main(["otel", str(tmp_path / "none*.jsonl"), "-o", str(tmp_path / "d.jsonl")]) == 2


def test_a_cycle_on_the_active_path_is_one_problem_with_the_walks_message(tmp_path):
    """The mapper walks the leaf's branch in the core: a ``parentId`` cycle on it is recorded
    as the problem ``SessionCycleError``'s message names (what ``branch_positions`` raises), and
    the trace is still valid (every span off the active path)."""
    ts = "2026-01-01T00:00:0%d.000Z"
    lines = [
        {"type": "session", "version": 3, "id": "cyc", "timestamp": ts % 0, "cwd": "/p"},
        {
            "type": "message",
            "id": "a",
            "parentId": "b",
            "timestamp": ts % 1,
            "message": {"role": "user", "content": "hi"},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "timestamp": ts % 2,
            "message": {"role": "user", "content": "yo"},
        },
    ]
    src = tmp_path / "cyc.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = Session.open(src)
    with pytest.raises(Exception) as exc:
        s.branch_positions()
    rep = s.to_otlp(tmp_path / "t.jsonl")
    s.close()
    assert f"the active path could not be walked: {exc.value}" in rep.problems
    spans = read_spans(tmp_path / "t.jsonl")
    check_structure(spans)
    assert not any(attrs(sp).get("sessiontree.active_path") for sp in spans if sp.get("parentSpanId"))
