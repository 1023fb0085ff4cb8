"""``sessiontree stats SOURCE`` without ``--parquet``: a readable summary table (sessions,
entries, tokens, cost, the biggest sessions, the errors); ``--json``: the same summary."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyarrow")

from sessiontree.cli import main  # noqa: E402
from tests.fleet.test_fleet_issue19 import USAGE, _session_bytes  # noqa: E402


def _store(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "small.jsonl").write_bytes(_session_bytes(1, usage=USAGE, sid="s-small"))
    (store / "big.jsonl").write_bytes(_session_bytes(6, text="a longer text " * 20, usage=USAGE, sid="s-big"))
    (store / "garbage.jsonl").write_bytes(b"\x00\x01 not json\n")
    return store


def test_stats_without_parquet_prints_a_summary_table(tmp_path, capsys):
    store = _store(tmp_path)
    assert main(["stats", str(store), "--no-progress"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[0].startswith("sessions        3 (2 readable, 1 with errors, ")
    assert lines[1] == "entries         14"  # 1 and 6 turns of two entries
    assert lines[2] == "tokens          84 total (input 70, output 14, cache read 0, cache write 0)"
    assert lines[3] == "cost            $3.5000"
    at = lines.index("biggest sessions (by size, top 5):")
    rows = lines[at + 2 : at + 4]
    assert rows[0].endswith(str(store / "big.jsonl")) and rows[1].endswith(str(store / "small.jsonl"))
    assert "       12" in rows[0] and "$3.0000" in rows[0]
    assert "errors:" in lines and "  not_a_session: 1" in lines
    assert str(store / "garbage.jsonl") in cap.err  # named on stderr, as with --parquet
    assert not list(tmp_path.glob("**/*.parquet"))  # nothing written


def test_stats_json_is_the_summary(tmp_path, capsys):
    store = _store(tmp_path)
    assert main(["stats", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sessions"] == 3 and doc["readable"] == 2 and doc["errors"] == {"not_a_session": 1}
    assert doc["entries"] == 14 and doc["cost"] == 3.5 and doc["parquet"] is None
    assert doc["tokens"] == {"input": 70, "output": 14, "cache_read": 0, "cache_write": 0, "total": 84}
    assert [b["path"] for b in doc["biggest"]] == [str(store / "big.jsonl"), str(store / "small.jsonl")]
    assert doc["biggest"][0]["entries"] == 12 and doc["biggest"][0]["total_tokens"] == 72


def test_stats_json_token_counts_are_integers(tmp_path, capsys):
    """Token totals are counts: 70, not 70.0 (the table's float64 sums, whole, as ints)."""
    store = _store(tmp_path)
    assert main(["stats", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(type(v) is int for v in doc["tokens"].values()), doc["tokens"]
    assert all(type(b["total_tokens"]) is int for b in doc["biggest"])
