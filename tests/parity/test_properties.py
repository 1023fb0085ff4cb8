"""Property tests: the Rust core against the plain-Python reference model
(tests/support/reference_model.py), on random files and random operation sequences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session, SessionCycleError

from tests.support.reference_model import ReferenceCycle, ReferenceSession

HEADER = {"type": "session", "version": 3, "id": "prop", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
IDS = [f"id{i:02d}" for i in range(12)]
TIMESTAMPS = [
    "2026-01-01T00:00:01.000Z",
    "2026-01-01T00:00:02.000Z",
    "2026-01-01T00:00:02.000Z",
    "2025-12-31T23:59:59Z",
    "not a date",
    None,
]


@st.composite
def entry_line(draw):
    kind = draw(
        st.sampled_from(
            ["message", "message", "message", "label", "model_change", "garbage", "falsy", "blank", "custom"]
        )
    )
    if kind == "garbage":
        return draw(st.sampled_from([b'{"type":"message","id":"x"', b"not json", b"\x00\x00\x00", b"[1,2"]))
    if kind == "falsy":
        return draw(st.sampled_from([b"null", b"0", b"false", b'""']))
    if kind == "blank":
        return b"   "
    e = {
        "type": kind,
        "id": draw(st.sampled_from(IDS)),
        "parentId": draw(st.one_of(st.none(), st.sampled_from(IDS + ["unknown"]))),
    }
    ts = draw(st.sampled_from(TIMESTAMPS))
    if ts is not None:
        e["timestamp"] = ts
    if kind == "message":
        e["message"] = {"role": draw(st.sampled_from(["user", "assistant", "toolResult"])), "content": "x"}
    elif kind == "label":
        e["targetId"] = draw(st.sampled_from(IDS))
        e["label"] = draw(st.sampled_from(["a", "b", "", None, 0]))
    elif kind == "model_change":
        e["provider"], e["modelId"] = "p", "m"
    line = json.dumps(e, separators=(",", ":")).encode()
    if draw(st.booleans()) and draw(st.booleans()):
        line += b"\r"
    return line


def _file(tmp_path: Path, lines: list[bytes], trailing_newline: bool = True) -> tuple[Path, bytes]:
    data = b"\n".join([json.dumps(HEADER).encode()] + lines) + (b"\n" if trailing_newline else b"")
    f = tmp_path / "prop.jsonl"
    f.write_bytes(data)
    return f, data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(entry_line(), max_size=30), trailing=st.booleans())
def test_core_matches_reference_model_on_random_files(tmp_path, lines, trailing):
    f, data = _file(tmp_path, lines, trailing)
    ref = ReferenceSession.load(data)
    s = Session.open(f)
    assert ref is not None
    assert [e.raw for e in s.entries()] == ref.entries
    assert s.leaf_id == ref.leaf_id
    assert s.entry_count() == len(ref.by_id)
    assert s.labels == {k: v for k, v in ref.labels().items()}
    # branch from every id: same path or both a cycle
    for i in set(e.get("id") for e in ref.entries):
        try:
            want = [e.get("id") for e in ref.branch(i)]
        except ReferenceCycle:
            with pytest.raises(SessionCycleError):
                s.get_branch(i)
            continue
        assert [e.id for e in s.get_branch(i)] == want
    # children order and roots (only where the tree has no duplicate-id loops)
    kids = ref.children_ids()
    for i, want in kids.items():
        nodes = s._core.children(s._core.index_of(i))
        assert [s._core.record(n).id for n in nodes] == want or any(s._core.metrics([n])[1][0] is None for n in nodes)
    assert [s._core.record(r).id for r in s._core.roots()] == ref.roots()
    # opening never wrote
    assert f.read_bytes() == data


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("msg"), st.sampled_from(["user", "assistant"])),
        # ~300 KB: a few of these pass the size at which appended lines are folded into the mapping
        st.tuples(st.just("big"), st.integers(0, 9)),
        st.tuples(st.just("branch"), st.integers(0, 40)),
        st.tuples(st.just("label"), st.integers(0, 40), st.sampled_from(["x", "y", "", None])),
        st.tuples(
            st.just("reset"),
        ),
        st.tuples(st.just("name"), st.sampled_from(["  a ", "b", ""])),
        st.tuples(st.just("summary"), st.integers(-1, 40)),
    ),
    max_size=25,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, durability=st.sampled_from(["none", "flush"]))
def test_operation_sequences_match_the_reference_after_reopen(tmp_path, ops, durability):
    d = tmp_path / "ops"
    d.mkdir(exist_ok=True)
    s = Session.create("/p", session_dir=d, durability=durability)
    mem = Session.in_memory("/p")
    known: dict = {id(s): [], id(mem): []}
    for op in ops:
        for sess in (s, mem):
            ids = known[id(sess)]
            new = None
            if op[0] == "msg":
                new = sess.append_message({"role": op[1], "content": "t", "timestamp": 0})
            elif op[0] == "big":
                new = sess.append_message({"role": "user", "content": str(op[1]) * 300_000, "timestamp": 1})
            elif op[0] == "branch" and ids:
                sess.branch(ids[op[1] % len(ids)])
            elif op[0] == "label" and ids:
                new = sess.append_label_change(ids[op[1] % len(ids)], op[2])
            elif op[0] == "reset":
                sess.reset_leaf()
            elif op[0] == "name":
                new = sess.append_session_info(op[1])
            elif op[0] == "summary":
                target = None if op[1] < 0 or not ids else ids[op[1] % len(ids)]
                new = sess.branch_with_summary(target, "s")
            if new:
                ids.append(new)
    s.flush()
    ref = ReferenceSession.load(s.path.read_bytes())
    again = Session.open(s.path)
    assert [e.raw for e in again.entries()] == ref.entries
    # the live session reads the same, from memory or from the refreshed mapping
    assert [e.raw for e in s.entries()] == ref.entries
    s.close()
    assert again.leaf_id == ref.leaf_id
    assert again.labels == ref.labels()
    if ref.leaf_id:
        assert [e.id for e in again.get_branch()] == [e["id"] for e in ref.branch(ref.leaf_id)]
    # the in-memory twin has the same shape
    assert [e.type for e in mem.entries()] == [e.type for e in again.entries()]
    assert [e.parent_id is None for e in mem.entries()] == [e.parent_id is None for e in again.entries()]


def test_duplicate_ids_that_make_pis_tree_loop_raise(tmp_path):
    # A(root), B under A, then A again under B: Pi's getTree never returns
    lines = [
        {
            "type": "message",
            "id": "A",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {"role": "user", "content": "a"},
        },
        {
            "type": "message",
            "id": "B",
            "parentId": "A",
            "timestamp": "2026-01-01T00:00:02Z",
            "message": {"role": "user", "content": "b"},
        },
        {
            "type": "message",
            "id": "A",
            "parentId": "B",
            "timestamp": "2026-01-01T00:00:03Z",
            "message": {"role": "user", "content": "a2"},
        },
    ]
    f, _ = _file(tmp_path, [json.dumps(l).encode() for l in lines])
    s = Session.open(f)
    with pytest.raises(SessionCycleError):
        s._core.preorder()
    with pytest.raises(SessionCycleError):
        s.get_branch()
