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


# --- the projection (rust/src/entry_kind.rs): every role and type the core knows, and the ones
# it does not, answer as the Python rules do -------------------------------------------------

_HEAD = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
_USAGE = {"input": 3, "output": 2, "cacheRead": 1, "cacheWrite": 0, "totalTokens": 6, "cost": {"total": 0.5}}


def _file_session(bodies: list[dict], version: int = 3) -> Session:
    """A linear session of ``bodies`` (entries without id/parentId/timestamp), from bytes."""
    lines = [dict(_HEAD, version=version)]
    prev = None
    for k, b in enumerate(bodies):
        lines.append({"id": f"e{k}", "parentId": prev, "timestamp": f"2026-01-01T00:00:{k % 60:02d}.000Z"} | dict(b))
        prev = f"e{k}"
    return Session.from_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines))


def _msg(role, text: str = "x" * 60, **extra) -> dict:
    return {"type": "message", "message": {"role": role, "content": text, **extra}}


def _conversation(middle: list[dict]) -> list[dict]:
    a = {"type": "message", "message": _assistant("a" * 90) | {"usage": _USAGE}}
    return [_msg("user", "u" * 120), a, *middle, a, _msg("user", "v" * 100), *middle, a, a]


KEEPS = (0, 1, 20, 40, 60, 90, 130, 200, 400, 10_000)


def _assert_core_equals_python(s: Session) -> int:
    """Every decided answer of the core's cut-point search and estimates equals the Python
    rules' on the whole path; returns how many searches the core decided."""
    from sessiontree.compaction import entry_context_messages
    from sessiontree.tokens import estimate_tokens

    path = s._core.branch(s._core.leaf())
    entries = [s._load_raw(i) for i in path]
    edits = collect_context_edits(entries)
    decided = 0
    for keep in KEEPS:
        for start in (0, 2):
            got = s._core.find_cut_point(path, start, len(path), keep)
            if got is None:
                continue
            decided += 1
            py = find_cut_point(entries, start, len(entries), keep, edits)
            assert got == (py.first_kept_entry_index, py.turn_start_index, py.is_split_turn), (keep, start)
    for i, est in zip(path, s._core.estimate_tokens(path)):
        if est is not None and s._core.record(i).type != "compaction":
            assert est == sum(estimate_tokens(m) for m in entry_context_messages(s._load_raw(i))), i
    return decided


ROLES = [*(r for r in __import__("sessiontree").entries.CORE_ROLE_NAMES if r), "x_role", 5, None]


@pytest.mark.parametrize("role", ROLES, ids=[repr(r) for r in ROLES])
@pytest.mark.parametrize("version", [3, 2])
def test_every_role_cuts_and_counts_as_the_python_rules(role, version):
    """Each fixed role of the core (``_core.ROLE_NAMES``), an unknown one and non-string ones, in
    a v3 file and a v2 one (where ``hookMessage`` is migrated to ``custom``): the core's
    cut-point search, estimates and usage sums equal the Python rules' wherever the core
    decides. Before the projection, a v3 ``hookMessage`` was cut and estimated as ``custom``
    by the core (Python: no cut point, 0 tokens), so ``Session.find_cut_point`` disagreed
    with ``prepare_compaction``."""
    from sessiontree.usage import usage_totals_of_entries

    middle = [_msg(role, "h" * 70, usage=_USAGE, command="ls", output="o" * 30, summary="s" * 50, customType="c")]
    s = _file_session(_conversation(middle), version=version)
    if s.needs_migration:
        # a legacy file: the Python entries are migrated; the core's search reads raw lines
        path = s._core.branch(s._core.leaf())
        entries = [e.raw for e in s.get_branch()]
        for keep in KEEPS:
            got = s._core.find_cut_point(path, 0, len(path), keep)
            py = find_cut_point(entries, 0, len(entries), keep, collect_context_edits(entries))
            if got is not None:
                assert got == (py.first_kept_entry_index, py.turn_start_index, py.is_split_turn), keep
    else:
        _assert_core_equals_python(s)
    cols = s.fleet_columns()
    if cols["totals"] is not None:
        want = usage_totals_of_entries([s._load_raw(i) for i in range(len(s))], skip_missing=True)
        assert cols["totals"][:2] == [want.input, want.output]


#: entries of types the core does not know: bare, with every message-like field, not a string
UNKNOWN = [
    {"type": "x_future"},
    {
        "type": "x_future",
        "message": {"role": "user", "content": "m" * 80},
        "content": "c" * 80,
        "summary": "s" * 80,
        "usage": _USAGE,
    },
    {"type": 7, "message": {"role": "assistant", "content": [{"type": "text", "text": "t" * 80}]}},
    {"type": None, "summary": "s" * 40},
    {"type": ["x"], "content": "c"},
]


@pytest.mark.parametrize("unknown", UNKNOWN, ids=[f"unknown{k}" for k in range(len(UNKNOWN))])
def test_unknown_types_are_undecided_and_python_answers_as_for_nothing(unknown):
    """Issue 21: an entry type the core does not know is "undecided" for the projection: the
    cut-point search returns None when it reads one (and Python decides), the estimates and the
    fleet context estimate leave it to Python. Python's answers (Pi 1.6's buildSessionContext
    ignores the type) equal the core's on the same session with each unknown entry replaced by
    a known entry that contributes nothing (a ``custom`` entry): the parity the undecided path
    keeps."""
    from sessiontree.fleet._rows import Options, _context

    s = _file_session(_conversation([unknown]))
    known = _file_session(_conversation([{"type": "custom", "customType": "ext", "data": {}}]))
    assert len(s) == len(known)
    path = s._core.branch(s._core.leaf())
    unknown_at = [k for k, i in enumerate(path) if s._core.record(i).type not in entry_types_names()]
    assert unknown_at, "the unknown entries are on the path"
    assert s._core.estimate_tokens([path[k] for k in unknown_at]) == [None] * len(unknown_at)
    assert s.fleet_columns()["context"] is None
    assert known.fleet_columns()["context"] is not None
    kpath = known._core.branch(known._core.leaf())
    decided_known = 0
    for keep in KEEPS:
        core_known = known._core.find_cut_point(kpath, 0, len(kpath), keep)
        core = s._core.find_cut_point(path, 0, len(path), keep)
        assert core is None or core == core_known
        assert core_known is not None
        decided_known += 1
        # the session's answer (Python's where the core is undecided) is the known session's
        assert s.find_cut_point(keep) == known.find_cut_point(keep), keep
        prep = prepare_compaction([e.raw for e in s.get_branch()], CompactionSettings(keep_recent_tokens=keep))
        prep_known = prepare_compaction(
            [e.raw for e in known.get_branch()], CompactionSettings(keep_recent_tokens=keep)
        )
        assert (prep is None) == (prep_known is None)
        if prep is not None:
            assert prep.first_kept_entry_id == prep_known.first_kept_entry_id
    assert decided_known == len(KEEPS)
    # the context estimate: Python's over the unknown entries, the core's over the known ones
    opts = Options(index_cache=False)
    tokens, _should, _err, n = _context(s, opts)
    assert known.fleet_columns()["context"] == (float(tokens), n)
    assert s.entry_metrics().tokens == known.entry_metrics().tokens
    _assert_core_equals_python(s)


def entry_types_names() -> set:
    from sessiontree import entries

    return set(entries.CORE_TYPE_NAMES[1:])
