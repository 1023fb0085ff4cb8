"""Summaries that cannot poison a session, through the real OpenAI and Anthropic SDKs against a
loopback server (tests/summarizers/test_summarizer_http.py's FakeLLM): a summary cut off at the budget, an
empty one, a far oversized one, a budget too small to ask for, a leaf that moved while the
summary was written, and two compactions of one session at once. In every refused case nothing
is appended."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from tests.summarizers.test_summarizer_http import FakeLLM, _Handler, make_anthropic, make_openai  # noqa: E402

from sessiontree import CompactionSettings, Session  # noqa: E402
from sessiontree.errors import LeafMovedError  # noqa: E402
from sessiontree.orchestration import AlreadyCompactedError  # noqa: E402
from sessiontree.summarizers import (
    EmptySummaryError,
    OversizedSummaryError,
    SummarizerError,  # noqa: E402
    SummaryBudgetError,
    TruncatedSummaryError,
)

KEEP = CompactionSettings(keep_recent_tokens=300)


@pytest.fixture
def fake():
    server = FakeLLM()
    yield server
    server.close()


def _session(tmp_path, turns: int = 12) -> Session:
    s = Session.create("/work", session_dir=tmp_path)
    for i in range(turns):
        s.append_message({"role": "user", "content": f"question {i} " + "q" * 300, "timestamp": i})
        s.append_message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"answer {i} " + "a" * 300}],
                "provider": "p",
                "model": "m",
                "stopReason": "stop",
                "timestamp": i,
            }
        )
    return s


def openai_stop(text: str, finish_reason: str) -> object:
    """An OpenAI stream whose last choice ends with ``finish_reason``."""

    def act(h: _Handler) -> None:
        h.send_sse_headers()
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model"}
        if text:
            h.write(
                "data: "
                + json.dumps(
                    {
                        **base,
                        "choices": [
                            {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
                        ],
                    }
                )
                + "\n\n"
            )
        h.write(
            "data: "
            + json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
            + "\n\n"
        )
        h.write(
            "data: "
            + json.dumps(
                {**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}
            )
            + "\n\n"
        )
        h.write("data: [DONE]\n\n")

    return act


def anthropic_stop(text: str, stop_reason: str) -> object:
    def act(h: _Handler) -> None:
        h.send_sse_headers()

        def event(name: str, data: dict) -> None:
            h.write(f"event: {name}\ndata: {json.dumps(data)}\n\n")

        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        if text:
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            )
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 42},
            },
        )
        event("message_stop", {"type": "message_stop"})

    return act


SDKS = {
    "openai": (make_openai, openai_stop),
    "anthropic": (make_anthropic, anthropic_stop),
}


@pytest.mark.parametrize("sdk", SDKS)
def test_a_summary_cut_off_at_the_budget_is_refused(fake, tmp_path, sdk):
    make, stop = SDKS[sdk]
    fake.default = stop("## Goal\nHalf a summ", "length" if sdk == "openai" else "max_tokens")
    s = _session(tmp_path)
    n = len(s)
    with pytest.raises(TruncatedSummaryError) as info:
        s.compact(make(fake), settings=KEEP)
    assert len(s) == n and info.value.result.stop_reason == "length"
    assert info.value.result.usage.output > 0  # what was paid for is reported
    # opting in keeps it
    result = s.compact(make(fake), settings=KEEP, accept_suspect_summary=True)
    assert len(s) == n + 1 and result.summary.startswith("## Goal\nHalf a summ")


@pytest.mark.parametrize("sdk", SDKS)
def test_an_empty_summary_is_refused_even_when_opted_in(fake, tmp_path, sdk):
    make, stop = SDKS[sdk]
    fake.default = stop("  \n", "stop" if sdk == "openai" else "end_turn")
    s = _session(tmp_path)
    n = len(s)
    for accept in (False, True):
        with pytest.raises(EmptySummaryError):
            s.compact(make(fake), settings=KEEP, accept_suspect_summary=accept)
    assert len(s) == n


@pytest.mark.parametrize("sdk", SDKS)
def test_a_far_oversized_summary_is_refused(fake, tmp_path, sdk):
    make, stop = SDKS[sdk]
    fake.default = stop("## Goal\n" + "word " * 20000, "stop" if sdk == "openai" else "end_turn")  # ~29k tokens
    s = _session(tmp_path)
    n = len(s)
    with pytest.raises(OversizedSummaryError):
        s.compact(make(fake, max_output_tokens=1000), settings=KEEP)  # asked for at most 1000
    assert len(s) == n
    result = s.compact(make(fake, max_output_tokens=1000), settings=KEEP, accept_suspect_summary=True)
    assert len(s) == n + 1 and len(result.summary) > 100_000


def test_a_huge_streamed_reply_is_not_read_to_the_end(fake, tmp_path):
    # a 100 MB reply to a 16k-token request: the summarizer stops reading past its cap
    def huge(h: _Handler) -> None:
        h.send_sse_headers()
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake-model"}
        chunk = (
            "data: "
            + json.dumps({**base, "choices": [{"index": 0, "delta": {"content": "x" * 65536}, "finish_reason": None}]})
            + "\n\n"
        )
        try:
            for _ in range(1600):
                h.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            fake.client_closed.set()

    fake.default = huge
    s = _session(tmp_path)
    n = len(s)
    with pytest.raises(OversizedSummaryError):
        s.compact(make_openai(fake), settings=KEEP, accept_suspect_summary=True)
    assert len(s) == n


@pytest.mark.parametrize("sdk", SDKS)
def test_a_budget_below_the_minimum_is_an_error_and_nothing_is_sent(fake, tmp_path, sdk):
    make, _ = SDKS[sdk]
    s = _session(tmp_path)
    n = len(s)
    with pytest.raises(SummaryBudgetError) as info:
        s.compact(make(fake, context_window=4500), settings=KEEP)  # the request alone fills it
    assert info.value.budget < info.value.minimum
    assert fake.requests == [] and len(s) == n


@pytest.mark.parametrize("sdk", SDKS)
def test_a_compaction_is_never_appended_after_the_leaf_moved(fake, tmp_path, sdk):
    make, stop = SDKS[sdk]
    s = _session(tmp_path)
    other = s.get_branch()[5].id

    def navigate_then_answer(h: _Handler) -> None:
        s.branch(other)  # another task moved the leaf while the model was writing
        stop("## Goal\nA summary of the old branch", "stop" if sdk == "openai" else "end_turn")(h)

    fake.default = navigate_then_answer
    n = len(s)
    with pytest.raises(LeafMovedError):
        s.compact(make(fake), settings=KEEP)
    assert len(s) == n and s.leaf_id == other
    assert all(e.type != "compaction" for e in s.entries())


@pytest.mark.parametrize("sdk", SDKS)
def test_two_concurrent_compactions_pay_and_append_once(fake, tmp_path, sdk):
    make, stop = SDKS[sdk]
    fake.default = stop("## Goal\nOne summary", "stop" if sdk == "openai" else "end_turn")
    s = _session(tmp_path)
    n = len(s)

    async def both():
        summarizer = make(fake)
        return await asyncio.gather(
            s.acompact(summarizer, settings=KEEP), s.acompact(summarizer, settings=KEEP), return_exceptions=True
        )

    results = asyncio.run(both())
    assert sum(isinstance(r, AlreadyCompactedError) for r in results) == 1
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert len(s) == n + 1
    assert len(fake.requests) == 1  # the second never paid


def test_summary_errors_are_summarizer_errors():
    for cls in (TruncatedSummaryError, EmptySummaryError, OversizedSummaryError, SummaryBudgetError):
        assert issubclass(cls, SummarizerError)


def test_a_hook_compacting_the_same_session_is_refused_not_deadlocked(tmp_path):
    from sessiontree.errors import SessionError

    s = _session(tmp_path)
    seen = []

    async def hook(event):
        try:
            await asyncio.wait_for(s.acompact(None, settings=KEEP), timeout=5)
        except Exception as exc:  # noqa: BLE001 - recorded and checked below
            seen.append(exc)

    s.hooks.before_compact.append(hook)
    n = len(s)
    s.compact(None, settings=KEEP)
    assert len(seen) == 1 and isinstance(seen[0], SessionError) and "inside a compaction" in str(seen[0])
    assert len(s) == n + 1  # the outer compaction went on
