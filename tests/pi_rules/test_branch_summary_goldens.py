"""Branch summarization preparation against Pi 1.6.0's ``branchSummaries`` goldens.

For every golden (found by globbing in :mod:`goldens`) and every ``(oldLeafId, targetId)`` pair:
``collectEntriesForBranchSummary`` (common ancestor and collected entry ids) and
``prepareBranchEntries`` for every token budget the golden lists (messages, total tokens, file
operations, and for budget 0 the serialized text). Entries come from the pure-Python reference
loader, looked up through two callables as a store would provide them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.goldens import (
    golden_ids,
    index_by_id,
    js_id,
    load_case,
    migrated_entries,
    reference_entries,
    session_file,
)
from tests.pi_rules.test_compaction_goldens import diff_report, file_fields, message_summary, pi, serialized
from tests.support.reference_model import walk

from sessiontree.branch_summary import collect_entries_for_branch_summary, prepare_branch_entries


class ReferenceStore:
    """``get_entry`` / ``get_branch`` over the reference loader's entries (last duplicate id wins)."""

    def __init__(self, session_file: Path, golden: dict | None = None) -> None:
        if golden is not None and (golden.get("open") or {}).get("migrated"):
            entries = migrated_entries(session_file, golden)
        else:
            loaded = reference_entries(session_file)
            entries = loaded[1] if loaded else []
        self.by_id = index_by_id(entries)

    def get_entry(self, entry_id: str):
        return self.by_id.get(entry_id)

    def get_branch(self, entry_id: str) -> list:
        return walk(self.by_id, self.by_id.get(entry_id))


def branch_case(name: str):
    case = load_case(name)
    if case.skip:
        pytest.skip(case.skip)
    if not case.golden.get("branchSummaries"):
        pytest.skip("the golden lists no branch navigations for this file")
    folder, stem = name.split("/", 1)
    return case, ReferenceStore(session_file(folder, stem), case.golden)


def preparation_fields(prep, with_serialized: bool) -> dict:
    if isinstance(prep, dict):  # {"pi_error": ...}
        return prep
    out = {
        "messages": [message_summary(m) for m in prep.messages],
        "totalTokens": prep.total_tokens,
        **file_fields(prep.file_ops),
    }
    if with_serialized:
        out["serialized"] = serialized(prep.messages)
    return out


@pytest.mark.parametrize("name", golden_ids())
def test_branch_summaries_match_pi(name: str) -> None:
    case, store = branch_case(name)
    problems = []
    for nav in case.golden["branchSummaries"]:
        label = f"{nav['oldLeafId']}->{nav['targetId']}"
        collected = collect_entries_for_branch_summary(
            store.get_entry, store.get_branch, nav["oldLeafId"], nav["targetId"]
        )
        got_ids = [js_id(e.get("id")) for e in collected.entries]
        if collected.common_ancestor_id != nav["commonAncestorId"] or got_ids != nav["entry_ids"]:
            problems.append(
                f"{label}: ancestor {collected.common_ancestor_id!r} ids {got_ids} "
                f"expected {nav['commonAncestorId']!r} {nav['entry_ids']}"
            )
            continue
        for budget, expected in nav["prepare"].items():
            prep = pi(prepare_branch_entries, collected.entries, int(budget))
            got = preparation_fields(prep, with_serialized="serialized" in expected)
            if got != expected:
                problems.append(diff_report(f"{label} prepare[{budget}]", got, expected))
    assert not problems, "\n".join(problems)
