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

``--clients``: many clients at once (issue 18). ``sessiontree rpc --listen unix:PATH --session F``
on the largest size, then for ``get_messages`` and ``get_entries since <last>``: rounds of one
client, then ``--clients`` clients (separate processes, each sending its next command as soon as
it has read the answer, for ``--seconds``), interleaved ``--rounds`` times; total calls per second,
p50 and p99 latency of each, and the ratios (targets: calls/s with 10 clients at least 1.5x one
client's, p99 at most 4x p50). Then ``get_tree`` in process (``RpcServer.handle_line`` as the
transports call it, cold: a new ``Session.open`` each time) against ``Session.open`` of the same
file, interleaved (target: at most 1.5x)::

    python benches/bench_rpc.py --clients 10 --sizes 1024

``--tree``: only that ``get_tree`` measurement, at each size (generated, or ``--file``), as a
table of ratios to the cold open::

    python benches/bench_rpc.py --tree --sizes 10 100 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inputs import session_file, session_with_tail  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree.rpc import RpcServer  # noqa: E402
from sessiontree.rpc.protocol import Text  # noqa: E402

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


# ==== many clients on one socket ==========================================================


def _client(args: tuple[str, bytes, float, float]) -> tuple[list[float], float, float]:
    """One client: connect, wait until ``start`` (wall clock), then send ``line`` after each
    answer until ``start + seconds``: the latency of each call (seconds) and the wall times of
    the first send and the last answer. Reads each answer whole and checks its head, parses none
    (the client's own JSON parse is not the server's cost)."""
    path, line, start, seconds = args
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    rfile = sock.makefile("rb")
    lat: list[float] = []
    while time.time() < start:
        time.sleep(0.0005)
    first = time.time()
    end = start + seconds
    while True:
        t0 = time.perf_counter()
        sock.sendall(line)
        answer = rfile.readline()
        lat.append(time.perf_counter() - t0)
        assert answer.startswith(b'{"type":"response"') and b'"success":true' in answer[:200], answer[:300]
        if time.time() >= end:
            break
    last = time.time()
    sock.close()
    return lat, first, last


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def clients_run(path: Path, since: str, n_clients: int, seconds: float, rounds: int) -> list[dict]:
    sock_path = os.path.join(tempfile.mkdtemp(prefix="st-rpc-bench-"), "rpc.sock")
    server = subprocess.Popen(
        [*EXE, "--listen", f"unix:{sock_path}", "--session", str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert server.stderr is not None
        server.stderr.readline()  # "listening on ..."
        commands = {
            "get_messages": b'{"type":"get_messages"}\n',
            "get_entries since last": json.dumps({"type": "get_entries", "since": since}).encode() + b"\n",
        }
        got: dict = {(name, n): [] for name in commands for n in (1, n_clients)}
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(n_clients) as pool:
            pool.map(time.sleep, [0.5] * n_clients)  # every worker started (spawned, imported)
            for _ in range(rounds):
                for name, line in commands.items():
                    for n in (1, n_clients):  # interleaved: one client, then many, each round
                        start = time.time() + 0.2
                        res = pool.map(_client, [(sock_path, line, start, seconds)] * n, chunksize=1)
                        wall = max(r[2] for r in res) - min(r[1] for r in res)
                        got[(name, n)].append((sum(len(r[0]) for r in res), wall, [r[0] for r in res]))
        rows = []
        for name in commands:
            row: dict = {"command": name}
            for n in (1, n_clients):
                runs = got[(name, n)]
                calls = sum(r[0] for r in runs)
                wall = sum(r[1] for r in runs)
                every = [x for r in runs for lat in r[2] for x in lat]
                row[n] = {"cps": calls / wall, "p50": _pct(every, 0.50), "p99": _pct(every, 0.99)}
            rows.append(row)
        return rows
    finally:
        server.terminate()
        server.wait(timeout=30)


def clients_table(rows: list[dict], n: int) -> str:
    out = [
        f"| command | 1 client: calls/s | p50 | p99 | {n} clients: calls/s | p50 | p99 | calls/s {n} vs 1 | p99/p50 at {n} |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        one, many = r[1], r[n]
        out.append(
            f"| `{r['command']}` | {one['cps']:.0f} | {fmt_lat(one['p50'])} | {fmt_lat(one['p99'])} | "
            f"{many['cps']:.0f} | {fmt_lat(many['p50'])} | {fmt_lat(many['p99'])} | **{many['cps'] / one['cps']:.2f}x** | "
            f"**{many['p99'] / many['p50']:.2f}x** |"
        )
    return "\n".join(out)


def tree_run(path: Path, rounds: int) -> dict:
    """``Session.open`` (without the saved index: a cold scan, and with it) against
    ``Session.open`` (cold) + RPC ``get_tree`` as the transports send it (the answer's line
    streamed to ``/dev/null``, nothing cached), interleaved; best of ``rounds`` each. ``*_cpu``:
    the same in CPU time (``time.process_time``: every thread of this process)."""
    cold, warm, trees, cold_cpu, trees_cpu = [], [], [], [], []
    size = 0
    with open(os.devnull, "wb") as sink:
        for _ in range(rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            Session.open(path, index_cache=False).close()
            cold.append(time.perf_counter() - t0)
            cold_cpu.append(time.process_time() - c0)
            t0 = time.perf_counter()
            Session.open(path).close()
            warm.append(time.perf_counter() - t0)
            got = [0, b""]

            def write(b: bytes) -> None:
                got[0] += len(b)
                if not got[1]:
                    got[1] = bytes(b[:300])
                sink.write(b)

            t0, c0 = time.perf_counter(), time.process_time()
            server = RpcServer(Session.open(path, index_cache=False))
            r = server.handle_line(b'{"type":"get_tree"}', text_ok=True)
            assert isinstance(r, Text), r
            r.write_to(write)
            trees.append(time.perf_counter() - t0)
            trees_cpu.append(time.process_time() - c0)
            assert got[1].startswith(b'{"type":"response","command":"get_tree","success":true'), got[1]
            size = got[0]
            server.close()
    return {
        "cold": min(cold),
        "warm": min(warm),
        "open+tree": min(trees),
        "cold_cpu": min(cold_cpu),
        "open+tree_cpu": min(trees_cpu),
        "bytes": size,
    }


def tree_table(paths: list[Path], rounds: int) -> str:
    """``get_tree``'s ratio to the cold open at each size (:func:`tree_run`), one run."""
    out = [
        "| session | Session.open (cold) | open + get_tree (streamed) | ratio | CPU: open | open + get_tree "
        "| ratio | answer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in paths:
        tr = tree_run(p, rounds)
        out.append(
            f"| {p.stat().st_size / 2**20:.0f} MiB | {fmt(tr['cold'])} | {fmt(tr['open+tree'])} | "
            f"**{tr['open+tree'] / tr['cold']:.2f}x** | {fmt(tr['cold_cpu'])} | {fmt(tr['open+tree_cpu'])} | "
            f"**{tr['open+tree_cpu'] / tr['cold_cpu']:.2f}x** | {tr['bytes'] / 2**20:.0f} MiB |"
        )
    return "\n".join(out)


def fmt_lat(s: float) -> str:
    return f"{s * 1e6:.0f} us" if s < 1e-3 else fmt(s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--tail", type=int, default=10, help="MiB of the small session whose path all sizes share")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clients", type=int, default=0, help="many clients on one socket (and get_tree); 0: off")
    ap.add_argument("--seconds", type=float, default=2.0, help="--clients: length of each run")
    ap.add_argument("--rounds", type=int, default=3, help="--clients: interleaved rounds")
    ap.add_argument(
        "--file", type=Path, nargs="+", help="--clients, --tree: these session files instead of generated ones"
    )
    ap.add_argument("--tree", action="store_true", help="only get_tree against the cold open, at each size (or --file)")
    args = ap.parse_args()
    if args.tree:
        paths = args.file or [session_file(mb) for mb in sorted(args.sizes)]
        load0 = os.getloadavg()
        print(tree_table(paths, args.rounds))
        load1 = os.getloadavg()
        print(f"\nLoad average while measuring: {load0[0]:.2f} at the start, {load1[0]:.2f} at the end (2 cores).")
        return
    if args.clients:
        mb = max(args.sizes)
        path = (
            args.file[0]
            if args.file
            else (session_file(args.tail) if mb <= args.tail else session_with_tail(mb, args.tail))
        )
        since = last_id(path)
        load0 = os.getloadavg()
        rows = clients_run(path, since, args.clients, args.seconds, args.rounds)
        print(f"### {path.stat().st_size / 2**20:.0f} MiB session, unix socket\n")
        print(clients_table(rows, args.clients))
        tr = tree_run(path, args.rounds)
        print(
            f"\nRPC get_tree in process (cold: nothing cached): Session.open {fmt(tr['cold'])} cold "
            f"({fmt(tr['warm'])} from the saved index), open + get_tree {fmt(tr['open+tree'])}: "
            f"**{tr['open+tree'] / tr['cold']:.2f}x** the cold open ({tr['bytes'] / 2**20:.0f} MiB of JSON)"
        )
        load1 = os.getloadavg()
        print(f"\nLoad average while measuring: {load0[0]:.2f} at the start, {load1[0]:.2f} at the end (2 cores).")
        return
    rows = measure(sorted(args.sizes), args.repeat, args.tail)
    print(table(rows))
    load = os.getloadavg()[0]
    print(f"\nLoad average while measuring: {load:.2f} (2 cores shared with other work).")


if __name__ == "__main__":
    main()
