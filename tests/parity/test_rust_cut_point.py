"""The Rust token estimate and cut-point search against Pi's goldens and the Python rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.goldens import golden_ids, golden_paths, session_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import CompactionSettings, Session
from sessiontree.compaction import collect_context_edits, find_cut_point, prepare_compaction
from sessiontree.errors import PiError

CASES = [(p, i) for p, i in zip(golden_paths(), golden_ids())]


def _open(golden_path: Path) -> tuple[dict, Session | None]:
    golden = json.loads(golden_path.read_text())
    if not golden["open"]["ok"] or not golden["path"]["terminates"]:
        return golden, None
    stem = golden_path.name[: -len(".jsonl.golden.json")]
    return golden, Session.open(session_file(golden_path.parent.name, stem))


@pytest.mark.parametrize("golden_path", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_rust_estimates_match_pis_path_message_tokens(golden_path):
    golden, s = _open(golden_path)
    if s is None:
        pytest.skip("Pi opens no branch here")
    path = s._core.branch(s._core.leaf()) if s._core.leaf() is not None else []
    msgs = [i for i in path if s._core.record(i).type == "message"]
    rust = s._core.estimate_tokens(msgs)
    expected = golden["path_message_tokens"]
    assert len(expected) == len(msgs)
    checked = 0
    for got, (_, _, want) in zip(rust, expected):
        if got is None:  # content Pi throws on or fixes up: the Python rules decide
            continue
        assert got == want
        checked += 1
    # only unusual lines fall back (Pi errors, null content, lone surrogates serde refuses)
    assert checked >= len(msgs) - 3


@pytest.mark.parametrize("golden_path", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_rust_find_cut_point_matches_pis_golden(golden_path):
    golden, s = _open(golden_path)
    if s is None or not isinstance(golden.get("findCutPoint"), dict):
        pytest.skip("no findCutPoint golden")
    fc = golden["findCutPoint"]
    path = s._core.branch(s._core.leaf()) if s._core.leaf() is not None else []
    ran = 0
    for keep, want in fc["results"].items():
        got = s._core.find_cut_point(path, fc["startIndex"], fc["endIndex"], int(keep))
        if got is None:
            continue
        ran += 1
        assert (got[0], got[1], got[2]) == (want["firstKeptEntryIndex"], want["turnStartIndex"], want["isSplitTurn"])
    if None not in s._core.estimate_tokens(path):  # no context edit or unusual content
        assert ran == len(fc["results"]), "the Rust search fell back on ordinary entries"


@pytest.mark.parametrize("golden_path", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_session_find_cut_point_agrees_with_prepare_compaction(golden_path):
    golden, s = _open(golden_path)
    if s is None or not isinstance(golden.get("prepareCompaction"), dict):
        pytest.skip("no prepareCompaction golden")
    for keep, want in golden["prepareCompaction"].items():
        if want is None:
            continue
        if "pi_error" in want:
            with pytest.raises(PiError):
                s.find_cut_point(int(keep))
            continue
        cut = s.find_cut_point(int(keep))
        if golden["open"].get("ids_generated_by_pi"):
            continue  # ids differ by design (compared by position elsewhere)
        assert cut.first_kept_entry_id == want["firstKeptEntryId"] or want.get("firstKeptEntryId") is None
        assert cut.is_split_turn == want["isSplitTurn"]


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 0}


def _assistant(text: str, calls: int = 0) -> dict:
    content = [{"type": "text", "text": text}]
    content += [
        {"type": "toolCall", "id": f"c{k}", "name": "read", "arguments": {"path": f"f{k}.py", "n": 1.5}}
        for k in range(calls)
    ]
    return {
        "role": "assistant",
        "content": content,
        "provider": "p",
        "model": "m",
        "usage": {},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": 0,
    }


OPS = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "tools", "bash", "custom", "summary", "label", "model", "compact"]),
        st.integers(0, 900),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, keep=st.integers(0, 3000))
def test_rust_cut_point_equals_the_python_rules_on_random_sessions(ops, keep):
    s = Session.in_memory()
    for kind, n in ops:
        if kind == "user":
            s.append_message(_user("u" * n + "😀"))
        elif kind == "assistant":
            s.append_message(_assistant("a" * n))
        elif kind == "tools":
            s.append_message(_assistant("t", calls=1 + n % 3))
            for k in range(1 + n % 3):
                s.append_message(
                    {
                        "role": "toolResult",
                        "toolCallId": f"c{k}",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "r" * n}],
                        "isError": False,
                        "timestamp": 0,
                    }
                )
        elif kind == "bash":
            s.append_message(
                {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": "o" * n,
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 0,
                }
            )
        elif kind == "custom":
            s.append_custom_message_entry("note", "c" * n, True)
        elif kind == "summary" and s.leaf_id:
            s.branch_with_summary(s.leaf_id, "s" * (n % 50))
        elif kind == "label" and s.leaf_id:
            s.append_label_change(s.leaf_id, "L")
        elif kind == "model":
            s.append_model_change("p", "m")
        elif kind == "compact" and s.leaf_id:
            prep = prepare_compaction([e.raw for e in s.get_branch()], CompactionSettings(keep_recent_tokens=n))
            if prep is not None:
                s.append_compaction("S", prep.first_kept_entry_id, prep.tokens_before)
    if s._core.leaf() is None:
        return
    path = s._core.branch(s._core.leaf())
    entries = [s._load_raw(i) for i in path]
    rust = s._core.find_cut_point(path, 0, len(path), keep)
    py = find_cut_point(entries, 0, len(entries), keep, collect_context_edits(entries))
    assert rust is not None
    assert rust == (py.first_kept_entry_index, py.turn_start_index, py.is_split_turn)
    # and through the Session, against prepare_compaction's choice
    prep = prepare_compaction(entries, CompactionSettings(keep_recent_tokens=keep))
    if prep is not None:
        assert s.find_cut_point(keep).first_kept_entry_id == prep.first_kept_entry_id


def test_cut_point_search_touches_only_the_tail(tmp_path):
    """A huge history before the budget is met is never parsed: corrupt it and the search
    still answers (it would fall back and fail if it read those lines)."""
    s = Session.create("/p", session_dir=tmp_path)
    for k in range(3000):
        s.append_message(_user(f"old {k} " + "x" * 200))
    tail = [s.append_message(_assistant("y" * 400)) for _ in range(20)]
    s.close()
    reopened = Session.open(s.path)
    path = reopened._core.branch(reopened._core.leaf())
    got = reopened._core.find_cut_point(path, 0, len(path), 500)
    assert got is not None and reopened._core.record(path[got[0]]).id in tail
