"""Stats rows summed in the open's scan (``Session.open(_row_sums=True)``: each usage
candidate's row computed while its line is parsed, the sums kept by the index) equal the rows
of the second read (the core's ``rows.rs`` pass over the lines after the open) and the Python
rules' rows: on every corpus file, a generated store, the hostile usage lines, a file whose
last line is unterminated and then completed, bytes from storage, and through
``session_stats`` on every engine path (in process, the long-lived pool)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from sessiontree import Session  # noqa: E402
from sessiontree.fleet import _engine, _rows, session_stats  # noqa: E402
from sessiontree.fleet._sources import Item  # noqa: E402
from tests.fleet import oracle_rows  # noqa: E402
from tests.fleet.test_core_rows_parity import CORPUS, HOSTILE, _diff, _session  # noqa: E402
from tests.support.fleet_store import make_store  # noqa: E402


def _rows_both_ways(path: Path) -> tuple[dict, dict] | None:
    """(row with sums from the scan, row from a second read) of one file."""
    item = Item(str(path))
    second = _rows.Options(index_cache="off")
    in_scan = _rows.Options(index_cache="off")
    in_scan.row_sums = True
    a, b = _rows.stats_row(item, in_scan), _rows.stats_row(item, second)
    if a.get("error_kind") is not None:
        assert a == b
        return None
    return a, b


def _cols(path: Path, row_sums: bool) -> dict:
    with Session.open(path, index_cache="off", _row_sums=row_sums) as s:
        return s.fleet_columns()


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_sums_in_the_scan_equal_the_second_read_on_the_corpus(path):
    pair = _rows_both_ways(path)
    if pair is None:
        return
    got, want = pair
    assert _diff(got, want) == {}
    # and the whole core answer, undecided entries included
    assert _cols(path, True) == _cols(path, False) or _diff(_cols(path, True), _cols(path, False)) == {}


def test_sums_in_the_scan_equal_the_python_rules_on_a_generated_store(tmp_path):
    for p in make_store(tmp_path, 40, seed=31):
        got, want = _rows_both_ways(p)
        assert _diff(got, want) == {}, p
        opts = _rows.Options(index_cache="off")
        opts.row_sums = True
        item = Item(str(p))
        s, size, mtime, fmt = _rows.open_item_as(item, opts)
        try:
            oracle = oracle_rows.stats_of(s, item, size, mtime, opts)
        finally:
            s.close()
        assert fmt == got["source_format"] == "pi"  # the row names the format the open found
        oracle["source_format"] = fmt
        assert _diff(got, oracle) == {}, p


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_sums_in_the_scan_equal_the_second_read_on_hostile_usage(tmp_path, name):
    p = _session(tmp_path, name, HOSTILE[name])
    pair = _rows_both_ways(p)  # None: an error row, the same both ways (checked there)
    if pair is not None:
        got, want = pair
        assert _diff(got, want) == {}
        # the scan's parse compares keys decoded (`"us\u0061ge"` is `usage`, as in JSON.parse):
        # it leaves to the Python rules at most what the second read leaves (which refuses any
        # escaped key), and the rows are the same (above)
        assert set(_cols(p, True)["undecided"]) <= set(_cols(p, False)["undecided"])


def test_the_scan_decides_an_escaped_usage_key_as_the_python_rules_do(tmp_path):
    p = _session(tmp_path, "escaped", HOSTILE["tool_results_told_by_their_bytes"])
    assert _cols(p, True)["undecided"] == [3]  # only the line nested deeper than Python loads
    assert _cols(p, False)["undecided"] == [1, 3]
    got, want = _rows_both_ways(p)
    assert got["input_tokens"] == want["input_tokens"] == 7


def test_an_unterminated_last_line_completed_later_is_summed_once(tmp_path):
    """The last line, unterminated at the open, is summed provisionally; completed by an
    append from another writer, the refresh takes its partial sums back and sums it whole."""
    body = HOSTILE["ints_then_floats"][:2]
    p = _session(tmp_path, "torn", body)
    text = p.read_text()
    last = (
        '{"type":"message","id":"z","parentId":"e1","timestamp":"2026-01-01T00:01:00.000Z",'
        '"message":{"role":"assistant","content":[],"usage":{"input":40,"output":2,"cost":{"total":0.5}}}}'
    )
    cut = len(last) - 20
    p.write_text(text + last[:cut])
    with Session.open(p, index_cache="off", _row_sums=True) as s:
        before = s.fleet_columns()
        with open(p, "a") as fh:
            fh.write(last[cut:] + "\n")
        s.refresh()
        after = s.fleet_columns()
    whole = _cols(p, False)
    assert _diff(after, whole) == {}
    assert after["totals"][0] != before["totals"][0]  # the completed line's input counted once


def test_bytes_from_storage_sum_in_the_scan_too(tmp_path):
    p = make_store(tmp_path, 3, seed=5)[0]
    a = Session.from_bytes(p.read_bytes(), _row_sums=True).fleet_columns()
    b = Session.from_bytes(p.read_bytes()).fleet_columns()
    assert _diff(a, b) == {}


def test_session_stats_rows_are_the_same_in_process_and_in_the_pool(tmp_path):
    paths = make_store(tmp_path, 24, seed=11)
    inline = session_stats(tmp_path, workers=1, index_cache="off")
    pooled = session_stats(tmp_path, workers=2, index_cache="off")
    assert inline.num_rows == len(paths)
    assert inline.to_pylist() == pooled.to_pylist()
    assert inline.schema == pooled.schema
    # the pool is long-lived: a second job reuses it (no start-up), with the same rows
    again = session_stats(tmp_path, workers=2, index_cache="off")
    assert _engine.LAST_RUN["pool_start"] == 0.0
    assert again.to_pylist() == inline.to_pylist()
    assert _engine.LAST_RUN["tasks"] >= 2
