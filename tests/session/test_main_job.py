"""The main job (open, check, compact, append) through the public facade: the context values,
and a compaction's result carrying the preparation it was made from."""

from __future__ import annotations

from pathlib import Path

from sessiontree import Session
from sessiontree.compaction import prepare_compaction
from sessiontree.settings import CompactionSettings

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated"


def test_context_values_are_the_parsed_context_span_at_the_branchs_leaf():
    s = Session.open(CORPUS / "compaction_1.jsonl")
    values = s.context_values()
    assert values == s.raw_values(s.context_span(context_rule=False))
    assert values == [e.raw for e in s.get_context_entries()]
    s.reset_leaf()
    assert s.context_values() == []


def test_a_compaction_result_carries_its_preparation(tmp_path):
    s = Session.in_memory("/p")
    for k in range(12):
        s.append_message({"role": "user", "content": f"question {k} " + "x" * 400, "timestamp": k})
        s.append_message(
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {k} " + "y" * 400}], "timestamp": k}
        )
    settings = CompactionSettings(keep_recent_tokens=200)
    want = prepare_compaction(s.context_values(), settings)
    seen = []
    s.hooks.before_compact.append(lambda event: seen.append(event.preparation))
    result = s.compact(settings=settings)
    assert result.preparation is seen[0]
    assert result.preparation == want
    assert result.first_kept_entry_id == want.first_kept_entry_id
    assert len(result.preparation.messages_to_summarize) == len(want.messages_to_summarize) > 0


# ==== what the main job parses ======================================================


def _count_parses(monkeypatch) -> list[bytes]:
    """Every entry line the facade parses from now on (its two parse sites), in order."""
    import sessiontree.session.base as base
    import sessiontree.session.views as views

    seen: list[bytes] = []
    real = views.parse_json_line

    def counted(line: bytes):
        seen.append(bytes(line))
        return real(line)

    monkeypatch.setattr(views, "parse_json_line", counted)
    monkeypatch.setattr(base, "parse_json_line", counted)
    return seen


def _long_session(tmp_path) -> Session:
    """A 24-message session on disk, opened afresh (nothing parsed yet)."""
    s = Session.create("/p", session_dir=tmp_path)
    for k in range(12):
        s.append_message({"role": "user", "content": f"question {k} " + "x" * 400, "timestamp": k})
        s.append_message(
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {k} " + "y" * 400}], "timestamp": k}
        )
    s.flush()
    return Session.open(s.path)


class _Recording:
    """The offline summarizer, noting how many lines had been parsed when each summary was asked for."""

    def __init__(self, seen: list[bytes]):
        from sessiontree.summarizers import OfflineSummarizer

        self._inner = OfflineSummarizer()
        self._seen = seen
        self.parsed_at_call: list[int] = []

    async def summarize(self, request):
        self.parsed_at_call.append(len(self._seen))
        return await self._inner.summarize(request)


def test_the_main_job_parses_the_span_once_before_the_summary_and_once_after_the_append(tmp_path, monkeypatch):
    from sessiontree.autocompact import AutoCompactor

    s = _long_session(tmp_path)
    n_before = len(s.context_span(context_rule=False))
    assert n_before == 24
    seen = _count_parses(monkeypatch)
    summarizer = _Recording(seen)
    auto = AutoCompactor(s, summarizer, CompactionSettings(reserve_tokens=100, keep_recent_tokens=200), 2000)
    assert auto.before_prompt() is True  # check -> compact -> append
    n_job = len(seen)
    n_after = len(s.context_span(context_rule=False))
    assert auto.last_result is not None and n_after < n_before
    # before the summary: every line of the span, once
    assert len(summarizer.parsed_at_call) == 1
    before_summary = seen[: summarizer.parsed_at_call[0]]
    assert len(before_summary) == len(set(before_summary)) == n_before
    # after the append: the new span (the compaction and the kept entries) once, nothing more
    assert n_job - summarizer.parsed_at_call[0] == n_after
    s.append_message({"role": "user", "content": "next", "timestamp": 99})
    assert len(seen) == n_job  # the append parses nothing


def test_session_compact_parses_the_span_once_before_the_summary_and_once_after(tmp_path, monkeypatch):
    s = _long_session(tmp_path)
    n_before = len(s.context_span(context_rule=False))
    seen = _count_parses(monkeypatch)
    summarizer = _Recording(seen)
    result = s.compact(summarizer, settings=CompactionSettings(keep_recent_tokens=200))
    assert result.entry.type == "compaction"
    assert summarizer.parsed_at_call == [n_before]
    assert len(seen) == n_before + len(s.context_span(context_rule=False))


def test_a_span_read_before_the_leaf_moved_is_read_again(tmp_path, monkeypatch):
    from sessiontree.orchestration import plan_compaction, read_context

    s = _long_session(tmp_path)
    settings = CompactionSettings(keep_recent_tokens=200)
    leaf, values = read_context(s)
    assert leaf == s.leaf_id and values == s.context_values()
    s.append_message({"role": "user", "content": "one more " + "z" * 400, "timestamp": 50})
    seen = _count_parses(monkeypatch)
    plan = plan_compaction(s, settings, span=(leaf, values))
    assert plan.leaf_id == s.leaf_id != leaf
    assert plan.path == s.context_values() != values
    assert len(seen) == 2 * len(values) + 2  # read again at the new leaf (then once more above)
    # at the same leaf the pair is taken as it is: nothing parsed
    now = read_context(s)
    seen.clear()
    assert plan_compaction(s, settings, span=now).path is now[1]
    assert seen == []
