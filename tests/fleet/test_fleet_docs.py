"""Every SQL block of docs/fleet.md runs in DuckDB over Parquet written by the fleet API (and an
outcomes file from compact_sessions), and returns rows where the generated store has some."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")

from tests.support.fleet_store import shared_store  # noqa: E402

from sessiontree import CompactionSettings  # noqa: E402
from sessiontree.fleet import compact_sessions, entries_table, session_stats  # noqa: E402

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "fleet.md"
BLOCKS = re.findall(r"```sql\n(.*?)```", DOC.read_text(), re.S)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root, paths = shared_store(tmp_path_factory)
    out = tmp_path_factory.mktemp("fleet-docs")
    mine = out / "sessions"
    from sessiontree import Session

    forks = [p for p in paths if Session.open(p).header.get("parentSession")][:10]
    pick = set(paths[:40]) | set(forks) | {Path(Session.open(p).header["parentSession"]) for p in forks}
    for p in sorted(pick):
        q = mine / p.parent.name / p.name
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)
    (mine / "--home-dev-p0--" / "garbage.jsonl").write_bytes(b"\x00\x01 not a session")
    compact_sessions(
        mine,
        None,
        context_window=56_384,
        settings=CompactionSettings(keep_recent_tokens=2000),
        concurrency=2,
        outcomes=out / "outcomes.jsonl",
    )
    session_stats(mine, parquet=out / "stats.parquet", context_window=40_000)
    entries_table(mine, parquet=out / "entries.parquet")
    return out


def test_doc_has_the_questions():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_doc_sql_runs(outputs, k):
    sql = BLOCKS[k]
    for name in ("stats.parquet", "entries.parquet", "outcomes.jsonl"):
        sql = sql.replace(f"'{name}'", f"'{outputs / name}'")
    rows = duckdb.connect().sql(sql.strip().rstrip(";")).fetchall()
    assert rows, BLOCKS[k]
