"""Object storage: a local S3-compatible server (moto in server mode) on loopback holding the
generated sessions; ``s3://`` sources give the same rows as the local files, read into memory
with Session.from_bytes and never spilled to temporary files. Also an fsspec filesystem."""

from __future__ import annotations

import os
import tempfile

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("moto.server")

from tests.support.fleet_store import LoopbackS3, shared_store  # noqa: E402
from tests.fleet.test_fleet import WINDOW  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree.fleet import entries_table, resolve_source, session_stats  # noqa: E402

# fields that name where a row came from (the rest must be equal)
WHERE = ("path", "path_bytes", "file_modified")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server = LoopbackS3()
    root, paths = shared_store(tmp_path_factory)
    mapping = server.upload(root, paths, "sessions")
    try:
        yield server, root, paths, mapping
    finally:
        server.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def no_temp_files(monkeypatch, tmp_path):
    """Any temporary file or directory made meanwhile fails the test."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    def refuse(*a, **k):
        raise AssertionError("a temporary file was made")

    for name in (
        "mkstemp",
        "mkdtemp",
        "NamedTemporaryFile",
        "TemporaryFile",
        "SpooledTemporaryFile",
        "TemporaryDirectory",
    ):
        monkeypatch.setattr(tempfile, name, refuse)

    def no_open(*a, **k):
        raise AssertionError("an object was opened as a file")

    monkeypatch.setattr(Session, "open", classmethod(lambda cls, *a, **k: no_open()))
    yield
    assert not any(tmp.iterdir())


def _strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in WHERE}


def test_s3_source_reads_into_memory_no_temp_files(s3, no_temp_files):
    server, root, paths, mapping = s3
    table = session_stats(server.uri("sessions/--home-dev-p0--"), workers=1, context_window=WINDOW)
    got = {r["path"]: r for r in table.to_pylist()}
    assert set(got) == {u for u in mapping if "/--home-dev-p0--/" in u} and got
    assert all(r["error_kind"] is None for r in got.values())
    for url, r in got.items():
        assert r["session_id"] == Session.from_bytes(mapping[url].read_bytes()).session_id


def test_s3_rows_equal_local_rows(s3):
    server, root, paths, mapping = s3
    local = {r["path"]: r for r in session_stats(root, workers=2, context_window=WINDOW).to_pylist()}
    remote = session_stats(server.uri("sessions"), workers=2, context_window=WINDOW)
    assert remote.num_rows == len(paths)
    for r in remote.to_pylist():
        want = local[str(mapping[r["path"]])]
        assert _strip(r) == _strip(want), r["path"]
    # with a filesystem object and a bare URL, and a list of object URLs
    some = sorted(mapping)[:20]
    by_list = session_stats(some, filesystem=server.fs, workers=1, context_window=WINDOW).to_pylist()
    assert [r["path"] for r in by_list] == some
    assert all(_strip(r) == _strip(local[str(mapping[r["path"]])]) for r in by_list)
    assert [it.path for it in resolve_source("s3://fleet/sessions", filesystem=server.fs)] == sorted(mapping)


def test_s3_entries_equal_local(s3):
    server, root, paths, mapping = s3
    some = sorted(mapping)[::50]
    remote = entries_table(some, filesystem=server.fs, workers=1).to_pylist()
    local = entries_table([mapping[u] for u in some], workers=1).to_pylist()
    assert len(remote) == len(local) > len(some)
    back = {str(v): k for k, v in mapping.items()}
    for a, b in zip(remote, local):
        assert a["path"] == back[b["path"]]
        assert {k: v for k, v in a.items() if k not in WHERE} == {k: v for k, v in b.items() if k not in WHERE}


def test_s3_hostile_objects(s3):
    server, root, paths, mapping = s3
    with server.fs.open_output_stream("fleet/hostile/garbage.jsonl") as fh:
        fh.write(os.urandom(2048).replace(b"\n", b"x"))
    with server.fs.open_output_stream("fleet/hostile/ok.jsonl") as fh:
        fh.write(paths[0].read_bytes())
    with server.fs.open_output_stream("fleet/hostile/big.jsonl") as fh:
        fh.write(paths[0].read_bytes() * 50)
    rows = {r["path"]: r for r in session_stats(server.uri("hostile"), workers=1, max_bytes=1 << 20).to_pylist()}
    assert rows["s3://fleet/hostile/garbage.jsonl"]["error_kind"] == "not_a_session"
    assert rows["s3://fleet/hostile/ok.jsonl"]["error_kind"] is None
    big = rows["s3://fleet/hostile/big.jsonl"]
    assert big["error_kind"] in (None, "too_large")
    # a missing object named in a list is a row too
    missing = session_stats(["s3://fleet/hostile/nope.jsonl"], filesystem=server.fs, workers=1).to_pylist()
    assert missing[0]["error_kind"] == "not_found"


def test_fsspec_filesystem(tmp_path_factory, no_temp_files):
    fsspec = pytest.importorskip("fsspec")
    root, paths = shared_store(tmp_path_factory)
    mem = fsspec.filesystem("memory")
    some = paths[:30]
    for p in some:
        mem.pipe_file(f"/fleet/{p.relative_to(root).as_posix()}", p.read_bytes())
    rows = session_stats("memory://fleet", filesystem=mem, workers=1, context_window=WINDOW).to_pylist()
    assert len(rows) == len(some)
    assert all(r["error_kind"] is None and r["session_id"] for r in rows)
    assert sorted(r["session_id"] for r in rows) == sorted(Session.from_bytes(p.read_bytes()).session_id for p in some)
