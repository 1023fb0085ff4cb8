"""The saved index (issue 17): cold vs warm opens in new processes, ratios measured in one run.

Contenders are interleaved round by round (the machine is shared); each figure is the best and
the median of ``--rounds`` rounds. Every open runs in a fresh ``python`` process and is timed
inside it (import excluded) unless the row says "whole process".

    python benches/saved_index.py --sizes 10,100,1024 --rounds 5

Rows (per size): cold open (cache off); cold open + save (empty cache folder); warm open (file
unchanged); warm reopen (open + ``leaf_id`` + ``len``; also after a cold open, with and without
the save); warm open + build_context() + AutoCompactor.context_tokens(), and that per-turn job
alone; warm open with 1 MiB
appended since the save (the file's last lines again: their ids are saved ones; then the same
bytes as new entries, fresh ids each the child of the one before), the cold open of that grown
file, and the refresh() of that 1 MiB in a warm session (the scan of 1 MiB);
the saved index's size; RssAnon after a cold open. Then ``sessiontree rpc --session`` (whole
process, spawn to first answer) against ``python -c "import sessiontree"``, and ``sessiontree
stats`` over a store of N copies of the 10 MiB session, first run vs rerun (whole process).
Then the targets as ratios of this run's bests: warm reopen <= 2% of the cold open and <= 3x the
smallest size's warm reopen, the per-turn job after a warm open <= 5% of the cold open, saving
adds <= 10% to a cold open; the warm reopen after the append against the cold open and the scan
of 1 MiB. ``--baseline DIR`` (a folder holding another build's ``sessiontree`` package, say a copy
of main's ``python/sessiontree`` with its built extension) times that build's warm reopen after
the append beside this one's, interleaved, from its own saved index.
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

DATA = Path(os.environ.get("SESSIONTREE_BENCH_DATA", "/work/bench-data"))
# rows to leave out (--skip appended,rss)
SKIP: set[str] = set()
# --baseline: a folder holding another build's ``sessiontree`` package, timed beside this one
BASELINE: list[str] = []

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from sessiontree import Session, AutoCompactor
t1 = time.perf_counter()
path, mode, cache = sys.argv[1], sys.argv[2], sys.argv[3]
ic = False if cache == "off" else cache
out = {"import": t1 - t0}
t, c = time.perf_counter(), time.process_time()
s = Session.open(path, index_cache=ic)
out["open"] = time.perf_counter() - t
out["open cpu"] = time.process_time() - c
out["state"] = s.index_cache_state()[0]
t = time.perf_counter()
leaf = s.leaf_id
n = len(s)
out["open+leaf+len"] = out["open"] + time.perf_counter() - t
if mode == "context":
    t = time.perf_counter()
    s.build_context()
    AutoCompactor(s).context_tokens()
    out["context"] = time.perf_counter() - t
    out["open+context"] = out["open"] + out["context"]
if mode == "refresh":
    extra = sys.argv[4]
    with open(path, "ab") as f:
        f.write(open(extra, "rb").read())
    t = time.perf_counter()
    s.refresh()
    out["refresh"] = time.perf_counter() - t
if mode == "rss":
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            out["rss_anon"] = int(line.split()[1]) * 1024
print(json.dumps(out))
"""


def child(path: Path, mode: str, cache: str, *extra: str, baseline: bool = False) -> dict:
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE_MIN_BYTES="0")
    if baseline:
        env["PYTHONPATH"] = BASELINE[0]
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode, cache, *extra],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(r.stdout)


def stats(xs: list[float]) -> tuple[float, float]:
    return min(xs), statistics.median(xs)


def fmt_ms(x: float) -> str:
    return f"{x * 1000:.1f}" if x >= 0.01 else f"{x * 1000:.2f}"


def tail_lines(src: Path, nbytes: int) -> bytes:
    """About ``nbytes`` of whole entry lines from the end of ``src`` (appended again: other
    ids are not needed for a scan-cost figure, and duplicates are what Pi files can hold)."""
    with open(src, "rb") as f:
        f.seek(max(0, src.stat().st_size - nbytes - (1 << 20)))
        data = f.read()
    lines = data.split(b"\n")[1:-1]
    out, total = [], 0
    for ln in reversed(lines):
        out.append(ln + b"\n")
        total += len(ln) + 1
        if total >= nbytes:
            break
    return b"".join(reversed(out))


def fresh_tail(src: Path, nbytes: int) -> bytes:
    """`tail_lines` with fresh ids: each line a new id, the child of the line before it (the
    first, of the file's last entry), as a session's own turns are appended."""
    import re

    lines = tail_lines(src, nbytes).split(b"\n")[:-1]
    with open(src, "rb") as f:
        f.seek(max(0, src.stat().st_size - (1 << 20)))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    parent = re.search(rb'"id":"([^"]*)"', last)
    prev = parent.group(1) if parent else b"none"
    out = []
    for i, ln in enumerate(lines):
        new = b"n%07x" % i
        ln = re.sub(rb'"id":"[^"]*"', b'"id":"' + new + b'"', ln, count=1)
        ln = re.sub(rb'"parentId":("[^"]*"|null)', b'"parentId":"' + prev + b'"', ln, count=1)
        out.append(ln + b"\n")
        prev = new
    return b"".join(out)


def bench_size(mb: int, rounds: int, work: Path) -> dict:
    src = DATA / f"gen-{mb}MiB.jsonl"
    cache = work / f"cache-{mb}"
    res: dict[str, list[float]] = {}
    add = lambda k, v: res.setdefault(k, []).append(v)  # noqa: E731
    extra = work / "append-1MiB.bin"
    extra.write_bytes(tail_lines(src, 1 << 20))
    fresh = work / "append-1MiB-fresh.bin"
    fresh.write_bytes(fresh_tail(src, 1 << 20))
    grown = work / f"grown-{mb}.jsonl"
    for r in range(rounds):
        # cold, cold + save, warm, warm + context: interleaved
        o = child(src, "open", "off")
        add("cold open", o["open"])
        add("cold open, CPU (all threads)", o["open cpu"])
        shutil.rmtree(cache, ignore_errors=True)
        o = child(src, "open", str(cache))
        assert o["state"] == "saved", o
        add("cold open + save", o["open"])
        add("cold open + save, CPU (all threads)", o["open cpu"])
        add("cold open + save, then leaf + len", o["open+leaf+len"])
        o = child(src, "open", str(cache))
        assert o["state"] == "warm", o
        add("warm open (unchanged)", o["open"])
        add("warm reopen (open + leaf + len)", o["open+leaf+len"])
        add("import sessiontree", o["import"])
        o = child(src, "context", str(cache))
        assert o["state"] == "warm", o
        add("warm open + build_context + context_tokens", o["open+context"])
        add("build_context + context_tokens after a warm open (the per-turn job)", o["context"])
        o = child(src, "open", "off")
        add("cold open, then leaf + len", o["open+leaf+len"])
        if r == 0 and "rss" not in SKIP:
            add("RssAnon after cold open", child(src, "rss", "off")["rss_anon"])
            add("RssAnon after warm open", child(src, "rss", str(cache))["rss_anon"])
            saved = sorted(cache.glob("*.stidx"))
            res["saved index bytes"] = [sum(f.stat().st_size for f in saved)]
    if "appended" in SKIP:
        return {"mb": mb, "bytes": src.stat().st_size, "res": res}
    # 1 MiB appended since the save: a copy of the file, saved, then grown
    shutil.copyfile(src, grown)
    gcache = work / f"gcache-{mb}"
    shutil.rmtree(gcache, ignore_errors=True)
    assert child(grown, "open", str(gcache))["state"] == "saved"
    o = child(grown, "refresh", str(gcache), str(extra))  # warm, then 1 MiB appended and refreshed
    bcache = work / f"bcache-{mb}"
    if BASELINE:
        # the baseline build's saved index of the same bytes (the file is put back to them
        # before each round: the same inode, the same first bytes)
        shutil.rmtree(bcache, ignore_errors=True)
        with open(grown, "r+b") as f:
            f.truncate(src.stat().st_size)
        assert child(grown, "open", str(bcache), baseline=True)["state"] == "saved"
        with open(grown, "ab") as f:
            f.write(extra.read_bytes())
    for _ in range(rounds):
        o = child(grown, "open", str(gcache))
        assert o["state"] == "warm", o
        add("warm open, 1 MiB appended since the save", o["open"])
        add("warm reopen, 1 MiB appended (open + leaf + len)", o["open+leaf+len"])
        if BASELINE:
            o = child(grown, "open", str(bcache), baseline=True)
            assert o["state"] == "warm", o
            add("baseline build: warm open, 1 MiB appended since the save", o["open"])
            add("baseline build: warm reopen, 1 MiB appended (open + leaf + len)", o["open+leaf+len"])
        o = child(grown, "open", "off")
        add("cold open of the grown file, then leaf + len", o["open+leaf+len"])
        # the same bytes as new entries (fresh ids, each the child of the one before)
        with open(grown, "r+b") as f:
            f.truncate(src.stat().st_size)
            f.seek(0, 2)
            f.write(fresh.read_bytes())
        o = child(grown, "open", str(gcache))
        assert o["state"] == "warm", o
        add("warm reopen, 1 MiB of new entries appended (open + leaf + len)", o["open+leaf+len"])
        if BASELINE:
            o = child(grown, "open", str(bcache), baseline=True)
            assert o["state"] == "warm", o
            add("baseline build: warm reopen, 1 MiB of new entries appended (open + leaf + len)", o["open+leaf+len"])
        # the scan of 1 MiB: refresh() of 1 MiB appended to a warm session (file grows each round)
        o2 = child(grown, "refresh", str(gcache), str(extra))
        add("refresh() of 1 MiB appended (the scan of 1 MiB)", o2["refresh"])
        # put the grown file back to 'save + 1 MiB' for the next round
        with open(grown, "r+b") as f:
            f.truncate(src.stat().st_size)
        shutil.rmtree(gcache, ignore_errors=True)
        assert child(grown, "open", str(gcache))["state"] == "saved"
        with open(grown, "ab") as f:
            f.write(extra.read_bytes())
    grown.unlink()
    shutil.rmtree(gcache, ignore_errors=True)
    return {"mb": mb, "bytes": src.stat().st_size, "res": res}


def bench_rpc(mb: int, rounds: int, work: Path) -> dict:
    src = DATA / f"gen-{mb}MiB.jsonl"
    cache = work / f"cache-{mb}"
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(cache), PI_CODING_AGENT_DIR=str(work / "agent"))
    (work / "agent").mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "sessiontree", "info", str(src)], env=env, capture_output=True, check=True)
    res: dict[str, list[float]] = {}
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sessiontree"], check=True)
        res.setdefault('python -c "import sessiontree"', []).append(time.perf_counter() - t)
        t = time.perf_counter()
        p = subprocess.Popen(
            [sys.executable, "-m", "sessiontree", "rpc", "--mode", "rpc", "--session", str(src)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(b'{"id":"1","type":"get_state"}\n')
        p.stdin.flush()
        line = p.stdout.readline()
        res.setdefault("rpc --session, warm: spawn to first answer", []).append(time.perf_counter() - t)
        assert b'"success":true' in line, line[:200]
        p.stdin.close()
        p.wait()
    return {"mb": mb, "res": res}


def bench_stats(copies: int, rounds: int, work: Path) -> dict:
    src = DATA / "gen-10MiB.jsonl"
    store = work / "store"
    store.mkdir(exist_ok=True)
    for i in range(copies):
        dst = store / f"s{i:03d}.jsonl"
        if not dst.exists():
            shutil.copyfile(src, dst)
    cache = work / "stats-cache"
    res: dict[str, list[float]] = {}
    for _ in range(rounds):
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(cache))
        for label in ("stats, first run (empty cache)", "stats, rerun (unchanged store)"):
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "sessiontree", "stats", str(store), "--parquet", str(work / "out.parquet")],
                env=env,
                check=True,
                capture_output=True,
            )
            res.setdefault(label, []).append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "sessiontree", "stats", str(store), "--parquet", str(work / "out.parquet")],
            env=dict(os.environ, SESSIONTREE_INDEX_CACHE="off"),
            check=True,
            capture_output=True,
        )
        res.setdefault("stats, cache off", []).append(time.perf_counter() - t)
    return {"copies": copies, "res": res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,1024", help="MiB sizes of /work/bench-data/gen-{N}MiB.jsonl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rpc-mb", type=int, default=1024)
    ap.add_argument("--stats-copies", type=int, default=40)
    ap.add_argument(
        "--skip", default="", help="comma list of parts to skip: sizes,rpc,stats (whole parts), appended,rss (rows)"
    )
    ap.add_argument("--work", default=None, help="scratch folder (default: a temp folder, removed)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--baseline",
        default=None,
        help="a folder holding another build's sessiontree package (say main's): its warm open after the "
        "append is timed beside this build's, interleaved",
    )
    args = ap.parse_args()
    if args.baseline:
        BASELINE.append(str(Path(args.baseline).resolve()))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="stidx-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    SKIP.update(skip)
    out: dict = {"sizes": [], "rpc": None, "stats": None}
    try:
        if "sizes" not in skip:
            for mb in [int(x) for x in args.sizes.split(",")]:
                out["sizes"].append(bench_size(mb, args.rounds, work))
                report_size(out["sizes"][-1])
            report_targets(out["sizes"])
        if "rpc" not in skip:
            out["rpc"] = bench_rpc(args.rpc_mb, args.rounds, work)
            report_plain(out["rpc"]["res"], f"rpc, {args.rpc_mb} MiB")
        if "stats" not in skip:
            out["stats"] = bench_stats(args.stats_copies, max(1, args.rounds // 2), work)
            report_plain(out["stats"]["res"], f"stats, {args.stats_copies} x 10 MiB")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(out))


def report_size(r: dict) -> None:
    res = r["res"]
    cold = stats(res["cold open"])
    print(f"\n## {r['mb']} MiB ({r['bytes']} bytes): best / median ms, ratio of best to the cold open's best")
    for k, v in res.items():
        if k.startswith("RssAnon"):
            print(f"{k}: {v[0] / 2**20:.1f} MiB = {100 * v[0] / r['bytes']:.2f}% of the file")
            continue
        if k == "saved index bytes":
            print(f"saved index: {v[0] / 2**20:.1f} MiB = {100 * v[0] / r['bytes']:.2f}% of the file")
            continue
        b, m = stats(v)
        print(f"{k}: {fmt_ms(b)} / {fmt_ms(m)} ms ({100 * b / cold[0]:.2f}% of cold)")


def report_targets(sizes: list[dict]) -> None:
    """The saved index's targets as ratios of bests measured in this run."""
    if not sizes:
        return
    print("\n## targets (ratios of bests, this run)")
    for r in sizes:
        res = r["res"]
        cold = min(res["cold open, then leaf + len"])
        warm = min(res["warm reopen (open + leaf + len)"])
        turn = min(res["build_context + context_tokens after a warm open (the per-turn job)"])
        save = min(res["cold open + save, then leaf + len"])
        # the save's own work: CPU time is what a loaded 2-core machine cannot hide or inflate
        # (wall bests there differ by more than the save costs, either way)
        cpu = min(res["cold open + save, CPU (all threads)"]) / min(res["cold open, CPU (all threads)"])
        print(
            f"{r['mb']} MiB: warm reopen / cold = {100 * warm / cold:.2f}% (<= 2%); "
            f"per-turn job after a warm open / cold = {100 * turn / cold:.2f}% (<= 5%); "
            f"saving adds {100 * (save / cold - 1):.1f}% to a cold open, "
            f"{100 * (cpu - 1):.1f}% of its CPU time (<= 10%)"
        )
    for r in sizes:
        res = r["res"]
        if "warm reopen, 1 MiB appended (open + leaf + len)" not in res:
            continue
        cold = min(res["cold open of the grown file, then leaf + len"])
        warm = min(res["warm reopen, 1 MiB appended (open + leaf + len)"])
        scan = min(res["refresh() of 1 MiB appended (the scan of 1 MiB)"])
        line = (
            f"{r['mb']} MiB + 1 MiB appended: warm reopen / cold = {100 * warm / cold:.2f}%; "
            f"warm reopen / the scan of 1 MiB = {warm / scan:.2f}x"
        )
        base = res.get("baseline build: warm reopen, 1 MiB appended (open + leaf + len)")
        if base:
            line += f"; baseline build: {100 * min(base) / cold:.2f}% of cold, this build / baseline = {warm / min(base):.3f}x"
        new = min(res["warm reopen, 1 MiB of new entries appended (open + leaf + len)"])
        line += f"; new entries: {100 * new / cold:.2f}% of cold, {new / scan:.2f}x the scan"
        base = res.get("baseline build: warm reopen, 1 MiB of new entries appended (open + leaf + len)")
        if base:
            line += f", this build / baseline = {new / min(base):.3f}x"
        print(line)
    small, big = sizes[0], sizes[-1]
    if big is not small:
        a = min(big["res"]["warm reopen (open + leaf + len)"])
        b = min(small["res"]["warm reopen (open + leaf + len)"])
        print(f"warm reopen {big['mb']} MiB / warm reopen {small['mb']} MiB = {a / b:.2f}x (<= 3x)")


def report_plain(res: dict, title: str) -> None:
    print(f"\n## {title}: best / median ms")
    for k, v in res.items():
        b, m = stats(v)
        print(f"{k}: {fmt_ms(b)} / {fmt_ms(m)} ms")


if __name__ == "__main__":
    main()
