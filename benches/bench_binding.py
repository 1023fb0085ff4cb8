"""The binding's per-entry cost, one build against another, interleaved in one run (issue 21
step 4: ``Entry`` attribute access and ``Session.entry_metrics`` must not get slower when the
per-entry getters give way to one record per entry).

Both builds are made from git commits (``--base``, default ``main``; ``--head``, default
``HEAD``) with ``maturin build`` (profile ``--profile``, default ``dev-fast``: opt-level 3,
no LTO) into ``$TMPDIR/sessiontree-bench-binding/<commit>/`` (kept: a second run reuses them),
each in a detached worktree. Then rounds alternate a child process per build, each timing, on
the same file, per entry and best of its repeats, in CPU time of the timing thread
(``time.thread_time``: on a loaded machine wall time mostly measures the other processes; the
garbage collector on, as callers run):

- ``one_attr``: ``e.id`` on fresh ``Entry`` objects (the first access of each entry);
- ``four_attrs``: ``e.id, e.type, e.parent_id, e.line`` on fresh entries;
- ``again``: ``e.type`` on entries whose attributes were already read;
- ``repr``: ``repr(e)`` on fresh entries (id, type, parent id, line);
- ``metrics``: ``Session.entry_metrics()`` over every entry;
- ``entries``: ``Session.entries()`` (making the objects; the same code in both builds).

It prints ns per entry for each build (best over rounds) and the ratios head/base (below 1:
head is faster). Run: ``python benches/bench_binding.py [--file F] [--rounds N]`` from a
worktree (the default file: 40,000 generated entries). The machine's load average is printed
with the figures: on a loaded machine the ratios are indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(tempfile.gettempdir()) / "sessiontree-bench-binding"
OPS = ("one_attr", "four_attrs", "again", "repr", "metrics", "entries")

CHILD = r"""
import gc, json, sys, time
from sessiontree import Session
path, reps = sys.argv[1], int(sys.argv[2])
s = Session.open(path)
n = len(s)
best = {}
def timed(name, setup, run):
    b = float("inf")
    for _ in range(reps):
        arg = setup()
        t0 = time.thread_time()
        run(arg)
        b = min(b, time.thread_time() - t0)
    best[name] = b / n * 1e9
def one(es):
    for e in es:
        e.id
def four(es):
    for e in es:
        e.id; e.type; e.parent_id; e.line
def touched():
    es = s.entries()
    for e in es:
        e.id
    return es
def again(es):
    for e in es:
        e.type
def rep(es):
    for e in es:
        repr(e)
timed("one_attr", s.entries, one)
timed("four_attrs", s.entries, four)
timed("again", touched, again)
timed("repr", s.entries, rep)
timed("metrics", lambda: None, lambda _: s.entry_metrics())
timed("entries", lambda: None, lambda _: s.entries())
print(json.dumps(best))
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def build(ref: str, profile: str) -> Path:
    """The package of commit ``ref`` installed into a folder of its own (built once)."""
    sha = _git("rev-parse", ref)
    site = CACHE / f"{sha[:12]}-{profile}" / "site"
    if (site / "sessiontree").is_dir():
        return site
    work = CACHE / f"{sha[:12]}-{profile}" / "src"
    if not work.exists():
        _git("worktree", "add", "--detach", str(work), sha)
    wheels = work.parent / "wheels"
    env = dict(os.environ, CARGO_TARGET_DIR=str(CACHE / "target"))
    print(f"building {ref} ({sha[:12]}, profile {profile}) ...", file=sys.stderr, flush=True)
    subprocess.run(
        [sys.executable, "-m", "maturin", "build", "-q", "--profile", profile, "--out", str(wheels)],
        cwd=work,
        env=env,
        check=True,
    )
    wheel = max(wheels.glob("sessiontree-*.whl"), key=lambda p: p.stat().st_mtime)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True
    )
    _git("worktree", "remove", "--force", str(work))
    return site


def default_file() -> Path:
    out = CACHE / "entries-40000.jsonl"
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        gen = ROOT / "tests" / "tools" / "gen_session.py"
        subprocess.run([sys.executable, str(gen), "--entries", "40000", "--seed", "3", "--out", str(out)], check=True)
    return out


def child_json(site: Path, code: str, *args: str) -> dict[str, float]:
    """Runs ``code`` with ``args`` in a child process over the build in ``site``; its JSON answer."""
    env = dict(os.environ, PYTHONPATH=str(site), SESSIONTREE_INDEX_CACHE="off")
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=tempfile.gettempdir(),  # not the worktree: its python/ must not shadow the build
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def run_child(site: Path, path: Path, reps: int) -> dict[str, float]:
    return child_json(site, CHILD, str(path), str(reps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main")
    ap.add_argument("--head", default="HEAD")
    ap.add_argument("--profile", default="dev-fast")
    ap.add_argument("--file", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    sites = {"base": build(a.base, a.profile), "head": build(a.head, a.profile)}
    path = a.file or default_file()
    best, load = best_of_rounds(sites, OPS, a.rounds, lambda site: run_child(site, path, a.reps))
    print(f"file {path} ({path.stat().st_size / 2**20:.1f} MiB); base {a.base}, head {a.head}, profile {a.profile}")
    print_ratios(best, OPS, load, "ns/entry")


def best_of_rounds(
    sites: dict[str, Path], ops: tuple[str, ...], rounds: int, measure: Callable[[Path], dict[str, float]]
) -> tuple[dict[str, dict[str, float]], list[tuple[float, float, float]]]:
    """Each build's best figure per op over ``rounds`` rounds of ``measure(site)``, run interleaved
    (base, head, base, head, ...), and the load average before and after."""
    best: dict[str, dict[str, float]] = {k: dict.fromkeys(ops, float("inf")) for k in sites}
    load = [os.getloadavg()]
    for _ in range(rounds):
        for k, site in sites.items():
            got = measure(site)
            best[k] = {op: min(best[k][op], got[op]) for op in ops}
    load.append(os.getloadavg())
    return best, load


def print_ratios(best: dict[str, dict[str, float]], ops: tuple[str, ...], load: list[Any], unit: str) -> None:
    """The load average, then a row per op: base and head figures (``unit``) and head/base."""
    print(f"load average (1, 5, 15 min) before {load[0]}, after {load[1]}")
    print(f"{'op':14} {'base ' + unit:>16} {'head ' + unit:>16} {'head/base':>10}")
    for op in ops:
        b, h = best["base"][op], best["head"][op]
        print(f"{op:14} {b:16.1f} {h:16.1f} {h / b:10.2f}")


if __name__ == "__main__":
    main()
