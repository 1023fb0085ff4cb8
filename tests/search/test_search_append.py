"""Appends between searches: in a process that searched the store before, the appended lines
are searched from a tail index in memory (no commit) until they pass ``PENDING_MAX`` (4 MiB) in
all; a new process commits them. The hits, their scores and their order always equal those of
an index built afresh on the same files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import search

from ._build import Builder
from .test_search_property import queries, texts


def _append_user(b: Builder, text: str) -> None:
    b.user(text)
    b.append_line(b.lines[-1])


def _key(h) -> tuple:  # type: ignore[no-untyped-def]
    return (str(h.path), h.offset, h.entry_id, h.score, h.branch_state, h.snippet, tuple(map(tuple, h.spans)))


def _same_as_fresh(q: str, store: Path, cache: Path) -> int:
    warm = search(q, store, limit=1000, index_cache=cache)
    fresh = search(q, store, limit=1000, index_cache=False)
    assert warm.total == fresh.total, q
    assert sorted(map(_key, warm.hits)) == sorted(map(_key, fresh.hits)), q
    for r in (warm, fresh):
        scores = [h.score for h in r.hits]
        assert scores == sorted(scores, reverse=True), q
    return warm.total


def _meta(cache: Path) -> bytes:
    (d,) = (cache / "search").iterdir()
    return (d / "meta.json").read_bytes()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.lists(texts(), min_size=1, max_size=6),
    steps=st.lists(st.tuples(st.integers(0, 1), st.lists(texts(), min_size=1, max_size=3)), min_size=1, max_size=4),
    qs=st.lists(queries(), min_size=1, max_size=3),
)
def test_hits_after_appends_equal_a_fresh_index(first, steps, qs):
    with tempfile.TemporaryDirectory() as tmp:
        store, cache = Path(tmp) / "store", Path(tmp) / "cache"
        store.mkdir()
        bs = [Builder(store / "a.jsonl", sid="sa"), Builder(store / "b.jsonl", sid="sb")]
        for i, t in enumerate(first):
            bs[i % 2].user(t)
        for b in bs:
            b.write()
        for q, _ in qs:
            _same_as_fresh(q, store, cache)
        committed = _meta(cache)
        for which, more in steps:
            for t in more:
                _append_user(bs[which], t)
            for q, _ in qs:
                _same_as_fresh(q, store, cache)
        # small appends are searched from the tail index, never committed
        assert _meta(cache) == committed


def test_appended_lines_are_found_without_a_commit_then_committed_past_the_limit(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    store.mkdir()
    b = Builder(store / "s.jsonl")
    b.user("steady words")
    b.write()
    assert search("steady", store, index_cache=cache).total == 1
    before = _meta(cache)
    _append_user(b, "appended needle")
    r = search("needle OR steady", store, index_cache=cache)
    assert {h.entry_id for h in r.hits} == {"e0001", "e0002"}
    assert _meta(cache) == before
    # a new process commits what is pending (a process per query never indexes it twice);
    # this one's tail index is dropped, its answers unchanged
    code = "import sys; from sessiontree import search; print(search('needle', sys.argv[1], index_cache=sys.argv[2]).total)"
    out = subprocess.run([sys.executable, "-c", code, str(store), str(cache)], capture_output=True, text=True)
    assert out.stdout.strip() == "1", out.stderr
    assert _meta(cache) != before
    assert _same_as_fresh("needle OR steady", store, cache) == 2
    # more than 4 MiB pending in all: committed with the rest
    line = "filler " * 150
    with open(b.path, "a", encoding="utf-8") as f:
        for i in range(4200):
            b.user(f"{line} bulk{i}")
            f.write(json.dumps(b.lines[-1]) + "\n")
    assert os.path.getsize(b.path) > 4 << 20
    assert _same_as_fresh("needle OR bulk4199 OR steady", store, cache) == 3
    assert _meta(cache) != before
    after = _meta(cache)
    _append_user(b, "one more needle")
    assert _same_as_fresh("needle", store, cache) == 2
    assert _meta(cache) == after


def test_a_tail_file_rewritten_is_indexed_again(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    store.mkdir()
    b = Builder(store / "s.jsonl")
    b.user("alpha first")
    b.write()
    assert search("alpha", store, index_cache=cache).total == 1
    _append_user(b, "alpha tail")
    assert search("alpha", store, index_cache=cache).total == 2
    # the tail's line changed in place (same size): no stale hit from the tail index
    data = b.path.read_bytes().replace(b"alpha tail", b"omega tail")
    with open(b.path, "r+b") as f:
        f.write(data)
    os.utime(b.path, ns=(1, 1))
    assert _same_as_fresh("alpha", store, cache) == 1
    assert _same_as_fresh("omega", store, cache) == 1


def test_a_tail_file_truncated_back_is_searched_as_it_is_now(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    store.mkdir()
    b = Builder(store / "s.jsonl")
    b.user("alpha first")
    b.write()
    assert search("alpha", store, index_cache=cache).total == 1
    committed = _meta(cache)
    _append_user(b, "alpha second")
    keep = os.path.getsize(b.path)
    _append_user(b, "alpha third")
    assert _same_as_fresh("alpha", store, cache) == 3
    # the last line cut off (the file still longer than the commit covers): its hit goes
    with open(b.path, "r+b") as f:
        f.truncate(keep)
    assert _same_as_fresh("alpha", store, cache) == 2
    _append_user(b, "alpha fourth")
    assert _same_as_fresh("alpha", store, cache) == 3
    assert _meta(cache) == committed


def test_a_large_append_to_two_files_equals_a_fresh_index(tmp_path):
    """Appends of a few hundred KiB to one file and a few lines to another, in one tail
    segment (its term table grown past the first size the writer's budget gives it): hits,
    scores, snippets, totals and order equal a fresh index's; nothing is committed."""
    import random

    store, cache = tmp_path / "store", tmp_path / "cache"
    store.mkdir()
    rnd = random.Random(7)
    vocab = ["alpha", "beta", "gamma", "delta", "bd-q3fy", "src/foo_bar.rs", "CamelCase", "x" * 140, "日本語"]
    bs = [Builder(store / "a.jsonl", sid="sa"), Builder(store / "b.jsonl", sid="sb")]
    for b in bs:
        for _ in range(20):
            b.user(" ".join(rnd.choice(vocab) for _ in range(rnd.randint(1, 12))))
        b.write()
    queries = ["alpha", "gamma delta", '"beta gamma"', "camel*", "bd-q3fy", "foo_bar OR delta", "alpha -beta"]
    for q in queries:
        _same_as_fresh(q, store, cache)
    committed = _meta(cache)
    for b, n in zip(bs, (1500, 40)):
        with open(b.path, "a", encoding="utf-8") as f:
            for _ in range(n):
                b.user(" ".join(rnd.choice(vocab) for _ in range(rnd.randint(1, 40))))
                f.write(json.dumps(b.lines[-1]) + "\n")
    assert 300 << 10 < os.path.getsize(bs[0].path) < 2 << 20
    totals = [_same_as_fresh(q, store, cache) for q in queries]
    assert min(totals) > 100, totals
    assert _meta(cache) == committed
