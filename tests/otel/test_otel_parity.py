"""The core's mapping of sessions to OTLP/JSON (rust/src/otel, what ``sessiontree.otel`` writes)
against its Python oracle (``tests/otel/oracle.py``, the mapping as first written in Python):
the same lines, span for span, and the same report, over every corpus file, the Claude Code and
Codex fixtures converted to Pi, and generated trees, in every content mode.

Lines are compared as JSON (the content attributes, JSON text themselves, parsed too): the core
writes a tool call's arguments with their keys sorted (serde_json) where orjson kept the
file's order; every other byte is the same, which the first test checks on the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.convert import to_pi
from sessiontree.otel import OtelReport, session_requests

from .oracle import oracle_requests
from .otlp_check import check_registry, check_structure, read_spans
from .test_otel import _gen

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for p in (ROOT / "tests" / "corpus").rglob("*.jsonl"))
FIXTURES = sorted(p for d in ("claude-code", "codex") for p in (ROOT / "tests" / "fixtures" / d).glob("*.jsonl"))
#: content attributes: JSON text inside the OTLP JSON
_JSON_ATTRS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def _norm(line: bytes) -> object:
    doc = json.loads(line)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for a in sp["attributes"]:
                    if a["key"] in _JSON_ATTRS:
                        a["value"]["stringValue"] = json.loads(a["value"]["stringValue"])
    return doc


def _both(path: Path, content: str) -> tuple[list[bytes], list[bytes], OtelReport, OtelReport]:
    s = Session.open(path)
    try:
        ra, rb = OtelReport(path="p"), OtelReport(path="p")
        core = list(session_requests(s, content=content, report=ra))
        oracle = list(oracle_requests(s, content=content, report=rb))
    finally:
        s.close()
    return core, oracle, ra, rb


def _same(path: Path, content: str, exact: bool = False) -> list[bytes]:
    core, oracle, ra, rb = _both(path, content)
    assert ra.to_json() == rb.to_json(), path.name
    assert len(core) == len(oracle), path.name
    for k, (a, b) in enumerate(zip(core, oracle)):
        if a != b:
            assert not exact, f"{path.name} line {k}: bytes differ"
            assert _norm(a) == _norm(b), f"{path.name} line {k}"
    return core


def _opens(path: Path) -> bool:
    try:
        Session.open(path).close()
    except Exception:  # noqa: BLE001 - a corpus file that does not open has no trace to compare
        return False
    return True


@pytest.mark.parametrize("path", [p for p in CORPUS if p.stat().st_size < 300_000], ids=lambda p: p.name)
def test_the_core_writes_the_oracles_bytes_without_content(path):
    if not _opens(path):
        pytest.skip("does not open")
    _same(path, "none", exact=True)


@pytest.mark.slow  # the Python oracle over the two large real sessions: ~10 s
@pytest.mark.parametrize("path", [p for p in CORPUS if p.stat().st_size >= 300_000], ids=lambda p: p.name)
def test_the_core_writes_the_oracles_bytes_on_large_sessions(path):
    _same(path, "none", exact=True)
    _same(path, "full")


@pytest.mark.parametrize("content", ["full", "scrubbed"])
def test_the_core_matches_the_oracle_with_content(content):
    for path in CORPUS:
        if path.stat().st_size < 300_000 and _opens(path):
            _same(path, content)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Every Claude Code and Codex fixture converted to Pi (each file written: sidechains and
    subagents too)."""
    out = tmp_path_factory.mktemp("converted")
    files: list[Path] = []
    for src in FIXTURES:
        try:
            r = to_pi(src, out / f"{src.parent.name}__{src.stem}.jsonl")
        except Exception:  # noqa: BLE001 - a fixture that is not a transcript (checked by the convert tests)
            continue
        files.extend(Path(f) for f in r.files)
    assert len(files) >= 30
    return files


@pytest.mark.parametrize("content", ["none", "full", "scrubbed"])
def test_converted_claude_code_and_codex_sessions_match_the_oracle(converted, content):
    for path in converted:
        _same(path, content)


@pytest.mark.parametrize("content", ["none", "full"])
def test_converted_sessions_give_valid_traces(converted, tmp_path, content):
    """Every line of every converted Claude Code and Codex session parses with the official
    protobuf classes, every ``gen_ai.*`` attribute is the registry's, spans nest and link."""
    from sessiontree.otel import export

    kinds: set[str] = set()
    for path in converted:
        out = tmp_path / "t.jsonl"
        rows = export(path, out, content=content)
        assert rows[0]["error"] is None, path.name
        spans = read_spans(out)
        check_registry(spans)
        check_structure(spans)
        kinds |= {sp["name"].split(" ")[0] for sp in spans}
    # both agents' transcripts carry turns, model calls and tool calls
    assert {"invoke_agent", "chat", "execute_tool"} <= kinds


@pytest.mark.parametrize("seed", [3, 11])
def test_generated_trees_match_the_oracle(tmp_path, seed):
    src = _gen(tmp_path, 1500, seed, 0.2)
    for content in ("none", "full"):
        _same(src, content)
