"""Auto-compaction's overflow and threshold rules that keep a loop from sending an over-window
request or retrying forever (issue 9): a "length" stop with no output is an overflow; still
over the window after compacting is a no-progress error; a new user prompt starts a new run;
over the threshold with nothing Pi's cut rule would compact falls back to the latest cut point
(or raises CannotCompactError); tokens before/after are compared like with like."""

from __future__ import annotations

import pytest
from tests.session.test_orchestration import NO_USAGE, Recorder, assistant, long_session, tool_result, user

from sessiontree import CompactionSettings, Session
from sessiontree.autocompact import AutoCompactor, CannotCompactError, is_overflow_error
from sessiontree.compaction import latest_cut_keep, prepare_compaction
from sessiontree.orchestration import CompactionNoProgressError


def test_a_length_stop_with_no_output_is_an_overflow():
    empty = assistant(None, stop="length", usage=dict(NO_USAGE))
    assert is_overflow_error(empty, 200_000)
    wrote = assistant("half an answer", stop="length", usage=dict(NO_USAGE, output=5))
    assert not is_overflow_error(wrote, 200_000)
    s, _ = long_session()
    failed = s.append_message(empty)
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    result = auto.recover_from_overflow(empty)
    assert result.retry and result.outcome == "compacted" and result.omitted_entry_id == failed


def test_still_over_the_window_after_compacting_is_no_progress():
    s, _ = long_session(turns=12, size=4000)  # ~48k tokens
    s.append_message(assistant(None, stop="length", usage=dict(NO_USAGE)))
    # the summary alone (~10k tokens a request) is over the 8k window: a retry would overflow again
    auto = AutoCompactor(s, Recorder("s" * 40000), CompactionSettings(keep_recent_tokens=500), context_window=8000)
    with pytest.raises(CompactionNoProgressError, match="still"):
        auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"])


def test_a_new_user_prompt_starts_a_new_run():
    s, _ = long_session()
    auto = AutoCompactor(s, Recorder(), CompactionSettings(keep_recent_tokens=500), context_window=200_000)
    s.append_message(assistant(None, stop="error", usage=NO_USAGE, error="prompt is too long"))
    assert auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"]).retry
    # the retry got no answer; the user types a new prompt: a new run, recovery allowed again
    s.append_message(user("new question " + "n" * 3000))
    s.append_message(assistant(None, stop="error", usage=NO_USAGE, error="prompt is too long"))
    again = auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"])
    assert again.retry and again.outcome == "compacted"
    # without a new prompt, a second overflow right after a recovery is no progress
    s.append_message(assistant(None, stop="error", usage=NO_USAGE, error="prompt is too long"))
    with pytest.raises(CompactionNoProgressError):
        auto.recover_from_overflow(s.get_entry(s.leaf_id)["message"])


def _tool_run_session() -> Session:
    """A user prompt, then one assistant message calling 12 tools, then 12 large results: the
    only cut points are the user and assistant messages, far from the end."""
    s = Session.in_memory("/p")
    s.append_message(user("do everything " + "u" * 4000))
    calls = tuple((f"c{i}", "read", {"path": f"f{i}.py"}) for i in range(12))
    s.append_message(assistant("reading", calls=calls, stop="toolUse", usage=NO_USAGE))
    for i in range(12):
        s.append_message(tool_result(f"c{i}", "r" * 8000))
    return s


def test_over_the_threshold_with_nothing_pi_would_compact_falls_back_to_the_latest_cut_point():
    s = _tool_run_session()
    settings = CompactionSettings(keep_recent_tokens=2000, reserve_tokens=1000)
    # Pi's rule: the keep budget is met inside the tool results, after the last cut point: keep all
    assert prepare_compaction(s.get_branch(), settings) is None
    keep = latest_cut_keep(s.get_branch(), settings)
    assert keep is not None
    auto = AutoCompactor(s, Recorder(), settings, context_window=20_000)
    assert auto.needs_compaction()
    before = auto.context_tokens()
    assert auto.before_prompt() is True
    assert s.get_entry(s.leaf_id).type == "compaction"
    assert auto.last_result.first_kept_entry_id == s.get_branch()[1].id  # the assistant: the latest cut point
    assert auto.context_tokens() < before


def test_over_the_threshold_with_no_cut_point_at_all_is_an_explicit_outcome():
    s = Session.in_memory("/p")
    s.append_message(user("one enormous prompt " + "u" * 80000))
    auto = AutoCompactor(
        s, Recorder(), CompactionSettings(keep_recent_tokens=2000, reserve_tokens=1000), context_window=10_000
    )
    n = len(s)
    with pytest.raises(CannotCompactError):
        auto.before_prompt()
    assert len(s) == n


def test_tokens_before_and_after_are_labelled_like_with_like():
    s, _ = long_session()
    s.append_message(user("more"))
    s.append_message(assistant("answer", usage=dict(NO_USAGE, input=55000, totalTokens=55717)))
    result = s.compact(Recorder(), settings=CompactionSettings(keep_recent_tokens=500))
    assert result.tokens_before_source == "usage"
    assert result.tokens_before >= 55717  # Pi's figure: provider usage (+ estimates after it)
    # the figure to compare with the estimate after is the estimate before, not the usage
    assert result.estimated_tokens_before < 20000
    assert result.estimated_tokens_after < result.estimated_tokens_before
