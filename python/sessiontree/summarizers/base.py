"""The summarizer contract shared by compaction and branch summaries.

A summarizer turns a serialized conversation (Pi's ``serializeConversation`` text) into a
structured summary. Implementations: :mod:`.offline` (extractive, no model, the default),
:mod:`.openai_compat` (any OpenAI-compatible chat-completions server) and :mod:`.anthropic`
(Anthropic Messages). The summarizer's model may differ from the session's.

Summarizers are async (``await summarizer.summarize(request)``); :func:`run_sync` is a sync
facade. Cancelling the awaiting task must abort the HTTP request.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Coroutine, Literal, Protocol, TypeVar, runtime_checkable

from ..errors import SessionTreeError

SummaryKind = Literal["compaction", "turn_prefix", "branch"]


@dataclass(frozen=True)
class SummaryUsage:
    """Token usage (and cost in dollars when known) of one or more summary calls.

    Fields mirror Pi's ``Usage``: ``input``, ``output``, ``cache_read``, ``cache_write``,
    ``reasoning`` (tokens), ``total_tokens``, and ``cost`` — a dict with ``input``, ``output``,
    ``cacheRead``, ``cacheWrite``, ``total`` (dollars) or None when the price is unknown.
    ``cost_from_provider`` is True when the provider reported the cost itself.
    """

    input: int | float = 0
    output: int | float = 0
    cache_read: int | float = 0
    cache_write: int | float = 0
    reasoning: int | float = 0
    total_tokens: int | float = 0
    cost: dict[str, Any] | None = None
    cost_from_provider: bool = False

    def __add__(self, other: "SummaryUsage") -> "SummaryUsage":
        if not isinstance(other, SummaryUsage):
            return NotImplemented
        cost = None
        if self.cost is not None or other.cost is not None:
            a, b = self.cost or {}, other.cost or {}
            cost = {k: a.get(k, 0) + b.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite", "total")}
        return SummaryUsage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.reasoning + other.reasoning,
            self.total_tokens + other.total_tokens,
            cost,
            self.cost_from_provider and other.cost_from_provider,
        )

    def to_pi(self) -> dict[str, Any]:
        """Pi's on-disk ``usage`` object (camelCase; ``cost`` zeros when unknown)."""
        cost = (
            dict(self.cost)
            if self.cost is not None
            else {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
        )
        cost["totalFromProvider"] = self.cost_from_provider
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "reasoning": self.reasoning,
            "totalTokens": self.total_tokens,
            "cost": cost,
        }

    @classmethod
    def from_pi(cls, usage: dict[str, Any] | None) -> "SummaryUsage":
        """Read Pi's ``usage`` object (missing fields count 0)."""
        if not isinstance(usage, dict):
            return cls()
        cost = usage.get("cost") if isinstance(usage.get("cost"), dict) else None

        def n(k: str) -> int | float:  # Pi's numbers as they are (a float stays a float)
            v = usage.get(k)
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

        return cls(
            n("input"),
            n("output"),
            n("cacheRead"),
            n("cacheWrite"),
            n("reasoning"),
            n("totalTokens"),
            {k: v for k, v in cost.items() if k != "totalFromProvider"} if cost else None,
            bool(cost.get("totalFromProvider")) if cost else False,
        )

    def priced(self, pricing: "Pricing | None", provider_total: float | None = None) -> "SummaryUsage":
        """This usage with ``cost`` filled from ``pricing`` (unchanged when ``pricing`` is None).

        ``provider_total``: a total cost in dollars the provider reported itself (OpenRouter's
        ``usage.cost``); it becomes ``cost["total"]`` and sets ``cost_from_provider``.

            >>> SummaryUsage(input=1234, output=56, total_tokens=1290).priced(
            ...     Pricing(input=1, output=2, cache_read=0.1, cache_write=1.25)).cost["total"]
            0.0013459999999999998
        """
        if pricing is None and provider_total is None:
            return self
        cost: dict[str, Any] = (
            pricing.cost(self)
            if pricing is not None
            else {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
        )
        if provider_total is not None:
            cost["total"] = provider_total
        return replace(self, cost=cost, cost_from_provider=provider_total is not None)


@dataclass(frozen=True)
class Pricing:
    """A model's prices in **dollars per million tokens** (Pi's model ``cost`` object).

    ``Pricing.from_pi({"input": 1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1.25})`` reads
    Pi's ``models.json`` shape.
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    @classmethod
    def from_pi(cls, cost: dict[str, Any] | None) -> "Pricing":
        """From a Pi model's ``cost`` object (``input``, ``output``, ``cacheRead``, ``cacheWrite``:
        dollars per million tokens); missing or falsy fields are 0."""
        cost = cost or {}
        return cls(
            cost.get("input", 0) or 0,
            cost.get("output", 0) or 0,
            cost.get("cacheRead", 0) or 0,
            cost.get("cacheWrite", 0) or 0,
        )

    def cost(self, usage: SummaryUsage) -> dict[str, Any]:
        """Pi's ``calculateCost``: each part is ``(price / 1e6) * tokens`` (plain float, in
        that order of operations, so the digits match Pi's stored usage), and ``total`` sums
        input + output + cacheRead + cacheWrite left to right.

            >>> Pricing(1, 2, 0.1, 1.25).cost(SummaryUsage(input=1234, output=56))
            {'input': 0.0012339999999999999, 'output': 0.000112, 'cacheRead': 0.0, 'cacheWrite': 0.0, 'total': 0.0013459999999999998}
        """
        parts = {
            "input": (self.input / 1000000) * usage.input,
            "output": (self.output / 1000000) * usage.output,
            "cacheRead": (self.cache_read / 1000000) * usage.cache_read,
            "cacheWrite": (self.cache_write / 1000000) * usage.cache_write,
        }
        parts["total"] = parts["input"] + parts["output"] + parts["cacheRead"] + parts["cacheWrite"]
        return parts


@dataclass(frozen=True)
class SummaryRequest:
    """One summary to produce.

    * ``kind``: ``"compaction"`` (history before the cut), ``"turn_prefix"`` (the early part
      of a split turn) or ``"branch"`` (an abandoned branch);
    * ``conversation``: Pi's serialized conversation text;
    * ``previous_summary``: the summary in effect (rolling update), or None;
    * ``custom_instructions``: extra focus from the user, or None; with
      ``replace_instructions`` True they replace the default instructions (branch summaries);
    * ``max_tokens``: output budget in tokens (the model's limit, reduced so that input and
      output fit the context window);
    * ``request_id``: a fresh routing/session identifier for this call (never the session's).
    """

    kind: SummaryKind
    conversation: str
    previous_summary: str | None = None
    custom_instructions: str | None = None
    replace_instructions: bool = False
    max_tokens: int = 16384
    request_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SummaryResult:
    """A summary: ``text`` (the model's answer, without file lists) and its ``usage``.

    ``stop_reason``: why the model stopped, normalized: ``"stop"`` (it finished), ``"length"``
    (it hit the output budget: OpenAI ``finish_reason: "length"``, Anthropic ``stop_reason:
    "max_tokens"``; the summary is cut off), another provider value as given, or ``None`` when
    unknown (summarizers that do not report it)."""

    text: str
    usage: SummaryUsage = field(default_factory=SummaryUsage)
    model: str | None = None
    stop_reason: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Anything with ``name`` and ``async summarize(request) -> SummaryResult``."""

    @property
    def name(self) -> str:  # pragma: no cover - protocol (an attribute or a read-only property)
        ...

    async def summarize(self, request: SummaryRequest) -> SummaryResult:  # pragma: no cover - protocol
        ...


class SummarizerError(SessionTreeError):
    """A summary call failed for good (after retries), or the answer was unusable."""


class ContextOverflowError(SummarizerError):
    """The provider said the request does not fit the model's context window."""


class SummaryBudgetError(SummarizerError):
    """The output budget left for a summary (the summarizing model's context window minus the
    request, capped by its output limit) is below :data:`MIN_SUMMARY_OUTPUT_TOKENS`: the request
    is not sent (Pi would ask for as little as 1 token). ``budget`` and ``minimum`` are tokens."""

    def __init__(self, message: str, budget: int = 0, minimum: int = 0):
        super().__init__(message)
        self.budget = budget
        self.minimum = minimum


class UnsafeSummaryError(SummarizerError):
    """The model answered, but the summary must not replace history: nothing was appended.
    ``result`` is the :class:`SummaryResult` received (its usage was paid for). Callers may opt
    in with ``accept_suspect_summary=True`` (:func:`sessiontree.orchestration.acompact`)."""

    def __init__(self, message: str, result: "SummaryResult | None" = None):
        super().__init__(message)
        self.result = result


class TruncatedSummaryError(UnsafeSummaryError):
    """The model stopped at its output budget (``stop_reason == "length"``): the summary is cut off."""


class EmptySummaryError(UnsafeSummaryError):
    """The model returned no summary text (empty or whitespace only)."""


class OversizedSummaryError(UnsafeSummaryError):
    """The summary is far beyond the budget it was asked for (more than
    :data:`OVERSIZED_SUMMARY_FACTOR` times ``max_tokens``, estimated as ``ceil(UTF-16 length /
    3.5)``), or a streamed reply grew past :func:`max_reply_chars` and was not read further."""


def max_reply_chars(budget: Any) -> int:
    """How many characters of a streamed summary a summarizer reads before giving up with
    :class:`OversizedSummaryError`: four times the refusal threshold (so an opted-in caller
    still gets moderately oversized summaries), at least 1 MiB characters; for a ``budget`` of
    16384 tokens about 1 M characters, never 100 MB."""
    b = budget if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0 else 16384
    return max(1 << 20, 4 * OVERSIZED_SUMMARY_FACTOR * 4 * b)


class StreamedText:
    """The text pieces of one streamed summary reply, read up to :func:`max_reply_chars` of
    ``budget`` (the request's output budget, tokens; any value): :meth:`add` a piece as it
    arrives, :meth:`text` at the end. ``chars`` counts Python characters (code points)."""

    def __init__(self, budget: Any) -> None:
        self.budget = budget
        self.cap = max_reply_chars(budget)
        self.chars = 0
        self.pieces: list[str] = []

    def add(self, piece: Any, what: str) -> None:
        """Take one streamed piece. ``what`` names what the provider streamed it as (for the
        error). Raises :class:`SummarizerError` if ``piece`` is not a string, and
        :class:`OversizedSummaryError` once the reply grows past the cap (nothing more is read)."""
        if not isinstance(piece, str):
            raise SummarizerError(f"the model streamed a {type(piece).__name__} as {what}")
        self.chars += len(piece)
        if self.chars > self.cap:
            raise OversizedSummaryError(
                f"the summary grew past {self.cap} characters for a budget of {self.budget} tokens; stopped reading it"
            )
        self.pieces.append(piece)

    def text(self) -> str:
        """The reply read so far, the pieces joined."""
        return "".join(self.pieces)


#: The smallest output budget a summary request is sent with (tokens).
MIN_SUMMARY_OUTPUT_TOKENS = 512
#: A summary whose estimate exceeds this many times its budget is refused.
OVERSIZED_SUMMARY_FACTOR = 4


REDACTED = "[REDACTED]"
# credentials in text a server sends back (its error body may quote the request's headers):
# the value after an Authorization / x-api-key / api-key name, a bearer token, and key-shaped
# words (``sk-...``). Bounded repeats with no nested quantifiers: linear on any text.
_SECRET_PATTERNS = (
    re.compile(
        r"(?i)((?:authorization|proxy-authorization|x-api-key|api[-_]key)[\"']?\s{0,8}[:=]\s{0,8}[\"']?)"
        r"(?:bearer\s{1,8}|basic\s{1,8})?[^\s\"',;}]+"
    ),
    re.compile(r"(?i)(\b(?:bearer|basic)\s{1,8})[A-Za-z0-9._~+/=-]+"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{6,}"),
)
_AUTH_HEADER_NAMES = ("authorization", "proxy-authorization", "x-api-key", "api-key")


def secrets_of(api_key: str | None, headers: Mapping[str, str] | None = None) -> list[str]:
    """The strings a summarizer must never show: its API key and the values of credential
    headers it sends (``Authorization``, ``x-api-key``, ...), including the token after
    ``Bearer``."""
    out = [api_key] if api_key else []
    for k, v in (headers or {}).items():
        if isinstance(k, str) and k.lower() in _AUTH_HEADER_NAMES and isinstance(v, str) and v:
            out.append(v)
            parts = v.split(None, 1)
            if len(parts) == 2 and parts[0].lower() in ("bearer", "basic"):
                out.append(parts[1])
    return [x for x in out if len(x) >= 4]


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every one of ``secrets`` and every credential-shaped value (see
    ``_SECRET_PATTERNS``) replaced by ``[REDACTED]``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redact_error(err: BaseException, secrets: Iterable[str] = ()) -> BaseException:
    """Redact ``err`` in place for raising: its message (``args``), the errors it wraps as
    ``last_error``, and its cause chain, which is cut where it leaves our own errors (an SDK
    exception quotes the server's reply verbatim). Returns ``err``."""
    secrets = list(secrets)
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.args = tuple(redact_secrets(a, secrets) if isinstance(a, str) else a for a in e.args)
        last = getattr(e, "last_error", None)
        if isinstance(last, BaseException) and last is not e:
            redact_error(last, secrets)
        cause = e.__cause__
        if not isinstance(cause, SummarizerError):
            e.__cause__ = None
            e.__context__ = None
            e.__suppress_context__ = True
            break
        e = cause
    return err


def token_count(value: Any) -> int:
    """A provider's token count as an int (missing, null or non-numeric counts 0).

    Raises:
        SummarizerError: the count is a number no token count can be (``NaN``, ``1e400``
            read as infinity, beyond 2**53): the reply is unusable.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return 0
    if not (math.isfinite(value) and -_MAX_COUNT <= value <= _MAX_COUNT):
        raise SummarizerError(f"the reply's usage holds an impossible token count: {str(value)[:40]}")
    return int(value)


_MAX_COUNT = 2**53


def usage_object(value: Any, what: str) -> dict[str, Any]:
    """A usage sub-object of a reply (``prompt_tokens_details``...) as a dict: missing or null
    is empty; any other type makes the reply unusable (:class:`SummarizerError`)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SummarizerError(f"the reply's usage field {what} is a {type(value).__name__}, not an object")
    return value


def import_sdk(module: str, hint: str) -> Any:
    """Import a provider SDK lazily (they are optional extras).

    Raises:
        ImportError: the package is missing; the message is ``hint`` (the pip command).
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(hint) from exc


_T = TypeVar("_T")


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine from synchronous code (a fresh event loop; refuses inside a running loop).

    Raises:
        RuntimeError: called from a thread that already runs an event loop (await instead).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise RuntimeError("run_sync() called inside a running event loop; await the coroutine instead")


__all__ = [
    "SummaryKind",
    "SummaryUsage",
    "Pricing",
    "SummaryRequest",
    "SummaryResult",
    "Summarizer",
    "SummarizerError",
    "ContextOverflowError",
    "SummaryBudgetError",
    "UnsafeSummaryError",
    "TruncatedSummaryError",
    "EmptySummaryError",
    "OversizedSummaryError",
    "MIN_SUMMARY_OUTPUT_TOKENS",
    "OVERSIZED_SUMMARY_FACTOR",
    "max_reply_chars",
    "run_sync",
    "token_count",
    "import_sdk",
    "replace",
]
