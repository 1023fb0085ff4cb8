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
