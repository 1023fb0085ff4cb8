"""engine="ray" on a local Ray cluster (num_cpus=2, one ray.init for the module): the same
Parquet as the local engine row for row (checked through DuckDB) over 1,000 generated
sessions, the same entries table, hostile stores as rows, and compact_sessions through a Ray
actor pool against a loopback OpenAI-compatible server."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from tests.support.fleet_store import shared_store  # noqa: E402
from tests.fleet.test_fleet import WINDOW, _hostile_store  # noqa: E402
from tests.fleet.test_fleet_compact import FAST, SETTINGS, CountingLLM, _compactions  # noqa: E402
from tests.fleet.test_fleet_compact import WINDOW as COMPACT_WINDOW  # noqa: E402

from sessiontree.fleet import compact_sessions, entries_table, session_stats  # noqa: E402
from sessiontree.summarizers import OpenAICompatSummarizer  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return shared_store(tmp_path_factory)


def _same_rows(con, a: str, b: str) -> None:
    """``a`` and ``b`` (SQL relations) hold the same rows, in the same order by path."""
    n_a = con.sql(f"SELECT count(*) FROM {a}").fetchall()[0][0]
    n_b = con.sql(f"SELECT count(*) FROM {b}").fetchall()[0][0]
    assert n_a == n_b
    assert con.sql(f"SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})").fetchall()[0][0] == 0
    assert con.sql(f"SELECT count(*) FROM (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a})").fetchall()[0][0] == 0


def test_ray_and_local_write_the_same_parquet(ray_cluster, store, tmp_path):
    root, paths = store
    local = tmp_path / "local.parquet"
    remote = tmp_path / "ray.parquet"
    t_local = session_stats(root, parquet=local, engine="local", workers=2, context_window=WINDOW)
    t_ray = session_stats(root, parquet=remote, engine="ray", context_window=WINDOW)
    assert t_ray.num_rows == len(paths) == t_local.num_rows
    con = duckdb.connect()
    _same_rows(con, f"read_parquet('{local}')", f"read_parquet('{remote}')")
    # row for row, in the same order
    assert t_ray.to_pylist() == t_local.to_pylist()


def test_ray_entries_table_equals_local(ray_cluster, store):
    root, paths = store
    some = paths[::10]
    a = entries_table(some, engine="local", workers=2)
    b = entries_table(some, engine="ray")
    assert a.num_rows > len(some)
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b)
    _same_rows(con, "a", "b")
    assert a.to_pylist() == b.to_pylist()


def test_ray_hostile_store_rows(ray_cluster, store, tmp_path):
    _, paths = store
    want = _hostile_store(tmp_path / "hostile", paths)
    rows = {r["path"]: r for r in session_stats(tmp_path / "hostile", engine="ray").to_pylist()}
    assert {p: r["error_kind"] for p, r in rows.items()} == want


def test_ray_compact_sessions_actor_pool(ray_cluster, store, tmp_path):
    _, paths = store
    root = tmp_path / "sessions"
    mine = []
    for p in paths[40:64]:
        q = root / p.parent.name / p.name
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)
        mine.append(q)
    before = {str(p): _compactions(p) for p in mine}
    fake = CountingLLM(delay=0.05)
    try:
        summ = OpenAICompatSummarizer("fake-model", base_url=fake.openai_url, retry=FAST)
        out = compact_sessions(
            root,
            summ,
            context_window=COMPACT_WINDOW,
            settings=SETTINGS,
            concurrency=2,
            engine="ray",
            outcomes=tmp_path / "o.jsonl",
        ).to_pylist()
        again = compact_sessions(
            root, summ, context_window=COMPACT_WINDOW, settings=SETTINGS, concurrency=2, engine="ray"
        ).to_pylist()
    finally:
        fake.close()
    rows = {r["path"]: r for r in out}
    assert set(rows) == {str(p) for p in mine}
    compacted = {p for p, r in rows.items() if r["outcome"] == "compacted"}
    assert compacted and fake.max_in_flight <= 2
    for p in mine:
        assert _compactions(p) - before[str(p)] == (1 if str(p) in compacted else 0)
    for r in out:
        if r["outcome"] == "compacted":
            assert r["input_tokens"] > 0 and r["compaction_entry_id"]
    assert not any(r["outcome"] == "compacted" for r in again)


def test_ray_reads_objects_from_s3(ray_cluster, store, monkeypatch):
    """Ray workers read the objects themselves (the pyarrow filesystem travels with each task):
    the same rows as the local files."""
    pytest.importorskip("moto.server")
    from tests.support.fleet_store import LoopbackS3

    for k, v in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(k, v)
    root, paths = store
    server = LoopbackS3()
    try:
        some = paths[::20]
        mapping = server.upload(root, some, "ray")
        remote = session_stats("s3://fleet/ray", filesystem=server.fs, engine="ray", context_window=WINDOW)
    finally:
        server.close()
    local = {r["path"]: r for r in session_stats(some, workers=1, context_window=WINDOW).to_pylist()}
    rows = remote.to_pylist()
    assert [r["path"] for r in rows] == sorted(mapping)
    where = ("path", "path_bytes", "file_modified", "parent_session_id")
    for r in rows:
        want = local[str(mapping[r["path"]])]
        assert {k: v for k, v in r.items() if k not in where} == {k: v for k, v in want.items() if k not in where}


def test_a_ray_rerun_over_saved_rows_submits_no_task(ray_cluster, tmp_path, monkeypatch):
    # saved rows are checked by the driver before any task: a rerun over an unchanged store
    # submits none; one changed file is the only one sent; the rows equal a cold local run's
    from sessiontree.fleet import _engine
    from sessiontree.index_cache import CacheSettings
    from tests.support.fleet_store import make_store

    paths = make_store(tmp_path / "store", 6, seed=31)
    # small files saved too, in the workers as here (the settings travel with the job)
    cache = CacheSettings(folder=str(tmp_path / "cache"), min_bytes=0)
    sent: list[int] = []
    real = _engine.run_ray

    def counting(fn, items, opts, **kw):  # type: ignore[no-untyped-def]
        sent.append(len(items))
        return real(fn, items, opts, **kw)

    monkeypatch.setattr(_engine, "run_ray", counting)
    first = session_stats(tmp_path / "store", engine="ray", index_cache=cache)
    assert sent == [6]
    again = session_stats(tmp_path / "store", engine="ray", index_cache=cache)
    assert sent == [6] and _engine.LAST_RUN["saved"] == 6 and again.equals(first)
    with open(paths[2], "ab") as f:
        f.write(b'{"type":"label","id":"zz000002","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z"}\n')
    third = session_stats(tmp_path / "store", engine="ray", index_cache=cache)
    assert sent == [6, 1]
    assert third.equals(session_stats(tmp_path / "store", workers=1, index_cache="off"))
