"""sessiontree.fleet, local engine: session_stats and entries_table over 1,000 generated sessions
equal the answers of Session.open per file (public API oracles), written to Parquet and read
back through DuckDB; hostile stores give rows with their problems, never a failed job."""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")

from tests.support.fleet_store import shared_store  # noqa: E402

from sessiontree import AutoCompactor, Session  # noqa: E402
from sessiontree.fleet import entries_table, resolve_source, session_stats  # noqa: E402
from sessiontree.listing import session_info  # noqa: E402
from sessiontree.usage import usage_totals_of_entries  # noqa: E402

WINDOW = 30_000
N = 1000


@pytest.fixture(scope="session")
def fleet_store(tmp_path_factory) -> tuple[Path, list[Path]]:
    return shared_store(tmp_path_factory, N)


@pytest.fixture(scope="session")
def local_stats(fleet_store, tmp_path_factory):
    root, _ = fleet_store
    out = tmp_path_factory.mktemp("fleet-out") / "stats-local.parquet"
    table = session_stats(root, parquet=out, engine="local", workers=2, context_window=WINDOW)
    return table, out


def duck_arrow(con, query: str):
    """A DuckDB query's result as an Arrow table (``to_arrow_table`` in DuckDB 2, ``arrow`` before)."""
    rel = con.sql(query)
    fn = getattr(rel, "to_arrow_table", None) or rel.arrow
    return fn()


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _oracle(path: Path) -> dict:
    """What Session.open and the other public APIs say about one file."""
    s = Session.open(path)
    entries = list(s.iter_entries())
    types = Counter(e.type for e in entries)
    roles = Counter(e.role for e in entries if e.type == "message")
    tool_calls = sum(
        1
        for e in entries
        if e.type == "message" and e.role == "assistant"
        for b in (e.raw["message"].get("content") or [])
        if isinstance(b, dict) and b.get("type") == "toolCall"
    )
    leaves = 0
    stack = list(s.get_tree())
    while stack:
        n = stack.pop()
        if not n.children:
            leaves += 1
        stack.extend(n.children)
    usage = s.usage_totals()
    summary = usage_totals_of_entries(e.raw for e in entries if e.type in ("compaction", "branch_summary"))
    ac = AutoCompactor(s, context_window=WINDOW)
    info = session_info(path)
    return {
        "session_id": s.session_id,
        "cwd": s.cwd,
        "parent_session": s.header.get("parentSession"),
        "name": s.session_name,
        "entries": len(s),
        "distinct_ids": s.entry_count(),
        "messages": types["message"],
        "messages_user": roles["user"],
        "messages_assistant": roles["assistant"],
        "messages_tool_result": roles["toolResult"],
        "messages_bash_execution": roles["bashExecution"],
        "messages_custom": roles["custom"],
        "tool_calls": tool_calls,
        "compactions": types["compaction"],
        "branch_summaries": types["branch_summary"],
        "labels": len(s.labels),
        "leaves": leaves,
        "leaf_id": s.leaf_id,
        "active_path_length": len(s.get_branch()),
        "context_messages": len(s.build_context().messages),
        "context_tokens": float(ac.context_tokens()),
        "should_compact": ac.needs_compaction(),
        "input_tokens": float(usage.input),
        "output_tokens": float(usage.output),
        "cache_read_tokens": float(usage.cache_read),
        "cache_write_tokens": float(usage.cache_write),
        "total_tokens": float(usage.total),
        "cost": float(usage.cost),
        "summary_tokens": float(summary.total),
        "summary_cost": float(summary.cost),
        "problems": len(s.problems),
        "bytes": path.stat().st_size,
        "created": int(info.created.timestamp() * 1000),
        "modified": int(info.modified.timestamp() * 1000),
    }


def test_sources_directory_glob_list(fleet_store):
    root, paths = fleet_store
    want = sorted(str(p) for p in paths)
    assert [it.path for it in resolve_source(root)] == want
    assert [it.path for it in resolve_source(str(root / "*" / "*.jsonl"))] == want
    assert [it.path for it in resolve_source(str(root / "**" / "*.jsonl"))] == want
    assert [it.path for it in resolve_source(list(reversed(paths[:10])))] == sorted(str(p) for p in paths[:10])


def test_stats_equal_session_open_per_file(fleet_store, local_stats):
    root, paths = fleet_store
    table, out = local_stats
    rows = {r["path"]: r for r in table.to_pylist()}
    assert len(rows) == N and table.schema == session_stats.__globals__["stats_schema"]()
    assert all(r["error_kind"] is None and r["context_error"] is None for r in rows.values())
    mismatches = []
    for p in paths:
        r = rows[str(p)]
        for k, v in _oracle(p).items():
            got = r[k]
            if k in ("created", "modified"):
                got = int(got.timestamp() * 1000)
            if not _same(got, v):
                mismatches.append((str(p), k, got, v))
    assert not mismatches, mismatches[:10]
    # the generated store is varied enough for the fields to mean something
    assert sum(r["should_compact"] for r in rows.values()) not in (0, N)
    assert any(r["compactions"] for r in rows.values()) and any(r["leaves"] > 1 for r in rows.values())
    assert any(r["name"] for r in rows.values())


def test_parent_session_ids_resolve(fleet_store, local_stats):
    table, _ = local_stats
    rows = table.to_pylist()
    by_path = {r["path"]: r["session_id"] for r in rows}
    forks = [r for r in rows if r["parent_session"]]
    assert len(forks) == N // 25 - 0 or len(forks) >= N // 25 - 1
    for r in forks:
        assert r["parent_session_id"] == by_path[r["parent_session"]]
    assert all(r["parent_session_id"] is None for r in rows if not r["parent_session"])


def test_parquet_through_duckdb(local_stats):
    table, out = local_stats
    con = duckdb.connect()
    n, cost, over = con.sql(
        f"SELECT count(*), sum(cost), count(*) FILTER (WHERE should_compact) FROM read_parquet('{out}')"
    ).fetchall()[0]
    assert n == N
    assert cost == pytest.approx(sum(table.column("cost").to_pylist()))
    assert over == sum(table.column("should_compact").to_pylist())
    # the Parquet holds exactly the table
    back = duck_arrow(con, f"SELECT * FROM read_parquet('{out}') ORDER BY path")
    assert back.to_pylist() == table.to_pylist()


def test_local_engine_same_rows_inline_and_pool(fleet_store, local_stats):
    root, paths = fleet_store
    table, _ = local_stats
    inline = session_stats(paths[:300], workers=1, context_window=WINDOW)
    pooled = table.filter(pa.compute.is_in(table.column("path"), pa.array(sorted(str(p) for p in paths[:300]))))
    # parent ids resolve only among the rows given: compare the rest
    drop = ["parent_session_id"]
    assert inline.drop(drop).to_pylist() == pooled.drop(drop).to_pylist()


def test_entries_table_equals_session_open(fleet_store):
    root, paths = fleet_store
    some = paths[::20]
    table = entries_table(some, workers=2)
    rows = table.to_pylist()
    assert [r["path"] for r in rows] == sorted(r["path"] for r in rows)
    by_file: dict[str, list] = {}
    for r in rows:
        by_file.setdefault(r["path"], []).append(r)
    for p in some:
        s = Session.open(p)
        got = by_file[str(p)]
        entries = list(s.iter_entries())
        assert len(got) == len(entries)
        on_path = {e.id for e in s.get_branch()}
        labels = s.labels
        for r, e in zip(got, entries):
            assert (r["entry_id"], r["parent_id"], r["type"], r["role"], r["line"]) == (
                e.id,
                e.parent_id,
                e.type,
                e.role,
                e.line,
            )
            assert r["session_id"] == s.session_id
            assert r["on_active_path"] == (e.id in on_path)
            assert r["label"] == labels.get(e.id)
            assert r["bytes"] == len(s._core.line(e._i if hasattr(e, "_i") else r["entry_index"]))
            if e.type == "message" and e.role == "assistant":
                u = usage_totals_of_entries([e.raw])
                assert (r["input_tokens"], r["cost"]) == (float(u.input), float(u.cost))
            assert r["tokens"] is not None and r["tokens"] >= 0
    # the summed entry usage is the session usage
    stats = {r["path"]: r for r in session_stats(some, workers=1).to_pylist()}
    con = duckdb.connect()
    con.register("entries", table)
    for path, total in con.sql("SELECT path, sum(input_tokens) FROM entries GROUP BY path").fetchall():
        assert total == stats[path]["input_tokens"]


def _hostile_store(root: Path, paths: list[Path]) -> dict[str, str]:
    """Returns {path: expected error_kind or None}."""
    root.mkdir(parents=True)
    d = root / "--home-dev-hostile--"
    d.mkdir()
    want: dict[str, str | None] = {}
    for p in paths[:5]:
        q = d / p.name
        q.write_bytes(p.read_bytes())
        want[str(q)] = None
    good = paths[0].read_bytes()
    damaged = d / "damaged.jsonl"
    lines = good.split(b"\n")
    damaged.write_bytes(
        b"\n".join(lines[:3] + [b'{"type":"message","id":"zz",broken', b"\xff\xfe garbage"] + lines[3:-1])
        + b'{"type":"message","id":"torn"'
    )
    want[str(damaged)] = None
    big = d / "huge.jsonl"  # a 1 GiB file (sparse: NUL bytes, no disk use) among small ones
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)
    want[str(big)] = "not_a_session"
    (d / "loop-a.jsonl").symlink_to(d / "loop-b.jsonl")
    (d / "loop-b.jsonl").symlink_to(d / "loop-a.jsonl")
    want[str(d / "loop-a.jsonl")] = want[str(d / "loop-b.jsonl")] = "unreadable"
    (d / "zero.jsonl").symlink_to("/dev/zero")  # endless bytes: never read
    want[str(d / "zero.jsonl")] = "not_a_file"
    (d / "dangling.jsonl").symlink_to(d / "nowhere.jsonl")
    want[str(d / "dangling.jsonl")] = "not_found"
    (d / "folder.jsonl").mkdir()  # a directory named like a session (and a loop of dirs under it)
    (d / "folder.jsonl" / "inner").symlink_to(d)
    want[str(d / "folder.jsonl")] = "not_a_file"
    os.mkfifo(d / "pipe.jsonl")  # opening it for reading would block forever
    want[str(d / "pipe.jsonl")] = "not_a_file"
    (d / "dirloop").symlink_to(root)  # never followed
    (d / "empty.jsonl").write_bytes(b"")
    want[str(d / "empty.jsonl")] = "empty"  # no invented session (issue 19, item 22)
    (d / "binary.jsonl").write_bytes(os.urandom(4096).replace(b"\n", b"x"))
    want[str(d / "binary.jsonl")] = "not_a_session"
    cyc = d / "cycle.jsonl"
    cyc.write_bytes(
        lines[0] + b"\n" + b'{"type":"message","id":"c1","parentId":"c2","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"message":{"role":"user","content":"a","timestamp":1}}\n'
        b'{"type":"message","id":"c2","parentId":"c1","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"b","timestamp":2}}\n'
    )
    want[str(cyc)] = None
    return want


@pytest.mark.parametrize("engine_workers", [1, 2])
def test_hostile_store_rows_not_failures(fleet_store, tmp_path, engine_workers):
    _, paths = fleet_store
    want = _hostile_store(tmp_path / "hostile", paths)
    table = session_stats(tmp_path / "hostile", workers=engine_workers)
    rows = {r["path"]: r for r in table.to_pylist()}
    assert set(rows) == set(want)
    for path, kind in want.items():
        assert rows[path]["error_kind"] == kind, (path, rows[path])
        if kind is not None:
            assert rows[path]["error"]
    d = tmp_path / "hostile" / "--home-dev-hostile--"
    damaged = rows[str(d / "damaged.jsonl")]
    assert damaged["problems_malformed_json"] >= 1 and damaged["problems_torn_last_line"] == 1
    assert damaged["problems"] == len(Session.open(d / "damaged.jsonl").problems)
    assert rows[str(d / "cycle.jsonl")]["context_error"].startswith("cycle")
    assert rows[str(d / "cycle.jsonl")]["entries"] == 2
    assert rows[str(d / "huge.jsonl")]["bytes"] is None or rows[str(d / "huge.jsonl")]["bytes"] == 1 << 30
    # over max_bytes: recorded without being read
    capped = {r["path"]: r for r in session_stats(tmp_path / "hostile", workers=1, max_bytes=1 << 20).to_pylist()}
    assert capped[str(d / "huge.jsonl")]["error_kind"] == "too_large"
    assert capped[str(d / "huge.jsonl")]["bytes"] == 1 << 30
    # the entries table survives the same store
    et = entries_table(tmp_path / "hostile", workers=engine_workers, max_bytes=1 << 20).to_pylist()
    assert {r["path"] for r in et} == set(want)  # an empty file: one row saying so
    assert {r["path"]: r["error_kind"] for r in et if r["error_kind"]}[str(d / "pipe.jsonl")] == "not_a_file"


def test_odd_json_values_do_not_break_the_tables(tmp_path):
    """Labels, names and ids that are not strings (any JSON value is possible in a file) give
    nulls in string columns, never a failed table."""
    head = b'{"type":"session","version":3,"id":"odd","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
    body = (
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}\n'
        b'{"type":"label","id":"l","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a","label":42}\n'
        b'{"type":"session_info","id":"n","parentId":"l","timestamp":"2026-01-01T00:00:03.000Z","name":["x"]}\n'
        b'{"type":"custom","id":7,"parentId":"n","timestamp":"2026-01-01T00:00:04.000Z"}\n'
        b'{"type":"message","id":"b","parentId":"n","timestamp":5,'
        b'"message":{"role":"assistant","content":[],"usage":{"input":"x"},"timestamp":1e300}}\n'
    )
    p = tmp_path / "odd.jsonl"
    p.write_bytes(head + body)
    row = session_stats([p], workers=1).to_pylist()[0]
    assert row["error_kind"] is None and row["name"] is None and row["labels"] == 1
    # Pi's sum is NaN (a usage with a non-number field): the table has null (issue 19, item 20)
    assert row["input_tokens"] is None and row["output_tokens"] is None
    assert row["modified"] is None  # message.timestamp 1e300: beyond any date
    rows = entries_table([p], workers=1).to_pylist()
    assert len(rows) == 5 and rows[0]["label"] is None and rows[3]["entry_id"] is None
