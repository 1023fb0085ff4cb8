"""An extractive summarizer that needs no model: the default, so compaction works offline.

It reads Pi's serialized conversation (``serializeConversation`` text: ``[User]: ...``,
``[Assistant]: ...``, ``[Assistant tool calls]: name(key=<JSON>, ...); ...``,
``[Tool result]: ...`` parts separated by blank lines) and fills Pi's structured format from it:

* **Goal**: the first user request (slash commands and shell runs skipped);
* **Constraints & Preferences**: user sentences that state rules ("must", "don't", "prefer"...);
* **Progress**: Done = earlier user requests, modified files and commands run; In Progress = the
  latest request; Blocked = errors reported after the assistant last spoke;
* **Key Decisions**: assistant sentences that state a choice ("instead", "because", "decided"...);
* **Next Steps**: open errors, the latest request, what the assistant said it would do next;
* **Critical Context**: latest request and answer, errors seen, tool usage, focus matches.

Branch summaries stop after Next Steps; turn-prefix summaries use Pi's three turn headings.
With a previous summary (rolling update) the sections are merged: earlier goals, constraints,
decisions, context and **all earlier Done items** are kept, earlier In Progress items move to
Done when the new span has moved on. Summaries embedded in the conversation (Pi's
``compactionSummary``/``branchSummary`` user messages) are merged the same way.

Deterministic (no clock, no randomness) and linear in the text size: every part is scanned once
and long messages are only scanned up to :data:`SCAN_CHARS`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..context import BRANCH_SUMMARY_PREFIX, COMPACTION_SUMMARY_PREFIX
from .base import SummaryRequest, SummaryResult, SummaryUsage, run_sync

__all__ = [
    "OfflineSummarizer",
    "parse_conversation",
    "parse_tool_calls",
    "parse_summary",
    "ConversationPart",
    "SCAN_CHARS",
]

#: Characters of one message that are scanned for sentences and errors.
SCAN_CHARS = 4000
_ITEM_CHARS = 200  # one bullet's length
_MAX_CRITICAL = 40

_PART_SPLIT = re.compile(r"\n\n(?=\[(?:User|Assistant|Assistant tool calls|Tool result)\]: )")
_PART_TAG = re.compile(r"\[(User|Assistant|Assistant tool calls|Tool result)\]: ")
_ROLE = {"User": "user", "Assistant": "assistant", "Assistant tool calls": "tool_calls", "Tool result": "tool_result"}


# ==== Parsing the serialized conversation ====


@dataclass
class ConversationPart:
    """One part of a serialized conversation. ``role``: ``user``, ``assistant``, ``tool_calls``
    or ``tool_result``; ``text``: the part without its tag; ``calls``: parsed tool calls
    (``[(name, {arg: value})]``) for ``tool_calls`` parts."""

    role: str
    text: str
    calls: list[Any] = field(default_factory=list)


def parse_conversation(text: str) -> list[ConversationPart]:
    """Split Pi's serialized conversation into parts (inverse of ``serializeConversation``,
    up to blank-line-plus-tag sequences inside a message, which are read as a new part).
    Text before the first tag becomes a ``user`` part.

        >>> [(p.role, p.text) for p in parse_conversation("[User]: hi\\n\\n[Assistant]: yo")]
        [('user', 'hi'), ('assistant', 'yo')]
    """
    parts = []
    for chunk in _PART_SPLIT.split(text or ""):
        m = _PART_TAG.match(chunk)
        if m is None:
            if chunk.strip():
                parts.append(ConversationPart("user", chunk))
            continue
        role = _ROLE[m.group(1)]
        body = chunk[m.end() :]
        part = ConversationPart(role, body)
        if role == "tool_calls":
            part.calls = parse_tool_calls(body)
        parts.append(part)
    return parts


_CALL_NAME = re.compile(r"\s*([^\s(;=]+)\(")
_ARG_KEY = re.compile(r"([^=,()\s]+)=")
_DECODER = json.JSONDecoder()


def parse_tool_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse ``name(key=<JSON>, ...); name2(...)`` (Pi's tool-call rendering).

    Values are JSON (``JSON.stringify``); a value that does not parse ends that call's
    arguments. Linear in the text length.

        >>> parse_tool_calls('read(path="a; b.ts", limit=5); bash(command="ls")')
        [('read', {'path': 'a; b.ts', 'limit': 5}), ('bash', {'command': 'ls'})]
    """
    calls = []
    i, n = 0, len(text)
    while i < n:
        m = _CALL_NAME.match(text, i)
        if m is None:
            break
        name, i = m.group(1), m.end()
        args: dict[str, Any] = {}
        while i < n and text[i] != ")":
            km = _ARG_KEY.match(text, i)
            if km is None:
                break
            try:
                value, i = _DECODER.raw_decode(text, km.end())
            except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
                i = km.end()
                break
            args[km.group(1)] = value
            if text.startswith(", ", i):
                i += 2
        calls.append((name, args))
        nxt = text.find("; ", i)
        if nxt < 0:
            break
        i = nxt + 2
    return calls


# ==== Parsing a previous summary ====

_SECTION_KEYS = {
    "goal": "goal",
    "constraints & preferences": "constraints",
    "constraints": "constraints",
    "progress": None,
    "done": "done",
    "in progress": "in_progress",
    "blocked": "blocked",
    "key decisions": "decisions",
    "next steps": "next",
    "critical context": "critical",
    # turn-prefix headings
    "original request": "goal",
    "progress so far": "done",
    "context needed to continue": "critical",
}
_FILE_BLOCK_OPEN = re.compile(r"<(read-files|modified-files)>\n")


def _strip_file_blocks(text: str) -> str:
    """``text`` without ``<read-files>``/``<modified-files>`` blocks (``<K>\\n ... \\n</K>``, the
    nearest closer), in one pass: as the regex ``<(K)>\\n.*?\\n</\\1>`` every unclosed opener
    scanned the rest of the text."""
    out, pos, no_closer = [], 0, set()
    while True:
        m = _FILE_BLOCK_OPEN.search(text, pos)
        while m is not None and m.group(1) in no_closer:
            m = _FILE_BLOCK_OPEN.search(text, m.start() + 1)
        if m is None:
            break
        close = "\n</" + m.group(1) + ">"
        end = text.find(close, m.end())
        if end < 0:
            no_closer.add(m.group(1))  # no later opener of this kind can close either
            continue
        out.append(text[pos : m.start()])
        pos = end + len(close)
    out.append(text[pos:])
    return "".join(out)


_BULLET = re.compile(r"^\s*(?:[-*+]\s+(?:\[[ xX]\]\s*)?|\d+[.)]\s+)")
_PLACEHOLDER = re.compile(r"^\(?(none|n/?a|nothing)\)?\.?$", re.IGNORECASE)


def parse_summary(text: str) -> dict[str, list[str]]:
    """Read a structured summary back into sections: ``goal``, ``constraints``, ``done``,
    ``in_progress``, ``blocked``, ``decisions``, ``next``, ``critical`` (lists of item texts,
    bullets and checkboxes removed, "(none)" dropped).

    File-list blocks are ignored (the caller appends fresh ones); the turn-prefix headings map
    to goal/done/critical; text under unknown headings, or before any heading, goes to
    ``critical`` so nothing from an unstructured summary is lost.

        >>> parse_summary("## Goal\\nShip it\\n\\n## Progress\\n### Done\\n- [x] A\\n\\n### Blocked\\n- (none)")
        {'goal': ['Ship it'], 'constraints': [], 'done': ['A'], 'in_progress': [], 'blocked': [], 'decisions': [], 'next': [], 'critical': []}
    """
    out: dict[str, list[str]] = {
        k: [] for k in ("goal", "constraints", "done", "in_progress", "blocked", "decisions", "next", "critical")
    }
    text = _strip_file_blocks(text or "")
    current: str | None = "critical"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line == "---" or line.startswith("**Turn Context"):
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip().lower()
            current = _SECTION_KEYS.get(heading, "critical")
            if heading == "progress":
                current = "done"
            continue
        item = _BULLET.sub("", line).strip()
        if not item or _PLACEHOLDER.match(item):
            continue
        out[current or "critical"].append(item)
    return out


# ==== Extraction ====

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(r"^(?:[-*+>]\s+|\d+[.)]\s+|#+\s+)+")
_CONSTRAINT = re.compile(
    r"\b(must|mustn't|should(?:n't| not)?|never|always|don't|do not|avoid|prefer(?:ably)?|without|only use|"
    r"make sure|ensure|required?|no more than|at most|at least|keep (?:it|them|the)|stick to)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(decided|decide to|instead of|instead|rather than|chose|choose|going with|go with|opted|opt for|"
    r"switch(?:ed)? to|because|so that|the (?:fix|approach|plan) is|I'll use|we'll use|let's use)\b",
    re.IGNORECASE,
)
_NEXT = re.compile(
    r"\b(next|then|I'll|I will|we'll|we will|need to|needs to|todo|remaining|still have to|"
    r"let me|going to)\b",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|\bERR!|\bFAIL(?:ED)?\b|Traceback \(most recent call last\)|"
    r"(?i:\berror(?:\[\w+\])?:|\berror TS\d+|panicked at|\bfatal:|command not found|no such file or directory|"
    r"permission denied|(?:exited with|exit) code [1-9]|segmentation fault|\bfailed:|\bfailed with\b|"
    r"\bcannot find module\b|\bundefined reference\b)"
)
_SLASH_COMMAND = re.compile(r"^/[\w:-]+(\s+\S.*)?$", re.DOTALL)
_BASH_RUN = re.compile(r"^Ran `([^`]*)`")
_WS = re.compile(r"\s+")
_WORD = re.compile(r"[\w./-]{4,}")

_MODIFY_TOOLS = {
    "write": "Wrote",
    "edit": "Edited",
    "multiedit": "Edited",
    "apply_patch": "Patched",
    "str_replace": "Edited",
    "create": "Created",
}
_SHELL_TOOLS = {"bash", "shell", "exec", "run", "terminal", "sh"}


def _clip(text: str, limit: int = _ITEM_CHARS) -> str:
    """One line: whitespace collapsed, cut at ``limit`` characters with an ellipsis."""
    text = _WS.sub(" ", text[: limit * 4]).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sentences(text: str) -> Iterable[str]:
    """Sentences of the first :data:`SCAN_CHARS` characters: split at line ends and at ``.!?``
    followed by a space (not inside ``a.b``), list bullets removed, fenced code skipped."""
    in_code = False
    for line in text[:SCAN_CHARS].splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for s in _SENTENCE_END.split(_LEAD.sub("", line.strip())):
            s = s.strip()
            if len(s) >= 8:
                yield s


def _dedupe(items: Iterable[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        key = _WS.sub(" ", item).strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _first_error_line(text: str) -> str | None:
    for line in text[:SCAN_CHARS].splitlines():
        if _ERROR_LINE.search(line) and line.strip():
            return _clip(line.strip())
    return None


@dataclass
class _Facts:
    """Everything extracted from one conversation, in order of appearance."""

    requests: list[str] = field(default_factory=list)  # real user requests
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    modified: dict[str, Any] = field(default_factory=dict)  # path -> verb
    read: dict[str, Any] = field(default_factory=dict)  # path -> None
    commands: list[str] = field(default_factory=list)
    tool_counts: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # distinct, in order
    open_errors: dict[str, Any] = field(default_factory=dict)  # error -> None, after the last assistant text
    last_assistant: str | None = None
    last_part_role: str | None = None
    embedded: list[str] = field(default_factory=list)  # summaries inside the conversation
    requests_answered: bool = False  # assistant spoke after the last request
    focus: list[str] = field(default_factory=list)


def _extract(parts: list[ConversationPart], focus_words: set[str]) -> _Facts:
    f = _Facts()
    errors_seen: set[str] = set()
    for part in parts:
        f.last_part_role = part.role
        text = part.text
        if part.role == "user":
            if text.startswith(COMPACTION_SUMMARY_PREFIX) or text.startswith(BRANCH_SUMMARY_PREFIX):
                inner = text.split("<summary>\n", 1)[-1]
                f.embedded.append(inner.rsplit("</summary>", 1)[0])
                continue
            bash = _BASH_RUN.match(text)
            if bash:
                f.commands.append(_clip(bash.group(1), 120))
                err = _first_error_line(text[bash.end() :])
                if err:
                    _note_error(f, err, errors_seen)
                continue
            if _SLASH_COMMAND.match(text.strip()) and "\n" not in text.strip():
                continue
            f.requests.append(text)
            f.requests_answered = False
            f.open_errors = {}
            for s in _sentences(text):
                if _CONSTRAINT.search(s):
                    f.constraints.append(_clip(s))
        elif part.role == "assistant":
            f.last_assistant = text
            f.requests_answered = True
            f.open_errors = {}
            for s in _sentences(text):
                if _DECISION.search(s):
                    f.decisions.append(s)
        elif part.role == "tool_calls":
            for name, args in part.calls:
                f.tool_counts[name] = f.tool_counts.get(name, 0) + 1
                path = args.get("path") or args.get("file_path") or args.get("filePath")
                lname = name.lower()
                if isinstance(path, str) and path:
                    if lname in _MODIFY_TOOLS:
                        f.modified.setdefault(path, _MODIFY_TOOLS[lname])
                    elif lname == "read":
                        f.read.setdefault(path, None)
                if lname in _SHELL_TOOLS:
                    cmd = args.get("command") or args.get("cmd")
                    if isinstance(cmd, str) and cmd.strip():
                        f.commands.append(_clip(cmd, 120))
        elif part.role == "tool_result":
            err = _first_error_line(text)
            if err:
                _note_error(f, err, errors_seen)
        if focus_words and part.role in ("user", "assistant") and len(f.focus) < 5:
            for s in _sentences(text):
                words = {w.lower() for w in _WORD.findall(s)}
                if words & focus_words:
                    f.focus.append(_clip(s))
                    break
    return f


def _note_error(f: _Facts, err: str, seen: set[str]) -> None:
    if err not in seen:
        seen.add(err)
        f.errors.append(err)
    f.open_errors[err] = None


def _decision_item(sentence: str) -> str:
    """``**decision**: rationale`` from one sentence (split at "because"/"so that" when present)."""
    s = _clip(sentence.replace("**", ""), 240)
    m = re.search(r"\s(because|since|so that)\s", s, re.IGNORECASE)
    if m and m.start() > 10:
        return f"**{s[: m.start()].rstrip(' ,')}**: {s[m.start() :].strip()}"
    return f"**{s.rstrip('.')}**: (rationale not stated)"


def _request_line(text: str, limit: int = _ITEM_CHARS) -> str:
    """A request as one line: its first paragraph, clipped."""
    head = text.strip().split("\n\n", 1)[0]
    return _clip(head, limit)


# ==== Building sections ====


@dataclass
class _Sections:
    goal: list[str]
    constraints: list[str]
    done: list[str]
    in_progress: list[str]
    blocked: list[str]
    decisions: list[str]
    next: list[str]
    critical: list[str]


def _new_sections(f: _Facts, custom: str | None) -> _Sections:
    goal = [_request_line(f.requests[0], 400)] if f.requests else []
    # Latest few of each kind of action; one line says how many earlier ones were folded.
    handled = [f"Handled request: {_request_line(r, 160)}" for r in f.requests[:-1]]
    edits = [f"{verb} `{path}`" for path, verb in f.modified.items()]
    runs = [f"Ran `{c}`" for c in _dedupe(f.commands)]
    kept = handled[-5:] + edits[-6:] + runs[-4:]
    folded = len(handled) + len(edits) + len(runs) - len(kept)
    done = ([f"{folded} earlier actions (requests, edits, commands) not listed"] if folded else []) + kept
    in_progress = []
    if f.requests:
        in_progress.append(_request_line(f.requests[-1]))
    elif f.last_part_role in ("tool_calls", "tool_result"):
        in_progress.append("Tool work was under way when the summarized span ended")
    blocked = list(f.open_errors)[-3:]
    decisions = [_decision_item(s) for s in _dedupe(f.decisions)[-6:]]
    nxt = [f"Resolve: {e}" for e in blocked[:2]]
    if f.requests:
        nxt.append(f"Continue with the latest request: {_request_line(f.requests[-1], 160)}")
    if f.last_assistant:
        plans = [s for s in _sentences(f.last_assistant) if _NEXT.search(s)]
        nxt += [_clip(s, 160) for s in plans[-3:]]
    critical = []
    if f.requests:
        critical.append(f"Latest user request: {_clip(f.requests[-1], 300)}")
    if f.last_assistant:
        critical.append(f"Last assistant message: {_clip(f.last_assistant, 300)}")
    critical += [f"Error seen: {e}" for e in f.errors[-5:]]
    if f.modified:
        critical.append("Modified files: " + ", ".join(f"`{p}`" for p in list(f.modified)[-12:]))
    if f.read:
        critical.append("Files read: " + ", ".join(f"`{p}`" for p in list(f.read)[-12:]))
    if f.tool_counts:
        usage = ", ".join(f"{name}×{n}" for name, n in sorted(f.tool_counts.items(), key=lambda kv: (-kv[1], kv[0])))
        critical.append(f"Tool calls: {usage}")
    if custom and f.focus:
        critical += [f"Focus ({_clip(custom, 60)}): {s}" for s in f.focus]
    return _Sections(goal, _dedupe(f.constraints)[-8:], done, in_progress, blocked, decisions, nxt, critical)


def _merge(prev: dict[str, list[str]], new: _Sections, had_activity: bool) -> _Sections:
    """Rolling update: keep what the previous summary knew, add what the new span shows."""
    still = set(new.in_progress)
    moved = [i for i in prev["in_progress"] if i not in still] if had_activity else []
    return _Sections(
        goal=prev["goal"] or new.goal,
        constraints=_dedupe(prev["constraints"] + new.constraints),
        done=_dedupe(prev["done"] + moved + new.done),
        in_progress=new.in_progress if had_activity else (prev["in_progress"] or new.in_progress),
        blocked=new.blocked if had_activity else prev["blocked"],
        decisions=_dedupe(prev["decisions"] + new.decisions),
        next=new.next or prev["next"],
        critical=_merge_context(prev["critical"], new.critical)[-_MAX_CRITICAL:],
    )


_REPLACED_KEYS = ("Latest user request:", "Last assistant message:")
_LISTED_KEYS = ("Modified files:", "Files read:")
_TICKED = re.compile(r"`([^`]+)`")


def _counted(text: str) -> list[tuple[str, str]]:
    """``(name, count)`` of each ``name×count`` token (what ``re.findall(r"(\\S+)×(\\d+)")``
    returns), in one pass: that regex backtracks over every start of a long token (40 KB: 15 s)."""
    out = []
    for tok in text.split():
        e = tok.rfind("×")
        while e > 0 and not (e + 1 < len(tok) and tok[e + 1].isdecimal()):
            e = tok.rfind("×", 0, e)
        if e > 0:
            j = e + 1
            while j < len(tok) and tok[j].isdecimal():
                j += 1
            out.append((tok[:e], tok[e + 1 : j]))
    return out


def _merge_context(old: list[str], new: list[str]) -> list[str]:
    """Critical Context of a rolling update: earlier items first, then new ones. Keyed items
    are combined instead of repeated: the latest request/answer replace the earlier ones, file
    lists are united (latest 20 kept), tool-call counts are added up."""
    out: list[str] = []
    first: dict[str, int] = {}  # key -> position in out of the item that starts with it
    counts: dict[str, int] | None = None  # tool-call counts once a second "Tool calls:" came
    for item in old + new:
        key = next((k for k in _REPLACED_KEYS + _LISTED_KEYS + ("Tool calls:",) if item.startswith(k)), None)
        at = first.get(key) if key else None
        if key is None or at is None:
            if key:
                first[key] = len(out)
            out.append(item)
        elif key in _REPLACED_KEYS:
            out[at] = item
        elif key in _LISTED_KEYS:
            paths = list(dict.fromkeys(_TICKED.findall(out[at]) + _TICKED.findall(item)))[-20:]
            out[at] = key + " " + ", ".join(f"`{p}`" for p in paths)
        else:  # added up here, written once at the end (re-reading a growing line was quadratic)
            if counts is None:
                counts = {}
                _add_counts(counts, out[at])
            _add_counts(counts, item)
    if counts is not None:
        out[first["Tool calls:"]] = "Tool calls: " + ", ".join(
            f"{name}×{n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
    return _dedupe(out)


def _add_counts(counts: dict[str, int], text: str) -> None:
    for name, n in _counted(text):
        # a count of more than 18 digits is not a count (and int() refuses 4,300 digits)
        counts[name] = counts.get(name, 0) + (int(n) if len(n) <= 18 else 10**18)


def _bullets(items: list[str], prefix: str = "- ") -> str:
    if not items:
        return f"{prefix}(none)"
    return "\n".join(f"{prefix}{i}" for i in items)


def _numbered(items: list[str]) -> str:
    if not items:
        return "1. (none)"
    return "\n".join(f"{n}. {i}" for n, i in enumerate(items, 1))


def _render(s: _Sections, kind: str) -> str:
    goal = "\n".join(s.goal) if s.goal else "(not stated in the summarized messages)"
    out = [
        "## Goal",
        goal,
        "",
        "## Constraints & Preferences",
        _bullets(s.constraints),
        "",
        "## Progress",
        "### Done",
        _bullets(s.done, "- [x] "),
        "",
        "### In Progress",
        _bullets(s.in_progress, "- [ ] "),
        "",
        "### Blocked",
        _bullets(s.blocked),
        "",
        "## Key Decisions",
        _bullets(s.decisions),
        "",
        "## Next Steps",
        _numbered(s.next),
    ]
    if kind != "branch":
        out += ["", "## Critical Context", _bullets(s.critical)]
    return "\n".join(out)


def _render_turn_prefix(s: _Sections) -> str:
    original = "\n".join(s.goal) if s.goal else "(the request precedes this part)"
    progress = s.done + [f"Decision {d}" for d in s.decisions] + [f"In progress: {i}" for i in s.in_progress]
    context = [f"Open error: {e}" for e in s.blocked]
    context += [c for c in s.critical if not (c.startswith("Error seen: ") and c[12:] in s.blocked)]
    return "\n".join(
        [
            "## Original Request",
            original,
            "",
            "## Progress So Far",
            _bullets(progress),
            "",
            "## Context Needed to Continue",
            _bullets(context),
        ]
    )


# ==== Summarizer ====


class OfflineSummarizer:
    """Extractive summaries in Pi's format, without a model (module docstring).

    ``summarize(request)`` returns the summary text (no file-list blocks: the caller appends
    them), zero usage and ``model="offline"``. ``request.max_tokens`` is ignored; custom
    instructions add "Focus" lines to Critical Context (sentences sharing words with them);
    ``replace_instructions`` is ignored (there is no prompt to replace).

        >>> s = OfflineSummarizer().summarize_sync(SummaryRequest("compaction", "[User]: Fix the parser. Do not touch tests."))
        >>> s.text.splitlines()[:2]
        ['## Goal', 'Fix the parser. Do not touch tests.']
    """

    name = "offline"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(self.summarize_text(request), SummaryUsage(), "offline")

    def summarize_sync(self, request: SummaryRequest) -> SummaryResult:
        """Synchronous :meth:`summarize`."""
        return run_sync(self.summarize(request))

    def summarize_text(self, request: SummaryRequest) -> str:
        """The summary text for ``request`` (pure, synchronous)."""
        parts = parse_conversation(request.conversation)
        custom = request.custom_instructions or None
        focus_words = {w.lower() for w in _WORD.findall(custom or "")}
        facts = _extract(parts, focus_words)
        sections = _new_sections(facts, custom)
        previous = [request.previous_summary] if request.previous_summary and request.kind != "turn_prefix" else []
        for prev_text in facts.embedded + previous:  # oldest first: embedded ones precede the span
            prev = parse_summary(prev_text)
            had_activity = bool(
                facts.requests or facts.commands or facts.modified or facts.tool_counts or facts.last_assistant
            )
            sections = _merge(prev, sections, had_activity)
        if request.kind == "turn_prefix":
            return _render_turn_prefix(sections)
        return _render(sections, request.kind)
