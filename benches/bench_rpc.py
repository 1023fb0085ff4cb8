"""``sessiontree rpc``: start-up + ``get_messages`` + ``get_entries since <last>``, small vs huge.

    SESSIONTREE_BENCH_DIR=/tmp/x python benches/bench_rpc.py --sizes 10 1024

The small session is ``gen_session.py --megabytes 10``; each bigger one is that session's
entries after ``N - 10`` MiB of another conversation (``inputs.session_with_tail``), so the
active path, the context and the last entry are the same and the answers are identical: any
difference in cost is the cost of the file's size. Two measurements per size, each the best of
``--repeat`` runs:

* the real process as a Pi client drives it: launch ``sessiontree rpc --mode rpc --session F``
  and time until the answer of ``get_entries since <last>`` (start-up included: interpreter,
  imports, the open), then ``get_messages``, then ``get_entries since <last>`` again;
* embedded (:class:`sessiontree.rpc.RpcServer` in this process): ``Session.open``, ``get_messages``,
  ``get_entries since <last>``.

Prints a markdown table (for docs/benchmarks.md) with the ratio of each size to the smallest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inputs import session_file, session_with_tail  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree.rpc import RpcServer  # noqa: E402

EXE = [sys.executable, "-m", "sessiontree", "rpc"]


def last_id(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - (1 << 20)))
        tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return json.loads(tail)["id"]


def process_run(path: Path, since: str) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*EXE, "--mode", "rpc", "--session", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(cmd: dict) -> dict:
        proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    r = ask({"type": "get_entries", "since": since})
    t1 = time.perf_counter()
    assert r["success"] and r["data"]["entries"] == []
    r = ask({"type": "get_messages"})
    t2 = time.perf_counter()
    assert r["success"] and r["data"]["messages"]
    r = ask({"type": "get_entries", "since": since})
    t3 = time.perf_counter()
    assert r["success"]
    proc.stdin.close()
    proc.wait()
    return t1 - t0, t2 - t1, t3 - t2


def embedded_run(path: Path, since: str) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    server = RpcServer(Session.open(path))
    t1 = time.perf_counter()
    r = server.handle({"type": "get_messages"})
    t2 = time.perf_counter()
    assert r["success"]
    r = server.handle({"type": "get_entries", "since": since})
    t3 = time.perf_counter()
    assert r["success"] and r["data"]["entries"] == []
    server.close()
    return t1 - t0, t2 - t1, t3 - t2


def best(fn, repeat: int) -> tuple[float, ...]:
    runs = [fn() for _ in range(repeat)]
    return tuple(min(r[k] for r in runs) for k in range(len(runs[0])))


def fmt(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def measure(sizes: list[int], repeat: int, tail: int) -> list[dict]:
    rows = []
    for mb in sizes:
        path = session_file(tail) if mb <= tail else session_with_tail(mb, tail)
        since = last_id(path)
        rows.append(
            {
                "mb": mb,
                "bytes": path.stat().st_size,
                "process": best(lambda: process_run(path, since), repeat),
                "embedded": best(lambda: embedded_run(path, since), repeat),
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    base = rows[0]
    out = [
        "| session | process: start + first answer | get_messages | get_entries since last | "
        "embedded: Session.open | get_messages | get_entries since last |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = []
        for kind in ("process", "embedded"):
            for k in range(3):
                v = r[kind][k]
                ratio = v / base[kind][k] if base[kind][k] else float("nan")
                cells.append(fmt(v) + ("" if r is base else f" ({ratio:.2f}x)"))
        out.append(f"| {r['bytes'] / 2**20:.0f} MiB | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--tail", type=int, default=10, help="MiB of the small session whose path all sizes share")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = measure(sorted(args.sizes), args.repeat, args.tail)
    print(table(rows))
    load = os.getloadavg()[0]
    print(f"\nLoad average while measuring: {load:.2f} (2 cores shared with other work).")


if __name__ == "__main__":
    main()
