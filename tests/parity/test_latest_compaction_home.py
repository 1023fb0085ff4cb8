"""One home for "the latest compaction on the path and its first kept index" (Pi 1.6
``buildSessionContext``): :func:`sessiontree.context.latest_compaction_at`.

Context building (:func:`~sessiontree.context.build_context_entries`), compaction preparation
(:func:`~sessiontree.compaction.prepare_compaction`, through ``kept_boundary``) and
``Session.find_cut_point`` all use it. The session feeds it from the index (type names and
string ids, no line parsed but the compaction's) and falls back to the parsed values where the
index cannot answer exactly (duplicate ids, ids that are not strings, legacy files). Pinned here:

* the session's answer equals the pure rule on the parsed branch, on every corpus file (globbed)
  and on random files with repeated, numeric and missing ids and every kind of
  ``firstKeptEntryId``;
* ``Session.find_cut_point`` equals the pure cut search over the same range, on the same inputs;
* the binding no longer carries a second copy of the rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session, _core
from sessiontree.compaction import collect_context_edits, find_cut_point, kept_boundary
from sessiontree.context import latest_compaction, latest_compaction_at

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
FILES = sorted(CORPUS.rglob("*.jsonl"))
KEEPS = (0, 150, 2000, 20000)


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", repr(fn()))
    except Exception as exc:  # noqa: BLE001 - the error is part of the answer
        return ("raised", type(exc).__name__, str(exc))


def _str_or_none(v: Any) -> Any:
    """An id as the session reports it: strings only, lone surrogates as U+FFFD (the index's
    form; ``Session`` ids are the index's)."""
    if not isinstance(v, str):
        return None
    return v.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _pure_cut(branch: list, keep: int) -> tuple:
    """``Session.find_cut_point``'s answer computed from the parsed branch by the pure rules."""
    if not branch:
        return (None, None, False)
    start, dropped = kept_boundary(latest_compaction(branch))
    path = branch if dropped is None else branch[:dropped] + branch[dropped + 1 :]
    r = find_cut_point(path, start, len(path), keep, collect_context_edits(path))
    if r.first_kept_entry_index >= len(path):
        return (None, None, False)
    turn = _str_or_none(path[r.turn_start_index].get("id")) if r.turn_start_index >= 0 else None
    return (_str_or_none(path[r.first_kept_entry_index].get("id")), turn, r.is_split_turn)


def _check(s: Session) -> int:
    """Compare the session with the pure rules; returns how many comparisons ran."""
    if _outcome(lambda: s.context_span(with_settings=False))[0] != "ok" or _outcome(s._context_path)[0] != "ok":
        return 0  # a cycle (Pi's getBranch never returns): SessionCycleError is tested elsewhere
    span = s.context_span(with_settings=False)
    values = [s._load_raw(i) for i in span]
    assert _outcome(lambda: s._latest_compaction(span)) == _outcome(lambda: latest_compaction(values))
    branch = [s._load_raw(i) for i in s._context_path()]
    ran = 1
    for keep in KEEPS:
        want = _outcome(lambda: _pure_cut(branch, keep))
        got = _outcome(lambda: tuple(s.find_cut_point(keep)))
        if want[0] == "raised":
            assert got[0] == "raised" and got[1] == want[1]
        else:
            assert got == want, f"keep={keep}"
        ran += 1
    return ran


def test_the_corpus_is_there():
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_session_and_the_pure_rule_agree_on_the_corpus(path):
    try:
        s = Session.open(path)
    except Exception:  # noqa: BLE001 - files Pi rejects have no branch
        pytest.skip("not a session Pi opens")
    _check(s)


def test_the_rule_over_columns_is_the_rule_over_entries():
    e = [
        {"type": "message", "id": "a"},
        {"type": "message", "id": "b"},
        {"type": "compaction", "id": "c", "firstKeptEntryId": "b"},
        {"type": "message", "id": "d"},
    ]
    assert latest_compaction(e) == (2, 2, 1)
    assert latest_compaction_at([x["type"] for x in e], lambda i: e[i]["id"], lambda i: e[i]["firstKeptEntryId"]) == (
        2,
        2,
        1,
    )
    # duplicate id: the compaction's id first appears at 0, so the kept range is searched before 0
    e[0]["id"] = "c"
    assert latest_compaction(e) == (2, 0, None)
    assert latest_compaction_at([x["type"] for x in e], lambda i: e[i]["id"], lambda i: e[i]["firstKeptEntryId"]) == (
        2,
        0,
        None,
    )
    assert latest_compaction_at(["message"], lambda i: 1 / 0, lambda i: 1 / 0) is None  # ids never read


def test_the_binding_has_no_second_copy_of_the_rule():
    assert not hasattr(_core.Index, "latest_compaction_in")


HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
ID_POOL = ["a", "b", "c", "d", "e", "f", 1, 2, None, "x\ud800", "x\ud801", "x\ufffd"]


@st.composite
def session_lines(draw):
    n = draw(st.integers(1, 14))
    ids = [draw(st.sampled_from(ID_POOL)) if draw(st.integers(0, 4)) == 0 else f"n{k}" for k in range(n)]
    lines = []
    for k in range(n):
        e: dict = {"type": draw(st.sampled_from(["message", "message", "message", "compaction", "model_change"]))}
        if draw(st.integers(0, 9)) > 0:
            e["id"] = ids[k]
        e["parentId"] = ids[k - 1] if k else None
        e["timestamp"] = "2026-01-01T00:00:01.000Z"
        if e["type"] == "message":
            role = draw(st.sampled_from(["user", "assistant", "toolResult"]))
            e["message"] = {"role": role, "content": "x" * draw(st.integers(0, 900)), "timestamp": 1}
            if role == "assistant":
                e["message"].update(provider="p", model="m", usage={}, stopReason="stop")
        elif e["type"] == "compaction":
            e["summary"] = "S"
            e["tokensBefore"] = 10
            e["firstKeptEntryId"] = draw(st.one_of(st.sampled_from(ids), st.sampled_from(ID_POOL), st.just("missing")))
        else:
            e.update(provider="p", modelId="m")
        lines.append(json.dumps(e).encode())
    return lines


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=session_lines())
def test_the_session_and_the_pure_rule_agree_on_random_files(lines):
    data = b"\n".join([json.dumps(HEADER).encode(), *lines]) + b"\n"
    s = Session.from_bytes(data)
    _check(s)
