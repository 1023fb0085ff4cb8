#!/usr/bin/env python3
"""Time to the first line, total time and peak memory of CLI commands on one session, as ratios
to ``Session.open`` in a fresh interpreter measured in the same run (the "`sessiontree tree` at
scale" section of docs/benchmarks.md).

    python benches/cli_tree_bench.py SESSION.jsonl "tree" "tree --json" "tree --limit 20" "branch"

Each command runs as ``python -m sessiontree COMMAND... SESSION`` with the index cache off;
peak memory is the child's ``ru_maxrss`` (run this from a small process: a fork inherits the
parent's high-water mark)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def run(argv: list[str]) -> tuple[float, float, float, int]:
    """(seconds to the first line, seconds in all, peak RSS in MB, lines) of ``argv``."""
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert p.stdout is not None
    first = p.stdout.readline()
    t1 = time.monotonic()
    lines = 1 if first else 0
    while chunk := p.stdout.read(1 << 20):
        lines += chunk.count(b"\n")
    _, _, usage = os.wait4(p.pid, 0)
    return t1 - t0, time.monotonic() - t0, usage.ru_maxrss / 1024, lines


def main() -> None:
    path, commands = sys.argv[1], sys.argv[2:]
    py = sys.executable
    _, opened, open_mb, _ = run([py, "-c", f"from sessiontree import Session; print(len(Session.open({path!r})))"])
    print(f"open: {opened:.2f} s, {open_mb:.0f} MB")
    print("| command | first line / open | total / open | peak memory / open | lines |")
    print("|---|---:|---:|---:|---:|")
    for command in commands:
        first, total, mb, lines = run([py, "-m", "sessiontree", *command.split(), path])
        print(f"| `{command}` | {first / opened:.2f}x | {total / opened:.2f}x | {mb / open_mb:.2f}x | {lines} |")


if __name__ == "__main__":
    main()
