"""What a ``stats`` job dispatches (issue 32): saved rows are checked in the calling process
before any worker starts, so a rerun over an unchanged store starts none and a rerun after one
file changed sends only that file; the rows travel back as plain columns and the table built
from them equals the one the per-row path built (the same Parquet values); the CLI's summary
imports no pyarrow."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from sessiontree.fleet import _engine, _rows, session_stats, stats_columns  # noqa: E402
from sessiontree.fleet._sources import resolve_source  # noqa: E402
from tests.support.fleet_store import make_store  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = Path("/work/shared/fixtures")


class _Spy:
    """Counts the pools started and the items handed to the engine."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pools: list[int] = []
        self.dispatched: list[list[str]] = []
        real_pool, real_run = _engine.worker_pool, _engine.run

        def pool(workers: int):  # type: ignore[no-untyped-def]
            self.pools.append(workers)
            return real_pool(workers)

        def run(fn, items, opts, **kw):  # type: ignore[no-untyped-def]
            self.dispatched.append([os.path.basename(it.path) for it in items])
            return real_run(fn, items, opts, **kw)

        monkeypatch.setattr(_engine, "worker_pool", pool)
        monkeypatch.setattr(_engine, "run", run)


def test_a_rerun_over_an_unchanged_store_starts_no_worker(tmp_path, monkeypatch):
    from sessiontree.index_cache import CacheSettings

    paths = make_store(tmp_path / "store", 8, seed=21)
    # small files saved too, by the workers as here: the settings travel with the job (a pool's
    # workers are forks of a fork server that may have started before this test's environment)
    cache = CacheSettings(folder=str(tmp_path / "cache"), min_bytes=0)
    _engine.shutdown_pools()  # a pool left by another test would hide a start
    spy = _Spy(monkeypatch)
    first = session_stats(tmp_path / "store", workers=2, index_cache=cache)
    assert spy.pools and len(spy.dispatched) == 1 and len(spy.dispatched[0]) == 8
    assert _engine.LAST_RUN["dispatched"] == 8 and _engine.LAST_RUN["saved"] == 0
    _engine.shutdown_pools()
    spy.pools.clear()
    spy.dispatched.clear()
    again = session_stats(tmp_path / "store", workers=2, index_cache=cache)
    assert spy.pools == [] and spy.dispatched == []  # no worker process, no task
    assert _engine.LAST_RUN["dispatched"] == 0 and _engine.LAST_RUN["saved"] == 8
    assert again.equals(first)
    assert again.equals(session_stats(tmp_path / "store", workers=1, index_cache="off"))  # warm == cold
    # one file changed: only it is sent, and its row is the cold one
    changed = paths[3]
    with open(changed, "ab") as f:
        f.write(b'{"type":"label","id":"zz000001","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z"}\n')
    spy.dispatched.clear()
    third = session_stats(tmp_path / "store", workers=2, index_cache=cache)
    assert spy.dispatched == [[changed.name]]
    assert _engine.LAST_RUN["dispatched"] == 1 and _engine.LAST_RUN["saved"] == 7
    cold = session_stats(tmp_path / "store", workers=1, index_cache="off")
    assert third.equals(cold) and not third.equals(first)
    # a bad engine is an error even when every row is saved (nothing would be dispatched)
    with pytest.raises(ValueError, match="engine must be one of"):
        session_stats(tmp_path / "store", engine="rayy", index_cache=cache)
    _engine.shutdown_pools()


def _old_table(items, opts):
    """The table as the per-row path built it before: every row a dict, one Arrow table of
    them, sorted by path (stable), ``parent_session_id`` resolved over all rows."""
    import pyarrow as pa

    from sessiontree.fleet import _resolve_parents, _table, stats_schema

    rows = _rows.stats_rows(items, opts)
    rows.sort(key=lambda r: r["path"])
    links = [
        {"path": r["path"], "session_id": r.get("session_id"), "parent_session": r.get("parent_session")} for r in rows
    ]
    _resolve_parents(links)
    for r, link in zip(rows, links):
        r["parent_session_id"] = link.get("parent_session_id")
    table = _table(rows, stats_schema())
    assert isinstance(table, pa.Table)
    return table


def _sources(tmp_path: Path) -> list[str]:
    store = tmp_path / "store"
    make_store(store, 12, seed=5)
    # a child session naming its parent (parent_session_id is resolved across the rows)
    parent = sorted(store.rglob("*.jsonl"))[0]
    child = store / "child.jsonl"
    text = parent.read_text().split("\n", 1)
    child.write_text(
        text[0].replace('"type":"session"', f'"type":"session","parentSession":"{parent}"', 1) + "\n" + text[1]
    )
    (store / "empty.jsonl").write_bytes(b"")
    (store / "not.jsonl").write_bytes(b"not json\n")
    srcs = [str(store), str(TESTS / "corpus")]
    if FIXTURES.is_dir():
        srcs.append(str(FIXTURES))
    return srcs


@pytest.mark.parametrize("workers", [1, 2])
def test_the_table_from_columns_equals_the_per_row_table(tmp_path, workers):
    srcs = _sources(tmp_path)
    items = resolve_source(srcs)
    opts = _rows.Options(index_cache="off")
    opts.row_sums = True
    old = _old_table(items, opts)
    new = session_stats(srcs, workers=workers, index_cache="off")
    assert new.schema.equals(old.schema)
    assert new.num_rows == old.num_rows > 100
    for name in old.column_names:
        assert new.column(name).equals(old.column(name)), name
    assert new.column("parent_session_id").null_count < new.num_rows  # the child found its parent
    assert set(new.column("error_kind").to_pylist()) >= {None, "empty", "not_a_session"}
    # and through Parquet (the values written, read back)
    import pyarrow.parquet as pq

    stats_columns(srcs, workers=workers, index_cache="off").write_parquet(tmp_path / "new.parquet")
    assert pq.read_table(tmp_path / "new.parquet").equals(old)
    _engine.shutdown_pools()


def test_stats_columns_hold_what_the_table_holds(tmp_path):
    srcs = _sources(tmp_path)
    cols = stats_columns(srcs, index_cache="off")
    table = session_stats(srcs, index_cache="off")
    assert cols.num_rows == table.num_rows and cols.column_names == table.column_names

    def ms(v):  # a timestamp column's value as the columns hold it
        if isinstance(v, datetime.datetime):
            return round(v.timestamp() * 1000)
        return v

    for row_a, row_b in zip(cols.to_pylist(), table.to_pylist()):
        assert row_a == {k: ms(v) for k, v in row_b.items()}


def test_the_cli_summary_imports_no_pyarrow(tmp_path):
    store = tmp_path / "store"
    make_store(store, 5, seed=9)
    code = (
        "import sys\n"
        "from sessiontree.cli import main\n"
        "rc = main(['stats', sys.argv[1], '--json', '--workers', '2'])\n"
        "print(sorted(m for m in ('pyarrow', 'numpy', 'pandas') if m in sys.modules))\n"
        "sys.exit(rc)\n"
    )
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    *summary, modules = out.stdout.strip().splitlines()  # --json: one indented document, then the list
    assert '"sessions": 5' in "\n".join(summary) and modules == "[]"
    shutil.rmtree(store)


def test_cache_settings_min_bytes_applies_to_saved_rows(tmp_path, monkeypatch):
    # CacheSettings(min_bytes=0) saves the rows of small files too (it was read for saved
    # indexes only: the rows followed $SESSIONTREE_INDEX_CACHE_MIN_BYTES, 1 MiB by default)
    from sessiontree.index_cache import CacheSettings

    monkeypatch.delenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", raising=False)
    make_store(tmp_path / "store", 4, seed=12)
    settings = CacheSettings(folder=str(tmp_path / "cache"), min_bytes=0)
    first = session_stats(tmp_path / "store", workers=1, index_cache=settings)
    assert len(list((tmp_path / "cache").glob("*.stats.row"))) == 4
    again = session_stats(tmp_path / "store", workers=1, index_cache=settings)
    assert _engine.LAST_RUN["saved"] == 4 and _engine.LAST_RUN["dispatched"] == 0
    assert again.equals(first)
