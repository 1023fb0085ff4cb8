"""Compaction preparation against Pi 1.6.0's goldens, plus cut-point properties.

Every ``*.jsonl.golden.json`` under ``tests/corpus/pi-generated`` and ``tests/corpus/real`` is
checked (found by globbing in :mod:`goldens`): ``findCutPoint`` for every K, every field of
``prepareCompaction[K]`` and ``serialize[K]``. Entries come from the pure-Python reference loader
in :mod:`goldens`, never from the Rust core. Where Pi throws, the golden holds
``{"pi_error": text}`` and we expect the same text from the exception we raise.

Below the goldens: hypothesis properties of the cut over random sessions, and examples of the
Pi 1.6 ``context_edit`` rules that no golden exercises.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from tests.support.goldens import golden_ids, js_id, load_case, pi_result
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree._jsjson import js_len
from sessiontree.compaction import (
    SerializationError,
    collect_context_edits,
    compute_file_lists,
    find_cut_point,
    format_file_operations,
    prepare_compaction,
    serialize_conversation,
)
from sessiontree.context import convert_to_llm, entry_to_context_messages, fingerprint
from sessiontree.settings import CompactionSettings
from sessiontree.tokens import estimate_tokens

# ==== Golden helpers ====

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
SERIALIZE_TEXT_LIMIT = 30000  # the goldens store text only up to this many UTF-16 units


def pi(fn, *args: Any) -> Any:
    """``fn(*args)`` or ``{"pi_error": text}`` for any error that mirrors a Pi throw."""
    try:
        return pi_result(fn, *args)
    except SerializationError as e:
        return {"pi_error": e.pi_error}


def message_summary(message: dict) -> dict:
    """``{role, tokens, sha}`` as the goldens list a message."""
    return {
        "role": message.get("role"),
        "tokens": pi(estimate_tokens, message),
        "sha": fingerprint(message),
    }


def file_fields(file_ops) -> dict:
    """``fileOps``, ``fileLists`` and ``formattedFileOperations`` as in the goldens."""
    read_files, modified_files = compute_file_lists(file_ops)
    return {
        "fileOps": file_ops.as_lists(),
        "fileLists": {"readFiles": read_files, "modifiedFiles": modified_files},
        "formattedFileOperations": format_file_operations(read_files, modified_files),
    }


def text_digest(text: str) -> dict:
    """``{text, length, sha256}``: length in UTF-16 units, hash over UTF-8 as Node writes it
    (a lone surrogate becomes U+FFFD), text omitted past the goldens' limit."""
    length = js_len(text)
    utf8 = _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")
    return {
        "text": text if length <= SERIALIZE_TEXT_LIMIT else None,
        "length": length,
        "sha256": hashlib.sha256(utf8).hexdigest(),
    }


def serialized(messages: list) -> dict:
    return pi(lambda: text_digest(serialize_conversation(convert_to_llm(messages))))


def preparation_fields(prep) -> dict | None:
    """A :class:`CompactionPreparation` in the goldens' ``prepareCompaction[K]`` shape."""
    if prep is None or "pi_error" in (prep if isinstance(prep, dict) else {}):
        return prep
    return {
        "firstKeptEntryId": prep.first_kept_entry_id,
        "isSplitTurn": prep.is_split_turn,
        "tokensBefore": prep.tokens_before,
        "previousSummary": prep.previous_summary,
        "messagesToSummarize": [message_summary(m) for m in prep.messages_to_summarize],
        "turnPrefixMessages": [message_summary(m) for m in prep.turn_prefix_messages],
        **file_fields(prep.file_ops),
    }


def diff_report(label: str, got: Any, expected: Any) -> str:
    if isinstance(got, dict) and isinstance(expected, dict):
        keys = [k for k in expected if got.get(k, "<missing>") != expected[k]]
        keys += [k for k in got if k not in expected]
        return "\n".join(f"{label}.{k}: got {got.get(k)!r:.300} expected {expected.get(k)!r:.300}" for k in keys)
    return f"{label}: got {got!r:.300} expected {expected!r:.300}"


def compaction_case(name: str):
    case = load_case(name)
    if case.skip:
        pytest.skip(case.skip)
    if not isinstance(case.golden.get("prepareCompaction"), dict):
        pytest.skip("Pi computed no compaction goldens for this file")
    return case


# ==== Goldens ====


@pytest.mark.parametrize("name", golden_ids())
def test_find_cut_point_matches_pi(name: str) -> None:
    case = compaction_case(name)
    golden = case.golden["findCutPoint"]
    start, end = golden["startIndex"], golden["endIndex"]
    problems = []
    for keep, expected in golden["results"].items():
        got = pi(find_cut_point, case.path, start, end, int(keep))
        if not isinstance(got, dict):
            index = got.first_kept_entry_index
            got = {
                "firstKeptEntryIndex": index,
                "firstKeptEntryId": js_id(case.path[index].get("id")) if index < len(case.path) else None,
                "turnStartIndex": got.turn_start_index,
                "isSplitTurn": got.is_split_turn,
            }
        if got != expected:
            problems.append(diff_report(f"findCutPoint[{keep}]", got, expected))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", golden_ids())
def test_prepare_compaction_matches_pi(name: str) -> None:
    case = compaction_case(name)
    problems = []
    for keep, expected in case.golden["prepareCompaction"].items():
        settings = CompactionSettings(keep_recent_tokens=int(keep))
        got = preparation_fields(pi(prepare_compaction, case.path, settings))
        if got != expected:
            problems.append(diff_report(f"prepareCompaction[{keep}]", got, expected))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", golden_ids())
def test_serialized_compaction_input_matches_pi(name: str) -> None:
    case = compaction_case(name)
    problems = []
    for keep, expected in (case.golden.get("serialize") or {}).items():
        prep = pi(prepare_compaction, case.path, CompactionSettings(keep_recent_tokens=int(keep)))
        if prep is None or isinstance(prep, dict):
            got = None
        else:
            got = {
                "messagesToSummarize": serialized(prep.messages_to_summarize),
                "turnPrefixMessages": serialized(prep.turn_prefix_messages),
            }
        if got != expected:
            problems.append(diff_report(f"serialize[{keep}]", got, expected))
    assert not problems, "\n".join(problems)


# ==== Properties of the cut (random sessions) ====
#
# Findings: in a well-formed session (every tool result directly follows the assistant message
# that called it) the kept region never starts at a tool result and never keeps a result without
# its call. Pi's rule does allow a separation in one case, shown by
# test_cut_may_split_a_tool_loop_at_an_interleaved_custom_message: a user-like entry (custom
# message, bash execution, branch summary) sitting between a call and its result is a valid cut
# point, so the call can be summarized while its result is kept.
#
# A second Pi quirk, confirmed by the goldens (labels K=0, mix_01 K=500): the cut moves back over
# metadata entries (labels, model changes, session_info...) before the chosen cut point; when it
# lands on one, the cut entry does not open a span, so Pi reports ``isSplitTurn`` with the
# *previous* complete span as the turn prefix even though the first kept message is a user one.

_TIMESTAMP = "2026-01-01T00:00:00.000Z"
_TEXT = st.text(alphabet=st.sampled_from("ab cd\n😀é日"), max_size=400)


@st.composite
def sessions(draw) -> list:
    """A well-formed linear session: user-like openers, tool loops, metadata between turns."""
    entries: list = []

    def add(entry_type: str, **fields) -> dict:
        entry = {
            "type": entry_type,
            "id": f"e{len(entries):04d}",
            "parentId": entries[-1]["id"] if entries else None,
            "timestamp": _TIMESTAMP,
            **fields,
        }
        entries.append(entry)
        return entry

    def message(role: str, **fields) -> dict:
        return add("message", message={"role": role, **fields, "timestamp": 0})

    for _ in range(draw(st.integers(1, 6))):
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["model_change", "thinking_level_change", "custom", "label"]))
            add(kind, customType="x", data={}, provider="p", modelId="m", thinkingLevel="low", targetId="e0000")
        opener = draw(st.sampled_from(["user", "user", "bash", "custom_message"]))
        if opener == "user":
            message("user", content=draw(_TEXT))
        elif opener == "bash":
            message("bashExecution", command="ls", output=draw(_TEXT), exitCode=0, cancelled=False, truncated=False)
        else:
            add("custom_message", customType="note", content=draw(_TEXT), display=True)
        for _ in range(draw(st.integers(0, 4))):
            calls = [
                {
                    "type": "toolCall",
                    "id": f"call{len(entries)}_{k}",
                    "name": draw(st.sampled_from(["read", "write", "edit", "bash"])),
                    "arguments": {"path": draw(_TEXT)},
                }
                for k in range(draw(st.integers(0, 3)))
            ]
            message("assistant", content=[{"type": "text", "text": draw(_TEXT)}, *calls], stopReason="toolUse")
            for call in calls:
                message(
                    "toolResult",
                    toolCallId=call["id"],
                    toolName=call["name"],
                    content=[{"type": "text", "text": draw(_TEXT)}],
                    isError=False,
                )
        if draw(st.booleans()):
            message("assistant", content=[{"type": "text", "text": draw(_TEXT)}], stopReason="stop")
    return entries


def _role_of(entry: dict):
    return entry["message"]["role"] if entry["type"] == "message" else None


@settings(max_examples=400, deadline=None)
@given(sessions(), st.integers(0, 1500))
def test_cut_never_starts_at_tool_result_nor_orphans_one(entries: list, keep: int) -> None:
    cut = find_cut_point(entries, 0, len(entries), keep)
    first = cut.first_kept_entry_index
    assert _role_of(entries[first]) != "toolResult"
    kept_calls = {
        block["id"]
        for e in entries[first:]
        if _role_of(e) == "assistant"
        for block in e["message"]["content"]
        if block["type"] == "toolCall"
    }
    for e in entries[first:]:
        if _role_of(e) == "toolResult":
            assert e["message"]["toolCallId"] in kept_calls
    # A split turn cuts inside a span (the first kept message is an assistant message), or the
    # cut landed on metadata before a span opener (Pi quirk, see above).
    first_message = next((e for e in entries[first:] if e["type"] in ("message", "custom_message")), None)
    if cut.is_split_turn:
        assert 0 <= cut.turn_start_index < first
        assert _role_of(first_message) == "assistant" or entries[first]["type"] not in ("message", "custom_message")
    else:
        assert cut.turn_start_index == -1


@settings(max_examples=200, deadline=None)
@given(sessions(), st.integers(0, 1500))
def test_preparation_summarizes_exactly_the_messages_before_the_cut(entries: list, keep: int) -> None:
    prep = prepare_compaction(entries, CompactionSettings(keep_recent_tokens=keep))
    cut = find_cut_point(entries, 0, len(entries), keep)
    before_cut = [m for e in entries[: cut.first_kept_entry_index] for m in entry_to_context_messages(e)]
    if prep is None:
        assert before_cut == []
        return
    assert prep.first_kept_entry_id == entries[cut.first_kept_entry_index]["id"]
    assert prep.is_split_turn == cut.is_split_turn
    assert prep.messages_to_summarize + prep.turn_prefix_messages == before_cut


def test_cut_may_split_a_tool_loop_at_an_interleaved_custom_message() -> None:
    """Pi's rule, not a bug: a custom message between a call and its result is a cut point."""

    def entry(i: int, entry_type: str, **fields) -> dict:
        parent = f"e{i - 1}" if i else None
        return {"type": entry_type, "id": f"e{i}", "parentId": parent, "timestamp": _TIMESTAMP, **fields}

    call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.ts"}}
    entries = [
        entry(0, "message", message={"role": "user", "content": "read a.ts", "timestamp": 0}),
        entry(1, "message", message={"role": "assistant", "content": [call], "timestamp": 0}),
        entry(2, "custom_message", customType="steer", content="x" * 40, display=True),
        entry(
            3,
            "message",
            message={
                "role": "toolResult",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "y" * 400}],
                "timestamp": 0,
            },
        ),
        entry(
            4, "message", message={"role": "assistant", "content": [{"type": "text", "text": "done"}], "timestamp": 0}
        ),
    ]
    keep = sum(
        estimate_tokens(m)
        for m in (
            {"role": "custom", "content": "x" * 40},
            entries[3]["message"],
            entries[4]["message"],
        )
    )
    cut = find_cut_point(entries, 0, len(entries), keep)
    assert cut.first_kept_entry_index == 2  # the result (e3) is kept, its call (e1) summarized
    assert not cut.is_split_turn


# ==== context_edit rules (Pi 1.6 compaction.md; no golden exercises them) ====


def _path(*specs) -> list:
    """Entries ``e0, e1, ...`` chained in order from ``(type, fields)`` specs."""
    out = []
    for i, (entry_type, fields) in enumerate(specs):
        out.append(
            {
                "type": entry_type,
                "id": f"e{i}",
                "parentId": f"e{i - 1}" if i else None,
                "timestamp": _TIMESTAMP,
                **fields,
            }
        )
    return out


def _msg(role: str, text: str) -> tuple:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return ("message", {"message": {"role": role, "content": content, "timestamp": 0}})


def _omit(target: str) -> tuple:
    return ("context_edit", {"targetId": target, "replacement": None})


def test_omitted_messages_are_neither_counted_nor_cut_points() -> None:
    path = _path(_msg("user", "q" * 40), _msg("assistant", "a" * 4000), _omit("e1"), _msg("user", "r" * 40))
    cut = find_cut_point(path, 0, len(path), 15, edits=collect_context_edits(path))
    assert cut.first_kept_entry_index == 0  # hidden e1 adds 0 tokens: the budget is met only at e0
    cut = find_cut_point(path, 0, len(path), 15)
    assert cut.first_kept_entry_index == 1  # unedited, e1's 1000 tokens meet it and e1 is the cut


def test_overflow_recovery_advances_the_kept_boundary_past_the_oversized_input() -> None:
    path = _path(
        _msg("user", "first"),
        _msg("assistant", "ok"),
        _msg("user", "x" * 80_000),  # over-budget input
        _msg("assistant", "partial attempt"),  # the failed attempt...
        _omit("e3"),  # ...omitted by overflow recovery
    )
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=20000))
    assert prep.first_kept_entry_id == "e3"
    assert prep.is_split_turn
    assert [m["content"] for m in prep.turn_prefix_messages] == ["x" * 80_000]
    assert [m["role"] for m in prep.messages_to_summarize] == ["user", "assistant"]


def test_replacing_the_input_blocks_the_boundary_advance() -> None:
    path = _path(
        _msg("user", "first"),
        _msg("assistant", "ok"),
        _msg("user", "x" * 80_000),
        _msg("assistant", "partial attempt"),
        _omit("e3"),
        ("context_edit", {"targetId": "e2", "replacement": {"content": "y" * 80_000}}),
    )
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=20000))
    assert prep.first_kept_entry_id == "e2"
    assert prep.messages_to_summarize[-1]["content"] == [{"type": "text", "text": "ok"}]


def test_metadata_alone_does_not_move_the_cut() -> None:
    path = _path(
        _msg("user", "first"),
        _msg("assistant", "ok"),
        _msg("user", "x" * 80_000),
        ("model_change", {"provider": "p", "modelId": "m"}),
    )
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=20000))
    assert prep.first_kept_entry_id == "e2"
    assert not prep.is_split_turn
