"""Issue 19, items 13-27: the fleet jobs (``session_stats``, ``entries_table``,
``compact_sessions``, ``sessiontree stats`` and ``sessiontree compact-all``) on the stores and
runs that broke them: non-UTF-8 names, odd object keys, objects swapped after their size check,
planted symlinks, missing usage numbers, missing sources, empty files, bad lock timeouts,
resumable runs, signals, the offline summarizer's budget, and what a run reports."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

from tests.support.fleet_store import shared_store  # noqa: E402

from sessiontree import CompactionSettings, Session  # noqa: E402
from sessiontree.cli import main  # noqa: E402
from sessiontree.fleet import compact_sessions, entries_table, session_stats, write_parquet  # noqa: E402

HEAD = b'{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'


def _user(i: int, parent: str | None, text: str) -> dict:
    return {
        "type": "message",
        "id": f"u{i:06d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1767225601000 + i},
    }


def _assistant(i: int, parent: str, text: str, usage: dict | None) -> dict:
    m = {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 1767225601000 + i}
    if usage is not None:
        m["usage"] = usage
    return {
        "type": "message",
        "id": f"a{i:06d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:02.000Z",
        "message": m,
    }


def _session_bytes(turns: int, text: str = "hello", usage: dict | None = None, sid: str = "s-1") -> bytes:
    lines = [HEAD.replace(b"s-1", sid.encode())]
    parent = None
    for i in range(turns):
        u = _user(i, parent, f"{text} {i}")
        a = _assistant(i, u["id"], f"{text} answer {i}", usage)
        lines += [json.dumps(u).encode() + b"\n", json.dumps(a).encode() + b"\n"]
        parent = a["id"]
    return b"".join(lines)


USAGE = {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}


# ==== 13: non-UTF-8 file names ====


def test_non_utf8_file_names_work_everywhere(tmp_path, capsys):
    root = tmp_path / "store"
    root.mkdir()
    raw = os.fsencode(root) + b"/name-\xff\xfe.jsonl"
    with open(raw, "wb") as fh:
        fh.write(_session_bytes(3, usage=USAGE))
    (root / "plain.jsonl").write_bytes(_session_bytes(2, usage=USAGE, sid="s-2"))
    stats = session_stats(root, workers=1)
    rows = stats.to_pylist()
    assert len(rows) == 2 and all(r["error_kind"] is None for r in rows)
    odd = next(r for r in rows if r["session_id"] == "s-1")
    assert odd["path_bytes"] == raw  # the exact bytes of the name
    assert odd["path"] == os.fsdecode(root) + "/name-\\xff\\xfe.jsonl"  # readable text, one rule
    ent = entries_table(root, workers=1).to_pylist()
    assert {r["path_bytes"] for r in ent} == {raw, os.fsencode(root / "plain.jsonl")}
    out = tmp_path / "s.parquet"
    assert main(["stats", str(root), "--parquet", str(out), "--entries-parquet", str(tmp_path / "e.parquet")]) == 0
    assert pq.read_table(out).column("path_bytes").to_pylist() == stats.column("path_bytes").to_pylist()
    # compact-all handles every session (the name is kept exactly in the outcomes, too)
    outcomes = tmp_path / "outcomes.jsonl"
    assert main(["compact-all", str(root), "--context-window", "100000", "--outcomes", str(outcomes), "--json"]) == 0
    done = [json.loads(x) for x in outcomes.read_text().splitlines()]
    assert len(done) == 2
    assert {bytes.fromhex(r["path_bytes"]) for r in done} == {raw, os.fsencode(root / "plain.jsonl")}
    # a rerun reads the outcomes back (nothing final here: both under the threshold)
    assert main(["compact-all", str(root), "--context-window", "100000", "--outcomes", str(outcomes), "--json"]) == 0
    capsys.readouterr()


# ==== 18: Parquet through the package's atomic write ====


def test_parquet_never_follows_a_planted_symlink(tmp_path, monkeypatch):
    import sessiontree.session as session_mod

    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    out = tmp_path / "out.parquet"
    # the old predictable temp names, planted
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (tmp_path / f"out.parquet.{pid}.tmp").symlink_to(victim)
    calls = []
    real = session_mod.atomic_write

    def spy(path, chunks, **kw):
        calls.append(Path(path))
        return real(path, chunks, **kw)

    monkeypatch.setattr(session_mod, "atomic_write", spy)
    table = pa.table({"x": pa.array(list(range(100_000)), pa.int64())})
    write_parquet(table, out)
    assert calls == [out]
    assert victim.read_bytes() == b"precious"
    assert out.is_file() and not out.is_symlink()
    assert pq.read_table(out).column("x").to_pylist() == list(range(100_000))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.parquet")]  # no temp left


# ==== 20: missing usage numbers are null, not NaN ====


def test_missing_usage_numbers_are_null_not_nan(tmp_path):
    p = tmp_path / "partial.jsonl"
    lines = [HEAD]
    u = _user(0, None, "hi")
    a1 = _assistant(0, u["id"], "one", {"output": 5, "cost": {"total": 0.25}})  # no input
    a2 = _assistant(1, a1["id"], "two", {"input": 7, "output": 3, "cacheRead": 0, "cacheWrite": 0})
    lines += [json.dumps(e).encode() + b"\n" for e in (u, a1, a2)]
    p.write_bytes(b"".join(lines))
    q = tmp_path / "nousage.jsonl"
    q.write_bytes(_session_bytes(1, usage=None, sid="s-3"))
    stats = session_stats(tmp_path, workers=1, parquet=tmp_path / "s.parquet")
    for col in stats.column_names:
        if pa.types.is_floating(stats.schema.field(col).type):
            assert not any(isinstance(v, float) and math.isnan(v) for v in stats.column(col).to_pylist()), col
    row = {r["session_id"]: r for r in stats.to_pylist()}
    assert row["s-1"]["input_tokens"] == 7  # the numbers there are, summed (SQL's sum)
    assert row["s-1"]["output_tokens"] == 8
    assert row["s-1"]["cache_read_tokens"] == 0
    assert row["s-1"]["cost"] == 0.25
    assert row["s-1"]["total_tokens"] == 15
    # assistant messages without usage add nothing (as in Pi's sums): 0, not null
    assert row["s-3"]["input_tokens"] == 0 and row["s-3"]["cost"] == 0
    ent = {r["entry_id"]: r for r in entries_table([p], workers=1).to_pylist()}
    assert ent[a1["id"]]["input_tokens"] is None and ent[a1["id"]]["output_tokens"] == 5
    assert ent[a2["id"]]["cost"] is None and ent[a2["id"]]["input_tokens"] == 7
    con = duckdb.connect()
    total = con.execute(f"SELECT sum(total_tokens), sum(cost) FROM read_parquet('{tmp_path / 's.parquet'}')").fetchone()
    assert total == (15, 0.25)
    # the per-session API keeps Pi's arithmetic (NaN where Pi's sum is NaN)
    assert math.isnan(Session.open(p).usage_totals().input)


# ==== 21: a missing source exits 2 with one line ====


@pytest.mark.parametrize("command", ["stats", "compact-all"])
def test_missing_source_exits_2_with_one_line(tmp_path, capsys, command):
    missing = tmp_path / "no-such-dir"
    extra = ["--parquet", str(tmp_path / "x.parquet")] if command == "stats" else ["--context-window", "1000"]
    assert main([command, str(missing), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "no such" in err
    assert not (tmp_path / "x.parquet").exists()


# ==== 22: an empty .jsonl is reported as empty ====


def test_empty_file_is_reported_empty_with_no_invented_values(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "blank.jsonl").write_bytes(b"\n\n")
    (tmp_path / "ok.jsonl").write_bytes(_session_bytes(1))
    first = session_stats(tmp_path, workers=1).to_pylist()
    second = session_stats(tmp_path, workers=1).to_pylist()
    for a, b in zip(first, second):
        assert a == b  # nothing random, nothing "now"
    rows = {Path(r["path"]).name: r for r in first}
    for name in ("empty.jsonl", "blank.jsonl"):
        r = rows[name]
        assert r["error_kind"] == "empty" and r["error"]
        for col in ("session_id", "cwd", "created", "modified", "entries", "context_tokens", "input_tokens"):
            assert r[col] is None, (name, col)
    assert rows["ok.jsonl"]["error_kind"] is None
    # compact-all does not write a header into it either
    out = compact_sessions(tmp_path, None, context_window=100_000).to_pylist()
    assert {Path(r["path"]).name: r["outcome"] for r in out}["empty.jsonl"] == "empty"
    assert (tmp_path / "empty.jsonl").read_bytes() == b""


# ==== 23: compact-all --lock-timeout validated like compact ====


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "x"])
def test_compact_all_lock_timeout_validated(tmp_path, capsys, value):
    (tmp_path / "ok.jsonl").write_bytes(_session_bytes(1))
    args = ["--context-window", "1000", "--lock-timeout", value]
    assert main(["compact-all", str(tmp_path), *args]) == 2
    fleet_err = capsys.readouterr().err
    assert main(["compact", str(tmp_path / "ok.jsonl"), "--lock-timeout", value]) == 2
    single_err = capsys.readouterr().err
    assert (
        fleet_err.splitlines()[-1].split("--lock-timeout", 1)[1]
        == single_err.splitlines()[-1].split("--lock-timeout", 1)[1]
    )


# ==== 24: only a finished compaction is final ====


def test_outcomes_only_a_compaction_is_final(tmp_path_factory, tmp_path):
    _, paths = shared_store(tmp_path_factory)
    root = tmp_path / "s"
    for p in paths[:12]:
        q = root / p.parent.name / p.name
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)
    outcomes = tmp_path / "outcomes.jsonl"
    settings = CompactionSettings(keep_recent_tokens=2_000)
    first = compact_sessions(root, None, context_window=10_000_000, settings=settings, outcomes=outcomes)
    assert set(first.column("outcome").to_pylist()) == {"under_threshold"}
    assert json.loads(first.schema.metadata[b"sessiontree.skipped"]) == {}
    # the nightly rerun with a smaller window reconsiders every session
    second = compact_sessions(root, None, context_window=30_000, settings=settings, outcomes=outcomes)
    assert second.num_rows == 12
    compacted = second.column("outcome").to_pylist().count("compacted")
    assert compacted > 0
    third = compact_sessions(root, None, context_window=30_000, settings=settings, outcomes=outcomes)
    assert third.num_rows == 12 - compacted
    assert "compacted" not in third.column("outcome").to_pylist()
    assert json.loads(third.schema.metadata[b"sessiontree.skipped"]) == {"compacted": compacted}


def test_compact_all_reports_skipped(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "a.jsonl").write_bytes(_session_bytes(1))
    outcomes = tmp_path / "o.jsonl"
    row = {"path": str(store / "a.jsonl"), "outcome": "compacted"}
    outcomes.write_text(json.dumps(row) + "\n")
    assert main(["compact-all", str(store), "--context-window", "1000", "--outcomes", str(outcomes), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["sessions"] == 0 and got["skipped"] == {"compacted": 1}


# ==== 26: budget rules apply to model summarizers, not the offline one ====


def test_offline_summarizer_is_not_held_to_a_model_window(tmp_path):
    big = "word " * 60_000  # ~300,000 characters: over a 60,000-token model's output budget
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_bytes(_session_bytes(4, text=big))
    from sessiontree.summarizers import OfflineSummarizer

    settings = CompactionSettings(keep_recent_tokens=2_000)
    for name, summarizer in (("a.jsonl", None), ("b.jsonl", OfflineSummarizer())):
        out = compact_sessions([tmp_path / name], summarizer, context_window=60_000, settings=settings).to_pylist()
        assert [r["outcome"] for r in out] == ["compacted"], out


# ==== 14, 15, 16, 17: object stores ====


@pytest.fixture(scope="module")
def s3_server():
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    from tests.support.fleet_store import LoopbackS3, moto_credentials

    with moto_credentials():
        server = LoopbackS3()
        try:
            yield server
        finally:
            server.close()


def _boto(server):
    import boto3

    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{server.port}", region_name="us-east-1")


def test_s3_keys_read_exactly_as_listed(s3_server, tmp_path):
    """Empty, ``.`` and ``..`` segments are part of an S3 key: one row per object, each read by
    its own key (pyarrow.fs would refuse ``a//b`` and read ``p/../x`` as the bucket's ``x``)."""
    c = _boto(s3_server)
    keys = [
        "odd/a.jsonl",
        "odd//b.jsonl",
        "odd/./y.jsonl",
        "odd/y.jsonl",
        "x.jsonl",
        "odd/../x.jsonl",
        "odd/c/../x.jsonl",
        "odd/.",
    ]
    sid = {}
    for i, k in enumerate(keys):
        sid[k] = f"sid-{i}"
        c.put_object(Bucket=s3_server.bucket, Key=k, Body=_session_bytes(1, sid=f"sid-{i}"))
    out = tmp_path / "s.parquet"
    table = session_stats(s3_server.uri("odd"), workers=1, parquet=out)
    rows = {r["path"]: r for r in table.to_pylist()}
    listed = [k for k in keys if k.startswith("odd/") and k.endswith(".jsonl")]
    assert sorted(rows) == sorted(f"s3://fleet/{k}" for k in listed)
    for k in listed:
        r = rows[f"s3://fleet/{k}"]
        assert r["error_kind"] is None, r
        assert r["session_id"] == sid[k], k  # that object, not another
    assert pq.read_table(out).num_rows == len(listed)
    # the CLI writes its Parquet too
    assert main(["stats", s3_server.uri("odd"), "--parquet", str(tmp_path / "c.parquet")]) == 0
    # a list of object URLs with such keys, and max_bytes on them
    some = [f"s3://fleet/{k}" for k in ("odd//b.jsonl", "odd/../x.jsonl")]
    got = session_stats(some, filesystem=s3_server.fs, workers=1, max_bytes=64).to_pylist()
    assert [r["error_kind"] for r in got] == ["too_large", "too_large"]
    got = {r["path"]: r["session_id"] for r in session_stats(some, filesystem=s3_server.fs, workers=1).to_pylist()}
    assert got == {f"s3://fleet/{k}": sid[k] for k in ("odd//b.jsonl", "odd/../x.jsonl")}


def _handler_base():
    from pyarrow import fs as pafs

    class Handler(pafs.FileSystemHandler):
        """A read-only pyarrow filesystem handler; subclasses answer what a test needs."""

        def get_type_name(self):
            return "test"

        def normalize_path(self, path):
            return path

        def get_file_info(self, paths):
            return [pafs.FileInfo(p, pafs.FileType.NotFound) for p in paths]

        def get_file_info_selector(self, selector):
            return []

        def _refuse(self, *a, **k):
            raise OSError("read-only test filesystem")

        create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _refuse
        move = copy_file = open_output_stream = open_append_stream = _refuse

        def open_input_stream(self, path):
            raise FileNotFoundError(path)

        def open_input_file(self, path):
            raise FileNotFoundError(path)

        def __eq__(self, other):
            return self is other

        def __ne__(self, other):
            return self is not other

    return Handler


def _swapping(data: bytes):
    """A filesystem serving objects whose reported size (1 KiB) is not what a read gets: the
    object was swapped after its size check."""
    from pyarrow import fs as pafs

    class Swapping(_handler_base()):
        def get_file_info(self, paths):
            return [pafs.FileInfo(p, pafs.FileType.File, size=1024) for p in paths]

        def get_file_info_selector(self, selector):
            return [pafs.FileInfo(selector.base_dir + "/s.jsonl", pafs.FileType.File, size=1024)]

        def open_input_stream(self, path):
            return pa.BufferReader(data)

        open_input_file = open_input_stream

    return pafs.PyFileSystem(Swapping())


def test_max_bytes_is_enforced_on_the_bytes_read(tmp_path):
    big = _session_bytes(1) + b"x" * (26 << 20)
    fs = _swapping(big)
    rows = session_stats("mem://bucket/p", filesystem=fs, workers=1, max_bytes=1 << 20).to_pylist()
    assert [r["error_kind"] for r in rows] == ["too_large"]
    # fsspec: a size check that lies the same way
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    mem.pipe_file("/swap/s.jsonl", big)
    real_info = mem.info

    def lying_info(path, **kw):
        d = dict(real_info(path, **kw))
        d["size"] = 1024
        return d

    mem.info = lying_info
    try:
        rows = session_stats("memory://swap", filesystem=mem, workers=1, max_bytes=1 << 20).to_pylist()
    finally:
        del mem.info
        mem.rm("/swap/s.jsonl")
    assert [r["error_kind"] for r in rows] == ["too_large"]


def test_read_failures_are_reported_as_read_failures(tmp_path, capsys):
    import socket

    with socket.socket() as sock:  # a port nothing listens on: the endpoint refuses
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"s3://nobucket/p?endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1&connect_timeout=1&request_timeout=1"
    out = tmp_path / "s.parquet"
    assert main(["stats", url, "--parquet", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read s3://nobucket/p" in err and "cannot write" not in err
    assert "endpoint_override" not in err  # the query (it may hold credentials) is not echoed

    class Denied(_handler_base()):
        def get_file_info(self, paths):
            return [pafs.FileInfo(p, pafs.FileType.Directory) for p in paths]

        def get_file_info_selector(self, selector):
            raise PermissionError(13, "Access Denied", selector.base_dir)

    from pyarrow import fs as pafs

    from sessiontree.errors import SessionTreeError

    with pytest.raises(SessionTreeError, match="cannot read mem://b/p: .*Access Denied"):
        session_stats("mem://b/p", filesystem=pafs.PyFileSystem(Denied()), workers=1)
    # a write failure is one
    (tmp_path / "ok.jsonl").write_bytes(_session_bytes(1))
    assert main(["stats", str(tmp_path / "ok.jsonl"), "--parquet", str(tmp_path / "no-dir" / "s.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err


# ==== 25: SIGINT/SIGTERM on compact-all ====


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_compact_all_signal_sends_nothing_new_and_records_every_compaction(tmp_path_factory, tmp_path, signum):
    import signal
    import subprocess
    import sys
    import time

    pytest.importorskip("openai")
    from tests.fleet.test_fleet_compact import WINDOW, CountingLLM, _compactions, _copy_store

    _, paths = shared_store(tmp_path_factory)
    root = tmp_path / "sessions"
    mine = _copy_store(paths[:40], root)
    before = {str(p): _compactions(p) for p in mine}
    outcomes = tmp_path / "outcomes.jsonl"
    fake = CountingLLM(delay=1.5)
    try:
        cmd = [
            sys.executable,
            "-m",
            "sessiontree",
            "compact-all",
            str(root),
            "--context-window",
            str(WINDOW),
            "--keep-recent-tokens",
            "2000",
            "--summarizer",
            "openai",
            "--model",
            "fake-model",
            "--base-url",
            fake.openai_url,
            "--concurrency",
            "2",
            "--outcomes",
            str(outcomes),
            "--json",
        ]
        env = dict(os.environ, OPENAI_API_KEY="test-key")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(fake.requests) < 3 and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None and len(fake.requests) >= 3, "the run ended before it could be signalled"
        with fake.count_lock:
            in_flight = fake.in_flight
        sent_before = len(fake.requests)
        signalled = time.monotonic()
        proc.send_signal(getattr(signal, signum))
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        fake.close()
    assert proc.returncode == 130, (proc.returncode, err)
    assert took < 30, took  # what was in flight (1.5 s per request) finished; nothing queued ran
    # a request the run had already started sending when the signal arrived may land a moment
    # later on a loaded machine (the signal is handled when the process is next scheduled); a
    # queued one would start only when an in-flight one ends, 1.5 s on
    late = [r for r in fake.requests if r["time"] > signalled + 0.5]
    assert not late, f"{len(late)} summary requests sent after {signum}"
    assert len(fake.requests) <= sent_before + in_flight
    doc = json.loads(out)
    assert doc["interrupted"] is True
    rows = [json.loads(x) for x in outcomes.read_text().splitlines() if x.strip()]
    by_path = {r["path"]: r for r in rows}
    appended = [p for p in mine if _compactions(p) > before[str(p)]]
    assert appended, "nothing in flight was finished"
    for p in appended:  # every appended compaction is in the outcomes, with its usage
        r = by_path.get(str(p))
        assert r is not None and r["outcome"] == "compacted", (p, r)
        assert r["input_tokens"] and r["compaction_entry_id"] == Session.open(p).leaf_id
    assert doc["outcomes"].get("compacted", 0) == len(appended)
    # sessions never reached are not final: a rerun picks them up
    assert len(rows) < len(mine)


# ==== 27: progress on a terminal, a summary, --json, unreadable files named ====


def test_stats_summary_json_and_unreadable_files_named(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "ok.jsonl").write_bytes(_session_bytes(2, usage=USAGE))
    (store / "garbage.jsonl").write_bytes(b"\x00\x01 not json\n")
    (store / "empty.jsonl").write_bytes(b"")
    (store / "dir.jsonl").mkdir()
    out = tmp_path / "s.parquet"
    assert main(["stats", str(store), "--parquet", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["sessions"] == 4 and doc["readable"] == 1
    assert doc["errors"] == {"empty": 1, "not_a_file": 1, "not_a_session": 1}
    assert doc["entries"] == 4 and doc["cost"] == 1.0 and doc["parquet"] == str(out)
    for name in ("garbage.jsonl", "empty.jsonl", "dir.jsonl"):
        assert str(store / name) in cap.err
    assert str(store / "ok.jsonl") not in cap.err
    assert main(["stats", str(store), "--parquet", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("4 sessions (3 unreadable: empty 1, not_a_file 1, not_a_session 1, ")


def test_compact_all_summary_json(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    (store / "ok.jsonl").write_bytes(_session_bytes(2))
    (store / "garbage.jsonl").write_bytes(b"\x00\x01 not json\n")
    assert main(["compact-all", str(store), "--context-window", "100000", "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["sessions"] == 2 and doc["outcomes"] == {"not_a_session": 1, "under_threshold": 1}
    assert doc["errors"] == {"not_a_session": 1} and doc["skipped"] == {} and doc["summary_cost"] == 0
    assert str(store / "garbage.jsonl") in cap.err


def test_progress_bar_on_a_terminal(tmp_path):
    """On a terminal (a pty as stderr) `stats` and `compact-all` draw tqdm's bar; piped, none."""
    import pty
    import subprocess
    import sys

    store = tmp_path / "store"
    store.mkdir()
    for i in range(5):
        (store / f"s{i}.jsonl").write_bytes(_session_bytes(2, sid=f"s-{i}"))
    for cmd in (
        ["stats", str(store), "--parquet", str(tmp_path / "s.parquet")],
        ["compact-all", str(store), "--context-window", "100000"],
    ):
        master, slave = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "sessiontree", *cmd], stderr=slave, stdout=subprocess.PIPE, timeout=120
            )
            os.close(slave)
            slave = -1
            chunks = []
            while True:
                try:
                    b = os.read(master, 65536)
                except OSError:
                    break
                if not b:
                    break
                chunks.append(b)
        finally:
            if slave >= 0:
                os.close(slave)
            os.close(master)
        err = b"".join(chunks).decode("utf-8", "replace")
        assert proc.returncode == 0
        assert "5/5" in err and "100%" in err, (cmd, err)
        piped = subprocess.run([sys.executable, "-m", "sessiontree", *cmd], capture_output=True, text=True, timeout=120)
        assert piped.returncode == 0 and "5/5" not in piped.stderr


def test_a_filesystem_file_that_reads_text_is_an_unreadable_row():
    """A filesystem whose file object's read() hands back text instead of bytes (a broken or
    hostile fsspec implementation): the item's row says unreadable, the job goes on."""
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    mem.pipe_file("/textfs/s.jsonl", _session_bytes(1))
    real_open = mem.open

    class _TextFile:
        def __init__(self, fh):
            self._fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._fh.close()

        def read(self, n=-1):
            return self._fh.read(n).decode("utf-8")

    mem.open = lambda path, mode="rb", **kw: _TextFile(real_open(path, mode, **kw))
    try:
        rows = session_stats("memory://textfs", filesystem=mem, workers=1).to_pylist()
    finally:
        del mem.open
        mem.rm("/textfs/s.jsonl")
    assert [r["error_kind"] for r in rows] == ["unreadable"]
    assert "str, not bytes" in rows[0]["error"]
