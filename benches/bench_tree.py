"""``Session.get_tree()`` as a ratio to ``Session.open`` of the same file, in one run (issue 18:
at most 1.3x at 1 GiB).

For each file, interleaved rounds of: a cold ``Session.open`` (``index_cache=False``: the target is
set against the scan, and a warm open from a saved index costs well under a millisecond, so a
ratio to it is noise); a warm ``Session.open`` (reported, not compared); ``get_tree()`` on the open session (the
lazy tree: roots only, nodes and entries made on access); ``get_tree()`` then a full walk
touching every node's ``entry.id`` and ``children`` (what a caller that visits everything pays);
and the eager builder kept as the test oracle (tests/support/tree_oracle.py: a ``TreeNode`` and
an ``Entry`` per entry, what ``get_tree`` did before). Best of the rounds; the garbage
collector on, as callers run. Peak traced memory of ``get_tree()`` from ``tracemalloc`` (one
separate call).

Run: ``python benches/bench_tree.py FILE...`` (e.g. /work/bench-data/gen-{10,100,1024}MiB.jsonl),
or ``pytest benches/bench_tree.py`` (generated inputs up to SESSIONTREE_BENCH_MAX_MB).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.tree_oracle import eager_tree  # noqa: E402

from sessiontree import Session  # noqa: E402

TARGET_RATIO = 1.3


def _walk(roots) -> int:
    n = 0
    stack = list(roots)
    while stack:
        node = stack.pop()
        node.entry.id  # noqa: B018
        n += 1
        stack.extend(node.children)
    return n


def _timed(f, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    r = f(*args)
    return time.perf_counter() - t0, r


def measure(path: str, rounds: int = 3, eager: bool = True) -> dict[str, float]:
    names = ("open", "open_warm", "get_tree", "get_tree_walk", "eager")
    best = {name: float("inf") for name in names}
    s = Session.open(path)
    for _ in range(rounds):
        t, s2 = _timed(lambda: Session.open(path, index_cache=False))
        del s2
        best["open"] = min(best["open"], t)
        t, s2 = _timed(Session.open, path)
        del s2
        best["open_warm"] = min(best["open_warm"], t)
        t, roots = _timed(s.get_tree)
        best["get_tree"] = min(best["get_tree"], t)
        del roots
        t, _n = _timed(lambda: _walk(s.get_tree()))
        best["get_tree_walk"] = min(best["get_tree_walk"], t)
        if eager:
            t, roots = _timed(eager_tree, s)
            best["eager"] = min(best["eager"], t)
            del roots
        gc.collect()
    tracemalloc.start()
    roots = s.get_tree()
    best["get_tree_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    best["entries"] = len(s)
    return best


@pytest.mark.parametrize("mb", [1, 10])
def bench_get_tree_ratio(benchmark, mb):
    from inputs import session_file

    path = session_file(mb)
    r = benchmark.pedantic(measure, args=(str(path), 3), rounds=1, iterations=1)
    benchmark.extra_info.update(r)
    assert r["get_tree"] <= TARGET_RATIO * r["open"], r


if __name__ == "__main__":
    print(
        f"{'file':22} {'entries':>8} {'open':>9} {'warm':>9} {'get_tree':>9} {'ratio':>6} {'+walk':>9} {'ratio':>6}"
        f" {'eager':>9} {'ratio':>6} {'peak':>9}"
    )
    for p in sys.argv[1:]:
        r = measure(p, rounds=3 if Path(p).stat().st_size < 2**29 else 2)
        o = r["open"]
        print(
            f"{Path(p).name:22} {int(r['entries']):8d} {o * 1000:7.0f}ms {r['open_warm'] * 1000:7.2f}ms {r['get_tree'] * 1000:7.1f}ms"
            f" {r['get_tree'] / o:5.2f}x {r['get_tree_walk'] * 1000:7.0f}ms {r['get_tree_walk'] / o:5.2f}x"
            f" {r['eager'] * 1000:7.0f}ms {r['eager'] / o:5.2f}x {r['get_tree_peak_mib']:6.1f}MiB",
            flush=True,
        )
