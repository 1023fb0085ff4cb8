"""One entry type for the pure functions, and the context span.

* Every pure function gives the same answer (or raises the same error) for the
  :class:`sessiontree.entries.Entry` objects ``Session`` hands out and for plain dicts, on every
  corpus file (globbed, so hidden corpora are covered too).
* ``Session.get_context_entries()`` (the index's context span, rust/src/walk.rs) gives every
  pure function the same answer as the whole branch, and the session's "latest compaction and
  first kept entry" (read from the index) agrees with :func:`sessiontree.context.latest_compaction`.
* The session's abandoned-branch collection (index walk) agrees with the pure rule.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from sessiontree import Session
from sessiontree.branch_summary import collect_entries_for_branch_summary, prepare_branch_entries
from sessiontree.compaction import (
    collect_context_edits,
    entry_context_messages,
    find_cut_point,
    find_turn_start_index,
    find_valid_cut_points,
    prepare_compaction,
)
from sessiontree.context import (
    build_context_entries,
    build_session_context,
    entry_to_context_messages,
    estimate_projected_context_tokens,
    latest_compaction,
)
from sessiontree.entries import Entry
from sessiontree.orchestration import _collect_abandoned
from sessiontree.settings import CompactionSettings
from sessiontree.usage import usage_totals_of_entries

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
FILES = sorted(p for p in CORPUS.rglob("*.jsonl"))
KEEPS = (0, 150, 2000, 20000)


def _open(path: Path) -> Session | None:
    try:
        return Session.open(path)
    except Exception:  # noqa: BLE001 - files Pi rejects have no entries to compare
        return None


def _outcome(fn: Callable[[], Any]) -> Any:
    """The value's repr (NaN-safe: repr(nan) == repr(nan)), or ``(type, message)`` of the error."""
    try:
        return ("ok", repr(fn()))
    except Exception as exc:  # noqa: BLE001
        return ("raised", type(exc).__name__, str(exc))


def _dicts(entries: list) -> list:
    return [copy.deepcopy(e.raw) for e in entries]


def test_the_corpus_is_there():
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_pure_functions_answer_the_same_for_entries_and_dicts(path):
    s = _open(path)
    if s is None:
        pytest.skip("not a session Pi opens")
    got = _outcome(s.get_branch)
    if got[0] != "ok":
        pytest.skip("the branch loops (SessionCycleError, tested elsewhere)")
    branch = s.get_branch()
    assert all(isinstance(e, Entry) for e in branch)
    dicts = _dicts(branch)
    n = len(branch)
    cases: list[tuple[str, Callable[[list], Any]]] = [
        ("build_session_context", build_session_context),
        ("build_context_entries", build_context_entries),
        ("latest_compaction", latest_compaction),
        ("collect_context_edits", collect_context_edits),
        ("find_valid_cut_points", lambda p: find_valid_cut_points(p, 0, n, collect_context_edits(p))),
        ("find_turn_start_index", lambda p: find_turn_start_index(p, n - 1, 0) if n else None),
        ("entry_to_context_messages", lambda p: [entry_to_context_messages(e) for e in p]),
        ("entry_context_messages", lambda p: [entry_context_messages(e) for e in p]),
        ("usage_totals_of_entries", lambda p: usage_totals_of_entries(p)),
        (
            "estimate_projected_context_tokens",
            lambda p: estimate_projected_context_tokens(
                build_session_context(p).messages, build_session_context(p).sources, p
            ),
        ),
    ]
    for keep in KEEPS:
        settings = CompactionSettings(keep_recent_tokens=keep)
        cases.append((f"prepare_compaction[{keep}]", lambda p, st=settings: prepare_compaction(p, st)))
        cases.append((f"find_cut_point[{keep}]", lambda p, k=keep: find_cut_point(p, 0, n, k)))
        cases.append((f"prepare_branch_entries[{keep}]", lambda p, k=keep: prepare_branch_entries(p, k)))
    for name, fn in cases:
        want = _outcome(lambda: fn(dicts))
        got = _outcome(lambda: fn(branch))
        assert got == want, f"{name}: Entry objects {got!r:.300} != dicts {want!r:.300}"
    if n == 0:
        return
    # the abandoned-branch collection, with callables handing out Entry objects or dicts
    old = branch[-1].id
    for target in {branch[0].id, branch[n // 2].id, s.entries()[len(s) // 3].id} - {None}:

        def by_entry(get_entry, get_branch):
            return _outcome(lambda: collect_entries_for_branch_summary(get_entry, get_branch, old, target))

        got = by_entry(s.get_entry, s.get_branch)
        want = by_entry(
            lambda i: None if s.get_entry(i) is None else copy.deepcopy(s.get_entry(i).raw),
            lambda i: _dicts(s.get_branch(i)),
        )
        assert got == want


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_context_span_gives_the_answers_of_the_whole_branch(path):
    s = _open(path)
    if s is None:
        pytest.skip("not a session Pi opens")
    _same_answers_on_span_and_branch(s)


def _same_answers_on_span_and_branch(s: Session) -> None:
    if _outcome(s._context_path)[0] != "ok":
        assert _outcome(s.get_context_entries)[0] == "raised"
        return  # a cycle: both raise
    branch = [s._entry(i).raw for i in s._context_path()]  # the branch as build_context reads it
    span = [e.raw for e in s.get_context_entries()]
    assert set(s.context_span(with_settings=False)) <= set(s._context_path())
    assert _outcome(lambda: build_session_context(span)) == _outcome(lambda: build_session_context(branch))
    assert _outcome(lambda: s.build_context()) == _outcome(lambda: build_session_context(branch))

    def projected(p):
        ctx = build_session_context(p)
        return estimate_projected_context_tokens(ctx.messages, ctx.sources, p)

    assert _outcome(lambda: projected(span)) == _outcome(lambda: projected(branch))
    for keep in KEEPS:
        st = CompactionSettings(keep_recent_tokens=keep)
        assert _outcome(lambda: prepare_compaction(span, st)) == _outcome(lambda: prepare_compaction(branch, st))
    # the session's answer from the index and the rule over the parsed branch agree
    path = s._context_path()
    assert _outcome(lambda: s._latest_compaction(path)) == _outcome(lambda: latest_compaction(branch))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_abandoned_branch_from_the_index_matches_the_pure_rule(path):
    s = _open(path)
    if s is None or s.leaf_id is None:
        pytest.skip("no leaf")
    entries = s.entries()
    old = s.leaf_id

    def pure(target):
        def get_entry(i):
            e = s.get_entry(i)
            return None if e is None else e.raw

        return collect_entries_for_branch_summary(get_entry, lambda i: [e.raw for e in s.get_branch(i)], old, target)

    for target in sorted({e.id for e in entries[:: max(1, len(entries) // 7)]} - {None}):
        want = _outcome(lambda: pure(target))
        got = _outcome(lambda: _collect_abandoned(s, old, target))
        if want[:2] == ("raised", "SessionCycleError") and got[0] == "ok":
            # the index walks only up to the common ancestor: a parentId loop above it (which
            # the pure rule meets walking whole branches) is not reached, so no error
            continue
        assert got == want, target


# ==== hand-made spans: every way the span can be cut short ============================


def _user(text):
    return {"role": "user", "content": text, "timestamp": 1}


def _assistant(text, usage=None):
    m = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "p",
        "model": "m",
        "stopReason": "stop",
        "timestamp": 2,
    }
    if usage is not None:
        m["usage"] = usage
    return m


def _long_session(n=40):
    s = Session.in_memory()
    s.append_thinking_level_change("high")
    s.append_model_change("p0", "m0")
    ids = []
    for i in range(n):
        ids.append(s.append_message(_user(f"question {i} " + "q" * 200)))
        ids.append(s.append_message(_assistant(f"answer {i} " + "a" * 300)))
    return s, ids


def test_span_of_a_compaction_that_keeps_a_range():
    s, ids = _long_session()
    s.append_compaction("summary", ids[60], 1234)
    s.append_message(_user("after"))
    span = s.get_context_entries()
    assert len(span) < len(s.get_branch()) // 2
    assert span[-1].id == s.leaf_id
    _same_answers_on_span_and_branch(s)
    assert s.build_context().thinking_level == "high"  # from before the span


def test_span_of_a_compaction_that_keeps_nothing():
    s, ids = _long_session()
    s.append_compaction("summary", None, 1234)  # names itself: keeps nothing
    s.append_message(_user("after"))
    assert len(s.get_context_entries()) <= 4
    _same_answers_on_span_and_branch(s)


def test_span_with_a_context_edit_before_the_kept_range_targeting_it():
    s, ids = _long_session()
    s.append_context_edit(ids[70], {"content": "edited far back"})  # hostile order is fine too
    s.append_compaction("summary", ids[60], 1234)
    s.append_message(_user("after"))
    _same_answers_on_span_and_branch(s)


def test_span_falls_back_to_the_branch_on_duplicate_ids(tmp_path):
    s, ids = _long_session(10)
    s.append_compaction("summary", ids[12], 1234)
    s.append_message(_user("after"))
    lines = [s.header] + [e.raw for e in s.entries()]
    import json

    dup = dict(lines[3], id=ids[12])  # an early entry reusing the first kept id
    lines.insert(3, dup)
    p = tmp_path / "dup.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    _same_answers_on_span_and_branch(Session.open(p))


def test_first_kept_entry_after_the_compaction_is_summarized_from_the_compaction_on():
    # Divergence (docs/divergences.md): a compaction whose firstKeptEntryId names a LATER entry
    # keeps nothing before itself in the context (Pi's buildContextEntries); Pi's
    # prepareCompaction nevertheless started the next summarized span at that later entry, so the
    # messages between the compaction and it were neither summarized nor kept.
    s, ids = _long_session(5)
    c = s.append_compaction("summary", ids[0], 100)
    between = s.append_message(_user("between " + "b" * 400))
    s.append_message(_assistant("reply " + "r" * 400))
    later = s.append_message(_user("later " + "l" * 400))
    s.append_message(_assistant("reply2 " + "r" * 400))
    raw = [e.raw for e in s.get_branch()]
    comp = next(e for e in raw if e["id"] == c)
    comp["firstKeptEntryId"] = later  # names an entry after the compaction
    ctx = build_session_context(raw)
    in_context = [m for m in ctx.messages if m.get("role") == "user" and "between" in str(m.get("content"))]
    assert in_context, "context building keeps the entries after the compaction"
    prep = prepare_compaction(raw, CompactionSettings(keep_recent_tokens=10))
    summarized = [
        m for m in prep.messages_to_summarize + prep.turn_prefix_messages if "between" in str(m.get("content"))
    ]
    kept_ids = [e["id"] for e in raw[[e["id"] for e in raw].index(prep.first_kept_entry_id) :]]
    assert summarized or between in kept_ids, "a message in the context is neither summarized nor kept"


def test_span_and_abandoned_branches_on_a_generated_branchy_session(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "gen.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent.parent / "tools" / "gen_session.py"),
            "--megabytes",
            "1",
            "--branchiness",
            "0.2",
            "--seed",
            "11",
            "--out",
            str(p),
        ],
        check=True,
        capture_output=True,
    )
    s = Session.open(p)
    entries = s.entries()
    compactions = [e.id for e in entries if e.type == "compaction"]
    assert compactions
    # the span from several leaves, each after a different compaction
    for cid in compactions[:: max(1, len(compactions) // 6)]:
        kids = s.get_children(cid)
        s.branch(kids[0].id if kids else cid)
        _same_answers_on_span_and_branch(s)
    old = entries[-1].id
    s.branch(old)

    def pure(target):
        return collect_entries_for_branch_summary(
            lambda i: None if s.get_entry(i) is None else s.get_entry(i).raw,
            lambda i: [e.raw for e in s.get_branch(i)],
            old,
            target,
        )

    for e in entries[:: max(1, len(entries) // 25)]:
        assert _outcome(lambda: _collect_abandoned(s, old, e.id)) == _outcome(lambda: pure(e.id))


def test_the_running_usage_total_equals_a_full_recount(tmp_path):
    import os

    s = Session.create("/p", session_dir=tmp_path)
    usage = {
        "input": 10,
        "output": 3,
        "cacheRead": 1,
        "cacheWrite": 0,
        "totalTokens": 14,
        "cost": {"input": 0.1, "output": 0.03, "cacheRead": 0.001, "cacheWrite": 0, "total": 0.131},
    }

    def full(sess):
        return usage_totals_of_entries(e.raw for e in sess.entries())

    assert s.usage_totals() == full(s)
    for i in range(5):
        s.append_message(_user(f"q{i}"))
        s.append_message(_assistant(f"a{i}", usage=usage))
        assert s.usage_totals() == full(s)
    s.flush()
    # another process appends: a complete line, then a torn one (never folded in), then its end
    reader = Session.open(s.path)
    assert reader.usage_totals() == full(reader)
    line = {
        "type": "message",
        "id": "ext1",
        "parentId": s.leaf_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": _assistant("x", usage=usage),
    }
    import json as _json

    text = _json.dumps(line)
    with open(s.path, "a") as f:
        f.write(text[:40])
    reader.refresh()
    assert reader.usage_totals() == full(reader)
    with open(s.path, "a") as f:
        f.write(text[40:] + "\n")
    reader.refresh()
    assert reader.usage_totals() == full(reader) and reader.usage_totals().input == 60
    os.sync()


def test_an_entry_reads_the_index_its_session_reads_now_and_keeps_no_session_alive(tmp_path):
    # An Entry reads the EntryView its session hands it (never ``session._core``): after a
    # rewrite opens a new index (migrate), entries made before read the new one; and an entry
    # holds no reference to its session, so a dropped session is freed (and closed) at once.
    import gc
    import weakref

    path = tmp_path / "legacy.jsonl"
    path.write_bytes((CORPUS / "pi-generated" / "edge_v1_legacy.jsonl").read_bytes())
    s = Session.open(path)
    before = s.get_entries()
    old_index = s._view.index
    assert s.migrate()
    assert s._view.index is not old_index
    after = s.get_entries()
    assert [(e.id, e.parent_id, e.line, e.raw) for e in before] == [(e.id, e.parent_id, e.line, e.raw) for e in after]
    assert before == after  # one session's entries: equal by view and position
    gc.disable()
    try:
        ref = weakref.ref(s)
        del s
        assert ref() is None
        assert before[0].raw == after[0].raw
    finally:
        gc.enable()
