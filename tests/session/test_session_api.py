"""The Session API: writing, reopening, refresh, legacy files and the field's bug shapes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessiontree import (
    EntryNotFoundError,
    Session,
    SessionCycleError,
    SessionFileChangedError,
    SessionFormatError,
    list_sessions,
)

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def _user(text: str, ts: int = 1) -> dict:
    return {"role": "user", "content": text, "timestamp": ts}


def _assistant(text: str, ts: int = 2) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": "p",
        "model": "m",
        "usage": {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": ts,
    }


def _write(path: Path, lines: list) -> Path:
    out = []
    for l in lines:
        if isinstance(l, bytes):
            out.append(l)
        elif isinstance(l, str):
            out.append(l.encode())
        else:
            out.append(json.dumps(l, separators=(",", ":")).encode())
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _msg(i: str, parent, role="user", ts="2026-01-01T00:00:01.000Z", text="t") -> dict:
    m = _user(text) if role == "user" else _assistant(text)
    return {"type": "message", "id": i, "parentId": parent, "timestamp": ts, "message": m}


# ==== writing and reopening ==================================================


def test_appends_become_children_of_the_leaf_and_survive_reopen(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    a = s.append_message(_user("hi"))
    b = s.append_message(_assistant("hello"))
    assert s.leaf_id == b and s.get_entry(b).parent_id == a
    s.append_model_change("openai", "gpt-4o")
    s.append_thinking_level_change("high")
    s.append_custom_entry("ext", {"n": 1})
    s.append_custom_message_entry("ext", "injected", True, {"d": 1})
    s.append_session_info("  My session  ")
    s2 = Session.open(s.path)
    assert [e.type for e in s2.entries()] == [
        "message",
        "message",
        "model_change",
        "thinking_level_change",
        "custom",
        "custom_message",
        "session_info",
    ]
    assert s2.session_name == "My session"
    ctx = s2.build_context()
    assert ctx.thinking_level == "high" and ctx.model == {"provider": "openai", "modelId": "gpt-4o"}
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "custom"]
    # ids are 8 hex chars and timestamps ISO with milliseconds and Z
    for e in s2.entries():
        assert len(e.id) == 8 and int(e.id, 16) >= 0
        assert e.timestamp.endswith("Z") and len(e.timestamp) == 24


def test_written_json_keeps_pis_key_order(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    a = s.append_message(_user("hi"))
    s.append_custom_entry("ext", {"k": 1})
    s.append_label_change(a, "L")
    s.append_compaction("sum", a, 10, {"readFiles": [], "modifiedFiles": []}, False)
    lines = [json.loads(l) for l in s.path.read_text().splitlines()]
    assert list(lines[0]) == ["type", "version", "id", "timestamp", "cwd"]
    assert list(lines[1]) == ["type", "id", "parentId", "timestamp", "message"]
    assert list(lines[2]) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    assert list(lines[3]) == ["type", "id", "parentId", "timestamp", "targetId", "label"]
    assert list(lines[4]) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
        "fromHook",
    ]


def test_branch_reset_and_branch_with_summary(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    a = s.append_message(_user("a"))
    b = s.append_message(_assistant("b"))
    s.branch(a)
    c = s.append_message(_user("c"))
    assert [e.id for e in s.get_branch()] == [a, c]
    sid = s.branch_with_summary(a, "left c", {"readFiles": ["x"], "modifiedFiles": []})
    e = s.get_entry(sid)
    assert e.parent_id == a and e["fromId"] == c
    assert s.build_context().messages[-1]["role"] == "branchSummary"
    s.reset_leaf()
    assert s.leaf_id is None and s.get_branch() == [] and s.build_context().messages == []
    r = s.append_message(_user("new root"))
    assert s.get_entry(r).parent_id is None
    root_summary = s.branch_with_summary(None, "from nothing")
    assert s.get_entry(root_summary)["fromId"] == r and s.get_entry(root_summary).parent_id is None
    with pytest.raises(EntryNotFoundError):
        s.branch("nope")
    with pytest.raises(EntryNotFoundError):
        s.append_label_change("nope", "x")
    assert b in {x.id for x in s.entries()}


def test_label_set_overwrite_and_clear(tmp_path):
    s = Session.in_memory()
    a = s.append_message(_user("a"))
    s.append_label_change(a, "one")
    s.append_label_change(a, "two")
    assert s.get_label(a) == "two" and s.labels == {a: "two"}
    s.append_label_change(a, "")
    assert s.get_label(a) is None and s.labels == {}
    s.append_label_change(a, "three")
    s.append_label_change(a, None)
    assert s.labels == {}


def test_get_entries_since_is_a_durable_cursor(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    ids = [s.append_message(_user(str(i))) for i in range(5)]
    assert [e.id for e in s.get_entries(since=ids[2])] == ids[3:]
    assert s.get_entries(since=ids[-1]) == []
    with pytest.raises(EntryNotFoundError, match="Entry not found: zzz"):
        s.get_entries(since="zzz")
    reopened = Session.open(s.path)
    assert [e.id for e in reopened.get_entries(since=ids[0])] == ids[1:]


def test_refresh_reads_only_new_lines_from_another_writer(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    a = s.append_message(_user("a"))
    reader = Session.open(s.path)
    assert reader.refresh() == 0
    b = s.append_message(_assistant("b"))
    assert reader.refresh() == 1 and reader.leaf_id == b
    # a line written in two pieces: the first refresh sees a torn line, the second the entry
    with open(s.path, "ab") as fh:
        fh.write(b'{"type":"message","id":"ext1","parentId":"' + b.encode() + b'","timestamp":"2026-01-01T00:00:00Z",')
    reader.refresh()
    assert reader.leaf_id == b and reader.problems[-1].kind == "torn_last_line"
    with open(s.path, "ab") as fh:
        fh.write(b'"message":{"role":"user","content":"x"}}\n')
    assert reader.refresh() == 1
    assert reader.leaf_id == "ext1" and not reader.problems
    assert [e.id for e in reader.get_branch()] == [a, b, "ext1"]


def test_refresh_detects_a_truncated_file(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    s.append_message(_user("a"))
    reader = Session.open(s.path)
    s.path.write_bytes(s.path.read_bytes()[:10])
    with pytest.raises(SessionFileChangedError):
        reader.refresh()


def test_open_never_modifies_the_file(tmp_path):
    for name in [
        "edge_no_trailing_newline",
        "edge_v1_legacy",
        "edge_v2_hookmessage",
        "edge_empty",
        "edge_truncated_last_line",
        "edge_crlf",
    ]:
        src = CORPUS / "pi-generated" / f"{name}.jsonl"
        copy = tmp_path / src.name
        copy.write_bytes(src.read_bytes())
        before = copy.read_bytes()
        s = Session.open(copy)
        s.get_tree(), s.build_context(), s.labels, s.session_name
        assert copy.read_bytes() == before, name


# ==== bug shapes from the field ===============================================


def test_clone_drops_label_entries_without_leaving_orphans(tmp_path):
    # a label entry in the middle of the path: its child must be re-attached (Pi issue 5669)
    f = _write(
        tmp_path / "s.jsonl",
        [
            HEADER,
            _msg("a", None),
            _msg("b", "a", "assistant"),
            {
                "type": "label",
                "id": "L1",
                "parentId": "b",
                "timestamp": "2026-01-01T00:00:02.000Z",
                "targetId": "a",
                "label": "start",
            },
            {
                "type": "label",
                "id": "L2",
                "parentId": "L1",
                "timestamp": "2026-01-01T00:00:03.000Z",
                "targetId": "zz",
                "label": "off-path",
            },
            _msg("c", "L2"),
            _msg("d", "c", "assistant"),
        ],
    )
    s = Session.open(f)
    clone = s.create_branched_session("d")
    ents = clone.entries()
    ids = {e.id for e in ents}
    assert [e.type for e in ents] == ["message"] * 4 + ["label"]
    for e in ents:
        assert e.parent_id is None or e.parent_id in ids, f"{e.id} dangles"
    assert clone.get_entry("c").parent_id == "b"
    assert clone.labels == {"a": "start"}
    assert [e.id for e in clone.get_branch("d")] == ["a", "b", "c", "d"]
    assert clone.header["parentSession"] == str(f)
    assert f.read_bytes() == Session.open(f).path.read_bytes()


@pytest.mark.parametrize("name", ["edge_v1_legacy", "edge_v2_hookmessage"])
def test_legacy_files_are_migrated_before_clone_or_fork(tmp_path, name):
    src = tmp_path / f"{name}.jsonl"
    src.write_bytes((CORPUS / "pi-generated" / f"{name}.jsonl").read_bytes())
    s = Session.open(src)
    assert s.needs_migration
    leaf = s.leaf_id
    clone = s.create_branched_session(leaf)
    forked = Session.fork_from(src, "/elsewhere", session_dir=tmp_path / "forks")
    for new in (clone, forked):
        assert new.header["version"] == 3 and not new.needs_migration
        for line in new.path.read_text().splitlines()[1:]:
            d = json.loads(line)
            assert isinstance(d["id"], str) and "parentId" in d, "entries carry ids (v1 migrated)"
            assert "firstKeptEntryIndex" not in d
            if d["type"] == "message":
                assert d["message"]["role"] != "hookMessage"
    assert src.read_bytes() == (CORPUS / "pi-generated" / f"{name}.jsonl").read_bytes()
    # the migrated copy builds the same context as the in-memory migration
    assert [m["role"] for m in forked.build_context().messages] == [m["role"] for m in s.build_context().messages]


def test_writing_to_a_legacy_file_migrates_it_atomically_and_keeps_ids(tmp_path):
    f = tmp_path / "v1.jsonl"
    f.write_bytes((CORPUS / "pi-generated" / "edge_v1_legacy.jsonl").read_bytes())
    s = Session.open(f)
    ids = [e.id for e in s.entries()]
    ctx_before = s.build_context().messages
    new = s.append_message(_user("after migration"))
    again = Session.open(f)
    assert not again.needs_migration and again.header["version"] == 3
    assert [e.id for e in again.entries()] == ids + [new]
    assert again.build_context().messages[:-1] == ctx_before


def test_compaction_with_unknown_first_kept_entry_keeps_nothing_before_it(tmp_path):
    f = _write(
        tmp_path / "s.jsonl",
        [
            HEADER,
            _msg("a", None),
            _msg("b", "a", "assistant"),
            {
                "type": "compaction",
                "id": "c",
                "parentId": "b",
                "timestamp": "2026-01-01T00:00:05.000Z",
                "summary": "S",
                "firstKeptEntryId": "missing",
                "tokensBefore": 5,
            },
            _msg("d", "c"),
        ],
    )
    ctx = Session.open(f).build_context()
    assert [m["role"] for m in ctx.messages] == ["compactionSummary", "user"]
    assert [src["id"] for src in ctx.sources] == ["c", "d"]


def test_session_of_only_model_and_thinking_changes_has_a_tree(tmp_path):
    f = _write(
        tmp_path / "s.jsonl",
        [
            HEADER,
            {
                "type": "model_change",
                "id": "m",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "provider": "anthropic",
                "modelId": "claude",
            },
            {
                "type": "thinking_level_change",
                "id": "t",
                "parentId": "m",
                "timestamp": "2026-01-01T00:00:02.000Z",
                "thinkingLevel": "high",
            },
        ],
    )
    s = Session.open(f)
    tree = s.get_tree()
    assert [n.entry.id for n in tree] == ["m"] and [n.entry.id for n in tree[0].children] == ["t"]
    ctx = s.build_context()
    assert (
        ctx.messages == []
        and ctx.thinking_level == "high"
        and ctx.model == {"provider": "anthropic", "modelId": "claude"}
    )


def test_nul_line_and_torn_line_mid_file_are_skipped_and_reported(tmp_path):
    f = _write(
        tmp_path / "s.jsonl",
        [
            HEADER,
            _msg("a", None),
            b"\x00" * 64,
            b'{"type":"message","id":"torn","parentId":"a","timest',
            _msg("b", "a", "assistant"),
            _msg("c", "b"),
        ],
    )
    s = Session.open(f)
    assert [e.id for e in s.entries()] == ["a", "b", "c"]
    assert [(p.line, p.kind) for p in s.problems] == [(3, "malformed_json"), (4, "malformed_json")]
    assert [e.id for e in s.get_branch()] == ["a", "b", "c"]


def test_two_headers_follow_pis_rule(tmp_path):
    s = Session.open(CORPUS / "real" / "whamp-two-headers-reused-ids.jsonl")
    assert s.session_id == "reuse-session-one"
    assert len(s) == 2 and s.entry_count() == 1
    assert [p.kind for p in s.problems] == ["extra_header"]


def test_header_not_first_or_bom_is_rejected(tmp_path):
    for name in ["edge_bom", "edge_header_not_first_entry", "edge_missing_header"]:
        with pytest.raises(SessionFormatError):
            Session.open(CORPUS / "pi-generated" / f"{name}.jsonl")


def test_garbage_only_file_is_rejected_not_overwritten(tmp_path):
    f = tmp_path / "g.jsonl"
    f.write_bytes(b"not json\n{broken\n")
    with pytest.raises(SessionFormatError):
        Session.open(f)
    assert f.read_bytes() == b"not json\n{broken\n"


def test_empty_file_gets_its_header_with_the_first_entry(tmp_path):
    f = tmp_path / "e.jsonl"
    f.write_bytes(b"")
    s = Session.open(f)
    assert f.read_bytes() == b"" and s.header["version"] == 3
    a = s.append_message(_user("first"))
    lines = f.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "session" and json.loads(lines[1])["id"] == a
    assert Session.open(f).leaf_id == a


def test_append_after_unterminated_last_line_starts_a_fresh_line(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_bytes((CORPUS / "pi-generated" / "edge_no_trailing_newline.jsonl").read_bytes())
    s = Session.open(f)
    old_leaf = s.leaf_id
    n = len(s)
    new = s.append_message(_user("x"))
    again = Session.open(f)
    assert len(again) == n + 1 and again.get_entry(new).parent_id == old_leaf
    assert not again.problems


def test_cycle_raises_with_the_ids(tmp_path):
    s = Session.open(CORPUS / "pi-generated" / "edge_parent_cycle.jsonl")
    with pytest.raises(SessionCycleError) as ei:
        s.get_branch()
    assert set(ei.value.ids) == {"cyc0000a", "cyc0000b"}
    # the tree is still available (cycle nodes are unreachable)
    assert [n.entry.id for n in s.get_tree()] == ["e0424749"]
    with pytest.raises(SessionCycleError):
        s.create_branched_session("cyc0000a")


def test_self_parent_is_a_cycle_for_walks_and_a_root_for_the_tree(tmp_path):
    s = Session.open(CORPUS / "pi-generated" / "edge_self_parent.jsonl")
    roots = [n.entry.id for n in s.get_tree()]
    selfp = [e.id for e in s.entries() if e.parent_id == e.id]
    assert selfp and selfp[0] in roots
    with pytest.raises(SessionCycleError):
        s.get_branch(selfp[0])


def test_deep_chain_does_not_recurse(tmp_path):
    n = 200_000
    lines = [HEADER] + [_msg(f"e{i}", f"e{i - 1}" if i else None) for i in range(n)]
    f = _write(tmp_path / "deep.jsonl", lines)
    s = Session.open(f)
    assert len(s.get_branch()) == n
    tree = s.get_tree()
    depth, node = 0, tree[0]
    while node.children:
        node = node.children[0]
        depth += 1
    assert depth == n - 1
    assert len(s._core.preorder()) == n


def test_in_memory_clone_and_errors():
    s = Session.in_memory("/x")
    a = s.append_message(_user("a"))
    c = s.create_branched_session(a)
    assert c.path is None and [e.id for e in c.entries()] == [a]
    with pytest.raises(TypeError):
        s.append_message("not a dict")
    with pytest.raises(ValueError):
        s.append_message({"role": "compactionSummary", "summary": "x"})


def test_create_refuses_unsafe_session_ids(tmp_path):
    for bad in ["../evil", "a/b", "", "..", "x\x00y", "c:d"]:
        with pytest.raises(ValueError):
            Session.create("/p", session_dir=tmp_path, session_id=bad)
    assert list(tmp_path.iterdir()) == []


def test_list_sessions_and_continue_recent(tmp_path):
    s1 = Session.create("/proj", session_dir=tmp_path)
    s1.append_message(_user("first question"))
    s1.append_session_info("named")
    s2 = Session.create("/proj", session_dir=tmp_path)
    s2.append_message(_user("second", ts=10**13))
    (tmp_path / "junk.jsonl").write_bytes(b"garbage\n")
    infos = list_sessions(session_dir=tmp_path)
    assert [i.id for i in infos] == [s2.session_id, s1.session_id]
    assert infos[1].name == "named" and infos[1].first_message == "first question"
    os.utime(s1.path, (2**31, 2**31))
    recent = Session.continue_recent("/proj", session_dir=tmp_path)
    assert recent.session_id == s1.session_id
    fresh = Session.continue_recent("/proj", session_dir=tmp_path / "none")
    assert fresh.path.parent == tmp_path / "none"


def test_context_edit_omits_or_replaces_without_touching_the_target(tmp_path):
    s = Session.create("/proj", session_dir=tmp_path)
    a = s.append_message(_user("question"))
    b = s.append_message(_assistant("bad attempt"))
    s.append_context_edit(b, None)
    assert [m["role"] for m in s.build_context().messages] == ["user"]
    s.append_context_edit(a, {"content": "edited question"})
    assert s.build_context().messages[0]["content"] == "edited question"
    assert s.get_entry(a)["message"]["content"] == "question"
    with pytest.raises(EntryNotFoundError):
        s.append_context_edit("nope", None)
    with pytest.raises(TypeError):
        s.append_context_edit(a, "not a dict")
    s.branch(b)  # edits are branch-relative: before them the attempt is visible again
    assert [m["role"] for m in s.build_context().messages] == ["user", "assistant"]


def test_many_siblings_with_invalid_timestamps_sort_without_quadratic_cost(tmp_path):
    n = 100_000
    lines = [HEADER, _msg("root", None)]
    lines += [
        dict(_msg(f"c{i}", "root"), timestamp="not a date" if i % 2 else f"2026-01-01T00:00:{i % 60:02d}.000Z")
        for i in range(n)
    ]
    s = Session.open(_write(tmp_path / "wide.jsonl", lines))
    kids = s._core.children(s._core.index_of("root"))
    assert len(kids) == n
    ts = [t if t is not None else float("nan") for t in s._core.metrics(kids)[1]]
    valid = [t for t in ts if t == t]
    assert valid == sorted(valid) and all(t != t for t in ts[len(valid) :])  # invalid dates last
