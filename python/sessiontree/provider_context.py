"""Provider-safe context: the messages of :func:`sessiontree.context.build_session_context`,
repaired so that any chat-completions provider accepts them.

Pi's context can hold shapes providers reject: a tool result whose call was compacted away or
omitted by a ``context_edit``, a tool call whose result never arrived (the run was killed, the
result was omitted), an empty failed assistant attempt. :func:`repair_for_provider` removes them
and says what it removed and why; it **never invents messages**.

Choice for a tool call without a result: the call block is **dropped** from a copy of its
assistant message (and the message itself when nothing else is left), rather than answered with
a synthetic error result (what pi-ai's ``transformMessages`` does for the provider request). A
fabricated ``"No result provided"`` would be stored nowhere yet read by the model as if a tool had
failed; dropping keeps the context a faithful subset of the session.

Rules, in order (each drop is a :class:`Drop` ``(reason, entry_id)``; ``entry_id`` is the source
entry of the message):

1. ``empty_failed_assistant``: an assistant message with ``stopReason`` ``"error"`` or
   ``"aborted"`` and no content (no blocks, or only empty text/thinking blocks) is dropped; any
   other assistant message without content too (``empty_assistant``: providers reject it).
2. Tool results belong to the closest preceding assistant message. A ``toolResult`` whose
   ``toolCallId`` is not a call of that message is dropped (``orphan_tool_result``); a second
   result for the same call is dropped (``duplicate_tool_result``).
3. A tool call with no result before the next assistant message (or the end) is removed from its
   message (``tool_call_without_result``); an assistant message left with no content is dropped
   (``empty_assistant_after_repair``).

The result is *provider-valid* (:func:`is_provider_valid`): every tool result follows its call
within the same assistant turn, every tool call has exactly one result, and no failed attempt is
empty.
"""

# No ``from __future__ import annotations``: the NamedTuple's field annotations stay objects,
# not strings ``typing`` compiles into ForwardRefs at import (a light import).

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Sequence

from ._jsjson import message_role

__all__ = ["Drop", "ProviderContext", "repair_for_provider", "is_provider_valid", "provider_problems"]


class Drop(NamedTuple):
    """One repair: ``reason`` (see the module docstring) and the source entry's id (``None`` when
    the message has no source entry with a string id)."""

    reason: str
    entry_id: Optional[str]


@dataclass(frozen=True)
class ProviderContext:
    """Messages ready for a provider (Pi ``AgentMessage`` dicts, same roles and order as
    ``Session.build_context().messages`` minus the repairs), the ``dropped`` repairs in order, and
    ``sources`` (the entry dict each message came from, parallel to ``messages``)."""

    messages: list[Any]
    dropped: list[Any] = field(default_factory=list)
    sources: list[Any] = field(default_factory=list)


def _source_id(source: Any) -> Optional[str]:
    sid = source.get("id") if isinstance(source, dict) else None
    return sid if isinstance(sid, str) else None


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _is_tool_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "toolCall"


def _has_content(message: dict[str, Any]) -> bool:
    """True when an assistant message carries something a provider can replay."""
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            if isinstance(block.get("text"), str) and block["text"].strip():
                return True
        elif kind == "thinking":
            if isinstance(block.get("thinking"), str) and block["thinking"].strip():
                return True
        else:
            return True
    return False


def _is_failed(message: dict[str, Any]) -> bool:
    return message.get("stopReason") in ("error", "aborted")


def repair_for_provider(messages: Sequence[dict[str, Any]], sources: Optional[Sequence[Any]] = None) -> ProviderContext:
    """Apply the repairs of this module to context ``messages`` (with their ``sources``, parallel;
    optional). Returns a :class:`ProviderContext`; the inputs are not modified (a repaired
    assistant message is a copy).

        >>> call = {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "ls",
        ...         "arguments": {}}], "stopReason": "toolUse"}
        >>> ctx = repair_for_provider([{"role": "user", "content": "hi"}, call])
        >>> [m["role"] for m in ctx.messages], [d.reason for d in ctx.dropped]
        (['user'], ['tool_call_without_result', 'empty_assistant_after_repair'])
    """
    msgs = list(messages)
    srcs = list(sources) if sources is not None else [None] * len(msgs)
    dropped: list[Any] = []

    # 1. empty failed attempts
    keep: list[Any] = []
    for m, s in zip(msgs, srcs):
        if message_role(m) == "assistant" and not _has_content(m):
            reason = "empty_failed_assistant" if _is_failed(m) else "empty_assistant"
            dropped.append(Drop(reason, _source_id(s)))
            continue
        keep.append((m, s))

    # 2./3. pair tool results with the closest preceding assistant's calls
    out: list[Any] = []  # [message, source] pairs (lists so an assistant can be replaced later)
    turn_index: Optional[int] = None  # position in ``out`` of the current assistant
    pending: dict[str, Any] = {}  # call id -> still unanswered
    answered: set[Any] = set()

    def close_turn() -> None:
        nonlocal turn_index
        if turn_index is None:
            return
        missing = {cid for cid, open_ in pending.items() if open_}
        bad_ids = any(_is_tool_call(b) and not isinstance(b.get("id"), str) for b in _blocks(out[turn_index][0]))
        if missing or bad_ids:
            message, source = out[turn_index]
            content = []
            for block in _blocks(message):
                if _is_tool_call(block) and (not isinstance(block.get("id"), str) or block.get("id") in missing):
                    dropped.append(Drop("tool_call_without_result", _source_id(source)))
                    continue
                content.append(block)
            repaired = dict(message)
            repaired["content"] = content
            if _has_content(repaired):
                out[turn_index][0] = repaired
            else:
                dropped.append(Drop("empty_assistant_after_repair", _source_id(source)))
                out[turn_index] = None
        turn_index = None
        pending.clear()
        answered.clear()

    for m, s in keep:
        role = message_role(m)
        if role == "assistant":
            close_turn()
            out.append([m, s])
            turn_index = len(out) - 1
            for block in _blocks(m):
                if _is_tool_call(block) and isinstance(block.get("id"), str):
                    pending[block["id"]] = True
        elif role == "toolResult":
            cid = m.get("toolCallId")
            if isinstance(cid, str) and pending.get(cid):
                pending[cid] = False
                answered.add(cid)
                out.append([m, s])
            elif isinstance(cid, str) and cid in answered:
                dropped.append(Drop("duplicate_tool_result", _source_id(s)))
            else:
                dropped.append(Drop("orphan_tool_result", _source_id(s)))
        else:
            out.append([m, s])
    close_turn()

    pairs = [p for p in out if p is not None]
    return ProviderContext(messages=[p[0] for p in pairs], dropped=dropped, sources=[p[1] for p in pairs])


def provider_problems(messages: Sequence[dict[str, Any]]) -> list[Any]:
    """Why ``messages`` are not provider-valid: a list of ``(reason, index)`` (empty when valid).

    Reasons: ``orphan_tool_result`` (no call in the closest preceding assistant message),
    ``duplicate_tool_result``, ``tool_call_without_result`` (index of the assistant message),
    ``empty_failed_assistant``, ``empty_assistant``."""
    problems: list[Any] = []
    turn: Optional[int] = None
    pending: dict[str, Any] = {}

    def close() -> None:
        if turn is not None and any(pending.values()):
            problems.append(("tool_call_without_result", turn))

    for i, m in enumerate(messages):
        role = message_role(m)
        if role == "assistant":
            close()
            turn, pending = i, {}
            if not _has_content(m):
                problems.append(("empty_failed_assistant" if _is_failed(m) else "empty_assistant", i))
            for block in _blocks(m):
                if _is_tool_call(block):
                    if not isinstance(block.get("id"), str):
                        problems.append(("tool_call_without_result", i))
                    else:
                        pending[block["id"]] = True
        elif role == "toolResult":
            cid = m.get("toolCallId")
            if isinstance(cid, str) and pending.get(cid):
                pending[cid] = False
            elif isinstance(cid, str) and cid in pending:
                problems.append(("duplicate_tool_result", i))
            else:
                problems.append(("orphan_tool_result", i))
    close()
    return problems


def is_provider_valid(messages: Sequence[dict[str, Any]]) -> bool:
    """True when :func:`provider_problems` finds nothing."""
    return not provider_problems(messages)
