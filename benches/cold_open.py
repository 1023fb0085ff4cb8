"""Cold open against the read floor (issue 17 item 4): ratios measured in one run.

    python benches/cold_open.py                      # 100 MiB and 1 GiB, this checkout
    python benches/cold_open.py --against main       # and main's build, passes alternated
    python benches/cold_open.py --sizes 100 --rounds 9 --passes 3

Builds the Rust examples in release (``rust/examples/open_floor.rs``,
``rust/examples/parse_floor.rs``) and runs them on ``$SESSIONTREE_BENCH_DATA/gen-{N}MiB.jsonl``
(default /work/bench-data; generated with ``benches/inputs.py`` when missing). ``open_floor``
interleaves, round by round in one process: ``wc -l``, ``cat``, a read counting newlines, two
threads ``pread``ing 256 KiB ranges (the floor of the scan's reading) and ``Store::open`` (the
cold open's scan, no Python, no saved index). ``--against REV`` builds REV's ``open_floor`` in
a temporary git worktree and alternates the two builds pass by pass. ``parse_floor`` is the
skeleton parse alone, in memory, on one thread, against memchr and UTF-8 validation.

Printed: per build and size, the best open wall over all passes and its ratio to the best
``wc -l`` of the same passes (the target: at most 2x at 1 GiB), the best CPU time of the open
per GiB (steadier than wall on a shared machine), and the load average before and after. A
two-thread job's wall time on a loaded machine is set by the scheduler: read the CPU figures
then, and say so.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("SESSIONTREE_BENCH_DATA", "/work/bench-data"))
ROW = re.compile(r"^\s*(.+?): wall best\s+([\d.]+) ms median\s+([\d.]+) ms \| CPU best\s+([\d.]+) ms")


def build(root: Path, examples: list[str]) -> Path:
    """Builds the examples of the checkout at `root` in release; returns its target folder."""
    target = root / "target"
    cmd = ["cargo", "build", "--release", "-q"]
    for e in examples:
        cmd += ["--example", e]
    subprocess.run(cmd, cwd=root, check=True, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    return target / "release" / "examples"


def session(mb: int) -> Path:
    p = DATA / f"gen-{mb}MiB.jsonl"
    if p.exists():
        return p
    sys.path.insert(0, str(ROOT / "benches"))
    from inputs import session_file  # noqa: PLC0415  (only when the shared file is missing)

    return session_file(mb)


def run_open_floor(binary: Path, path: Path, rounds: int) -> dict[str, tuple[float, float]]:
    out = subprocess.run([str(binary), str(path), str(rounds)], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1).strip()] = (float(m.group(2)), float(m.group(4)))
    return rows


def load() -> str:
    return "%.1f %.1f %.1f" % os.getloadavg()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1024], help="MiB sizes")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per pass (interleaved contenders)")
    ap.add_argument("--passes", type=int, default=2, help="passes per build (builds alternated)")
    ap.add_argument("--against", metavar="REV", help="also build and run REV's open_floor")
    args = ap.parse_args()

    print(f"load average before: {load()} ({os.cpu_count()} CPUs)")
    builds = {"this": build(ROOT, ["open_floor", "parse_floor"])}
    tmp = None
    if args.against:
        tmp = tempfile.mkdtemp(prefix="cold-open-")
        wt = Path(tmp) / "wt"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(wt), args.against], cwd=ROOT, check=True)
        builds[args.against] = build(wt, ["open_floor"])
    try:
        for mb in args.sizes:
            path = session(mb)
            gib = path.stat().st_size / (1 << 30)
            best: dict[str, dict[str, tuple[float, float]]] = {}
            for p in range(args.passes):
                for name, bins in builds.items():
                    rows = run_open_floor(bins / "open_floor", path, args.rounds)
                    agg = best.setdefault(name, {})
                    for k, (wall, cpu) in rows.items():
                        w0, c0 = agg.get(k, (float("inf"), float("inf")))
                        agg[k] = (min(w0, wall), min(c0, cpu))
                    o, w = rows["Store::open"], rows["wc -l"]
                    print(
                        f"{path.name} pass {p + 1} {name}: open {o[0]:.1f} ms ({o[0] / w[0]:.2f}x wc -l {w[0]:.1f} ms),"
                        f" open CPU {o[1] / gib / 1e3:.3f} s/GiB, load {load()}"
                    )
            print(f"== {path.name} ({gib:.2f} GiB), best of {args.passes} x {args.rounds} rounds")
            for name, agg in best.items():
                o, w = agg["Store::open"], agg["wc -l"]
                line = (
                    f"  {name:>10}: open wall {o[0]:.1f} ms = {o[0] / w[0]:.2f}x wc -l ({w[0]:.1f} ms);"
                    f" open CPU {o[1] / gib / 1e3:.3f} s/GiB, wc -l CPU {w[1] / gib / 1e3:.3f} s/GiB"
                )
                if "pread x2" in agg:
                    line += f", pread x2 CPU {agg['pread x2'][1] / gib / 1e3:.3f} s/GiB"
                print(line)
            if len(best) == 2:
                (a, x), (b, y) = best.items()
                print(
                    f"  {a} / {b}: open wall {x['Store::open'][0] / y['Store::open'][0]:.3f}x,"
                    f" open CPU {x['Store::open'][1] / y['Store::open'][1]:.3f}x"
                )
        small = session(min(args.sizes))
        print(f"== parse alone (parse_floor, {small.name}, one thread, in memory)")
        out = subprocess.run(
            [str(builds["this"] / "parse_floor"), str(small), str(max(args.rounds, 9))],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        print("  " + out.strip().replace("\n", "\n  "))
    finally:
        if tmp:
            subprocess.run(["git", "worktree", "remove", "--force", str(Path(tmp) / "wt")], cwd=ROOT, check=False)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
