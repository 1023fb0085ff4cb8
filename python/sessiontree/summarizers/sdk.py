"""What the provider modules share about their official SDKs: the OpenAI and
Anthropic SDKs raise the same shapes (``APIStatusError`` with ``status_code`` and ``response``,
``APITimeoutError``, ``APIConnectionError``, ``APIError`` for an error inside a stream), and
:func:`convert_sdk_error` classifies them once: context overflow, transient (retried by
:mod:`.retry`) or fatal. Each provider passes what differs: how it reads an error's text, which
statuses it retries, and what a stream error means to it.

The rest of what the providers do alike is here too: the output budget of a request
(:func:`output_tokens`), the client's options (:func:`client_options`: the SDK's own retries off),
the call retried by :mod:`.retry` with the key redacted from its errors (:func:`call_retried`),
an SDK object as a dict (:func:`as_dict`) and the fields of an error's body (:func:`error_fields`)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, TypeVar

from .base import ContextOverflowError, SummarizerError, SummaryRequest, redact_error, secrets_of
from .overflow import is_context_overflow
from .prompts import estimate_request_tokens, output_budget
from .retry import RetryPolicy, TransientError, is_transport_error, parse_retry_after, retry_call

__all__ = ["convert_sdk_error", "output_tokens", "client_options", "call_retried", "as_dict", "error_fields"]

T = TypeVar("T")


def output_tokens(
    request: SummaryRequest, system: str, user_text: str, max_output_tokens: int | None, context_window: int | None
) -> int:
    """The output budget of a summary call: ``request.max_tokens`` capped by the model's
    ``max_output_tokens`` (Pi model ``maxTokens``), then reduced to fit ``context_window`` when
    known (Pi 1.6, :func:`~.prompts.output_budget`); at least 1."""
    cap = request.max_tokens
    if max_output_tokens:
        cap = min(cap, max_output_tokens)
    if context_window:
        return output_budget(cap, context_window, estimate_request_tokens(system, user_text))
    return max(1, cap)


def client_options(
    api_key: str,
    base_url: str | None,
    default_headers: Mapping[str, str] | None,
    retry: RetryPolicy,
    **extra: Any,
) -> dict[str, Any]:
    """Keyword arguments for an SDK's async client: the key, ``max_retries=0`` (:mod:`.retry`
    decides), the headers (None when empty), the base URL and the per-attempt timeout when
    set, then ``extra`` (each only when truthy)."""
    kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "default_headers": default_headers or None}
    if base_url:
        kwargs["base_url"] = base_url
    kwargs.update({k: v for k, v in extra.items() if v})
    if retry.timeout is not None:
        kwargs["timeout"] = retry.timeout
    return kwargs


async def call_retried(
    client: Any,
    attempt: Callable[[Any], Awaitable[T]],
    retry: RetryPolicy,
    api_key: str | None,
    default_headers: Mapping[str, str] | None,
) -> T:
    """``attempt(client)`` under ``retry`` (:func:`~.retry.retry_call`) inside ``async with
    client``. A :class:`SummarizerError` leaves with the key and the header values redacted
    (a server may echo the key, e.g. a 401 body quoting ``Bearer sk-...``)."""
    try:
        async with client:
            return await retry_call(lambda: attempt(client), retry)
    except SummarizerError as exc:
        raise redact_error(exc, secrets_of(api_key, default_headers)) from None


def as_dict(obj: Any) -> dict[str, Any]:
    """An SDK object (a pydantic model: ``model_dump``, or ``dict``), a dict or None as a dict."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None) or getattr(obj, "dict", None)
    return dump() if dump else dict(obj)


def error_fields(exc: Any, keys: tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """An SDK error's body as ``(inner, parts)``: ``inner`` is ``body["error"]`` when that is an
    object, else the body (``{}`` when the body is not an object); ``parts`` are the error's
    message, then ``inner[k]`` for each of ``keys`` that is not None (as text), or the body
    itself when it is a string."""
    parts = [str(getattr(exc, "message", "") or exc)]
    body = getattr(exc, "body", None)
    inner: dict[str, Any] = {}
    if isinstance(body, dict):
        err = body.get("error")
        inner = err if isinstance(err, dict) else body
        parts.extend(str(inner[k]) for k in keys if inner.get(k) is not None)
    elif isinstance(body, str):
        parts.append(body)
    return inner, parts


def convert_sdk_error(
    exc: BaseException,
    sdk: Any,
    *,
    error_text: Callable[[Any], str],
    transient: Callable[[Any, int, Mapping[str, str] | None], bool],
    stream_error: Callable[[Any], SummarizerError],
) -> SummarizerError:
    """Classify an exception raised while calling a provider through its SDK module ``sdk``:

    * an HTTP status error: :class:`ContextOverflowError` when the status and text say the
      context overflowed, :class:`TransientError` (with the ``Retry-After`` delay) when
      ``transient(exc, status, headers)``, else :class:`SummarizerError`;
    * a timeout or a refused/dropped connection: :class:`TransientError`;
    * another SDK error (an error event inside the stream): ``stream_error(exc)``;
    * a transport error from below the SDK (``httpx``, sockets): :class:`TransientError`;
    * anything else: :class:`SummarizerError` naming its type.

    ``error_text(exc)`` is the text the messages carry (the SDK's message and the body's fields).
    """
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        text = error_text(exc)
        headers = exc.response.headers if getattr(exc, "response", None) is not None else None
        if is_context_overflow(status, text):
            return ContextOverflowError(f"context overflow (HTTP {status}): {text}")
        if transient(exc, status, headers):
            return TransientError(f"HTTP {status}: {text}", status=status, retry_after=parse_retry_after(headers))
        return SummarizerError(f"HTTP {status}: {text}")
    if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
        return TransientError(f"connection error: {exc}")
    if isinstance(exc, sdk.APIError):
        return stream_error(exc)
    if is_transport_error(exc):
        return TransientError(f"connection error: {type(exc).__name__}: {exc}")
    return SummarizerError(f"{type(exc).__name__}: {exc}")
