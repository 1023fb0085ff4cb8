#!/usr/bin/env python3
"""Fleet speed (a script, not a timed test): rows per second per core of
``sessiontree.fleet.session_stats`` against plain Python loops over ``Session.open`` in the
same run, Ray's fixed cost and throughput with 1 and 2 workers, and memory per worker.

    python benches/fleet_bench.py --sessions 1000 [--no-ray] [--json out.json]

Loops measured over the same generated store (``tests/support/fleet_store.py``, in a temp folder):

* ``open``: ``Session.open`` per file, nothing else (the floor);
* ``naive``: ``Session.open`` and the same answers through the obvious public calls
  (``usage_totals()``, ``AutoCompactor.context_tokens()``, ``get_tree()``, ``problems``...):
  the loop a platform writes by hand;
* ``row``: the fleet's per-file function (``Session.open`` and the row) in a plain loop;
* ``engine-1`` / ``engine-2``: ``session_stats(engine="local", workers=1|2)`` (the fleet layer:
  process pool, Arrow table, sort);
* ``ray-1`` / ``ray-2``: ``session_stats(engine="ray", workers=1|2)``: Ray tasks over bundles of
  files (``sessiontree.fleet._engine.run_ray``), at most 1 and 2 in flight, warm (after a first
  job), and Ray's fixed cost (``ray.init`` and the first job).

Each timing is the best of ``--repeat`` runs. The 2-core machine is shared: ratios measured in
the same run are what to read, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "benches"))

from fleet_store import make_store  # noqa: E402
from inputs import best_of as best  # noqa: E402

from sessiontree import AutoCompactor, Session  # noqa: E402
from sessiontree.fleet import session_stats  # noqa: E402
from sessiontree.fleet._rows import Options, stats_row  # noqa: E402
from sessiontree.fleet._sources import Item  # noqa: E402
from sessiontree.usage import usage_totals_of_entries  # noqa: E402


def naive_row(p: str) -> dict:
    s = Session.open(p)
    entries = list(s.iter_entries())
    types = Counter(e.type for e in entries)
    roles = Counter(e.role for e in entries if e.type == "message")
    leaves, stack = 0, list(s.get_tree())
    while stack:
        n = stack.pop()
        leaves += not n.children
        stack.extend(n.children)
    ac = AutoCompactor(s, context_window=200_000)
    return {
        "types": types,
        "roles": roles,
        "leaves": leaves,
        "usage": s.usage_totals(),
        "summary": usage_totals_of_entries(e.raw for e in entries if e.type in ("compaction", "branch_summary")),
        "tokens": ac.context_tokens(),
        "problems": Counter(p.kind for p in s.problems),
        "name": s.session_name,
    }


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _pool_worker_rss(_: int) -> float:
    from sessiontree.fleet import _rows  # noqa: F401  (what a worker imports)

    return rss_mib()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    paths = [str(p) for p in sorted(make_store(tmp / "sessions", a.sessions))]
    n = len(paths)
    size = sum(os.path.getsize(p) for p in paths)
    opts = Options()
    res: dict = {"sessions": n, "bytes": size, "cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    # warm the page cache and imports
    for p in paths:
        Session.open(p)
    t = {}
    t["open"] = best(lambda: [Session.open(p) for p in paths], a.repeat)
    t["naive"] = best(lambda: [naive_row(p) for p in paths], a.repeat)
    t["row"] = best(lambda: [stats_row(Item(p), opts) for p in paths], a.repeat)
    t["engine-1"] = best(lambda: session_stats(tmp / "sessions", workers=1), a.repeat)
    t["engine-2"] = best(lambda: session_stats(tmp / "sessions", workers=2), a.repeat)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        res["local_worker_rss_mib"] = max(pool.map(_pool_worker_rss, range(4)))
    res["driver_rss_mib"] = rss_mib()
    if not a.no_ray:
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        res["ray_init_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        session_stats(tmp / "sessions", engine="ray", workers=2)
        res["ray_first_job_s"] = time.perf_counter() - t0
        t["ray-1"] = best(lambda: session_stats(tmp / "sessions", engine="ray", workers=1), a.repeat)
        t["ray-2"] = best(lambda: session_stats(tmp / "sessions", engine="ray", workers=2), a.repeat)

        @ray.remote
        def worker_rss() -> float:
            from sessiontree.fleet._rows import stats_rows

            stats_rows([Item(p) for p in paths[:50]], opts)
            return rss_mib()

        res["ray_worker_rss_mib"] = max(ray.get([worker_rss.remote() for _ in range(2)]))
        ray.shutdown()
    res["seconds"] = t
    res["rows_per_s"] = {k: n / v for k, v in t.items()}
    # per core: the 1-process figures are per core already; 2-process ones are halved
    res["rows_per_s_per_core"] = {k: n / v / (2 if k.endswith("-2") else 1) for k, v in t.items()}
    res["ratios"] = {
        "engine-1 / row (fleet layer over the per-file function)": t["engine-1"] / t["row"],
        "row / open (the answers over opening)": t["row"] / t["open"],
        "row / naive (the per-file function against the hand-written loop)": t["row"] / t["naive"],
        "engine-2 / engine-1": t["engine-2"] / t["engine-1"],
    }
    if "ray-1" in t:
        res["ratios"]["ray-1 / engine-1"] = t["ray-1"] / t["engine-1"]
        res["ratios"]["ray-2 / ray-1"] = t["ray-2"] / t["ray-1"]
    res["load_after"] = os.getloadavg()[0]
    print(json.dumps(res, indent=2))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
