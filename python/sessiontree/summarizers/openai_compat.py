"""Summaries through any OpenAI-compatible chat-completions server, via the official ``openai`` SDK.

Works with OpenAI, vLLM, Ollama, llama.cpp server, LM Studio, OpenRouter... (any ``base_url``).
The request is the one Pi 1.6 sends for a summary (``openai-completions`` API, see the goldens'
``llm_requests[].body``)::

    {"model": ..., "messages": [{"role": "system", "content": <SYSTEM_PROMPT>},
                                {"role": "user", "content": [{"type": "text", "text": <user text>}]}],
     "stream": true, "stream_options": {"include_usage": true}, "store": false,
     "max_completion_tokens": <budget>}

in exactly that key order, streamed as server-sent events. ``store: false`` asks OpenAI not to
keep the completion; no ``prompt_cache_key`` is sent. Each call carries a fresh UUID in an
``x-client-request-id`` header (OpenAI's request-correlation header; never the session id), so
providers cannot route or cache summary calls together with the session's own calls.

The SDK's own retries are off (``max_retries=0``); :mod:`.retry` decides. Context-overflow
errors raise :class:`~sessiontree.summarizers.base.ContextOverflowError` at once.

Requires the optional extra: ``pip install 'sessiontree[openai]'``
(from a source checkout: ``pip install '.[openai]'``).
"""

from __future__ import annotations

import math
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
    usage_object,
)
from .overflow import is_context_overflow
from .prompts import build_prompt
from .retry import RetryPolicy, TransientError, is_transient_status
from .sdk import as_dict, call_retried, client_options, convert_sdk_error, error_fields, output_tokens

__all__ = ["OpenAICompatSummarizer", "usage_from_openai", "import_openai"]

_INSTALL_HINT = (
    "the OpenAI-compatible summarizer needs the openai package: pip install 'sessiontree[openai]' "
    "(from a source checkout: pip install '.[openai]')"
)


def import_openai() -> Any:
    """The ``openai`` module, or ImportError with the install command."""
    return import_sdk("openai", _INSTALL_HINT)


def usage_from_openai(raw: Mapping[str, Any] | None, pricing: Pricing | None = None) -> SummaryUsage:
    """Map an OpenAI ``usage`` object (a dict) to :class:`SummaryUsage`, as Pi stores it.

    * ``cache_read`` = ``prompt_tokens_details.cached_tokens``; ``cache_write`` =
      ``prompt_tokens_details.cache_write_tokens`` (OpenRouter; 0 elsewhere);
    * ``input`` = ``prompt_tokens`` - cache_read - cache_write (Pi counts cached tokens apart);
    * ``output`` = ``completion_tokens``; ``reasoning`` = ``completion_tokens_details.reasoning_tokens``
      (already part of ``output``);
    * ``total_tokens`` = input + output + cache_read + cache_write;
    * cost from ``pricing`` (Pi ``calculateCost``); a provider-reported ``usage.cost`` (OpenRouter)
      becomes the total with ``cost_from_provider``.

    The goldens' fake reply ``{prompt_tokens:1234, completion_tokens:56, total_tokens:1290,
    prompt_tokens_details:{cached_tokens:0}}`` with Pi's fake prices gives Pi's stored usage:

        >>> u = usage_from_openai({"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290,
        ...                        "prompt_tokens_details": {"cached_tokens": 0}}, Pricing(1, 2, 0.1, 1.25))
        >>> (u.input, u.output, u.cache_read, u.total_tokens, u.cost["total"])
        (1234, 56, 0, 1290, 0.0013459999999999998)
    """
    if not raw:
        return SummaryUsage().priced(pricing)
    raw = usage_object(raw, "usage")
    details = usage_object(raw.get("prompt_tokens_details"), "prompt_tokens_details")
    cached = token_count(details.get("cached_tokens"))
    cache_write = token_count(details.get("cache_write_tokens"))
    reasoning = token_count(
        usage_object(raw.get("completion_tokens_details"), "completion_tokens_details").get("reasoning_tokens")
    )
    inp = max(0, token_count(raw.get("prompt_tokens")) - cached - cache_write)
    out = token_count(raw.get("completion_tokens"))
    usage = SummaryUsage(
        input=inp,
        output=out,
        cache_read=cached,
        cache_write=cache_write,
        reasoning=reasoning,
        total_tokens=inp + out + cached + cache_write,
    )
    provider_cost = raw.get("cost")
    provider_total = (
        float(provider_cost)
        if isinstance(provider_cost, (int, float)) and not isinstance(provider_cost, bool)
        else None
    )
    if provider_total is not None and not math.isfinite(provider_total):
        raise SummarizerError(f"the reply's usage holds an impossible cost: {provider_cost!r}")
    return usage.priced(pricing, provider_total)


def _error_text(exc: Any) -> str:
    """Everything an SDK error says: its message plus the body's message, code and type."""
    return " | ".join(error_fields(exc, ("message", "code", "type"))[1])


def _stream_error(exc: Any) -> SummarizerError:
    """An error event inside the stream: no HTTP status, but maybe a numeric ``code``."""
    text = _error_text(exc)
    body = getattr(exc, "body", None)
    code = body.get("code") if isinstance(body, dict) else None
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    if is_context_overflow(status, text):
        return ContextOverflowError(f"context overflow (stream error): {text}")
    if status is not None and not is_transient_status(status):
        return SummarizerError(f"stream error {status}: {text}")
    return TransientError(f"stream error: {text}", status=status)


def _convert_error(exc: BaseException, openai: Any) -> SummarizerError:
    """Classify an SDK/transport exception: overflow, transient (retry) or fatal
    (:func:`.sdk.convert_sdk_error`)."""
    return convert_sdk_error(
        exc,
        openai,
        error_text=_error_text,
        transient=lambda _exc, status, headers: is_transient_status(status, headers),
        stream_error=_stream_error,
    )


class OpenAICompatSummarizer:
    """Summarize with an OpenAI-compatible chat-completions model.

    Args:
        model: the summarizing model id (may differ from the session's model).
        api_key: defaults to ``$OPENAI_API_KEY``; with a ``base_url`` and no key, a placeholder
            is sent (local servers ignore it). ValueError when neither is available.
        base_url: e.g. ``http://127.0.0.1:11434/v1``; defaults to ``$OPENAI_BASE_URL``, then OpenAI.
        pricing: dollars per million tokens, for ``usage.cost`` (None: cost unknown).
        retry: :class:`~sessiontree.summarizers.retry.RetryPolicy` (backoff, per-attempt timeout).
        max_output_tokens: the model's output limit (Pi model ``maxTokens``); caps the request's
            ``max_tokens``.
        context_window: the model's context window; when given, ``max_completion_tokens`` is
            reduced like Pi 1.6 (:func:`~sessiontree.summarizers.prompts.output_budget`).
        request_id_header: header carrying the fresh per-call UUID (None: not sent).
        max_tokens_field: ``"max_completion_tokens"`` (Pi, OpenAI) or ``"max_tokens"`` for older
            servers.
        send_store: send ``store: false`` (turn off for servers that reject the field).
        system_role: ``"system"`` (Pi for non-reasoning models) or ``"developer"``.
        default_headers, organization: passed to the SDK client.

    ``await summarize(request)`` -> :class:`SummaryResult`; raises ContextOverflowError,
    RetriesExhaustedError (transient errors outlasted the retries) or SummarizerError.
    Cancelling the awaiting task closes the HTTP connection.
    """

    name = "openai"

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
        request_id_header: str | None = "x-client-request-id",
        max_tokens_field: str = "max_completion_tokens",
        send_store: bool = True,
        system_role: str = "system",
        default_headers: Mapping[str, str] | None = None,
        organization: str | None = None,
    ):
        self._openai = import_openai()
        if not model:
            raise ValueError("OpenAICompatSummarizer needs a model id (model=...)")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not self.base_url:
                raise ValueError(
                    "no API key: pass api_key=... or set OPENAI_API_KEY (or give a base_url for a local server)"
                )
            key = "sk-no-key-required"
        self._api_key = key
        self.pricing = pricing
        self.retry = retry or RetryPolicy()
        self.max_output_tokens = max_output_tokens
        self.context_window = context_window
        self.request_id_header = request_id_header
        self.max_tokens_field = max_tokens_field
        self.send_store = send_store
        self.system_role = system_role
        self.default_headers = dict(default_headers or {})
        self.organization = organization

    # ==== Request ====

    def max_completion_tokens(self, request: SummaryRequest, system: str, user_text: str) -> int:
        """The output budget: ``request.max_tokens`` capped by ``max_output_tokens``, then reduced
        to fit ``context_window`` when known (Pi 1.6 rule, :func:`.sdk.output_tokens`)."""
        return output_tokens(request, system, user_text, self.max_output_tokens, self.context_window)

    def build_body(self, request: SummaryRequest) -> dict[str, Any]:
        """The exact JSON body sent for ``request`` (keys in Pi's order)."""
        system, user_text = build_prompt(request)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": self.system_role, "content": system},
                {"role": "user", "content": [{"type": "text", "text": user_text}]},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.send_store:
            body["store"] = False
        body[self.max_tokens_field] = self.max_completion_tokens(request, system, user_text)
        return body

    def _client(self) -> Any:
        options = client_options(
            self._api_key, self.base_url, self.default_headers, self.retry, organization=self.organization
        )
        return self._openai.AsyncOpenAI(**options)

    # ==== Call ====

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        body = self.build_body(request)
        headers = {}
        if self.request_id_header:
            headers[self.request_id_header] = request.request_id or str(uuid.uuid4())
        text, raw_usage, model, stop = await call_retried(
            self._client(),
            lambda client: self._attempt(client, body, headers),
            self.retry,
            self._api_key,
            self.default_headers,
        )
        return SummaryResult(text, usage_from_openai(raw_usage, self.pricing), model or self.model, stop_reason=stop)

    def summarize_sync(self, request: SummaryRequest) -> SummaryResult:
        """Synchronous :meth:`summarize` (not from inside a running event loop)."""
        return run_sync(self.summarize(request))

    async def _attempt(
        self, client: Any, body: dict[str, Any], headers: dict[str, Any]
    ) -> tuple[str, dict[str, Any], str | None, str | None]:
        openai = self._openai
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        options: dict[str, Any] = {"headers": headers, "max_retries": 0}
        if self.retry.timeout is not None:
            options["timeout"] = self.retry.timeout
        streamed = StreamedText(body.get(self.max_tokens_field))
        raw_usage: dict[str, Any] = {}
        model = None
        finished = False
        stop = None
        try:
            stream = await client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                options=options,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
            try:
                async for chunk in stream:
                    model = getattr(chunk, "model", None) or model
                    usage = getattr(chunk, "usage", None)
                    if usage is not None:
                        raw_usage = as_dict(usage)
                    for choice in getattr(chunk, "choices", None) or ():
                        reason = getattr(choice, "finish_reason", None)
                        finished = finished or reason is not None
                        stop = reason if isinstance(reason, str) else stop
                        delta = getattr(choice, "delta", None)
                        content = getattr(delta, "content", None) if delta is not None else None
                        if content:
                            streamed.add(content, "content, not text")
            finally:
                await stream.close()
        except SummarizerError:
            raise
        except Exception as exc:  # CancelledError is a BaseException and passes through
            raise _convert_error(exc, openai) from exc
        if not finished and not raw_usage:  # the connection ended mid-answer (no finish_reason, no usage)
            raise TransientError("the stream ended before the model finished")
        text = streamed.text()
        if not text.strip():
            raise EmptySummaryError("the model returned an empty summary")
        return text, raw_usage, model, stop
