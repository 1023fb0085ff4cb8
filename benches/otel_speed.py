#!/usr/bin/env python3
"""Speed and memory of the OpenTelemetry export against ``export-html``, same sessions, one run.

    python benches/otel_speed.py --sizes 100,1024 [--repeat 2] [--compare DIR] [--steps otel:none,...]

For each size (MiB of a ``gen_session.py`` session, branchiness 0.05, made once under
``benches/.inputs``), each in a fresh process (``/usr/bin/time``-free: the child reports its own
wall time and ``ru_maxrss``):

* ``open``: ``Session.open`` alone (the index; the memory floor the export is held to);
* ``open:cli``: the same after importing what ``sessiontree otel`` imports (the CLI, the
  fleet's source resolution): the floor without the import difference;
* ``export-html``: ``sessiontree export-html`` (the CLI, as a user runs it);
* ``otel``: ``sessiontree otel FILE -o OUT`` (``--content none``, the default);
* ``otel full``: ``--content full``.

Prints the times (wall and CPU seconds), peak RSS, and the ratios otel / export-html (time)
and otel / open (peak RSS), each step's best of ``--repeat`` rounds (the steps interleaved in each round). The index
cache is off (``SESSIONTREE_INDEX_CACHE=off``): every run indexes the file.

``--compare DIR``: a second build (a folder holding a ``sessiontree`` package, e.g. a copy of
another checkout's ``python/sessiontree`` with its built ``_core``) runs the otel steps too, in
the same rounds (``base otel:none``, ...), first on ``PYTHONPATH``; its ratios are to this build's
``open`` and ``export-html``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from inputs import session_file  # noqa: E402

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
what, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
if what.startswith("open"):
    from sessiontree import Session
    if what == "open:cli":  # the modules the otel command imports, so the two differ by the export only
        import sessiontree.cli, sessiontree.otel, sessiontree.fleet._rows, sessiontree.fleet._sources  # noqa: F401
    s = Session.open(src); n = len(s); s.close()
else:
    from sessiontree.cli import main
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        if what == "html":
            rc = main(["export-html", src, "-o", out])
        else:
            rc = main(["otel", src, "-o", out, "--content", what.split(":")[1]])
    assert rc == 0, rc
dt = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"secs": dt, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
"""


def run(what: str, src: Path, out: Path, pythonpath: str | None = None) -> dict:
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE="off")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    p = subprocess.run([sys.executable, "-c", CHILD, what, str(src), str(out)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--compare", help="a folder with another build's sessiontree package, run interleaved")
    ap.add_argument("--steps", default="open,open:cli,html,otel:none,otel:full")
    args = ap.parse_args()
    steps = args.steps.split(",")
    if args.compare:
        steps += [f"base {w}" for w in steps if w.startswith("otel")]
    print(f"load average at the start: {os.getloadavg()[0]:.1f}; nice {os.nice(0)}")
    for mb in [float(x) for x in args.sizes.split(",")]:
        src = session_file(mb)
        size = src.stat().st_size
        with tempfile.TemporaryDirectory() as tmp:
            res: dict[str, dict] = {}
            for _ in range(args.repeat):
                for what in steps:
                    base = what.startswith("base ")
                    step = what.removeprefix("base ")
                    out = Path(tmp) / ("o.html" if step == "html" else "o.jsonl")
                    r = run(step, src, out, args.compare if base else None)
                    r["out_mb"] = out.stat().st_size / 2**20 if not step.startswith("open") else 0
                    best = res.get(what)
                    # the best of the rounds: the least time, the least peak RSS
                    res[what] = r if best is None else {k: min(v, best[k]) for k, v in r.items()}
            h = res["html"]["secs"]
            print(f"{mb:g} MiB ({size / 2**20:.0f} MiB file), load average {os.getloadavg()[0]:.1f}:")
            for what, r in res.items():
                print(
                    f"  {what:15s} {r['secs']:7.2f} s  CPU {r['cpu']:7.2f} s  peak RSS {r['rss_mb']:7.0f} MB  out {r['out_mb']:7.1f} MiB"
                    f"  time/export-html {r['secs'] / h:5.2f}  CPU/export-html {r['cpu'] / res['html']['cpu']:5.2f}  RSS/open {r['rss_mb'] / res['open']['rss_mb']:5.2f}"
                    f"  RSS/open:cli {r['rss_mb'] / res['open:cli']['rss_mb']:5.2f}"
                )

    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
