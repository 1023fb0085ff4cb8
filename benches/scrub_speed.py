"""Throughput and memory of the secret scrubber on a large generated session (issue 20).

    python benches/scrub_speed.py plant SRC DST [--every N]   # a copy with planted secrets
    python benches/scrub_speed.py run FILE [--out OUT]        # measure

``plant`` copies SRC (a gen_session.py file), adding one synthetic secret (cycling through
every kind of tests/support/secrets.py) to the first string field of every N-th message
(default 200), rewritten as JSON.stringify writes it.

``run`` measures, in one process and one run, on one core (the scrubber is single-threaded):

* ``read``: reading FILE in 8 MiB blocks and counting newlines (the floor: I/O + one pass);
* ``scrub``: the same blocks through ``_core.Scrubber`` (findings counted, not kept), output
  discarded: the engine;
* ``scrub_file``: ``sessiontree.scrub.scrub_file`` to OUT end to end (temp file, fsync,
  rename), with the findings recorded;

and prints MB/s (1 MB = 10^6 bytes) and the ratio of each to ``read``, then the peak RSS of a
child process that runs ``scrub_file`` alone (memory is bounded by the largest line).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BLOCK = 8 << 20


def plant(src: str, dst: str, every: int) -> None:
    from sessiontree._jsjson import js_stringify_bytes
    from tests.support.secrets import SECRETS

    rng = random.Random(1)
    gens = list(SECRETS.items())
    n = planted = 0
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        for line in fi:
            n += 1
            if n % every == 0 and b'"type":"message"' in line[:40]:
                e = orjson.loads(line)
                c = e["message"].get("content")
                _, gen = gens[planted % len(gens)]
                text, _ = gen(rng)
                if isinstance(c, list) and c and isinstance(c[0], dict):
                    for k in ("text", "thinking"):
                        if isinstance(c[0].get(k), str):
                            c[0][k] += "\n" + text
                            planted += 1
                            line = js_stringify_bytes(e) + b"\n"
                            break
            fo.write(line)
    print(f"{dst}: {n} lines, {planted} secrets planted")


def _mbs(nbytes: int, secs: float) -> float:
    return nbytes / secs / 1e6


def run(path: str, out: str | None) -> None:
    from sessiontree import _core
    from sessiontree.scrub import scrub_file

    size = os.path.getsize(path)
    res = {}
    t = time.perf_counter()
    nl = 0
    with open(path, "rb") as fh:
        while b := fh.read(BLOCK):
            nl += b.count(b"\n")
    res["read"] = time.perf_counter() - t
    t = time.perf_counter()
    sc = _core.Scrubber(False, "keep", False)
    with open(path, "rb") as fh:
        while b := fh.read(BLOCK):
            sc.feed(b)
    sc.finish()
    res["scrub"] = time.perf_counter() - t
    _, changed, found, replay = sc.stats()
    if out:
        t = time.perf_counter()
        rep = scrub_file(path, out)
        res["scrub_file"] = time.perf_counter() - t
        assert rep.found == found, (rep.found, found)
    print(f"{path}: {size / 1e6:.0f} MB, {nl} lines; {found} secrets in {changed} lines; {replay} replay fields kept")
    for k, v in res.items():
        print(f"  {k:10s} {v:7.2f} s  {_mbs(size, v):7.0f} MB/s  x{v / res['read']:.2f} of read")
    if out:
        code = (
            "import resource,sys; from sessiontree.scrub import scrub_file; "
            f"scrub_file({path!r}, {out!r}, record=False); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        )
        rss = int(subprocess.check_output([sys.executable, "-c", code]).strip())
        longest = 0
        with open(path, "rb") as fh:
            for line in fh:
                longest = max(longest, len(line))
        print(f"  peak RSS of scrub_file alone: {rss / 1024:.0f} MiB (longest line {longest / 1e6:.2f} MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plant")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--every", type=int, default=200)
    p = sub.add_parser("run")
    p.add_argument("file")
    p.add_argument("--out")
    a = ap.parse_args()
    if a.cmd == "plant":
        plant(a.src, a.dst, a.every)
    else:
        run(a.file, a.out)


if __name__ == "__main__":
    main()
