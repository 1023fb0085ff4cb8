"""Summaries through the Anthropic Messages API, via the official ``anthropic`` SDK.

The request mirrors Pi's summary call for ``anthropic-messages`` models: the same system and
user texts as the OpenAI-compatible summarizer (:mod:`.prompts`), streamed::

    {"model": ..., "max_tokens": <budget>, "system": <SYSTEM_PROMPT>,
     "messages": [{"role": "user", "content": [{"type": "text", "text": <user text>}]}],
     "metadata": {"user_id": <fresh UUID>}, "stream": true}

No ``cache_control`` anywhere (no prompt-cache writes for these one-off prompts); the fresh
``metadata.user_id`` per call keeps summary calls apart from the session's own traffic. The
SDK's retries are off (``max_retries=0``); :mod:`.retry` decides. "prompt is too long" (and other
overflow texts, :mod:`.overflow`) raise
:class:`~sessiontree.summarizers.base.ContextOverflowError` at once; 429/529 "overloaded" and
5xx are retried.

Requires the optional extra: ``pip install 'sessiontree[anthropic]'``
(from a source checkout: ``pip install '.[anthropic]'``).
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Mapping

from .base import (
    ContextOverflowError,
    Pricing,
    SummarizerError,
    SummaryRequest,
    SummaryResult,
    SummaryUsage,
    EmptySummaryError,
    StreamedText,
    import_sdk,
    run_sync,
    token_count,
)
from .overflow import is_context_overflow
from .prompts import build_prompt
from .retry import RetryPolicy, TransientError, is_transient_status
from .sdk import as_dict, call_retried, client_options, convert_sdk_error, error_fields, output_tokens

__all__ = ["AnthropicSummarizer", "usage_from_anthropic", "import_anthropic"]

_INSTALL_HINT = (
    "the Anthropic summarizer needs the anthropic package: pip install 'sessiontree[anthropic]' "
    "(from a source checkout: pip install '.[anthropic]')"
)
# Error types Anthropic sends (also as stream ``error`` events) that are worth a retry.
_TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


def import_anthropic() -> Any:
    """The ``anthropic`` module, or ImportError with the install command."""
    return import_sdk("anthropic", _INSTALL_HINT)


def usage_from_anthropic(raw: Mapping[str, Any] | None, pricing: Pricing | None = None) -> SummaryUsage:
    """Map an Anthropic ``usage`` object (a dict) to :class:`SummaryUsage` (Pi's mapping):
    ``input_tokens`` -> input, ``output_tokens`` -> output, ``cache_read_input_tokens`` ->
    cache_read, ``cache_creation_input_tokens`` -> cache_write, total = their sum; cost from
    ``pricing`` (Pi ``calculateCost``).

        >>> usage_from_anthropic({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2}).total_tokens
        17
    """
    raw = raw or {}
    inp, out = token_count(raw.get("input_tokens")), token_count(raw.get("output_tokens"))
    read, write = token_count(raw.get("cache_read_input_tokens")), token_count(raw.get("cache_creation_input_tokens"))
    return SummaryUsage(
        input=inp, output=out, cache_read=read, cache_write=write, total_tokens=inp + out + read + write
    ).priced(pricing)


def _error_type_and_text(exc: Any) -> tuple[str | None, str]:
    """The error's Anthropic ``type`` (None when absent) and its text: the message, the body's
    ``message``, then the type."""
    inner, parts = error_fields(exc, ("message",))
    etype = inner.get("type") if isinstance(inner.get("type"), str) else None
    if etype:
        parts.append(etype)
    return etype, " | ".join(parts)


def _transient(exc: Any, status: int, headers: Mapping[str, str] | None) -> bool:
    # A stream ``error`` event arrives on a 200 response: its type decides.
    etype, _ = _error_type_and_text(exc)
    return etype in _TRANSIENT_TYPES or (status >= 400 and is_transient_status(status, headers))


def _stream_error(exc: Any) -> SummarizerError:
    _, text = _error_type_and_text(exc)
    if is_context_overflow(None, text):
        return ContextOverflowError(f"context overflow: {text}")
    return TransientError(f"stream error: {text}")


def _convert_error(exc: BaseException, anthropic: Any) -> SummarizerError:
    """Classify an SDK/transport exception: overflow, transient (retry) or fatal
    (:func:`.sdk.convert_sdk_error`)."""
    return convert_sdk_error(
        exc,
        anthropic,
        error_text=lambda e: _error_type_and_text(e)[1],
        transient=_transient,
        stream_error=_stream_error,
    )


class AnthropicSummarizer:
    """Summarize with an Anthropic model (Messages API, streamed).

    Args:
        model: the summarizing model id (may differ from the session's model).
        api_key: defaults to ``$ANTHROPIC_API_KEY``; ValueError when missing.
        base_url: defaults to ``$ANTHROPIC_BASE_URL``, then the SDK's default.
        pricing, retry, max_output_tokens, context_window: as for
            :class:`~sessiontree.summarizers.openai_compat.OpenAICompatSummarizer`.
        default_headers: passed to the SDK client.

    ``await summarize(request)`` -> :class:`SummaryResult`; raises ContextOverflowError,
    RetriesExhaustedError or SummarizerError. Cancelling the awaiting task closes the connection.
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        pricing: Pricing | None = None,
        retry: RetryPolicy | None = None,
        max_output_tokens: int | None = None,
        context_window: int | None = None,
        default_headers: Mapping[str, str] | None = None,
    ):
        self._anthropic = import_anthropic()
        if not model:
            raise ValueError("AnthropicSummarizer needs a model id (model=...)")
        self.model = model
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key=... or set ANTHROPIC_API_KEY")
        self._api_key = key
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.pricing = pricing
        self.retry = retry or RetryPolicy()
        self.max_output_tokens = max_output_tokens
        self.context_window = context_window
        self.default_headers = dict(default_headers or {})

    def max_tokens(self, request: SummaryRequest, system: str, user_text: str) -> int:
        """Output budget, as :meth:`OpenAICompatSummarizer.max_completion_tokens`
        (:func:`.sdk.output_tokens`)."""
        return output_tokens(request, system, user_text, self.max_output_tokens, self.context_window)

    def build_params(self, request: SummaryRequest) -> dict[str, Any]:
        """Keyword arguments for ``client.messages.create`` (the request body)."""
        system, user_text = build_prompt(request)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens(request, system, user_text),
            "system": system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": user_text}]}],
            "metadata": {"user_id": request.request_id or str(uuid.uuid4())},
            "stream": True,
        }

    def _client(self) -> Any:
        options = client_options(self._api_key, self.base_url, self.default_headers, self.retry)
        return self._anthropic.AsyncAnthropic(**options)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        params = self.build_params(request)
        text, raw_usage, model, stop = await call_retried(
            self._client(),
            lambda client: self._attempt(client, params),
            self.retry,
            self._api_key,
            self.default_headers,
        )
        return SummaryResult(
            text,
            usage_from_anthropic(raw_usage, self.pricing),
            model or self.model,
            stop_reason="length" if stop == "max_tokens" else "stop" if stop == "end_turn" else stop,
        )

    def summarize_sync(self, request: SummaryRequest) -> SummaryResult:
        """Synchronous :meth:`summarize` (not from inside a running event loop)."""
        return run_sync(self.summarize(request))

    async def _attempt(self, client: Any, params: dict[str, Any]) -> tuple[str, dict[str, Any], str | None, str | None]:
        streamed = StreamedText(params.get("max_tokens"))
        usage: dict[str, Any] = {}
        model = None
        finished = False
        stop = None
        try:
            kwargs = dict(params)
            if self.retry.timeout is not None:
                kwargs["timeout"] = self.retry.timeout
            stream = await client.messages.create(**kwargs)
            try:
                async for event in stream:
                    etype = getattr(event, "type", None)
                    if etype == "message_start":
                        message = getattr(event, "message", None)
                        model = getattr(message, "model", None) or model
                        usage.update(
                            {k: v for k, v in as_dict(getattr(message, "usage", None)).items() if v is not None}
                        )
                    elif etype == "content_block_delta":
                        delta = getattr(event, "delta", None)
                        if getattr(delta, "type", None) == "text_delta":
                            streamed.add(getattr(delta, "text", "") or "", "text, not a string")
                    elif etype == "message_stop":
                        finished = True
                    elif etype == "message_delta":
                        reason = getattr(getattr(event, "delta", None), "stop_reason", None)
                        finished = finished or reason is not None
                        stop = reason if isinstance(reason, str) else stop
                        # Cumulative counts; newer API versions also restate input/cache counts here.
                        usage.update({k: v for k, v in as_dict(getattr(event, "usage", None)).items() if v is not None})
            finally:
                await stream.close()
        except SummarizerError:
            raise
        except Exception as exc:  # CancelledError is a BaseException and passes through
            raise _convert_error(exc, self._anthropic) from exc
        if not finished:  # the connection ended mid-answer
            raise TransientError("the stream ended before the model finished")
        text = streamed.text()
        if not text.strip():
            raise EmptySummaryError("the model returned an empty summary")
        return text, usage, model, stop
