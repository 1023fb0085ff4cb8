"""A warm search (this process searched the store before: its index, segment columns, sessions
and their labels kept) answers as a cold one does, a process that never searched, after each
change between searches: an append, a label added, a new branch, a file rewritten in place at
the same size, a file replaced, a file removed (issue 29: the caches of a warm query)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sessiontree import search

from ._build import Builder

QUERIES = ["alpha", "beta", '"alpha beta"', "gamma OR delta", "alpha -gamma"]

COLD = """
import json, sys
from sessiontree import search
out = []
for q in json.loads(sys.argv[2]):
    r = search(q, sys.argv[1], limit=1000, index_cache=False)
    d = r.to_dict()
    d.pop("took_ms")
    out.append(d)
print(json.dumps(out))
"""


def _warm(store: Path, cache: Path) -> list[dict[str, Any]]:
    out = []
    for q in QUERIES:
        d = search(q, store, limit=1000, index_cache=cache).to_dict()
        d.pop("took_ms")
        out.append(json.loads(json.dumps(d)))
    return out


def _cold(store: Path) -> list[dict[str, Any]]:
    r = subprocess.run(
        [sys.executable, "-c", COLD, str(store), json.dumps(QUERIES)], capture_output=True, text=True, check=True
    )
    return list(json.loads(r.stdout))


def _unscored(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answers without scores, hits in (path, offset) order."""
    out = []
    for r in rs:
        hits = sorted(
            ({k: v for k, v in h.items() if k != "score"} for h in r["hits"]), key=lambda h: (h["path"], h["offset"])
        )
        out.append({**r, "hits": hits})
    return out


def _check(store: Path, cache: Path, step: str, deleted: bool = False) -> None:
    """``deleted``: the warm index holds deleted documents (a file indexed again), which
    Tantivy counts in BM25 statistics until their segment merges (docs/search.md): the scores,
    and so the order, may differ from a fresh index's; everything else may not."""
    warm = _warm(store, cache)
    assert warm == _warm(store, cache), step  # a second warm query: every cache used
    cold = _cold(store)
    if deleted:
        warm, cold = _unscored(warm), _unscored(cold)
    assert warm == cold, step


def test_warm_answers_equal_cold_ones_after_each_change(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    (store / "d").mkdir(parents=True)
    a = Builder(store / "a.jsonl", sid="sa")
    root = a.user("alpha beta one")
    a.assistant("gamma alpha two")
    fork = a.user("beta three")
    a.write()
    b = Builder(store / "d" / "b.jsonl", sid="sb")
    b.user("alpha delta")
    b.assistant("alpha beta gamma")
    b.write()
    _check(store, cache, "first")

    # an append (searched from the tail in this process)
    a.user("alpha beta four")
    a.append_line(a.lines[-1])
    _check(store, cache, "append")

    # a label on the root: every hit below it gains it
    a.add("label", targetId=root, label="start")
    a.append_line(a.lines[-1])
    _check(store, cache, "label")

    # a new branch from an older entry: the entries after the fork point are abandoned
    a.user("alpha beta five", parent=fork)
    a.append_line(a.lines[-1])
    _check(store, cache, "branch")

    # b rewritten in place at the same size (same inode): its entries' text changed
    data = (store / "d" / "b.jsonl").read_bytes()
    new = data.replace(b"alpha delta", b"omega delta").replace(b"alpha beta gamma", b"beta alpha gamma")
    assert len(new) == len(data)
    with open(store / "d" / "b.jsonl", "r+b") as f:
        f.write(new)
    _check(store, cache, "rewrite in place", deleted=True)

    # a replaced by another file of the same size (a new inode)
    data = (store / "a.jsonl").read_bytes()
    tmp = store / "a.tmp"
    tmp.write_bytes(data.replace(b"alpha beta one", b"gamma beta one"))
    os.replace(tmp, store / "a.jsonl")
    _check(store, cache, "replace", deleted=True)

    # b removed
    (store / "d" / "b.jsonl").unlink()
    _check(store, cache, "remove", deleted=True)
