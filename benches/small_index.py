"""The index's size and the warm open (issue 17 items 5 and the warm-open targets), ratios in one run.

    python benches/small_index.py [--sizes 10,1024] [--rounds 5] [--baseline PYTHONPATH]

Each round, for each size and each build (this checkout, and with ``--baseline`` another
checkout's ``python/`` folder, e.g. ``/work/main/python``, whose extension is already built),
runs in a fresh ``python`` process: a cold open with the cache off, a cold open that saves
the index (empty cache folder), and a warm open of the unchanged file; ``Session.open`` only
is timed (import excluded). Contenders are interleaved round by round (the machine may be
shared); the figures are best / median of the rounds. Once per size and build it records
RssAnon after a cold open (the interpreter and the package included), after a warm open, and
the saved index's size. It prints the ratios the targets are stated in: RssAnon after a cold
open over the file's size, the warm open over the cold open (both best), the warm open at
the largest size over the warm open at the smallest, the saved index over the file, and each
figure of this build over the baseline's. ``SMALL_INDEX_PYTHONPATH``: where "this" build is
imported from (default this checkout's ``python/``; e.g. a venv's ``site-packages`` holding a
release wheel). Inputs: ``$SESSIONTREE_BENCH_DATA/gen-{N}MiB.jsonl``
(default ``/work/bench-data``, made by ``tests/tools/gen_session.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(os.environ.get("SESSIONTREE_BENCH_DATA", "/work/bench-data"))
HERE = Path(__file__).resolve().parent.parent / "python"

CHILD = r"""
import json, sys, time
from sessiontree import Session
path, cache, rss = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
t = time.perf_counter()
s = Session.open(path, index_cache=False if cache == "off" else cache)
out = {"open": time.perf_counter() - t, "state": s.index_cache_state()[0], "n": len(s)}
if rss:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            out["rss"] = int(line.split()[1]) * 1024
print(json.dumps(out))
"""


def child(pypath: Path, path: Path, cache: str, rss: bool = False) -> dict:
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE_MIN_BYTES="0", PYTHONPATH=str(pypath))
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), cache, "1" if rss else "0"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,1024")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", default=None, help="another checkout's python/ folder (built)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    builds = {"this": Path(os.environ.get("SMALL_INDEX_PYTHONPATH", HERE))}
    if a.baseline:
        builds["baseline"] = Path(a.baseline)
    work = Path(tempfile.mkdtemp(prefix="small-index-"))
    res: dict = {}
    add = lambda k, v: res.setdefault(k, []).append(v)  # noqa: E731
    try:
        for r in range(a.rounds):
            for mb in sizes:
                src = DATA / f"gen-{mb}MiB.jsonl"
                for b, py in builds.items():
                    cache = work / f"c-{b}-{mb}"
                    add((b, mb, "cold"), child(py, src, "off")["open"])
                    shutil.rmtree(cache, ignore_errors=True)
                    o = child(py, src, str(cache))
                    assert o["state"] == "saved", o
                    add((b, mb, "cold+save"), o["open"])
                    o = child(py, src, str(cache))
                    assert o["state"] == "warm", o
                    add((b, mb, "warm"), o["open"])
                    if r == 0:
                        add((b, mb, "rss cold"), child(py, src, "off", rss=True)["rss"])
                        add((b, mb, "rss warm"), child(py, src, str(cache), rss=True)["rss"])
                        add((b, mb, "saved bytes"), sum(f.stat().st_size for f in cache.glob("*.stidx")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = lambda k: min(res[k])  # noqa: E731
    med = lambda k: statistics.median(res[k])  # noqa: E731
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {a.rounds} rounds; best / median")
    for b in builds:
        print(f"\n[{b}]")
        for mb in sizes:
            size = (DATA / f"gen-{mb}MiB.jsonl").stat().st_size
            for k in ("cold", "cold+save", "warm"):
                print(f"  {mb:>5} MiB {k:<10} {best((b, mb, k)) * 1e3:9.2f} / {med((b, mb, k)) * 1e3:9.2f} ms")
            rc, rw, sb = (res[(b, mb, k)][0] for k in ("rss cold", "rss warm", "saved bytes"))
            print(
                f"  {mb:>5} MiB RssAnon cold {rc / 2**20:.1f} MiB ({rc / size:.2%} of the file), warm {rw / 2**20:.1f} MiB;"
                f" saved index {sb / 2**20:.1f} MiB ({sb / size:.2%})"
            )
            print(f"  {mb:>5} MiB warm / cold: {best((b, mb, 'warm')) / best((b, mb, 'cold')):.2%} (best over best)")
        if len(sizes) > 1:
            lo, hi = sizes[0], sizes[-1]
            print(f"  warm {hi} MiB / warm {lo} MiB: {best((b, hi, 'warm')) / best((b, lo, 'warm')):.1f}x")
    if "baseline" in builds:
        print("\n[this / baseline]")
        for mb in sizes:
            for k in ("cold", "cold+save", "warm"):
                print(f"  {mb:>5} MiB {k:<10} {best(('this', mb, k)) / best(('baseline', mb, k)):.2f}x")
            for k in ("rss cold", "rss warm", "saved bytes"):
                print(f"  {mb:>5} MiB {k:<10} {res[('this', mb, k)][0] / res[('baseline', mb, k)][0]:.2f}x")


if __name__ == "__main__":
    main()
