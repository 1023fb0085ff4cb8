"""RPC ``get_tree`` (nested) against the open, in process, interleaved (one command):

    python benches/bench_rpc_tree.py [--sizes 10 100 1024] [--rounds 3] [--oracle-max 100]

For each generated session (/work/bench-data/gen-<N>MiB.jsonl, or ``--dir``), each round times
``Session.open(path, index_cache=False)`` (a cold scan: the ratios' base) and ``Session.open(path)``
(from the saved index) alone, then a fresh ``Session.open(path)`` plus ``get_tree`` as a transport
asks for it (``RpcServer.handle_line(..., text_ok=True)``: the core writes the text, nothing
cached), and, up to ``--oracle-max`` MiB, the same with the Python builder the core replaced
(``_tree_text_py``). Prints best-of-rounds seconds, the ratio to the open and the load average."""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

from sessiontree import Session
from sessiontree.rpc import RpcServer


def _open(path: Path, cold: bool) -> float:
    t = time.perf_counter()
    s = Session.open(path, index_cache=False) if cold else Session.open(path)
    dt = time.perf_counter() - t
    s.close()
    return dt


def _tree(path: Path, oracle: bool) -> tuple[float, int]:
    t = time.perf_counter()
    s = Session.open(path)
    server = RpcServer(s)
    if oracle:
        n = len(server._tree_text_py())
    else:
        got = [0]

        def write(b: bytes) -> None:  # as the transport writes it (streamed, not held)
            got[0] += len(b)

        server.handle_line(b'{"type":"get_tree"}', text_ok=True).write_to(write)  # type: ignore[attr-defined]
        n = got[0]
    dt = time.perf_counter() - t
    server.close()
    return dt, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1024])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--oracle-max", type=int, default=100, help="largest size (MiB) to run the Python builder on")
    ap.add_argument("--dir", default=os.environ.get("SESSIONTREE_BENCH_DIR", "/work/bench-data"))
    a = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    for mib in a.sizes:
        path = Path(a.dir) / f"gen-{mib}MiB.jsonl"
        best: dict[str, float] = {}
        size = 0
        for _ in range(a.rounds):
            gc.collect()
            best["open"] = min(best.get("open", 1e9), _open(path, True))
            best["open (saved index)"] = min(best.get("open (saved index)", 1e9), _open(path, False))
            dt, size = _tree(path, False)
            best["open+get_tree"] = min(best.get("open+get_tree", 1e9), dt)
            if mib <= a.oracle_max:
                dt, _ = _tree(path, True)
                best["open+get_tree (python builder)"] = min(best.get("open+get_tree (python builder)", 1e9), dt)
        print(f"{mib} MiB (answer {size / 2**20:.0f} MiB), best of {a.rounds}, load {os.getloadavg()[0]:.2f}:")
        for k, v in best.items():
            print(f"  {k:32s} {v:8.3f} s  {v / best['open']:6.2f}x cold open")


if __name__ == "__main__":
    main()
