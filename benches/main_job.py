"""The main job at platform scale: what an agent loop pays per turn, as history grows.

Inputs (:func:`inputs.compacted_with_tail`): a generated session of N MiB of history, then one
compaction and one fixed tail, so the context, the cut search and the summarized span are the
same at every size and only the history before the compaction grows. The per-turn checks are
also timed on the odd shape (``compacted_with_tail(mb, "off_path")``: the compaction's
``firstKeptEntryId`` names an entry that is not on the path before it). Each operation is timed
on every size in one process, interleaved, best of several rounds; the writing operations
(``compact``, ``navigate_tree(summarize=True)``) run once per fresh process (the file is
truncated back afterwards), best of a few processes, and that process's peak RSS (VmHWM:
resident memory; the store reads the file with ``pread``, so there is no file mapping to count
since issue 11) is reported against the file size.

    SESSIONTREE_BENCH_DIR=/tmp/bench python benches/main_job.py 10 100 1024

Used by ``benches/report.py`` (docs/benchmarks.md) and, at small sizes, ``tests/perf/test_perf_ratios.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from inputs import compacted_with_tail  # noqa: E402

KEEP = 20000


def read_ops(path: Path) -> dict[str, Callable[[], object]]:
    """The reading steps of the main job on one session (opened here, outside the timings)."""
    from sessiontree import AutoCompactor, CompactionSettings, Session
    from sessiontree.orchestration import plan_compaction

    s = Session.open(path)
    settings = CompactionSettings(keep_recent_tokens=KEEP)
    idle = AutoCompactor(s, None, settings, context_window=10**9)  # never over the threshold
    s.usage_totals()  # the running total starts here; later calls cost what was appended
    return {
        "AutoCompactor.context_tokens()": idle.context_tokens,
        "AutoCompactor.before_prompt(), nothing to compact": idle.before_prompt,
        "AutoCompactor.after_run(), nothing to compact": idle.after_run,
        "plan_compaction() (compact --dry-run's plan)": lambda: plan_compaction(s, settings),
        "Session.build_context()": s.build_context,
        "Session.build_provider_context()": s.build_provider_context,
        "Session.find_cut_point(20000)": lambda: s.find_cut_point(KEEP),
        "Session.usage_totals() (running total)": s.usage_totals,
    }


def time_reads(paths: list[Path], rounds: int = 7) -> dict[str, list[float]]:
    """Best time of each reading operation on each path, rounds interleaved across paths."""
    import time

    ops = [read_ops(p) for p in paths]
    best = {name: [float("inf")] * len(paths) for name in ops[0]}
    for _ in range(rounds):
        for name in best:
            for k, o in enumerate(ops):
                t = time.perf_counter()
                o[name]()
                best[name][k] = min(best[name][k], time.perf_counter() - t)
    return best


# One writing job in a fresh interpreter: open, run it once (timed), report time and VmHWM,
# then truncate the file back to its size so the next run sees the same session.
CHILD = textwrap.dedent(r"""
    import json, os, re, sys, time
    sys.path.insert(0, {here!r})
    from sessiontree import CompactionSettings, Session
    path, kind = {path!r}, {kind!r}
    size = os.path.getsize(path)
    try:
        s = Session.open(path)
        t = time.perf_counter()
        if kind == "compact":
            s.compact(None, settings=CompactionSettings(keep_recent_tokens={keep}))
        else:
            branch = s.get_context_entries()
            s.navigate_tree(branch[-60].id, summarize=True)
        took = time.perf_counter() - t
        s.close()
    finally:
        os.truncate(path, size)
    with open("/proc/self/status") as f:
        hwm = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024
    print(json.dumps({{"time": took, "hwm": hwm, "size": size}}))
""")


def run_write(path: Path, kind: str) -> dict:
    code = CHILD.format(here=str(HERE), path=str(path), kind=kind, keep=KEEP)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def time_writes(paths: list[Path], rounds: int = 3) -> dict[str, list[dict]]:
    """Best (time) of each writing job per path, one fresh process per run; ``hwm`` is the
    largest VmHWM seen over the runs (bytes)."""
    out: dict[str, list[dict]] = {}
    for kind, name in (
        ("compact", "Session.compact() (offline summarizer, keep 20000)"),
        ("navigate", "navigate_tree(summarize=True), 60 entries back"),
    ):
        rows = [{"time": float("inf"), "hwm": 0, "size": p.stat().st_size} for p in paths]
        for _ in range(rounds):
            for k, p in enumerate(paths):
                r = run_write(p, kind)
                rows[k]["time"] = min(rows[k]["time"], r["time"])
                rows[k]["hwm"] = max(rows[k]["hwm"], r["hwm"])
        out[name] = rows
    return out


#: The per-turn checks of the odd shape (a compaction whose firstKeptEntryId is off the path).
ODD_OPS = (
    "AutoCompactor.context_tokens()",
    "AutoCompactor.before_prompt(), nothing to compact",
    "plan_compaction() (compact --dry-run's plan)",
    "Session.build_context()",
    "Session.find_cut_point(20000)",
)


def measure(sizes: list[float], rounds: int = 7, write_rounds: int = 3) -> dict:
    paths = [compacted_with_tail(mb) for mb in sizes]
    odd = time_reads([compacted_with_tail(mb, "off_path") for mb in sizes], rounds)
    reads = time_reads(paths, rounds)
    for name in ODD_OPS:
        reads[f"{name}, first kept entry off the path"] = odd[name]
    return {
        "sizes": sizes,
        "bytes": [p.stat().st_size for p in paths],
        "reads": reads,
        "writes": time_writes(paths, write_rounds),
        "load": os.getloadavg()[0],
    }


def markdown(m: dict) -> list[str]:
    """The docs/benchmarks.md section for a :func:`measure` result."""
    sizes, first = m["sizes"], 0
    head = (
        ["operation"]
        + [f"{b / 2**20:.0f} MiB" for b in m["bytes"]]
        + [f"{m['bytes'][k] / 2**20:.0f} / {m['bytes'][first] / 2**20:.0f} MiB" for k in range(1, len(sizes))]
    )

    def t(x: float) -> str:
        return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.2f} s"

    rows = []
    for name, ts in m["reads"].items():
        rows.append([name] + [t(x) for x in ts] + [f"{ts[k] / ts[first]:.2f}x" for k in range(1, len(ts))])
    for name, rs in m["writes"].items():
        ts = [r["time"] for r in rs]
        rows.append([name] + [t(x) for x in ts] + [f"{ts[k] / ts[first]:.2f}x" for k in range(1, len(ts))])
    compact = next(iter(m["writes"].values()))
    rows.append(
        ["peak RSS of that compaction process (VmHWM) / file size"]
        + [f"{r['hwm'] / 2**20:.0f} MiB = {r['hwm'] / r['size']:.2f}x" for r in compact]
        + ["" for _ in range(1, len(sizes))]
    )
    out = [
        "## The main job as history grows (same compaction and tail; only the history grows)",
        "",
        "`benches/main_job.py`: a generated session of N MiB of history, then one compaction that keeps "
        "nothing before it and the same 280-entry tail (`benches/inputs.py` `compacted_with_tail`), so "
        'every operation below has the same work at every size. Rows marked "first kept entry off the '
        "path\": the same input with the compaction's `firstKeptEntryId` naming an entry that is not on "
        "the path before it (Pi never writes one; files get edited), which keeps nothing before it too. Reading operations: best of interleaved "
        "rounds in one process (open excluded); writing operations: one run per fresh process, best of "
        "3, file truncated back after each. Target: every ratio at most 2x, compaction peak RSS at most "
        f"1.3x the file. Load average while measuring: {m['load']:.2f} (2 shared cores).",
        "",
    ]
    out += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="The main job as history grows (docs/benchmarks.md).",
        epilog="Inputs are cached in SESSIONTREE_BENCH_DIR.",
    )
    parser.add_argument(
        "sizes",
        nargs="*",
        type=float,
        default=[10, 100],
        help="MiB of history before the compaction and the fixed tail (default: 10 100)",
    )
    sizes = parser.parse_args().sizes
    result = measure(sizes)
    print("\n".join(markdown(result)))
    print(json.dumps(result))
