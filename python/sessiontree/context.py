"""Pi's context building: from a branch of entries to the messages the model sees.

Pure functions over entry dicts as Pi holds them in memory (parsed JSON, after v1/v2
migration). A *path* is a root-first list of entries: the branch from a root to the leaf
(Pi's ``getBranch()``). Nothing here reads files or walks parent pointers.

The pipeline, named after Pi 1.6's session-manager.ts and compaction.ts:

1. :func:`build_context_entries` (``buildContextEntries``): fold the latest compaction;
2. :func:`build_session_context` (``buildSessionProjection`` / ``buildSessionContext``):
   turn entries into ``AgentMessage`` dicts, apply ``context_edit`` entries;
3. :func:`convert_to_llm` (``convertToLlm``): map coding-agent roles to LLM roles;
4. :func:`estimate_context_tokens`, :func:`estimate_projected_context_tokens`,
   :func:`should_compact`: Pi's context-size estimate and auto-compaction trigger.

Token counts everywhere are Pi's estimate (:func:`sessiontree.tokens.estimate_tokens`:
ceil(UTF-16 code units / 4)) or provider-reported usage.

    >>> path = [
    ...     {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00Z",
    ...      "message": {"role": "user", "content": "hi", "timestamp": 1}},
    ...     {"type": "thinking_level_change", "id": "b", "parentId": "a",
    ...      "timestamp": "2026-01-01T00:00:01Z", "thinkingLevel": "high"},
    ... ]
    >>> ctx = build_session_context(path)
    >>> [m["role"] for m in ctx.messages], ctx.thinking_level, ctx.model
    (['user'], 'high', None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .entries import entry_value, entry_values
from .errors import PiError
from ._jsjson import JS_UNDEFINED, js_date_parse, js_get, js_stringify_bytes, js_to_string, js_truthy, js_usage_number
from .settings import DEFAULT_COMPACTION_SETTINGS, CompactionSettings
from .tokens import estimate_tokens

__all__ = [
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "ContextError",
    "SessionContext",
    "ContextTokenEstimate",
    "build_context_entries",
    "latest_compaction",
    "latest_compaction_at",
    "build_session_context",
    "apply_context_edit",
    "collect_context_edits",
    "context_edit_for",
    "context_edit_key",
    "NO_EDIT",
    "entry_to_context_messages",
    "convert_to_llm",
    "bash_execution_to_text",
    "current_system_message",
    "calculate_context_tokens",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "estimate_messages_tokens",
    "should_compact",
    "fingerprint",
]

#: Text Pi wraps around a compaction summary when sending it as a user message.
COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
#: Text Pi wraps around a branch summary when sending it as a user message.
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"

_EDITABLE_ROLES = ("user", "assistant", "toolResult", "custom")


class ContextError(PiError):
    """Pi's context building would throw on these entries (e.g. a message entry whose
    ``message`` is null or missing). ``str(err)`` / ``err.pi_error`` is Pi's text,
    e.g. ``"TypeError: Cannot read properties of null (reading 'role')"``."""


# ==== JavaScript helpers ==========================================================


def _f(obj: Any, key: str) -> Any:
    """``obj.key`` (:func:`sessiontree._jsjson.js_get`), raising :class:`ContextError`."""
    return js_get(obj, key, ContextError)


def _strict_eq(a: Any, b: Any) -> bool:
    """JavaScript ``a === b`` for parsed-JSON values (objects compare by identity)."""
    if a is JS_UNDEFINED or b is JS_UNDEFINED:
        return a is b
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return a is b


def _map_key(v: Any) -> Any:
    """Key for a JS ``Map`` lookup (SameValueZero); ``None`` when it can never match."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, (int, float)):
        return ("n", float(v)) if v == v else ("nan",)
    if v is None:
        return ("null",)
    if v is JS_UNDEFINED:
        return ("undef",)
    return None


def _date_ms(value: Any) -> int | None:
    """``new Date(value).getTime()`` as stored in a message; NaN becomes None (JSON null)."""
    t = js_date_parse(value)
    return None if t != t else int(t)


def _obj(**fields: Any) -> dict[str, Any]:
    """A JS object literal: keys whose value is undefined are left out (as JSON.stringify does)."""
    return {k: v for k, v in fields.items() if v is not JS_UNDEFINED}


def _entry_type(entry: Any) -> Any:
    return entry.get("type", JS_UNDEFINED) if isinstance(entry, dict) else JS_UNDEFINED


# ==== Data types ===================================================================


@dataclass(frozen=True)
class SessionContext:
    """What Pi's ``buildSessionContext()`` returns, plus where each message came from.

    * ``messages``: ``AgentMessage`` dicts, JSON-identical to Pi's (key order included);
    * ``thinking_level``: ``thinkingLevel`` of the last ``thinking_level_change`` on the
      path (``None`` if that entry has none), default ``"off"``;
    * ``model``: ``{"provider", "modelId"}`` from the last ``model_change`` or assistant
      message on the path, else ``None``;
    * ``sources``: the entry dict that produced each message (same length as ``messages``;
      a compaction produces up to two: its ``systemMessage`` and its summary).
    """

    messages: list[dict[str, Any]]
    thinking_level: str
    model: dict[str, Any] | None
    sources: list[dict[str, Any]]


@dataclass(frozen=True)
class ContextTokenEstimate:
    """Pi's ``ContextUsageEstimate``: ``tokens = usage_tokens + trailing_tokens``.

    ``usage_tokens`` comes from the last valid assistant usage (at message index
    ``last_usage_index``, or ``None`` without one); ``trailing_tokens`` estimates the
    messages after it.
    """

    tokens: int | float
    usage_tokens: int | float
    trailing_tokens: int | float
    last_usage_index: int | None

    def to_pi(self) -> dict[str, Any]:
        """The estimate with Pi's key names (``tokens, usageTokens, trailingTokens, lastUsageIndex``)."""
        return {
            "tokens": self.tokens,
            "usageTokens": self.usage_tokens,
            "trailingTokens": self.trailing_tokens,
            "lastUsageIndex": self.last_usage_index,
        }


# ==== Context entries ==============================================================


def latest_compaction_at(
    types: Sequence[Any], id_of: Callable[[int], Any], first_kept_of: Callable[[int], Any]
) -> tuple[Any, ...] | None:
    """Where the latest compaction on a path sits and where its kept range starts.

    The one home of this rule (Pi 1.6 ``buildSessionContext`` in session-manager.ts, which
    ``buildContextEntries`` and ``prepareCompaction`` share).

    The path is given as columns so that :class:`sessiontree.Session` can answer from its index
    without parsing the path: ``types[i]`` is entry ``i``'s ``type``; ``id_of(i)`` its ``id`` (read
    only for positions up to the compaction); ``first_kept_of(i)`` the ``firstKeptEntryId`` of the
    compaction at ``i`` (read once). :func:`latest_compaction` is the same rule over entries. The
    index's context walk (``Index::context_span``, rust/src/walk.rs) follows this rule to decide
    what to read; tests/session/test_entry_objects.py checks that every pure function answers the same
    on that span as on the whole branch, over the corpus.

    Returns ``None`` without a compaction, else ``(index, id_index, first_kept_index)``:
    ``index`` of the latest entry whose type is ``"compaction"``; ``id_index``, the first position
    holding its id (Pi's ``findIndex`` by id; the same as ``index`` unless ids repeat);
    ``first_kept_index``, the first entry before ``id_index`` whose id is ``firstKeptEntryId``
    (JavaScript ``===``), or ``None`` when no earlier entry has it (then nothing before the
    compaction is kept: Pi 1.6 ``buildContextEntries``; compaction preparation follows the same
    rule, see docs/divergences.md). Errors raised by ``id_of`` / ``first_kept_of`` propagate.
    """
    compaction = None
    for i in range(len(types) - 1, -1, -1):
        if types[i] == "compaction":
            compaction = i
            break
    if compaction is None:
        return None
    cid = id_of(compaction)
    idx = next((i for i in range(compaction + 1) if _strict_eq(id_of(i), cid)), compaction)
    first_kept = first_kept_of(compaction)
    kept = next((i for i in range(idx) if _strict_eq(id_of(i), first_kept)), None)
    return compaction, idx, kept


def latest_compaction(path: Sequence[dict[str, Any]]) -> tuple[Any, ...] | None:
    """:func:`latest_compaction_at` over entries (dicts or :class:`sessiontree.entries.Entry`).

    Raises :class:`ContextError` where Pi throws (an entry before the compaction that is null).
    """
    path = entry_values(path)
    return latest_compaction_at(
        [_entry_type(e) for e in path], lambda i: _f(path[i], "id"), lambda i: _f(path[i], "firstKeptEntryId")
    )


def build_context_entries(path: Sequence[dict[str, Any]]) -> list[Any]:
    """Pi's ``buildContextEntries``: the entries of ``path`` that feed the model context.

    ``path`` is root-first (``getBranch()``), entry dicts or :class:`sessiontree.entries.Entry`
    objects. Without a compaction on it, the whole path. Otherwise ``[latest compaction] +
    [path entries from its firstKeptEntryId up to the compaction, system-role messages
    skipped] + [entries after the compaction]`` (:func:`latest_compaction`). When
    ``firstKeptEntryId`` matches no earlier entry, only the compaction and later entries.
    Returns a new list of the entry values. Raises :class:`ContextError` where Pi throws (a
    kept message entry without a ``message``). Mirrors Pi 1.6 session-manager.ts.
    """
    path = entry_values(path)
    found = latest_compaction(path)
    if found is None:
        return path
    index, idx, kept = found
    out = [path[index]]
    if kept is not None:
        for entry in path[kept:idx]:
            if _entry_type(entry) == "message":
                if _f(_f(entry, "message"), "role") == "system":
                    continue
            out.append(entry)
    out.extend(path[idx + 1 :])
    return out


def entry_to_context_messages(entry: Any) -> list[Any]:
    """Pi's ``sessionEntryToContextMessages``: the messages one entry contributes.

    * ``message``: the stored message; user/assistant/toolResult with null or missing
      ``content`` get ``content: []`` and system gets ``content: ""`` (a copy, key position
      kept, appended when missing);
    * ``custom_message``: ``{role:"custom", customType, content (default []), display,
      details, timestamp}``;
    * ``branch_summary`` with a truthy ``summary``: ``{role:"branchSummary", summary, fromId,
      timestamp}``;
    * ``compaction``: its ``systemMessage`` when truthy, then ``{role:"compactionSummary",
      summary, tokensBefore, timestamp}``;
    * anything else: nothing.

    ``timestamp`` of built messages is ``Date.parse(entry.timestamp)`` in ms (None if
    invalid). Raises :class:`ContextError` where Pi throws (message null/missing).
    """
    entry = entry_value(entry)
    etype = _entry_type(entry)
    if etype == "message":
        message = _f(entry, "message")
        role = _f(message, "role")
        if isinstance(message, dict):
            content = message.get("content")
            if content is None:
                if role == "system":
                    fixed = dict(message)
                    fixed["content"] = ""
                    return [fixed]
                if role in ("user", "assistant", "toolResult"):
                    fixed = dict(message)
                    fixed["content"] = []
                    return [fixed]
        return [message]
    if etype == "custom_message":
        content = _f(entry, "content")
        if content is None or content is JS_UNDEFINED:
            content = []
        return [
            _obj(
                role="custom",
                customType=_f(entry, "customType"),
                content=content,
                display=_f(entry, "display"),
                details=_f(entry, "details"),
                timestamp=_date_ms(_f(entry, "timestamp")),
            )
        ]
    if etype == "branch_summary":
        summary = _f(entry, "summary")
        if not js_truthy(summary):
            return []
        return [
            _obj(
                role="branchSummary",
                summary=summary,
                fromId=_f(entry, "fromId"),
                timestamp=_date_ms(_f(entry, "timestamp")),
            )
        ]
    if etype == "compaction":
        summary_msg = _obj(
            role="compactionSummary",
            summary=_f(entry, "summary"),
            tokensBefore=_f(entry, "tokensBefore"),
            timestamp=_date_ms(_f(entry, "timestamp")),
        )
        system = _f(entry, "systemMessage")
        return [system, summary_msg] if js_truthy(system) else [summary_msg]
    return []


#: Returned by :func:`context_edit_for` when no ``context_edit`` targets the entry.
NO_EDIT: Any = object()


def context_edit_key(target: Any) -> Any:
    """Key of a ``context_edit`` target in Pi's ``Map`` (SameValueZero), ``None`` if it never matches.

    A string id is its own key (so ``edits["a1"]`` reads naturally); numbers, booleans,
    ``null`` and ``undefined`` get tagged tuples (``1`` and ``True`` stay apart, ``NaN`` matches
    ``NaN``); objects and arrays compare by identity in JavaScript, so they never match.
    """
    if isinstance(target, str):
        return target
    return _map_key(target)


def collect_context_edits(entries: Sequence[Any]) -> dict[str, Any]:
    """``context_edit`` map: :func:`context_edit_key` of ``targetId`` -> ``replacement``.

    The latest edit for a target wins (file order of ``entries``, root first). The value is
    ``None`` for an omission (``replacement: null``), else the replacement value as stored
    (normally ``{"content": ...}``; :data:`~sessiontree._jsjson.JS_UNDEFINED` when the key is
    missing). Pi 1.6 ``buildSessionProjection``. ``entries`` may hold ``Entry`` objects or dicts.
    """
    edits: dict[str, Any] = {}
    for entry in entries:
        entry = entry_value(entry)
        if _entry_type(entry) == "context_edit":
            key = context_edit_key(_f(entry, "targetId"))
            if key is not None:
                edits[key] = _f(entry, "replacement")
    return edits


def context_edit_for(edits: Any, entry_id: Any) -> Any:
    """The replacement ``edits`` holds for an entry id, else :data:`NO_EDIT`.

    ``edits``: from :func:`collect_context_edits`."""
    if not edits:
        return NO_EDIT
    key = context_edit_key(entry_id)
    if key is None:
        return NO_EDIT
    return edits.get(key, NO_EDIT)


def apply_context_edit(messages: list[Any], replacement: Any) -> list[Any]:
    """Pi's ``projectContextEntry``: apply one ``context_edit`` replacement to an entry's messages.

    ``None`` (``replacement: null``) omits them (returns ``[]``). Otherwise user, assistant,
    toolResult and custom messages get ``replacement.content`` as their content (key position
    kept; a string becomes ``[{"type": "text", "text": ...}]`` for assistant and toolResult; the
    key is dropped when the replacement has no ``content``); other roles are unchanged. A
    missing ``replacement`` (``undefined``) is not an omission: as in JavaScript, reading
    ``replacement.content`` then raises :class:`ContextError` (``TypeError: Cannot read
    properties of undefined (reading 'content')``) once an editable message is met. Returns new
    dicts; the inputs are not modified. The one home of this rule: context building,
    compaction and branch summaries all call it.
    """
    if replacement is None:
        return []
    out = []
    for message in messages:
        role = _f(message, "role")
        if role not in _EDITABLE_ROLES:
            out.append(message)
            continue
        content = _f(replacement, "content")
        if role in ("assistant", "toolResult") and isinstance(content, str):
            content = [{"type": "text", "text": content}]
        edited = dict(message)
        if content is JS_UNDEFINED:
            edited.pop("content", None)  # {...m, content: undefined}: JSON drops the key
        else:
            edited["content"] = content
        out.append(edited)
    return out


def _settings(path: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
    thinking_level: Any = "off"
    model = None
    for entry in path:
        etype = _entry_type(entry)
        if etype == "thinking_level_change":
            level = _f(entry, "thinkingLevel")
            thinking_level = None if level is JS_UNDEFINED else level
        elif etype == "model_change":
            model = _obj(provider=_f(entry, "provider"), modelId=_f(entry, "modelId"))
        elif etype == "message":
            message = _f(entry, "message")
            if _f(message, "role") == "assistant":
                model = _obj(provider=_f(message, "provider"), modelId=_f(message, "model"))
    return thinking_level, model


def build_session_context(path: Sequence[dict[str, Any]]) -> SessionContext:
    """Pi's ``buildSessionContext`` (via ``buildSessionProjection``) over a root-first path.

    Messages come from :func:`build_context_entries` (``entry_to_context_messages`` per
    entry; only the leading compaction contributes, older ones kept in range produce
    nothing). ``context_edit`` entries among the context entries apply to their
    ``targetId``'s messages, the latest edit per target wins: ``replacement: null`` omits
    the target; otherwise the content of user/assistant/toolResult/custom messages
    becomes ``replacement.content`` (a string becomes ``[{type:"text", text}]`` for
    assistant and toolResult). ``thinking_level`` and ``model`` come from the whole path.
    An empty path gives an empty context.

    Raises :class:`ContextError` where Pi throws (a message entry without a message).
    ``path`` may hold :class:`sessiontree.entries.Entry` objects or dicts (same answer).
    """
    path = entry_values(path)
    thinking_level, model = _settings(path)
    entries = build_context_entries(path)
    edits = collect_context_edits(entries)
    messages: list[Any] = []
    sources: list[Any] = []
    for index, entry in enumerate(entries):
        if index > 0 and _entry_type(entry) == "compaction":
            continue  # only the newest compaction, at index 0, contributes
        produced = entry_to_context_messages(entry)
        if edits and produced:
            replacement = context_edit_for(edits, _f(entry, "id"))
            if replacement is not NO_EDIT:
                produced = apply_context_edit(produced, replacement)
        messages.extend(produced)
        sources.extend([entry] * len(produced))
    return SessionContext(messages=messages, thinking_level=thinking_level, model=model, sources=sources)


# ==== convertToLlm =================================================================


def bash_execution_to_text(message: dict[str, Any]) -> str:
    """Pi's ``bashExecutionToText``: the user text a ``bashExecution`` message becomes.

    >>> bash_execution_to_text({"command": "ls", "output": "", "exitCode": 2, "cancelled": False})
    'Ran `ls`\\n(no output)\\n\\nCommand exited with code 2'
    """
    text = "Ran `" + js_to_string(_f(message, "command")) + "`\n"
    output = _f(message, "output")
    if js_truthy(output):
        text += "```\n" + js_to_string(output) + "\n```"
    else:
        text += "(no output)"
    exit_code = _f(message, "exitCode")
    if js_truthy(_f(message, "cancelled")):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code is not JS_UNDEFINED and not _strict_eq(exit_code, 0):
        text += "\n\nCommand exited with code " + js_to_string(exit_code)
    full = _f(message, "fullOutputPath")
    if js_truthy(_f(message, "truncated")) and js_truthy(full):
        text += "\n\n[Output truncated. Full output: " + js_to_string(full) + "]"
    return text


def convert_to_llm(messages: Sequence[dict[str, Any]]) -> list[Any]:
    """Pi's ``convertToLlm``: context messages -> LLM messages (``Message[]``).

    * ``bashExecution`` -> ``{role:"user", content:[{type:"text", text}], timestamp}`` with
      :func:`bash_execution_to_text`; dropped when ``excludeFromContext`` is truthy;
    * ``custom`` -> ``{role:"user", content, timestamp}`` (string content -> one text block);
    * ``branchSummary`` / ``compactionSummary`` -> user text ``PREFIX + summary + SUFFIX``
      (:data:`BRANCH_SUMMARY_PREFIX`, :data:`COMPACTION_SUMMARY_PREFIX`, ...);
    * ``system``, ``user``, ``assistant``, ``toolResult``: the same object;
    * any other role: dropped.

    Raises :class:`ContextError` for a ``None`` message (Pi throws reading its role).
    """
    out = []
    for m in messages:
        role = _f(m, "role")
        if role in ("system", "user", "assistant", "toolResult"):
            out.append(m)
        elif role == "bashExecution":
            if js_truthy(_f(m, "excludeFromContext")):
                continue
            out.append(
                _obj(
                    role="user",
                    content=[{"type": "text", "text": bash_execution_to_text(m)}],
                    timestamp=_f(m, "timestamp"),
                )
            )
        elif role == "custom":
            content = _f(m, "content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            out.append(_obj(role="user", content=content, timestamp=_f(m, "timestamp")))
        elif role in ("branchSummary", "compactionSummary"):
            if role == "branchSummary":
                prefix, suffix = BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX
            else:
                prefix, suffix = COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX
            text = prefix + js_to_string(_f(m, "summary")) + suffix
            out.append(_obj(role="user", content=[{"type": "text", "text": text}], timestamp=_f(m, "timestamp")))
    return out


# ==== Token estimates ================================================================


def calculate_context_tokens(usage: dict[str, Any]) -> int | float:
    """Pi's ``calculateContextTokens``.

    ``usage.totalTokens`` if truthy, else ``input + output + cacheRead + cacheWrite`` (NaN if
    one is missing)."""
    total = usage.get("totalTokens", JS_UNDEFINED) if isinstance(usage, dict) else JS_UNDEFINED
    if js_truthy(total):
        return total if isinstance(total, (int, float)) and not isinstance(total, bool) else js_usage_number(total)
    if not isinstance(usage, dict):
        return float("nan")
    return (
        js_usage_number(usage.get("input", JS_UNDEFINED))
        + js_usage_number(usage.get("output", JS_UNDEFINED))
        + js_usage_number(usage.get("cacheRead", JS_UNDEFINED))
        + js_usage_number(usage.get("cacheWrite", JS_UNDEFINED))
    )


def _assistant_usage(message: Any) -> Any:
    """Pi's ``getAssistantUsage``.

    Usage of a non-aborted, non-error assistant message with positive context tokens, else None."""
    if not isinstance(message, dict) or message.get("role") != "assistant" or "usage" not in message:
        return None
    if message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message["usage"]
    if not js_truthy(usage):
        return None
    tokens = calculate_context_tokens(usage)
    if not tokens > 0:
        return None
    return usage


def estimate_context_tokens(messages: Sequence[dict[str, Any]]) -> ContextTokenEstimate:
    """Pi's ``estimateContextTokens``: last valid assistant usage + estimates after it.

    The last assistant message whose ``stopReason`` is not ``aborted``/``error`` and whose
    usage gives positive :func:`calculate_context_tokens` supplies ``usage_tokens``;
    messages after it are estimated with :func:`~sessiontree.tokens.estimate_tokens`. With
    no such message every message is estimated. Raises
    :class:`~sessiontree.tokens.EstimateError` where Pi's estimate throws.
    """
    for i in range(len(messages) - 1, -1, -1):
        usage = _assistant_usage(messages[i])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing: int | float = 0  # NaN where Pi's estimate is
            for m in messages[i + 1 :]:
                trailing += estimate_tokens(m)
            return ContextTokenEstimate(usage_tokens + trailing, usage_tokens, trailing, i)
    total: int | float = 0
    for m in messages:
        total += estimate_tokens(m)
    return ContextTokenEstimate(total, 0, total, None)


def current_system_message(messages: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Pi-ai's ``getCurrentSystemMessage``: replay every system message into one.

    ``content`` = the non-empty texts of each system message's content (a string, or its
    text blocks joined by ``"\\n"``) joined by ``"\\n\\n"``; ``sections`` patched by name in
    order (``null`` removes one; omitted when empty); ``toolsAdded`` = tools by name after
    each message's ``toolsRemoved`` then ``toolsAdded`` (omitted when empty); ``timestamp``
    of the first system message. ``None`` when there is no system message and no tool.
    """
    content: list[Any] = []
    sections: dict[str, Any] = {}
    tools: dict[str, Any] = {}
    timestamp: Any = JS_UNDEFINED
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "system":
            continue
        if timestamp is JS_UNDEFINED or timestamp is None:
            timestamp = m.get("timestamp", JS_UNDEFINED)
        c = m.get("content", JS_UNDEFINED)
        if isinstance(c, str):
            text = c
        elif isinstance(c, list):  # contentText: text blocks joined by "\n" (null text -> "")
            text = "\n".join(
                "" if b.get("text") is None else js_to_string(b["text"])
                for b in c
                if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            what = "null" if c is None else "undefined" if c is JS_UNDEFINED else "content"
            raise ContextError(
                f"TypeError: Cannot read properties of {what} (reading 'filter')"
                if what != "content"
                else "TypeError: content.filter is not a function"
            )
        if text:
            content.append(text)
        secs = m.get("sections")
        if isinstance(secs, dict):
            for name, value in secs.items():
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        for tool in m.get("toolsRemoved") or []:
            tools.pop(_map_key(_f(tool, "name")), None)
        for tool in m.get("toolsAdded") or []:
            tools[_map_key(_f(tool, "name"))] = tool  # Map.set keeps an existing key's position
    if timestamp is JS_UNDEFINED and not tools:
        return None
    out: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        out["sections"] = sections
    if tools:
        out["toolsAdded"] = list(tools.values())
    out["timestamp"] = 0 if timestamp is JS_UNDEFINED or timestamp is None else timestamp
    return out


def estimate_projected_context_tokens(
    messages: Sequence[dict[str, Any]], sources: Sequence[dict[str, Any]], path: Sequence[dict[str, Any]]
) -> ContextTokenEstimate:
    """Pi's ``estimateProjectedContextTokens(projection, branchEntries)``.

    ``messages``/``sources`` are a :class:`SessionContext`'s (or the projection's) and
    ``path`` the full root-first branch. Provider usage is trusted only when the entry that
    holds it comes after every ``context_edit`` and ``compaction`` on the path; then the
    result is :func:`estimate_context_tokens`. Otherwise every non-system message is
    estimated and all system messages count once, replayed into one
    (:func:`current_system_message`), with ``usage_tokens = 0``.
    Raises :class:`~sessiontree.tokens.EstimateError` where Pi's estimate throws.
    ``sources``/``path`` may hold :class:`sessiontree.entries.Entry` objects or dicts.
    """
    estimate = estimate_context_tokens(messages)
    if estimate.last_usage_index is not None:
        usage_id = _f(entry_value(sources[estimate.last_usage_index]), "id")
        path = entry_values(path)
        usage_pos = -1
        if js_truthy(usage_id):
            usage_pos = next((i for i, e in enumerate(path) if _strict_eq(_f(e, "id"), usage_id)), -1)
        latest_invalidating = -1
        for i in range(len(path) - 1, -1, -1):
            if _entry_type(path[i]) in ("context_edit", "compaction"):
                latest_invalidating = i
                break
        if usage_pos > latest_invalidating:
            return estimate
    tokens = estimate_messages_tokens(messages)
    return ContextTokenEstimate(tokens, 0, tokens, None)


def estimate_messages_tokens(messages: Sequence[dict[str, Any]]) -> int | float:
    """Pi's chars/4 estimate of context ``messages`` with no provider usage.

    Every non-system message (:func:`~sessiontree.tokens.estimate_tokens`) plus the system
    messages replayed into one (:func:`current_system_message`). The "tokens after" of a
    compaction are this; compare "tokens before" with it, not with a figure that includes
    provider usage."""
    system = current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    for m in messages:
        if _f(m, "role") != "system":
            tokens += estimate_tokens(m)
    return tokens


def should_compact(
    context_tokens: float, context_window: int, settings: CompactionSettings = DEFAULT_COMPACTION_SETTINGS
) -> bool:
    """Pi's ``shouldCompact``: whether the context is over the window minus the reserve.

    ``settings.enabled and context_tokens > context_window - settings.reserve_tokens`` (tokens
    and window in Pi's token units; NaN is never over)."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


def fingerprint(message: Any) -> str:
    """First 16 hex digits of SHA-256 over the UTF-8 of ``JSON.stringify(message)``.

    The ``sha`` the goldens use to compare messages. For tests and diagnostics.

        >>> fingerprint({"role": "user", "content": "hi"})
        'ae760f5ba03c31ac'
    """
    import hashlib  # on first use (a light import)

    return hashlib.sha256(js_stringify_bytes(message)).hexdigest()[:16]
