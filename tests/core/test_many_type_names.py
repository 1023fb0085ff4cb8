"""More distinct entry type and message role names than the index's 16-bit code tables hold
(65,535): a hostile file does this cheaply. Every entry still reads back its own ``type`` and
role, and the tree, the context and validation treat a name past the table as the unknown name
it is, exactly as in a small file; the saved index restores the same answers.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sessiontree import Session

N = 70_000  # distinct type names, then as many distinct role names
TAIL = 30  # entries of each kind the small oracle file keeps


def _lines() -> list[dict]:
    out: list[dict] = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    ]
    parent = None
    for k in range(N):
        eid = f"t{k:06d}"
        out.append({"type": f"x{k}", "id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"})
        parent = eid
    for k in range(N):
        eid = f"r{k:06d}"
        out.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:02.000Z",
                "message": {"role": f"role{k}", "content": f"m{k}", "timestamp": 1},
            }
        )
        parent = eid
    out.append(
        {
            "type": "message",
            "id": "u",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "user", "content": "last", "timestamp": 1},
        }
    )
    return out


def _write(p: Path, lines: list[dict]) -> None:
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    lines = _lines()
    big = d / "big.jsonl"
    _write(big, lines)
    # the oracle: the same last entries of each kind, in a file whose tables never fill
    tail = [lines[0]] + lines[N + 1 - TAIL : N + 1] + lines[-TAIL - 1 :]
    tail = [dict(x) for x in tail]
    tail[1]["parentId"] = None
    tail[TAIL + 1]["parentId"] = tail[TAIL]["id"]
    small = d / "small.jsonl"
    _write(small, tail)
    return big, small


def _answers(s: Session, pick: list[int]) -> dict:
    """What the tail entries answer: the ``TAIL`` last entries of each unusual name, the last."""
    es = s.entries()
    nodes = list(_walk_tree(s))
    return {
        "types": [es[i].type for i in pick],
        "roles": [es[i].role for i in pick],
        "context": s.build_context().messages[-(TAIL + 1) :],
        "tree": [(nodes[i].entry.id, nodes[i].entry.type, len(nodes[i].children)) for i in pick],
        "validate": s.validate(content=True),
    }


def _walk_tree(s: Session):
    stack = list(reversed(s.get_tree()))
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def test_every_entry_reads_back_its_own_type_and_role(files):
    big, _ = files
    s = Session.open(big, index_cache=False)
    es = s.entries()
    assert len(es) == 2 * N + 1
    assert [e.type for e in es[:N]] == [f"x{k}" for k in range(N)]
    assert [e.type for e in es[N : 2 * N]] == ["message"] * N
    assert [e.role for e in es[N : 2 * N]] == [f"role{k}" for k in range(N)]
    assert (es[-1].type, es[-1].role) == ("message", "user")
    table = s.entry_table()
    assert table.type[: 2 * N] == [e.type for e in es[: 2 * N]]
    assert table.role[: 2 * N] == [e.role for e in es[: 2 * N]]


def test_the_fleet_entries_table_shows_the_names(files):
    from sessiontree.fleet import entries_table

    big, _ = files
    t = entries_table([str(big)], index_cache=False)
    assert t.column("type").to_pylist()[: 2 * N] == [f"x{k}" for k in range(N)] + ["message"] * N
    assert t.column("role").to_pylist()[N : 2 * N] == [f"role{k}" for k in range(N)]


def test_names_past_the_table_behave_as_in_a_small_file(files):
    big, small = files
    want = _answers(Session.open(small, index_cache=False), list(range(2 * TAIL + 1)))
    pick = [*range(N - TAIL, N), *range(2 * N - TAIL, 2 * N + 1)]
    got = _answers(Session.open(big, index_cache=False), pick)
    assert got["types"] == want["types"] and got["roles"] == want["roles"]
    assert got["types"][0] == f"x{N - TAIL}" and got["roles"][-2] == f"role{N - 1}"
    assert got["context"] == want["context"]
    assert got["tree"][1:] == want["tree"][1:]  # (the small file's first entry is its root)
    assert got["validate"] == want["validate"] == []


def test_the_saved_index_restores_the_same_names(files, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    big, _ = files
    cold = Session.open(big, index_cache=False)
    first = Session.open(big)
    assert first.index_cache_state()[0] == "saved", first.index_cache_state()
    warm = Session.open(big)
    assert warm.index_cache_state()[0] == "warm", warm.index_cache_state()
    for s in (first, warm):
        assert [e.type for e in s.entries()] == [e.type for e in cold.entries()]
        assert [e.role for e in s.entries()] == [e.role for e in cold.entries()]
        assert s.build_context().messages == cold.build_context().messages
