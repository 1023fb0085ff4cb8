"""``stats --parquet`` over an unchanged store does not write the same file again (issue 32:
a rerun at most 15% of the first run): the Parquet file's stamp in the index cache (its
identity, the digest of the rows, the sum of its bytes) is checked against the file, every byte
read back; any doubt and the file is written again, equal to a cold run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pq = pytest.importorskip("pyarrow.parquet")

from sessiontree import fleet  # noqa: E402
from sessiontree.fleet import stats_columns  # noqa: E402

from .test_saved_rows import _write  # noqa: E402


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    d = tmp_path / "store"
    d.mkdir()
    for k in range(3):
        _write(d / f"s{k}.jsonl", 20 + k, f"p{k}")
    return d


def _ident(p):
    st = os.stat(p)
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def test_an_unchanged_store_keeps_its_parquet_file_and_a_fresh_process_imports_no_pyarrow(store, tmp_path):
    out = tmp_path / "stats.parquet"
    stats_columns(str(store)).write_parquet(out)
    first = pq.read_table(out)
    before = _ident(out)
    stats_columns(str(store)).write_parquet(out)
    assert _ident(out) == before  # not written again
    code = (
        "import sys, json\nfrom sessiontree.fleet import stats_columns\n"
        f"stats_columns({str(store)!r}).write_parquet({str(out)!r})\n"
        "print(json.dumps('pyarrow' in sys.modules))"
    )
    got = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=os.environ)
    assert json.loads(got.stdout.strip().splitlines()[-1]) is False
    assert _ident(out) == before
    assert pq.read_table(out).equals(first)


def test_a_changed_session_rewrites_the_parquet_with_its_new_row(store, tmp_path):
    out = tmp_path / "stats.parquet"
    stats_columns(str(store)).write_parquet(out)
    before = _ident(out)
    _write(store / "s1.jsonl", 40, "p1")
    cols = stats_columns(str(store))
    cols.write_parquet(out)
    assert _ident(out) != before
    assert pq.read_table(out).equals(cols.to_arrow())
    assert pq.read_table(out).column("entries").to_pylist() == cols.column("entries")


def test_a_stamp_whose_sum_does_not_match_the_bytes_is_not_trusted(store, tmp_path):
    out = tmp_path / "stats.parquet"
    cols = stats_columns(str(store))
    cols.write_parquet(out)
    # the stamp names this file's identity and these rows, but another sum: the bytes decide
    fleet._stamp_parquet(out, cols.digest(), "0" * 32, cols._cache)
    assert not fleet._parquet_is_current(out, cols.digest(), cols._cache)
    before = _ident(out)
    cols.write_parquet(out)
    assert _ident(out) != before
    assert fleet._parquet_is_current(out, cols.digest(), cols._cache)
    assert pq.read_table(out).equals(cols.to_arrow())


def test_a_replaced_or_removed_or_linked_output_is_written_again(store, tmp_path):
    out = tmp_path / "stats.parquet"
    cols = stats_columns(str(store))
    cols.write_parquet(out)
    good = out.read_bytes()
    # same bytes, another file (new inode): its identity is not the stamped one
    out.unlink()
    out.write_bytes(good)
    assert not fleet._parquet_is_current(out, cols.digest(), cols._cache)
    # one byte changed in place (size kept)
    cols.write_parquet(out)
    assert fleet._parquet_is_current(out, cols.digest(), cols._cache)
    with open(out, "r+b") as fh:
        fh.seek(len(good) // 2)
        b = fh.read(1)
        fh.seek(len(good) // 2)
        fh.write(bytes([b[0] ^ 1]))
    assert not fleet._parquet_is_current(out, cols.digest(), cols._cache)
    cols.write_parquet(out)
    assert pq.read_table(out).equals(cols.to_arrow())
    # removed
    out.unlink()
    cols.write_parquet(out)
    assert pq.read_table(out).equals(cols.to_arrow())
    # a symbolic link to the stamped file is refused as before (never written through)
    link = tmp_path / "link.parquet"
    link.symlink_to(out)
    assert not fleet._parquet_is_current(link, cols.digest(), cols._cache)


def test_other_rows_or_the_cache_off_write_the_file(store, tmp_path, monkeypatch):
    out = tmp_path / "stats.parquet"
    cols = stats_columns(str(store))
    cols.write_parquet(out)
    other = stats_columns(str(store), max_bytes=1)  # every row too_large: other rows
    assert other.digest() != cols.digest()
    assert not fleet._parquet_is_current(out, other.digest(), other._cache)
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", "off")
    off = stats_columns(str(store))
    assert off.digest() == cols.digest()
    before = _ident(out)
    off.write_parquet(out)
    assert _ident(out) != before


def _after_stats(store, workers, arrow_soon):
    code = (
        "import sys, json\nfrom sessiontree.fleet import stats_columns, _arrow\n"
        f"cols = stats_columns({str(store)!r}, workers={workers}, arrow_soon={arrow_soon}, index_cache='off')\n"
        "_arrow.wait_for_import()\n"
        "print(json.dumps(['pyarrow.parquet' in sys.modules, cols.num_rows, cols.digest()]))"
    )
    got = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=os.environ)
    return json.loads(got.stdout.strip().splitlines()[-1])


def test_pyarrow_is_imported_while_a_pool_runs_only_when_the_table_comes_next(store):
    soon = _after_stats(store, 2, True)
    assert soon[0] is True  # imported in a thread while the workers ran
    assert _after_stats(store, 2, False)[0] is False
    here = _after_stats(store, 1, True)
    assert here[0] is False  # the work ran in this process: nothing to overlap
    assert soon[1:] == here[1:] == [3, stats_columns(str(store), index_cache="off").digest()]
