"""Search scaled out: ``engine="ray"`` on the local Ray cluster (one index per shard, the query
fanned out, the pages merged) gives the local engine's hits; ``s3://`` sources (a moto server)
are searched through checked local copies: the same hits as the files searched locally, a
changed object indexed again, a deleted one never returned."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("pyarrow")
pytest.importorskip("moto.server")

from tests.support.fleet_store import LoopbackS3, make_store  # noqa: E402

from sessiontree import search  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated"
QUERIES = ["the", "file read", '"the file"', "error OR failed", "read -the", "migrat*", "bd-q3fy"]


def _key(h):
    return (h.path, h.offset, h.entry_id, h.score, h.branch_state, h.fork_point, h.labels, h.snippet, h.spans)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("searchstore")
    make_store(d / "gen", 60, seed=29)
    for p in sorted(CORPUS.glob("*.jsonl")):
        if p.stat().st_size < 2 << 20:
            shutil.copy(p, d / p.name)
    return d


@pytest.fixture(scope="module", autouse=True)
def _aws_env():
    """moto's credentials, set before the module's Ray cluster starts (its workers read objects
    with them)."""
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def s3(store, _aws_env):
    server = LoopbackS3()
    paths = sorted(store.rglob("*.jsonl"))
    mapping = server.upload(store, paths, "search")
    try:
        yield server, mapping
    finally:
        server.close()


def test_ray_engine_equals_local(_aws_env, store, ray_cluster, tmp_path):
    for q in QUERIES:
        for kw in ({}, {"limit": 5, "offset": 4}, {"limit": 200}, {"branch_state": "abandoned"}, {"role": "user"}):
            one = search(q, store, **kw)
            for shards in (None, 3):
                r = search(q, store, engine="ray", shards=shards, **kw)
                assert [_key(h) for h in r.hits] == [_key(h) for h in one.hits], (q, kw, shards)
                filters = {k: v for k, v in kw.items() if k not in ("limit", "offset")}
                full = search(q, store, limit=100000, **filters).total
                count = search(q, store, limit=0, **filters).total
                if "branch_state" in kw or kw.get("limit", 20) + kw.get("offset", 0) + 8 >= count:
                    # every candidate checked: exact
                    assert (r.total, r.next_offset) == (one.total, one.next_offset), (q, kw, shards)
                else:  # see tests/search/test_search_shards.py: a page's total is a bound
                    assert full <= r.total <= count and full <= one.total <= count, (q, kw, shards)
    # the shards' indexes are kept (in this test's cache folder): the second run indexes nothing
    cache = Path(os.environ["SESSIONTREE_INDEX_CACHE"]) / "search"
    kept = sorted(p.name for p in cache.iterdir())
    assert len(kept) >= 1 + 2 + 3  # the local store's, the default shards' (2 CPUs), 3 shards'
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("meta.json")}
    search("the", store, engine="ray", shards=3)
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("meta.json")} == before


def _with_line(body: bytes, text: str) -> bytes:
    """``body`` (a session) with a user message ``text`` (id ``zz000001``) appended."""
    last = json.loads(body.splitlines()[-1])
    line = {"type": "message", "id": "zz000001", "parentId": last["id"], "timestamp": last["timestamp"]}
    line["message"] = {"role": "user", "content": text, "timestamp": 0}
    return body + json.dumps(line).encode() + b"\n"


def test_ray_engine_sees_an_append_and_a_delete(tmp_path, ray_cluster):
    d = tmp_path / "s"
    paths = make_store(d, 12, seed=7)
    assert search("zebra_marker", d, engine="ray").total == 0
    paths[3].write_bytes(_with_line(paths[3].read_bytes(), "a zebra_marker here"))
    r = search("zebra_marker", d, engine="ray")
    assert [(h.path, h.entry_id) for h in r.hits] == [(str(paths[3]), "zz000001")]
    assert r.hits == search("zebra_marker", d).hits
    paths[3].unlink()
    assert search("zebra_marker", d, engine="ray").total == 0


def test_cli_engine_ray(store, ray_cluster):
    env = dict(os.environ, RAY_ADDRESS=_address())
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessiontree",
            "search",
            "file read",
            str(store),
            "--engine",
            "ray",
            "--json",
            "--limit",
            "5",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    one = search("file read", store, limit=5)
    assert doc["total"] == one.total and [h["entry_id"] for h in doc["hits"]] == [h.entry_id for h in one.hits]
    p = subprocess.run(
        [sys.executable, "-m", "sessiontree", "search", '"bad', str(store), "--engine", "ray"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def _address() -> str:
    import ray

    return ray.get_runtime_context().gcs_address


def _as_local(r, mapping):
    back = {url: str(p) for url, p in mapping.items()}
    return [(back.get(h.path, "?"), h.offset, h.entry_id, h.score, h.snippet) for h in r.hits]


def _local(r):
    return [(h.path, h.offset, h.entry_id, h.score, h.snippet) for h in r.hits]


def test_s3_hits_equal_the_files_searched_locally(store, s3):
    server, mapping = s3
    url = server.uri("search")
    for q in QUERIES:
        one = search(q, store, limit=50)
        r = search(q, url, limit=50)
        assert r.total == one.total, q
        # scores and entries equal; ties may order differently (copies' names vs paths)
        assert sorted(_as_local(r, mapping)) == sorted(_local(one)), q
        assert all(h.path.startswith("s3://fleet/search/") for h in r.hits)
    # warm: nothing copied again
    objects = Path(os.environ["SESSIONTREE_INDEX_CACHE"]) / "objects"
    before = {p: p.stat().st_ino for p in objects.rglob("*.jsonl")}
    assert len(before) == len(mapping)
    search("the", url)
    assert {p: p.stat().st_ino for p in objects.rglob("*.jsonl")} == before
    for p in objects.rglob("*"):
        assert p.stat().st_mode & 0o077 == 0, p
    from sessiontree import index_cache

    assert index_cache.clear() >= 2 * len(mapping)
    assert not any(objects.rglob("*.jsonl"))
    assert search("the", url).total == search("the", store).total  # copied again


def _copy_of(url: str) -> Path:
    """The local copy of the object ``url`` in this test's cache folder (by its sidecar)."""
    objects = Path(os.environ["SESSIONTREE_INDEX_CACHE"]) / "objects"
    (side,) = [p for p in objects.rglob("*.json") if json.loads(p.read_text())["url"] == url]
    return side.with_suffix(".jsonl")


def test_s3_changed_object_reindexed_deleted_never_returned(tmp_path, s3, monkeypatch):
    server, _ = s3
    d = tmp_path / "s"
    paths = make_store(d, 6, seed=3)
    mapping = server.upload(d, paths, "changing")
    url = server.uri("changing")
    assert search("okapi_marker", url).total == 0
    target = sorted(mapping)[2]
    body = _with_line(mapping[target].read_bytes(), "an okapi_marker here")
    ino = _copy_of(target).stat().st_ino
    # the object grew (an append): only the new bytes fetched, appended to the copy in place
    with server.fs.open_output_stream(target[len("s3://") :]) as fh:
        fh.write(body)
    r = search("okapi_marker", url)
    assert [h.path for h in r.hits] == [target] and "[okapi_marker]" in r.hits[0].marked()
    assert _copy_of(target).stat().st_ino == ino and _copy_of(target).read_bytes() == body
    # the same size and second, other bytes (the racy check by ETag): copied again, whole
    body2 = body.replace(b"okapi_marker", b"ocelot_mark_")
    assert len(body2) == len(body)
    with server.fs.open_output_stream(target[len("s3://") :]) as fh:
        fh.write(body2)
    assert search("okapi_marker", url).total == 0
    assert [h.path for h in search("ocelot_mark_", url).hits] == [target]
    assert _copy_of(target).stat().st_ino != ino and _copy_of(target).read_bytes() == body2
    # rewritten, not appended (the start differs): copied whole
    body3 = b" " + body2[1:]
    with server.fs.open_output_stream(target[len("s3://") :]) as fh:
        fh.write(body3 + b"\n")
    search("ocelot_mark_", url)
    assert _copy_of(target).read_bytes() == body3 + b"\n"
    server.fs.delete_file(target[len("s3://") :])
    assert search("ocelot_mark_", url).total == 0
    assert search("ocelot_mark_", url, engine="local", index_cache=False).total == 0


def test_s3_with_ray_equals_local(store, s3, ray_cluster):
    server, mapping = s3
    url = server.uri("search")
    for q in QUERIES[:4]:
        one = search(q, url, limit=30)
        r = search(q, url, engine="ray", shards=3, limit=30)
        assert r.total == one.total, q
        assert sorted((h.path, h.offset, h.score) for h in r.hits) == sorted(
            (h.path, h.offset, h.score) for h in one.hits
        )


def test_s3_object_gone_after_listing_is_skipped_unreadable_is_an_error(tmp_path, s3):
    from sessiontree.fleet._copies import Remote, copies_of
    from sessiontree.fleet._sources import SourceError, object_stats

    server, _ = s3
    d = tmp_path / "s"
    paths = make_store(d, 3, seed=11)
    mapping = server.upload(d, paths, "gone")
    url = server.uri("gone")
    remotes = [Remote(it, st, url) for it, st in object_stats(url)]
    assert len(remotes) == 3 and all(r.stat is not None and r.stat.size > 0 for r in remotes)
    gone = sorted(mapping)[1]
    server.fs.delete_file(gone[len("s3://") :])
    got = copies_of(remotes, str(tmp_path / "cache"))
    assert sorted(got.values()) == sorted(u for u in mapping if u != gone)
    # a store that stops answering between the listing and the copy: an error, not fewer hits
    other = LoopbackS3(bucket="closing")
    try:
        other.upload(d, paths, "x")
        remotes = [Remote(it, st, other.uri("x")) for it, st in object_stats(other.uri("x"))]
    finally:
        other.close()
    with pytest.raises(SourceError, match="cannot read s3://closing/x/"):
        copies_of(remotes, str(tmp_path / "cache2"))
