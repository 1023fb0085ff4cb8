"""The OpenAI-compatible and Anthropic summarizers against real HTTP servers on loopback.

Each test starts a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port) that speaks the
OpenAI chat-completions SSE stream or the Anthropic Messages event stream, and drives our
summarizers through the real SDKs: successes, 429 with Retry-After, 5xx, dropped connections,
exhausted retries, overflow errors (no retry), timeouts, cancellation, usage and cost. The last
tests replay every ``tests/corpus/pi-generated/*.compact.json`` request Pi 1.6 sent and compare
our request body's shape with it.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from sessiontree.summarizers import (
    AnthropicSummarizer,
    ContextOverflowError,
    OpenAICompatSummarizer,
    Pricing,
    RetriesExhaustedError,
    RetryPolicy,
    SummarizerError,
    SummaryRequest,
    SummaryUsage,
    estimate_request_tokens,
    output_budget,
)
from sessiontree.summarizers.prompts import SYSTEM_PROMPT, build_user_text

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated"
FAKE_USAGE = {
    "prompt_tokens": 1234,
    "completion_tokens": 56,
    "total_tokens": 1290,
    "prompt_tokens_details": {"cached_tokens": 0},
}
FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05, timeout=5.0)

# ==== A fake LLM server ====

Action = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection closes (simple SSE)

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake: FakeLLM = self.server.fake  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        record = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": json.loads(raw) if raw else None,
            "time": time.monotonic(),
        }
        with fake.lock:
            fake.requests.append(record)
            action = fake.script.pop(0) if fake.script else fake.default
        action(self)

    # -- helpers for actions --
    def send_sse_headers(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

    def write(self, text: str) -> None:
        self.wfile.write(text.encode("utf-8"))
        self.wfile.flush()


class FakeLLM:
    """A loopback server answering each POST with the next scripted action (then ``default``)."""

    def __init__(self, default: Action | None = None):
        self.script: list[Action] = []
        self.default: Action = default or openai_sse("SUMMARY")
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.client_closed = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return self.root + "/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeLLM()
    yield server
    server.close()


def openai_sse(text: str, usage: dict | None = None, model: str = "fake-model", pieces: int = 3) -> Action:
    """Stream ``text`` as OpenAI chat.completion.chunk events, then a usage chunk and [DONE]."""
    usage = FAKE_USAGE if usage is None else usage

    def act(h: _Handler) -> None:
        h.send_sse_headers()
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
        h.write(
            "data: "
            + json.dumps(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                }
            )
            + "\n\n"
        )
        step = max(1, len(text) // pieces)
        for i in range(0, len(text), step):
            h.write(
                "data: "
                + json.dumps(
                    {**base, "choices": [{"index": 0, "delta": {"content": text[i : i + step]}, "finish_reason": None}]}
                )
                + "\n\n"
            )
        h.write(
            "data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\n"
        )
        h.write("data: " + json.dumps({**base, "choices": [], "usage": usage}) + "\n\n")
        h.write("data: [DONE]\n\n")

    return act


def json_error(status: int, body: dict, headers: dict | None = None) -> Action:
    def act(h: _Handler) -> None:
        payload = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)

    return act


def drop_connection(h: _Handler) -> None:
    """Close the socket without any response (a reset / "server disconnected")."""
    h.close_connection = True


def slow_sse(h: _Handler) -> None:
    """Start a stream, then only send keep-alive comments for up to 10 s; note when the client
    goes away (a write fails)."""
    fake: FakeLLM = h.server.fake  # type: ignore[attr-defined]
    try:
        h.send_sse_headers()
        h.write(
            "data: "
            + json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": "part"}, "finish_reason": None}],
                }
            )
            + "\n\n"
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.02)
            h.write(": keep-alive\n\n")
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        fake.client_closed.set()


def hang(h: _Handler) -> None:
    """Accept the request and answer nothing for a while."""
    time.sleep(1.5)


def anthropic_sse(text: str, usage: dict | None = None, model: str = "claude-test") -> Action:
    usage = usage or {
        "input_tokens": 1000,
        "output_tokens": 1,
        "cache_read_input_tokens": 200,
        "cache_creation_input_tokens": 0,
    }

    def act(h: _Handler) -> None:
        h.send_sse_headers()

        def event(name: str, data: dict) -> None:
            h.write(f"event: {name}\ndata: {json.dumps(data)}\n\n")

        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        event("ping", {"type": "ping"})
        for i in range(0, len(text), 4):
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[i : i + 4]}},
            )
        event("content_block_stop", {"type": "content_block_stop", "index": 0})
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 42},
            },
        )
        event("message_stop", {"type": "message_stop"})

    return act


def anthropic_error(status: int, etype: str, message: str, headers: dict | None = None) -> Action:
    return json_error(status, {"type": "error", "error": {"type": etype, "message": message}}, headers)


def make_openai(fake: FakeLLM, **kw: Any) -> OpenAICompatSummarizer:
    kw.setdefault("retry", FAST)
    return OpenAICompatSummarizer("fake-model", api_key="fake-key", base_url=fake.openai_url, **kw)


def make_anthropic(fake: FakeLLM, **kw: Any) -> AnthropicSummarizer:
    kw.setdefault("retry", FAST)
    return AnthropicSummarizer("claude-test", api_key="fake-key", base_url=fake.root, **kw)


REQ = SummaryRequest("compaction", "[User]: fix the build\n\n[Assistant]: done", max_tokens=1000)
PI_PRICES = Pricing(input=1, output=2, cache_read=0.1, cache_write=1.25)


# ==== OpenAI-compatible ====


def test_openai_summary_streams_text_and_reports_usage_and_cost(fake):
    fake.script = [openai_sse("## Goal\nFix the build")]
    result = asyncio.run(make_openai(fake, pricing=PI_PRICES).summarize(REQ))
    assert result.text == "## Goal\nFix the build"
    assert result.model == "fake-model"
    assert result.usage.to_pi() == {
        "input": 1234,
        "output": 56,
        "cacheRead": 0,
        "cacheWrite": 0,
        "reasoning": 0,
        "totalTokens": 1290,
        "cost": {
            "input": 0.0012339999999999999,
            "output": 0.000112,
            "cacheRead": 0.0,
            "cacheWrite": 0.0,
            "total": 0.0013459999999999998,
            "totalFromProvider": False,
        },
    }
    (req,) = fake.requests
    assert req["path"] == "/v1/chat/completions"
    assert list(req["body"]) == ["model", "messages", "stream", "stream_options", "store", "max_completion_tokens"]
    assert req["body"]["store"] is False and req["body"]["stream"] is True
    assert req["body"]["max_completion_tokens"] == 1000
    assert req["headers"]["authorization"] == "Bearer fake-key"
    assert req["headers"]["x-stainless-retry-count"] == "0"


def test_openai_cached_tokens_are_counted_apart_from_input(fake):
    fake.script = [
        openai_sse(
            "S",
            usage={
                "prompt_tokens": 1000,
                "completion_tokens": 10,
                "total_tokens": 1010,
                "prompt_tokens_details": {"cached_tokens": 600},
                "completion_tokens_details": {"reasoning_tokens": 4},
            },
        )
    ]
    usage = asyncio.run(make_openai(fake, pricing=PI_PRICES).summarize(REQ)).usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.reasoning, usage.total_tokens) == (
        400,
        10,
        600,
        0,
        4,
        1010,
    )
    assert usage.cost["cacheRead"] == (0.1 / 1000000) * 600
    assert usage.cost["total"] == usage.cost["input"] + usage.cost["output"] + usage.cost["cacheRead"] + 0.0


def test_openai_provider_reported_cost_is_kept(fake):
    fake.script = [openai_sse("S", usage={**FAKE_USAGE, "cost": 0.5})]
    usage = asyncio.run(make_openai(fake).summarize(REQ)).usage
    assert usage.cost["total"] == 0.5 and usage.cost_from_provider is True


def test_each_call_sends_a_fresh_request_id_never_reused(fake):
    s = make_openai(fake)
    asyncio.run(s.summarize(REQ))
    asyncio.run(s.summarize(REQ))
    ids = [r["headers"]["x-client-request-id"] for r in fake.requests]
    assert len(set(ids)) == 2 and all(len(i) == 36 for i in ids)
    asyncio.run(s.summarize(SummaryRequest("compaction", "x", request_id="fixed-id")))
    assert fake.requests[-1]["headers"]["x-client-request-id"] == "fixed-id"


def test_rate_limit_waits_for_retry_after_then_succeeds(fake):
    fake.script = [
        json_error(
            429,
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            {"retry-after-ms": "300", "retry-after": "1"},
        ),
        openai_sse("ok"),
    ]
    result = asyncio.run(make_openai(fake).summarize(REQ))
    assert result.text == "ok"
    assert len(fake.requests) == 2
    gap = fake.requests[1]["time"] - fake.requests[0]["time"]
    assert 0.28 <= gap < 1.0  # retry-after-ms wins over retry-after
    # the same per-call id on the retry of one call
    assert fake.requests[0]["headers"]["x-client-request-id"] == fake.requests[1]["headers"]["x-client-request-id"]


def test_rate_limit_retry_after_seconds_is_honoured(fake):
    fake.script = [json_error(429, {"error": {"message": "slow down"}}, {"retry-after": "1"}), openai_sse("ok")]
    assert asyncio.run(make_openai(fake).summarize(REQ)).text == "ok"
    assert fake.requests[1]["time"] - fake.requests[0]["time"] >= 0.95


def test_retry_after_longer_than_the_limit_fails_without_waiting(fake):
    fake.script = [json_error(429, {"error": {"message": "quota"}}, {"retry-after": "3600"})]
    policy = RetryPolicy(max_retries=3, base_delay=0.01, max_retry_after=60, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="asked to wait"):
        asyncio.run(make_openai(fake, retry=policy).summarize(REQ))
    assert time.monotonic() - t0 < 2 and len(fake.requests) == 1


def test_server_errors_are_retried_with_backoff_then_succeed(fake):
    fake.script = [
        json_error(500, {"error": {"message": "boom"}}),
        json_error(503, {"error": {"message": "busy"}}),
        json_error(502, {"error": {"message": "bad gateway"}}),
        openai_sse("ok"),
    ]
    assert asyncio.run(make_openai(fake).summarize(REQ)).text == "ok"
    assert len(fake.requests) == 4


def test_dropped_connection_is_retried(fake):
    fake.script = [drop_connection, openai_sse("ok")]
    assert asyncio.run(make_openai(fake).summarize(REQ)).text == "ok"
    assert len(fake.requests) == 2


def test_stream_cut_mid_answer_is_retried(fake):
    def truncated(h: _Handler) -> None:
        h.send_sse_headers()
        h.write(
            "data: "
            + json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "m",
                    "choices": [{"index": 0, "delta": {"content": "## Go"}, "finish_reason": None}],
                }
            )
            + "\n\n"
        )

    fake.script = [truncated, openai_sse("complete")]
    assert asyncio.run(make_openai(fake).summarize(REQ)).text == "complete"
    assert len(fake.requests) == 2


def test_exhausted_retries_raise_summarizer_error(fake):
    fake.default = json_error(500, {"error": {"message": "always down"}})
    policy = RetryPolicy(max_retries=2, base_delay=0.01, timeout=5)
    with pytest.raises(RetriesExhaustedError) as info:
        asyncio.run(make_openai(fake, retry=policy).summarize(REQ))
    assert isinstance(info.value, SummarizerError)
    assert info.value.attempts == 3 and info.value.status == 500 and "always down" in str(info.value)
    assert len(fake.requests) == 3


def test_client_errors_are_not_retried(fake):
    fake.default = json_error(401, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}})
    with pytest.raises(SummarizerError, match="401") as info:
        asyncio.run(make_openai(fake).summarize(REQ))
    assert not isinstance(info.value, (ContextOverflowError, RetriesExhaustedError))
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "status,body",
    [
        (
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens. However, your messages "
                    "resulted in 9000 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
        ),  # OpenAI / vLLM
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
        ),  # llama.cpp server
        (500, {"error": {"message": "exceeded max context length", "type": "api_error"}}),  # Ollama
        (
            400,
            {"error": {"message": "This endpoint's maximum context length is 8192 tokens", "code": 400}},
        ),  # OpenRouter
    ],
)
def test_context_overflow_raises_at_once_without_retry(fake, status, body):
    fake.default = json_error(status, body)
    with pytest.raises(ContextOverflowError):
        asyncio.run(make_openai(fake).summarize(REQ))
    assert len(fake.requests) == 1


def test_error_event_inside_the_stream_is_classified(fake):
    def stream_error(h: _Handler) -> None:
        h.send_sse_headers()
        h.write("data: " + json.dumps({"error": {"message": "prompt is too long", "code": 400}}) + "\n\n")

    fake.script = [stream_error]
    with pytest.raises(ContextOverflowError):
        asyncio.run(make_openai(fake).summarize(REQ))
    assert len(fake.requests) == 1


def test_empty_answer_is_an_error(fake):
    fake.default = openai_sse("")
    with pytest.raises(SummarizerError, match="empty"):
        asyncio.run(make_openai(fake).summarize(REQ))


def test_a_hanging_server_times_out_per_attempt(fake):
    fake.default = hang
    policy = RetryPolicy(max_retries=1, base_delay=0.01, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="timed out|connection error"):
        asyncio.run(make_openai(fake, retry=policy).summarize(REQ))
    assert time.monotonic() - t0 < 1.5
    assert len(fake.requests) == 2


def test_cancelling_the_task_aborts_the_http_request(fake):
    fake.default = slow_sse

    async def scenario() -> float:
        task = asyncio.create_task(make_openai(fake).summarize(REQ))
        for _ in range(200):  # wait until the server is streaming
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    elapsed = asyncio.run(scenario())
    assert elapsed < 0.5
    assert fake.client_closed.wait(3), "the server never saw the connection close"
    assert len(fake.requests) == 1  # no retry after a cancel


def test_sync_facade(fake):
    assert make_openai(fake).summarize_sync(REQ).text == "SUMMARY"


def test_summarizer_computes_its_own_budget_from_its_context_window(fake):
    s = make_openai(fake, context_window=8000, max_output_tokens=16384)
    req = SummaryRequest("compaction", "[User]: " + "word " * 3000, max_tokens=16384)
    asyncio.run(s.summarize(req))
    expected = output_budget(16384, 8000, estimate_request_tokens(SYSTEM_PROMPT, build_user_text(req)))
    assert fake.requests[0]["body"]["max_completion_tokens"] == expected < 16384


# ==== Anthropic ====


def test_anthropic_summary_streams_text_with_usage_and_no_cache_control(fake):
    fake.script = [anthropic_sse("## Goal\nShip")]
    result = asyncio.run(make_anthropic(fake, pricing=PI_PRICES).summarize(REQ))
    assert result.text == "## Goal\nShip" and result.model == "claude-test"
    u = result.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (1000, 42, 200, 0, 1242)
    assert u.cost["input"] == (1 / 1000000) * 1000 and u.cost["cacheRead"] == (0.1 / 1000000) * 200
    (req,) = fake.requests
    assert req["path"] == "/v1/messages"
    body = req["body"]
    assert body["stream"] is True and body["max_tokens"] == 1000 and body["system"] == SYSTEM_PROMPT
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": build_user_text(REQ)}]
    assert "cache_control" not in json.dumps(body)
    assert len(body["metadata"]["user_id"]) == 36
    assert "fake-key" in (req["headers"].get("x-api-key", "") + req["headers"].get("authorization", ""))


def test_anthropic_overloaded_is_retried_then_succeeds(fake):
    fake.script = [
        anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
        anthropic_sse("ok"),
    ]
    assert asyncio.run(make_anthropic(fake).summarize(REQ)).text == "ok"
    assert len(fake.requests) == 3
    ids = {r["body"]["metadata"]["user_id"] for r in fake.requests}
    assert len(ids) == 1  # one call, one id across its retries


def test_anthropic_prompt_too_long_is_context_overflow(fake):
    fake.default = anthropic_error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    with pytest.raises(ContextOverflowError):
        asyncio.run(make_anthropic(fake).summarize(REQ))
    assert len(fake.requests) == 1


def test_anthropic_error_event_mid_stream_is_retried(fake):
    def overloaded_event(h: _Handler) -> None:
        h.send_sse_headers()
        h.write(
            "event: error\ndata: "
            + json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            + "\n\n"
        )

    fake.script = [overloaded_event, anthropic_sse("ok")]
    assert asyncio.run(make_anthropic(fake).summarize(REQ)).text == "ok"
    assert len(fake.requests) == 2


def test_anthropic_stream_cut_mid_answer_is_retried(fake):
    def truncated(h: _Handler) -> None:
        h.send_sse_headers()
        h.write(
            "event: message_start\ndata: "
            + json.dumps(
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
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    },
                }
            )
            + "\n\n"
        )

    fake.script = [truncated, anthropic_sse("complete")]
    assert asyncio.run(make_anthropic(fake).summarize(REQ)).text == "complete"
    assert len(fake.requests) == 2


def test_anthropic_exhausted_retries(fake):
    fake.default = anthropic_error(500, "api_error", "Internal server error")
    with pytest.raises(RetriesExhaustedError):
        asyncio.run(make_anthropic(fake, retry=RetryPolicy(max_retries=1, base_delay=0.01, timeout=5)).summarize(REQ))
    assert len(fake.requests) == 2


def test_anthropic_cancel_aborts_the_request(fake):
    fake.default = slow_sse  # any slow stream will do: the client must hang up

    async def scenario() -> None:
        task = asyncio.create_task(make_anthropic(fake).summarize(REQ))
        for _ in range(200):
            if fake.requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    t0 = time.monotonic()
    asyncio.run(scenario())
    assert time.monotonic() - t0 < 2
    assert fake.client_closed.wait(3)


# ==== Replaying Pi 1.6's recorded summary requests ====


def _golden_cases() -> list[tuple[str, str, int, dict, dict]]:
    cases = []
    for path in sorted(glob.glob(str(CORPUS / "*.compact.json"))):
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for variant, v in data.items():
            if isinstance(v, dict) and v.get("llm_requests"):
                cases.append((os.path.basename(path), variant, len(v["llm_requests"]), v, data))
    return cases


GOLDEN_CASES = _golden_cases()


def parse_pi_user_text(text: str) -> dict:
    """Split Pi's user text back into kind, conversation, previous summary and custom focus."""
    custom = None
    if "\n\nAdditional focus: " in text:
        text, custom = text.rsplit("\n\nAdditional focus: ", 1)
    if text.startswith("# Conversation\n"):
        end = text.rfind("\n\n# Instructions\n")
        return {
            "kind": "turn_prefix",
            "conversation": text[len("# Conversation\n") : end],
            "previous_summary": None,
            "custom_instructions": custom,
        }
    assert text.startswith("<conversation>\n")
    end = text.find("\n</conversation>\n\n<previous-summary>\n")
    previous = None
    if end >= 0:
        start = end + len("\n</conversation>\n\n<previous-summary>\n")
        previous = text[start : text.rfind("\n</previous-summary>\n\n")]
    else:
        end = text.rfind("\n</conversation>\n\n")
    return {
        "kind": "compaction",
        "conversation": text[len("<conversation>\n") : end],
        "previous_summary": previous,
        "custom_instructions": custom,
    }


@pytest.mark.skipif(not GOLDEN_CASES, reason="no compaction goldens with llm_requests")
def test_request_bodies_have_pis_shape_for_every_golden_request():
    async def replay_all(server: FakeLLM) -> int:
        checked = 0
        for name, variant, _, v, data in GOLDEN_CASES:
            model = v["models_json"]["providers"]["fake"]["models"][0]
            window, max_tokens = model["contextWindow"], model["maxTokens"]
            summarizer = OpenAICompatSummarizer(
                model["id"],
                api_key="fake-key",
                base_url=server.openai_url,
                pricing=Pricing.from_pi(model["cost"]),
                retry=FAST,
            )
            total = SummaryUsage()
            for n, pi_req in enumerate(v["llm_requests"], 1):
                pi_body = pi_req["body"]
                pi_system = pi_body["messages"][0]["content"]
                pi_user = pi_body["messages"][1]["content"][0]["text"]
                budget = output_budget(max_tokens, window, estimate_request_tokens(pi_system, pi_user))
                where = f"{name} {variant} request {n}"
                assert budget == pi_body["max_completion_tokens"], where
                parsed = parse_pi_user_text(pi_user)
                req = SummaryRequest(
                    parsed["kind"],
                    parsed["conversation"],
                    parsed["previous_summary"],
                    parsed["custom_instructions"],
                    max_tokens=budget,
                )
                server.script = [
                    openai_sse(
                        data["fake_llm"].get("text", f"SUMMARY for request {n}")
                        if isinstance(data.get("fake_llm"), dict)
                        else f"SUMMARY for request {n}",
                        usage=FAKE_USAGE,
                    )
                ]
                result = await summarizer.summarize(req)
                total = total + result.usage
                ours = server.requests[-1]["body"]
                assert list(ours) == list(pi_body), where
                assert ours["model"] == pi_body["model"]
                assert ours["stream"] is True and ours["store"] is False
                assert ours["stream_options"] == pi_body["stream_options"] == {"include_usage": True}
                assert ours["max_completion_tokens"] == pi_body["max_completion_tokens"], where
                assert [m["role"] for m in ours["messages"]] == [m["role"] for m in pi_body["messages"]]
                assert isinstance(ours["messages"][0]["content"], str)
                assert [b["type"] for b in ours["messages"][1]["content"]] == ["text"]
                text = ours["messages"][1]["content"][0]["text"]
                if parsed["kind"] == "turn_prefix":
                    assert text.startswith(f"# Conversation\n{parsed['conversation']}\n\n# Instructions\n"), where
                else:
                    head = f"<conversation>\n{parsed['conversation']}\n</conversation>\n\n"
                    if parsed["previous_summary"] is not None:
                        head += f"<previous-summary>\n{parsed['previous_summary']}\n</previous-summary>\n\n"
                    assert text.startswith(head), where
                if parsed["custom_instructions"]:
                    assert text.endswith(f"\n\nAdditional focus: {parsed['custom_instructions']}"), where
                else:
                    assert "Additional focus:" not in text[-200:], where
                checked += 1
            # Usage summed over the variant's calls is what Pi stored in the compaction entry.
            stored = [e for ex in v["exchanges"] for e in ex["appended_entries"] if e.get("type") == "compaction"]
            if stored:
                assert total.to_pi() == stored[0]["usage"], f"{name} {variant}"
        return checked

    server = FakeLLM()
    try:
        assert asyncio.run(replay_all(server)) == sum(c[2] for c in GOLDEN_CASES)
    finally:
        server.close()


# ==== secrets echoed back (issue 11 item 4) ====

SECRET = "sk-live-0123456789abcdefSECRET"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("status", [401, 500])
def test_an_api_key_echoed_by_the_server_never_appears_in_errors(fake, provider, status):
    """A server quoting the request's credentials in its error body (some proxies echo the
    ``Authorization`` header): the exception text, the errors it wraps and its cause chain are
    redacted, through the real SDKs. 500 is retried first (the echo is in every attempt)."""
    echo = (
        f"invalid credentials: Authorization: Bearer {SECRET}; x-api-key={SECRET}; "
        f"also bearer tok-987654321 and key {SECRET[:-6]}"
    )
    if provider == "openai":
        fake.default = json_error(status, {"error": {"message": echo, "code": "invalid_api_key"}})
        summ = OpenAICompatSummarizer(
            "fake-model",
            api_key=SECRET,
            base_url=fake.openai_url,
            retry=FAST,
            default_headers={"X-Api-Key": "hdr-secret-value"},
        )
    else:
        fake.default = anthropic_error(status, "authentication_error", echo)
        summ = AnthropicSummarizer("claude-test", api_key=SECRET, base_url=fake.root, retry=FAST)
    with pytest.raises(SummarizerError) as info:
        asyncio.run(summ.summarize(REQ))
    assert str(status) in str(info.value)
    seen = []
    e: BaseException | None = info.value
    while e is not None:
        seen.append(repr(e) + str(e) + repr(getattr(e, "last_error", None)))
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    text = "\n".join(seen)
    assert "[REDACTED]" in text
    for leaked in (SECRET, SECRET[:-6], "tok-987654321", "hdr-secret-value"):
        assert leaked not in text, text
    import traceback

    shown = "".join(traceback.format_exception(info.value))
    assert SECRET[:-6] not in shown and "tok-987654321" not in shown
