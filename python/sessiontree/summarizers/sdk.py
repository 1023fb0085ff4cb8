"""What the provider modules share about their official SDKs (issue 21): the OpenAI and
Anthropic SDKs raise the same shapes (``APIStatusError`` with ``status_code`` and ``response``,
``APITimeoutError``, ``APIConnectionError``, ``APIError`` for an error inside a stream), and
:func:`convert_sdk_error` classifies them once: context overflow, transient (retried by
:mod:`.retry`) or fatal. Each provider passes what differs: how it reads an error's text, which
statuses it retries, and what a stream error means to it."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .base import ContextOverflowError, SummarizerError
from .overflow import is_context_overflow
from .retry import TransientError, is_transport_error, parse_retry_after

__all__ = ["convert_sdk_error"]


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
