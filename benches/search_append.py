"""Search after an append, in rounds (docs/benchmarks.md, "Search", "After an append").

    python benches/search_append.py STORE WORKDIR [--rounds 5] [--query migrate]

STORE (a store made by ``benches/search_bench.py``'s ``make_store``, e.g.
/tmp/sessiontree-bench/search64) is copied once to WORKDIR/store (never changed in place); the
index goes to WORKDIR/cache. Each round, in this one process: three warm queries, a cold scan of
1 MiB (``Session.open`` of a generated 1 MiB session, no saved index), the same 1 MiB appended
to the store's first generated session, the timed first search after it, then the file cut
back to its size (and searched once, untimed), so every round appends to the same commit.

Prints the medians (wall and CPU of this process, all threads) and the ratio issue 29 sets:
after / (warm + scan), target <= 1.5x. Run it with two builds' interpreters in turn
(interleaved) to compare them on a noisy machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GEN = Path("/work/shared/tools/gen_session.py")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path)
    ap.add_argument("work", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--query", default="migrate")
    a = ap.parse_args()
    store = a.work / "store"
    if not store.exists():
        shutil.copytree(a.store, store)
    os.environ["SESSIONTREE_INDEX_CACHE"] = str(a.work / "cache")
    from sessiontree import Session, search

    files = sorted(p for p in store.rglob("*.jsonl") if "corpus" not in p.parts)
    one = a.work / "onemb.jsonl"
    if not one.exists():
        subprocess.run(
            [sys.executable, str(GEN), "--megabytes", "1", "--seed", "99", "--out", str(one)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    body = one.read_bytes().split(b"\n", 1)[1]
    q = a.query
    search(q, store, limit=10)  # the index up to date, committed
    size = files[0].stat().st_size
    warm, warm_c, scan, scan_c, after, after_c = [], [], [], [], [], []
    total = 0
    for _ in range(a.rounds):
        for _ in range(3):
            t, c = time.perf_counter(), cpu()
            search(q, store, limit=10)
            warm.append(time.perf_counter() - t)
            warm_c.append(cpu() - c)
        t, c = time.perf_counter(), cpu()
        Session.open(one, index_cache=False)
        scan.append(time.perf_counter() - t)
        scan_c.append(cpu() - c)
        with open(files[0], "ab") as f:
            f.write(body)
        t, c = time.perf_counter(), cpu()
        total = search(q, store, limit=10).total
        after.append(time.perf_counter() - t)
        after_c.append(cpu() - c)
        os.truncate(files[0], size)
        search(q, store, limit=10)
    m = statistics.median
    print(
        f"query {q!r} ({total} hits): warm {1e3 * m(warm):.1f} ms (CPU {1e3 * m(warm_c):.1f}), "
        f"scan {1e3 * m(scan):.1f} ms (CPU {1e3 * m(scan_c):.1f}), "
        f"after {1e3 * m(after):.1f} ms, best {1e3 * min(after):.1f} (CPU {1e3 * m(after_c):.1f})"
    )
    print(
        f"after / (warm + scan): wall {m(after) / (m(warm) + m(scan)):.2f}x, "
        f"CPU {m(after_c) / (m(warm_c) + m(scan_c)):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
