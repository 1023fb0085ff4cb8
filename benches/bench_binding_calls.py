"""The binding's fixed costs, one build against another, interleaved in one run: the import of
the extension ``sessiontree._core`` and the per-call overhead of ``Index`` methods (one from
each of the binding's files: ``py.rs``, ``py/index_reads.rs``, ``py/index_walks.rs``,
``py/index_writes.rs``), as when the methods were split over ``#[pymethods]`` blocks
(PyO3's ``multiple-pymethods``).

The builds come from ``bench_binding.build`` (``--base``, default ``main``; ``--head``, default
``HEAD``; profile ``--profile``, default ``dev-fast``). Rounds alternate a child process per
build; each child reports:

- ``import_core``: ``python -X importtime``'s self time of ``sessiontree._core`` (loading and
  initialising the extension: its classes, functions and constants), in a fresh interpreter;
- ``<method>``: ns per call of a trivial method, loop included (the same in both builds), best
  of its repeats, CPU time of the thread.

It prints the best over rounds for each build and the ratios head/base (below 1: head is
faster). Run: ``python benches/bench_binding_calls.py [--rounds N]`` from a worktree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_binding import best_of_rounds, build, child_json, print_ratios  # noqa: E402

CALLS = ("end", "cache_state", "len", "leaf", "index_of", "walk_parent", "leaf_version")

CHILD = r"""
import json, sys, time
from sessiontree._core import Index
n, reps = int(sys.argv[1]), int(sys.argv[2])
head = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
lines = [b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}\n',
         b'{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"ho"}}\n']
ix = Index.from_bytes(head + b"".join(lines))
calls = {
    "end": lambda: ix.end,                       # py.rs (a getter)
    "cache_state": ix.cache_state,               # py.rs
    "len": ix.__len__,                           # index_reads.rs (a slot)
    "leaf": ix.leaf,                             # index_reads.rs
    "index_of": lambda: ix.index_of("b"),        # index_reads.rs (one argument)
    "walk_parent": lambda: ix.walk_parent(1),    # index_walks.rs
    "leaf_version": lambda: ix.leaf_version,     # index_writes.rs (a getter)
}
def loop(f):
    t0 = time.thread_time()
    for _ in range(n):
        f()
    return time.thread_time() - t0
best = {k: min(loop(f) for _ in range(reps)) / n * 1e9 for k, f in calls.items()}
print(json.dumps(best))
"""


def import_time(site: Path) -> float:
    """``sessiontree._core``'s self time in ``-X importtime``, microseconds."""
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import sessiontree._core"],
        env=env,
        cwd=tempfile.gettempdir(),  # not the worktree: its python/ must not shadow the build
        check=True,
        capture_output=True,
        text=True,
    )
    for line in r.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "sessiontree._core":
            return float(parts[0].split(":")[-1])
    raise RuntimeError(f"no sessiontree._core in -X importtime's output:\n{r.stderr[-2000:]}")


def run_child(site: Path, n: int, reps: int) -> dict[str, float]:
    return child_json(site, CHILD, str(n), str(reps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main")
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--profile", default="dev-fast")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    sites = {"base": build(a.base, a.profile), "head": build(a.head, a.profile)}
    ops = ("import_core", *CALLS)

    def measure(site: Path) -> dict[str, float]:
        return {**run_child(site, a.calls, a.reps), "import_core": import_time(site)}

    best, load = best_of_rounds(sites, ops, a.rounds, measure)
    print(f"base {a.base}, head {a.head}, profile {a.profile}; {a.rounds} rounds (import: us; calls: ns per call)")
    print_ratios(best, ops, load, "us|ns")


if __name__ == "__main__":
    main()
