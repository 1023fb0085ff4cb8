"""Summarizers without the network: the offline summarizer, prompts and request layout, the
Pi 1.6 output budget, the overflow matcher, the retry policy, usage/cost mapping and the factory.

The HTTP behaviour of the OpenAI-compatible and Anthropic summarizers is in
``test_summarizer_http.py``.
"""

from __future__ import annotations

import asyncio
import glob
import json
import random
import sys
import time
from pathlib import Path

import pytest
from tests.support.goldens import reference_entries

from sessiontree._jsjson import js_stringify
from sessiontree.compaction import serialize_conversation
from sessiontree.context import COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX, convert_to_llm
from sessiontree.summarizers import (
    ContextOverflowError,
    OfflineSummarizer,
    Pricing,
    RetriesExhaustedError,
    RetryPolicy,
    Summarizer,
    SummarizerError,
    SummaryRequest,
    SummaryUsage,
    TransientError,
    estimate_request_tokens,
    get_summarizer,
    is_context_overflow,
    merge_split_turn,
    output_budget,
    run_sync,
)
from sessiontree.summarizers.anthropic import usage_from_anthropic
from sessiontree.summarizers.offline import parse_conversation, parse_summary, parse_tool_calls
from sessiontree.summarizers.openai_compat import usage_from_openai
from sessiontree.summarizers.prompts import (
    BRANCH_SECTIONS,
    COMPACTION_INSTRUCTIONS,
    COMPACTION_SECTIONS,
    SYSTEM_PROMPT,
    TURN_PREFIX_INSTRUCTIONS,
    TURN_PREFIX_SECTIONS,
    UPDATE_INSTRUCTIONS,
    build_user_text,
)
from sessiontree.summarizers.retry import parse_retry_after, retry_call

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
COMPACT_GOLDENS = sorted(glob.glob(str(CORPUS / "pi-generated" / "*.compact.json")))


def _load(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


# ==== Output budget (Pi 1.6) ====


def _budget_cases() -> list[tuple[str, int, int, str, str, int]]:
    cases = []
    for path in COMPACT_GOLDENS:
        for variant, v in _load(path).items():
            if not (isinstance(v, dict) and v.get("llm_requests")):
                continue
            model = v["models_json"]["providers"]["fake"]["models"][0]
            for r in v["llm_requests"]:
                body = r["body"]
                cases.append(
                    (
                        f"{Path(path).name}:{variant}:{r['n']}",
                        model["maxTokens"],
                        model["contextWindow"],
                        body["messages"][0]["content"],
                        body["messages"][1]["content"][0]["text"],
                        body["max_completion_tokens"],
                    )
                )
    return cases


BUDGET_CASES = _budget_cases()


@pytest.mark.skipif(not BUDGET_CASES, reason="no compaction goldens")
def test_output_budget_matches_every_golden_request():
    small = [c for c in BUDGET_CASES if ":small_window_keep_0:" in c[0]]
    assert small, "expected small_window_keep_0 variants"
    assert any(c[5] == 1 for c in small) and any(1 < c[5] < 16384 for c in small)
    for where, max_tokens, window, system, user, expected in BUDGET_CASES:
        assert output_budget(max_tokens, window, estimate_request_tokens(system, user)) == expected, where


def test_output_budget_edges():
    assert output_budget(16384, None, 10**9) == 16384  # unknown window: no reduction
    assert output_budget(16384, 0, 10**9) == 16384
    assert output_budget(100, 200000, 10) == 100
    assert output_budget(16384, 8000, 8000) == 1  # input alone overflows: still ask for 1 token


# ==== Prompts and layout ====


def test_user_text_layout_follows_pi():
    plain = build_user_text(SummaryRequest("compaction", "[User]: a"))
    assert plain == "<conversation>\n[User]: a\n</conversation>\n\n" + COMPACTION_INSTRUCTIONS
    rolling = build_user_text(
        SummaryRequest("compaction", "[User]: a", previous_summary="PREV", custom_instructions="focus on tests")
    )
    assert rolling == (
        "<conversation>\n[User]: a\n</conversation>\n\n<previous-summary>\nPREV\n</previous-summary>\n\n"
        + UPDATE_INSTRUCTIONS
        + "\n\nAdditional focus: focus on tests"
    )
    prefix = build_user_text(SummaryRequest("turn_prefix", "[User]: a", custom_instructions="x"))
    assert (
        prefix == "# Conversation\n[User]: a\n\n# Instructions\n" + TURN_PREFIX_INSTRUCTIONS + "\n\nAdditional focus: x"
    )
    replaced = build_user_text(
        SummaryRequest("branch", "[User]: a", custom_instructions="ONLY THIS", replace_instructions=True)
    )
    assert replaced == "<conversation>\n[User]: a\n</conversation>\n\nONLY THIS"
    # empty strings count as absent (JavaScript truthiness, as in Pi)
    assert build_user_text(
        SummaryRequest("compaction", "c", previous_summary="", custom_instructions="")
    ) == build_user_text(SummaryRequest("compaction", "c"))


def test_prompts_ask_for_pis_exact_sections():
    for text, sections in (
        (COMPACTION_INSTRUCTIONS, COMPACTION_SECTIONS),
        (UPDATE_INSTRUCTIONS, COMPACTION_SECTIONS),
        (TURN_PREFIX_INSTRUCTIONS, TURN_PREFIX_SECTIONS),
    ):
        assert _headings(text) == list(sections)
    branch = build_user_text(SummaryRequest("branch", "c"))
    assert _headings(branch) == list(BRANCH_SECTIONS)  # stops after Next Steps
    assert "- [x]" in COMPACTION_INSTRUCTIONS and "- [ ]" in COMPACTION_INSTRUCTIONS
    assert "**[Decision]**:" in COMPACTION_INSTRUCTIONS


@pytest.mark.skipif(not COMPACT_GOLDENS, reason="no compaction goldens")
def test_prompts_are_our_own_wording():
    pi_texts = set()
    for path in COMPACT_GOLDENS:
        for v in _load(path).values():
            if isinstance(v, dict):
                for r in v.get("llm_requests") or ():
                    pi_texts.add(r["body"]["messages"][0]["content"])
                    text = r["body"]["messages"][1]["content"][0]["text"]
                    pi_texts.add(text[text.rfind("</conversation>\n\n") + 1 :][-400:])
    ours = [SYSTEM_PROMPT, COMPACTION_INSTRUCTIONS, UPDATE_INSTRUCTIONS, TURN_PREFIX_INSTRUCTIONS]
    for pi in pi_texts:
        for mine in ours:
            assert pi not in mine and mine not in pi
    # no sentence of ours is one of Pi's (format lines like "## Goal" aside)
    pi_lines = {line.strip() for t in pi_texts for line in t.splitlines() if len(line.strip()) > 40}
    our_lines = {line.strip() for t in ours for line in t.splitlines() if len(line.strip()) > 40}
    assert not (pi_lines & our_lines)


def test_split_turn_merge_is_pis_stored_form():
    assert merge_split_turn("A", "B") == "A\n\n---\n\n**Turn Context (split turn):**\n\nB"


# ==== Overflow matcher ====


@pytest.mark.parametrize(
    "status,message",
    [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"),
        (400, "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum"),
        (500, "exceeded max context length"),
        (400, "the request exceeds the available context size, try increasing it"),
        (400, "Your input exceeds the context window of this model"),
        (None, "This endpoint's maximum context length is 4096 tokens"),
        (413, ""),
        (400, "Trying to keep the first 9000 tokens when context the overflows. greater than the context length"),
    ],
)
def test_overflow_messages_are_recognised(status, message):
    assert is_context_overflow(status, message)


@pytest.mark.parametrize(
    "status,message",
    [
        (
            429,
            "Request too large for gpt-4o: Limit 30000, Requested 50000 tokens per min (TPM). maximum context length",
        ),
        (400, "Invalid API key"),
        (500, "Internal server error"),
        (None, ""),
        (400, "Rate limit: too many tokens per minute"),
    ],
)
def test_non_overflow_messages_are_not(status, message):
    assert not is_context_overflow(status, message)


# ==== Retry policy ====


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    p = RetryPolicy(base_delay=1, multiplier=2, max_delay=10, jitter=0)
    assert [p.backoff(i) for i in range(5)] == [1, 2, 4, 8, 10]
    j = RetryPolicy(base_delay=1, multiplier=2, max_delay=100, jitter=0.5)
    rng = random.Random(7)
    delays = [j.backoff(3, rng) for _ in range(200)]
    assert all(4 <= d <= 8 for d in delays) and len(set(delays)) > 100


def test_retry_after_parsing():
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    assert RetryPolicy(max_retry_after=5).delay_for(0, 6) is None
    assert RetryPolicy(max_retry_after=5).delay_for(0, 4) == 4


def test_retry_call_retries_transient_errors_only():
    calls = []
    sleeps = []

    async def fake_sleep(d):
        sleeps.append(d)

    async def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise TransientError("503", status=503, retry_after=0.5 if len(calls) == 2 else None)
        return "ok"

    policy = RetryPolicy(max_retries=5, base_delay=0.1, jitter=0)
    assert asyncio.run(retry_call(flaky, policy, sleep=fake_sleep)) == "ok"
    assert sleeps == [0.1, 0.5]

    async def overflow():
        calls.append(1)
        raise ContextOverflowError("too long")

    calls.clear()
    with pytest.raises(ContextOverflowError):
        asyncio.run(retry_call(overflow, policy, sleep=fake_sleep))
    assert len(calls) == 1

    async def always():
        raise TransientError("down", status=500)

    with pytest.raises(RetriesExhaustedError) as info:
        asyncio.run(retry_call(always, RetryPolicy(max_retries=2, base_delay=0), sleep=fake_sleep))
    assert info.value.attempts == 3 and info.value.status == 500


def test_retry_call_times_out_each_attempt():
    async def slow():
        await asyncio.sleep(5)

    t0 = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="timed out"):
        asyncio.run(retry_call(slow, RetryPolicy(max_retries=1, base_delay=0, timeout=0.05)))
    assert time.monotonic() - t0 < 1


# ==== Usage and cost ====


@pytest.mark.skipif(not COMPACT_GOLDENS, reason="no compaction goldens")
def test_openai_usage_maps_to_pis_stored_usage():
    checked = 0
    for path in COMPACT_GOLDENS:
        data = _load(path)
        fake_usage = data["fake_llm"]["usage"]
        for v in data.values():
            if not (isinstance(v, dict) and v.get("llm_requests")):
                continue
            prices = Pricing.from_pi(v["models_json"]["providers"]["fake"]["models"][0]["cost"])
            total = SummaryUsage()
            for _ in v["llm_requests"]:
                total = total + usage_from_openai(fake_usage, prices)
            for ex in v["exchanges"]:
                for e in ex["appended_entries"]:
                    if e.get("type") == "compaction":
                        assert total.to_pi() == e["usage"]
                        assert js_stringify(total.to_pi()) == js_stringify(e["usage"])  # same bytes on disk
                        checked += 1
    assert checked


def test_anthropic_usage_mapping_and_cost():
    u = usage_from_anthropic(
        {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 50},
        Pricing(3, 15, 0.3, 3.75),
    )
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (100, 20, 1000, 50, 1170)
    assert u.cost == {
        "input": (3 / 1e6) * 100,
        "output": (15 / 1e6) * 20,
        "cacheRead": (0.3 / 1e6) * 1000,
        "cacheWrite": (3.75 / 1e6) * 50,
        "total": (3 / 1e6) * 100 + (15 / 1e6) * 20 + (0.3 / 1e6) * 1000 + (3.75 / 1e6) * 50,
    }
    assert usage_from_anthropic(None).cost is None  # no price table: cost unknown


# ==== Factory and optional SDKs ====


def test_factory_defaults_to_offline_and_reads_the_environment(monkeypatch):
    assert isinstance(get_summarizer("offline"), OfflineSummarizer)
    assert isinstance(get_summarizer("offline"), Summarizer)
    with pytest.raises(ValueError, match="unknown summarizer"):
        get_summarizer("gpt")
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "k-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    s = get_summarizer("openai", model="m")
    assert s.model == "m" and s.base_url == "http://127.0.0.1:9/v1" and s._api_key == "k-env"
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ValueError, match="model"):
        get_summarizer("openai")
    pytest.importorskip("anthropic")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        get_summarizer("anthropic", model="claude")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a-env")
    assert get_summarizer("anthropic", model="claude")._api_key == "a-env"


def test_missing_sdk_names_the_extra(monkeypatch):
    import sessiontree.summarizers.openai_compat as oc

    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'sessiontree\[openai\]'"):
        oc.OpenAICompatSummarizer("m", api_key="k")
    import sessiontree.summarizers.anthropic as an

    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"pip install 'sessiontree\[anthropic\]'"):
        an.AnthropicSummarizer("m", api_key="k")


def test_run_sync_refuses_inside_a_running_loop():
    async def inner():
        coro = OfflineSummarizer().summarize(SummaryRequest("compaction", "x"))
        try:
            with pytest.raises(RuntimeError):
                run_sync(coro)
        finally:
            coro.close()

    asyncio.run(inner())


# ==== Offline summarizer ====


def test_tool_calls_are_parsed_from_pis_rendering():
    text = 'read(path="a; b.ts", limit=5); bash(command="echo \\"x, y\\"", timeout=30); edit(path="z.py", edits=[{"old":")"}])'
    assert parse_tool_calls(text) == [
        ("read", {"path": "a; b.ts", "limit": 5}),
        ("bash", {"command": 'echo "x, y"', "timeout": 30}),
        ("edit", {"path": "z.py", "edits": [{"old": ")"}]}),
    ]
    assert parse_tool_calls("weird(") == [("weird", {})]
    assert parse_tool_calls("") == []


CONVERSATION = "\n\n".join(
    [
        "[User]: Add a --json flag to the CLI. Do not change the default text output.",
        '[Assistant tool calls]: read(path="src/cli.py"); bash(command="pytest -q tests/test_cli.py")',
        "[Tool result]: def main(): ...",
        "[Tool result]: FAILED tests/test_cli.py::test_json - AssertionError: expected json\n1 failed",
        "[Assistant]: I'll use json.dumps instead of a template because it escapes strings correctly. Next I will add a test.",
        '[Assistant tool calls]: edit(path="src/cli.py", oldText="a", newText="b"); write(path="tests/test_json.py", content="x")',
        "[Tool result]: ok",
        "[User]: Also document the flag in README.md",
        '[Assistant tool calls]: bash(command="npm run docs")',
        "[Tool result]: Error: docs generator not installed",
    ]
)


def test_offline_fills_every_section_from_the_conversation():
    text = OfflineSummarizer().summarize_sync(SummaryRequest("compaction", CONVERSATION)).text
    assert _headings(text) == list(COMPACTION_SECTIONS)
    sections = parse_summary(text)
    assert sections["goal"] == ["Add a --json flag to the CLI. Do not change the default text output."]
    assert "Do not change the default text output." in sections["constraints"]
    assert "Edited `src/cli.py`" in sections["done"] and "Wrote `tests/test_json.py`" in sections["done"]
    assert any(d.startswith("Handled request: Add a --json flag") for d in sections["done"])
    assert sections["in_progress"] == ["Also document the flag in README.md"]
    assert sections["blocked"] == ["Error: docs generator not installed"]
    assert sections["decisions"] == [
        "**I'll use json.dumps instead of a template**: because it escapes strings correctly."
    ]
    assert sections["next"][0] == "Resolve: Error: docs generator not installed"
    assert any("README.md" in n for n in sections["next"])
    critical = "\n".join(sections["critical"])
    assert "FAILED tests/test_cli.py::test_json" in critical  # errors kept verbatim
    assert "`src/cli.py`" in critical and "bash×2" in critical


def test_offline_branch_and_turn_prefix_formats():
    s = OfflineSummarizer()
    branch = s.summarize_sync(SummaryRequest("branch", CONVERSATION)).text
    assert _headings(branch) == list(BRANCH_SECTIONS)
    prefix = s.summarize_sync(SummaryRequest("turn_prefix", CONVERSATION)).text
    assert _headings(prefix) == list(TURN_PREFIX_SECTIONS)
    assert prefix.splitlines()[1].startswith("Add a --json flag")


def test_offline_update_keeps_earlier_done_items_and_goal():
    s = OfflineSummarizer()
    first = s.summarize_sync(SummaryRequest("compaction", CONVERSATION)).text
    previous = first + "\n\n<read-files>\nsrc/cli.py\n</read-files>"
    later = "\n\n".join(
        [
            "[User]: Now release it. Never push on Fridays.",
            '[Assistant tool calls]: bash(command="git tag v1.2.0")',
            "[Tool result]: ",
            "[Assistant]: Tagged v1.2.0.",
        ]
    )
    updated = s.summarize_sync(SummaryRequest("compaction", later, previous_summary=previous)).text
    assert _headings(updated) == list(COMPACTION_SECTIONS)
    old, new = parse_summary(first), parse_summary(updated)
    assert new["goal"] == old["goal"]
    for item in old["done"]:
        assert item in new["done"]
    assert "Also document the flag in README.md" in new["done"]  # earlier In Progress moved to Done
    assert "Ran `git tag v1.2.0`" in new["done"]
    assert new["in_progress"] == ["Now release it. Never push on Fridays."]
    assert "Never push on Fridays." in new["constraints"] and old["constraints"][0] in new["constraints"]
    assert old["decisions"][0] in new["decisions"]
    assert "<read-files>" not in updated
    assert sum(1 for c in new["critical"] if c.startswith("Tool calls:")) == 1


def test_offline_merges_summaries_embedded_in_the_conversation():
    embedded = (
        COMPACTION_SUMMARY_PREFIX
        + "## Goal\nPort the TUI\n\n## Progress\n### Done\n- [x] Ported footer"
        + COMPACTION_SUMMARY_SUFFIX
    )
    conv = f"[User]: {embedded}\n\n[User]: now port the header"
    sections = parse_summary(OfflineSummarizer().summarize_sync(SummaryRequest("compaction", conv)).text)
    assert sections["goal"] == ["Port the TUI"] and "Ported footer" in sections["done"]
    assert sections["in_progress"] == ["now port the header"]


def test_offline_unstructured_previous_summary_is_not_lost():
    text = (
        OfflineSummarizer()
        .summarize_sync(SummaryRequest("compaction", "[User]: go on", previous_summary="SUMMARY for request 1"))
        .text
    )
    assert "SUMMARY for request 1" in text


def test_offline_handles_empty_and_odd_input():
    s = OfflineSummarizer()
    for conv in ("", "no tags at all", "[Tool result]: x", "[Assistant tool calls]: broken(path=", "\n\n\n"):
        text = s.summarize_sync(SummaryRequest("compaction", conv)).text
        assert _headings(text) == list(COMPACTION_SECTIONS)


def _corpus_conversations() -> list[tuple[str, str]]:
    out = []
    for folder in ("pi-generated", "real"):
        for path in sorted((CORPUS / folder).glob("*.jsonl")):
            loaded = reference_entries(path)
            if loaded is None:
                continue
            messages = [
                e["message"]
                for e in loaded[1]
                if isinstance(e, dict) and e.get("type") == "message" and isinstance(e.get("message"), dict)
            ]
            try:
                text = serialize_conversation(convert_to_llm(messages))
            except (ValueError, TypeError, AttributeError):
                continue  # Pi would throw on these messages too
            if text:
                out.append((f"{folder}/{path.name}", text))
    return out


CORPUS_CONVERSATIONS = _corpus_conversations()


@pytest.mark.skipif(not CORPUS_CONVERSATIONS, reason="no corpus")
def test_offline_summarizes_every_corpus_file_deterministically():
    s = OfflineSummarizer()
    for name, conv in CORPUS_CONVERSATIONS:
        for kind, sections in (
            ("compaction", COMPACTION_SECTIONS),
            ("branch", BRANCH_SECTIONS),
            ("turn_prefix", TURN_PREFIX_SECTIONS),
        ):
            req = SummaryRequest(kind, conv, custom_instructions="focus on tests")
            a = s.summarize_sync(req).text
            assert _headings(a) == list(sections), name
            assert a == s.summarize_sync(req).text, name
        parts = parse_conversation(conv)
        first_user = next((p.text for p in parts if p.role == "user" and not p.text.startswith("/")), None)
        goal = parse_summary(s.summarize_sync(SummaryRequest("compaction", conv)).text)["goal"]
        if first_user and not first_user.startswith(("Ran `", "The conversation history", "The following is")):
            assert goal and goal[0][:20] == " ".join(first_user.split())[:20], name


def test_offline_is_linear_and_fast():
    unit = CONVERSATION + "\n\n"
    s = OfflineSummarizer()

    def timed(copies: int) -> float:
        # CPU time of this process: on a shared CI machine, wall time also counts the time
        # other processes held the cores, which says nothing about this code.
        conv = unit * copies
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            s.summarize_sync(SummaryRequest("compaction", conv))
            best = min(best, time.process_time() - t0)
        return best

    small, big = timed(500), timed(4000)  # ~0.4 MB and ~3.3 MB
    # 8x the input: linear is ~8x, quadratic would be ~64x.
    assert big / max(small, 1e-3) < 8 * 2.5, (small, big)


def test_offline_usage_is_free_and_model_is_named():
    result = OfflineSummarizer().summarize_sync(SummaryRequest("compaction", CONVERSATION))
    assert result.model == "offline" and result.usage == SummaryUsage()
    assert result.usage.to_pi()["cost"]["total"] == 0


def test_summarizer_error_hierarchy():
    assert issubclass(ContextOverflowError, SummarizerError)
    assert issubclass(RetriesExhaustedError, SummarizerError) and issubclass(TransientError, SummarizerError)
