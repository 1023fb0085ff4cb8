"""Compaction and navigation orchestration: tree navigation rules, hooks and their validation,
auto-compaction check points, overflow recovery, provider-safe context, session totals.

Summaries come from small deterministic summarizers defined here (they implement the Summarizer
protocol; no code path of the library is mocked). The last section is a hypothesis property over
random sessions and settings: after compaction the provider context is valid and the kept region
never starts at a tool result.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS, GOLDEN_DIRS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import CompactionSettings, EntryNotFoundError, Session
from sessiontree.autocompact import AutoCompactor, is_overflow_error
from sessiontree.hooks import CompactHookResult, HookCompaction, HookResultError, TreeHookResult
from sessiontree.orchestration import (
    BRANCH_SUMMARY_PREAMBLE,
    AlreadyCompactedError,
    CompactionCancelledError,
    CompactionNoProgressError,
    NothingToCompactError,
    TURN_CONTEXT_SEPARATOR,
)
from sessiontree.provider_context import is_provider_valid, provider_problems, repair_for_provider
from sessiontree.summarizers.base import ContextOverflowError, SummarizerError, SummaryResult, SummaryUsage

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

# ==== Builders ====================================================================

KEEP = CompactionSettings(keep_recent_tokens=500)
#: Usage that gives no context-token count, so Pi's estimate falls back to chars/4.
NO_USAGE = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}
USAGE = {
    "input": 100,
    "output": 10,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 110,
    "cost": {"input": 0.1, "output": 0.02, "cacheRead": 0, "cacheWrite": 0, "total": 0.12},
}


def user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 0}


def assistant(
    text: str | None = "ok", calls: tuple = (), stop: str = "stop", usage: dict | None = None, error: str | None = None
) -> dict:
    content = ([{"type": "text", "text": text}] if text is not None else []) + [
        {"type": "toolCall", "id": cid, "name": name, "arguments": args} for cid, name, args in calls
    ]
    m = {
        "role": "assistant",
        "content": content,
        "api": "fake",
        "provider": "fake",
        "model": "m",
        "usage": usage or USAGE,
        "stopReason": stop,
        "timestamp": 0,
    }
    if error is not None:
        m["errorMessage"] = error
    return m


def tool_result(call_id: str, text: str, name: str = "read") -> dict:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 0,
    }


class Recorder:
    """A deterministic summarizer: answers ``<kind> summary <n>`` with a fixed usage and keeps
    every request."""

    name = "recorder"

    def __init__(self, text: str | None = None):
        self.requests: list = []
        self.text = text

    async def summarize(self, request):
        self.requests.append(request)
        n = len(self.requests)
        usage = SummaryUsage(
            input=50,
            output=5,
            total_tokens=55,
            cost={"input": 0.5, "output": 0.25, "cacheRead": 0, "cacheWrite": 0, "total": 0.75},
        )
        return SummaryResult(self.text or f"{request.kind} summary {n}", usage)


def long_session(turns: int = 6, size: int = 2000) -> tuple[Session, list]:
    """user/assistant(read)/toolResult/assistant turns; returns the session and the ids."""
    s = Session.in_memory("/p")
    ids = []
    for t in range(turns):
        ids.append(s.append_message(user(f"task {t} " + "u" * size)))
        ids.append(
            s.append_message(
                assistant("looking", calls=((f"c{t}", "read", {"path": f"f{t}.py"}),), stop="toolUse", usage=NO_USAGE)
            )
        )
        ids.append(s.append_message(tool_result(f"c{t}", "r" * size)))
        ids.append(s.append_message(assistant(f"done {t} " + "a" * size, usage=NO_USAGE)))
    return s, ids


# ==== Tree navigation (Pi's /tree selection rules) ================================


def small_tree() -> tuple[Session, dict]:
    s = Session.in_memory("/p")
    ids = {}
    ids["u1"] = s.append_message(user("first question"))
    ids["a1"] = s.append_message(assistant("first answer", calls=(("k1", "read", {"path": "a.py"}),), stop="toolUse"))
    ids["t1"] = s.append_message(tool_result("k1", "contents of a"))
    ids["a1b"] = s.append_message(assistant("read it"))
    ids["u2"] = s.append_message(
        {
            "role": "user",
            "content": [{"type": "text", "text": "second "}, {"type": "text", "text": "question"}],
            "timestamp": 0,
        }
    )
    ids["a2"] = s.append_message(assistant("second answer", calls=(("k2", "edit", {"path": "b.py"}),), stop="toolUse"))
    ids["t2"] = s.append_message(tool_result("k2", "edited", name="edit"))
    ids["a2b"] = s.append_message(assistant("edited b"))
    return s, ids


def test_selecting_a_user_message_moves_the_leaf_to_its_parent_and_returns_its_text():
    s, ids = small_tree()
    n = len(s)
    result = s.navigate_tree(ids["u2"])
    assert result.new_leaf_id == ids["a1b"] == s.leaf_id
    assert result.editor_text == "second question"
    assert result.summary_entry is None and not result.cancelled
    assert len(s) == n, "plain navigation appends nothing"


def test_selecting_a_root_user_message_resets_the_leaf():
    s, ids = small_tree()
    result = s.navigate_tree(ids["u1"])
    assert result.new_leaf_id is None and s.leaf_id is None
    assert result.editor_text == "first question"
    new_root = s.append_message(user("edited first question"))
    assert s.get_entry(new_root).parent_id is None


def test_selecting_any_other_entry_moves_the_leaf_to_it():
    s, ids = small_tree()
    for target in ("a1", "t1", "a1b"):
        result = s.navigate_tree(ids[target])
        assert result.new_leaf_id == ids[target] == s.leaf_id
        assert result.editor_text is None


def test_navigating_to_the_current_leaf_appends_nothing():
    s, ids = small_tree()
    n = len(s)
    result = s.navigate_tree(ids["a2b"], summarize=True, summarizer=Recorder(), label="x")
    assert result.new_leaf_id == ids["a2b"] and len(s) == n


def test_navigating_to_an_unknown_entry_raises():
    s, _ = small_tree()
    with pytest.raises(EntryNotFoundError):
        s.navigate_tree("nope")


def test_summarize_appends_a_branch_summary_of_the_abandoned_branch():
    s, ids = small_tree()
    summarizer = Recorder()
    result = s.navigate_tree(
        ids["u2"], summarize=True, summarizer=summarizer, custom_instructions="keep paths", replace_instructions=True
    )
    entry = result.summary_entry
    assert entry is not None and entry.type == "branch_summary"
    raw = entry.raw
    assert list(raw) == ["type", "id", "parentId", "timestamp", "fromId", "summary", "details", "usage", "fromHook"]
    assert raw["parentId"] == ids["a1b"] and raw["fromId"] == ids["a2b"]
    assert raw["summary"] == (
        BRANCH_SUMMARY_PREAMBLE + "branch summary 1" + "\n\n<modified-files>\nb.py\n</modified-files>"
    )
    assert raw["details"] == {"readFiles": [], "modifiedFiles": ["b.py"]}
    assert raw["usage"]["totalTokens"] == 55 and raw["fromHook"] is False
    assert s.leaf_id == entry.id and result.new_leaf_id == entry.id
    assert result.editor_text == "second question"
    (req,) = summarizer.requests
    assert req.kind == "branch" and req.custom_instructions == "keep paths" and req.replace_instructions
    # abandoned: from the old leaf up to the common ancestor, the selected user message itself
    assert req.conversation.startswith("[Assistant]: second answer") and "edited b" in req.conversation
    assert "question" not in req.conversation, "only the abandoned branch is summarized"
    # the summary is in the new context, the abandoned branch is not
    roles = [m["role"] for m in s.build_context().messages]
    assert roles[-1] == "branchSummary" and roles.count("user") == 1 and "toolResult" in roles


def test_summarize_with_nothing_abandoned_appends_no_summary():
    s, ids = small_tree()
    s.reset_leaf()
    summarizer = Recorder()
    result = s.navigate_tree(ids["a1"], summarize=True, summarizer=summarizer)
    assert result.summary_entry is None and summarizer.requests == []
    assert s.leaf_id == ids["a1"]


def test_label_is_set_on_the_target():
    s, ids = small_tree()
    s.navigate_tree(ids["a1"], label="checkpoint")
    assert s.get_label(ids["a1"]) == "checkpoint"


# ==== Hooks ========================================================================


def test_before_compact_hook_can_cancel():
    s, _ = long_session()
    seen = []

    def hook(event):
        seen.append(event)
        return {"cancel": True}

    s.hooks.before_compact.append(hook)
    n = len(s)
    with pytest.raises(CompactionCancelledError, match="Compaction cancelled"):
        s.compact(Recorder(), settings=CompactionSettings(keep_recent_tokens=500))
    assert len(s) == n
    (event,) = seen
    assert event.reason == "manual" and event.will_retry is False
    assert event.branch_entries[-1]["id"] == s.leaf_id
    assert event.preparation.first_kept_entry_id


def test_async_before_compact_hook_supplies_the_compaction():
    s, ids = long_session()
    summarizer = Recorder()

    async def hook(event):
        await asyncio.sleep(0)
        return CompactHookResult(
            compaction=HookCompaction(
                summary="custom summary",
                first_kept_entry_id=ids[-4],
                details={"mine": 1},
                usage={
                    "input": 7,
                    "output": 1,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 8,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.01},
                },
            )
        )

    s.hooks.before_compact.append(hook)
    result = s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=500))
    raw = result.entry.raw
    assert summarizer.requests == []
    assert raw["summary"] == "custom summary" and raw["firstKeptEntryId"] == ids[-4]
    assert raw["details"] == {"mine": 1} and raw["fromHook"] is True and raw["usage"]["totalTokens"] == 8
    assert result.from_hook and result.usage.total_tokens == 8


def test_hook_first_kept_entry_off_the_active_path_is_rejected():
    s, ids = long_session()
    s.branch(ids[3])
    other = s.append_message(user("side branch"))
    s.branch(ids[-1])
    s.hooks.before_compact.append(lambda e: {"compaction": {"summary": "x", "firstKeptEntryId": other}})
    n = len(s)
    with pytest.raises(HookResultError, match="not on the active path"):
        s.compact(Recorder(), settings=KEEP)
    assert len(s) == n


def test_hook_first_kept_entry_at_a_tool_result_is_rejected():
    s, ids = long_session()
    s.hooks.before_compact.append(lambda e: {"compaction": {"summary": "x", "firstKeptEntryId": ids[-2]}})
    n = len(s)
    with pytest.raises(HookResultError, match="tool result"):
        s.compact(Recorder(), settings=KEEP)
    assert len(s) == n


@pytest.mark.parametrize(
    "bad",
    [
        {"compaction": {"summary": ""}},
        {"compaction": "text"},
        42,
        {"compaction": {"summary": "s", "tokensBefore": "many"}},
    ],
)
def test_malformed_hook_results_are_rejected(bad):
    s, _ = long_session()
    s.hooks.before_compact.append(lambda e: bad)
    n = len(s)
    with pytest.raises(HookResultError):
        s.compact(Recorder(), settings=KEEP)
    assert len(s) == n


def test_last_hook_result_wins_and_cancel_stops_the_chain():
    s, ids = long_session()
    calls = []
    s.hooks.before_compact.append(lambda e: calls.append(1) or {"compaction": {"summary": "first"}})
    s.hooks.before_compact.append(lambda e: calls.append(2) or {"compaction": {"summary": "second"}})
    result = s.compact(Recorder(), settings=CompactionSettings(keep_recent_tokens=500))
    assert result.summary == "second" and calls == [1, 2]
    s2, _ = long_session()
    calls.clear()
    s2.hooks.before_compact.append(lambda e: calls.append(1) or {"cancel": True})
    s2.hooks.before_compact.append(lambda e: calls.append(2))
    with pytest.raises(CompactionCancelledError):
        s2.compact(Recorder(), settings=KEEP)
    assert calls == [1]


def test_before_tree_hook_can_cancel():
    s, ids = small_tree()
    s.hooks.before_tree.append(lambda e: TreeHookResult(cancel=True))
    n, leaf = len(s), s.leaf_id
    result = s.navigate_tree(ids["a1"], summarize=True, summarizer=Recorder())
    assert result.cancelled and s.leaf_id == leaf and len(s) == n


def test_before_tree_hook_supplies_summary_instructions_and_label():
    s, ids = small_tree()
    events = []

    async def hook(event):
        events.append(event)
        return {"summary": {"summary": "hook summary", "details": {"k": 1}}, "label": "from hook"}

    s.hooks.before_tree.append(hook)
    summarizer = Recorder()
    result = s.navigate_tree(ids["a1b"], summarize=True, summarizer=summarizer, label="mine")
    raw = result.summary_entry.raw
    assert raw["summary"] == "hook summary" and raw["details"] == {"k": 1} and raw["fromHook"] is True
    assert summarizer.requests == []
    assert s.get_label(ids["a1b"]) == "from hook"
    prep = events[0].preparation
    assert prep.target_id == ids["a1b"] and prep.old_leaf_id == ids["a2b"]
    assert prep.common_ancestor_id == ids["a1b"] and prep.user_wants_summary and prep.label == "mine"
    assert [e["id"] for e in prep.entries_to_summarize] == [ids[k] for k in ("u2", "a2", "t2", "a2b")]


def test_before_tree_hook_summary_is_ignored_without_summarize_and_instructions_override():
    s, ids = small_tree()
    s.hooks.before_tree.append(lambda e: {"summary": {"summary": "unused"}})
    result = s.navigate_tree(ids["a1b"])
    assert result.summary_entry is None
    s2, ids2 = small_tree()
    s2.hooks.before_tree.append(lambda e: {"customInstructions": "from hook"})
    rec = Recorder()
    s2.navigate_tree(ids2["a1b"], summarize=True, summarizer=rec, custom_instructions="mine")
    assert rec.requests[0].custom_instructions == "from hook"


# ==== Compaction behaviour =========================================================


def test_nothing_to_compact_uses_pis_text_and_already_compacted():
    s = Session.in_memory()
    s.append_message(user("hi"))
    with pytest.raises(NothingToCompactError, match=r"^Nothing to compact \(session too small\)$"):
        s.compact(Recorder(), settings=KEEP)
    s2, _ = long_session()
    s2.compact(Recorder(), settings=CompactionSettings(keep_recent_tokens=500))
    with pytest.raises(AlreadyCompactedError, match="^Already compacted$"):
        s2.compact(Recorder(), settings=KEEP)


class Concurrency:
    """Answers only once two requests are in flight together (proves asyncio.gather)."""

    name = "concurrency"

    def __init__(self):
        self.requests: list = []
        self.both = asyncio.Event()

    async def summarize(self, request):
        self.requests.append(request)
        if len(self.requests) == 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 5)
        return SummaryResult(f"{request.kind}!", SummaryUsage(input=1, output=1, total_tokens=2))


def test_split_turn_runs_both_summaries_concurrently_and_joins_them():
    s = Session.in_memory()
    s.append_message(user("old " + "o" * 4000))
    s.append_message(assistant("old answer " + "p" * 4000))
    s.append_message(user("one long turn"))
    for k in range(8):
        s.append_message(assistant("step", calls=((f"s{k}", "write", {"path": f"w{k}.py"}),), stop="toolUse"))
        s.append_message(tool_result(f"s{k}", "x" * 1500, name="write"))
    s.append_message(assistant("finished " + "f" * 2000))
    summarizer = Concurrency()
    result = s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=1200))
    assert [r.kind for r in summarizer.requests] == ["compaction", "turn_prefix"]
    assert result.summary.startswith("compaction!" + TURN_CONTEXT_SEPARATOR + "turn_prefix!\n\n<modified-files>\n")
    assert result.usage.total_tokens == 4
    assert s.get_entry(result.first_kept_entry_id)["message"]["role"] == "assistant"


def test_split_turn_with_nothing_before_summarizes_only_the_prefix():
    s = Session.in_memory()
    s.append_message(user("one long turn"))
    for _ in range(8):
        s.append_message(assistant("step " + "q" * 800))
    rec = Recorder()
    result = s.compact(rec, settings=CompactionSettings(keep_recent_tokens=500))
    assert [r.kind for r in rec.requests] == ["turn_prefix"]
    assert result.summary == "No prior history." + TURN_CONTEXT_SEPARATOR + "turn_prefix summary 1"


def test_rolling_compaction_passes_the_previous_summary():
    s, _ = long_session(turns=4)
    rec = Recorder()
    first = s.compact(rec, settings=CompactionSettings(keep_recent_tokens=600))
    for t in range(3):
        s.append_message(user(f"more {t} " + "m" * 2000))
        s.append_message(assistant("fine " + "n" * 2000))
    second = s.compact(rec, settings=CompactionSettings(keep_recent_tokens=600))
    history = [
        r
        for r in rec.requests[len(rec.requests) - (2 if TURN_CONTEXT_SEPARATOR in second.summary else 1) :]
        if r.kind == "compaction"
    ]
    assert [r.previous_summary for r in history] == [first.summary]
    assert second.entry.raw["firstKeptEntryId"] != first.first_kept_entry_id


def test_system_messages_survive_compaction_as_the_checkpoint():
    s = Session.in_memory()
    s.append_message({"role": "system", "content": "You are careful.", "timestamp": 1})
    for t in range(4):
        s.append_message(user(f"q{t} " + "x" * 2000))
        s.append_message(assistant(f"a{t} " + "y" * 2000))
    result = s.compact(Recorder(), settings=CompactionSettings(keep_recent_tokens=600))
    assert result.entry.raw["systemMessage"]["content"] == "You are careful."
    messages = s.build_context().messages
    assert messages[0]["role"] == "system" and messages[0]["content"] == "You are careful."
    assert messages[1]["role"] == "compactionSummary"


def test_default_summarizer_is_the_offline_one():
    s, ids = long_session()
    result = s.compact(settings=KEEP)
    assert result.summary.startswith("## Goal") and result.usage.total_tokens == 0
    assert "<read-files>" in result.summary and result.details["readFiles"]
    nav = s.navigate_tree(ids[0], summarize=True)
    assert nav.summary_entry.raw["summary"].startswith(BRANCH_SUMMARY_PREAMBLE + "## Goal")


def test_async_compact_inside_a_running_loop():
    s, _ = long_session()

    async def main():
        with pytest.raises(RuntimeError):
            s.compact(Recorder(), settings=KEEP)  # the sync facade refuses inside a loop
        return await s.acompact(Recorder(), settings=CompactionSettings(keep_recent_tokens=500))

    result = asyncio.run(main())
    assert result.entry.type == "compaction"


# ==== Auto-compaction check points =================================================


def test_before_prompt_compacts_only_over_the_threshold():
    s, _ = long_session()
    big = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    assert big.before_prompt() is False
    small = AutoCompactor(
        s, Recorder(), CompactionSettings(keep_recent_tokens=500, reserve_tokens=1000), context_window=2000
    )
    assert small.needs_compaction()
    assert small.before_prompt() is True
    assert small.last_result.reason == "threshold"
    assert s.get_entry(s.leaf_id).type == "compaction"


def test_after_tool_results_is_skipped_when_no_model_call_follows():
    s, _ = long_session()
    auto = AutoCompactor(
        s, Recorder(), CompactionSettings(keep_recent_tokens=500, reserve_tokens=1000), context_window=2000
    )
    n = len(s)
    assert auto.after_tool_results(will_call_model=False) is False and len(s) == n
    assert auto.after_tool_results(will_call_model=True) is True and len(s) == n + 1


def test_after_run_skips_aborted_answers_and_respects_enabled():
    s, _ = long_session()
    s.append_message(assistant("partial", stop="aborted", usage=NO_USAGE))
    auto = AutoCompactor(
        s, Recorder(), CompactionSettings(keep_recent_tokens=500, reserve_tokens=1000), context_window=2000
    )
    assert auto.after_run() is False
    s.append_message(user("go on"))
    s.append_message(assistant("fine", usage=NO_USAGE))
    off = AutoCompactor(s, Recorder(), CompactionSettings(enabled=False), context_window=10)
    assert off.after_run() is False
    assert auto.after_run() is True


def test_threshold_uses_the_projected_estimate_not_stale_usage():
    s, _ = long_session()
    huge = dict(USAGE, totalTokens=10**6)
    s.append_message(assistant("claims a huge context", usage=huge))
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    assert auto.needs_compaction()  # fresh usage counts
    assert auto.before_prompt() is True
    assert not auto.needs_compaction()  # usage recorded before the compaction no longer does


# ==== Overflow recovery ============================================================


def overflowed_session() -> tuple[Session, str]:
    s, _ = long_session()
    s.append_message(user("one more " + "z" * 2000))
    failed = s.append_message(assistant(None, stop="error", error="prompt is too long: 210000 tokens > 200000"))
    return s, failed


def test_overflow_recovery_omits_the_attempt_compacts_and_asks_for_one_retry():
    s, failed = overflowed_session()
    seen = []
    s.hooks.before_compact.append(lambda e: seen.append((e.reason, e.will_retry)))
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    outcome = auto.recover_from_overflow(ContextOverflowError("prompt is too long"))
    assert outcome.retry and outcome.outcome == "compacted" and outcome.omitted_entry_id == failed
    edit = next(e.raw for e in s.entries() if e.type == "context_edit")
    assert list(edit) == ["type", "id", "parentId", "timestamp", "targetId", "replacement"]
    assert edit["targetId"] == failed and edit["replacement"] is None
    assert outcome.compaction.reason == "overflow" and seen == [("overflow", True)]
    assert is_provider_valid(outcome.context.messages)
    assert all(m.get("stopReason") != "error" for m in outcome.context.messages)


def test_second_overflow_right_after_recovery_stops():
    s, _ = overflowed_session()
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    assert auto.recover_from_overflow("prompt is too long").retry
    s.append_message(assistant(None, stop="error", error="This model's maximum context length is 8192 tokens"))
    with pytest.raises(CompactionNoProgressError):
        auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"])


def test_after_run_leaves_overflow_failures_to_recovery():
    s, _ = overflowed_session()
    auto = AutoCompactor(
        s, Recorder(), CompactionSettings(keep_recent_tokens=500, reserve_tokens=1000), context_window=2000
    )
    n = len(s)
    assert auto.after_run() is False and len(s) == n


class FailsSecond:
    """First request waits to be cancelled; the second fails: the first must be cancelled."""

    name = "fails-second"

    def __init__(self):
        self.cancelled = False
        self.calls = 0

    async def summarize(self, request):
        self.calls += 1
        if self.calls == 1:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        raise SummarizerError("provider down")


def test_a_failed_summary_call_cancels_its_sibling_and_appends_nothing():
    s = Session.in_memory()
    s.append_message(user("old " + "o" * 4000))
    s.append_message(assistant("old answer " + "p" * 4000, usage=NO_USAGE))
    s.append_message(user("turn"))
    for _ in range(6):
        s.append_message(assistant("step " + "q" * 1500, usage=NO_USAGE))
    n = len(s)
    summarizer = FailsSecond()
    with pytest.raises(SummarizerError, match="provider down"):
        s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=700))
    assert summarizer.calls == 2 and summarizer.cancelled and len(s) == n


def test_overflow_after_a_successful_retry_recovers_again():
    s, _ = overflowed_session()
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    assert auto.recover_from_overflow("prompt is too long").retry
    s.append_message(assistant("retry worked " + "w" * 3000))
    s.append_message(user("next " + "v" * 3000))
    s.append_message(assistant(None, stop="error", error="prompt is too long"))
    assert auto.recover_from_overflow("prompt is too long").retry


def test_compaction_without_progress_stops_recovery():
    s, _ = overflowed_session()
    s.hooks.before_compact.append(lambda e: {"compaction": {"summary": "s" * 400_000}})
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    with pytest.raises(CompactionNoProgressError, match="no progress"):
        auto.recover_from_overflow("prompt is too long")


def test_non_overflow_errors_are_left_to_the_caller():
    s, _ = long_session()
    s.append_message(assistant(None, stop="error", error="429 rate limit: tokens per min"))
    n = len(s)
    auto = AutoCompactor(s, Recorder(), context_window=200_000)
    outcome = auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"])
    assert not outcome.retry and outcome.outcome == "not_overflow" and len(s) == n


def test_cancelled_recovery_keeps_the_omission_and_does_not_retry():
    s, failed = overflowed_session()
    s.hooks.before_compact.append(lambda e: {"cancel": True})
    auto = AutoCompactor(s, Recorder(), context_window=200_000)
    outcome = auto.recover_from_overflow("prompt is too long")
    assert not outcome.retry and outcome.outcome == "cancelled"
    assert s.get_entry(s.leaf_id).type == "context_edit"


def test_overflow_recognition():
    assert is_overflow_error(ContextOverflowError("x"))
    assert is_overflow_error("Request too large: maximum context length exceeded")
    assert not is_overflow_error("connection reset")
    silent = assistant("ok", usage=dict(USAGE, input=9000))
    assert is_overflow_error(silent, context_window=8000) and not is_overflow_error(silent, context_window=20000)


# ==== Provider-safe context ========================================================


def test_unanswered_tool_calls_and_empty_failed_attempts_are_dropped():
    s = Session.in_memory()
    s.append_message(user("q"))
    a = s.append_message(
        assistant("let me look", calls=(("c1", "read", {"path": "x"}), ("c2", "read", {"path": "y"})), stop="toolUse")
    )
    s.append_message(tool_result("c1", "x contents"))
    e = s.append_message(assistant(None, stop="aborted"))
    ctx = s.build_provider_context()
    assert [(d.reason, d.entry_id) for d in ctx.dropped] == [
        ("empty_failed_assistant", e),
        ("tool_call_without_result", a),
    ]
    calls = [b["id"] for b in ctx.messages[1]["content"] if b["type"] == "toolCall"]
    assert calls == ["c1"] and is_provider_valid(ctx.messages)
    # the stored entry is untouched
    assert len(s.get_entry(a)["message"]["content"]) == 3


def test_tool_results_whose_call_is_omitted_are_dropped():
    s = Session.in_memory()
    s.append_message(user("q"))
    a = s.append_message(assistant(None, calls=(("c1", "read", {"path": "x"}),), stop="toolUse"))
    r = s.append_message(tool_result("c1", "x"))
    s.append_message(assistant("answer"))
    e = s._base("context_edit")
    e.update(targetId=a, replacement=None)
    s._append_built(lambda: e)
    assert provider_problems(s.build_context().messages) == [("orphan_tool_result", 1)]
    ctx = s.build_provider_context()
    assert [(d.reason, d.entry_id) for d in ctx.dropped] == [("orphan_tool_result", r)]
    assert [m["role"] for m in ctx.messages] == ["user", "assistant"]


def test_duplicate_results_and_an_assistant_left_empty_are_dropped():
    msgs = [
        user("q"),
        assistant(None, calls=(("c1", "ls", {}),), stop="toolUse"),
        tool_result("c1", "a"),
        tool_result("c1", "b"),
        assistant(None, calls=(("c9", "ls", {}),), stop="toolUse"),
    ]
    ctx = repair_for_provider(msgs)
    assert [d.reason for d in ctx.dropped] == [
        "duplicate_tool_result",
        "tool_call_without_result",
        "empty_assistant_after_repair",
    ]
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "toolResult"]
    assert is_provider_valid(ctx.messages)


# ==== Session totals (Pi get_session_stats) ========================================


def _rpc_goldens() -> list:
    out = []
    for d in GOLDEN_DIRS:
        out.extend(sorted((CORPUS / d).glob("*.jsonl.rpc.json")))
    return out


@pytest.mark.parametrize(
    "rpc_path", _rpc_goldens(), ids=lambda p: f"{p.parent.name}/{p.name[: -len('.jsonl.rpc.json')]}"
)
def test_usage_totals_match_pi_session_stats(rpc_path: Path):
    golden = json.loads(rpc_path.read_text(encoding="utf-8"))
    if not golden.get("started"):
        pytest.skip("Pi did not start on this file")
    stats = next((x for x in golden["exchanges"] if x["command"]["type"] == "get_session_stats"), None)
    if stats is None:
        pytest.skip("no get_session_stats exchange")
    s = Session.open(rpc_path.with_name(rpc_path.name[: -len(".rpc.json")]))
    totals = s.usage_totals().to_pi()
    response = stats["response"]
    if not response["success"]:
        # Pi throws on an assistant without usage / a usage without cost; we count what is there
        assert response["error"].startswith("Cannot read properties of undefined")
        return
    assert totals["tokens"] == response["data"]["tokens"]
    assert totals["cost"] == response["data"]["cost"]


def test_usage_totals_count_summaries_usage_entries_and_all_branches():
    s, ids = small_tree()
    s.navigate_tree(ids["a1b"], summarize=True, summarizer=Recorder())
    e = s._base("usage")
    e.update(kind="cache_warm", usage=dict(USAGE, input=1000, cost=dict(USAGE["cost"], total=1.0)))
    s._append_built(lambda: e)
    totals = s.usage_totals()
    n_assistant = 4
    assert totals.input == n_assistant * 100 + 50 + 1000
    assert totals.total == totals.input + totals.output + totals.cache_read + totals.cache_write
    assert totals.cost == pytest.approx(n_assistant * 0.12 + 0.75 + 1.0)


# ==== Property: compaction keeps the context provider-valid ========================

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.integers(1, 3000)),
        st.tuples(st.just("text"), st.integers(0, 3000)),
        st.tuples(st.just("tools"), st.integers(1, 3), st.integers(1, 3000), st.booleans()),
        st.tuples(st.just("bash"), st.integers(0, 2000)),
        st.tuples(st.just("custom"), st.integers(1, 1500)),
        st.tuples(st.just("failed"), st.booleans()),
        st.tuples(st.just("omit"), st.integers(0, 10**6)),
        st.tuples(st.just("compact"), st.integers(0, 4000)),
    ),
    min_size=1,
    max_size=40,
)


def _build(ops, summarizer) -> tuple[Session, bool]:
    """Apply random operations; returns the session and whether it stayed well-formed (every
    tool call answered, nothing omitted, no failed attempts)."""
    s = Session.in_memory("/p")
    well_formed = True
    call = 0
    for op in ops:
        kind = op[0]
        if kind == "user":
            s.append_message(user("u" * op[1]))
        elif kind == "text":
            s.append_message(assistant("t" * max(1, op[1])))  # an empty answer is not well-formed
        elif kind == "tools":
            _, n, size, answered = op
            ids = [f"call{call + k}" for k in range(n)]
            call += n
            s.append_message(
                assistant("using tools", calls=tuple((i, "read", {"path": f"{i}.py"}) for i in ids), stop="toolUse")
            )
            for k, i in enumerate(ids):
                if answered or k < n - 1:
                    s.append_message(tool_result(i, "r" * size))
                else:
                    well_formed = False
        elif kind == "bash":
            s.append_message(
                {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": "o" * op[1],
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 0,
                }
            )
        elif kind == "custom":
            s.append_custom_message_entry("note", "c" * op[1], True)
        elif kind == "failed":
            s.append_message(assistant("half" if op[1] else None, stop="error", error="boom"))
            well_formed = False
        elif kind == "omit":
            targets = [e.id for e in s.get_branch() if e.type == "message" and e["message"].get("role") == "assistant"]
            if targets:
                e = s._base("context_edit")
                e.update(targetId=targets[op[1] % len(targets)], replacement=None)
                s._append_built(lambda: e)
                well_formed = False
        elif kind == "compact":
            try:
                s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=op[1]))
            except NothingToCompactError:
                pass
    return s, well_formed


def _check_after_compaction(s: Session, result, well_formed: bool) -> None:
    kept = s.get_entry(result.first_kept_entry_id)
    assert kept is not None
    if kept.type == "message":
        assert kept["message"].get("role") != "toolResult", "kept region starts at a tool result"
    ctx = s.build_provider_context()
    assert is_provider_valid(ctx.messages), provider_problems(ctx.messages)
    assert is_provider_valid(result.context.messages)
    if well_formed:
        assert provider_problems(s.build_context().messages) == [], "compaction orphaned a tool call or result"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops, keep=st.one_of(st.integers(0, 400), st.integers(0, 6000)))
def test_compaction_keeps_the_provider_context_valid(ops, keep):
    summarizer = Recorder()
    s, well_formed = _build(ops, summarizer)
    try:
        result = s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=keep))
    except NothingToCompactError:
        ctx = s.build_provider_context()
        assert is_provider_valid(ctx.messages), provider_problems(ctx.messages)
        return
    _check_after_compaction(s, result, well_formed)


def test_split_turn_after_a_compaction_keeps_the_earlier_summary_as_history():
    # Divergence (docs/divergences.md): when a split turn has nothing before it but a compaction
    # is in effect, Pi would store "No prior history." and lose the summary in effect.
    s = Session.in_memory()
    s.append_message(user("first turn " + "a" * 3000))
    s.append_message(assistant("answer " + "b" * 3000))
    second_turn = s.append_message(user("second turn"))
    s.append_message(assistant("short"))
    rec = Recorder()
    first = s.compact(rec, settings=CompactionSettings(keep_recent_tokens=5))
    assert first.first_kept_entry_id == second_turn and TURN_CONTEXT_SEPARATOR not in first.summary
    for _ in range(8):
        s.append_message(assistant("more " + "r" * 800))
    second = s.compact(rec, settings=CompactionSettings(keep_recent_tokens=500))
    history, prefix = second.summary.split(TURN_CONTEXT_SEPARATOR)
    assert history == first.summary and "No prior history." not in second.summary
    assert [r.kind for r in rec.requests[1:]] == ["turn_prefix"]
