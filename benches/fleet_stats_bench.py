#!/usr/bin/env python3
"""``sessiontree stats`` against DuckDB ``read_json`` computing the same per-file usage sums
(issue 18), each a fresh process (imports included), interleaved round by round in one run.

    python benches/fleet_stats_bench.py [--repeat 3] [--data /work/bench-data/fleetcore]

Stores (made under ``--data`` when missing):

* ``big``: 50 sessions x 20 MiB (``gen_session.py --megabytes 20 --seed k``);
* ``small``: 1,000 small sessions (``tests/support/fleet_store.py``, 6-90 entries each).

Contenders per store, in the same round: ``stats`` (``sessiontree stats DIR --parquet OUT``
with ``SESSIONTREE_INDEX_CACHE=off``: cold, nothing saved), ``duckdb`` (one
``read_json`` over the store's glob: per-file sums of ``usage.input/output/cacheRead/cacheWrite``
and ``cost.total`` over assistant and tool-result messages and compaction, branch-summary and
usage entries, written to Parquet), ``open`` (a ``Session.open`` loop, the floor) and ``warm``
(``stats`` again with the index cache on, after a first run filled it: saved rows reused).
Also the peak RSS of ``stats`` on one large uncompacted session against ``Session.open`` of
it (``--peak FILE``, default: the generated 143 MiB-ish session under ``--data``).

Prints each time (best and median of ``--repeat``), the ratios to DuckDB, and the load
average before and after: on a shared 2-core machine read the ratios, not the times.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "tests" / "tools" / "gen_session.py"
PY = sys.executable

DUCKDB = r"""
import sys, duckdb
glob, out = sys.argv[1], sys.argv[2]
u = "STRUCT(input DOUBLE, output DOUBLE, cacheRead DOUBLE, cacheWrite DOUBLE, cost STRUCT(total DOUBLE))"
duckdb.sql(f'''
COPY (
  SELECT filename,
    sum(CASE WHEN type = 'message' AND message.role IN ('assistant', 'toolResult') THEN message.usage.input
             WHEN type IN ('compaction', 'branch_summary', 'usage') THEN usage.input END) AS input_tokens,
    sum(CASE WHEN type = 'message' AND message.role IN ('assistant', 'toolResult') THEN message.usage.output
             WHEN type IN ('compaction', 'branch_summary', 'usage') THEN usage.output END) AS output_tokens,
    sum(CASE WHEN type = 'message' AND message.role IN ('assistant', 'toolResult') THEN message.usage.cacheRead
             WHEN type IN ('compaction', 'branch_summary', 'usage') THEN usage.cacheRead END) AS cache_read_tokens,
    sum(CASE WHEN type = 'message' AND message.role IN ('assistant', 'toolResult') THEN message.usage.cacheWrite
             WHEN type IN ('compaction', 'branch_summary', 'usage') THEN usage.cacheWrite END) AS cache_write_tokens,
    sum(CASE WHEN type = 'message' AND message.role IN ('assistant', 'toolResult') THEN message.usage.cost.total
             WHEN type IN ('compaction', 'branch_summary', 'usage') THEN usage.cost.total END) AS cost,
    count(*) AS lines
  FROM read_json('{glob}', format = 'newline_delimited', filename = true, ignore_errors = true,
                 columns = {{type: 'VARCHAR', message: 'STRUCT(role VARCHAR, usage {u})', usage: '{u}'}})
  GROUP BY filename
) TO '{out}' (FORMAT parquet)
''')
"""

OPEN = r"""
import sys, glob
from sessiontree import Session
n = 0
for p in sorted(glob.glob(sys.argv[1], recursive=True)):
    with Session.open(p, index_cache="off") as s:
        n += len(s)
"""

PEAK = r"""
import resource, sys
what, path = sys.argv[1], sys.argv[2]
import sessiontree, sessiontree.fleet as fleet, pyarrow  # imports before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if what == "open":
    s = sessiontree.Session.open(path, index_cache="off"); n = len(s)
else:
    t = fleet.session_stats([path], workers=1, index_cache="off")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{base:.1f} {peak:.1f}")
"""


def make_big(d: Path, count: int = 50, mib: int = 20) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for k in range(1, count + 1):
        p = d / f"s{k:02d}.jsonl"
        if not p.exists():
            subprocess.run(
                [PY, str(GEN), "--megabytes", str(mib), "--seed", str(k), "--out", str(p)],
                check=True,
                stdout=subprocess.DEVNULL,
            )


def make_small(d: Path, count: int = 1000) -> None:
    if d.exists() and len(list(d.rglob("*.jsonl"))) >= count:
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.fleet_store import make_store

    d.mkdir(parents=True, exist_ok=True)
    make_store(d, count)


def make_uncompacted(p: Path, mib: int = 143) -> None:
    """A generated session with every compaction turned into a ``custom`` entry (same id and
    parent): nothing compacted, so the context is the whole branch."""
    if p.exists():
        return
    raw = p.with_suffix(".raw")
    subprocess.run(
        [PY, str(GEN), "--megabytes", str(mib), "--seed", "143", "--out", str(raw)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with open(raw, "rb") as src, open(p, "wb") as dst:
        for line in src:
            dst.write(line.replace(b'"type":"compaction"', b'"type":"custom","customType":"was-compaction"', 1))
    raw.unlink()


def timed(cmd: list[str], env: dict | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default="/work/bench-data/fleetcore")
    ap.add_argument("--stores", default="big,small")
    ap.add_argument("--peak", default=None, help="a large session for the peak-memory figure ('' to skip)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    data = Path(a.data)
    stores = {"big": data / "s20", "small": data / "small1000"}
    stores = {k: v for k, v in stores.items() if k in a.stores.split(",")}
    if "big" in stores:
        make_big(stores["big"])
    if "small" in stores:
        make_small(stores["small"])
    tmp = Path(tempfile.mkdtemp(prefix="fleet-stats-bench-"))
    cold = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
    warm = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(tmp / "cache"))
    st = shutil.which("sessiontree") or "sessiontree"
    result: dict = {"load_before": load()}
    print(f"load average before: {result['load_before']}")
    try:
        for name, d in stores.items():
            files = sorted(d.rglob("*.jsonl"))
            mb = sum(f.stat().st_size for f in files) / 1e6
            glob = str(d / "**" / "*.jsonl")
            out = str(tmp / f"{name}.parquet")
            runs = {
                "stats": [st, "stats", str(d), "--parquet", out, "--no-progress"],
                "duckdb": [PY, "-c", DUCKDB, glob, out],
                "open": [PY, "-c", OPEN, glob],
                "warm": [st, "stats", str(d), "--parquet", out, "--no-progress"],
            }
            subprocess.run(runs["warm"], check=True, env=warm, stdout=subprocess.DEVNULL)  # fill the cache
            times: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(a.repeat):
                for k, cmd in runs.items():  # interleaved: one of each per round
                    times[k].append(timed(cmd, warm if k == "warm" else cold))
            best = {k: min(v) for k, v in times.items()}
            med = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n{name}: {len(files)} sessions, {mb:.0f} MB")
            for k in runs:
                print(
                    f"  {k:7s} best {best[k]:6.2f} s  median {med[k]:6.2f} s  "
                    f"best/duckdb {best[k] / best['duckdb']:.2f}x  median/duckdb {med[k] / med['duckdb']:.2f}x"
                )
            result[name] = {"sessions": len(files), "mb": mb, "times": times, "best": best, "median": med}
        if a.peak != "":
            peak_file = Path(a.peak) if a.peak else data / "uncompacted-143MiB.jsonl"
            if not a.peak:
                make_uncompacted(peak_file)
            peaks = {}
            for what in ("open", "stats"):
                base, peak = map(
                    float,
                    subprocess.run(
                        [PY, "-c", PEAK, what, str(peak_file)], check=True, capture_output=True, text=True
                    ).stdout.split(),
                )
                peaks[what] = (base, peak)
            d_open = peaks["open"][1] - peaks["open"][0]
            d_stats = peaks["stats"][1] - peaks["stats"][0]
            print(
                f"\npeak RSS on {peak_file.name} ({peak_file.stat().st_size / 2**20:.0f} MiB): "
                f"open {peaks['open'][1]:.0f} MiB, stats {peaks['stats'][1]:.0f} MiB "
                f"({peaks['stats'][1] / peaks['open'][1]:.2f}x); over the imports "
                f"({peaks['open'][0]:.0f} MiB) open +{d_open:.0f} MiB, stats +{d_stats:.0f} MiB "
                f"({d_stats / max(d_open, 1):.2f}x)"
            )
            result["peak"] = {"open": peaks["open"], "stats": peaks["stats"]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_after"] = load()
    print(f"\nload average after: {result['load_after']}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
