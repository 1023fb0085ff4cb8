#!/usr/bin/env python3
"""How ``sessiontree stats`` scales with workers, where its time goes, and a model of it that
predicts more cores (issue 32). A script, not a timed test: one run, every figure a ratio of
measurements taken in that run.

    python benches/fleet_scaling.py [--store DIR] [--sessions 40 --megabytes 10]
                                    [--workers 1,2] [--predict 16] [--repeat 2] [--json OUT]

The store: ``--store`` (every ``*.jsonl`` below it), else ``--sessions`` files of
``--megabytes`` MB made with ``tests/tools/gen_session.py`` in a temporary folder (removed at
the end). Each measurement is a fresh process (its imports counted), best of ``--repeat``,
the contenders interleaved round by round:

* ``floor``: ``import sessiontree.fleet, pyarrow`` and ``Session.open`` of every file, in one
  process (cold: no saved index);
* ``stats-N``: ``session_stats(DIR, workers=N, parquet=OUT, index_cache="off")`` for each N of
  ``--workers``; the process reports its timed phases (``sessiontree.fleet._engine.LAST_RUN``
  and its own clocks): ``import``, ``list`` (the source listed, each file stat-ed),
  ``pool_start``, ``busy`` (the sum of the tasks' own times: the parallel work), ``work``
  (the wall time of the job's tasks), ``combine`` (one table: sort, parent ids), ``parquet``;
* ``duckdb``: one DuckDB ``read_json`` over the store computing the same per-file usage sums,
  written to Parquet (``benches/fleet_stats_bench.py``'s query);
* ``rerun``: ``stats`` with an index-cache folder, after a first run filled it.

The model (Amdahl): ``T(n) = S + P / n`` in CPU seconds (other jobs on a shared machine
inflate wall times, not CPU): ``S`` the process's CPU outside its tasks (interpreter start,
imports, listing, combine, Parquet), ``P`` the tasks' CPU (``time.process_time`` in the
worker, the core's scan threads included), both at the first worker count; the serial fraction
is ``S / (S + P)`` and the predicted speed-up ``T(1) / T(n)``, printed per worker count beside
the measured (wall) one, up to ``--predict``. The wall-time phases are printed too. On a
machine with more cores, pass ``--workers 1,2,4,8,16``: the measured column is then the
answer, the predicted one the check of the model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "tests" / "tools" / "gen_session.py"
PY = sys.executable
sys.path.insert(0, str(ROOT / "benches"))

STATS = r"""
import json, sys, time
t0 = time.perf_counter()
import sessiontree.fleet as fleet, pyarrow  # noqa: F401
from sessiontree.fleet import _engine, _sources
t1 = time.perf_counter()
src, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache = sys.argv[4] if len(sys.argv) > 4 else "off"
a = time.perf_counter()
_sources.resolve_source(src)  # the listing, timed on its own (the job lists again: cached dentries)
t_list = time.perf_counter() - a
t_start = 0.0  # the job starts its pool itself, in the background while it lists the source
phases = {}
orig = fleet._stats_table
def timed_table(batches):
    a = time.perf_counter()
    t = orig(batches)
    phases["combine"] = time.perf_counter() - a
    return t
fleet._stats_table = timed_table
orig_write = fleet.write_parquet
def timed_write(table, path):
    a = time.perf_counter()
    orig_write(table, path)
    phases["parquet"] = time.perf_counter() - a
fleet.write_parquet = timed_write
a = time.perf_counter()
table = fleet.session_stats(src, parquet=out, workers=workers, index_cache=cache)
job = time.perf_counter() - a
run = dict(_engine.LAST_RUN)
print(json.dumps({"import": t1 - t0, "list": t_list, "pool_start": t_start + run.get("pool_start", 0.0),
                  "busy": run.get("busy"), "cpu": run.get("cpu"), "work": run.get("wall"), "job": job,
                  "rows": table.num_rows, **phases}))
"""

FLOOR = r"""
import sys, glob
import sessiontree.fleet, pyarrow  # noqa: F401  (what stats imports)
from sessiontree import Session
n = 0
for p in sorted(glob.glob(sys.argv[1] + "/**/*.jsonl", recursive=True)):
    with Session.open(p, index_cache="off") as s:
        n += len(s)
"""


def _duckdb_script() -> str:
    from fleet_stats_bench import DUCKDB

    return DUCKDB


#: CPU seconds (user + system) of the last :func:`run`'s process and the children it waited for
LAST_CPU = [0.0]


def run(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    """(wall seconds of a fresh ``python -c code args``, its stdout); its CPU seconds in
    :data:`LAST_CPU` (a pool's workers are the fork server's children: not counted there)."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([PY, "-c", code, *args], check=True, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU[0] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, p.stdout


def make_store(d: Path, count: int, mb: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for k in range(1, count + 1):
        p = d / f"s{k:03d}.jsonl"
        if not p.exists():
            subprocess.run(
                [PY, str(GEN), "--megabytes", str(mb), "--seed", str(k), "--out", str(p)],
                check=True,
                stdout=subprocess.DEVNULL,
            )


def model(s: float, p: float, n: int) -> float:
    """Amdahl: the time at ``n`` workers of serial ``s`` and parallel ``p`` seconds."""
    return s + p / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--megabytes", type=int, default=10)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--predict", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="fleet-scaling-"))
    try:
        store = args.store or tmp / "store"
        if args.store is None:
            make_store(store, args.sessions, args.megabytes)
        files = sorted(store.rglob("*.jsonl"))
        total = sum(f.stat().st_size for f in files)
        load_before = os.getloadavg()
        out = tmp / "stats.parquet"
        best: dict[str, float] = {}
        phases: dict[int, dict[str, float]] = {}
        env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
        cache = tmp / "cache"
        cpu: dict[str, float] = {}
        cpu_phases: dict[int, dict[str, float]] = {}

        def keep(name: str, t: float, c: float) -> bool:
            cpu[name] = min(cpu.get(name, c), c)
            if t < best.get(name, float("inf")):
                best[name] = t
                return True
            return False

        for _round in range(args.repeat):
            t, _ = run(FLOOR, str(store), env=env)
            keep("floor", t, LAST_CPU[0])
            for n in counts:
                t, text = run(STATS, str(store), str(out), str(n), env=env)
                ph = json.loads(text.strip().splitlines()[-1])
                # a pool's workers are not the process's children: their tasks' CPU added
                c = LAST_CPU[0] + (ph["cpu"] if n > 1 else 0.0)
                if keep(f"stats-{n}", t, c):
                    ph["wall"] = t
                    phases[n] = ph
                ph_cpu = cpu_phases.setdefault(n, {})
                if c <= min(ph_cpu.get("process_cpu", c), c):
                    ph_cpu.update(process_cpu=c, task_cpu=ph["cpu"])
            if not args.no_duckdb:
                t, _ = run(_duckdb_script(), str(store) + "/**/*.jsonl", str(tmp / "duck.parquet"))
                keep("duckdb", t, LAST_CPU[0])
            shutil.rmtree(cache, ignore_errors=True)
            first, _ = run(STATS, str(store), str(out), "1", str(cache))
            keep("first", first, LAST_CPU[0])
            again, _ = run(STATS, str(store), str(out), "1", str(cache))
            keep("rerun", again, LAST_CPU[0])
        load_after = os.getloadavg()
        # per worker count: serial S (the job's phases outside its tasks, and the same with the
        # interpreter's start and imports) and parallel P (the tasks' CPU seconds)
        fractions = {}
        cpu_model = {}
        for n in counts:
            c = cpu_phases[n]
            # CPU seconds: the process's outside its tasks (interpreter, imports, listing, pool,
            # combine, Parquet) against the tasks' own
            s_cpu = c["process_cpu"] - c["task_cpu"]
            cpu_model[n] = {"S_cpu": s_cpu, "P_cpu": c["task_cpu"], "serial_fraction": s_cpu / c["process_cpu"]}
        for n, ph in phases.items():
            # the job outside its tasks (listing, sizes, batches, combine, Parquet) and the pool's start
            job_serial = ph["job"] - ph["work"] + ph["pool_start"]
            start = ph["wall"] - ph["job"] - ph["list"] - ph["pool_start"]  # interpreter + imports
            fractions[n] = {
                "S_job": job_serial,
                "S_process": job_serial + start,
                "P": ph["cpu"],
                "serial_fraction_job": job_serial / (job_serial + ph["cpu"]),
                "serial_fraction_process": (job_serial + start) / (job_serial + start + ph["cpu"]),
            }
        # the model: serial and parallel CPU seconds at the first count (robust to other jobs
        # on the machine, which inflate wall times, not CPU)
        m1 = cpu_model[counts[0]]
        serial, par = m1["S_cpu"], m1["P_cpu"]
        frac = m1["serial_fraction"]
        report: dict[str, object] = {
            "store": f"{len(files)} files, {total / 1e6:.0f} MB",
            "load": [load_before, load_after],
            "best": best,
            "phases": phases,
            "fractions": fractions,
            "cpu_model": cpu_model,
            "cpu": cpu,
            "serial_s": serial,
            "parallel_s": par,
            "serial_fraction": frac,
        }
        print(f"store: {report['store']}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
        print(
            f"floor (import + Session.open of every file, one process): {best['floor']:.3f} s, {cpu['floor']:.3f} s CPU"
        )
        for n in counts:
            ph = phases[n]
            print(
                f"stats --workers {n}: {best[f'stats-{n}']:.3f} s = {best[f'stats-{n}'] / best['floor']:.2f}x floor"
                + f" ({cpu[f'stats-{n}']:.3f} s CPU = {cpu[f'stats-{n}'] / cpu['floor']:.2f}x the floor's)"
                + (f", {best[f'stats-{n}'] / best['duckdb']:.2f}x DuckDB" if "duckdb" in best else "")
                + "; phases "
                + ", ".join(f"{k} {v:.3f}" for k, v in ph.items() if isinstance(v, float) and k != "wall")
            )
        if "duckdb" in best:
            print(f"DuckDB read_json: {best['duckdb']:.3f} s, {cpu['duckdb']:.3f} s CPU")
        print(
            f"rerun over an unchanged store: {best['rerun']:.3f} s = {100 * best['rerun'] / best['first']:.1f}% of the"
            f" first run ({best['first']:.3f} s); CPU {100 * cpu['rerun'] / cpu['first']:.1f}%"
        )
        for n, f in fractions.items():
            print(
                f"timed phases at {n} worker(s): serial {f['S_job']:.3f} s in the job, {f['S_process']:.3f} s with the"
                f" interpreter and imports; parallel (task CPU) {f['P']:.3f} s: serial fraction"
                f" {100 * f['serial_fraction_job']:.1f}% of the job, {100 * f['serial_fraction_process']:.1f}% of the process"
            )
        for n, m in cpu_model.items():
            print(
                f"CPU at {n} worker(s): serial (outside the tasks) {m['S_cpu']:.3f} s, tasks {m['P_cpu']:.3f} s:"
                f" serial fraction {100 * m['serial_fraction']:.1f}%"
            )
        print(f"model T(n) = S + P/n with S = {serial:.3f} s, P = {par:.3f} s (CPU seconds at {counts[0]} worker)")
        if len(counts) > 1:
            n2 = counts[1]
            t1, t2 = best[f"stats-{counts[0]}"], best[f"stats-{n2}"]
            # Amdahl fitted to the two wall times: T2/T1 = f + (1 - f) * n1/n2
            r = counts[0] / n2
            fit = (t2 / t1 - r) / (1 - r)
            report["serial_fraction_fit"] = fit
            print(f"serial fraction fitted to the wall times at {counts[0]} and {n2} workers: {100 * fit:.1f}%")
        print("workers  measured speed-up  predicted speed-up")
        curve = {}
        for n in sorted(set(counts) | {1, 2, 4, 8, args.predict}):
            pred = model(serial, par, 1) / model(serial, par, n)
            meas = best[f"stats-{counts[0]}"] / best[f"stats-{n}"] if f"stats-{n}" in best else None
            curve[n] = {"measured": meas, "predicted": pred}
            print(f"{n:7d}  {'' if meas is None else f'{meas:17.2f}':>17}  {pred:18.2f}")
        report["curve"] = curve
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
