"""Search over a store as shards on Ray (``sessiontree.search(..., engine="ray")``).

The store's sessions are cut into ``shards`` by a hash of each one's path (or URL), so a
session stays in its shard from one search to the next and each shard's index is kept, in the
cache folder of the node that runs it: the node holding the files (this one, for local files;
for objects in storage, a node chosen by the shard's number, ``sessiontree/fleet/_copies.py``
keeping the copies there). A query runs in two rounds of Ray tasks, one task per shard:

1. each shard brings its index up to date with its files and gives its BM25 statistics for
   the query's terms (``search_hits.shard_stats``);
2. the statistics summed, each shard (on the node of round 1) ranks its hits with them and
   returns its first ``offset + limit`` hits and its total.

Ranked with the store's statistics, an entry scores what one index of the whole store gives it,
and the order's tie-breaks (the newer entry, then the file name's bytes, then the offset) need
nothing from other shards: the merged page equals the local engine's (``rust/src/search/shard.rs``).
``total`` is the sum of the shards' totals.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from typing import Any, Sequence

from ._copies import Remote, copies_of

__all__ = ["search_ray", "shard_of", "merge_pages"]


def shard_of(name: str, shards: int) -> int:
    """The shard (``0 <= s < shards``) of the session named ``name`` (a path or URL), stable
    across runs and machines: a hash of its bytes."""
    h = hashlib.blake2b(os.fsencode(name), digest_size=8).digest()
    return int.from_bytes(h, "big") % max(1, shards)


def rank_key(h: Any) -> tuple[float, int, bytes, int]:
    """A hit's place in the merged order, ascending: the higher score, the newer entry (an
    entry without a timestamp last), the name's bytes, the earlier line; the order of one
    index (``rust/src/search/run.rs``, ``Cand``)."""
    ts = h.timestamp_ms if h.timestamp_ms is not None else -(1 << 63)
    return (-h.score, -ts, os.fsencode(h.path), h.offset)


def merge_pages(pages: Sequence[Any], limit: int, offset: int) -> tuple[list[Any], int, int | None]:
    """The hits ``offset..offset+limit`` of the shards' pages merged (each page a
    ``SearchResult`` holding its shard's first ``offset + limit`` hits), the total (the sum),
    and the next page's offset (None: the last page)."""
    total = sum(p.total for p in pages)
    merged = sorted((h for p in pages for h in p.hits), key=rank_key)
    page = merged[offset : offset + limit]
    nxt = offset + len(page)
    return page, total, (nxt if nxt < total else None)


def _prepare(
    query: str, files: list[str], remotes: list[Remote], shard_key: str, cache: dict[str, Any]
) -> tuple[str, str, list[str], dict[str, str], str | None]:
    """Round 1 of one shard, on its node: the objects' copies brought up to date, the shard's
    index synced. Returns (node id, statistics JSON, files, {copy: URL}, a temporary folder
    to remove after round 2 or None)."""
    import ray

    from ..search_hits import shard_stats

    tmp = None
    back: dict[str, str] = {}
    if remotes:
        root = cache.get("cache_dir")
        if root is None:
            root = tmp = tempfile.mkdtemp(prefix="sessiontree-objects-")
        back = copies_of(remotes, str(root))
    every = sorted(set(files) | set(back))
    stats = shard_stats(query, every, shard_key, index_cache=cache.get("cache_dir") or False)
    return ray.get_runtime_context().get_node_id(), stats, every, back, tmp


def _query(
    query: str,
    files: list[str],
    back: dict[str, str],
    shard_key: str,
    cache: dict[str, Any],
    stats: str,
    kw: dict[str, Any],
    tmp: str | None,
) -> Any:
    """Round 2 of one shard: its hits ranked with the store's ``stats`` (an object's hit still
    names its copy: ties break on the copies' names, as in the local engine)."""
    from ..search_hits import search_files

    try:
        return search_files(query, files, shard_key, stats=stats, index_cache=cache.get("cache_dir") or False, **kw)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


_TASKS: dict[str, Any] = {}


def _task(ray: Any, fn: Any) -> Any:
    t = _TASKS.get(fn.__name__)
    if t is None:
        t = _TASKS[fn.__name__] = ray.remote(num_cpus=1)(fn)
    return t


def search_ray(
    query: str,
    files: Sequence[str],
    remotes: Sequence[Remote],
    store_key: str,
    *,
    cache: dict[str, Any],
    limit: int,
    offset: int,
    shards: int | None,
    address: str | None,
    num_cpus: int | None,
    kw: dict[str, Any],
) -> tuple[list[Any], int, int | None]:
    """The page ``offset..offset+limit`` of a search over local ``files`` and objects
    ``remotes`` as shards on Ray (see the module docs); ``cache`` the core's cache arguments
    (``index_cache.open_kwargs``: each node keeps its shards' indexes in its ``cache_dir``;
    empty: in memory), ``shards`` how many (None: the cluster's CPUs), ``kw`` the filters. Returns
    (hits, total, next_offset)."""
    from ._engine import ray_init

    ray = ray_init(address, num_cpus)
    n = shards or max(1, int(ray.cluster_resources().get("CPU", 1)))
    parts: dict[int, tuple[list[str], list[Remote]]] = {}
    for f in files:
        parts.setdefault(shard_of(f, n), ([], []))[0].append(f)
    for r in remotes:
        i = shard_of(r.item.path, n)
        # each shard keeps its objects' copies in a folder of its own (a shard prunes the
        # copies its folder holds that it no longer lists)
        parts.setdefault(i, ([], []))[1].append(replace(r, source=f"{r.source}\n#shard {i}/{n}"))
    if not parts:
        return [], 0, None
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    nodes = sorted(nd["NodeID"] for nd in ray.nodes() if nd.get("Alive"))
    prepare, run = _task(ray, _prepare), _task(ray, _query)
    keys = {i: f"{store_key}\n#shard {i}/{n}" for i in parts}
    refs = {}
    for i, (fs, rs) in sorted(parts.items()):
        node, soft = (here, False) if fs or not nodes else (nodes[i % len(nodes)], True)
        where = NodeAffinitySchedulingStrategy(node_id=node, soft=soft)
        refs[i] = prepare.options(scheduling_strategy=where).remote(query, fs, rs, keys[i], cache)
    got = {i: ray.get(ref) for i, ref in refs.items()}
    from ..search_hits import sum_stats

    stats = sum_stats([g[1] for g in got.values()])
    want = offset + limit
    qrefs = []
    for i, (node, _, every, back, tmp) in sorted(got.items()):
        where = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        qrefs.append(
            run.options(scheduling_strategy=where).remote(
                query, every, back, keys[i], cache, stats, dict(kw, limit=want, offset=0), tmp
            )
        )
    pages = ray.get(qrefs)
    back = {c: u for g in got.values() for c, u in g[3].items()}
    hits, total, nxt = merge_pages(pages, limit, offset)
    return [replace(h, path=back[h.path]) if h.path in back else h for h in hits], total, nxt
