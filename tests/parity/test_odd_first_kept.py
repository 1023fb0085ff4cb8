"""A compaction whose ``firstKeptEntryId`` is not on the path before it (Pi never writes one,
but files get edited): the index's context span (rust/src/walk.rs ``Index::context_span``)
stays the context (the compaction, what follows it and the few earlier settings), never the
whole branch, and every per-turn answer is the one the pure rules give over the whole branch
(Pi keeps nothing before the compaction then: ``buildSessionContext`` finds no earlier entry
with that id).

* the corpus, each file with such a compaction appended (naming an entry on another branch,
  a later entry, or no entry), then a short tail;
* hypothesis-made trees with compactions naming any entry, themselves, or nothing, and files
  whose roots name parents that appear only later (so what is an ancestor changes as lines
  are appended: the span's cached answer must follow);
* the span is short (O(context)) in these shapes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import AutoCompactor, CompactionSettings, Session
from sessiontree.errors import SessionCycleError
from sessiontree.context import build_session_context, estimate_projected_context_tokens
from tests.session.test_entry_objects import _same_answers_on_span_and_branch

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
FILES = sorted(CORPUS.rglob("*.jsonl"))


def _msg(role: str, text: str) -> dict:
    if role == "user":
        return {"role": "user", "content": text, "timestamp": 1}
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "p",
        "model": "m",
        "stopReason": "stop",
        "timestamp": 2,
    }


def _line(etype: str, eid: str, parent, **fields) -> dict:
    return {"type": etype, "id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **fields}


def _compaction(eid: str, parent, first_kept) -> dict:
    return _line("compaction", eid, parent, summary="summary of " + eid, firstKeptEntryId=first_kept, tokensBefore=1000)


def _write(path: Path, lines: list[dict]) -> Path:
    header = {"type": "session", "version": 3, "id": "odd", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *lines]))
    return path


def _all_answers(s: Session) -> None:
    """The span's answers equal the whole branch's, the auto-compactor's estimate included.
    A branch that loops is left out: the span does not see a loop above the first kept entry
    (known, not this shape's; the corpus's loops are checked in tests/session)."""
    try:
        branch = [s._entry(i).raw for i in s._context_path()]
    except SessionCycleError:
        return
    _same_answers_on_span_and_branch(s)
    try:
        ctx = build_session_context(branch)
        want = estimate_projected_context_tokens(ctx.messages, ctx.sources, branch).tokens
    except Exception as exc:  # noqa: BLE001 - the error is the answer
        with pytest.raises(type(exc)):
            AutoCompactor(s, None, CompactionSettings(), context_window=10**9).context_tokens()
        return
    got = AutoCompactor(s, None, CompactionSettings(), context_window=10**9).context_tokens()
    assert repr(got) == repr(want)


def _odd_tail(s: Session, first_kept_of) -> None:
    """A compaction after the leaf whose firstKeptEntryId is ``first_kept_of(s)``, then a tail."""
    leaf = s.leaf_id
    lines = [
        _compaction("c0ffee00", leaf, first_kept_of(s)),
        _line("message", "t1", "c0ffee00", message=_msg("user", "after the compaction")),
        _line("message", "t2", "t1", message=_msg("assistant", "a reply")),
    ]
    with open(s.path, "a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))


def _off_path(s: Session):
    try:
        on = set(s._context_path())
    except SessionCycleError:
        on = set()
    for i in range(len(s)):
        if i not in on and isinstance(s._core.record(i).id, str):
            return s._core.record(i).id
    return None


@pytest.mark.parametrize("kind", ["off_path", "missing", "later"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_an_odd_first_kept_entry_gives_the_whole_branchs_answers_on_the_corpus(path, kind, tmp_path):
    try:
        s = Session.open(path)
    except Exception:  # noqa: BLE001 - files Pi rejects have no entries to compare
        pytest.skip("not a session Pi opens")
    if s.leaf_id is None or not isinstance(s.leaf_id, str) or s._core.entry_count() != len(s):
        pytest.skip("no string leaf, or duplicate ids (the span is the branch then)")
    first_kept = {"off_path": _off_path, "missing": lambda s: "no-such-entry", "later": lambda s: "t2"}[kind]
    if first_kept(s) is None:
        pytest.skip("every entry is on the branch")
    p = tmp_path / path.name
    shutil.copyfile(path, p)
    with open(p, "rb+") as f:  # a file without its last newline gets one first
        f.seek(0, 2)
        if f.tell():
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.write(b"\n")
    s = Session.open(p)
    _odd_tail(s, first_kept)
    s = Session.open(p)
    if s.get_entry("c0ffee00") is None or s.leaf_id != "t2":
        pytest.skip("the file's last line swallowed ours")
    _all_answers(s)
    if s._core.needs_migration:
        return  # (a legacy file's span is its branch: the rule needs the migrated ids)
    try:
        s._context_path()
    except SessionCycleError:
        return  # (a loop above the leaf: both raise, checked above)
    # the span is the context: settings, the compaction and the tail, not the branch
    span = s.get_context_entries()
    assert span[-3].id == "c0ffee00", [e.id for e in span[-4:]]
    edits = sum(1 for i in s._context_path() if s._entry(i).type == "context_edit")
    assert len(span) <= 5 + edits


def _long_off_path(tmp_path: Path, n: int) -> Session:
    lines = [_line("message", "side", None, message=_msg("user", "another conversation"))]
    parent = None
    for i in range(n):
        lines.append(_line("message", f"m{i}", parent, message=_msg("user" if i % 2 == 0 else "assistant", f"m {i}")))
        parent = f"m{i}"
    lines.append(_compaction("c", parent, "side"))
    lines.append(_line("message", "after", "c", message=_msg("user", "after")))
    return Session.open(_write(tmp_path / "long.jsonl", lines))


def test_the_span_of_an_off_path_first_kept_entry_is_the_context(tmp_path):
    s = _long_off_path(tmp_path, 2000)
    span = s.get_context_entries()
    assert [e.id for e in span] == ["m1999", "c", "after"]  # the model (the last assistant), then the context
    _all_answers(s)


def test_the_span_follows_a_root_whose_parent_appears_later(tmp_path):
    # m0's parent "late" does not exist yet: "side" is not an ancestor of the compaction ...
    lines = [_line("message", "side", None, message=_msg("user", "side"))]
    lines.append(_line("message", "m0", "late", message=_msg("user", "m0")))
    lines.append(_line("message", "m1", "m0", message=_msg("assistant", "m1")))
    lines.append(_compaction("c", "m1", "side"))
    lines.append(_line("message", "after", "c", message=_msg("user", "after")))
    p = _write(tmp_path / "late.jsonl", lines)
    s = Session.open(p, durability="none")
    assert [e.id for e in s.get_context_entries()] == ["m1", "c", "after"]
    _all_answers(s)
    # ... until "late" is appended under "side": now it is, and the context keeps from it
    with open(p, "a") as f:
        f.write(json.dumps(_line("message", "late", "side", message=_msg("user", "late"))) + "\n")
    s.refresh()
    s.branch("after")
    assert [e.id for e in s.get_context_entries()][:2] == ["side", "late"]
    _all_answers(s)


ROLES = st.sampled_from(["user", "assistant"])


@st.composite
def odd_trees(draw):
    n = draw(st.integers(1, 25))
    ids = [f"e{i}" for i in range(n)]
    lines = []
    for i, eid in enumerate(ids):
        kind = draw(st.sampled_from(["message", "message", "message", "compaction", "thinking", "model"]))
        # a parent: none, an earlier entry, a later one (resolved when it appears), or nothing known
        parent = draw(
            st.one_of(
                st.none(),
                st.sampled_from(ids[:i]) if i else st.none(),
                st.sampled_from(ids),
                st.just("nowhere"),
            )
        )
        if kind == "compaction":
            first_kept = draw(st.one_of(st.sampled_from(ids), st.just(eid), st.just("no-such-entry")))
            lines.append(_compaction(eid, parent, first_kept))
        elif kind == "thinking":
            lines.append(_line("thinking_level_change", eid, parent, thinkingLevel="high"))
        elif kind == "model":
            lines.append(_line("model_change", eid, parent, provider="p", modelId="m"))
        else:
            lines.append(
                _line(
                    "message", eid, parent, message=_msg(draw(ROLES), f"text {eid} " + "x" * draw(st.integers(0, 400)))
                )
            )
    split = draw(st.integers(1, len(lines)))
    leaves = draw(st.lists(st.sampled_from(ids), max_size=3))
    return lines, split, leaves


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(odd_trees())
def test_odd_first_kept_entries_give_the_whole_branchs_answers_on_random_trees(tmp_path_factory, tree):
    lines, split, leaves = tree
    p = _write(tmp_path_factory.mktemp("odd") / "s.jsonl", lines[:split])
    s = Session.open(p, durability="none")
    _all_answers(s)
    # lines appended later change which entries are ancestors: answers follow
    with open(p, "a") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines[split:]))
    s.refresh()
    for leaf in [None, *leaves]:
        if leaf is not None and s.get_entry(leaf) is not None:
            s.branch(leaf)
        _all_answers(s)
