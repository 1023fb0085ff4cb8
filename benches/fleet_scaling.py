#!/usr/bin/env python3
"""How ``sessiontree stats`` scales with workers, where its time goes, and a model of it that
predicts more cores (issue 32). A script, not a timed test: one run, every figure a ratio of
measurements taken in that run.

    python benches/fleet_scaling.py [--store DIR] [--sessions 40 --megabytes 10]
                                    [--workers 1,2] [--predict 16] [--repeat 2]
                                    [--modes summary,parquet] [--python PY[,PY2]] [--json OUT]

The store: ``--store`` (every ``*.jsonl`` below it), else ``--sessions`` files of
``--megabytes`` MB made with ``tests/tools/gen_session.py`` in a temporary folder (removed at
the end). ``--python``: the interpreters whose ``sessiontree`` is measured (another checkout's
venv: builds compared in one run, interleaved). Each measurement is a fresh process (its imports
counted), best of ``--repeat``, the contenders interleaved round by round. Compare builds with
their bytecode compiled alike: with ``PYTHONDONTWRITEBYTECODE`` set and a checkout without
``__pycache__``, every process compiles the package (~0.07 s of CPU here); run with
``PYTHONPYCACHEPREFIX=/tmp/pycache`` and that variable unset:

* ``floor``: ``import sessiontree.fleet`` and ``Session.open`` of every file, in one process
  (cold: no saved index); ``floor+pyarrow``: the same importing pyarrow too (what a job that
  writes Parquet must import);
* ``summary-N``: ``stats_columns(DIR, workers=N, index_cache="off")``, the rows
  ``sessiontree stats`` prints its summary from (no Parquet, no pyarrow);
  ``parquet-N``: what ``sessiontree stats --parquet OUT`` runs (``stats_columns(DIR,
  workers=N, index_cache="off", arrow_soon=True).write_parquet(OUT)``: pyarrow imported in a
  thread while a pool's workers run; its CPU, ``overlapped_cpu``, is part of the model's S and
  off the critical path from 2 workers on; a build without it: ``session_stats(DIR,
  workers=N, parquet=OUT, index_cache="off")``); for each
  N of ``--workers``; the process reports its timed phases
  (``sessiontree.fleet._engine.LAST_RUN`` and its own clocks): ``import``, ``list`` (the
  source listed, each file stat-ed), ``pool_start``, ``busy`` (the sum of the tasks' own
  times: the parallel work), ``work`` (the wall time of the job's tasks), ``combine`` (rows
  in order, parent ids), ``parquet`` (the Arrow table built and written);
* ``duckdb``: one DuckDB ``read_json`` over the store computing the same per-file usage sums,
  written to Parquet (``benches/fleet_stats_bench.py``'s query);
* ``<mode>-first`` / ``<mode>-rerun``: the same job with an index-cache folder, empty, then
  again over the unchanged store (saved rows checked before any worker starts).

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
import sessiontree.fleet as fleet  # what `sessiontree stats` imports (pyarrow: only to write Parquet)
from sessiontree.fleet import _engine, _sources
t1 = time.perf_counter()
src, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache = sys.argv[4] if len(sys.argv) > 4 else "off"
mode = sys.argv[5] if len(sys.argv) > 5 else "parquet"
a = time.perf_counter()
_sources.resolve_source(src)  # the listing, timed on its own (the job lists again: cached dentries)
t_list = time.perf_counter() - a
phases = {}
def timed(owner, name, phase):
    orig = getattr(owner, name, None)
    if orig is None:
        return
    def wrapper(*args, **kw):
        a = time.perf_counter()
        try:
            return orig(*args, **kw)
        finally:
            phases[phase] = phases.get(phase, 0.0) + time.perf_counter() - a
    setattr(owner, name, wrapper)
timed(fleet, "_stats_columns", "combine")  # this branch: rows in item order, sorted, parent ids
timed(fleet, "_stats_table", "combine")  # before: the workers' Arrow tables concatenated
timed(fleet, "write_parquet", "parquet")  # the Arrow table built and written (pyarrow's import included)
a = time.perf_counter()
if mode == "summary" and hasattr(fleet, "stats_columns"):  # what `sessiontree stats --json` computes
    rows = fleet.stats_columns(src, workers=workers, index_cache=cache).num_rows
elif mode == "summary":  # a build without stats_columns: the table, no Parquet
    rows = fleet.session_stats(src, workers=workers, index_cache=cache).num_rows
elif hasattr(fleet.StatsColumns, "digest"):  # what `sessiontree stats --parquet OUT` runs
    timed(fleet.StatsColumns, "write_parquet", "parquet")  # (its own: the stamp's check or the write)
    cols = fleet.stats_columns(src, workers=workers, index_cache=cache, arrow_soon=True)
    cols.write_parquet(out)
    rows = cols.num_rows
else:
    rows = fleet.session_stats(src, parquet=out, workers=workers, index_cache=cache).num_rows
job = time.perf_counter() - a
run = dict(_engine.LAST_RUN)
try:  # the CPU of pyarrow's import in a thread while the workers ran (-1: none)
    from sessiontree.fleet import _arrow
    overlapped = max(0.0, getattr(_arrow, "IMPORT_CPU", [0.0])[0])
except ImportError:
    overlapped = 0.0
print(json.dumps({"import": t1 - t0, "list": t_list, "pool_start": run.get("pool_start", 0.0),
                  "busy": run.get("busy"), "cpu": run.get("cpu"), "work": run.get("wall"), "job": job,
                  "rows": rows, "pyarrow": "pyarrow" in sys.modules, "overlapped_cpu": overlapped, **phases}))
"""

FLOOR = r"""
import sys, glob
import sessiontree.fleet  # noqa: F401  (what stats imports)
if len(sys.argv) > 2:
    import pyarrow  # noqa: F401  (what stats --parquet imports too)
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


MODES = ("summary", "parquet")


def main() -> None:
    global PY
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--megabytes", type=int, default=10)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--predict", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--modes", default=",".join(MODES), help="summary (no Parquet), parquet")
    ap.add_argument(
        "--python", default=PY, help="the interpreter(s) whose sessiontree is measured, comma-separated (interleaved)"
    )
    ap.add_argument("--no-duckdb", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    pythons = [p for p in args.python.split(",") if p]
    tmp = Path(tempfile.mkdtemp(prefix="fleet-scaling-"))
    try:
        store = args.store or tmp / "store"
        if args.store is None:
            make_store(store, args.sessions, args.megabytes)
        files = sorted(store.rglob("*.jsonl"))
        total = sum(f.stat().st_size for f in files)
        load_before = os.getloadavg()
        out = tmp / "stats.parquet"
        env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
        cache = tmp / "cache"
        # per interpreter: best wall, best CPU, the phases of the best wall, the tasks' CPU
        measured: dict[str, Measured] = {py: Measured() for py in pythons}
        duck: dict[str, float] = {}
        for _round in range(args.repeat):
            for py in pythons:  # the builds interleaved: each sees the same minutes' load
                PY = py
                m = measured[py]
                t, _ = run(FLOOR, str(store), env=env)
                m.keep("floor", t, LAST_CPU[0])
                t, _ = run(FLOOR, str(store), "pyarrow", env=env)
                m.keep("floor+pyarrow", t, LAST_CPU[0])
                for mode in modes:
                    for n in counts:
                        t, text = run(STATS, str(store), str(out), str(n), "off", mode, env=env)
                        ph = json.loads(text.strip().splitlines()[-1])
                        # a pool's workers are not the process's children: their tasks' CPU added
                        m.keep(f"{mode}-{n}", t, LAST_CPU[0] + (ph["cpu"] if n > 1 else 0.0), ph)
                    shutil.rmtree(cache, ignore_errors=True)
                    t, text = run(STATS, str(store), str(out), str(counts[0]), str(cache), mode)
                    m.keep(f"{mode}-first", t, LAST_CPU[0])
                    t, text = run(STATS, str(store), str(out), str(counts[0]), str(cache), mode)
                    m.keep(f"{mode}-rerun", t, LAST_CPU[0], json.loads(text.strip().splitlines()[-1]))
            if not args.no_duckdb:
                t, _ = run(_duckdb_script(), str(store) + "/**/*.jsonl", str(tmp / "duck.parquet"))
                duck["wall"] = min(duck.get("wall", t), t)
                duck["cpu"] = min(duck.get("cpu", LAST_CPU[0]), LAST_CPU[0])
        load_after = os.getloadavg()
        print(
            f"store: {len(files)} files, {total / 1e6:.0f} MB;"
            f" load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
        )
        if duck:
            print(f"DuckDB read_json: {duck['wall']:.3f} s, {duck['cpu']:.3f} s CPU")
        report: dict[str, object] = {
            "store": f"{len(files)} files, {total / 1e6:.0f} MB",
            "load": [load_before, load_after],
            "duckdb": duck,
            "builds": {py: _report(py, measured[py], duck, modes, counts, args.predict) for py in pythons},
        }
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Measured:
    """One interpreter's figures: the best wall and the best CPU seconds per contender, the
    timed phases of the best wall, and the tasks' CPU of the best CPU."""

    def __init__(self) -> None:
        self.best: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.phases: dict[str, dict[str, float]] = {}
        self.task_cpu: dict[str, float] = {}

    def keep(self, name: str, t: float, c: float, ph: dict[str, float] | None = None) -> None:
        if c < self.cpu.get(name, float("inf")):
            self.cpu[name] = c
            if ph is not None:
                self.task_cpu[name] = ph["cpu"] or 0.0
        if t < self.best.get(name, float("inf")):
            self.best[name] = t
            if ph is not None:
                self.phases[name] = {**ph, "wall": t}


def _report(
    py: str, m: Measured, duck: dict[str, float], modes: list[str], counts: list[int], predict: int
) -> dict[str, object]:
    """Prints one interpreter's figures; returns them with its model per mode."""
    best, cpu, phases, task_cpu = m.best, m.cpu, m.phases, m.task_cpu
    print(f"\npython: {py}")
    for f in ("floor", "floor+pyarrow"):
        print(f"{f} (import + Session.open of every file, one process): {best[f]:.3f} s, {cpu[f]:.3f} s CPU")
    models: dict[str, object] = {}
    for mode in modes:
        floor = "floor" if mode == "summary" else "floor+pyarrow"
        for n in counts:
            k = f"{mode}-{n}"
            ph = phases[k]
            print(
                f"stats {mode} --workers {n}: {best[k]:.3f} s = {best[k] / best[floor]:.2f}x {floor}"
                + f" ({cpu[k]:.3f} s CPU = {cpu[k] / cpu[floor]:.2f}x)"
                + (f", {best[k] / duck['wall']:.2f}x DuckDB ({cpu[k] / duck['cpu']:.2f}x CPU)" if duck else "")
                + "; phases "
                + ", ".join(f"{p} {v:.3f}" for p, v in ph.items() if isinstance(v, float) and p != "wall")
                + f"; pyarrow imported: {ph.get('pyarrow')}"
            )
        first, again = f"{mode}-first", f"{mode}-rerun"
        print(
            f"stats {mode} rerun over an unchanged store: {best[again]:.3f} s = {100 * best[again] / best[first]:.1f}%"
            f" of the first run ({best[first]:.3f} s); CPU {100 * cpu[again] / cpu[first]:.1f}%"
            f" ({cpu[again]:.3f} / {cpu[first]:.3f} s); tasks run: {phases[again].get('tasks')}"
        )
        # the model: serial S = the process's CPU outside its tasks (interpreter, imports,
        # listing, saved-row checks, combine, Parquet), parallel P = the tasks' CPU, both at the
        # first worker count (CPU, not wall: other jobs on a shared machine inflate wall times)
        k1 = f"{mode}-{counts[0]}"
        par = task_cpu[k1]
        serial = cpu[k1] - par
        frac = serial / cpu[k1]
        line = f"stats {mode}: serial {serial:.3f} s CPU, parallel {par:.3f} s: serial fraction {100 * frac:.1f}%"
        # a part of S that runs beside the workers from 2 workers on (pyarrow's import in a
        # thread, CPU measured in that thread): off the critical path while P / n is longer
        over = max((phases.get(f"{mode}-{n}", {}).get("overlapped_cpu") or 0.0) for n in counts)
        over = min(over, serial)
        if len(counts) > 1:
            k2 = f"{mode}-{counts[1]}"
            s2 = cpu[k2] - task_cpu[k2]
            line += f" ({100 * s2 / cpu[k2]:.1f}% at {counts[1]} workers, the pool's start included)"
            r = counts[0] / counts[1]
            fit = (best[k2] / best[k1] - r) / (1 - r)
            line += f"; fitted to the wall times at {counts[0]} and {counts[1]}: {100 * fit:.1f}%"
        print(line)
        if over > 0:
            print(
                f"  of S, {over:.3f} s (pyarrow's import) runs beside the workers from 2 workers on:"
                f" serial on the critical path {100 * (serial - over) / cpu[k1]:.1f}%"
                " (model T(n) = S - A + max(P / n, A) for n >= 2)"
            )
        curve = {}
        print("  workers  measured speed-up  predicted speed-up")
        for n in sorted(set(counts) | {1, 2, 4, 8, predict}):
            t_n = model(serial, par, n) if n == 1 or over <= 0 else serial - over + max(par / n, over)
            pred = model(serial, par, 1) / t_n
            meas = best[k1] / best[f"{mode}-{n}"] if f"{mode}-{n}" in best else None
            curve[n] = {"measured": meas, "predicted": pred}
            print(f"  {n:7d}  {'' if meas is None else f'{meas:17.2f}':>17}  {pred:18.2f}")
        models[mode] = {
            "serial_s": serial,
            "parallel_s": par,
            "serial_fraction": frac,
            "overlapped_s": over,
            "curve": curve,
        }
    return {"best": best, "cpu": cpu, "phases": phases, "models": models}


if __name__ == "__main__":
    main()
