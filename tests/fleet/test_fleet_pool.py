"""The fleet's long-lived local pool (issue 32): ``scrub_sessions`` on it writes the same files
and rows as in process; a pool started in another working folder is not reused (relative
paths name other files there); a worker's batch comes back as plain columns (no pyarrow)."""

from __future__ import annotations

import os
import random

import pytest

pytest.importorskip("pyarrow")

from sessiontree.fleet import _engine, _rows, scrub_sessions, session_stats  # noqa: E402
from sessiontree.fleet._sources import Item  # noqa: E402
from tests.support.fleet_store import make_store  # noqa: E402
from tests.support.secrets import SECRETS  # noqa: E402

# a format-valid key from the labelled scrub set (seeded, synthetic)
SECRET = SECRETS["github_token"](random.Random(3))[1]


def _plant(paths) -> int:
    """A secret in every third session's first string content (so the scrub has something to
    find); returns how many were planted."""
    n = 0
    for p in paths[::3]:
        text = p.read_text()
        if '"content":"' in text:
            p.write_text(text.replace('"content":"', f'"content":"{SECRET} ', 1))
            n += 1
    return n


def test_scrub_all_in_the_pool_writes_what_it_writes_in_process(tmp_path):
    paths = make_store(tmp_path / "store", 30, seed=8)
    planted = _plant(paths)
    one = scrub_sessions(tmp_path / "store", tmp_path / "one", workers=1)
    two = scrub_sessions(tmp_path / "store", tmp_path / "two", workers=2)
    assert len(one) == len(two) == 30
    assert _engine.LAST_RUN["workers"] == 2 and _engine.LAST_RUN["tasks"] >= 2
    strip = lambda rows, d: [{**r, "output": os.path.relpath(r["output"], d)} for r in rows]  # noqa: E731
    assert strip(one, tmp_path / "one") == strip(two, tmp_path / "two")
    assert planted >= 5 and sum(r["found"] for r in one) >= planted
    for r in one:
        rel = os.path.relpath(r["output"], tmp_path / "one")
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()
        assert SECRET.encode() not in (tmp_path / "two" / rel).read_bytes()


def test_a_pool_started_in_another_folder_is_not_reused(tmp_path, monkeypatch):
    paths = make_store(tmp_path / "a", 6, seed=2)
    monkeypatch.chdir(tmp_path / "a")
    rel = [os.path.relpath(p, tmp_path / "a") for p in paths]
    first = session_stats(rel, workers=2, index_cache="off")
    assert first.column("error_kind").null_count == 6
    other = tmp_path / "b"
    other.mkdir()
    monkeypatch.chdir(other)  # the same relative names do not exist here
    again = session_stats(rel, workers=2, index_cache="off")
    assert again.column("error_kind").to_pylist() == ["not_found"] * 6


def test_a_batch_comes_back_as_plain_columns_without_pyarrow(tmp_path):
    """A stats worker imports neither pyarrow nor numpy (~0.17 s of CPU per process): its
    batch is one list per column, the values the Arrow table then holds."""
    import subprocess
    import sys

    from sessiontree.fleet import _table, stats_schema

    paths = make_store(tmp_path, 5, seed=4)
    [(cols, links)] = _rows.stats_batch([Item(str(p)) for p in paths], _rows.Options(index_cache="off"))
    assert list(cols) == stats_schema().names and all(len(v) == 5 for v in cols.values())
    assert [link[0] for link in links] == [str(p) for p in paths]
    rows = _rows.stats_rows([Item(str(p)) for p in paths], _rows.Options(index_cache="off"))
    assert _table(rows, stats_schema()).to_pydict() == _columns_as_arrow(cols).to_pydict()
    code = (
        "import sys\n"
        "from sessiontree.fleet import _rows\n"
        "from sessiontree.fleet._sources import Item\n"
        "[(cols, links)] = _rows.stats_batch([Item(p) for p in sys.argv[1:]], _rows.Options(index_cache='off'))\n"
        "assert len(cols['path']) == len(sys.argv) - 1 and cols['entries'][0] > 0\n"
        "print(sorted(m for m in ('pyarrow', 'numpy', 'pandas') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *map(str, paths)], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def _columns_as_arrow(cols):
    from sessiontree.fleet import _columns_table, stats_schema

    return _columns_table(cols, stats_schema())


def test_the_pool_preloads_no_pyarrow():
    assert "pyarrow" not in _engine.PRELOAD and "numpy" not in _engine.PRELOAD
