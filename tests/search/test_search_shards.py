"""A store searched as shards (the protocol ``engine="ray"`` runs, here in one process): each
shard's index gives its BM25 statistics, the sums rank every shard, and the shards' pages merged
equal one index's page over the whole store: the same hits in the same order, the same scores
bit for bit, the same total. Ties (identical entries in copied files) break on the name's bytes,
then the offset, in both. The Ray run itself: tests/fleet/test_search_ray.py."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from sessiontree import search
from sessiontree.fleet._search import merge_pages, shard_of
from sessiontree.search_hits import search_files, shard_stats, sum_stats

from ._build import Builder

CORPUS = Path(__file__).resolve().parent.parent / "corpus"

QUERIES = [
    "the",
    "test",
    "file read",
    '"the file"',
    "error OR failed",
    "read -the",
    "migrat*",
    "src/foo_bar.rs",
    "bash",
    "zzzz_not_there",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The corpus's Pi sessions (without the largest), plus copies of some in a second folder
    (identical entries in two files: ties on score and time)."""
    d = tmp_path_factory.mktemp("store")
    picked = sorted(p for p in (CORPUS / "pi-generated").glob("*.jsonl") if p.stat().st_size < 2 << 20)
    for p in picked:
        shutil.copy(p, d / p.name)
    twin = d / "twin"
    twin.mkdir()
    for p in picked[::3]:
        shutil.copy(p, twin / p.name)
    b = Builder(d / "ties.jsonl")
    for _ in range(5):
        b.user("tie tie tie same words")  # each a second later than the last
    b.write()
    (d / "twin" / "ties.jsonl").write_bytes((d / "ties.jsonl").read_bytes())
    return d


def _files(d: Path) -> list[str]:
    return sorted(str(p) for p in d.rglob("*.jsonl"))


def _sharded(query: str, files: list[str], n: int, cache: Path, **kw):
    parts: dict[int, list[str]] = {}
    for f in files:
        parts.setdefault(shard_of(f, n), []).append(f)
    keys = {i: f"store\n#shard {i}/{n}" for i in parts}
    stats = sum_stats([shard_stats(query, fs, keys[i], index_cache=cache) for i, fs in parts.items()])
    limit, offset = kw.pop("limit", 20), kw.pop("offset", 0)
    pages = [
        search_files(query, fs, keys[i], stats=stats, index_cache=cache, limit=offset + limit, offset=0, **kw)
        for i, fs in parts.items()
    ]
    return merge_pages(pages, limit, offset)


def _key(h):
    return (h.path, h.offset, h.entry_id, h.score, h.branch_state, h.snippet, h.spans)


@pytest.mark.parametrize("n", [2, 5])
def test_merged_shards_equal_one_index(store, tmp_path, n):
    files = _files(store)
    assert len({shard_of(f, n) for f in files}) == n  # every shard holds files
    for q in QUERIES:
        for kw in ({}, {"limit": 7, "offset": 3}, {"limit": 1000}, {"branch_state": "active", "limit": 50}):
            one = search_files(q, files, "one", index_cache=tmp_path / "one", **kw)
            hits, total, nxt = _sharded(q, files, n, tmp_path / "shards", **dict(kw))
            assert [_key(h) for h in hits] == [_key(h) for h in one.hits], (q, kw)
            filters = {k: v for k, v in kw.items() if k not in ("limit", "offset")}
            full = search_files(q, files, "one", index_cache=tmp_path / "one", limit=100000, **filters).total
            count = search_files(q, files, "one", index_cache=tmp_path / "one", limit=0, **filters).total
            if "branch_state" in kw or kw.get("limit", 20) + kw.get("offset", 0) + 8 >= count:
                # every candidate checked: exact
                assert (total, nxt) == (one.total, one.next_offset), (q, kw)
                assert total == full, (q, kw)
            else:
                # a page's total is the index's count less the candidates that failed their
                # check among those it read (a document the index matches and the matcher
                # rejects counts until read), so it can exceed the exact count by such
                # documents, in one index as in shards
                assert full <= total <= count and full <= one.total <= count, (q, kw)


def test_ties_break_on_the_name_then_the_offset(store, tmp_path):
    files = _files(store)
    r = search_files("tie", files, "one", index_cache=tmp_path, limit=100)
    assert r.total == 10
    order = [(-h.score, -(h.timestamp_ms or 0), os.fsencode(h.path), h.offset) for h in r.hits]
    assert order == sorted(order)
    tied = [h for h in r.hits if h.path.endswith("/ties.jsonl")]
    # the same entry in two files: same score and time, the shorter name (store/ before store/twin/) first
    assert tied[0].path == str(store / "ties.jsonl") and tied[1].path == str(store / "twin" / "ties.jsonl")
    assert tied[0].score == tied[1].score and tied[0].offset == tied[1].offset


def test_statistics_sum_and_reject_damage(store, tmp_path):
    files = _files(store)
    whole = shard_stats("file read", files, "one", index_cache=tmp_path)
    halves = [
        shard_stats("file read", files[::2], "a", index_cache=tmp_path),
        shard_stats("file read", files[1::2], "b", index_cache=tmp_path),
    ]
    assert sum_stats(halves) == whole
    import json

    doc = json.loads(whole)
    assert doc["docs"] > 0 and doc["tokens"] > doc["docs"] and set(doc["terms"]) >= {"file", "read"}
    with pytest.raises(sessiontree_errors().SearchIndexError):
        sum_stats(["{not json"])
    with pytest.raises(sessiontree_errors().SearchIndexError):
        search_files("file", files, "one", stats='{"docs": "x"}', index_cache=tmp_path)
    # statistics that undercount (another process committed between the rounds) never fail
    for bad in ('{"docs": 1, "tokens": 1, "terms": {"file": 0}}', '{"docs": 0, "tokens": 0, "terms": {"file": 99999}}'):
        r = search_files("file", files, "one", stats=bad, index_cache=tmp_path)
        assert r.total == search("file", files, index_cache=tmp_path).total > 0
        assert all(math.isfinite(h.score) for h in r.hits)


def sessiontree_errors():
    import sessiontree.errors

    return sessiontree.errors
