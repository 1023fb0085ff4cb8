"""``scrub-all`` and ``otel`` print each session's row as it is done, not all at the end: on a
store of many sessions the first line comes after one session, not after the last (issue 33).
The rows printed are the same, in the same order, as the returned rows."""

from __future__ import annotations

import json
import sys

import pytest

import sessiontree.fleet._scrub as fleet_scrub
import sessiontree.otel as otel
from sessiontree.cli import main
from sessiontree.fleet import scrub_sessions

from tests.support.secrets import GITHUB_TOKEN as TOK, SESSION_HEAD as HEAD, user_entry as _line

N = 4


@pytest.fixture
def store(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    for n in range(N):
        (d / f"{n}.jsonl").write_bytes(HEAD + _line("a", None, f"t {TOK}" if n else "clean") + b"\n")
    return d


def _stdout_when_last_starts(monkeypatch, module, name: str, last: str) -> list[str]:
    """Wraps ``module.name`` (called once per session, its first argument the item): what was
    on standard output when the call for the session ``last`` began."""
    seen: list[str] = []
    real = getattr(module, name)

    def wrapped(item, *args, **kwargs):
        if item.path.endswith(last):
            seen.append(sys.stdout.getvalue())
        return real(item, *args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return seen


def test_scrub_all_prints_each_row_before_the_last_session_runs(store, tmp_path, monkeypatch, capsys):
    seen = _stdout_when_last_starts(monkeypatch, fleet_scrub, "_scrub_one", f"{N - 1}.jsonl")
    assert main(["scrub-all", str(store), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    (before,) = seen
    assert len(before.splitlines()) == N - 1  # every earlier session's row was already printed
    rows = [json.loads(x) for x in out.splitlines()]
    want = scrub_sessions(str(store), tmp_path / "again", workers=1)
    assert [{k: v for k, v in r.items() if k != "output"} for r in rows] == [
        {k: v for k, v in r.items() if k != "output"} for r in want
    ]
    assert {r["source_format"] for r in rows} == {"pi"}  # the fleet's rows name it, the CLI's too
    assert [r["found"] for r in rows] == [0, 1, 1, 1]


def test_scrub_sessions_hands_each_row_over_as_it_is_done(store, tmp_path):
    events: list[str] = []
    rows = scrub_sessions(
        str(store),
        tmp_path / "out",
        workers=1,
        progress=lambda done, total: events.append(f"done {done}"),
        on_row=lambda row: events.append(f"row {row['path'].rsplit('/', 1)[-1]}"),
    )
    assert events == [e for n in range(N) for e in (f"row {n}.jsonl", f"done {n + 1}")]
    assert len(rows) == N


def test_otel_prints_each_row_before_the_last_session_runs(store, tmp_path, monkeypatch, capsys):
    seen = _stdout_when_last_starts(monkeypatch, otel, "_export_item", f"{N - 1}.jsonl")
    assert main(["otel", str(store), "-o", str(tmp_path / "trace.jsonl")]) == 0
    out = capsys.readouterr().out
    (before,) = seen
    assert len(before.splitlines()) == N - 1
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows == otel.export(str(store), tmp_path / "again.jsonl")


def test_convert_all_prints_each_row_before_the_last_session_runs(store, tmp_path, monkeypatch, capsys):
    import sessiontree.fleet._convert as fleet_convert
    from sessiontree.convert import convert_all

    seen = _stdout_when_last_starts(monkeypatch, fleet_convert, "convert_one", f"{N - 1}.jsonl")
    assert main(["convert-all", str(store), "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    (before,) = seen
    assert len(before.splitlines()) == N - 1  # every earlier session's row was already printed
    rows = [json.loads(x) for x in out.splitlines()]
    want = convert_all(str(store), tmp_path / "again", workers=1).rows
    assert [r["path"] for r in rows] == [w.path for w in want]
    assert [r["source_format"] for r in rows] == [w.source_format for w in want] == ["pi"] * N
    assert all(r["error"] is None for r in rows)


def test_convert_all_hands_each_row_over_as_it_is_done(store, tmp_path):
    from sessiontree.convert import convert_all

    got = []
    result = convert_all(str(store), tmp_path / "out", workers=1, on_row=got.append)
    assert got == list(result.rows) and len(got) == N


def test_otel_shows_a_bar_on_a_terminal_by_default(store, tmp_path, monkeypatch, capsys):
    # a single big session took seconds with nothing on screen unless --progress was given
    pytest.importorskip("tqdm")
    assert main(["otel", str(store), "-o", str(tmp_path / "t.jsonl")]) == 0
    assert capsys.readouterr().err == ""  # not a terminal (as under pytest): no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["otel", str(store), "-o", str(tmp_path / "t2.jsonl")]) == 0
    assert f"{N}/{N}" in capsys.readouterr().err
    assert main(["otel", str(store), "-o", str(tmp_path / "t3.jsonl"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
