"""Checks of one session's structure and content, beyond what the scanner records per line.

:meth:`sessiontree.Session.validate` runs them and ``sessiontree validate`` prints what it
returns, so the library and the CLI agree on every file. Two kinds:

* structural (ids, parent links, cycles, label targets): :func:`structural_problems`;
* content Pi would throw on when it builds the context, estimates tokens or serializes a
  conversation for a summary (a ``message`` that is null, ``content`` that is not iterable, a
  tool call without ``arguments``...): :func:`entry_content_error`, one entry at a time.

Each problem is a dict ``{line, offset, kind, message, severity}``, severity ``"error"`` or
``"note"`` (blank lines), as the CLI has always printed them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import PiError

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = ["NOTE_KINDS", "entry_content_error"]

#: Problem kinds that are notes, not errors (Pi skips them silently and nothing is lost).
NOTE_KINDS = frozenset({"blank_line"})


def entry_content_error(raw: Any) -> PiError | None:
    """The error Pi would throw on this entry's content, or None.

    Runs, on the context messages of one parsed entry, what compaction, branch summaries and
    context estimates run: context building (:func:`sessiontree.context.entry_to_context_messages`,
    Pi ``buildSessionContext``), the token estimate (Pi ``estimateTokens``) and the summary
    serialization (Pi ``convertToLlm`` + ``serializeConversation``). Returns the first
    :class:`~sessiontree.errors.PiError` raised (its ``pi_error`` is Pi's text), else None.
    Cost: one entry's messages.

        >>> entry_content_error({"type": "message", "id": "a", "message": {"role": "user", "content": None}}).pi_error
        'TypeError: content is not iterable'
        >>> entry_content_error({"type": "message", "id": "a", "message": {"role": "user", "content": "hi"}}) is None
        True
    """
    from .compaction import serialize_conversation
    from .context import convert_to_llm, entry_to_context_messages
    from .tokens import estimate_tokens

    if not isinstance(raw, dict) or raw.get("type") not in ("message", "custom_message", "branch_summary",
                                                            "compaction"):
        return None
    try:
        messages = entry_to_context_messages(raw)
        for message in messages:
            estimate_tokens(message)
        serialize_conversation(convert_to_llm(messages))
    except PiError as exc:
        return exc
    return None
