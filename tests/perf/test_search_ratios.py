"""Search's speed as ratios measured here and now at a small size (issue 29), against the PyPI
``tantivy`` package on the same extracted text, in CPU seconds of this process (all threads;
other jobs on a shared 2-core machine inflate wall time, not CPU time), best of interleaved
rounds, with margins wide enough for that noise. The full-size wall-time figures come from
``benches/search_bench.py`` (docs/benchmarks.md, "Search")."""

from __future__ import annotations

import os
import subprocess
import shutil
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("tantivy")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benches"))
import inputs  # noqa: E402
import search_bench  # noqa: E402

from sessiontree import search  # noqa: E402
from sessiontree.index_cache import CacheSettings  # noqa: E402

QUERIES = ["error", "function", '"the file"', "return value", "config", '"an error"']


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two copies of a generated 3 MB session."""
    src = inputs.session_file(3)
    d = tmp_path_factory.mktemp("search-store")
    for k in range(2):
        shutil.copyfile(src, d / f"s{k}.jsonl")
    return d


def test_the_first_search_costs_about_what_the_package_spends_indexing(store, tmp_path):
    docs = search_bench.extracted(store)
    ours = peer = float("inf")
    for k in range(3):
        t = time.process_time()
        search("zzzunlikely", store, index_cache=CacheSettings(folder=tmp_path / f"c{k}"))
        ours = min(ours, time.process_time() - t)
        t = time.process_time()
        search_bench.peer_build(docs, tmp_path / f"p{k}")
        peer = min(peer, time.process_time() - t)
    # target at 500 MB: wall time <= 1x the package's (which does not extract); here CPU time
    # with the extraction included (measured 1.15x on 2026-12-07), a floor that catches a
    # regression to per-token allocation or a second parse per line
    assert ours <= 2.5 * peer, (ours, peer)


def test_warm_queries_cost_about_what_the_package_spends(store, tmp_path):
    import tantivy

    docs = search_bench.extracted(store)
    _, index = search_bench.peer_build(docs, tmp_path / "peer")
    assert isinstance(index, tantivy.Index)
    cache = CacheSettings(folder=tmp_path / "cache")
    for q in QUERIES:
        search(q, store, limit=10, index_cache=cache)  # warm: the index built, the sessions open
    ours = peer = float("inf")
    for _ in range(3):
        t = time.process_time()
        for q in QUERIES:
            search(q, store, limit=10, index_cache=cache)
        ours = min(ours, time.process_time() - t)
        t = time.process_time()
        for q in QUERIES:
            search_bench.peer_query(index, q)
        peer = min(peer, time.process_time() - t)
    # target at 500 MB: p95 wall time <= 1x the package's (search + snippets); here the CPU
    # time of a few queries, top 10 with snippets read back from the files and re-checked. At
    # this size a query is well under a millisecond and the fixed part (the files checked
    # against the index, the typed hits) is a large share of it: measured 1.9-2.6x on
    # 2026-12-07 after the warm-query caches (main before them: 2.5-3.2x, same runs)
    assert ours <= 4 * peer, (ours, peer)


def _child_cpu(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one child process running ``argv``."""
    import resource

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    c = cpu()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    return cpu() - c


@pytest.mark.slow
def test_a_cli_query_costs_a_bounded_multiple_of_the_packages_process(store, tmp_path):
    """Issue 29's CLI target at a small size, in CPU time: ``sessiontree search`` in a process of
    its own (warm index on disk) against a ``python -c`` that opens the package's index and
    answers the same query, top 10 with snippets; each query's best of 3 interleaved rounds."""
    docs = search_bench.extracted(store)
    search_bench.peer_build(docs, tmp_path / "peer")
    cache = tmp_path / "cache"
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(cache))
    search("error", store, index_cache=CacheSettings(folder=cache))  # the index built
    ours = peer = 0.0
    for q in QUERIES[:3]:
        o = p = float("inf")
        for _ in range(3):
            cli = [sys.executable, "-m", "sessiontree", "search", q, str(store), "--limit", "10", "--json"]
            o = min(o, _child_cpu(cli, env))
            p = min(p, _child_cpu([sys.executable, "-c", search_bench.PEER_CLI, str(tmp_path / "peer"), q], env))
        ours, peer = ours + o, peer + p
    # target: <= 1x the package's process. Not met: ours imports the package (argparse,
    # dataclasses, orjson), loads a larger extension, checks every file against the index and
    # places each hit in its session's tree, in a process that has nothing warm
    # (docs/benchmarks.md, "Search"). Measured 3.4-3.9x here on 2026-12-07; the bound catches a
    # regression to building every command's parser or importing the fleet package
    assert ours <= 6 * peer, (ours, peer)


def test_a_search_after_an_append_costs_a_bounded_multiple_of_a_warm_query_and_a_scan(store, tmp_path):
    """Issue 29's "after an append" figure at a small size, in CPU time: the first search after
    1 MiB is appended to one session (its lines searched from a tail index in memory, no
    commit) against a warm query plus a cold scan (`Session.open`) of the same 1 MiB."""
    from sessiontree import Session

    one = tmp_path / "one.jsonl"
    shutil.copyfile(inputs.session_file(1, seed=77), one)
    body = one.read_bytes().split(b"\n", 1)[1]
    target = tmp_path / "store"
    shutil.copytree(store, target)
    cache = CacheSettings(folder=tmp_path / "cache")
    path = target / "s0.jsonl"
    size = path.stat().st_size
    ratios = []
    for _ in range(3):
        search("error", target, limit=10, index_cache=cache)  # warm (commits what is pending)
        warm = float("inf")
        for _ in range(3):
            t = time.process_time()
            search("error", target, limit=10, index_cache=cache)
            warm = min(warm, time.process_time() - t)
        t = time.process_time()
        Session.open(one, index_cache=False)
        scan = time.process_time() - t
        with open(path, "ab") as f:
            f.write(body)
        t = time.process_time()
        r = search("error", target, limit=10, index_cache=cache)
        after = time.process_time() - t
        assert r.total > 0
        ratios.append(after / (warm + scan))
        os.truncate(path, size)
    # target (at 500 MB): <= 1.5x in wall time; not met: indexing the new lines costs ~30 ms of
    # CPU per MiB, about 10x a scan (docs/benchmarks.md, "Search"). Here the warm query is
    # smaller than at 64 MB, so the ratio is higher: measured 21-29x in CPU on 2026-12-07 (9-11x
    # at 64 MB). The bound catches a tail indexed twice or a whole file indexed again
    assert min(ratios) <= 45, ratios


#: The first search in a child: prints its anonymous memory (kB) before the search.
_FIRST_SEARCH = """
import sys
from sessiontree import search
from sessiontree.index_cache import CacheSettings
print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('RssAnon:')][0], flush=True)
search('zzzunlikely', sys.argv[1], index_cache=CacheSettings(folder=sys.argv[2]))
"""


def _first_search_anon_growth(store: Path, cache: Path) -> int:
    """Bytes of anonymous memory the first search (the build) added at its peak, in a child."""
    p = subprocess.Popen(
        [sys.executable, "-c", _FIRST_SEARCH, str(store), str(cache)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    before = int(p.stdout.readline())
    peak = before
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.002)
    assert p.returncode == 0
    return (peak - before) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_builds_memory_does_not_hold_the_extracted_text_waiting_for_the_indexer(tmp_path):
    """Issue 29's memory target: the build's peak is bounded by a constant (the writer's arena,
    the documents in flight), not by the store. Extraction outruns indexing, so Tantivy's own
    queue (10,000 documents whatever their size) held the text of thousands of lines at once;
    the gate (`IN_FLIGHT` in rust/src/search/store_index.rs) holds the extraction threads back."""
    store = tmp_path / "store"
    store.mkdir()
    src = inputs.session_file(3)
    for k in range(8):
        shutil.copyfile(src, store / f"s{k}.jsonl")
    size = sum(p.stat().st_size for p in store.iterdir())
    growth = min(_first_search_anon_growth(store, tmp_path / f"c{k}") for k in range(2))
    # measured on 2026-12-07 at this size (25 MB): 1.30-1.32x the store (33 MB: the arena
    # filling, the segments serialised); before the gate 2.11-2.19x (53-55 MB)
    assert growth <= 1.7 * size, (growth, size)
