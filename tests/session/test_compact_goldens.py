"""``Session.compact`` against Pi 1.6.0's real RPC ``compact`` (``*.jsonl.compact.json``).

Every compact golden under ``tests/corpus/pi-generated`` and ``tests/corpus/real`` is found by
globbing (hidden sets dropped there are picked up), and every variant is replayed on a fresh copy
of its session file exactly as the harness drove Pi: the entries Pi appended at startup, then
``set_model`` (our ``append_model_change("fake", "fake-model")``), then ``compact`` with the
variant's settings (``keepRecentTokens``; the model's ``contextWindow`` / ``maxTokens`` for the
output budget) and custom instructions.

The summarizer is a deterministic stand-in for the harness's fake chat-completions endpoint: it
answers request N with ``SUMMARY for request N`` and the endpoint's fixed usage, priced with the
model's prices (Pi's ``calculateCost``). It implements the Summarizer protocol; none of our code
paths are mocked.

Checked per variant: the appended ``compaction`` entry equals Pi's on every field but ``id`` and
``timestamp`` (key order included), the number of summary requests equals ``len(llm_requests)``,
each request's kind / previous summary / custom instructions match what Pi sent, the ``compact``
response data (``estimatedTokensAfter`` included), ``get_messages`` after compaction (roles and
content of ``build_context()``), the session totals after compaction (``get_session_stats``), and
for failed variants the error text.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS, GOLDEN_DIRS

from sessiontree import CompactionSettings, Session
from sessiontree.orchestration import NothingToCompactError
from sessiontree.summarizers.base import MIN_SUMMARY_OUTPUT_TOKENS, SummaryBudgetError
from sessiontree.provider_context import is_provider_valid
from sessiontree.summarizers.base import Pricing, SummaryResult, SummaryUsage

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))


def compact_goldens() -> list[Path]:
    out: list[Path] = []
    for d in GOLDEN_DIRS:
        out.extend(sorted((CORPUS / d).glob("*.jsonl.compact.json")))
    return out


def _variants() -> list:
    params = []
    for path in compact_goldens():
        golden = json.loads(path.read_text(encoding="utf-8"))
        for name, variant in golden.items():
            if isinstance(variant, dict) and "exchanges" in variant:
                params.append(
                    pytest.param(path, name, id=f"{path.parent.name}/{path.name[: -len('.jsonl.compact.json')]}:{name}")
                )
    return params


class FakeEndpointSummarizer:
    """The harness's fake endpoint as a Summarizer: request N answers ``SUMMARY for request N``
    with the golden's fixed usage (input = prompt_tokens - cached), priced like Pi."""

    name = "golden-fake"

    def __init__(self, fake_llm: dict, model: dict):
        usage = fake_llm["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
        self.usage = SummaryUsage(
            input=usage["prompt_tokens"] - cached,
            output=usage["completion_tokens"],
            cache_read=cached,
            total_tokens=usage["total_tokens"],
        ).priced(Pricing.from_pi(model["cost"]))
        self.context_window = model.get("contextWindow")
        self.max_output_tokens = model.get("maxTokens")
        self.requests: list = []

    async def summarize(self, request):
        self.requests.append(request)
        return SummaryResult(f"SUMMARY for request {len(self.requests)}", self.usage, "fake-model")


def _exchange(variant: dict, command: str) -> dict:
    return next(e for e in variant["exchanges"] if e["command"]["type"] == command)


def _model(variant: dict) -> dict:
    return variant["models_json"]["providers"]["fake"]["models"][0]


def _settings(variant: dict) -> CompactionSettings:
    raw = (variant.get("settings_json") or {}).get("compaction") or {}
    kwargs = {}
    if "keepRecentTokens" in raw:
        kwargs["keep_recent_tokens"] = raw["keepRecentTokens"]
    if "reserveTokens" in raw:
        kwargs["reserve_tokens"] = raw["reserveTokens"]
    return CompactionSettings(**kwargs)


def _replay_startup(session: Session, variant: dict) -> None:
    """Append what Pi appended at startup (normally one ``thinking_level_change``)."""
    for entry in (variant.get("startup") or {}).get("appended_entries") or []:
        if entry.get("type") == "session":
            continue  # an empty file's fresh header: ours is written with the first entry
        if entry["type"] == "thinking_level_change":
            session.append_thinking_level_change(entry["thinkingLevel"])
            continue
        e = session._base(entry["type"])
        e.update({k: v for k, v in entry.items() if k not in ("type", "id", "parentId", "timestamp")})
        session._append_built(lambda: e)


def _pi_ids(golden_path: Path, session: Session) -> dict:
    """Our id -> Pi's id. Identity, except for v1 files whose ids Pi invents while migrating:
    those are matched by position with the ``.golden.json`` entry list."""
    main = golden_path.with_name(golden_path.name.replace(".compact.json", ".golden.json"))
    if not main.exists():
        return {}
    golden = json.loads(main.read_text(encoding="utf-8"))
    if not (golden.get("open") or {}).get("ids_generated_by_pi"):
        return {}
    return {e.id: pi[0] for e, pi in zip(session.entries(), golden.get("entries") or []) if e.id is not None}


def _view(message: dict) -> dict:
    """What get_messages comparisons look at: role and content (summary for summaries)."""
    out = {"role": message.get("role")}
    for key in ("content", "summary", "tokensBefore", "toolCallId", "fromId", "command", "output"):
        if key in message:
            out[key] = message[key]
    return out


@pytest.fixture
def session_copy(tmp_path):
    def make(golden_path: Path) -> Session:
        src = golden_path.with_name(golden_path.name[: -len(".compact.json")])
        dst = tmp_path / src.name
        shutil.copyfile(src, dst)
        return Session.open(dst)

    return make


@pytest.mark.parametrize("golden_path,variant_name", _variants())
def test_compact_matches_pi(golden_path: Path, variant_name: str, session_copy) -> None:
    golden = json.loads(golden_path.read_text(encoding="utf-8"))
    variant = golden[variant_name]
    compact = _exchange(variant, "compact")
    command, response = compact["command"], compact["response"]
    model = _model(variant)

    session = session_copy(golden_path)
    pi_ids = _pi_ids(golden_path, session)
    _replay_startup(session, variant)
    model_change = session.append_model_change("fake", "fake-model")
    before = len(session)
    summarizer = FakeEndpointSummarizer(golden["fake_llm"], model)

    if not response["success"]:
        with pytest.raises(NothingToCompactError) as info:
            session.compact(
                summarizer, settings=_settings(variant), custom_instructions=command.get("customInstructions")
            )
        assert str(info.value) == response["error"]
        assert len(session) == before, "a failed compact must append nothing"
        assert summarizer.requests == [] == variant["llm_requests"]
        return

    budgets = [r["body"].get("max_completion_tokens") for r in variant["llm_requests"]]
    if any(isinstance(b, int) and b < MIN_SUMMARY_OUTPUT_TOKENS for b in budgets):
        # Divergence (docs/divergences.md, "summary output budget"): Pi asks for a summary in
        # as little as 1 token; we refuse before sending anything and append nothing.
        with pytest.raises(SummaryBudgetError):
            session.compact(
                summarizer,
                settings=_settings(variant),
                custom_instructions=command.get("customInstructions"),
                context_window=model["contextWindow"],
                max_tokens=model["maxTokens"],
            )
        assert len(session) == before
        assert all(r.max_tokens >= MIN_SUMMARY_OUTPUT_TOKENS for r in summarizer.requests)
        return

    result = session.compact(
        summarizer,
        settings=_settings(variant),
        custom_instructions=command.get("customInstructions"),
        context_window=model["contextWindow"],
        max_tokens=model["maxTokens"],
    )

    # the appended entry, field by field (ids/timestamps are Pi's own)
    (pi_entry,) = compact["appended_entries"]
    ours = result.entry.raw
    assert list(ours) == list(pi_entry), "key order"
    assert ours["parentId"] == model_change
    ours = dict(ours, firstKeptEntryId=pi_ids.get(ours["firstKeptEntryId"], ours["firstKeptEntryId"]))
    for key in pi_entry:
        if key not in ("id", "parentId", "timestamp"):
            assert ours[key] == pi_entry[key], key
    assert len(session) == before + 1

    # the summary requests
    requests = variant["llm_requests"]
    assert len(summarizer.requests) == len(requests)
    for ours_req, pi_req in zip(summarizer.requests, requests):
        text = pi_req["body"]["messages"][1]["content"][0]["text"]
        assert (ours_req.kind == "turn_prefix") == text.startswith("# Conversation\n")
        assert (ours_req.previous_summary is not None) == ("<previous-summary>" in text)
        if ours_req.previous_summary is not None:
            assert f"<previous-summary>\n{ours_req.previous_summary}\n</previous-summary>" in text
        focus = command.get("customInstructions")
        assert ours_req.custom_instructions == focus
        assert (f"\n\nAdditional focus: {focus}" in text) == (focus is not None)
        assert ours_req.conversation in text
        if model["contextWindow"] >= 200000:
            assert ours_req.max_tokens == pi_req["body"]["max_completion_tokens"] == model["maxTokens"]
        elif pi_req["body"]["max_completion_tokens"] == 1:
            assert ours_req.max_tokens == 1  # the input alone overflows the window

    # the RPC response data
    data = result.to_pi()
    data["firstKeptEntryId"] = pi_ids.get(data["firstKeptEntryId"], data["firstKeptEntryId"])
    assert data == response["data"]

    # get_messages after compaction
    pi_messages = _exchange(variant, "get_messages")["response"]["data"]["messages"]
    ours_messages = session.build_context().messages
    assert [_view(m) for m in ours_messages] == [_view(m) for m in pi_messages]
    assert is_provider_valid(session.build_provider_context().messages)

    # session totals include the summarization usage
    stats = _exchange(variant, "get_session_stats")["response"]
    if stats["success"]:
        totals = session.usage_totals().to_pi()
        assert totals["tokens"] == stats["data"]["tokens"]
        assert totals["cost"] == stats["data"]["cost"]


def test_there_are_compact_goldens() -> None:
    assert len(_variants()) >= 50
