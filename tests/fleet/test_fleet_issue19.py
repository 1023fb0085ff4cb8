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
