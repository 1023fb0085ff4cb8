"""Our retry policy for summary calls: exponential backoff with jitter, Retry-After, timeouts.

The provider SDKs are created with ``max_retries=0`` so this is the only policy that runs. A
provider module turns each failure into one of three outcomes:

* :class:`TransientError` (429, 408, 409, 425, 5xx/529, connection reset, timeout, an error
  event in the middle of a stream): retried by :func:`retry_call` after a delay;
* :class:`~sessiontree.summarizers.base.ContextOverflowError`: raised at once (a retry would
  fail the same way; the caller compacts harder instead);
* any other :class:`~sessiontree.summarizers.base.SummarizerError` (401, 400, ...): raised at once.

Cancelling the task that awaits :func:`retry_call` cancels the running attempt (and so its HTTP
request) or the sleep between attempts; :class:`asyncio.CancelledError` is never retried.

Pi's agent loop retries overloaded/rate-limited model calls the same way (``retry.enabled``,
``maxRetries``, ``baseDelayMs`` settings), with the delay doubling each attempt.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, TypeVar

from .base import SummarizerError

__all__ = [
    "RetryPolicy",
    "TransientError",
    "RetriesExhaustedError",
    "retry_call",
    "parse_retry_after",
    "is_transient_status",
    "is_transport_error",
]

T = TypeVar("T")


class TransientError(SummarizerError):
    """A failure worth retrying. ``status``: HTTP status or None; ``retry_after``: seconds the
    server asked us to wait (Retry-After), or None."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RetriesExhaustedError(SummarizerError):
    """Every attempt failed with a transient error. ``attempts``: how many were made;
    ``last_error``: the final :class:`TransientError` (also ``__cause__``); ``status``: its status."""

    def __init__(self, message: str, *, attempts: int, last_error: TransientError):
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error
        self.status = last_error.status


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one summary call.

    * ``max_retries``: retries after the first attempt (0 = one attempt only);
    * ``base_delay``, ``multiplier``, ``max_delay``: backoff in seconds, ``base_delay *
      multiplier**n`` for the n-th retry (n from 0), capped at ``max_delay``;
    * ``jitter``: fraction of the delay drawn at random (0.5: between 50% and 100% of it), so
      parallel clients do not retry in lockstep;
    * ``timeout``: seconds one attempt may take, streaming included (None: no limit); a timeout
      is a transient error;
    * ``max_retry_after``: a Retry-After longer than this many seconds is not waited for; the
      call fails at once with :class:`RetriesExhaustedError`.

    Tests use tiny delays: ``RetryPolicy(max_retries=2, base_delay=0.01, timeout=2)``.
    """

    max_retries: int = 4
    base_delay: float = 1.0
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.5
    timeout: float | None = 300.0
    max_retry_after: float = 120.0

    def backoff(self, retry_index: int, rng: random.Random | None = None) -> float:
        """Delay in seconds before retry number ``retry_index`` (0-based), jitter applied.

        >>> RetryPolicy(base_delay=1, jitter=0).backoff(3)
        8.0
        """
        delay = min(self.max_delay, self.base_delay * (self.multiplier**retry_index))
        if self.jitter:
            r = (rng or random).random()
            delay *= 1.0 - self.jitter * r
        return max(0.0, float(delay))

    def delay_for(self, retry_index: int, retry_after: float | None, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before the next attempt: the server's Retry-After when given (never
        less), else :meth:`backoff`. None when Retry-After exceeds ``max_retry_after``."""
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return max(0.0, retry_after)
        return self.backoff(retry_index, rng)


def is_transient_status(status: int | None, headers: Mapping[str, str] | None = None) -> bool:
    """Whether an HTTP error status is worth retrying: 408, 409, 425, 429 and every 5xx
    (including Anthropic's 529 "overloaded"). An ``x-should-retry: true|false`` response header
    (sent by OpenAI and Anthropic) overrides the status.

        >>> is_transient_status(429), is_transient_status(400), is_transient_status(529)
        (True, False, True)
    """
    if headers is not None:
        hint = _header(headers, "x-should-retry")
        if hint == "true":
            return True
        if hint == "false":
            return False
    if status is None:
        return False
    return status in (408, 409, 425, 429) or status >= 500


def _header(headers: Mapping[str, str], name: str) -> str | None:
    try:
        value = headers.get(name)
    except Exception:  # pragma: no cover - exotic header containers
        value = None
    if value is None and hasattr(headers, "items"):
        for key, val in headers.items():
            if key.lower() == name:
                return val
    return value


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from a response's headers, or None when they do not say.

    Reads ``retry-after-ms`` (OpenAI, milliseconds) first, then ``retry-after`` as seconds
    (``"2"``, ``"1.5"``) or an HTTP date. Negative values count as 0.

        >>> parse_retry_after({"retry-after": "3"}), parse_retry_after({"retry-after-ms": "250"})
        (3.0, 0.25)
    """
    if not headers:
        return None
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            value = float(ms)
            if math.isfinite(value):
                return max(0.0, value / 1000.0)
        except ValueError:
            pass
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


async def retry_call(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[int, TransientError, float], Any] | None = None,
) -> T:
    """Run ``attempt()`` until it succeeds, retrying :class:`TransientError` per ``policy``.

    Each attempt runs under ``policy.timeout`` (a :class:`TimeoutError` is transient).
    ``on_retry(retry_index, error, delay)`` is called before each wait (for logging).

    Raises: :class:`RetriesExhaustedError` when the retries run out (or Retry-After is too
    long); any non-transient :class:`SummarizerError` from ``attempt`` unchanged (including
    :class:`~sessiontree.summarizers.base.ContextOverflowError`); CancelledError when cancelled.
    """
    retry_index = 0
    while True:
        try:
            if policy.timeout is not None:
                async with asyncio.timeout(policy.timeout):
                    return await attempt()
            return await attempt()
        except TimeoutError as exc:
            error = TransientError(f"summary call timed out after {policy.timeout}s")
            error.__cause__ = exc
        except TransientError as exc:
            error = exc
        attempts = retry_index + 1
        if retry_index >= policy.max_retries:
            raise RetriesExhaustedError(
                f"summary call failed after {attempts} attempt{'s' if attempts != 1 else ''}: {error}",
                attempts=attempts,
                last_error=error,
            ) from error
        delay = policy.delay_for(retry_index, error.retry_after, rng)
        if delay is None:
            raise RetriesExhaustedError(
                f"summary call rate-limited: the server asked to wait {error.retry_after:.0f}s "
                f"(more than max_retry_after={policy.max_retry_after:g}s): {error}",
                attempts=attempts,
                last_error=error,
            ) from error
        if on_retry is not None:
            on_retry(retry_index, error, delay)
        await sleep(delay)
        retry_index += 1


def is_transport_error(exc: BaseException) -> bool:
    """True for network-level failures (connection refused/reset, read timeouts, a stream cut
    mid-way): OSError and the exception families of httpx/httpx2/httpcore/h11/anyio, which the
    SDKs let through while a streamed response is being read."""
    if isinstance(exc, (OSError, EOFError)):
        return True
    for cls in type(exc).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if module.split(".", 1)[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio"):
            return True
    return False
