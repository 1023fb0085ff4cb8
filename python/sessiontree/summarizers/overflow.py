"""Recognising "the request does not fit the model's context window" errors across providers.

Pi decides whether a failed model call is a context overflow (and so worth one
compact-and-retry) from the provider's status and error text (pi-ai ``isContextOverflow``).
:func:`is_context_overflow` is our version of that rule, shared by the summarizers (which raise
:class:`~sessiontree.summarizers.base.ContextOverflowError` instead of retrying) and by the
orchestration (which checks the agent model's own errors).

    >>> is_context_overflow(400, "This model's maximum context length is 8192 tokens.")
    True
    >>> is_context_overflow(429, "Request too large for gpt-4o on tokens per min (TPM)")
    False
"""

from __future__ import annotations

import re

__all__ = ["is_context_overflow", "OVERFLOW_PATTERNS"]

#: Error texts that mean "the prompt is larger than the context window", with the provider(s)
#: that send them. Matched case-insensitively anywhere in the message.
OVERFLOW_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"context[_ ]length[_ ]exceeded", "OpenAI error code, generic"),
    (r"maximum context length", 'OpenAI, vLLM ("This model\'s maximum context length is"), Mistral, OpenRouter'),
    (r"prompt is too long", "Anthropic"),
    (r"exceed(?:s|ed)? (?:the )?max(?:imum)? context length", "Ollama"),
    (r"exceeds the available context size", "llama.cpp server"),
    (r"exceed_context_size", "llama.cpp server error type"),
    (r"context window", "OpenAI Responses, OpenRouter, MiniMax and others"),
    (r"greater than the context length", "LM Studio"),
    (r"input is too long", "Amazon Bedrock"),
    (r"input token count.*exceeds the maximum", "Google Gemini"),
    (r"maximum prompt length", "xAI"),
    (r"reduce the length of the messages", "OpenAI, Groq"),
    (r"exceeded model token limit", "Kimi"),
    (r"exceeds the limit of \d+", "GitHub Copilot"),
    (r"too many (?:input )?tokens", "generic"),
    (r"token limit exceeded", "generic"),
    (r"request_too_large", "Anthropic 413 error type"),
)

# A pattern ``A.*B`` ("A, then B anywhere later") is matched as its parts in order, each search
# starting where the previous part ended: one pass over the text. As one regex, ``.*`` ran to
# the end of the text from every occurrence of A (a 288 KB error repeating "input token count"
# took 22 s).
_SIMPLE = [p for p, _ in OVERFLOW_PATTERNS if ".*" not in p]
_OVERFLOW_RE = re.compile("|".join(f"(?:{p})" for p in _SIMPLE), re.IGNORECASE | re.DOTALL)
_SEQUENCES = [
    [re.compile(part, re.IGNORECASE | re.DOTALL) for part in p.split(".*")] for p, _ in OVERFLOW_PATTERNS if ".*" in p
]


def _matches_overflow(message: str) -> bool:
    if _OVERFLOW_RE.search(message):
        return True
    for parts in _SEQUENCES:
        pos = 0
        for part in parts:
            m = part.search(message, pos)
            if m is None:
                break
            pos = m.end()
        else:
            return True
    return False


# Messages about throughput limits that mention tokens; they are rate limits, never overflow.
_RATE_LIMIT_RE = re.compile(r"rate[ _-]?limit|per min(?:ute)?|\bTPM\b|\bRPM\b|tokens per day|quota", re.IGNORECASE)


def is_context_overflow(status: int | None, message: str) -> bool:
    """True when an error says the request does not fit the model's context window.

    ``status``: the HTTP status (None for errors without one, e.g. an error event in a stream);
    ``message``: the provider's error text (the message, code, type or whole body: anything
    that contains the provider's wording).

    Rules: a 429 is a rate limit, never an overflow; a 413 (payload too large) always counts,
    even without a body; otherwise the text must match one of :data:`OVERFLOW_PATTERNS` and not
    be about throughput (tokens per minute, quota).

        >>> is_context_overflow(400, "prompt is too long: 210000 tokens > 200000 maximum")
        True
        >>> is_context_overflow(500, "the request exceeds the available context size, try increasing it")
        True
        >>> is_context_overflow(None, "Internal server error")
        False
    """
    if status == 429:
        return False
    if status == 413:
        return True
    text = message or ""
    if not _matches_overflow(text):
        return False
    return not _RATE_LIMIT_RE.search(text)
